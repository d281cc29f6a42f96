"""Studies on top of the simulator: which reading of the paper's text reproduces its qualitative
claims, and the aggregate gap moving while the PerUserGap is held fixed (Prost et al. 2022, Fig. 4).

- :func:`variant_study` runs, for every named reading (``noise`` in item/user x ``mu1`` in
  printed/orthonormal, see :mod:`facterlab.simpson.simulate`), a sweep of the noise level sigma_1
  (d_1 = 1.5) and of the density d_1 (sigma_1 = 0) at b = 0.03, with both IPS estimates;
  :func:`variant_verdicts` scores each reading against the paper's claims with rules fixed in
  advance (``MOVE_PP``, ``HALF_RULE``): "both knobs move the aggregate" and "the estimate stays close".
- :func:`calibrate_bias` finds the model bias b that puts the PerUserGap at a target (0 by default)
  for one configuration; :func:`hold_per_user_gap` does so along a sweep, so the aggregate gap can be
  read against density or noise with the PerUserGap fixed.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Sequence

import numpy as np
import pandas as pd

from facterlab.executors import Executor
from facterlab.simpson.gaps import per_user_gap
from facterlab.simpson.simulate import (
    DEFAULT_CONFIG,
    MU1_READINGS,
    NOISE_READINGS,
    BiasFreeWorld,
    SimpsonConfig,
    measure,
    simulate_and_measure,
)
from facterlab.simpson.sweeping import run_many

MOVE_PP = 1.0  # a knob "moves the aggregate" when the seed-mean of Agg - PerUser spans >= 1 pp over the knob
HALF_RULE = 0.5  # "the estimate stays close": mean |IPS model - PerUser| <= half of mean |Agg - PerUser|
VARIANTS = tuple({"noise": n, "mu1": m} for n, m in itertools.product(NOISE_READINGS, MU1_READINGS))


def variant_name(noise: str, mu1: str) -> str:
    """The label of a reading of the paper's text: ``noise=<user|item>, mu1=<printed|orthonormal>``."""
    return f"noise={noise}, mu1={mu1}"


def variant_study(
    n_users: int = 10_000,
    seeds: Sequence[int] = range(3),
    n_points: int = 6,
    bias: float = 0.03,
    variants: Iterable[dict] = VARIANTS,
    base: SimpsonConfig | None = None,
    progress: bool = True,
    n_jobs: int = 1,
    executor: str | Executor | None = None,
) -> pd.DataFrame:
    """One row per (reading, swept knob, value, seed) with every read-out of :func:`~facterlab.simpson.simulate.simulate_and_measure`.

    Column ``knob`` is ``"sigma1"`` (sigma_1 in linspace(0, 10, n_points), d_1 = 1.5) or ``"d1"``
    (d_1 in linspace(1.5, 4, n_points), sigma_1 = 0); ``variant`` names the reading.  The simulations
    go through :func:`~facterlab.simpson.sweeping.run_many` (``n_jobs``, ``executor``: the executor seam
    of ``facterlab sweep``; the frame is the same on every executor).

    Parameters
    ----------
    n_users : int
        Users per simulation.
    seeds : sequence of int
        Independent repetitions per (reading, knob, value).
    n_points : int
        Values per swept knob.
    bias : float
        The model bias b.
    variants : iterable of dict
        The readings of the paper's text (default :data:`VARIANTS`: ``noise`` user/item x ``mu1``
        printed/orthonormal).
    base : SimpsonConfig, optional
        Every other setting.
    progress : bool
        Progress lines.
    n_jobs : int
        Worker processes when ``executor`` is None.
    executor : str or Executor, optional
        ``"serial"``, ``"process"``, ``"dask"`` or an executor.

    Returns
    -------
    pandas.DataFrame
        One row per simulation, with columns ``variant``, ``knob``, ``value``, ``seed`` and the read-outs.
    """
    base = (base or SimpsonConfig()).replace(n_users=int(n_users), bias=float(bias))
    sweeps = {
        "sigma1": ("d1", 1.5, np.linspace(0.0, 10.0, n_points)),
        "d1": ("sigma1", 0.0, np.linspace(1.5, 4.0, n_points)),
    }
    jobs = [
        (v, knob, float(x), int(s)) for v in variants for knob, (_, _, xs) in sweeps.items() for x in xs for s in seeds
    ]
    cfgs = []
    for v, knob, x, s in jobs:
        other, other_value, _ = sweeps[knob]
        cfgs.append(base.replace(noise=v["noise"], mu1=v["mu1"], seed=s, **{knob: x, other: other_value}))
    rows = run_many(simulate_and_measure, cfgs, executor, n_jobs, progress, "variant study")
    for res, (v, knob, x, _s) in zip(rows, jobs):
        res.update(variant=variant_name(v["noise"], v["mu1"]), knob=knob, value=x)
    return pd.DataFrame(rows)


