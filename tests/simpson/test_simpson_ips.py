"""Simpson part: IPS estimation from the random experiment (docs/SIMPSON.md §2)."""

from __future__ import annotations

from types import SimpleNamespace as NS

import numpy as np
import pytest

from facterlab.simpson.gaps import per_user_gap
from facterlab.simpson.ips import ips_estimate, naive_estimate, quantile_cells, weights_counts, weights_model
from facterlab.simpson.simulate import SimpsonConfig, random_experiment, simulate


def hand_experiment():
    # group 0: cell 0 has 2 shown rows, 2 relevant; cell 1 has 4 shown rows, 1 relevant.
    rel = np.array([1, 1, 1, 0, 0, 0, 1, 1, 0, 1])
    grp = np.array([0, 0, 0, 0, 0, 0, 1, 1, 1, 1])
    cell = np.array([0, 0, 1, 1, 1, 1, 0, 1, 1, 1])
    expo = np.array([0.9, 0.7, 0.2, 0, 0, 0, 0.6, 0.3, 0, 0.1])
    return NS(
        relevant=rel,
        group=grp,
        exposure=expo,
        user_feature=cell.astype(float),
        user_embedding=np.c_[cell, 1 - cell].astype(float),
    ), cell


def test_count_weights_by_hand():
    e, cell = hand_experiment()
    w = weights_counts(e, cells=cell)
    # group 0: rate 3/6; h(cell 0) = 2/2, h(cell 1) = 1/4 -> w = 0.5 and 2.0
    # group 1: rate 3/4; h(cell 0) = 1/1, h(cell 1) = 2/3 -> w = 0.75 and 1.125
    np.testing.assert_allclose(w[[0, 1, 2, 6, 7, 9]], [0.5, 0.5, 2.0, 0.75, 1.125, 1.125])
    assert np.isnan(w[[3, 4, 5, 8]]).all()


def test_self_normalised_estimate_by_hand():
    e, cell = hand_experiment()
    m0 = (0.5 * 0.9 + 0.5 * 0.7 + 2.0 * 0.2) / 3.0
    m1 = (0.75 * 0.6 + 1.125 * 0.3 + 1.125 * 0.1) / 3.0
    est = ips_estimate(e, "counts", n_bins=2)
    assert est.value == pytest.approx(m0 - m1, abs=1e-15)
    assert (est.n_0, est.n_1) == (3, 3)
    assert naive_estimate(e).value == pytest.approx(0.6 - 1.0 / 3, abs=1e-15)


def test_quantile_cells_are_balanced():
    c = quantile_cells(np.random.default_rng(0).random(1000), 10)
    assert np.bincount(c).tolist() == [100] * 10


def test_weights_are_one_when_relevance_does_not_depend_on_the_user():
    rng = np.random.default_rng(0)
    n = 4000
    e = NS(
        relevant=np.ones(n, bool),
        group=rng.integers(0, 2, n),
        exposure=rng.random(n),
        user_feature=rng.random(n),
        user_embedding=rng.random((n, 3)),
    )
    np.testing.assert_allclose(weights_counts(e), 1.0)
    assert ips_estimate(e, "counts").value == pytest.approx(naive_estimate(e).value, abs=1e-14)
    est = ips_estimate(e, "model")
    assert np.isnan(est.value) and "relevance constant" in est.missing_reason


def test_model_weights_recover_a_logistic_propensity():
    rng = np.random.default_rng(1)
    n = 40_000
    x = rng.standard_normal(n)
    p = 1 / (1 + np.exp(-(0.5 + 1.5 * x)))
    e = NS(
        relevant=rng.random(n) < p,
        group=np.zeros(n, int),
        exposure=np.ones(n),
        user_feature=x,
        user_embedding=x[:, None],
    )
    w = weights_model(e)
    o = e.relevant
    np.testing.assert_allclose(w[o], e.relevant.mean() / p[o], rtol=0.08)


