"""The `facterlab reproduce` runner: parameter filtering, ordering, failure reporting, timings."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from facterlab.reporting import reproduce as rp

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(Path(__file__).resolve().parent))
from nbgen import code, params, write_notebook  # noqa: E402


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
    """--set keeps the text; the declared type of each notebook coerces it (tests/test_params.py)."""
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
    # the report run (default profile, no --set) and --report mark the kernels; --no-report does not
    assert main(["reproduce", "--profile", "default", "--only", "10*"]) == 0
    assert (tmp_path / "out_report.txt").read_text() == "1"
    assert main(["reproduce", "--profile", "default", "--only", "10*", "--no-report"]) == 0
    assert (tmp_path / "out_report.txt").read_text() == "unset"
    assert main(["reproduce", "--profile", "smoke", "--only", "10*", "--report"]) == 0
    assert (tmp_path / "out_report.txt").read_text() == "1"