def variant_verdicts(df: pd.DataFrame, move_pp: float = MOVE_PP, half_rule: float = HALF_RULE) -> pd.DataFrame:
    """Per reading: how far each knob moves the aggregate gap (pp, range of the seed means over the
    knob's values) and its distance to the PerUserGap, how much sigma_1 lowers performance nDCG(u*),
    the mean errors of the aggregate and of both IPS estimates against the PerUserGap, and the two
    verdicts ``both_knobs_move_aggregate`` and ``model_ips_stays_close``.

    Parameters
    ----------
    df : pandas.DataFrame
        The frame of :func:`variant_study`.
    move_pp : float
        A knob "moves the aggregate" when the seed-mean of AggregateGap - PerUserGap spans at least this
        many pp over the knob's values (default :data:`MOVE_PP`).
    half_rule : float
        "The estimate stays close": its mean error is at most this share of the aggregate's (default
        :data:`HALF_RULE`).

    Returns
    -------
    pandas.DataFrame
        One row per reading.
    """
    d = df.assign(
        agg_minus_pu_pp=100 * (df["aggregate_gap"] - df["per_user_gap"]),
        agg_pp=100 * df["aggregate_gap"],
        pu_pp=100 * df["per_user_gap"],
    )
    out = []
    for name, g in d.groupby("variant", sort=False):
        row = {"variant": name}
        for knob in ("sigma1", "d1"):
            m = g[g["knob"] == knob].groupby("value")[["agg_minus_pu_pp", "agg_pp", "pu_pp", "probe_ndcg"]].mean()
            row[f"{knob}_range_agg_minus_pu_pp"] = float(m["agg_minus_pu_pp"].max() - m["agg_minus_pu_pp"].min())
            row[f"{knob}_range_aggregate_pp"] = float(m["agg_pp"].max() - m["agg_pp"].min())
            row[f"{knob}_range_per_user_pp"] = float(m["pu_pp"].max() - m["pu_pp"].min())
            if knob == "sigma1":
                row["sigma1_ndcg_drop"] = float(m["probe_ndcg"].iloc[0] - m["probe_ndcg"].iloc[-1])
        agg_err = float((g["agg_minus_pu_pp"]).abs().mean())
        row["mean_abs_aggregate_error_pp"] = agg_err
        for k in ("ips_model", "ips_counts", "ips_oracle"):
            if k in g:
                row[f"mean_abs_{k}_error_pp"] = float((100 * (g[k] - g["per_user_gap"])).abs().mean())
        row["model_error_ratio"] = row["mean_abs_ips_model_error_pp"] / agg_err if agg_err > 0 else float("nan")
        row["mean_share_defined"] = float(g["share_defined"].mean())
        row["both_knobs_move_aggregate"] = bool(
            row["sigma1_range_agg_minus_pu_pp"] >= move_pp and row["d1_range_agg_minus_pu_pp"] >= move_pp
        )
        row["model_ips_stays_close"] = bool(row["model_error_ratio"] <= half_rule)
        # signed, paired effects with their 95% intervals over seeds (each seed is one paired comparison:
        # the same seed at the knob's lowest and highest value, common random numbers)
        for knob in ("sigma1", "d1"):
            eff = knob_effect(g[g["knob"] == knob], "agg_minus_pu_pp")
            row.update({f"{knob}_effect_{k}": v for k, v in eff.items()})
        ratios = []
        for _seed, gs in g.groupby("seed"):
            a = float(gs["agg_minus_pu_pp"].abs().mean())
            if a > 0 and "ips_model" in gs:
                ratios.append(float((100 * (gs["ips_model"] - gs["per_user_gap"])).abs().mean()) / a)
        lo, hi = _t_interval(ratios)
        row["model_error_ratio_lo"], row["model_error_ratio_hi"] = lo, hi
        row["model_ips_verdict"] = (
            "inconclusive"
            if not np.isfinite(lo) or lo <= half_rule < hi
            else ("stays close" if hi <= half_rule else "not close")
        )
        row["n_seeds"] = int(g["seed"].nunique())
        out.append(row)
    return pd.DataFrame(out).set_index("variant")