def test_unknown_method_and_empty_groups():
    e, _ = hand_experiment()
    with pytest.raises(ValueError, match="unknown IPS method"):
        ips_estimate(e, "magic")
    e.relevant = np.where(e.group == 1, 0, e.relevant)
    est = naive_estimate(e)
    assert np.isnan(est.value) and est.missing_reason == "no observed relevant item of group 1"


@pytest.mark.slow
def test_ips_approaches_per_user_gap_as_n_grows():
    """With T = -0.1 almost every user has relevant items of both groups (|U*|/N ~ 0.99), so the
    IPS target is (nearly) the PerUserGap; its error shrinks as N grows."""
    errs = {}
    for n in (2_000, 60_000):
        e_cnt, e_mod, e_agg = [], [], []
        for seed in range(3):
            sim = simulate(SimpsonConfig(n_users=n, threshold=-0.1, sigma1=10.0, d1=3.0, bias=0.03, seed=seed))
            exp = random_experiment(sim)
            pu = per_user_gap(sim.stats)
            assert pu.share_defined > 0.985
            e_cnt.append(abs(ips_estimate(exp, "counts").value - pu.value))
            e_mod.append(abs(ips_estimate(exp, "model").value - pu.value))
            e_agg.append(abs(naive_estimate(exp).value - pu.value))
        errs[n] = (np.mean(e_cnt), np.mean(e_mod), np.mean(e_agg))
    assert errs[60_000][0] < errs[2_000][0] and errs[60_000][1] < errs[2_000][1]
    assert errs[60_000][0] < 0.0025 and errs[60_000][1] < 0.0015  # pp / 100
    assert errs[60_000][1] < errs[60_000][2]  # the model estimate beats the naive one


def full_enumeration(sim):
    """An 'experiment' that shows every user every item once: with it the self-normalised oracle
    estimates equal their estimands exactly (no sampling)."""
    n, m = sim.positions.shape
    users = np.repeat(np.arange(n), m)
    items = np.tile(np.arange(m), n)
    return NS(
        relevant=sim.relevant.ravel(),
        group=sim.groups[items],
        exposure=1 / np.log2(1.0 + sim.positions.ravel().astype(float)),
        n_relevant_0=sim.stats.n0[users],
        n_relevant_1=sim.stats.n1[users],
    )


def test_oracle_weights_target_the_ips_estimand_and_restricted_ones_the_per_user_gap():
    from facterlab.simpson.gaps import ips_estimand

    sim = simulate(SimpsonConfig(n_users=400, d1=4.0, bias=0.03, seed=4))
    pu = per_user_gap(sim.stats)
    assert pu.share_defined < 0.95  # some users lack a group, so the two targets differ
    e = full_enumeration(sim)
    assert ips_estimate(e, "oracle").value == pytest.approx(ips_estimand(sim.stats), abs=1e-12)
    assert ips_estimate(e, "oracle_both").value == pytest.approx(pu.value, abs=1e-12)
    assert abs(ips_estimand(sim.stats) - pu.value) > 1e-3


def test_oracle_weights_need_the_true_counts():
    e, _ = hand_experiment()
    with pytest.raises(ValueError, match="true counts"):
        ips_estimate(e, "oracle")
    e.n_relevant_0 = np.zeros(10, int)
    e.n_relevant_1 = np.ones(10, int)
    with pytest.raises(ValueError, match="counts do not match"):
        ips_estimate(e, "oracle")


def test_run_reports_every_named_estimator():
    from facterlab.simpson.simulate import simulate_and_measure

    r = simulate_and_measure(SimpsonConfig(n_users=2_000, seed=1, bias=0.03))
    for k in ("naive_estimate", "ips_counts", "ips_model", "ips_oracle", "ips_oracle_both", "ips_estimand"):
        assert np.isfinite(r[k]), k
    assert (r["noise"], r["mu1"]) == ("user", "orthonormal")
