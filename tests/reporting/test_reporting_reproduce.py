"""The `facterlab reproduce` runner: parameter filtering, ordering, failure reporting, timings."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from facterlab.reporting import reproduce as rp

REPO = Path(__file__).resolve().parents[2]
from nbgen import code, params, write_notebook


def test_filter_parameters_passes_only_declared():
    passed, skipped = rp.filter_parameters(
        {"PROFILE": "paper", "SMOKE": False, "MODELS": ["a"], "SEEDS": [0, 1]}, {"PROFILE", "SMOKE", "SEEDS", "OTHER"}
    )
    assert passed == {"PROFILE": "paper", "SMOKE": False, "SEEDS": [0, 1]}
    assert skipped == ["MODELS"]


def test_profiles():
    p = rp.profile_parameters("paper")
    assert p["PROFILE"] == "paper" and p["SMOKE"] is False
    assert p["MODELS"] == ["llama3-8b", "llama2-7b", "mistral-7b"] and p["SEEDS"] == [0, 1, 2]
    assert p["DATASET"] == "ml-1m" and p["PASSES"] == 3 and p["N_INTERACTIONS"] is None
    s = rp.profile_parameters("smoke", {"MODEL": "fake"})
    assert s["SMOKE"] is True and s["DATASET"] == "synthetic" and s["MODEL"] == "fake"
    assert rp.profile_parameters("default") == {"PROFILE": "default", "SMOKE": False}
    with pytest.raises(ValueError, match="unknown profile 'fast'"):
        rp.profile_parameters("fast")


def test_numeric_order_and_only(tmp_path):
    for name in ("10_b.ipynb", "2_a.ipynb", "01_c.ipynb", "x.ipynb"):
        (tmp_path / name).write_text("{}")
    assert [p.name for p in rp.discover_notebooks(tmp_path)] == ["01_c.ipynb", "2_a.ipynb", "10_b.ipynb", "x.ipynb"]
    assert [p.name for p in rp.discover_notebooks(tmp_path, "1*")] == ["10_b.ipynb"]
    assert [p.name for p in rp.discover_notebooks(tmp_path, "_a")] == ["2_a.ipynb"]
    with pytest.raises(FileNotFoundError, match="no notebooks directory"):
        rp.discover_notebooks(tmp_path / "missing")


def test_set_parsing():
    """--set keeps the text; the declared type of each notebook coerces it (tests/base/test_params.py)."""
    assert rp._parse_set(["A=1", "B=['x']", "C=text"]) == {"A": "1", "B": "['x']", "C": "text"}
    with pytest.raises(ValueError, match="KEY=VALUE"):
        rp._parse_set(["A"])


def test_declared_parameters_of_every_repo_notebook():
    """Every UPPER_CASE name assigned in a notebook's parameters cell is seen by papermill (a comment
    with '=' or a quote can hide a parameter from papermill.inspect_notebook)."""
    import re

    import nbformat

    for nb in sorted((REPO / "notebooks").glob("*.ipynb")):
        cell = next(c for c in nbformat.read(str(nb), 4).cells if c.cell_type == "code")
        assert "parameters" in cell.metadata.get("tags", []), nb.name
        names = set(re.findall(r"^([A-Z][A-Z0-9_]*)\s*=", cell.source, flags=re.M))
        assert {"PROFILE", "SMOKE"} <= names, nb.name
        assert rp.declared_parameters(nb) == names, nb.name


@pytest.mark.slow
def test_runner_runs_all_reports_failures_and_times(tmp_path, capsys, monkeypatch):
    nbdir = tmp_path / "notebooks"
    write_notebook(
        nbdir / "01_ok.ipynb",
        [
            params('PROFILE = "default"\nSMOKE = False\nX = 1'),
            code(
                'import json, pathlib\npathlib.Path("out_ok.json").write_text(json.dumps({"p": PROFILE, "s": SMOKE, "x": X}))'
            ),
        ],
    )
    write_notebook(
        nbdir / "02_fail.ipynb",
        [
            params('PROFILE = "default"\nSMOKE = False'),
            code('raise RuntimeError("boom in cell")'),
        ],
    )
    write_notebook(
        nbdir / "10_after.ipynb",
        [
            params('PROFILE = "default"\nSMOKE = False'),
            code(
                'import os\nopen("out_after.txt", "w").write(PROFILE)\n'
                'open("out_report.txt", "w").write(os.environ.get("FACTERLAB_REPORT", "unset"))'
            ),
        ],
    )
    monkeypatch.chdir(tmp_path)
    # an undeclared --set name is an error naming the close match, before any notebook runs
    with pytest.raises(rp.ParameterError, match=r"unknown parameter x \(did you mean X\?\)"):
        rp.run_notebooks("smoke", cwd=tmp_path, extra={"x": 5}, log=lambda *a: None)
    assert not (tmp_path / "out_ok.json").exists()
    runs = rp.run_notebooks("smoke", cwd=tmp_path, extra={"X": "5"}, log=lambda *a: None)
    assert [r.notebook for r in runs] == ["01_ok", "02_fail", "10_after"]
    assert [r.status for r in runs] == ["ok", "failed", "ok"]  # the failure does not stop the rest
    # the text "5" arrives as the declared int; the profile's DATASET is not passed (the notebook's helper
    # applies it), so nothing is skipped
    assert json.loads((tmp_path / "out_ok.json").read_text()) == {"p": "smoke", "s": True, "x": 5}
    assert runs[0].skipped_parameters == [] and runs[1].parameters == {"PROFILE": "smoke", "SMOKE": True}
    assert "RuntimeError" in runs[1].error and "boom in cell" in runs[1].error
    assert (tmp_path / "out_after.txt").read_text() == "smoke"
    assert (tmp_path / "out_report.txt").read_text() == "unset"  # not the report run: figures beside results
    assert (tmp_path / "build" / "notebooks" / "02_fail.ipynb").is_file()
    from facterlab.config import results_dir

    timings = json.loads((results_dir() / "reproduce_timings.json").read_text())
    assert timings["profile"] == "smoke" and [n["status"] for n in timings["notebooks"]] == ["ok", "failed", "ok"]
    assert timings["total_seconds"] >= sum(n["seconds"] for n in timings["notebooks"]) - 1e-6
    table = rp.timings_table(runs, "smoke")
    assert "02_fail" in table and "total (profile smoke)" in table

    # the CLI: non-zero exit naming the notebook and the cell error
    from facterlab.cli import main

    rc = main(["reproduce", "--profile", "smoke", "--only", "02*"])
    err = capsys.readouterr().err
    assert rc == 1
    assert "02_fail" in err and "boom in cell" in err
    # a typo in --set: exit 2 naming the close match, nothing run
    rc = main(["reproduce", "--profile", "smoke", "--only", "01*", "--set", "x=3"])
    err = capsys.readouterr().err
    assert rc == 2 and "unknown parameter x (did you mean X?)" in err
    rc = main(["reproduce", "--profile", "smoke", "--only", "01*", "--set", "X=abc"])
    err = capsys.readouterr().err
    assert rc == 2 and "parameter X: expected int, got 'abc'" in err
    # the report run (default profile, no --set, on the report's dataset) and --report mark the kernels;
    # --no-report does not, nor does the default profile on another dataset
    data = tmp_path / "data"
    for f in ("u.data", "u.user", "u.item"):  # resolve_dataset only looks for the files
        (data / "ml-100k").mkdir(parents=True, exist_ok=True)
        (data / "ml-100k" / f).write_text("")
    monkeypatch.setenv("FACTERLAB_DATA", str(data))
    # the report is made from a commit (issue 42): with uncommitted code the implicit report run is not one,
    # and an explicit --report is refused before anything runs
    monkeypatch.setattr(rp, "uncommitted_reason", lambda root: "2 tracked file(s) differ from the last commit (a, b)")
    (tmp_path / "out_report.txt").write_text("untouched")
    assert main(["reproduce", "--profile", "smoke", "--only", "10*", "--report"]) == 2
    err = capsys.readouterr().err
    assert "--report writes the committed figures/, which must be made from a commit: 2 tracked file(s)" in err
    assert (tmp_path / "out_report.txt").read_text() == "untouched"  # no notebook ran
    assert main(["reproduce", "--profile", "default", "--only", "10*"]) == 0
    assert (tmp_path / "out_report.txt").read_text() == "unset"
    out = capsys.readouterr().out
    assert "not the report run (uncommitted code: 2 tracked file(s) differ from the last commit (a, b))" in out
    monkeypatch.setattr(rp, "uncommitted_reason", lambda root: None)  # a clean tree
    assert main(["reproduce", "--profile", "default", "--only", "10*"]) == 0
    assert (tmp_path / "out_report.txt").read_text() == "1"
    out = capsys.readouterr().out
    assert "dataset: MovieLens-100K (ml-100k), found in" in out and "report run: figures and tables ->" in out
    monkeypatch.setenv("FACTERLAB_DATA", str(tmp_path / "empty"))
    assert main(["reproduce", "--profile", "default", "--only", "10*", "--no-download"]) == 0
    assert (tmp_path / "out_report.txt").read_text() == "unset"
    out = capsys.readouterr().out
    assert "dataset: SYNTHETIC" in out and "not the report run (dataset synthetic, not the report's ml-100k)" in out
    monkeypatch.setenv("FACTERLAB_DATA", str(data))
    assert main(["reproduce", "--profile", "default", "--only", "10*", "--no-report"]) == 0
    assert (tmp_path / "out_report.txt").read_text() == "unset"
    assert main(["reproduce", "--profile", "smoke", "--only", "10*", "--report"]) == 0
    assert (tmp_path / "out_report.txt").read_text() == "1"


def _fake_ml100k(directory: Path) -> None:
    (directory / "ml-100k").mkdir(parents=True, exist_ok=True)
    for f in ("u.data", "u.user", "u.item"):
        (directory / "ml-100k" / f).write_text("")


def test_choose_dataset_found_explicit_download_and_fallback(tmp_path, monkeypatch):
    """The default profile without data fetches ML-100K where the server answers, else falls back to
    the synthetic set with the reason; explicit names (smoke, --set DATASET) are left alone."""
    from facterlab.data import download as dl

    monkeypatch.setenv("FACTERLAB_DATA", str(tmp_path / "d"))
    lines: list = []
    called: list = []
    monkeypatch.setattr(dl, "unreachable", lambda url, timeout=5.0: "no route to host")
    monkeypatch.setattr(dl, "ensure_dataset", lambda *a, **k: called.append(a))
    c = rp.choose_dataset("default", log=lines.append)
    assert (c.dataset, c.how) == ("synthetic", "fallback") and called == []  # unreachable: no download tried
    assert "could not be fetched (no route to host)" in c.describe() and "facterlab data download" in c.describe()
    assert any("trying to fetch MovieLens-100K" in line for line in lines)
    c = rp.choose_dataset("default", download=False, log=lines.append)
    assert c.how == "fallback" and "download off" in c.note
    assert rp.choose_dataset("smoke").how == "explicit" and rp.choose_dataset("smoke").dataset == "synthetic"
    assert rp.choose_dataset("default", {"DATASET": "ml-1m"}).dataset == "ml-1m"

    # reachable: ensure_dataset(download=True) is called; the fetched files make auto resolve to ml-100k
    monkeypatch.setattr(dl, "unreachable", lambda url, timeout=5.0: None)
    monkeypatch.setattr(dl, "ensure_dataset", lambda name, download=False: _fake_ml100k(tmp_path / "d"))
    c = rp.choose_dataset("default", log=lines.append)
    assert (c.dataset, c.how) == ("ml-100k", "downloaded") and "checksum verified" in c.describe()
    assert rp.choose_dataset("default").how == "found"  # the next run finds it

    # a download that fails (checksum, server error) falls back with its one-line reason
    monkeypatch.setenv("FACTERLAB_DATA", str(tmp_path / "e"))

    def bad(name, download=False):
        raise dl.DownloadError("cannot download x (timed out); on a machine with network ...")

    monkeypatch.setattr(dl, "ensure_dataset", bad)
    c = rp.choose_dataset("default", log=lines.append)
    assert c.dataset == "synthetic" and "(cannot download x (timed out)" in c.note


def test_unreachable_fails_fast_offline():
    """A closed local port answers at once: the check does not wait for its timeout."""
    import time

    from facterlab.data.download import unreachable

    t0 = time.monotonic()
    assert unreachable("http://127.0.0.1:9/ml-100k.zip", timeout=5) is not None
    assert time.monotonic() - t0 < 3


@pytest.mark.slow
def test_default_reproduce_without_data_leaves_git_status_clean(tmp_path):
    """A fresh clone's `facterlab reproduce` (default profile) with no data and no network: the synthetic
    stand-in, figures under results/figures/, and `git status` clean (the committed figures/ untouched).
    Notebook 01 only (it draws figures from the dataset): the full run is the lead's."""
    import os
    import shutil
    import subprocess

    if shutil.which("git") is None or not (REPO / ".git").exists():
        pytest.skip("needs git and a git clone of the project")
    clone = tmp_path / "clone"
    subprocess.run(["git", "clone", "--quiet", str(REPO), str(clone)], check=True)
    env = {k: v for k, v in os.environ.items() if not k.startswith("FACTERLAB_") or k == "FACTERLAB_CACHE"}
    env["FACTERLAB_DATA"] = str(tmp_path / "no-data")
    exe = Path(sys.executable).with_name("facterlab")
    proc = subprocess.run(
        [str(exe), "reproduce", "--only", "01*", "--no-download"],
        cwd=clone,
        env=env,
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert "dataset: SYNTHETIC" in proc.stdout
    assert f"figures and tables -> {clone / 'results' / 'figures'}; figures/ is left as it is" in proc.stdout
    assert sorted(p.name for p in (clone / "results" / "figures").rglob("data_*.png"))  # the figures went there
    status = subprocess.run(["git", "status", "--porcelain"], cwd=clone, capture_output=True, text=True, check=True)
    assert status.stdout == "", status.stdout
