"""FACTER online phase: exact optimistic batching and the closed repair loop (fake recommender)."""

from __future__ import annotations

import pandas as pd
import pytest
from facter_world import make_world

from facterlab.config import preset  # noqa: E402
from facterlab.data.protocol import build_interactions  # noqa: E402
from facterlab.datatypes import Recommender  # noqa: E402
from facterlab.facter import prompts  # noqa: E402
from facterlab.facter.monitor import FacterMonitor, OnlineScorer, violation_summary  # noqa: E402
from facterlab.facter.pipeline import _groups, calibrate, context_embeddings, make_postprocess  # noqa: E402
from facterlab.facter.scores import ItemRepresenter  # noqa: E402
from facterlab.metrics import CatalogueMapper  # noqa: E402
from facterlab.models.fake import FakeRecommender, HashEncoder  # noqa: E402

ROMANCE_TO_WOMEN = {"F": ("Romance",)}


@pytest.fixture(scope="module")
def world():
    ds = make_world()
    cfg = preset("repro", data__dataset="synthetic", data__n_rows=240, facter__tau_rho=0.8)
    inter = build_interactions(ds, cfg.data)
    return ds, inter, cfg


def _setup(world, obey: bool, protocol: str = "open", **facter):
    ds, inter, cfg = world
    cfg = preset(
        "repro",
        data__dataset="synthetic",
        data__n_rows=240,
        facter__tau_rho=0.8,
        protocol=protocol,
        **{f"facter__{k}": v for k, v in facter.items()},
    )
    enc = HashEncoder()
    items = inter.items
    rec = FakeRecommender(
        ds.items, protocol=protocol, mode="biased", obey_rules=obey, bias_share=0.5, bias_features=ROMANCE_TO_WOMEN
    )
    mapper = CatalogueMapper(items.reset_index(), enc, method="encoder", threshold=0.65)
    rep = ItemRepresenter(enc, items)
    post = make_postprocess(protocol, mapper, items, 10)
    state, _ = calibrate(inter.calib, items, rec, enc, rep, post, cfg, "movie", prompts)
    test = inter.test.reset_index(drop=True)
    scorer = OnlineScorer(
        state,
        context_embeddings(test, items, enc, prompts),
        _groups(test),
        rep.items(test["target"].tolist()),
        cfg.facter.lam,
        cfg.facter.tau_rho,
    )
    kw = dict(
        rows=test,
        items=items,
        recommender=rec,
        scorer=scorer,
        postprocess=post,
        represent=rep.predictions,
        cfg=cfg.facter,
        n_calib=state.n,
        protocol=protocol,
        k=10,
        domain="movie",
        seed=0,
        prompts=prompts,
    )
    return kw, rec, state


def _run(kw, batch_size, kind="facter", passes=3):
    mon = FacterMonitor.from_keywords(system_kind=kind, batch_size=batch_size, **kw)
    return mon, mon.run(passes)


@pytest.mark.parametrize("announce", [False, True])
def test_optimistic_batching_equals_batch_size_one(world, announce):
    kw, rec, _ = _setup(world, obey=False, announce_threshold=announce)
    rec.n_calls = 0
    _, one = _run(kw, 1)
    calls_one = rec.n_calls
    n_rows = len(kw["rows"])
    assert calls_one == 3 * n_rows and one.n_repredicted == 0
    assert one.records["viol_adaptive"].sum() > 0  # prompts really change during the run
    for bs in (4, 64):
        kw2, rec2, _ = _setup(world, obey=False, announce_threshold=announce)
        rec2.n_calls = 0
        _, res = _run(kw2, bs)
        pd.testing.assert_frame_equal(res.records, one.records)
        assert res.threshold_path == one.threshold_path
        assert rec2.n_calls == 3 * n_rows + res.n_repredicted
        assert rec2.n_batches < rec.n_batches
        if bs == 64:
            assert res.n_repredicted > 0  # batches really were invalidated by violations