def _t_interval(values: Sequence[float], level: float = 0.95) -> tuple:
    """The Student-t interval of the mean of ``values`` (NaN, NaN with fewer than 2)."""
    v = np.asarray([x for x in values if np.isfinite(x)], dtype=float)
    if len(v) < 2:
        return float("nan"), float("nan")
    from scipy import stats

    half = float(stats.t.ppf(0.5 + level / 2, len(v) - 1)) * float(v.std(ddof=1)) / np.sqrt(len(v))
    return float(v.mean() - half), float(v.mean() + half)


def knob_effect(rows: pd.DataFrame, column: str = "agg_minus_pu_pp") -> dict:
    """The signed change of ``column`` from a knob's lowest to its highest value, paired per seed:
    ``{"pp": mean, "lo", "hi" (95% Student-t interval over seeds), "n": seeds, "direction"}`` with
    direction ``"rises"`` or ``"falls"`` when the interval excludes 0, else ``"inconclusive"`` (also with
    fewer than 2 seeds).

    >>> df = pd.DataFrame({"value": [0, 10] * 3, "seed": [0, 0, 1, 1, 2, 2], "x": [1.0, 0.5, 1.1, 0.4, 0.9, 0.5]})
    >>> e = knob_effect(df, "x"); round(e["pp"], 3), e["direction"], e["n"]
    (-0.533, 'falls', 3)
    """
    if rows.empty:
        return {"pp": float("nan"), "lo": float("nan"), "hi": float("nan"), "n": 0, "direction": "inconclusive"}
    lo_x, hi_x = rows["value"].min(), rows["value"].max()
    a = rows[rows["value"] == lo_x].groupby("seed")[column].mean()
    b = rows[rows["value"] == hi_x].groupby("seed")[column].mean()
    diff = (b - a).dropna()
    lo, hi = _t_interval(diff.to_list())
    direction = "inconclusive"
    if np.isfinite(lo) and lo > 0:
        direction = "rises"
    elif np.isfinite(hi) and hi < 0:
        direction = "falls"
    return {
        "pp": float(diff.mean()) if len(diff) else float("nan"),
        "lo": lo,
        "hi": hi,
        "n": int(len(diff)),
        "direction": direction,
    }


