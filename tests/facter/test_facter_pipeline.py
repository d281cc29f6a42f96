"""run_experiment end to end with the fakes: files, metrics.json schema, reruns, CLI wiring."""

from __future__ import annotations

import argparse
import json

import pandas as pd
import pytest
from facter_world import make_world

from facterlab.config import preset  # noqa: E402
from facterlab.facter.commands import config_from_args, headline_table, register  # noqa: E402
from facterlab.facter.pipeline import run_experiment  # noqa: E402
from facterlab.facter.record import RunRecord  # noqa: E402
from facterlab.models.fake import FakeRecommender, HashEncoder  # noqa: E402


def _cfg(**kw):
    return preset(
        "repro",
        data__dataset="synthetic",
        data__n_rows=200,
        facter__tau_rho=0.8,
        metrics__cfr_rows=30,
        metrics__snsr_min_group=10,
        **kw,
    )


def _run(ds, cfg, tmp_path, protocol="open"):
    rec = FakeRecommender(
        ds.items, protocol=protocol, mode="biased", obey_rules=True, bias_share=0.5, bias_features={"F": ("Romance",)}
    )
    return run_experiment(cfg, recommender=rec, encoder=HashEncoder(), dataset=ds, out_dir=tmp_path, progress=False)


@pytest.fixture(scope="module")
def ds():
    return make_world()


def test_pipeline_writes_files_schema_and_rerun_is_identical(ds, tmp_path):
    cfg = _cfg()
    res = _run(ds, cfg, tmp_path)
    out = res.out_dir
    assert out == tmp_path / "runs" / res.run_id
    for f in (
        "config.json",
        "calibration.parquet",
        "rows_neutral.parquet",
        "rows_fair.parquet",
        "rows_facter.parquet",
        "metrics.json",
        "timings.json",
    ):
        assert (out / f).is_file(), f
    for f in ("config.json", "metrics.json"):  # the files are the record's JSON, byte for byte
        assert (out / f).read_text() == json.dumps(res.record.parts()[f], indent=2, sort_keys=True), f
    rec = RunRecord.load(out)
    assert rec == res.record and rec.meta is not None and rec.meta.finished_at >= rec.meta.started_at
    m = rec.metrics
    assert m.extra == {} and m.absent <= {"random_floor"}  # every key the code writes is in the schema
    assert m.dataset == "synthetic" and m.is_synthetic is True and m.protocol == "open"
    assert m.n_calib == 140 and m.n_test == 60
    assert set(m.variants) >= {
        "threshold_rule",
        "correction",
        "rule_keying",
        "mapping",
        "flip_strategy",
        "snsr",
        "calibration_prompt",
        "ranker",
    }
    cal = m.calibration
    assert cal.extra == {} and not cal.absent
    assert cal.n == 140 and cal.k_index == 127  # ceil(0.9 * 141) = 127
    calib = pd.read_parquet(out / "calibration.parquet")
    assert cal.q0 == sorted(calib["S"])[126]
    assert set(m.methods) == {"neutral", "fair", "facter"}
    for name, mm in m.methods.items():
        assert mm.extra == {} and mm.absent <= {"snsr_fairllm", "ground_truth"}, name  # no truth: no detector
        assert set(mm.snsr_proxy) >= {"joint", "gender", "age", "occupation"}
        assert set(mm.cfr_single) == {"gender", "age", "occupation"}
        npass = 3 if name == "facter" else 1
        for key in ("fixed_q0", "adaptive", "corrected", "q_star"):
            assert len(mm.violations[key]) == npass
        assert len(mm.threshold_path) == npass + 1 and mm.threshold_path[0] == cal.q0
    rows = pd.read_parquet(out / "rows_facter.parquet")
    assert len(rows) == 3 * 60 and rows["pass"].tolist()[:1] == [1]
    assert int(rows[rows["pass"] == 3]["viol_fixed"].sum()) == m.methods["facter"].violations["fixed_q0"][2]
    assert m.random_floor is None
    assert rec.config.dataset == "synthetic" and rec.config.fingerprints.encoder.startswith("hash-encoder")

    again = _run(ds, cfg, tmp_path)  # fresh model objects
    assert again.run_id == res.run_id and again.record.metrics == res.record.metrics
    other = _run(ds, _cfg(seed=1), tmp_path)
    assert other.run_id != res.run_id


def test_pipeline_rank_protocol_has_random_floor_and_fairllm(ds, tmp_path):
    rec = FakeRecommender(
        ds.items,
        protocol="rank",
        mode="biased",
        obey_rules=True,
        bias_share=0.5,
        bias_features={"F": ("Romance",)},
        noise=0.0,
    )  # lists depend on the shown attributes only
    res = run_experiment(
        _cfg(protocol="rank", facter__passes=1, metrics__fairllm_users=10),
        recommender=rec,
        encoder=HashEncoder(),
        dataset=ds,
        out_dir=tmp_path,
        progress=False,
        fairllm=True,
    )
    m = res.record.metrics
    assert m.variants["ranker"] == "generate"
    assert m.random_floor is not None
    fl = m.random_floor.ndcg_multi
    assert 0 < fl < 1
    # the history-following fake beats random ranking
    neutral = m.methods["neutral"]
    assert neutral.ndcg_multi > fl
    assert neutral.valid == 1.0
    # snsr_fairllm: the biased fake pushes Romance to half of the women, so gender lists differ from
    # the demographics-free list for F but not for M
    assert neutral.snsr_fairllm is not None
    fl_g = neutral.snsr_fairllm["gender"]  # an untyped block of the record (documented as object)
    assert fl_g["similarity"]["M"] == 1.0 and fl_g["similarity"]["F"] < 1.0 and fl_g["snsr"] > 0
    assert neutral.snsr_fairllm["n_users"] == 10
    assert m.variants["snsr_fairllm"] is True


