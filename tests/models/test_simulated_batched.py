"""The simulated recommender's batched path (``SimulatedRecommender.predict``: numpy over a batch of requests)
gives, request by request, the Prediction of its per-request path (``_predict_one``: numpy over one request's
pool, the path every answer took before), byte for byte: the same titles in the same order, the same truth JSON
(``raw``), the same parse status and model positions.

Hundreds of varied requests per case: open generation and re-ranking; the ``synthetic`` dataset and an own
dataset (the jobs example, ``examples/jobs``: other attributes, a weighted bias table); bias on and off,
both compliance modes, partial rule compliance, title corruption, the text-reading simulator, three seeds;
the meaning term (the testbed's ``semantic`` case), the Neutral, Fair and FACTER prompts (rules that name the row's values and rules that do not), twins,
placebos, prompts without demographics, answers of other lengths (one shorter than k)."""

from __future__ import annotations

import dataclasses
import json
import random
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import facterlab.models.simulated as S
from facterlab.config import preset
from facterlab.datatypes import Rule
from facterlab.facter import prompts
from facterlab.facter.monitor import prompt_items
from facterlab.facter.twins import draw_seed, placebo_requests

ROOT = Path(__file__).resolve().parents[2]
JOBS = ROOT / "examples" / "jobs"

#: simulator settings (keywords of SimulatedRecommender; n_factors 8)
SETTINGS = {
    "no-bias": dict(beta=0.0, sigma=0.5, h=0.0),
    "bias": dict(beta=2.0, rho=1.0, h=0.0),
    "bias-partial-rules-corrupt": dict(beta=1.5, rho=0.5, h=0.3, phi=0.5, seed=7),
    "absolute-no-noise": dict(beta=1.0, sigma=0.0, rho=1.0, compliance="absolute", demote=3.0, seed=3),
    "text": dict(reads="text", beta=1.5, rho=0.6, h=0.2, order_sd=0.5, wording_sd=0.5, field_sd=0.5, temperature=0.5),
    "text-literal-unbiased": dict(reads="text", trigger="literal", beta=0.0, prompt_sd=1.0, seed=11),
    # the testbed's `semantic` case (its meaning term and that term's truth), and the term beside a bias and rules
    "semantic": dict(reads="text", beta=0.0, meaning_sd=1.0),
    "semantic-bias-rules": dict(reads="text", beta=1.5, rho=0.6, h=0.2, meaning_sd=0.7, wording_sd=0.5, seed=5),
}


@dataclasses.dataclass
class World:
    name: str
    inter: object
    train: pd.DataFrame
    attrs: tuple
    domain: str
    bias_table: object


@pytest.fixture(scope="module")
def synthetic():
    from facterlab.data.loading import load_dataset
    from facterlab.data.protocol import build_interactions

    cfg = preset("repro", data__dataset="synthetic", data__n_rows=200, data__n_candidates=20)
    inter = build_interactions(load_dataset("synthetic"), cfg.data)
    rows = pd.concat([inter.calib, inter.test], ignore_index=True)
    return World("synthetic", inter, S.training_pairs(rows), ("gender", "age", "occupation"), "movie", None)


@pytest.fixture(scope="module")
def jobs():
    from facterlab.data.imported import from_tables, read_recbole
    from facterlab.data.protocol import build_interactions

    wordings = json.loads((JOBS / "wordings.json").read_text())
    ds = from_tables(
        protected=["country", "language"], name="jobs", domain="job", wordings=wordings, **read_recbole(JOBS)
    )
    cfg = preset("repro", data__n_rows=200, data__n_candidates=20)
    inter = build_interactions(ds, cfg.data)
    rows = pd.concat([inter.calib, inter.test], ignore_index=True)
    table = {"country": {"BR": ["finance"], "NG": {"health": 1.0}}, "language": {"hi": {"tech": 2.0}}}
    return World("jobs", inter, S.training_pairs(rows), ("country", "language"), "job", table)


def _requests(w: World, protocol: str, n_rows: int) -> list:
    """Per row: Neutral, Fair and FACTER prompts (two draws each; FACTER's rules name the row's own values, a
    value it does not have, a title and the whole tuple), each one's placebos, a twin with every attribute
    changed, one without demographics; then a few answers of other lengths."""
    pit = prompt_items(w.inter.items)
    values = w.inter.attribute_values if getattr(w.inter, "attribute_values", None) else None
    rows = w.inter.test.reset_index(drop=True).head(n_rows).to_dict("records")
    features = sorted({f for fs in w.inter.items["features"] for f in fs})
    titles = w.inter.items["title"].astype(str).tolist()
    out = []
    for i, row in enumerate(rows):
        own = {a: str(row[a]) for a in w.attrs}
        rules = [Rule(a, v, features[(i + j) % len(features)]) for j, (a, v) in enumerate(own.items())]
        rules.append(Rule(w.attrs[0], "no-such-value", features[i % len(features)]))
        rules.append(Rule(w.attrs[-1], own[w.attrs[-1]], titles[(7 * i) % len(titles)]))
        rules.append(Rule("tuple", ", ".join(f"{a}={v}" for a, v in own.items()), features[(3 * i) % len(features)]))
        if values:
            others = {a: [v for v in values[a] if str(v) != own[a]] for a in w.attrs}
        else:
            others = {a: [str(v) for v in w.inter.test[a].unique() if str(v) != own[a]] for a in w.attrs}
        twin = {**row, **{a: others[a][i % len(others[a])] for a in w.attrs if others[a]}}
        for kind in ("neutral", "fair", "facter"):
            system = prompts.system_prompt(kind, rules if kind == "facter" else ())
            for d in (0, 1):
                req = prompts.build_request(
                    row, pit, system, protocol, 10, w.domain, draw_seed(100 + i, d), attrs=w.attrs
                )
                out += [req, *placebo_requests(req)]
            out.append(prompts.build_request(twin, pit, system, protocol, 10, w.domain, 100 + i, attrs=w.attrs))
            out.append(
                prompts.build_request(
                    row, pit, system, protocol, 10, w.domain, 100 + i, demographics=False, attrs=w.attrs
                )
            )
    n_items = len(w.inter.items)
    for j, k in enumerate((1, 4, 25, n_items + 5)):  # other lengths; the last is longer than any open pool
        out.append(dataclasses.replace(out[7 * j], k=k))
    return out


