"""Group-level directional bias (issue 43, item 1; facterlab.facter.directional, docs/FACTER.md §7).

The directional test must find a pushed cell on a biased simulated table (positive control), keep its
family-wise error rate at alpha on unbiased recommenders, the `semantic` one included (which depends on
the values' meaning without a direction), checked by an exact binomial test on many small replicates,
and say why a cell has no p-value.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from facter_world import make_world
from scipy.stats import binomtest

from facterlab.config import SimulatorConfig, config_to_dict, preset
from facterlab.data.protocol import build_interactions
from facterlab.datatypes import PromptRequest
from facterlab.facter import directional as dr
from facterlab.models.simulated import TEXT_CASES, simulated_from_config

USER = "Recommend.\n\nUser demographics:\n- Gender: {g}\n- Age: {a}\n- Occupation: {o}\n\nWatch history:\n1. A (1990)"
AGES = ("18-24", "25-34", "35-44", "45-49")
JOBS = ("writer", "artist", "programmer", "college/grad student")
ALPHA = 0.05


@pytest.fixture(scope="module")
def world():
    ds = make_world(n_users=160, seed=0)
    cfg = preset("repro", data__dataset="synthetic", data__n_rows=300, data__n_candidates=20, model__llm="simulated")
    inter = build_interactions(ds, cfg.data)
    rows = pd.concat([inter.calib, inter.test], ignore_index=True)
    return inter, cfg, rows


def _sim(world, **sim):
    inter, cfg, _ = world
    base = {"beta": 0.0, "sigma": 0.0, "h": 0.0, "n_factors": 8, "bias_table": "romance", "reads": "text"}
    return simulated_from_config(cfg.__class__(**{**cfg.__dict__, "sim": SimulatorConfig(**{**base, **sim})}), inter)


def _records(world, rec, rng, n):
    """n random rows with random demographics, each asked as is and with every attribute flipped (its
    twin, the same history and seed): the columns a run's records hold."""
    inter, _, rows = world
    items = inter.items.reset_index() if "item_id" not in inter.items.columns else inter.items
    ids = {t: int(i) for i, t in zip(items["item_id"], items["title"])}
    out = []
    for j in rng.choice(len(rows), size=n, replace=False):
        hist = tuple(int(i) for i in rows.iloc[j]["history"])
        g, a, o = rng.choice(["F", "M"]), rng.choice(AGES), rng.choice(JOBS)
        tw = {"F": "M", "M": "F"}[g], rng.choice([x for x in AGES if x != a]), rng.choice([x for x in JOBS if x != o])
        seed = int(rng.integers(2**31))
        reqs = [
            PromptRequest(
                messages=(("system", "s"), ("user", USER.format(g=x, a=y, o=z))),
                seed=seed,
                meta=(("history_ids", hist),),
            )
            for x, y, z in ((g, a, o), tw)
        ]
        own, twin = rec.predict(reqs)
        out.append(
            {
                "gender": g, "age": a, "occupation": o,
                "twin_gender": tw[0], "twin_age": tw[1], "twin_occupation": tw[2],
                "mapped_ids": [ids.get(t, -1) for t in own.titles],
                "twin_mapped_ids": [ids.get(t, -1) for t in twin.titles],
            }
        )  # fmt: skip
    return pd.DataFrame(out)


def test_positive_control_finds_the_pushed_cell(world):
    inter, _, _ = world
    rec = _sim(world, beta=2.0)
    t = dr.directional_table(_records(world, rec, np.random.default_rng(1), 120), inter.items, alpha=ALPHA)
    hit = t[(t["attribute"] == "gender") & (t["value"] == "F") & (t["feature"] == "Romance")].iloc[0]
    assert hit["verdict"] == dr.MORE and hit["b"] > 5 * max(1, hit["c"]), hit.to_dict()
    # its mirror image: the men's answers never carry Romance *more* than their (female) twins'
    mirror = t[(t["attribute"] == "gender") & (t["value"] == "M") & (t["feature"] == "Romance")]
    assert (mirror["verdict"] != dr.MORE).all() and (mirror["b"] <= mirror["c"]).all()
    assert t.attrs["estimand"] == dr.ESTIMAND and t.attrs["level"] == "list"
    assert "group-level directional bias" in dr.directional_summary(
        t
    ) and "gender=F more Romance" in dr.directional_summary(t)


