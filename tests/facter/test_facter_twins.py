"""facterlab's twin monitor (docs/FACTER.md §7): counterfactual-twin Delta, the null-anchored threshold,
contrast rule mining and the ground-truth detector block.

The world is the hand-built one of tests/helpers/facter_world.py (Romance liked by nobody, pushed to women by
the simulated recommender).  These tests fail if the twin score, the null threshold or contrast mining
break: the false-flag rate at beta = 0, recall rising with beta, repair only when rho > 0, exact
batching with twins, and the guarantee against a recommender that reacts to the prompt's surface.
"""

from __future__ import annotations

import hashlib
import json

import numpy as np
import pandas as pd
import pytest
from facter_world import make_world

from facterlab.config import preset
from facterlab.data.protocol import build_interactions
from facterlab.datatypes import PARSE_NA, Prediction, Recommender
from facterlab.facter.pipeline import run_experiment
from facterlab.facter.repair import ViolationBuffer, enrichment, mine_rules, mine_value_rules
from facterlab.facter.truth import detector_summary, rank_auc
from facterlab.facter.twins import null_threshold, placebo_request, twin_attributes
from facterlab.models.fake import HashEncoder
from facterlab.reporting import claims
from facterlab.reporting import ground_truth as gt

TWIN = {"facter__delta": "twin", "facter__threshold": "null"}


def _run(ds, beta, rho, out, recommender=None, **kw):
    if recommender is None:
        return gt.handbuilt_run(ds, beta, rho, out, sim__demote=1.0, **TWIN, **kw)
    cfg = preset(
        "repro", data__dataset="synthetic", data__n_candidates=20, model__llm="fake", model__encoder="hash-encoder",
        metrics__cfr_rows=50, metrics__snsr_min_group=10, **TWIN, **kw,
    )  # fmt: skip
    return run_experiment(cfg, recommender=recommender, encoder=HashEncoder(), dataset=ds, out_dir=out, progress=False)


@pytest.fixture(scope="module")
def twin_runs(tmp_path_factory):
    out = tmp_path_factory.mktemp("twin_runs")
    ds = make_world(n_users=160, seed=0)
    runs = {(b, r): _run(ds, b, r, out) for b, r in ((0.0, 1.0), (3.0, 1.0), (6.0, 1.0), (6.0, 0.0))}
    return ds, runs


@pytest.mark.slow
def test_null_threshold_never_flags_without_bias_and_recall_rises_with_beta(twin_runs):
    _, runs = twin_runs
    det = gt.run_detector_frame(list(runs.values()))
    neutral = det[(det["method"] == "neutral") & (det["rho"] == 1.0)].set_index("beta")
    alpha = runs[(0.0, 1.0)].record.metrics.calibration.alpha
    # beta = 0: a deterministic recommender that ignores the demographics answers its twin identically
    assert neutral.loc[0.0, "flagged"] == 0 and neutral.loc[0.0, "positives"] == 0
    assert neutral.loc[0.0, "max_delta"] == 0 < neutral.loc[6.0, "max_delta"]
    # the list-level label (the row's or twin's top-10 set changed), recounted from the records
    rec = runs[(6.0, 1.0)].rows["neutral"]
    lab = gt.list_labels(rec, twin=True)
    flag = rec["viol_fixed"].to_numpy(dtype=bool)
    row = neutral.loc[6.0]
    assert row["biased_list"] == lab.sum() > 0 and row["true_pos_list"] == (flag & lab).sum()
    assert row["precision_list"] == pytest.approx((flag & lab).sum() / flag.sum())
    assert neutral.loc[0.0, "biased_list"] == 0
    c = claims.rate_claim("false flags", int(neutral.loc[0.0, "flagged"]), int(neutral.loc[0.0, "n"]), alpha, "<=")
    assert c.verdict == claims.HOLDS
    # the flags see the bias, and more of it as beta grows
    assert neutral.loc[6.0, "flagged"] > neutral.loc[3.0, "flagged"] > 0
    assert neutral.loc[6.0, "recall"] >= neutral.loc[3.0, "recall"] >= 0.8
    assert neutral.loc[6.0, "positives"] > neutral.loc[3.0, "positives"] > 0
    assert neutral.loc[6.0, "precision"] >= 0.9
    # Q_null sits at the placebo quantile: 0 + tolerance for a deterministic recommender
    cal = runs[(6.0, 1.0)].record.metrics.calibration
    assert cal.q_null == pytest.approx(1e-6) and cal.share_placebo_nonzero == 0.0
    # the extra requests are counted: one twin per scored row in the baselines
    m = runs[(6.0, 1.0)].record.metrics.methods
    assert m["neutral"].n_twin_predictions == m["neutral"].ground_truth["detector"]["n"]
    assert m["facter"].n_twin_predictions >= 3 * m["neutral"].n_twin_predictions


