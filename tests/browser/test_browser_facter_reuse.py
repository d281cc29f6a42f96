"""Acceptance test of issue 12: a FACTER notebook opened in JupyterLab after ``facterlab reproduce``
reuses the saved run and writes nothing into ``figures/`` or into the tracked notebook.

In a temporary copy of the project (``notebooks/``, ``pyproject.toml``, ``jupytext.toml`` and the
committed ``figures/``; no ``FACTERLAB_*`` path variables, so the project root is found from
``pyproject.toml`` as for a user):

1. ``facterlab reproduce --profile smoke --only 06 --set MODEL=fake`` from the project root (its
   output must stream the kernel's log lines, prefixed with the notebook's name);
2. JupyterLab with its working directory in ``notebooks/`` (as a user starts it) opens notebook 06;
   the parameters cell is set, in the browser, to the values reproduce passed (read from the executed
   copy's ``injected-parameters`` cell, not written here), and all cells run;
3. the notebook's output says ``reusing run <id>`` for a run folder that reproduce wrote, no run folder
   is added or rewritten, ``figures/`` is unchanged (hashes and mtimes), nothing is written into
   ``notebooks/`` and the tracked ``.ipynb`` and its ``.py`` pair are byte-identical.

Autosave is turned off in this JupyterLab (user setting), on purpose: a JupyterLab save writes the
notebook as shown, outputs included. Nothing strips outputs on save; the project's nbstripout is a git
filter (``make install``), which keeps outputs out of commits, not out of the working-tree file. So
what this test can honestly assert is that nothing *else* writes the tracked files: not reproduce
(which writes its executed copy to ``build/notebooks/``), not the kernel, not jupytext's pairing
when the notebook is opened. Editing the parameters cell leaves the notebook unsaved (dirty), which is
what a reader who does not press save gets.
"""

from __future__ import annotations

import ast
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from jupyterlab_helpers import (
    HOOK_STATUS_MESSAGES,
    REPO,
    SET_CELL_SOURCE,
    chromium_page,
    jupyterlab,
    notebook_outputs,
    open_notebook,
    output_text,
    poll_kernel_status,
    require_browser,
    run_all_and_wait,
    start_run_all,
    wait_kernel_settled,
)

NOTEBOOK = "06_fig1_violations_by_pass"
AUTOSAVE_PLUGIN = "@jupyterlab/docmanager-extension:plugin"
PATH_VARS = ("FACTERLAB_ROOT", "FACTERLAB_RESULTS", "FACTERLAB_CACHE", "FACTERLAB_FIGURES", "FACTERLAB_REPORT")


def _tree_state(folder: Path) -> dict:
    """``{relative path: (sha256, mtime_ns)}`` of every file under ``folder``."""
    if not folder.exists():
        return {}
    return {
        str(p.relative_to(folder)): (hashlib.sha256(p.read_bytes()).hexdigest(), p.stat().st_mtime_ns)
        for p in sorted(folder.rglob("*"))
        if p.is_file()
    }


def _injected_parameters(executed: Path) -> dict:
    """The parameters papermill injected into the executed notebook (its ``injected-parameters`` cell)."""
    nb = json.loads(executed.read_text())
    cell = next(c for c in nb["cells"] if "injected-parameters" in c.get("metadata", {}).get("tags", []))
    out = {}
    for node in ast.parse("".join(cell["source"])).body:
        if isinstance(node, ast.Assign) and isinstance(node.targets[0], ast.Name):
            out[node.targets[0].id] = ast.literal_eval(node.value)
    return out


def _with_values(source: str, values: dict) -> str:
    """The parameters cell ``source`` with each ``NAME = ...`` line of ``values`` set to that value."""
    lines = source.splitlines()
    for name, value in values.items():
        hits = [i for i, line in enumerate(lines) if re.match(rf"{name}\s*=", line)]
        assert len(hits) == 1, f"{name} is not declared once in the parameters cell"
        lines[hits[0]] = f"{name} = {value!r}"
    return "\n".join(lines)


