"""The simulator's fast paths (issue 30) against the straightforward computation they replace, bit for bit.

- :func:`simulate` (scores in place, ranks through flat indices, the world drawn in shared pieces) against
  the expression-by-expression simulation it was before (:func:`reference_simulate` below);
- :class:`BiasFreeWorld` (one world ranked under many biases) against simulating each bias afresh, and
  :func:`calibrate_bias` (the world drawn once, each bias evaluated once) against Brent's method over
  fresh simulations;
- :func:`sweeps` (one pool, shared base points) against one :func:`sweep` per parameter.

Equality here is ``np.array_equal`` / ``check_exact``: a change of any output bit fails.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from facterlab.metrics.embeddings import normalise_rows
from facterlab.simpson.gaps import UserStats, per_user_gap
from facterlab.simpson.simulate import (
    BiasFreeWorld,
    SimpsonConfig,
    _mu,
    _positions_of_order,
    _probe,
    noise_scale,
    ranks_from_scores,
    simulate,
)
from facterlab.simpson.study import _held, calibrate_bias
from facterlab.simpson.sweeping import sweep, sweeps

CONFIGS = [
    SimpsonConfig(n_users=1_200, seed=1),
    SimpsonConfig(n_users=1_000, sigma1=7.0, d1=3.3, bias=0.05, seed=2, chunk_size=333),
    SimpsonConfig(n_users=800, noise="item", mu1="printed", sigma1=4.0, seed=3),
    SimpsonConfig(n_users=700, n_items=37, exposure="position", seed=4, stream=(5, 1)),
    SimpsonConfig(n_users=600, sigma=0.0, bias=-0.2, seed=5, probe_draws=3),
]


def reference_simulate(cfg: SimpsonConfig) -> dict:
    """The simulation as it was written before issue 30's speed-up (docs/SIMPSON.md §3): one expression for
    the scores, ``np.put_along_axis`` for the positions."""
    s_users, s_items, s_noise, _s_exp, s_probe = cfg.streams()
    r, n, m = cfg.rank, cfg.n_users, cfg.n_items
    users = normalise_rows(np.random.default_rng(s_users).standard_normal((n, r)))
    m1 = int(round(m * cfg.share_group1))
    m0 = m - m1
    rng_items = np.random.default_rng(s_items)
    v0 = _mu(0, r) + rng_items.standard_normal((m0, r)) / np.sqrt(cfg.d0)
    v1 = _mu(1, r, cfg.mu1) + rng_items.standard_normal((m1, r)) / np.sqrt(cfg.d1)
    items = normalise_rows(np.vstack([v0, v1]))
    groups = np.r_[np.zeros(m0, dtype=np.int8), np.ones(m1, dtype=np.int8)]
    bias = np.where(groups == 1, cfg.bias, 0.0)
    rng_noise = np.random.default_rng(s_noise)
    positions, relevant = [], []
    for start in range(0, n, cfg.chunk_size):
        u = users[start : start + cfg.chunk_size]
        aff = u @ items.T
        scores = (
            aff + rng_noise.standard_normal(aff.shape, dtype=np.float32) * noise_scale(cfg, u, items) + bias[None, :]
        )
        order = np.argsort(-scores, axis=1)
        pos = np.empty(scores.shape, dtype=np.int16)
        np.put_along_axis(pos, order, np.broadcast_to(np.arange(1, m + 1, dtype=np.int16), scores.shape), axis=1)
        positions.append(pos)
        relevant.append(aff > cfg.threshold)
    # the statistics chunk by chunk, as the simulator always computed them (numpy's row sums of a chunk and
    # of the whole array may differ in the last bit)
    stats = [UserStats.from_arrays(p, rl, groups, cfg.exposure) for p, rl in zip(positions, relevant)]
    for more in stats[1:]:
        stats[0] = stats[0].concat(more)
    positions, relevant = np.vstack(positions), np.vstack(relevant)
    return {
        "users": users,
        "items": items,
        "groups": groups,
        "positions": positions,
        "relevant": relevant,
        "stats": stats[0],
        "probe": _probe(items, groups, bias, cfg, np.random.default_rng(s_probe)),
    }


def assert_same_simulation(sim, ref: dict) -> None:
    for name in ("users", "items", "groups", "positions", "relevant"):
        got = getattr(sim, name)
        assert got.dtype == ref[name].dtype and np.array_equal(got, ref[name]), name
    for name in ("n0", "n1", "sum0", "sum1"):
        assert np.array_equal(getattr(sim.stats, name), getattr(ref["stats"], name)), name
    assert sim.probe == ref["probe"]


@pytest.mark.parametrize("cfg", CONFIGS, ids=lambda c: f"n{c.n_users}-seed{c.seed}")
def test_simulate_is_the_straightforward_simulation_bit_for_bit(cfg):
    assert_same_simulation(simulate(cfg), reference_simulate(cfg))


def test_positions_of_order_inverts_each_row():
    rng = np.random.default_rng(0)
    scores = rng.standard_normal((300, 57))
    scores[:, 5] = scores[:, 9]  # a tie: whatever argsort gives, the positions invert that order
    order = np.argsort(-scores, axis=1)
    expected = np.empty(scores.shape, dtype=np.int16)
    np.put_along_axis(expected, order, np.broadcast_to(np.arange(1, 58, dtype=np.int16), scores.shape), axis=1)
    got = _positions_of_order(order.copy())
    assert got.dtype == np.int16 and np.array_equal(got, expected)
    assert np.array_equal(ranks_from_scores(scores), expected)


@pytest.mark.parametrize("cfg", CONFIGS[:3], ids=lambda c: f"n{c.n_users}-seed{c.seed}")
def test_a_bias_free_world_ranked_under_b_is_the_simulation_at_b(cfg):
    world = BiasFreeWorld(cfg)
    for b in (0.0, 0.0371, -0.25, cfg.bias):
        sim = world.simulation(b)
        assert sim.config == cfg.replace(bias=b)
        assert_same_simulation(sim, reference_simulate(cfg.replace(bias=b)))
        st = world.stats(b)
        assert np.array_equal(st.sum0, sim.stats.sum0) and np.array_equal(st.sum1, sim.stats.sum1)


def test_calibrate_bias_is_brent_over_fresh_simulations_bit_for_bit():
    from scipy.optimize import brentq

    cfg = SimpsonConfig(n_users=600, sigma1=2.0, d1=2.5, seed=3)
    calls = []

    def fresh(b):
        calls.append(float(b))
        return per_user_gap(reference_simulate(cfg.replace(bias=float(b)))["stats"]).value

    fresh(-0.5), fresh(0.5)  # the bracket's check, then Brent's method, which asks for the ends again
    expected = float(brentq(fresh, -0.5, 0.5, xtol=1e-4))
    assert calibrate_bias(cfg) == expected
    assert len(calls) == len(set(calls)) + 2  # calibrate_bias evaluates each b once
    row = _held((cfg, 0.0))
    assert row["bias"] == expected
    ref = per_user_gap(reference_simulate(cfg.replace(bias=expected))["stats"])
    assert row["per_user_gap"] == ref.value and row["share_defined"] == ref.share_defined


def test_sweeps_are_one_sweep_per_parameter_with_the_base_point_run_once(monkeypatch):
    import sys

    sim_mod = sys.modules["facterlab.simpson.sweeping"]
    base = SimpsonConfig(n_users=400, bias=0.0, sigma1=0.0, d1=1.5)
    grids = {"d1": np.linspace(1.5, 4.0, 3), "sigma1": np.linspace(0.0, 10.0, 3), "bias": np.linspace(0.0, 0.1, 3)}
    tasks = []
    real = sim_mod.run_many

    def spy(fn, args, *a, **kw):
        tasks.append((len(args), len({sim_mod._task_key(x) for x in args})))
        return real(fn, args, *a, **kw)

    monkeypatch.setattr(sim_mod, "run_many", spy)
    got = sweeps(grids, seeds=range(2), base=base, ips=False, progress=False)
    assert tasks == [(18, 14)]  # 3 sweeps x 3 values x 2 seeds; the base point (first value of each) is shared
    monkeypatch.setattr(sim_mod, "run_many", real)
    for p, values in grids.items():
        pd.testing.assert_frame_equal(
            got[p], sweep(p, values, seeds=range(2), base=base, ips=False, progress=False), check_exact=True
        )
    per_param = sweeps(
        {"sigma1": [0.0, 10.0], "d1": [1.5, 4.0]},
        seeds=[0],
        base={"sigma1": base.replace(bias=0.03), "d1": base.replace(bias=0.03, sigma1=0.0)},
        progress=False,
    )
    pd.testing.assert_frame_equal(
        per_param["d1"],
        sweep("d1", [1.5, 4.0], seeds=[0], base=base.replace(bias=0.03), progress=False),
        check_exact=True,
    )
    with pytest.raises(ValueError, match="unknown sweep parameter"):
        sweeps({"colour": [1]})
