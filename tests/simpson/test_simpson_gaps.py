"""Simpson part: gaps, lemma, matching theorem and three-factor decomposition (docs/SIMPSON.md §1)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from sklearn.metrics import ndcg_score

from facterlab.simpson import exposure as ex
from facterlab.simpson.gaps import (
    UserStats,
    aggregate_gap,
    decompose,
    expected_per_user_gap,
    gaps_from_arrays,
    gaps_from_table,
    lemma_aggregate_gap,
    per_user_gap,
    reweighted_aggregate_gap,
    user_mixtures,
)


def random_world(seed, n=60, m=12, p_rel=0.35):
    rng = np.random.default_rng(seed)
    positions = np.argsort(rng.random((n, m)), axis=1) + 1  # a random permutation per user
    relevant = rng.random((n, m)) < p_rel
    groups = rng.permutation(np.r_[np.zeros(m // 2, int), np.ones(m - m // 2, int)])
    return positions, relevant, groups


def to_table(positions, relevant, groups):
    n, m = positions.shape
    return pd.DataFrame(
        {
            "user": np.repeat(np.arange(n), m),
            "item": np.tile(np.arange(m), n),
            "group": np.tile(groups, n),
            "relevant": relevant.ravel(),
            "position": positions.ravel(),
        }
    )


# ---------------------------------------------------------------------------------------------- golden


def test_exposure_golden():
    assert ex.log_discount(np.array([1, 3, 7])).tolist() == [1.0, 0.5, 1 / 3]
    # C(2) with log: (1 + 1/log2(3))/2
    assert ex.competition(np.array([2]))[0] == pytest.approx((1 + 1 / np.log2(3)) / 2, abs=1e-15)
    assert np.isnan(ex.competition(np.array([0]))[0])
    with pytest.raises(ValueError, match="positions start at 1"):
        ex.log_discount([0])


def test_hand_computed_gaps_log_exposure():
    # user 0: group 0 item at position 1, group 1 items at 2 and 4; user 1: group 0 at 3, group 1 at 1
    positions = np.array([[1, 2, 3, 4], [3, 1, 2, 4]])
    relevant = np.array([[1, 1, 0, 1], [1, 1, 0, 0]], bool)
    groups = np.array([0, 1, 0, 1])
    pug, agg = gaps_from_arrays(positions, relevant, groups)
    f = lambda p: 1 / np.log2(1 + p)  # noqa: E731
    g_u0 = f(1) - (f(2) + f(4)) / 2
    g_u1 = f(3) - f(1)
    assert pug.value == pytest.approx((g_u0 + g_u1) / 2, abs=1e-15)
    assert pug.share_defined == 1.0 and pug.n_defined == 2
    assert agg.value == pytest.approx((f(1) + f(3)) / 2 - (f(2) + f(4) + f(1)) / 3, abs=1e-15)
    assert agg.n_pairs_0 == 2 and agg.n_pairs_1 == 3


def test_table_and_arrays_agree_and_match_pandas_groupby():
    positions, relevant, groups = random_world(1)
    table = to_table(positions, relevant, groups)
    a = UserStats.from_arrays(positions, relevant, groups)
    t = UserStats.from_table(table.sample(frac=1.0, random_state=0))  # row order must not matter
    np.testing.assert_array_equal(a.n0, t.n0)
    np.testing.assert_allclose(a.sum1, t.sum1, rtol=0, atol=1e-12)
    pug_t, agg_t = gaps_from_table(table)
    pug_a, agg_a = gaps_from_arrays(positions, relevant, groups)
    assert pug_t.value == pytest.approx(pug_a.value, abs=1e-14)
    assert agg_t.value == pytest.approx(agg_a.value, abs=1e-14)
    # independent path: pandas groupby of relevant rows
    rel = table[table.relevant].assign(e=lambda d: 1 / np.log2(1 + d.position))
    per = rel.pivot_table(index="user", columns="group", values="e", aggfunc="mean").dropna()
    assert pug_a.value == pytest.approx((per[0] - per[1]).mean(), abs=1e-12)
    assert pug_a.n_defined == len(per)
    pooled = rel.groupby("group")["e"].mean()
    assert agg_a.value == pytest.approx(pooled[0] - pooled[1], abs=1e-12)


def test_share_defined_and_users_without_relevant_rows_count():
    table = pd.DataFrame(
        {
            "user": ["a", "a", "b", "c"],
            "item": [1, 2, 1, 1],
            "group": [0, 1, 0, 1],
            "relevant": [True, True, True, False],
            "position": [1, 2, 1, 1],
        }
    )
    pug, agg = gaps_from_table(table, exposure="position")
    assert pug.n_users == 3 and pug.n_defined == 1 and pug.share_defined == pytest.approx(1 / 3)
    assert pug.value == -1.0
    assert agg.value == pytest.approx(1.0 - 2.0)


def test_missing_values_and_errors():
    st = UserStats(np.array([1, 0]), np.array([0, 2]), np.array([1.0, 0]), np.array([0, 1.0]), "log")
    pug = per_user_gap(st)
    assert np.isnan(pug.value) and "U* is empty" in pug.missing_reason
    agg = aggregate_gap(UserStats(np.array([1]), np.array([0]), np.array([1.0]), np.array([0.0])))
    assert np.isnan(agg.value) and agg.missing_reason == "no relevant pair of group 1"
    with pytest.raises(ValueError, match="missing column"):
        UserStats.from_table(pd.DataFrame({"user": [1], "item": [1]}))
    with pytest.raises(ValueError, match="item groups must be 0 or 1"):
        UserStats.from_arrays(np.array([[1, 2]]), np.array([[1, 1]]), np.array([0, 2]))
    with pytest.raises(ValueError, match="must match"):
        UserStats.from_arrays(np.array([[1, 2]]), np.array([[1, 1, 0]]), np.array([0, 1]))
    with pytest.raises(ValueError, match="unknown exposure"):
        UserStats.from_arrays(np.array([[1, 2]]), np.array([[1, 1]]), np.array([0, 1]), exposure="dcg")


# ---------------------------------------------------------------------------------------------- identities


@pytest.mark.parametrize("seed", range(5))
@pytest.mark.parametrize("exposure", ["log", "position"])
def test_lemma_user_mixture(seed, exposure):
    positions, relevant, groups = random_world(seed)
    st = UserStats.from_arrays(positions, relevant, groups, exposure)
    assert abs(lemma_aggregate_gap(st) - aggregate_gap(st).value) < 1e-12
    p0, p1 = user_mixtures(st)
    assert p0.sum() == pytest.approx(1.0, abs=1e-14) and p1.sum() == pytest.approx(1.0, abs=1e-14)


@pytest.mark.parametrize("seed", range(5))
def test_matching_theorem_with_matched_distributions(seed):
    # Build data where n_0(u) = n_1(u) for every user, so P_0 = P_1 = Q.
    rng = np.random.default_rng(100 + seed)
    n, m = 80, 20
    groups = np.r_[np.zeros(10, int), np.ones(10, int)]
    positions = np.argsort(rng.random((n, m)), axis=1) + 1
    k = rng.integers(0, 6, size=n)  # relevant items per group per user (0 for some users)
    relevant = np.zeros((n, m), bool)
    for u in range(n):
        relevant[u, rng.choice(10, k[u], replace=False)] = True
        relevant[u, 10 + rng.choice(10, k[u], replace=False)] = True
    st = UserStats.from_arrays(positions, relevant, groups)
    p0, p1 = user_mixtures(st)
    np.testing.assert_allclose(p0, p1, rtol=0, atol=1e-15)
    assert abs(aggregate_gap(st).value - expected_per_user_gap(st, p0)) < 1e-12
    # with unequal n_s(u) per user the aggregate generally differs from the per-user gap
    assert abs(aggregate_gap(st).value - per_user_gap(st).value) > 1e-6


@pytest.mark.parametrize("seed", range(5))
def test_reweighting_pairs_by_inverse_counts_gives_per_user_gap(seed):
    positions, relevant, groups = random_world(seed, p_rel=0.3)
    st = UserStats.from_arrays(positions, relevant, groups)
    assert abs(reweighted_aggregate_gap(positions, relevant, groups) - per_user_gap(st).value) < 1e-12


def test_expected_per_user_gap_checks_its_distribution():
    st = UserStats(np.array([1, 0]), np.array([1, 1]), np.array([1.0, 0]), np.array([0.5, 1.0]))
    with pytest.raises(ValueError, match="outside U"):
        expected_per_user_gap(st, [0.5, 0.5])
    assert expected_per_user_gap(st, [1.0, 0.0]) == 0.5


@pytest.mark.parametrize("seed", range(5))
@pytest.mark.parametrize("exposure", ["log", "position"])
def test_three_factor_decomposition(seed, exposure):
    positions, relevant, groups = random_world(seed)
    st = UserStats.from_arrays(positions, relevant, groups, exposure)
    d = decompose(st)
    assert abs(d.total - aggregate_gap(st).value) < 1e-12
    has = st.n > 0
    cp = d.competition * d.performance
    np.testing.assert_allclose(st.e0[st.n0 > 0], (cp + d.pi1 * d.gap)[st.n0 > 0], rtol=0, atol=1e-12)
    np.testing.assert_allclose(st.e1[st.n1 > 0], (cp - d.pi0 * d.gap)[st.n1 > 0], rtol=0, atol=1e-12)
    assert np.all(np.isnan(d.performance[~has]))


def test_performance_is_ndcg_cross_checked_with_sklearn():
    positions, relevant, groups = random_world(7, n=30, m=15, p_rel=0.4)
    d = decompose(UserStats.from_arrays(positions, relevant, groups))
    ok = relevant.sum(axis=1) > 0
    want = [ndcg_score(relevant[u : u + 1].astype(float), -positions[u : u + 1].astype(float)) for u in np.where(ok)[0]]
    np.testing.assert_allclose(d.performance[ok], want, rtol=0, atol=1e-12)
    assert np.all(d.performance[ok] <= 1 + 1e-12)


# ---------------------------------------------------------------------------------------------- factor definitions


def test_competition_and_performance_as_the_paper_defines_them_by_hand():
    """Competition C(u) = best mean exposure the user's n(u) relevant items could get (they fill
    positions 1..n(u)); performance = the realised mean exposure over that best (nDCG for log)."""
    f = lambda p: 1 / np.log2(1 + p)  # noqa: E731
    # user A: relevant items at positions 1 (group 0) and 2 (group 1): a perfect ranking
    # user B: relevant items at 2 (group 1), 4 (group 0), 5 (group 1): Grey items at 1 and 3
    positions = np.array([[1, 2, 3, 4, 5], [4, 2, 1, 5, 3]])
    relevant = np.array([[1, 1, 0, 0, 0], [1, 1, 0, 1, 0]], bool)
    groups = np.array([0, 1, 0, 1, 1])
    d = decompose(UserStats.from_arrays(positions, relevant, groups))
    assert d.competition[0] == pytest.approx((f(1) + f(2)) / 2, abs=1e-15)
    assert d.competition[1] == pytest.approx((f(1) + f(2) + f(3)) / 3, abs=1e-15)
    assert d.performance[0] == pytest.approx(1.0, abs=1e-15)
    assert d.performance[1] == pytest.approx((f(4) + f(2) + f(5)) / (f(1) + f(2) + f(3)), abs=1e-15)
    assert d.pi1.tolist() == [0.5, 2 / 3]
    # competition depends on n(u) only (not on where the items sit); more relevant items, smaller C
    shuffled = decompose(UserStats.from_arrays(positions[:, ::-1], relevant, groups))
    np.testing.assert_array_equal(shuffled.competition, d.competition)
    assert d.competition[1] < d.competition[0]


def test_aggregate_gap_from_competition_alone_by_hand():
    """Perfect rankings (performance 1) and a per-user gap of 0 on U*: the whole AggregateGap is the
    competition term.  Position exposure: user A has one group-0 item at 1; user B has group 0 at
    {1, 4} and group 1 at {2, 3} (e_0 = e_1 = 2.5).  Pooled: group 0 at (1 + 1 + 4)/3 = 2, group 1
    at 2.5, AggregateGap = -0.5; competition C(A) = 1, C(B) = 2.5, P_0 = (1/3, 2/3), P_1 = (0, 1):
    E_P0(C) - E_P1(C) = 2 - 2.5 = -0.5."""
    positions = np.array([[1, 2, 3, 4, 5], [1, 2, 3, 4, 5]])
    relevant = np.array([[1, 0, 0, 0, 0], [1, 1, 1, 1, 0]], bool)
    groups = np.array([0, 1, 1, 0, 1])
    st = UserStats.from_arrays(positions, relevant, groups, exposure="position")
    d = decompose(st)
    assert per_user_gap(st).value == 0.0 and per_user_gap(st).n_defined == 1
    assert aggregate_gap(st).value == pytest.approx(-0.5, abs=1e-15)
    np.testing.assert_allclose(d.competition, [1.0, 2.5])
    np.testing.assert_allclose(d.performance, [1.0, 1.0])
    assert d.competition_performance == pytest.approx(-0.5, abs=1e-15)
    assert d.per_user_gap_term == pytest.approx(0.0, abs=1e-15)


def test_ips_estimand_by_hand():
    from facterlab.simpson.gaps import ips_estimand

    # user 0 has both groups (e0 = 1, e1 = 2), user 1 only group 0 (e0 = 3): position exposure
    st = UserStats(np.array([1, 1]), np.array([1, 0]), np.array([1.0, 3.0]), np.array([2.0, 0.0]), "position")
    assert ips_estimand(st) == pytest.approx((1 + 3) / 2 - 2)
    assert per_user_gap(st).value == -1.0
    assert np.isnan(ips_estimand(UserStats(np.array([1]), np.array([0]), np.array([1.0]), np.array([0.0]))))