def _rec(w: World, protocol: str, settings: str, seed_shift: int = 0) -> S.SimulatedRecommender:
    kw = dict(SETTINGS[settings])
    kw["seed"] = kw.get("seed", 0) + seed_shift
    return S.SimulatedRecommender(w.inter.items, w.train, protocol=protocol, n_factors=8, bias_table=w.bias_table, **kw)


@pytest.mark.parametrize("protocol", ["open", "rank"])
@pytest.mark.parametrize("settings", list(SETTINGS))
@pytest.mark.parametrize("world", ["synthetic", "jobs"])
def test_batched_answers_equal_the_per_request_path(request, world, settings, protocol):
    w = request.getfixturevalue(world)
    reqs = _requests(w, protocol, n_rows=10)
    assert len(reqs) >= 300
    for seed_shift in (0, 1):
        reference = _rec(w, protocol, settings, seed_shift)
        expected = [reference._predict_one(r) for r in reqs]
        rec = _rec(w, protocol, settings, seed_shift)
        fallbacks: list = []
        one = rec._predict_one
        rec._predict_one = lambda r, fallbacks=fallbacks, one=one: fallbacks.append(r) or one(r)  # type: ignore[method-assign]
        got = rec.predict(reqs)  # one batch
        assert len(fallbacks) <= 1, "only an answer longer than its open pool takes the per-request path"
        assert len(got) == len(expected)
        for i, (g, e) in enumerate(zip(got, expected)):
            assert g == e, f"request {i}: batched {g} != per-request {e}"
        assert rec.n_calls == len(reqs) and rec.n_batches == 1
    # a fresh recommender, the requests shuffled into batches of 8, 3 (answered one by one) and 64: the same answers
    rec = _rec(w, protocol, settings, seed_shift)
    order = list(range(len(reqs)))
    random.Random(5).shuffle(order)
    j = 0
    for size in (8, 3, 64) * 100:
        part = order[j : j + size]
        if not part:
            break
        for i, p in zip(part, rec.predict([reqs[x] for x in part])):
            assert p == expected[i]
        j += size
    # what the biased cases exercise: pushes that move the top item, honoured rules
    truths = [json.loads(p.raw) for p in expected]
    if SETTINGS[settings].get("beta", 1.0) > 0 and w.name == "synthetic":
        assert any(t["top1_changed"] for t in truths) and any(t["n_rules_honoured"] for t in truths)
    if SETTINGS[settings].get("meaning_sd"):  # the meaning term's truth, batched too, moves some answers
        assert all("meaning_top1_changed" in t for t in truths if "meaning_topk_changed" in t)
        assert any(t.get("meaning_topk_changed") for t in truths)


def test_batches_are_answered_in_chunks_with_the_same_answers(synthetic, monkeypatch):
    reqs = _requests(synthetic, "open", n_rows=3)
    reference = _rec(synthetic, "open", "bias-partial-rules-corrupt")
    expected = [reference._predict_one(r) for r in reqs]
    monkeypatch.setattr(S, "BATCH_ELEMENTS", 3 * len(synthetic.inter.items))  # chunks of 3 requests
    assert _rec(synthetic, "open", "bias-partial-rules-corrupt").predict(reqs) == expected


def test_a_failing_request_fails_as_on_the_per_request_path(synthetic):
    reqs = _requests(synthetic, "rank", n_rows=1)
    bad = dataclasses.replace(
        reqs[3], meta=tuple((k, (10**9,) if k == "candidate_ids" else v) for k, v in reqs[3].meta)
    )
    rec = _rec(synthetic, "rank", "bias")
    with pytest.raises(ValueError, match="not in the simulated recommender's catalogue"):
        rec._predict_one(bad)
    with pytest.raises(ValueError, match="not in the simulated recommender's catalogue"):
        rec.predict([reqs[0], bad])


@pytest.mark.parametrize("k", [1, 3, 10, 40])
def test_top_rows_equals_a_stable_argsort_row_by_row(k):
    rng = np.random.default_rng(k)
    for n in (5, 64, 65, 300, 2000):
        score = rng.standard_normal((9, n))
        score[1] = np.round(score[1])  # many ties
        score[2] = 0.0  # all tied
        score[3, rng.choice(n, n // 2, replace=False)] = -np.inf  # open generation's history
        score[4, : n // 2] = -0.0
        score[5] = np.sort(score[5])  # the best last
        got = S.SimulatedRecommender._top_rows(score, k)
        for row, idx in zip(score, got):
            assert idx.tolist() == np.argsort(-row, kind="stable")[:k].tolist()
            assert idx.tolist() == S.SimulatedRecommender._top(row, k).tolist()