@pytest.mark.slow
def test_twin_repair_happens_only_when_the_recommender_listens(twin_runs):
    _, runs = twin_runs
    sh = gt.biased_share_table([runs[(6.0, 1.0)], runs[(6.0, 0.0)]])
    last = sh["pass"].max()
    by = {(r["rho"], r["pass"]): r for r in sh.to_dict("records")}
    listen, deaf = by[(1.0, last)], by[(0.0, last)]
    assert listen["share_changed"] <= 0.5 * listen["fair_share_changed"]
    assert deaf["share_changed"] > 0.8 * deaf["fair_share_changed"]
    verdicts = {
        c.claim: c.verdict
        for c in gt.twin_claims(
            gt.run_detector_frame(list(runs.values())), sh, gt.fairness_table(list(runs.values())), 0.1
        )
    }
    listen_claim = next(c for c in verdicts if c.startswith("twin repair (beta=6, rho=1)"))
    deaf_claim = next(c for c in verdicts if c.startswith("twin repair, control (beta=6, rho=0)"))
    assert verdicts[listen_claim] == claims.HOLDS and verdicts[deaf_claim] == claims.HOLDS
    # FACTER and Fair answer the same rows, and so do the rho = 1 and rho = 0 runs: the paired tests
    assert listen_claim.endswith("the same rows") and deaf_claim.endswith("the same rows")
    assert listen["n_paired"] == listen["n"] == listen["fair_n"]
    assert listen["facter_only"] + listen["both_changed"] == listen["changed"]
    assert listen["fair_only"] + listen["both_changed"] == listen["fair_changed"]
    rho_claim = next(c for c in verdicts if "the repair is the rules' doing" in c)
    assert rho_claim.endswith("the same rows") and verdicts[rho_claim] == claims.HOLDS
    # beta = 0: every twin distance is 0, so "no false flag" holds by construction, reported apart
    zero = next(c for c in verdicts if c.startswith("twin + null (beta=0)"))
    assert verdicts[zero] == claims.BY_CONSTRUCTION


@pytest.mark.slow
def test_twin_batching_is_exact(tmp_path):
    ds = make_world(n_users=80, seed=1)
    a = _run(ds, 6.0, 1.0, tmp_path / "a", model__batch_size=1, data__n_rows=300)
    b = _run(ds, 6.0, 1.0, tmp_path / "b", model__batch_size=8, data__n_rows=300)
    cols = ["S", "delta", "top1_id", "twin_top1_id", "viol_fixed", "rules"]
    pd.testing.assert_frame_equal(a.rows["facter"][cols], b.rows["facter"][cols])
    assert (
        b.record.metrics.methods["facter"].n_recommender_calls < a.record.metrics.methods["facter"].n_recommender_calls
    )


class SurfaceRecommender(Recommender):
    """Ignores what the demographics mean but reacts to every character of the prompt: its top-1 item
    is a hash of the whole prompt.  Under this recommender a twin and a placebo are both fresh draws, so
    the twin distances are exchangeable with the placebo distances: the null hypothesis holds exactly."""

    fingerprint = "surface-test"

    def __init__(self, titles):
        self.titles = list(titles)

    def predict(self, requests):
        out = []
        for r in requests:
            h = int.from_bytes(hashlib.blake2b(repr(r.messages).encode(), digest_size=8).digest(), "little")
            i = h % len(self.titles)
            out.append(Prediction(titles=tuple(self.titles[i : i + 10]), parse_status=PARSE_NA, raw=""))
        return out


@pytest.mark.slow
def test_null_threshold_keeps_its_guarantee_when_the_prompt_surface_matters(tmp_path):
    ds = make_world(n_users=200, seed=2)
    inter = build_interactions(
        ds, preset("repro", data__dataset="synthetic", data__n_rows=1400, data__n_candidates=20).data
    )
    rec = SurfaceRecommender(inter.items["title"].tolist())
    res = _run(ds, 0.0, 1.0, tmp_path, recommender=rec, data__n_rows=1400)
    cal = res.record.metrics.calibration
    assert cal.share_placebo_nonzero > 0.5  # the placebo moves the answer: the threshold has work to do
    rows = res.rows["neutral"]
    k, n = int(rows["viol_fixed"].sum()), len(rows)
    lo, _ = claims.clopper_pearson(k, n)
    assert lo <= cal.alpha, f"false-flag rate {k}/{n} is significantly above alpha = {cal.alpha}"


def test_placebo_reorders_the_demographics_only():
    from facterlab.datatypes import PromptRequest

    user = "Recommend.\n\nUser demographics:\n- Gender: F\n- Age: 25-34\n- Occupation: writer\n\nHistory:\n- A (1990)"
    r = PromptRequest(messages=(("system", "s"), ("user", user)), seed=3)
    p = placebo_request(r)
    assert p.seed == 3 and p.messages[0] == ("system", "s")
    assert p.messages[1][1].split("\n")[3:6] == ["- Occupation: writer", "- Age: 25-34", "- Gender: F"]
    assert sorted(p.messages[1][1].splitlines()) == sorted(user.splitlines())
    assert placebo_request(PromptRequest(messages=(("user", "no block"),))).messages[0][1] == "no block"