def test_batching_would_differ_without_repredicting(world):
    """Sanity check that the test above can fail: predicting a batch with stale prompts changes results."""
    kw, rec, _ = _setup(world, obey=False)
    _, one = _run(kw, 1)
    mon = FacterMonitor.from_keywords(system_kind="facter", batch_size=64, **kw)
    mon._current_orig = mon._current
    stale = {}

    def no_reprediction(pos, t, passes, row=None, attrs=None):
        key = (pos, t)
        if key not in stale:
            stale[key] = mon._current_orig(pos, t, passes, row, attrs)
        return stale[key]

    mon._current = no_reprediction
    res = mon.run(3)
    assert not res.records["S"].equals(one.records["S"])


def test_loop_closes_rule_appears_and_obeying_reduces_fixed_violations(world):
    kw_ignore, _, state = _setup(world, obey=False)
    _, ignore = _run(kw_ignore, 16)
    kw_obey, _, _ = _setup(world, obey=True)
    _, obey = _run(kw_obey, 16)
    rules = {r for rr in ignore.records["rules"] for r in rr}
    assert "AVOID: (gender=F) -> (Romance-only)" in rules
    # violations are driven by the stereotype: top-1 Romance items for women
    v = ignore.records[ignore.records["viol_adaptive"]]
    assert (v["gender"] == "F").mean() > 0.8
    vi, vo = violation_summary(ignore.records), violation_summary(obey.records)
    assert vi["fixed_q0"][0] > 0
    assert vo["fixed_q0"][-1] < vi["fixed_q0"][-1]
    assert sum(vo["fixed_q0"]) < sum(vi["fixed_q0"])
    # one-sided: Q only rises, starting at Q0
    assert ignore.threshold_path[0] == state.q0
    assert all(b >= a for a, b in zip(ignore.threshold_path, ignore.threshold_path[1:]))
    # records: one per (pass, row), q_before of the first row is Q0, flags consistent with scores
    r = ignore.records
    assert len(r) == 3 * len(kw_ignore["rows"])
    assert r["q_before"].iloc[0] == state.q0
    assert (r["viol_fixed"] == (r["S"] > state.q0)).all()
    assert (r["viol_adaptive"] == (r["S"] > r["q_before"])).all()
    assert (r["viol_q_star"] == (r["S"] > ignore.q_final)).all()


def test_baseline_has_no_rules_and_own_path(world):
    kw, _, state = _setup(world, obey=True)
    mon, res = _run(kw, 8, kind="neutral", passes=1)
    assert res.records["n_rules"].sum() == 0
    assert mon.final_system({"gender": "F", "age": "25-34", "occupation": "writer"}) == prompts.system_prompt("neutral")
    path = [state.q0]
    for s in res.records["S"]:
        path.append(0.95 * path[-1] + 0.05 * s if s > path[-1] else path[-1])
    assert res.threshold_path == [state.q0, pytest.approx(path[-1])]


def test_rank_protocol_monitor(world):
    kw, _, _ = _setup(world, obey=True, protocol="rank")
    _, res = _run(kw, 8, passes=1)
    ids = res.records["mapped_ids"]
    assert all(len(m) == 40 and min(m) >= 0 for m in ids)  # a full permutation of the candidates


def test_correction_and_rule_options(world):
    kw, _, _ = _setup(world, obey=False, correction="repro_count", rule_keying="tuple", threshold_rule="aci")
    _, res = _run(kw, 16, passes=1)
    r = res.records
    assert (r["viol_corrected"] == r["viol_repro_count"]).all()
    assert all(x.startswith("AVOID: (tuple=") for rr in r["rules"] for x in rr)
    # ACI updates every step
    assert (r["q_after"] != r["q_before"]).all()