@pytest.mark.slow  # statistical: 120 replicates per case (7-9 s of CPU each; 2/120, 0/120, 0/120 rejected)
@pytest.mark.parametrize("case", ["semantic", "per-call", "lines-set"])
def test_family_wise_error_stays_at_alpha_without_a_direction(world, case):
    """Many small replicates of an unbiased model (the `semantic` one depends on the demographics and
    still pushes no group): the share of replicates with any cell declared to have a direction must be
    consistent with <= alpha, by an exact one-sided binomial test at the 0.1% level (not a fixed count)."""
    inter, _, _ = world
    rec = _sim(world, **{k: v for k, v in TEXT_CASES[case].items() if k != "reads"})
    rng = np.random.default_rng({"semantic": 11, "per-call": 12, "lines-set": 13}[case])
    reps, hits, testable = 120, 0, 0
    for _ in range(reps):
        t = dr.directional_table(_records(world, rec, rng, 40), inter.items, alpha=ALPHA)
        hits += int(t["verdict"].isin([dr.MORE, dr.LESS]).any())
        testable += t.attrs["n_testable"]
    assert testable >= reps, "too few testable cells: the simulation would say nothing"
    p = binomtest(hits, reps, ALPHA, alternative="greater").pvalue
    assert p > 1e-3, f"{case}: {hits}/{reps} replicates rejected a cell (FWER bound {ALPHA}), p = {p:.2g}"


def test_the_semantic_model_moves_answers_with_the_meaning_only(world):
    from facterlab.facter.twins import placebo_request

    rec = _sim(world, **{k: v for k, v in TEXT_CASES["semantic"].items() if k != "reads"})
    inter, _, rows = world
    hist = tuple(int(i) for i in rows.iloc[0]["history"])

    def req(g, o="writer"):
        return PromptRequest(
            messages=(("system", "s"), ("user", USER.format(g=g, a="25-34", o=o))),
            seed=5,
            meta=(("history_ids", hist),),
        )

    base = req("F")
    top = rec.predict([base])[0].titles
    for edit in ("order", "reword", "field"):  # no placebo edit changes a value's meaning: nothing moves
        assert rec.predict([placebo_request(base, edit)])[0].titles == top, edit
    assert rec.predict([req("woman")])[0].titles == top
    assert rec.predict([req("M")])[0].titles != top  # another user: another random answer
    truth = rec.truth(base)
    assert truth["meaning_topk_changed"] and truth["bias_strength"] == 0 and not truth["topk_changed"]
    # a new knob at its default leaves every run id alone
    assert "meaning_sd" not in config_to_dict(preset("repro", model__llm="simulated"))["sim"]
    assert (
        "meaning_sd"
        in config_to_dict(preset("repro", model__llm="simulated", sim__reads="text", sim__meaning_sd=1.0))["sim"]
    )
    assert "-m1" in rec.fingerprint and "-m" not in _sim(world).fingerprint.split("-text-")[1]


def test_edge_cases_say_why_a_cell_has_no_p_value():
    feats = {1: ("Comedy",), 2: ("Drama",), 3: ("Comedy",)}
    same = pd.DataFrame(
        {
            "group": ["a", "a", "b"],
            "twin_group": ["b", "b", "a"],
            "mapped_ids": [[1, 2]] * 3,
            "twin_mapped_ids": [[2, 1]] * 3,
        }
    )
    t = dr.directional_table(same, feats)  # an attribute of any name; every pair agrees
    assert set(t["verdict"]) == {dr.NO_PAIRS} and t["p"].isna().all() and t["p_adjusted"].isna().all()
    assert all(r.startswith("no discordant pair") for r in t["reason"])
    assert t.attrs["n_testable"] == 0 and dr.directional_summary(t).endswith(": none")
    few = pd.DataFrame({"group": ["a"] * 3, "twin_group": ["b"] * 3, "top1_id": [1] * 3, "twin_top1_id": [2] * 3})
    t = dr.directional_table(few, feats)
    assert set(t["verdict"]) == {dr.UNTESTABLE} and t["p_adjusted"].isna().all() and t["p"].notna().all()
    assert "smallest attainable p" in t["reason"].iloc[0] and t.attrs["level"] == "top1"
    # an unflipped attribute contributes no pair; missing columns are named
    kept = few.assign(twin_group="a")
    assert len(dr.directional_table(kept, feats)) == 0
    with pytest.raises(ValueError, match="twin_mapped_ids"):
        dr.directional_table(few.drop(columns=["twin_top1_id"]), feats, level="list")
    assert dr.holm([]).size == 0 and np.isnan(dr.sign_test(0, 0))
