"""FACTER core: neighbours, scores, conformal threshold, corrections, threshold rules, repair mining."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from facterlab.facter.conformal import (
    NOT_FITTED,
    ConformalThreshold,
    ReproCountCorrection,
    conformal_k,
    corrected_threshold,
    hoeffding_constant,
    min_calibration_size,
)
from facterlab.facter.neighbours import counterfactual_neighbours
from facterlab.facter.repair import ViolationBuffer, mine_rules
from facterlab.facter.scores import ItemRepresenter, counterfactual_disparity, nonconformity_scores, top1_distance
from facterlab.facter.threshold import OnlineThreshold, threshold_path, update_threshold
from facterlab.models.fake import HashEncoder

F = {"gender": "F", "age": "25-34", "occupation": "writer"}
M = {"gender": "M", "age": "25-34", "occupation": "writer"}


# ------------------------------------------------------------------------------------ neighbours
def _brute(q, qg, r, rg, tau, tau_x=None, self_mode=False):
    qn = q / np.linalg.norm(q, axis=1, keepdims=True)
    rn = r / np.linalg.norm(r, axis=1, keepdims=True)
    out = []
    for i in range(len(q)):
        nb = []
        for j in range(len(r)):
            if self_mode and i == j:
                continue
            cos = float(qn[i] @ rn[j])
            if cos > tau and qg[i] != rg[j] and (tau_x is None or np.linalg.norm(qn[i] - rn[j]) <= tau_x):
                nb.append(j)
        out.append(nb)
    return out


@pytest.mark.parametrize("tau_x", [None, 0.6])
def test_neighbours_blocked_equals_brute_force(tau_x):
    rng = np.random.default_rng(0)
    base = rng.normal(size=(5, 8))
    x = np.repeat(base, 12, axis=0) + 0.3 * rng.normal(size=(60, 8))  # clusters -> many neighbours
    g = rng.integers(0, 3, size=60).tolist()
    # tiny block budget: one query row per block
    idx = counterfactual_neighbours(x, g, tau_rho=0.8, tau_x=tau_x, max_block_bytes=1)
    want = _brute(x, g, x, g, 0.8, tau_x, self_mode=True)
    assert [idx.neighbours(i).tolist() for i in range(60)] == want
    assert sum(map(len, want)) > 50  # the case is not trivial
    # query vs reference (the online phase)
    idx2 = counterfactual_neighbours(x[:7], g[:7], x[7:], g[7:], tau_rho=0.8, tau_x=tau_x)
    assert [idx2.neighbours(i).tolist() for i in range(7)] == _brute(x[:7], g[:7], x[7:], g[7:], 0.8, tau_x)


def test_neighbours_threshold_is_strict_and_groups_must_differ():
    x = np.array([[1.0, 0.0], [1.0, 0.0], [0.6, 0.8]])
    # cos(0, 2) = 0.6 exactly: not > 0.6
    idx = counterfactual_neighbours(x, ["a", "b", "b"], tau_rho=0.6)
    assert idx.neighbours(0).tolist() == [1]
    assert idx.neighbours(1).tolist() == [0]  # row 2 shares b
    assert idx.counts.tolist() == [1, 1, 0]


def test_neighbours_compare_group_labels_by_value_not_by_repr():
    """A label read as np.int64 in one frame and int in another is one group (their repr differs under
    numpy 2, which made them 'counterfactual' neighbours of each other before)."""
    x = np.array([[1.0, 0.0], [1.0, 0.0], [1.0, 0.0]])
    labels = [("M", 25), ("M", np.int64(25)), ["F", 25]]
    idx = counterfactual_neighbours(x, labels, tau_rho=0.5)
    assert idx.counts.tolist() == [1, 1, 2]
    assert idx.neighbours(0).tolist() == [2] and idx.neighbours(1).tolist() == [2]
    ref = counterfactual_neighbours(x[:1], [("M", np.int64(25))], ref_emb=x[1:], ref_groups=labels[:2], tau_rho=0.5)
    assert ref.counts.tolist() == [0]


def test_neighbours_bad_input():
    with pytest.raises(ValueError, match="zero vector"):
        counterfactual_neighbours(np.zeros((2, 3)), ["a", "b"])
    with pytest.raises(ValueError, match="one protected-group label"):
        counterfactual_neighbours(np.eye(2), ["a"])


# ------------------------------------------------------------------------------------ scores
def test_score_golden_values():
    # hand computation: p0 = (0.6, 0.8), target (1, 0): d = 1 - 0.6 = 0.4
    # neighbours of row 0: ref rows 0 (0,1) and 1 (1,0): distances sqrt(0.36+0.04)=0.6325, sqrt(0.16+0.64)=0.8944
    # Delta = 0.8944, S = 0.4 + 0.7 * 0.8944 = 1.02610
    p = np.array([[0.6, 0.8], [1.0, 0.0]])
    t = np.array([[1.0, 0.0], [0.0, 1.0]])
    r = np.array([[0.0, 1.0], [1.0, 0.0]])
    idx = counterfactual_neighbours(
        np.array([[1.0, 0.0], [0.0, 1.0]]), ["a", "a"], np.array([[1.0, 0.01], [0.99, 0.0]]), ["b", "c"], tau_rho=0.9
    )
    assert idx.neighbours(0).tolist() == [0, 1] and idx.neighbours(1).tolist() == []
    sc = nonconformity_scores(p, t, idx, r, lam=0.7)
    assert sc["d"].tolist() == pytest.approx([0.4, 1.0])
    assert sc["delta"].tolist() == pytest.approx([math.sqrt(0.8), 0.0])
    assert sc["S"].tolist() == pytest.approx([0.4 + 0.7 * math.sqrt(0.8), 1.0])


def test_disparity_chunked_equals_unchunked():
    rng = np.random.default_rng(1)
    x = rng.normal(size=(40, 6))
    idx = counterfactual_neighbours(x, rng.integers(0, 2, 40).tolist(), tau_rho=-1.0)
    p, r = rng.normal(size=(40, 4)), rng.normal(size=(40, 4))
    a = counterfactual_disparity(p, idx, r)
    b = counterfactual_disparity(p, idx, r, max_chunk_bytes=7 * 8 * 4)  # 7 pairs per chunk
    brute = [max(np.linalg.norm(p[i] - r[j]) for j in idx.neighbours(i)) for i in range(40)]
    assert np.allclose(a, b) and np.allclose(a, brute)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_disparity_is_bit_identical_to_a_per_row_loop(dtype):
    rng = np.random.default_rng(2)
    n, dim = 300, 384
    x = rng.normal(size=(n, 8))
    idx = counterfactual_neighbours(x, rng.integers(0, 3, n).tolist(), tau_rho=0.75)
    assert (idx.counts == 0).any() and idx.counts.max() > 1
    p, r = rng.normal(size=(n, dim)).astype(dtype), rng.normal(size=(n, dim)).astype(dtype)
    p64, r64 = p.astype(np.float64), r.astype(np.float64)
    loop = np.zeros(n)
    for i in range(n):
        nb = idx.neighbours(i)
        if len(nb):
            loop[i] = np.linalg.norm(p64[i] - r64[nb], axis=1).max()
    for chunk_bytes in (1e6, 3 * 8 * dim, 1e9):  # cache-sized, 3 pairs per chunk, one chunk
        assert np.array_equal(counterfactual_disparity(p, idx, r, max_chunk_bytes=chunk_bytes), loop)


def test_empty_prediction_is_scored_as_far_not_zero():
    assert top1_distance(np.zeros((1, 3)), np.array([[1.0, 0, 0]])).tolist() == [1.0]
    rep = ItemRepresenter(HashEncoder(16), pd.DataFrame({"item_id": [1], "title": ["A"], "text": ["A :: X"]}))
    v = rep.predictions([-1, 1, -1], ["", "ignored", "raw title"])
    assert np.all(v[0] == 0)
    assert np.allclose(v[1], HashEncoder(16).encode(["A :: X"])[0])  # mapped -> item text, not the raw title
    assert np.allclose(v[2], HashEncoder(16).encode(["raw title"])[0])
    with pytest.raises(KeyError, match="not in the catalogue"):
        rep.items([99])


# ------------------------------------------------------------------------------------ conformal
def test_conformal_golden_and_order_statistic():
    s = [0.5, 0.1, 0.9, 0.3, 0.7, 0.2, 0.8, 0.4, 0.6, 1.0, 0.05]  # n = 11, alpha 0.2 -> k = ceil(9.6) = 10
    ct = ConformalThreshold(0.2).fit(s)
    assert (ct.k_index_, ct.n_) == (10, 11)
    assert ct.threshold_ == 0.9
    rng = np.random.default_rng(0)
    for n in (9, 50, 1750):
        for alpha in (0.1, 0.2, 0.05):
            if n < min_calibration_size(alpha):
                continue
            x = rng.random(n)
            k = conformal_k(n, alpha)
            # independent: numpy's inverted-CDF quantile at level k/n is the k-th order statistic
            assert ConformalThreshold(alpha).fit(x).threshold_ == np.quantile(x, k / n, method="inverted_cdf")
            assert k == math.ceil((1 - alpha) * (n + 1) - 1e-9)


def test_conformal_k_float_noise_and_minimum():
    assert conformal_k(9, 0.1) == 9  # (0.9)(10) must not round up to 10
    assert min_calibration_size(0.1) == 9 and min_calibration_size(0.2) == 4 and min_calibration_size(0.05) == 19
    ConformalThreshold(0.1).fit(np.arange(9.0))
    with pytest.raises(ValueError, match="at least n=9 scores are needed"):
        ConformalThreshold(0.1).fit(np.arange(8.0))


def test_conformal_errors():
    ct = ConformalThreshold(0.1)
    with pytest.raises(RuntimeError, match="not fitted yet"):
        ct.exceeds([1.0])
    assert "not fitted" in NOT_FITTED
    with pytest.raises(ValueError, match="alpha must be in"):
        ConformalThreshold(1.5)
    with pytest.raises(ValueError, match="NaN"):
        ct.fit([np.nan] * 20)


@pytest.mark.slow
def test_fixed_threshold_exceedance_rate_matches_alpha():
    """Exchangeable scores: P(S_test > Q0) = (n + 1 - k) / (n + 1) exactly (continuous scores)."""
    rng = np.random.default_rng(12345)
    n, alpha, seeds = 99, 0.1, 20000
    k = conformal_k(n, alpha)
    expected = (n + 1 - k) / (n + 1)  # 0.10 here
    cal = rng.standard_exponential(size=(seeds, n))
    q0 = np.sort(cal, axis=1)[:, k - 1]
    test = rng.standard_exponential(size=seeds)
    rate = float(np.mean(test > q0))
    se = math.sqrt(expected * (1 - expected) / seeds)
    assert abs(rate - expected) < 4 * se, (rate, expected)
    assert expected <= alpha


# ------------------------------------------------------------------------------------ corrections
def test_corrections():
    assert hoeffding_constant(0.05) == pytest.approx(math.sqrt(math.log(40) / 2))
    assert corrected_threshold(2.0, "hoeffding", 400, 0.05) == pytest.approx(2.0 + 1.3581 / 20, abs=1e-4)
    with pytest.raises(ValueError, match="unknown correction"):
        corrected_threshold(1.0, "bonferroni", 10)
    rc = ReproCountCorrection(q0=1.0, n=100, maxlen=2)
    # key A violates twice (C 0 -> 1), then B's violation pushes A out of the FIFO of length 2
    assert rc.step("A", 1.05) and rc.last_c == 0
    assert rc.step("A", 1.15) and rc.last_c == 1  # threshold 1.1
    assert not rc.step("A", 1.15) and rc.last_threshold == pytest.approx(1.2)
    assert rc.step("B", 1.01)
    assert rc.threshold("A") == pytest.approx(1.1)  # one A left among the last two


# ------------------------------------------------------------------------------------ threshold rules
def test_threshold_rules_golden():
    # one_sided, gamma 0.95: 1.0 -> S=2.0 -> 0.95 + 0.1 = 1.05; S=0.5 no change
    assert update_threshold(1.0, 2.0, "one_sided", gamma=0.95) == pytest.approx(1.05)
    assert update_threshold(1.0, 0.5, "one_sided", gamma=0.95) == 1.0
    # eq11 as printed: violation is a no-op, a low score pulls Q down
    assert update_threshold(1.0, 2.0, "eq11_as_printed", gamma=0.95) == pytest.approx(1.0)
    assert update_threshold(1.0, 0.0, "eq11_as_printed", gamma=0.95) == pytest.approx(0.95)
    # ACI: +eta(1-alpha) on a violation, -eta*alpha otherwise, floored at 0
    assert update_threshold(1.0, 2.0, "aci", eta=0.05, alpha=0.1) == pytest.approx(1.045)
    assert update_threshold(0.001, 0.0, "aci", eta=0.05, alpha=0.1) == 0.0
    with pytest.raises(ValueError, match="unknown threshold_rule"):
        update_threshold(1.0, 1.0, "two_sided")
    flags, before, qf = threshold_path(1.0, [2.0, 1.02, 1.8], "one_sided", gamma=0.5)  # 1.5, 1.5, 1.65
    assert flags.tolist() == [True, False, True] and before.tolist() == [1.0, 1.5, 1.5] and qf == pytest.approx(1.65)


def test_one_sided_only_rises_and_aci_tracks_alpha():
    rng = np.random.default_rng(3)
    s = rng.random(2000)
    _, before, _ = threshold_path(0.2, s, "one_sided")
    assert np.all(np.diff(before) >= 0)
    th = OnlineThreshold(0.0, "aci", eta=0.01, alpha=0.1)
    flags = np.array([th.step(x) for x in s])
    assert abs(flags[500:].mean() - 0.1) < 0.03  # long-run violation rate near alpha (Gibbs & Candes)


# ------------------------------------------------------------------------------------ repair
def test_mining_golden_per_attr_and_tuple():
    b = ViolationBuffer(maxlen=50)
    for _ in range(3):
        b.push(F, "Sleepless (1993)", ["Romance", "Comedy"])
    b.push(F, "Heat (1995)", ["Action"])
    b.push(M, "Heat (1995)", ["Action"])
    b.push(M, "Heat (1995)", ["Action"])
    rules = [r.text() for r in mine_rules(b, F)]
    # gender=F: Comedy 3, Romance 3 (features first, alphabetical at equal count), title Sleepless 3;
    # Action 1 < 3.  age=25-34 and occupation=writer see all 6: Action 3 first (count desc).
    assert rules[:3] == [
        "AVOID: (gender=F) -> (Comedy-only)",
        "AVOID: (gender=F) -> (Romance-only)",
        "AVOID: (gender=F) -> (Sleepless (1993))",
    ]
    assert rules[3:8] == [
        "AVOID: (age=25-34) -> (Action-only)",
        "AVOID: (age=25-34) -> (Comedy-only)",
        "AVOID: (age=25-34) -> (Romance-only)",
        "AVOID: (age=25-34) -> (Heat (1995))",
        "AVOID: (age=25-34) -> (Sleepless (1993))",
    ]
    assert len(rules) == 13
    tup = [r.text() for r in mine_rules(b, F, keying="tuple")]
    assert tup == [
        "AVOID: (tuple=gender=F, age=25-34, occupation=writer) -> (Comedy-only)",
        "AVOID: (tuple=gender=F, age=25-34, occupation=writer) -> (Romance-only)",
        "AVOID: (tuple=gender=F, age=25-34, occupation=writer) -> (Sleepless (1993))",
    ]


def test_mining_cap_fifo_and_errors():
    b = ViolationBuffer(maxlen=4)
    for feat in ("A", "B", "C", "D", "E", "F", "G"):
        b.push(F, "", [feat, "X", "Y", "Z", "W", "V"])
    assert len(b) == 4 and b.version == 7
    rules = mine_rules(b, F, max_per_attr=5)
    per_attr = pd.Series([r.attr for r in rules]).value_counts()
    assert per_attr.max() == 5  # capped
    # only the last 4 entries count: D..G appear once each, V..Z four times
    assert {r.feature for r in rules if r.attr == "gender"} == {"V", "W", "X", "Y", "Z"}
    with pytest.raises(ValueError, match="unknown rule_keying"):
        mine_rules(b, F, keying="per_user")
    with pytest.raises(ValueError, match="buffer size"):
        ViolationBuffer(0)