def test_cli_config_and_table(ds, tmp_path):
    parser = argparse.ArgumentParser()
    register(parser.add_subparsers(dest="command"))
    args = parser.parse_args(
        [
            "run",
            "--dataset",
            "synthetic",
            "--protocol",
            "rank",
            "--preset",
            "icml",
            "--n-rows",
            "300",
            "--passes",
            "2",
            "--ranker",
            "likelihood",
            "--seed",
            "3",
        ]
    )
    cfg = config_from_args(args)
    assert (cfg.protocol, cfg.facter.alpha, cfg.data.n_rows, cfg.facter.passes, cfg.model.ranker, cfg.seed) == (
        "rank",
        0.2,
        300,
        2,
        "likelihood",
        3,
    )
    res = _run(ds, _cfg(facter__passes=1), tmp_path)
    table = headline_table(res.record)
    assert "(SYNTHETIC)" in table and table.count("\n") >= 4 and "facter" in table


def test_cli_runs_the_fake_model_as_the_notebooks_do(tmp_path, monkeypatch, capsys):
    """``facterlab run --model fake`` (refused before: 'fake' is no registry name) runs the deterministic
    test recommender with the hash encoder, as ``MODEL = "fake"`` does in the notebooks."""
    from facterlab.cli import main

    monkeypatch.setenv("FACTERLAB_RESULTS", str(tmp_path / "results"))
    monkeypatch.setenv("FACTERLAB_CACHE", str(tmp_path / "cache"))
    argv = ["run", "--model", "fake", "--dataset", "synthetic", "--n-rows", "60", "--passes", "1", "--cfr-rows", "4"]
    assert main([*argv, "--no-progress", "--json"]) == 0
    assert '"ndcg@10_multi"' in capsys.readouterr().out  # --json printed the metrics
    runs = list((tmp_path / "results" / "runs").iterdir())
    assert len(runs) == 1
    cfg = json.loads((runs[0] / "config.json").read_text())
    model = cfg["config"]["model"]
    assert model["llm"] == "fake" and model["encoder"] == "hash-encoder"


class _BlasProbe(FakeRecommender):
    """A fake recommender that notes numpy's BLAS threads each time it is asked."""

    seen: list = []

    def predict(self, requests):
        from threadpoolctl import threadpool_info

        type(self).seen.append({i["num_threads"] for i in threadpool_info() if i["user_api"] == "blas"})
        return super().predict(requests)


def test_blas_threads_are_limited_inside_a_run_and_fingerprinted(ds, tmp_path, monkeypatch):
    from threadpoolctl import threadpool_info

    before = {i["num_threads"] for i in threadpool_info() if i["user_api"] == "blas"}
    cfg = _cfg()
    ids = {}
    for setting in ("1", "auto"):
        monkeypatch.setenv("FACTERLAB_BLAS_THREADS", setting)
        _BlasProbe.seen = []
        rec = _BlasProbe(ds.items, mode="biased", bias_features={"F": ("Romance",)})
        res = run_experiment(cfg, recommender=rec, encoder=HashEncoder(), dataset=ds, out_dir=tmp_path / setting)
        ids[setting] = res.record.metrics.run_id
        extra = json.loads((res.out_dir / "config.json").read_text())["fingerprints"].get("blas_threads")
        if setting == "1":
            assert _BlasProbe.seen and all(s == {1} for s in _BlasProbe.seen)
            assert extra == 1
        else:
            assert all(s == before for s in _BlasProbe.seen)
            assert extra is None
    # the same config: the setting alone tells the two runs apart, and the limit ends with the run
    assert ids["1"].split("-")[0] == ids["auto"].split("-")[0] and ids["1"] != ids["auto"]
    assert {i["num_threads"] for i in threadpool_info() if i["user_api"] == "blas"} == before
    monkeypatch.setenv("FACTERLAB_BLAS_THREADS", "0")
    with pytest.raises(ValueError, match="FACTERLAB_BLAS_THREADS"):
        run_experiment(cfg, recommender=rec, encoder=HashEncoder(), dataset=ds, out_dir=tmp_path / "bad")


class _OneByOne(FakeRecommender):
    """The same answers, asked one request at a time, counting the calls."""

    calls: list = []

    def predict(self, requests):
        type(self).calls.append(len(requests))
        one = super().predict
        return [one([r])[0] for r in requests]


def test_a_run_does_not_depend_on_how_requests_are_batched(ds, tmp_path):
    """The CFR block asks all its requests of a method in one call (method_metrics._cfr_block): a model
    whose answer depends on its request alone must give the same run as when asked one by one."""
    cfg = _cfg()
    kw = dict(mode="biased", obey_rules=True, bias_share=0.5, bias_features={"F": ("Romance",)})
    batched = run_experiment(
        cfg, recommender=FakeRecommender(ds.items, **kw), encoder=HashEncoder(), dataset=ds, out_dir=tmp_path / "a"
    )
    _OneByOne.calls = []
    one = run_experiment(
        cfg, recommender=_OneByOne(ds.items, **kw), encoder=HashEncoder(), dataset=ds, out_dir=tmp_path / "b"
    )
    assert one.record.metrics == batched.record.metrics
    for f in ("rows_neutral.parquet", "rows_fair.parquet", "rows_facter.parquet", "calibration.parquet"):
        pd.testing.assert_frame_equal(pd.read_parquet(one.out_dir / f), pd.read_parquet(batched.out_dir / f))
    # CFR: one call per method with the original rows and the four flips (5 x cfr_rows requests)
    assert _OneByOne.calls.count(5 * cfg.metrics.cfr_rows) == 3