def test_twin_attributes_flip_every_attribute_and_are_reproducible():
    vals = {"gender": ["M", "F"], "age": ["18-24", "25-34", "56+"], "occupation": ["a", "b", "c"]}
    rows = pd.DataFrame({"gender": ["M", "F"] * 5, "age": ["56+"] * 10, "occupation": ["a", "b"] * 5})
    t1 = twin_attributes(rows, vals, "distinct", seed=4)
    assert t1 == twin_attributes(rows, vals, "distinct", seed=4)
    for r, t in zip(rows.to_dict("records"), t1):
        assert all(r[a] != t[a] for a in ("gender", "age", "occupation"))


def test_null_threshold_is_the_conformal_quantile_of_the_placebos():
    p = np.arange(1, 20, dtype=float)  # n = 19, alpha 0.1: k = ceil(0.9 * 20) = 18
    t = null_threshold(p, 0.1, tol=0.0)
    assert t.quantile == 18.0 and t.k_index == 18
    with pytest.raises(ValueError):
        null_threshold([], 0.1)


def test_contrast_mining_names_the_enriched_feature_not_the_frequent_one():
    viol, ref = ViolationBuffer(50), ViolationBuffer(200)
    f = {"gender": "F", "age": "25-34", "occupation": "writer"}
    for i in range(10):  # every output of the group is Drama; only the violations carry Romance
        viol.push(f, f"V{i}", ["Drama", "Romance"] if i < 6 else ["Drama"])
        ref.push(f, f"R{i}", ["Drama"])
    counted = [r.text() for r in mine_rules(viol, f, min_count=3)]
    contrast = [r.text() for r in mine_rules(viol, f, min_count=3, reference=ref)]
    assert "AVOID: (gender=F) -> (Drama-only)" in counted
    assert "AVOID: (gender=F) -> (Drama-only)" not in contrast
    assert "AVOID: (gender=F) -> (Romance-only)" in contrast
    assert enrichment(6, 10, 0, 10) > 1.5 > enrichment(10, 10, 10, 10)


def test_detector_summary_matches_sklearn():
    from sklearn.metrics import roc_auc_score

    rng = np.random.default_rng(0)
    lab = rng.random(300) < 0.3
    s = rng.random(300) + lab * 0.5
    raw = [json.dumps({"top1_changed": bool(x), "top1_unfair": bool(x)}) for x in lab]
    rec = pd.DataFrame({"pass": 1, "raw": raw, "viol_fixed": s > 1.0, "S": s, "delta": 0.0})
    d = detector_summary(rec)
    assert d["auc"] == pytest.approx(roc_auc_score(lab, s))
    assert rank_auc([1, 1, 1], [0, 1, 0]) == 0.5
    tp = int((lab & (s > 1.0)).sum())
    assert d["precision"] == pytest.approx(tp / int((s > 1.0).sum()))
    assert d["recall"] == pytest.approx(tp / int(lab.sum()))
    assert detector_summary(rec.assign(raw="plain text")) is None


@pytest.mark.slow
def test_repro_corrected_dynamic_count_is_the_adaptive_bar_plus_c_over_sqrt_n(tmp_path):
    ds = make_world(n_users=80, seed=3)
    res = gt.handbuilt_run(ds, 6.0, 0.0, tmp_path, data__n_rows=300)
    rec = res.rows["facter"]
    n = int((rec["pass"] == 1).sum())
    want = rec["S"] > rec["q_before"] + rec["repro_count_c"] / np.sqrt(n)
    assert rec["viol_repro_dynamic"].tolist() == want.tolist() and want.any()
    counts = res.record.metrics.methods["facter"].violations["repro_dynamic"]
    assert counts == rec.groupby("pass")["viol_repro_dynamic"].sum().tolist()


@pytest.mark.slow
def test_q_star_flag_uses_the_null_statistic(twin_runs):
    _, runs = twin_runs
    rec = runs[(6.0, 1.0)].rows["facter"]
    q_star = runs[(6.0, 1.0)].record.metrics.methods["facter"].threshold_path[-1]
    assert rec["viol_q_star"].tolist() == (rec["delta"] > q_star).tolist()


def test_mine_value_rules_checks_its_input():
    b = ViolationBuffer()
    for _ in range(3):
        b.push({"gender": "M", "age": "1", "occupation": "x"}, "Heat (1995)", ["Crime"])
    assert mine_value_rules(b, "age", 1) == mine_value_rules(b, "age", "1") != ()
    with pytest.raises(ValueError, match="unknown attribute"):
        mine_value_rules(b, "zip", "1")