class _Bucketed(Recommender):
    """A fake wrapper that batches like the LLM: ``plan_batches`` groups requests by a 'bucket' (here the
    parity of the row id) in first-seen order, chunks of ``size``; it records every call's buckets."""

    def __init__(self, inner, size):
        self.inner, self.size, self.calls = inner, size, []
        self.fingerprint = inner.fingerprint

    @staticmethod
    def bucket(req):
        return int(req.seed) % 2

    def plan_batches(self, requests):
        groups = {}
        for i, r in enumerate(requests):
            groups.setdefault(self.bucket(r), []).append(i)
        return [g[j : j + self.size] for g in groups.values() for j in range(0, len(g), self.size)]

    def predict(self, requests):
        self.calls.append(({self.bucket(r) for r in requests}, len(requests)))
        return self.inner.predict(requests)


@pytest.mark.parametrize("lookahead", [4, 8, 32])
def test_lookahead_follows_the_recommenders_batches_and_stays_exact(world, lookahead):
    kw, rec, _ = _setup(world, obey=False)
    _, one = _run(kw, 1)
    kw2, rec2, _ = _setup(world, obey=False)
    wrapped = _Bucketed(rec2, 4)
    kw2["recommender"] = wrapped
    rec2.n_calls = 0
    mon = FacterMonitor.from_keywords(system_kind="facter", batch_size=4, lookahead=lookahead, **kw2)
    res = mon.run(3)
    pd.testing.assert_frame_equal(res.records, one.records)
    assert all(len(b) == 1 for b, _ in wrapped.calls)  # every call holds one bucket only
    assert res.n_calls == len(wrapped.calls) and res.n_predicted == rec2.n_calls
    assert res.n_predicted == 3 * len(kw2["rows"]) + res.n_repredicted
    assert max(n for _, n in wrapped.calls) <= 4
    if lookahead >= 8:  # a wider window fills calls with rows of the same bucket further ahead
        assert res.n_calls < 3 * len(kw2["rows"]) / 2


def test_no_lookahead_for_a_recommender_that_runs_each_request_alone(world):
    kw, rec, _ = _setup(world, obey=False)
    rec.plan_batches = lambda reqs: [[i] for i in range(len(reqs))]  # like the likelihood ranker
    rec.n_calls = rec.n_batches = 0
    mon = FacterMonitor.from_keywords(system_kind="facter", batch_size=16, lookahead=64, **kw)
    res = mon.run(2)
    n = len(kw["rows"])
    assert res.n_calls == rec.n_batches == rec.n_calls == 2 * n and res.n_repredicted == 0


def test_bad_lookahead(world):
    kw, _, _ = _setup(world, obey=False)
    with pytest.raises(ValueError, match="lookahead"):
        FacterMonitor.from_keywords(system_kind="facter", batch_size=4, lookahead=0, **kw)


def test_monitor_settings_are_checked_and_the_recommender_must_implement_the_protocol(world):
    kw, rec, _ = _setup(world, obey=False)
    with pytest.raises(ValueError, match="unknown system_kind 'fiar'"):
        FacterMonitor.from_keywords(system_kind="fiar", **kw)
    with pytest.raises(TypeError, match="unexpected keyword argument 'batchsize'"):
        FacterMonitor.from_keywords(batchsize=4, **kw)

    class Structural:  # predicts, but neither subclasses Recommender nor has plan_batches
        fingerprint = "structural"

        def predict(self, requests):
            return rec.predict(requests)

    kw["recommender"] = Structural()
    with pytest.raises(TypeError, match="plan_batches"):
        FacterMonitor.from_keywords(**kw)


def test_a_cached_recommender_plans_batches_as_its_model_does(tmp_path):
    from facterlab.models.cache import CachedRecommender, PredictionCache

    class Paired(Recommender):
        fingerprint = "paired"

        def plan_batches(self, requests):
            return [[i for i in range(len(requests)) if i % 2 == r] for r in (0, 1)]

        def predict(self, requests):
            return []

    reqs = [None] * 5
    assert CachedRecommender(Paired(), PredictionCache(tmp_path / "c.sqlite")).plan_batches(reqs) == [[0, 2, 4], [1, 3]]
    assert FakeRecommender(pd.DataFrame({"item_id": [1], "title": ["A"], "features": [[]]})).plan_batches(reqs) is None
