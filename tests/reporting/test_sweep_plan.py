"""Issue 44, case 5: large sweeps plan cheaply with progress lines, need --yes above a documented size,
and a dry run writes nothing."""

from __future__ import annotations

import logging

import pytest

from facterlab.reporting import sweep
from facterlab.reporting.experiments import expected_fingerprints

BASE = {"model__llm": "simulated", "data__dataset": "synthetic", "data__n_rows": 200}


@pytest.mark.slow  # two simulated models fitted twice: 15.8 s at load 8
def test_fingerprints_are_computed_once_per_model_and_the_run_ids_are_unchanged(monkeypatch, caplog):
    cfgs = sweep.expand_grid({"facter__passes": [1, 2, 3], "seed": [0, 1]}, BASE)
    calls: list = []

    def counted(cfg, data_dir=None, inter=None):
        calls.append(cfg)
        return expected_fingerprints(cfg, data_dir, inter)

    monkeypatch.setattr(sweep, "expected_fingerprints", counted)
    monkeypatch.setattr(sweep, "PLAN_PROGRESS_S", 0.0)
    with caplog.at_level(logging.INFO, logger="facterlab.reporting.sweep"):
        planned = sweep.plan_sweep(cfgs)
    assert len(calls) == 2  # one simulated model per seed, not one per config
    from facterlab.data.protocol import load_or_build_interactions
    from facterlab.facter.pipeline import run_id_for

    for p in (planned[0], planned[-1]):  # each run id is the one a config planned alone gets
        inter = load_or_build_interactions(None, p.cfg.data)
        assert p.run_id == run_id_for(p.cfg, inter.content_hash, expected_fingerprints(p.cfg, None, inter))
    assert len({p.run_id for p in planned}) == 6
    assert any("planned 1 of 6 configs" in r.getMessage() for r in caplog.records)


def test_a_sweep_over_the_threshold_needs_yes_before_any_work(tmp_path, monkeypatch, capsys):
    from facterlab.cli import main

    monkeypatch.setenv("FACTERLAB_RESULTS", str(tmp_path / "results"))
    monkeypatch.setenv("FACTERLAB_CACHE", str(tmp_path / "cache"))
    monkeypatch.setattr(sweep, "CONFIRM_ABOVE", 3)
    assert main(["sweep", "--set", "model__llm=fake", "--grid", "seed=0,1,2,3"]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert err[-1] == (
        "facterlab sweep: error: this sweep has 4 configs, over the 3 that start unasked: add --yes to start "
        "them (--dry-run shows the plan and writes nothing)"
    )
    assert not (tmp_path / "results").exists() and not (tmp_path / "cache").exists()


def test_a_dry_run_writes_nothing(tmp_path, monkeypatch, capsys):
    from facterlab.cli import main

    monkeypatch.setenv("FACTERLAB_RESULTS", str(tmp_path / "results"))
    monkeypatch.setenv("FACTERLAB_CACHE", str(tmp_path / "cache"))
    args = ["sweep", "--set", "model__llm=fake", "--set", "data__dataset=synthetic", "--set", "data__n_rows=200"]
    assert main([*args, "--grid", "seed=0,1", "--dry-run"]) == 0
    assert "2 configs, 2 runs, 2 to run" in capsys.readouterr().out
    assert not (tmp_path / "results").exists() and not (tmp_path / "cache").exists()
    assert sweep.os.environ["FACTERLAB_CACHE"] == str(tmp_path / "cache")  # restored
