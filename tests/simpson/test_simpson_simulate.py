"""Simpson part: the simulator (docs/SIMPSON.md §3) and the naive estimator's unbiasedness (§2)."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.special import betainc

from facterlab.simpson.gaps import UserStats, aggregate_gap, per_user_gap
from facterlab.simpson.ips import naive_estimate
from facterlab.simpson.simulate import (
    SimpsonConfig,
    noise_sd,
    random_experiment,
    ranks_from_scores,
    simulate,
    simulate_and_measure,
)
from facterlab.simpson.sweeping import grid_summary, summarise, sweep


def analytic_relevance_rate(r, t):
    """P(U . V > t) for U uniform on the unit sphere of R^r and any unit V: (U.V)^2 ~ Beta(1/2, (r-1)/2)."""
    return 0.5 * (1 - betainc(0.5, (r - 1) / 2, t * t))


def test_relevance_rate_is_about_21_6_percent_at_r_8():
    assert analytic_relevance_rate(8, 0.3) == pytest.approx(0.216, abs=5e-4)
    sim = simulate(SimpsonConfig(n_users=20_000, seed=3))
    assert sim.relevant.mean() == pytest.approx(analytic_relevance_rate(8, 0.3), abs=0.01)


def test_rank_changes_relevance_rate_as_predicted():
    sim = simulate(SimpsonConfig(n_users=20_000, rank=4, seed=4))
    assert sim.relevant.mean() == pytest.approx(analytic_relevance_rate(4, 0.3), abs=0.01)


def test_shapes_permutations_and_unit_norms():
    sim = simulate(SimpsonConfig(n_users=500, n_items=40, seed=1, chunk_size=128))
    assert sim.positions.shape == (500, 40)
    np.testing.assert_array_equal(np.sort(sim.positions, axis=1), np.tile(np.arange(1, 41), (500, 1)))
    np.testing.assert_allclose(np.linalg.norm(sim.users, axis=1), 1.0)
    np.testing.assert_allclose(np.linalg.norm(sim.items, axis=1), 1.0)
    assert sim.groups.tolist() == [0] * 20 + [1] * 20
    # the stored statistics are those of the dense arrays
    st = UserStats.from_arrays(sim.positions, sim.relevant, sim.groups)
    np.testing.assert_allclose(sim.stats.sum0, st.sum0, rtol=0, atol=1e-12)


def test_seeded_and_chunk_invariant():
    a = simulate(SimpsonConfig(n_users=700, seed=5, chunk_size=700))
    b = simulate(SimpsonConfig(n_users=700, seed=5, chunk_size=99))
    c = simulate(SimpsonConfig(n_users=700, seed=6))
    np.testing.assert_array_equal(a.positions, b.positions)
    assert not np.array_equal(a.positions, c.positions)
    # items do not depend on N (own random stream)
    d = simulate(SimpsonConfig(n_users=300, seed=5))
    np.testing.assert_array_equal(a.items, d.items)


def test_ranks_from_scores_matches_double_argsort():
    s = np.random.default_rng(0).random((50, 30))
    np.testing.assert_array_equal(ranks_from_scores(s), np.argsort(np.argsort(-s, axis=1), axis=1) + 1)


def test_noise_sd_is_linear_with_f_minus1_0_and_f1_sigma1():
    assert noise_sd(-1.0, 0.05, 7.0) == pytest.approx(0.05)
    assert noise_sd(1.0, 0.05, 7.0) == pytest.approx(0.05 * 8)
    assert noise_sd(0.0, 0.05, 7.0) == pytest.approx(0.05 * 4.5)


def test_density_raises_competition_and_noise_lowers_performance():
    lo = simulate_and_measure(SimpsonConfig(n_users=1_000, d1=1.5, seed=0), ips=False)
    hi = simulate_and_measure(SimpsonConfig(n_users=1_000, d1=4.0, seed=0), ips=False)
    assert hi["probe_n_relevant_1"] > lo["probe_n_relevant_1"]
    assert hi["probe_competition"] < lo["probe_competition"]  # more relevant items: smaller C(u*)
    clean = simulate_and_measure(SimpsonConfig(n_users=1_000, sigma1=0.0, seed=0), ips=False)
    noisy = simulate_and_measure(SimpsonConfig(n_users=1_000, sigma1=10.0, seed=0), ips=False)
    assert noisy["probe_ndcg"] < clean["probe_ndcg"] - 0.02
    assert noisy["mean_ndcg"] < clean["mean_ndcg"]


def test_model_bias_favours_group_1():
    # positive b lifts group-1 items, so group 0 minus group 1 exposure decreases
    g = [
        simulate_and_measure(SimpsonConfig(n_users=2_000, bias=b, seed=2), ips=False)["per_user_gap"]
        for b in (0.0, 0.05, 0.1)
    ]
    assert g[0] > g[1] > g[2]


def test_bad_config_is_rejected():
    with pytest.raises(ValueError, match="densities"):
        SimpsonConfig(d1=0)
    with pytest.raises(ValueError, match="unknown exposure"):
        SimpsonConfig(exposure="dcg")
    with pytest.raises(ValueError, match="unknown sweep parameter"):
        sweep("nope", [1], progress=False)


def test_sweep_summary_has_mean_and_sd():
    df = sweep("bias", [0.0, 0.1], seeds=[0, 1], base=SimpsonConfig(n_users=300), progress=False, ips=False)
    s = summarise(df, "bias", ["per_user_gap"])
    assert s["bias"].tolist() == [0.0, 0.1]
    sub = df[df.bias == 0.1]["per_user_gap"]
    assert s.loc[1, "per_user_gap_mean"] == pytest.approx(sub.mean())
    assert s.loc[1, "per_user_gap_sd"] == pytest.approx(sub.std(ddof=1))


def test_grid_summary_hand_values():
    import pandas as pd

    df = pd.DataFrame(
        {
            "per_user_gap": [0.01, -0.02],
            "aggregate_gap": [-0.01, -0.01],
            "ips_counts": [0.012, -0.02],
            "ips_model": [0.01, -0.03],
        }
    )
    s = grid_summary(df)
    assert s["mean_abs_aggregate_minus_per_user_pp"] == pytest.approx(1.5)
    assert s["mean_abs_ips_counts_minus_per_user_pp"] == pytest.approx(0.1)
    assert s["sign_disagreement_aggregate"] == 0.5 and s["sign_disagreement_ips_model"] == 0.0


def test_naive_estimator_is_unbiased_for_the_aggregate_gap():
    """Fixed world, many independent random experiments: the mean of the naive estimates lies
    within its normal 99.9 % interval around the AggregateGap (and far from the PerUserGap)."""
    sim = simulate(SimpsonConfig(n_users=3_000, sigma1=8.0, d1=3.5, bias=0.03, seed=11))
    target = aggregate_gap(sim.stats).value
    est = np.array([naive_estimate(random_experiment(sim, seed=k)).value for k in range(400)])
    half_width = 3.29 * est.std(ddof=1) / np.sqrt(len(est))
    assert abs(est.mean() - target) < half_width
    assert abs(per_user_gap(sim.stats).value - target) > 4 * half_width  # the test can tell the two apart


# ---------------------------------------------------------------------------------------------- readings and streams


def test_noise_readings_scale_by_user_or_by_item():
    from facterlab.simpson.simulate import mu1_hat, noise_scale

    sim = simulate(SimpsonConfig(n_users=300, seed=2))
    user = noise_scale(SimpsonConfig(sigma1=10.0, noise="user"), sim.users, sim.items)
    item = noise_scale(SimpsonConfig(sigma1=10.0, noise="item"), sim.users, sim.items)
    assert user.shape == (300, 1) and item.shape == (1, 100)
    np.testing.assert_allclose(user[:, 0], noise_sd(sim.users @ mu1_hat(SimpsonConfig()), 0.05, 10.0))
    # under the item reading the items of group 1 (aligned with mu_1) are the noisier ones
    assert item[0, sim.groups == 1].mean() > 1.2 * item[0, sim.groups == 0].mean()
    assert np.ptp(item) > 0 and np.ptp(user) > 0
    with pytest.raises(ValueError, match="unknown noise reading"):
        SimpsonConfig(noise="pair")
    with pytest.raises(ValueError, match="unknown mu1 reading"):
        SimpsonConfig(mu1="rotated")


def test_mu1_readings_place_group_1_items():
    tight = dict(n_users=50, d1=400.0, seed=0)  # group-1 items close to mu_1/|mu_1|
    printed = simulate(SimpsonConfig(mu1="printed", **tight))
    ortho = simulate(SimpsonConfig(mu1="orthonormal", **tight))
    np.testing.assert_allclose(printed.items[printed.groups == 1, :2].mean(axis=0), [2**-0.5] * 2, atol=0.05)
    np.testing.assert_allclose(ortho.items[ortho.groups == 1, :2].mean(axis=0), [0.0, 1.0], atol=0.05)
    np.testing.assert_allclose(ortho.mu1_hat, [0, 1, 0, 0, 0, 0, 0, 0])
    # mu_0 is orthogonal to the orthonormal mu_1, not to the printed one
    assert ortho.mu1_hat[0] == 0.0 and printed.mu1_hat[0] == pytest.approx(2**-0.5)


def test_grid_seeds_are_independent_streams():
    """Old bug: grid(seed=1) reused seed 0's streams shifted by one configuration.  With identical
    parameters in every configuration, no two runs over seeds 0 and 1 may coincide."""
    from facterlab.simpson.sweeping import grid

    base = SimpsonConfig(n_users=300, bias=0.03)
    g0 = grid([0.0, 0.0, 0.0], [1.5], base=base, seed=0, progress=False)
    g1 = grid([0.0, 0.0, 0.0], [1.5], base=base, seed=1, progress=False)
    values = np.r_[g0.per_user_gap.to_numpy(), g1.per_user_gap.to_numpy()]
    assert len(np.unique(values)) == 6
    # a configuration's world is the k-th spawned child of SeedSequence(seed)
    child = np.random.SeedSequence(1).spawn(3)[2]
    cfg = base.replace(seed=1, stream=tuple(child.spawn_key))
    assert simulate_and_measure(cfg)["per_user_gap"] == g1.per_user_gap.iloc[2]
    assert g1.configuration.tolist() == [0, 1, 2] and set(g1.seed) == {1}
    with pytest.raises(ValueError, match="stream must be"):
        SimpsonConfig(stream=(-1,))


def _same_frames(a, b) -> None:
    """Equal values to the last bit (NaN where NaN), dtypes and order: not approximately equal."""
    import pandas as pd

    pd.testing.assert_frame_equal(a, b, check_exact=True)
    assert pd.util.hash_pandas_object(a).tolist() == pd.util.hash_pandas_object(b).tolist()


@pytest.mark.filterwarnings("ignore::DeprecationWarning")
def test_grid_is_identical_on_every_executor_of_the_seam():
    """Issue 22: the grid runs through facterlab.executors (as `facterlab sweep` does).  Serial, the
    process pool (the default for n_jobs > 1, and an explicitly spawned one) and a Dask LocalCluster of
    2 workers give the same frame, bit for bit."""
    from facterlab.executors import ProcessExecutor, make_executor
    from facterlab.simpson.sweeping import grid

    base = SimpsonConfig(n_users=400, bias=0.03)
    args = ([0.0, 5.0], [1.5, 4.0])
    ref = grid(*args, base=base, seed=3, progress=False)
    assert len(ref) == 4 and ref.configuration.tolist() == [0, 1, 2, 3]
    _same_frames(ref, grid(*args, base=base, seed=3, progress=False, n_jobs=2))
    with ProcessExecutor(2, start_method="spawn") as spawned:
        _same_frames(ref, grid(*args, base=base, seed=3, progress=False, executor=spawned))
    pytest.importorskip("distributed", reason="the dask extra is not installed (pip install -e '.[dask]')")
    with make_executor("dask", workers=2) as dask:
        pids = set(dask.client.run(__import__("os").getpid).values())
        assert len(pids) == 2 and __import__("os").getpid() not in pids
        _same_frames(ref, grid(*args, base=base, seed=3, progress=False, executor=dask))


def test_sweep_and_studies_take_an_executor_and_give_the_serial_frame():
    from facterlab.executors import ProcessExecutor
    from facterlab.simpson.study import hold_per_user_gap, variant_study

    base = SimpsonConfig(n_users=300)
    with ProcessExecutor(2, start_method=None) as pool:
        _same_frames(
            sweep("bias", [0.0, 0.1], seeds=[0, 1], base=base, ips=False, progress=False),
            sweep("bias", [0.0, 0.1], seeds=[0, 1], base=base, ips=False, progress=False, executor=pool),
        )
        kw = dict(n_users=300, seeds=[0], n_points=2, progress=False, variants=[{"noise": "user", "mu1": "printed"}])
        _same_frames(variant_study(**kw), variant_study(**kw, executor=pool))
        kw = dict(seeds=[0], base=SimpsonConfig(n_users=600), progress=False)
        _same_frames(hold_per_user_gap("d1", [1.5], **kw), hold_per_user_gap("d1", [1.5], **kw, executor=pool))


def _negative_only(x: int) -> int:
    if x >= 0:
        raise ValueError(f"{x} is not negative")
    return -x


def test_run_many_merges_equal_arguments_and_a_failure_is_one_line_naming_it():
    from facterlab.simpson.sweeping import run_many

    seen: list = []
    from facterlab import executors

    class Counting(executors.SerialExecutor):
        def run(self, fn, tasks, retries=2, on_event=None):
            seen.append(len(tasks))
            return super().run(fn, tasks, retries, on_event)

    rows = run_many(dict, [{"a": 1}, {"a": 1}, {"a": 2}], executor=Counting())
    assert seen == [2] and rows == [{"a": 1}, {"a": 1}, {"a": 2}] and rows[0] is not rows[1]
    with pytest.raises(RuntimeError) as err:
        run_many(_negative_only, [-1, 3], desc="demo")
    msg = str(err.value)
    assert msg.startswith("demo: 1 of 2 simulations failed on serial (1 worker); simulation 1 (simpson-"), msg
    assert msg.endswith("after 1 attempt(s): ValueError: 3 is not negative") and "\n" not in msg
    with pytest.raises(ValueError, match="unknown executor 'threads'"):
        run_many(abs, [1], executor="threads")


def test_a_script_without_a_main_guard_still_runs_the_grid_in_a_pool(tmp_path):
    """The grid's pool starts its workers the platform's default way (fork on Linux), as before the seam:
    a spawned pool would re-run an unguarded script in every worker and break."""
    import subprocess
    import sys

    script = tmp_path / "unguarded.py"
    script.write_text(
        "from facterlab.simpson.simulate import SimpsonConfig\nfrom facterlab.simpson.sweeping import grid\n"
        "df = grid([0.0, 5.0], [1.5], base=SimpsonConfig(n_users=200), progress=False, n_jobs=2)\n"
        "print(len(df))\n"
    )
    env = {**__import__("os").environ, "FACTERLAB_LOG": "WARNING"}
    out = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=120, env=env)
    assert out.returncode == 0 and out.stdout.strip() == "2", out.stderr[-2000:]


def test_simpson_config_name_is_not_the_simulated_recommenders():
    """``SimpsonConfig`` (this simulation) and ``facterlab.config.SimulatorConfig`` (the simulated FACTER
    recommender) are different things; the old name ``SimConfig`` is a deprecated alias of the former."""
    import facterlab.simpson as simpson
    from facterlab.config import SimulatorConfig
    from facterlab.simpson.simulate import SimConfig

    assert SimConfig is SimpsonConfig and simpson.SimpsonConfig is SimpsonConfig
    assert SimpsonConfig is not SimulatorConfig and "n_users" in SimpsonConfig.__dataclass_fields__