def calibrate_bias(
    cfg: SimpsonConfig,
    target: float = 0.0,
    bracket: tuple = (-0.5, 0.5),
    xtol: float = 1e-4,
    world: BiasFreeWorld | None = None,
) -> float:
    """The model bias b at which the PerUserGap of ``cfg`` (its seed, noise draws and users fixed)
    equals ``target`` (raw units), by Brent's method.  Raising b lifts every group-1 item for every
    user by the same amount, so the PerUserGap is non-increasing in b and the root is bracketed when
    the gap's sign differs at the bracket's ends; otherwise a ValueError says so.

    The world is drawn once (``world``, default ``BiasFreeWorld(cfg)``) and ranked under each b Brent's
    method tries, each b once (it asks for the bracket's ends again): the same b as simulating
    ``cfg.replace(bias=b)`` afresh at every step, bit for bit (``tests/simpson/test_simpson_study.py``).

    >>> from facterlab.simpson.simulate import simulate
    >>> cfg = SimpsonConfig(n_users=400, sigma1=2.0)
    >>> b = calibrate_bias(cfg)
    >>> abs(per_user_gap(simulate(cfg.replace(bias=b)).stats).value) < 2e-3
    True
    """
    from scipy.optimize import brentq

    world = BiasFreeWorld(cfg) if world is None else world
    seen: dict = {}

    def f(b):
        b = float(b)
        if b not in seen:
            seen[b] = per_user_gap(world.stats(b)).value - target
        return seen[b]

    lo, hi = f(bracket[0]), f(bracket[1])
    if not (np.isfinite(lo) and np.isfinite(hi)) or np.sign(lo) == np.sign(hi):
        raise ValueError(
            f"PerUserGap - target does not change sign for b in {bracket} "
            f"({lo:+.4f} .. {hi:+.4f}): widen the bracket or change the target"
        )
    return float(brentq(f, bracket[0], bracket[1], xtol=xtol))


def hold_per_user_gap(
    param: str,
    values: Iterable,
    seeds: Sequence[int] = range(3),
    base: SimpsonConfig = DEFAULT_CONFIG,
    target: float = 0.0,
    progress: bool = True,
    n_jobs: int = 1,
    executor: str | Executor | None = None,
) -> pd.DataFrame:
    """Sweep ``param`` with the PerUserGap held at ``target``: for every (value, seed) the bias b is
    calibrated (:func:`calibrate_bias`), then the configuration is measured (no IPS).  Column
    ``bias`` holds the calibrated b, ``held_per_user_gap_target`` the target.  Each (value, seed) is
    one task of :func:`~facterlab.simpson.sweeping.run_many` (``n_jobs``, ``executor``).

    Parameters
    ----------
    param : str
        The swept setting of :class:`SimpsonConfig` (e.g. ``"d1"``, ``"sigma1"``).
    values : iterable
        Its values.
    seeds : sequence of int
        Independent repetitions per value.
    base : SimpsonConfig
        Every other setting.
    target : float
        The PerUserGap to hold.
    progress : bool
        Progress lines.
    n_jobs : int
        Worker processes when ``executor`` is None.
    executor : str or Executor, optional
        ``"serial"``, ``"process"``, ``"dask"`` or an executor.

    Returns
    -------
    pandas.DataFrame
        One row per (value, seed) with the calibrated ``bias`` and the measured read-outs.
    """
    jobs = [
        (base.replace(**{param: float(v), "seed": int(s)}), float(target))
        for v, s in itertools.product(list(values), list(seeds))
    ]
    return pd.DataFrame(run_many(_held, jobs, executor, n_jobs, progress, f"hold PerUserGap, {param}"))


def _held(job: tuple) -> dict:
    """One (config, target) of :func:`hold_per_user_gap` (module level: it travels to the workers)."""
    cfg, target = job
    world = BiasFreeWorld(cfg)
    b = calibrate_bias(cfg, target, world=world)
    sim = world.simulation(b)  # simulate(cfg.replace(bias=b)), without drawing the world again
    res = {k: getattr(sim.config, k) for k in ("n_users", "d1", "sigma1", "bias", "seed", "noise", "mu1")}
    res.update(measure(sim, ips=False))
    res["held_per_user_gap_target"] = target
    return res