@pytest.mark.browser
def test_facter_notebook_reuses_the_reproduce_run_and_writes_no_tracked_file(tmp_path, monkeypatch):
    sync_api = require_browser()
    root = tmp_path / "project"
    shutil.copytree(REPO / "notebooks", root / "notebooks", ignore=shutil.ignore_patterns(".ipynb_checkpoints"))
    for name in ("pyproject.toml", "jupytext.toml"):
        shutil.copy2(REPO / name, root / name)
    if (REPO / "figures").is_dir():
        shutil.copytree(REPO / "figures", root / "figures")
    for var in PATH_VARS:  # conftest points them at temp folders; here the root must be found
        monkeypatch.delenv(var, raising=False)
    env = {k: v for k, v in os.environ.items() if k not in PATH_VARS}
    env["HOME"] = str(tmp_path / "home_reproduce")  # no user-wide cache or config
    env["MPLBACKEND"] = "Agg"
    figures0 = _tree_state(root / "figures")
    tracked = {
        p: p.read_bytes() for p in (root / "notebooks" / f"{NOTEBOOK}.ipynb", root / "notebooks" / f"{NOTEBOOK}.py")
    }

    # 1. the reproduce run, from the project root
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "facterlab.cli",
            "reproduce",
            "--profile",
            "smoke",
            "--only",
            "06",
            "--set",
            "MODEL=fake",
        ],
        cwd=root,
        env=env,
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    streamed = [line for line in proc.stdout.splitlines() if line.startswith(f"[{NOTEBOOK}] ")]
    assert any("calibration" in line for line in streamed), proc.stdout[-3000:]  # the kernel's log lines
    runs_dir = root / "results" / "runs"
    runs0 = _tree_state(runs_dir)
    run_ids = {Path(p).parts[0] for p in runs0}
    assert run_ids, f"reproduce wrote no run folder under {runs_dir}"
    assert _tree_state(root / "figures") == figures0, "the smoke reproduce run wrote into figures/"
    passed = _injected_parameters(root / "build" / "notebooks" / f"{NOTEBOOK}.ipynb")
    assert passed.get("MODEL") == "fake" and passed.get("PROFILE") == "smoke"
    notebooks0 = _tree_state(root / "notebooks")

    # 2. JupyterLab started in notebooks/, autosave off; the parameters cell set to what reproduce passed
    lab_env = {**env, "HOME": str(tmp_path / "home_lab")}
    settings = {AUTOSAVE_PLUGIN: {"autosave": False}}
    with jupyterlab(tmp_path, root / "notebooks", user_settings=settings, env=lab_env) as lab:
        assert lab.api(f"lab/api/settings/{AUTOSAVE_PLUGIN}")["settings"].get("autosave") is False
        with chromium_page(sync_api) as page:
            open_notebook(page, lab, f"{NOTEBOOK}.ipynb")
            cells = notebook_outputs(page)
            index = next(i for i, c in enumerate(cells) if c["type"] == "code")  # the parameters cell
            source = _with_values(cells[index]["source"], passed)
            assert page.evaluate(SET_CELL_SOURCE, [index, source]) == source
            run_all_and_wait(page)
            cells = notebook_outputs(page)
    text = "\n".join(output_text(c["outputs"]) for c in cells)
    errors = [o for c in cells for o in c["outputs"] if o.get("output_type") == "error"]
    assert not errors, output_text(errors)

    # 3. reused, nothing written where it must not be
    reused = set(re.findall(r"reusing run (\S+)", text))
    assert reused, "the notebook did not say 'reusing run': it recomputed\n" + text[-3000:]
    assert reused <= run_ids, (reused, run_ids)
    assert _tree_state(runs_dir) == runs0, "run folders were added or rewritten"
    assert _tree_state(root / "figures") == figures0, "figures/ changed"
    for path, content in tracked.items():
        assert path.read_bytes() == content, f"{path.name} changed"
    # JupyterLab keeps a first checkpoint of a notebook it opens in .ipynb_checkpoints/ (ignored by git,
    # .gitignore); it must hold no outputs either. Nothing else may appear in notebooks/.
    after = _tree_state(root / "notebooks")
    checkpoints = {p for p in after if p.startswith(".ipynb_checkpoints/")}
    assert ".ipynb_checkpoints/" in (REPO / ".gitignore").read_text().split()
    for p in checkpoints:
        saved = json.loads((root / "notebooks" / p).read_text())
        assert not any(c.get("outputs") for c in saved["cells"]), f"{p} holds outputs"
    assert {p: v for p, v in after.items() if p not in checkpoints} == notebooks0, "files were written into notebooks/"


