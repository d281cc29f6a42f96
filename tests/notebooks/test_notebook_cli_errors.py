"""Issue 23, item 5: a notebook's parameter error in one line on papermill's command line.

A tiny notebook whose second cell is the parameter helper (``facterlab.notebook.parameters``) runs
through the real ``papermill`` command (a subprocess, a real kernel):

- ``--engine facterlab`` (the entry point facterlab registers): exit status 1, the message as the
  last line of stderr, no Python traceback, the executed copy written with papermill's error markers;
- plain ``papermill`` (no engine): papermill's own traceback stays (no installed package can remove
  it), and the message is still the last line: measured here, not assumed;
- any other error keeps papermill's usual report under the engine (the engine shortens only
  ParameterError);
- ``facterlab reproduce`` reports an error raised inside a kernel in one line (its ``--set`` values
  are checked before any kernel starts, tests/reporting/test_reporting_reproduce.py).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from importlib.metadata import entry_points
from pathlib import Path

import pytest
from nbgen import code, params, write_notebook

PAPERMILL = Path(sys.executable).with_name("papermill")


def _notebook(path: Path, extra: str = "") -> Path:
    cells = [
        params('PROFILE = "default"\nSMOKE = False\nN_USERS = 5  # users\nN = 3'),
        code("from facterlab import notebook\nP = notebook.parameters(globals())"),
        code(extra or "print('ran', N_USERS)"),
    ]
    return write_notebook(path, cells)


def _papermill(nb: Path, out: Path, *args: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run(
        [str(PAPERMILL), str(nb), str(out), "--no-progress-bar", *args],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=cwd,
        env={**os.environ, "FACTERLAB_LOG": "off"},
    )


def test_the_engine_is_registered():
    names = {ep.name: ep.value for ep in entry_points(group="papermill.engine")}
    assert names.get("facterlab") == "facterlab.reporting.papermill_engine:FacterlabEngine", (
        "reinstall the package (pip install --no-deps -e .) so that papermill sees its engine",
        names,
    )


def test_engine_prints_a_parameter_error_in_one_line_and_plain_papermill_does_not(tmp_path):
    nb = _notebook(tmp_path / "tiny.ipynb")
    one = _papermill(nb, tmp_path / "one.ipynb", "-p", "N_USERS", "0", "--engine", "facterlab", cwd=tmp_path)
    plain = _papermill(nb, tmp_path / "plain.ipynb", "-p", "N_USERS", "0", cwd=tmp_path)
    expect = "parameter N_USERS: 0 is outside its bound"

    assert one.returncode == 1, one.stderr
    last = one.stderr.rstrip().splitlines()[-1]
    assert last.startswith(f"Error: ParameterError: {expect}"), one.stderr
    assert last.endswith(f"(cell [3]; executed copy: {tmp_path / 'one.ipynb'})"), last  # [2]: papermill's cell
    assert "Traceback" not in one.stderr and "papermill/" not in one.stderr, one.stderr
    assert "over TCP without encryption" not in one.stderr  # the engine's kernel is on ipc
    # papermill's header (input, output, working directory, kernel) and the error line: nothing else
    assert len(one.stderr.rstrip().splitlines()) <= 5, one.stderr
    executed = json.loads((tmp_path / "one.ipynb").read_text())
    errors = [o for c in executed["cells"] for o in c.get("outputs", []) if o["output_type"] == "error"]
    assert [e["ename"] for e in errors] == ["ParameterError"]
    assert errors[0]["traceback"] == [f"ParameterError: {errors[0]['evalue']}"]  # one line in the notebook too
    tags = [t for c in executed["cells"] for t in c.get("metadata", {}).get("tags", [])]
    assert tags.count("papermill-error-cell-tag") == 2  # papermill's marker at the top and its anchor

    # plain papermill: same exit status, the message last, but papermill's traceback before it
    assert plain.returncode == 1
    plain_lines = plain.stderr.rstrip().splitlines()
    assert plain_lines[-1].startswith(f"ParameterError: {expect}"), plain.stderr
    assert "Traceback (most recent call last)" in plain.stderr
    assert len(plain_lines) > 15, plain.stderr  # what the engine removes (36 lines for notebook 15 by hand)


def test_engine_leaves_other_errors_to_papermill(tmp_path):
    nb = _notebook(tmp_path / "boom.ipynb", extra="raise RuntimeError('boom')")
    proc = _papermill(nb, tmp_path / "out.ipynb", "--engine", "facterlab", cwd=tmp_path)
    assert proc.returncode == 1
    assert "PapermillExecutionError" in proc.stderr and "RuntimeError: boom" in proc.stderr, proc.stderr


def test_engine_runs_a_good_notebook_like_papermill(tmp_path):
    nb = _notebook(tmp_path / "ok.ipynb")
    proc = _papermill(nb, tmp_path / "out.ipynb", "-p", "N_USERS", "7", "--engine", "facterlab", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    cells = json.loads((tmp_path / "out.ipynb").read_text())["cells"]
    text = "".join("".join(o.get("text", "")) for c in cells for o in c.get("outputs", []))
    assert "ran 7" in text


def test_api_callers_still_catch_papermills_error(tmp_path):
    """``papermill.execute_notebook(engine_name="facterlab")``: the one-line error is a
    PapermillExecutionError with the cell's ename/evalue (what facterlab reproduce reads)."""
    import papermill
    from papermill.exceptions import PapermillExecutionError

    nb = _notebook(tmp_path / "api.ipynb")
    with pytest.raises(PapermillExecutionError) as info:
        papermill.execute_notebook(
            str(nb), str(tmp_path / "out.ipynb"), parameters={"N_USERS": 0}, engine_name="facterlab", progress_bar=False
        )
    err = info.value
    assert type(err).__name__ == "NotebookParameterError"
    assert err.ename == "ParameterError" and err.evalue.startswith("parameter N_USERS: 0 is outside its bound")
    assert "\n" not in str(err) and str(err).startswith("ParameterError: parameter N_USERS")


def test_reproduce_reports_an_in_kernel_parameter_error_in_one_line(tmp_path):
    """An error the runner cannot see before the kernel runs (here a ParameterError raised by the
    notebook's own code) is one line in the log and in the run's error."""
    from facterlab.reporting.reproduce import run_notebooks

    nb_dir = tmp_path / "notebooks"
    _notebook(
        nb_dir / "01_tiny.ipynb",
        extra="from facterlab.params import ParameterError\nraise ParameterError('parameter N: too many for this data')",
    )
    lines: list = []
    runs = run_notebooks(
        profile="default",
        cwd=tmp_path,
        notebooks_dir=nb_dir,
        out=tmp_path / "build",
        timings_path=tmp_path / "t.json",
        log=lines.append,
        report=False,
        download=False,
    )
    assert runs[0].status == "failed"
    # cells: [1] parameters, [2] papermill's injected PROFILE/SMOKE, [3] the helper, [4] the raise
    assert runs[0].error == "cell [4]: ParameterError: parameter N: too many for this data"
    failed = [x for x in lines if "FAILED" in x]
    assert failed == ["[reproduce] FAILED 01_tiny.ipynb: cell [4]: ParameterError: parameter N: too many for this data"]
    assert not any("Traceback" in x for x in lines), lines
