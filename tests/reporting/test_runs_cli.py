"""``facterlab runs list`` and ``facterlab runs compare`` on two tiny fake-model runs in a temporary results folder."""

from __future__ import annotations

import json
import re
import shutil

import pytest

from facterlab.cli import main
from facterlab.reporting import experiments as ex
from facterlab.reporting.runs import COMPACT_METRICS


@pytest.fixture(scope="module")
def two_runs(tmp_path_factory):
    results = tmp_path_factory.mktemp("results")
    runs = [
        ex.run(
            ex.run_config(dataset="synthetic", model="fake", n_rows=60, passes=p, cfr_rows=8, seed=s),
            progress=False,
            out_dir=results,
        )
        for s, p in ((0, 1), (1, 2))
    ]
    return results, runs


def _cli(capsys, *argv) -> tuple:
    rc = main(list(argv))
    out = capsys.readouterr()
    return rc, out.out, out.err


def test_runs_list_prints_one_line_per_run(two_runs, capsys):
    results, (a, b) = two_runs
    rc, out, _ = _cli(capsys, "runs", "list", "--results", str(results))
    assert rc == 0
    lines = out.splitlines()
    assert lines[0].split() == [
        "run_id",
        "started",
        "dataset",
        "model",
        "sim",
        "protocol",
        "n",
        "seed",
        "code",
        "notebooks",
        "status",
    ]
    for res, seed in ((a, 0), (b, 1)):
        (line,) = [ln for ln in lines if ln.startswith(res.run_id)]
        cols = line.split()
        meta = res.record.meta
        assert cols[1] == meta.started_at and re.match(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\+00:00$", cols[1])
        assert cols[2:8] == [
            "synthetic",
            "fake",
            "-",  # not the simulated recommender: no simulator settings
            "open",
            f"{res.record.metrics.n_calib}/{res.record.metrics.n_test}",
            str(seed),
        ]
        assert " ".join(cols[8:-2]) == meta.code_version and cols[-2:] == ["-", "ok"]
    assert lines[-1] == f"2 run(s) under {results / 'runs'}"


def test_runs_list_shows_old_and_broken_folders(two_runs, capsys, tmp_path):
    results, (a, b) = two_runs
    copy = tmp_path / "results"
    shutil.copytree(results, copy)
    (copy / "runs" / a.run_id / "run.json").unlink()  # a run made before run.json existed
    (copy / "runs" / b.run_id / "rows_fair.parquet").unlink()  # an interrupted folder
    rc, out, _ = _cli(capsys, "runs", "list", "--results", str(copy))
    assert rc == 0
    (old,) = [ln for ln in out.splitlines() if ln.startswith(a.run_id)]
    assert "n/a (before run.json)" in old and old.endswith("ok")
    (broken,) = [ln for ln in out.splitlines() if ln.startswith(b.run_id)]
    assert "lacks rows_fair.parquet" in broken
    rc, out, _ = _cli(capsys, "runs", "list", "--results", str(tmp_path / "empty"))
    assert rc == 0 and out.startswith("no runs under")


def test_runs_compare_shows_config_and_metric_differences(two_runs, capsys):
    results, (a, b) = two_runs
    rc, out, _ = _cli(capsys, "runs", "compare", a.run_id[:8], b.run_id[:8], "--results", str(results))
    assert rc == 0, out
    sections = dict(re.findall(r"== (.+?)\n(.*?)(?=\n== |\Z)", out, flags=re.S))
    assert set(sections) >= {
        "run (fields that differ)",
        "config (settings that differ)",
        "metrics: facter (headline values that differ)",
    }

    def row(section, key):
        (ln,) = [ln for ln in sections[section].splitlines() if ln.split()[:1] == [key]]
        return ln.split()

    # the default is compact: run fields that differ, headline metrics only
    shown = {ln.split()[0] for ln in sections["metrics: facter (headline values that differ)"].splitlines()[2:]}
    assert shown and shown <= set(COMPACT_METRICS)
    assert "\ncode " not in sections["run (fields that differ)"]  # the same code made both runs
    assert len(out.splitlines()) < 60
    rc, out, _ = _cli(capsys, "runs", "compare", a.run_id[:8], b.run_id[:8], "--results", str(results), "--full")
    sections = dict(re.findall(r"== (.+?)\n(.*?)(?=\n== |\Z)", out, flags=re.S))
    assert row("run", "run_id")[1:3] == [a.run_id, b.run_id]
    assert row("run", "started")[1:3] == [a.record.meta.started_at, b.record.meta.started_at]
    assert row("config (settings that differ)", "seed")[1:3] == ["0", "1"]
    assert row("config (settings that differ)", "facter.passes")[1:3] == ["1", "2"]
    assert "model.llm" not in sections["config (settings that differ)"]  # equal settings are left out
    fa, fb = a.record.metrics.flat("facter"), b.record.metrics.flat("facter")
    diff = [k for k in fa if k in fb and fa[k] != fb[k] and isinstance(fa[k], float) and isinstance(fb[k], float)]
    assert diff, "two seeds give different metrics"
    for key in diff:
        cols = row("metrics: facter (values that differ)", key)
        assert cols[1:4] == [f"{fa[key]:.4g}", f"{fb[key]:.4g}", f"{fb[key] - fa[key]:+.4g}"]
    shown = {ln.split()[0] for ln in sections["metrics: facter (values that differ)"].splitlines()[2:]}
    assert shown and not {k for k in fa if fa[k] == fb.get(k)} & shown  # equal metrics are left out
    rc, out, _ = _cli(capsys, "runs", "compare", a.run_id, a.run_id, "--results", str(results), "--all")
    assert rc == 0 and "ndcg@10_multi" in out and "(no differences)" not in out.split("== config")[1].split("==")[0]


def test_runs_compare_bad_ids_are_clear_errors(two_runs, capsys):
    results, (a, _b) = two_runs
    rc, _, err = _cli(capsys, "runs", "compare", "zzz", a.run_id, "--results", str(results))
    assert rc == 1 and "no run id starts with 'zzz'" in err
    rc, _, err = _cli(capsys, "runs", "compare", "", a.run_id, "--results", str(results))
    assert rc == 1 and "is ambiguous" in err


def test_runs_compare_reports_a_malformed_record(two_runs, capsys, tmp_path):
    results, (a, b) = two_runs
    copy = tmp_path / "results"
    shutil.copytree(results, copy)
    p = copy / "runs" / a.run_id / "metrics.json"
    m = json.loads(p.read_text())
    del m["protocol"]
    p.write_text(json.dumps(m))
    rc, _, err = _cli(capsys, "runs", "compare", a.run_id, b.run_id, "--results", str(copy))
    assert rc == 1 and "metrics.json: key 'protocol' missing" in err


def test_runs_list_filters_and_shows_the_simulator_settings(two_runs, capsys, tmp_path):
    results, (a, b) = two_runs
    copy = tmp_path / "results"
    shutil.copytree(results, copy)
    # a notebook that used run a (its metrics.json lists the run ids, as every notebook's does)
    (copy / "06_fig1_violations_by_pass").mkdir()
    (copy / "06_fig1_violations_by_pass" / "metrics.json").write_text(json.dumps({"run_ids": [a.run_id]}))
    # a simulated run with a non-default bias: its sim column says so
    sim_cfg = json.loads((copy / "runs" / b.run_id / "config.json").read_text())
    sim_cfg["config"]["sim"] = {"beta": 2.0, "rho": 1.0, "seed": 0}
    (copy / "runs" / b.run_id / "config.json").write_text(json.dumps(sim_cfg))
    rc, out, _ = _cli(capsys, "runs", "list", "--results", str(copy))
    (la,) = [ln for ln in out.splitlines() if ln.startswith(a.run_id)]
    (lb,) = [ln for ln in out.splitlines() if ln.startswith(b.run_id)]
    assert la.split()[-2] == "06" and lb.split()[4] == "beta=2"
    rc, out, _ = _cli(capsys, "runs", "list", "--results", str(copy), "--notebook", "fig1")
    assert rc == 0 and a.run_id in out and b.run_id not in out and "matching notebooks ~ 'fig1'" in out
    rc, out, _ = _cli(capsys, "runs", "list", "--results", str(copy), "--model", "fake", "--dataset", "synth")
    assert a.run_id in out and b.run_id in out
    rc, out, _ = _cli(capsys, "runs", "list", "--results", str(copy), "--model", "smollm")
    assert rc == 0 and out.startswith("no runs under") and "model ~ 'smollm'" in out
