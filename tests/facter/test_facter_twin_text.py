"""The twin monitor against recommenders that read the prompt text (issue: a guarantee that survives a
model that reads text, and a repair that does no harm; docs/FACTER.md §7, docs/SIMULATED.md).

Each test here fails if its part breaks: the wording vocabulary must round-trip, the text-reading
simulator must never read the request's fields, the placebo family must keep the false-flag rate at
alpha where the reversed-lines placebo does not (both shown on the same model), confirmed mining must
stay (almost) silent on exchangeable pairs and find a real enrichment, and the claims' tests must be the
paired and exact ones.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from facter_world import make_world

from facterlab.config import SimulatorConfig, config_to_dict, preset, saved_setting
from facterlab.data import AGE_ORDER, OCCUPATION_LABELS
from facterlab.data.protocol import build_interactions
from facterlab.data.wording import canonical, is_default_spelling, reword
from facterlab.datatypes import PromptRequest, Rule
from facterlab.facter.repair import ConfirmedRules, mcnemar_exact
from facterlab.facter.twins import PLACEBO_EDITS, draw_seed, placebo_request, with_draws
from facterlab.models.simulated import TEXT_CASES, demographic_lines, simulated_from_config
from facterlab.reporting import claims
from facterlab.reporting import ground_truth as gt
from facterlab.reporting import twin_acceptance as ta

NULL = {"facter__delta": "twin", "facter__threshold": "null"}
USER = "Recommend.\n\nUser demographics:\n- Gender: {g}\n- Age: {a}\n- Occupation: {o}\n\nWatch history:\n1. A (1990)"


def _req(g="F", a="25-34", o="writer", seed=3, meta=None):
    return PromptRequest(
        messages=(("system", "s"), ("user", USER.format(g=g, a=a, o=o))), seed=seed, meta=tuple((meta or {}).items())
    )


# ---------------------------------------------------------------- wording
@pytest.mark.parametrize(
    "attr,values",
    [
        ("gender", ["F", "M", "female", "male"]),
        ("age", list(AGE_ORDER) + ["40"]),
        ("occupation", list(OCCUPATION_LABELS.values()) + ["student", "K-12 student", "technician/engineer"]),
    ],
)
def test_a_reworded_value_means_the_same_and_reads_differently(attr, values):
    for v in values:
        w = reword(attr, v)
        assert w != v, (attr, v)
        assert canonical(attr, w) == canonical(attr, v), (attr, v, w)


def test_literal_reader_knows_only_the_default_spelling():
    assert is_default_spelling("gender", "F", "F") and is_default_spelling("gender", "female", "F")
    assert not is_default_spelling("gender", reword("gender", "female"), "F")


# ---------------------------------------------------------------- placebos and draws
def test_every_placebo_edit_keeps_the_values_meaning_and_changes_the_text():
    r = _req()
    shown = {lab: v for lab, v in demographic_lines(r)}
    for kind in PLACEBO_EDITS:
        p = placebo_request(r, kind)
        assert p.seed == r.seed and p.messages[0] == r.messages[0]
        assert p.messages[1][1] != r.messages[1][1], kind
        lines = dict(demographic_lines(p))
        for lab, attr in (("Gender", "gender"), ("Age", "age"), ("Occupation", "occupation")):
            assert canonical(attr, lines[lab]) == canonical(attr, shown[lab]), (kind, lab)
    assert len(demographic_lines(placebo_request(r, "field"))) == 4
    with pytest.raises(ValueError, match="unknown placebo"):
        placebo_request(r, "shuffle")


def test_draws_keep_draw_zero_and_vary_the_seed():
    reqs = [_req(seed=s) for s in (1, 2)]
    assert with_draws(reqs, 1) == reqs
    d = with_draws(reqs, 3)
    assert [x.seed for x in d[:2]] == [1, 2] and len({x.seed for x in d}) == 6
    assert draw_seed(7, 2) == draw_seed(7, 2)


# ---------------------------------------------------------------- the text-reading simulator
@pytest.fixture(scope="module")
def world():
    ds = make_world(n_users=160, seed=0)
    cfg = preset("repro", data__dataset="synthetic", data__n_rows=300, data__n_candidates=20, model__llm="simulated")
    return ds, build_interactions(ds, cfg.data), cfg


def _sim(world, **sim):
    _, inter, cfg = world
    base = {"beta": 6.0, "sigma": 0.0, "h": 0.0, "n_factors": 8, "bias_table": "romance", "demote": 1000.0}
    return simulated_from_config(cfg.__class__(**{**cfg.__dict__, "sim": SimulatorConfig(**{**base, **sim})}), inter)


def _request_of(world, g, a="25-34", o="writer", seed=5, meta_gender=None):
    _, inter, _ = world
    row = inter.test.iloc[0]
    meta = {"history_ids": tuple(int(i) for i in row["history"]), "gender": meta_gender or g, "age": a, "occupation": o}
    return _req(g, a, o, seed=seed, meta=meta)


def test_the_text_reader_takes_the_demographics_from_the_text_never_from_the_fields(world):
    fields, text = _sim(world), _sim(world, reads="text")
    women, lie = _request_of(world, "F"), _request_of(world, "M", meta_gender="F")
    # the fields reader believes the fields; the text reader believes the text
    assert fields.truth(women)["n_pushed_attrs"] == 1 and fields.truth(lie)["n_pushed_attrs"] == 1
    assert text.truth(women)["n_pushed_attrs"] == 1 and text.truth(lie)["n_pushed_attrs"] == 0
    # semantic: "woman" is understood; literal: only "F" / "female"
    assert text.truth(_request_of(world, "woman"))["n_pushed_attrs"] == 1
    literal = _sim(world, reads="text", trigger="literal")
    assert literal.truth(_request_of(world, "female"))["n_pushed_attrs"] == 1
    assert literal.truth(_request_of(world, "woman"))["n_pushed_attrs"] == 0


def test_surface_sensitivities_are_the_named_ones(world):
    def top(rec, req):
        return rec.predict([req])[0].titles

    base = _request_of(world, "M")
    order, reworded = placebo_request(base, "order"), placebo_request(base, "reword")
    field, other_seed = placebo_request(base, "field"), _request_of(world, "M", seed=6)
    moved = {}
    for case in ("lines-set", "prompt-hash", "line-order", "irrelevant-field", "per-call"):
        rec = _sim(world, **{**TEXT_CASES[case], "beta": 0.0})
        moved[case] = {
            name: top(rec, r) != top(rec, base)
            for name, r in (("order", order), ("reword", reworded), ("field", field), ("seed", other_seed))
        }
        assert top(rec, base) == top(rec, base)  # deterministic for one request
    assert moved["lines-set"] == {"order": False, "reword": True, "field": False, "seed": False}
    assert moved["prompt-hash"] == {"order": True, "reword": True, "field": True, "seed": False}
    assert moved["line-order"] == {"order": True, "reword": False, "field": True, "seed": False}
    assert moved["irrelevant-field"] == {"order": False, "reword": False, "field": True, "seed": False}
    assert moved["per-call"]["seed"] and moved["per-call"]["order"]


def test_text_settings_need_the_text_reader_and_leave_old_run_ids_alone():
    with pytest.raises(ValueError, match="sim.reads 'text'"):
        SimulatorConfig(wording_sd=1.0)
    cfg = preset("repro", model__llm="simulated")
    assert "reads" not in config_to_dict(cfg)["sim"] and "placebo" not in config_to_dict(cfg)["facter"]
    null = preset("repro", **NULL)
    assert config_to_dict(null)["facter"]["placebo"] == "family"
    # a saved null-threshold run from before the placebo family used the reversed lines, and keeps its id
    assert saved_setting({"facter": {"threshold": "null"}}, "facter", "placebo") == "order"
    assert "placebo" not in config_to_dict(preset("repro", facter__placebo="order", **NULL))["facter"]
    with pytest.raises(ValueError, match="needs facter.delta 'twin'"):
        preset("repro", facter__rule_mining="confirmed")


# ---------------------------------------------------------------- the null: failure and fix on one model
@pytest.mark.slow
def test_placebo_family_keeps_alpha_where_the_reversed_lines_placebo_fails(tmp_path):
    ds = make_world(n_users=200, seed=1)
    rates = {}
    for placebo in ("order", "family"):
        res = gt.handbuilt_run(
            ds, 0.0, 1.0, tmp_path, data__n_rows=1400, facter__passes=1, facter__placebo=placebo,
            sim__reads="text", sim__wording_sd=1.0, **NULL,
        )  # fmt: skip
        rows = res.rows["neutral"]
        rates[placebo] = (int(rows["viol_fixed"].sum()), len(rows), res.record.metrics.calibration)
    k, n, cal = rates["order"]
    lo, _ = claims.clopper_pearson(k, n)
    assert cal.share_placebo_nonzero == 0 and lo > cal.alpha, "the reversed-lines placebo should fail this model"
    k, n, cal = rates["family"]
    lo, _ = claims.clopper_pearson(k, n)
    assert cal.share_placebo_nonzero > 0.2 and lo <= cal.alpha, f"family: {k}/{n} above alpha {cal.alpha}"


# ---------------------------------------------------------------- confirmed mining
def _pairs(rng, n, pushed=None):
    feats = ["Action", "Comedy", "Drama", "Romance", "War"]
    out = []
    for _ in range(n):
        g = "F" if rng.random() < 0.5 else "M"
        rf, tf = {feats[rng.integers(5)]}, {feats[rng.integers(5)]}
        if pushed and rng.random() < 0.6:  # the push goes to the pushed group: the row, or else its twin
            if g == pushed[0]:
                rf = {pushed[1]}
            else:
                tf = {pushed[1]}
        out.append(({"gender": g, "age": "a", "occupation": "o"}, True, rf, tf))
    return out


def test_confirmed_mining_is_silent_on_exchangeable_pairs_and_finds_a_real_push():
    rng = np.random.default_rng(0)
    made = 0
    for _ in range(100):  # 100 unbiased passes of 200 flagged pairs: at level 0.05 about 5 passes may make a rule
        cr = ConfirmedRules(level=0.05, min_effect=0.2, min_count=3, max_rules=10, max_per_attr=5)
        for obs in _pairs(rng, 200):
            cr.observe(*obs)
        made += bool(cr.end_pass(1))
    assert made <= 12, f"{made} of 100 unbiased passes made a rule"
    cr = ConfirmedRules(level=0.05, min_effect=0.2, min_count=3, max_rules=10, max_per_attr=5)
    for obs in _pairs(rng, 200, pushed=("F", "Romance")):
        cr.observe(*obs)
    assert Rule("gender", "F", "Romance") in cr.end_pass(1)


def test_a_rule_that_does_not_lower_what_it_targets_is_dropped_and_rules_are_not_mined_from_rules():
    rng = np.random.default_rng(1)
    cr = ConfirmedRules(level=0.05, min_effect=0.2, min_count=3, max_rules=10, max_per_attr=5)
    for obs in _pairs(rng, 200, pushed=("F", "Romance")):
        cr.observe(*obs)
    rule = Rule("gender", "F", "Romance")
    made = cr.end_pass(1)
    assert rule in made
    # pass 2: the model ignores every rule (the push is as strong); every pair is ruled, so nothing new is mined
    for attrs, flagged, rf, tf in _pairs(rng, 200, pushed=("F", "Romance")):
        cr.observe(attrs, flagged, rf, tf, ruled=True)
    assert rule not in cr.end_pass(2) and rule in cr.retired
    assert [e.dropped for e in cr.log if e.rule == rule] == [False, True]
    assert len(cr.log) == len(made) + sum(e.dropped for e in cr.log)  # nothing mined from ruled pairs


def test_mcnemar_and_tarone():
    from scipy.stats import binomtest

    for b, c in ((9, 1), (4, 4), (0, 5)):
        assert mcnemar_exact(b, c) == pytest.approx(binomtest(b, b + c, 0.5, alternative="greater").pvalue)
    assert ConfirmedRules.tarone_m([1] * 50, 0.05) == 1  # one discordant pair can never reach 0.05
    assert ConfirmedRules.tarone_m([20] * 50, 0.05) == 50


# ---------------------------------------------------------------- claims
def test_claims_use_exact_and_paired_tests():
    c = claims.two_rate_claim("x", 0, 30, 9, 30)
    assert "Fisher" in c.test and c.verdict == claims.HOLDS
    assert "Fisher" not in claims.two_rate_claim("x", 100, 1000, 300, 1000).test
    assert claims.paired_rate_claim("x", 2, 25, 300).verdict == claims.HOLDS
    z = claims.paired_claim("x", [0.1, 0.1, 0.1], [0.2, 0.2, 0.2])
    assert "inf" not in z.measured and z.verdict == claims.TOO_SMALL  # 2^-3 = 0.125 > 1%
    assert claims.paired_claim("x", [0.1] * 7, [0.2] * 7).verdict == claims.HOLDS


def test_cfr_pair_claim_and_acceptance_frame_shapes():
    a = np.linspace(0.1, 0.5, 300)
    assert ta.cfr_pair_claim("x", a, a).verdict == claims.HOLDS
    assert ta.cfr_pair_claim("x", a + 0.05, a).verdict == claims.FAILS
    assert ta.acceptance_frame({}).empty
    assert set(ta.CASES) >= {"lines-set", "narrow-table", "word-triggered"}
    assert isinstance(ta.case_overrides("narrow-table"), dict) and isinstance(pd.DataFrame(), pd.DataFrame)


@pytest.mark.slow
def test_a_reworded_twin_is_a_negative_control_that_stays_at_alpha(tmp_path):
    """facter.twin = "reword": the twin's demographics mean the row's own, so a semantic reader with a
    real bias and surface sensitivity must not be flagged beyond alpha (docs/FACTER.md §7.2)."""
    ds = make_world(n_users=200, seed=3)
    res = gt.handbuilt_run(
        ds, 6.0, 1.0, tmp_path, data__n_rows=1000, facter__passes=1, facter__twin="reword",
        sim__reads="text", sim__wording_sd=1.0, **NULL,
    )  # fmt: skip
    rows = res.rows["neutral"]
    assert set(rows["twin_gender"]) <= {"a woman", "a man"}
    k, n = int(rows["viol_fixed"].sum()), len(rows)
    lo, _ = claims.clopper_pearson(k, n)
    assert lo <= res.record.metrics.calibration.alpha, f"{k}/{n} flagged with a twin that means the same"
