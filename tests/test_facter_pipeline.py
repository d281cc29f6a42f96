"""run_experiment end to end with the fakes: files, metrics.json schema, reruns, CLI wiring."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import pandas as pd
import pytest

sys.path.insert(0, str(Path(__file__).parent))
from facter_world import make_world  # noqa: E402

from facterlab.config import preset  # noqa: E402
from facterlab.facter.commands import config_from_args, headline_table, register  # noqa: E402
from facterlab.facter.pipeline import run_experiment  # noqa: E402
from facterlab.models.fake import FakeRecommender, HashEncoder  # noqa: E402

METHOD_KEYS = {
    "ndcg@10_multi",
    "ndcg@10_single",
    "recall@10_multi",
    "recall@10_single",
    "valid@10",
    "snsr_proxy",
    "cfr_multi",
    "cfr_single",
    "violations",
    "threshold_path",
    "parse_status",
}


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
    m = json.loads((out / "metrics.json").read_text())
    assert m == res.metrics
    assert m["dataset"] == "synthetic" and m["is_synthetic"] is True and m["protocol"] == "open"
    assert m["n_calib"] == 140 and m["n_test"] == 60
    assert set(m["variants"]) >= {
        "threshold_rule",
        "correction",
        "rule_keying",
        "mapping",
        "flip_strategy",
        "snsr",
        "calibration_prompt",
        "ranker",
    }
    cal = m["calibration"]
    assert cal["n"] == 140 and cal["k_index"] == 127  # ceil(0.9 * 141) = 127
    calib = pd.read_parquet(out / "calibration.parquet")
    assert cal["q0"] == sorted(calib["S"])[126]
    assert set(m["methods"]) == {"neutral", "fair", "facter"}
    for name, mm in m["methods"].items():
        assert METHOD_KEYS <= set(mm), name
        assert set(mm["snsr_proxy"]) >= {"joint", "gender", "age", "occupation"}
        assert set(mm["cfr_single"]) == {"gender", "age", "occupation"}
        npass = 3 if name == "facter" else 1
        for key in ("fixed_q0", "adaptive", "corrected", "q_star"):
            assert len(mm["violations"][key]) == npass
        assert len(mm["threshold_path"]) == npass + 1 and mm["threshold_path"][0] == cal["q0"]
    rows = pd.read_parquet(out / "rows_facter.parquet")
    assert len(rows) == 3 * 60 and rows["pass"].tolist()[:1] == [1]
    assert int(rows[rows["pass"] == 3]["viol_fixed"].sum()) == m["methods"]["facter"]["violations"]["fixed_q0"][2]
    assert "rank" not in m and "random_floor" not in m
    cfgj = json.loads((out / "config.json").read_text())
    assert cfgj["dataset"] == "synthetic" and cfgj["fingerprints"]["encoder"].startswith("hash-encoder")

    again = _run(ds, cfg, tmp_path)  # fresh model objects
    assert again.run_id == res.run_id and again.metrics == res.metrics
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
    m = res.metrics
    assert m["variants"]["ranker"] == "generate"
    fl = m["random_floor"]["ndcg@10_multi"]
    assert 0 < fl < 1
    # the history-following fake beats random ranking
    assert m["methods"]["neutral"]["ndcg@10_multi"] > fl
    assert m["methods"]["neutral"]["valid@10"] == 1.0
    # snsr_fairllm: the biased fake pushes Romance to half of the women, so gender lists differ from
    # the demographics-free list for F but not for M
    fl_g = m["methods"]["neutral"]["snsr_fairllm"]["gender"]
    assert fl_g["similarity"]["M"] == 1.0 and fl_g["similarity"]["F"] < 1.0 and fl_g["snsr"] > 0
    assert m["methods"]["neutral"]["snsr_fairllm"]["n_users"] == 10
    assert m["variants"]["snsr_fairllm"] is True


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
            "paper",
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
    table = headline_table(res.metrics)
    assert "(SYNTHETIC)" in table and table.count("\n") >= 4 and "facter" in table
