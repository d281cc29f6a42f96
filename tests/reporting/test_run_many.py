"""``batch.run_many``: many runs in worker processes give the run folders of ``run`` one by one.

With the torch-free hash encoder every file but the timestamps of ``run.json`` and ``timings.json`` is
compared byte for byte; a second call reads every run back and starts nothing; a failed run is named.
"""

from __future__ import annotations

import filecmp

import pytest

from facterlab.reporting import batch, sweep
from facterlab.reporting import experiments as ex


def _configs(n_seeds: int = 2, n_rows: int = 300) -> dict:
    cfgs = {}
    for seed in range(n_seeds):
        for beta in (0.0, 2.0, 4.0):
            cfgs[("f", seed, beta)] = ex.run_config(
                dataset="synthetic",
                model="simulated",
                encoder="hash-encoder",
                seed=seed,
                n_rows=n_rows,
                passes=2,
                cfr_rows=20,
                sim__beta=beta,
            )
        for beta in (0.0, 2.0):
            cfgs[("t", seed, beta)] = ex.run_config(
                dataset="synthetic",
                model="simulated",
                encoder="hash-encoder",
                seed=seed,
                n_rows=n_rows,
                passes=2,
                cfr_rows=20,
                sim__beta=beta,
                facter__delta="twin",
                facter__threshold="null",
            )
    return cfgs


def _folders(monkeypatch, root):
    monkeypatch.setenv("FACTERLAB_RESULTS", str(root / "results"))
    monkeypatch.setenv("FACTERLAB_CACHE", str(root / "cache"))


@pytest.mark.integration
def test_run_many_in_workers_equals_run_one_by_one(tmp_path, monkeypatch):
    cfgs = _configs()
    _folders(monkeypatch, tmp_path / "serial")
    one_by_one = {key: ex.run(cfg, progress=False) for key, cfg in cfgs.items()}
    _folders(monkeypatch, tmp_path / "many")
    started = []
    real = batch.run_sweep
    monkeypatch.setattr(batch, "run_sweep", lambda wave, **kw: started.append(len(wave)) or real(wave, **kw))
    many = batch.run_many(cfgs, workers=2)
    assert started == [2, 8]  # a first run of each row sample (seed), then the rest, on the worker processes
    assert list(many) == list(cfgs)
    for key, res in many.items():
        a, b = one_by_one[key].out_dir, res.out_dir
        assert res.run_id == one_by_one[key].run_id
        names = sorted(p.name for p in a.iterdir())
        assert names == sorted(p.name for p in b.iterdir())
        for name in names:
            if name in ("run.json", "timings.json"):  # when and where it ran
                continue
            assert filecmp.cmp(a / name, b / name, shallow=False), (key, name)
    again = batch.run_many(cfgs, workers=2)  # every run is finished: read back, nothing started
    assert started == [2, 8]
    assert {k: r.run_id for k, r in again.items()} == {k: r.run_id for k, r in many.items()}


@pytest.mark.integration
def test_run_many_names_a_failed_run(tmp_path, monkeypatch):
    _folders(monkeypatch, tmp_path)
    cfgs = _configs(n_seeds=2, n_rows=120)

    def broken(task):
        if task.cfg.seed == 1:
            raise ValueError("no such thing")
        return sweep._run_task(task)

    monkeypatch.setattr(sweep, "run_task", broken)
    with pytest.raises(RuntimeError, match=r"runs failed: .*no such thing"):
        batch.run_many(cfgs, workers=2, executor="serial")


@pytest.mark.integration
def test_few_runs_go_one_by_one_here(tmp_path, monkeypatch):
    _folders(monkeypatch, tmp_path)
    cfgs = dict(list(_configs(n_seeds=1, n_rows=120).items())[:3])
    monkeypatch.setattr(batch, "run_sweep", lambda *a, **kw: pytest.fail("3 runs need no worker processes"))
    out = batch.run_many(cfgs, workers=4)
    assert [r.run_id for r in out.values()] == [ex.run(c, progress=False).run_id for c in cfgs.values()]


@pytest.mark.parametrize("raw", ["0", "two", "-1", "1.5"])
def test_workers_from_the_environment_are_checked(monkeypatch, raw):
    monkeypatch.setenv("FACTERLAB_WORKERS", raw)
    with pytest.raises(ValueError, match="FACTERLAB_WORKERS"):
        batch.default_workers()


def test_workers_default(monkeypatch):
    monkeypatch.setenv("FACTERLAB_WORKERS", "3")
    assert batch.default_workers() == 3
    monkeypatch.delenv("FACTERLAB_WORKERS")
    assert 1 <= batch.default_workers() <= 8


def test_load_false_saves_every_run_and_reads_none_back(tmp_path, monkeypatch):
    """A notebook runs all its runs first (``load=False``) and reads each section's back later."""
    cfgs = dict(list(_configs(n_seeds=1, n_rows=200).items())[:2])
    _folders(monkeypatch, tmp_path)
    loaded = []
    real = batch.load_saved_run
    monkeypatch.setattr(batch, "load_saved_run", lambda path: loaded.append(path) or real(path))
    assert batch.run_many(cfgs, workers=1, load=False) == {}
    assert all(ex.find_saved_run(cfg) is not None for cfg in cfgs.values())
    again = batch.run_many(cfgs, workers=1)  # read back, nothing run
    assert set(again) == set(cfgs) and not loaded  # one by one here: ``run`` read them back itself
