"""The simulated recommender's per-request memos (facterlab.models.simulated: ``_LRU``, ``_Core``) change
its speed, never an answer: the same request gets the identical Prediction whatever was asked before it,
in which batch and order, and with memos too small to hold anything; the memos stay within their bound."""

from __future__ import annotations

import dataclasses
import random

import pandas as pd
import pytest
from facter_world import make_world

import facterlab.models.simulated as S
from facterlab.config import preset
from facterlab.datatypes import Rule
from facterlab.facter import prompts
from facterlab.facter.monitor import prompt_items
from facterlab.facter.twins import draw_seed, placebo_requests

RULES = [Rule("gender", "F", "Romance"), Rule("gender", "M", "Action"), Rule("age", "25-34", "Comedy")]
SETTINGS = {
    "fields": dict(beta=2.0, rho=0.5, h=0.4),
    "text": dict(reads="text", beta=1.5, rho=0.6, h=0.3, order_sd=0.5, wording_sd=0.5, field_sd=0.5, temperature=0.5),
}


@pytest.fixture(scope="module")
def world():
    from facterlab.data.protocol import build_interactions

    cfg = preset("repro", data__dataset="synthetic", data__n_rows=300, data__n_candidates=20)
    inter = build_interactions(make_world(n_users=120, seed=3), cfg.data)
    return inter, S.training_pairs(pd.concat([inter.calib, inter.test], ignore_index=True))


def _requests(inter, protocol: str, n_rows: int = 6) -> list:
    """Per row: each method's request, two draws, its placebos and its gender twin (keys shared across them)."""
    pit = prompt_items(inter.items)
    out = []
    for i, row in enumerate(inter.test.reset_index(drop=True).head(n_rows).to_dict("records")):
        for kind in ("neutral", "fair", "facter"):
            system = prompts.system_prompt(kind, RULES if kind == "facter" else ())
            for d in (0, 1):
                req = prompts.build_request(row, pit, system, protocol, 10, "movie", draw_seed(50 + i, d))
                twin = {**row, "gender": "F" if row["gender"] == "M" else "M"}
                out += [
                    req,
                    *placebo_requests(req),
                    prompts.build_request(twin, pit, system, protocol, 10, "movie", 50 + i),
                ]
        out.append(dataclasses.replace(out[-1], k=4))
    return out


def _rec(inter, train, protocol, settings):
    return S.SimulatedRecommender(inter.items, train, protocol=protocol, n_factors=8, **SETTINGS[settings])


@pytest.mark.parametrize("protocol", ["open", "rank"])
@pytest.mark.parametrize("settings", sorted(SETTINGS))
def test_memo_never_changes_an_answer(world, protocol, settings):
    inter, train = world
    reqs = _requests(inter, protocol)
    # reference: every request alone, in a recommender that has answered nothing else
    probe = list(range(0, len(reqs), 7))
    alone = {i: _rec(inter, train, protocol, settings).predict([reqs[i]])[0] for i in probe}
    # one recommender: everything in one batch, then shuffled batches of 5, then again after a reset
    rec = _rec(inter, train, protocol, settings)
    first = rec.predict(reqs)
    order = list(range(len(reqs))) * 2
    random.Random(0).shuffle(order)
    again = {}
    for j in range(0, len(order), 5):
        for i, p in zip(order[j : j + 5], rec.predict([reqs[x] for x in order[j : j + 5]])):
            assert again.setdefault(i, p) == p
    tiny = _rec(inter, train, protocol, settings)  # memos of one entry: nearly every request misses
    tiny._core_memo.maxsize = tiny._surface_memo.maxsize = 1
    small = tiny.predict(reqs[::-1])[::-1]
    for i in range(len(reqs)):
        assert first[i] == again[i] == small[i]
        if i in alone:
            assert alone[i] == first[i]
    assert len(tiny._core_memo) <= 1 and len(tiny._surface_memo) <= 1
    # the memoised vectors cannot be changed in place by a later request
    core = next(iter(rec._core_memo._d.values()))
    assert not core.base.flags.writeable


def test_memo_bound(world):
    inter, train = world
    rec = _rec(inter, train, "open", "text")
    n_items = len(rec.item_ids)
    assert rec._core_memo.maxsize == min(S.MEMO_MAX, max(S.MEMO_MIN, S.MEMO_BYTES // (12 * n_items)))
    assert rec._surface_memo.maxsize == min(S.MEMO_MAX, max(S.MEMO_MIN, S.MEMO_BYTES // (8 * n_items)))
    rec._core_memo.maxsize = rec._surface_memo.maxsize = 5
    reqs = _requests(inter, "open", n_rows=12)
    rec.predict(reqs)
    assert len(rec._core_memo) == 5 and len(rec._surface_memo) == 5
    # the most recently used entries are the ones kept
    m = S._LRU(3)
    for x in "abcd":
        m.put(x, x)
        m.get("a")
    assert sorted(m.keys()) == ["a", "c", "d"] and len(m) == 3