# the cell's own idle message came (HOOK_STATUS_MESSAGES records it)
CELL_IDLE = "() => window._facterlabStatus.some(m => m[1] === 'idle' && m[2] === 'execute_request')"
LONG_PHASE = """import logging, time
from facterlab.progress import Progress
with Progress("demo phase", total=24, log=logging.getLogger("facterlab.demo"), every=2) as p:
    for _ in range(24):
        time.sleep(0.5)
        p.update(1)
"""


@pytest.mark.browser
def test_status_bar_says_busy_and_progress_lines_come_during_a_long_phase(tmp_path):
    """Issue 23: JupyterLab's status bar read "Idle" in 251 of 256 polls while a cell with tqdm widget
    bars ran.  Cause (measured with this JupyterLab 4.6 and ipykernel 7): the first widget makes the
    widget manager send a ``create_subshell_request`` on the control channel; the kernel answers it
    during the cell and publishes busy/idle for it, and JupyterLab's status follows every status
    message whose parent type is not in its untracked list.  facterlab's bars are text: a 12 s phase
    with a bar and log lines every 2 s must read "Busy" while it runs, and show its lines as they come."""
    import nbformat

    sync_api = require_browser()
    root = tmp_path / "root"
    root.mkdir()
    nb = nbformat.v4.new_notebook()
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nb.cells = [nbformat.v4.new_code_cell(LONG_PHASE)]
    nbformat.write(nb, str(root / "long.ipynb"))
    env = {k: v for k, v in os.environ.items() if k not in PATH_VARS}
    with jupyterlab(tmp_path, root, env=env) as lab:
        with chromium_page(sync_api) as page:
            open_notebook(page, lab, "long.ipynb")
            wait_kernel_settled(page)  # the session's start-up messages are over
            page.evaluate(HOOK_STATUS_MESSAGES)
            start_run_all(page)
            polls = poll_kernel_status(page, until=CELL_IDLE)  # through the whole cell, however slow
            run_all_and_wait(page)
            messages = page.evaluate("() => window._facterlabStatus")
            cells = notebook_outputs(page)
    busy_at = next(t for t, state, parent in messages if state == "busy" and parent == "execute_request")
    idle_at = next(t for t, state, parent in messages if state == "idle" and parent == "execute_request")
    during = [(status, shown) for t, status, shown in polls if busy_at + 500 < t < idle_at]
    assert len(during) >= 10, (polls, messages)
    assert all(status == "busy" for status, _ in during), (during, messages)
    assert all(shown.lower() == "busy" for _, shown in during), during  # what the status bar prints
    outputs = cells[0]["outputs"]
    assert not any("application/vnd.jupyter.widget-view+json" in o.get("data", {}) for o in outputs)
    text = output_text(outputs)
    lines = [line for line in text.splitlines() if "demo: demo phase: " in line]
    assert len(lines) >= 3 and all("left" in line for line in lines[:-1]), text  # as it ran, with the time left
    assert "demo phase: 100%|" in text, text  # the text bar's final state
