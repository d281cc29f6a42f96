"""Many simulations at once: sweeps of one parameter, the paper's grid over seeds, and their tables.

Split from :mod:`facterlab.simpson.simulate` (which still answers for these names): that module draws
and measures one world; this one runs many of them through the executor seam
(:func:`run_many`: serial, a process pool or Dask; :mod:`facterlab.executors`) and summarises them
(:func:`grid_summary`, :func:`comparison_table`, :func:`summarise`).  Design notes: ``docs/SIMPSON.md``.
"""

from __future__ import annotations

import copy
import functools
import hashlib
import itertools
import logging
from collections.abc import Callable, Iterable, Sequence
from typing import Any

import numpy as np
import pandas as pd

from facterlab.executors import Executor, SerialExecutor, make_executor
from facterlab.progress import Progress
from facterlab.simpson.simulate import (  # the world and its measurement
    DEFAULT_CONFIG,
    SWEEP_PARAMS,
    SimpsonConfig,
    simulate_and_measure,
)

__all__ = [
    "sweep",
    "sweeps",
    "grid",
    "run_many",
    "grid_seeds",
    "grid_summary",
    "comparison_table",
    "summarise",
    "ESTIMATORS",
    "PAPER_GRID",
]

log = logging.getLogger("facterlab.simpson.simulate")  # the log lines read as before the split


def sweep(
    param: str,
    values: Iterable,
    seeds: Sequence[int] = range(10),
    base: SimpsonConfig = DEFAULT_CONFIG,
    ips: bool = True,
    progress: bool = True,
    n_jobs: int = 1,
    executor: str | Executor | None = None,
) -> pd.DataFrame:
    """One row per (value, seed): ``simulate_and_measure(base.replace(param=value, seed=seed))``, through
    :func:`run_many` (``n_jobs``, ``executor`` as in :func:`grid`).

    >>> df = sweep("bias", [0.0, 0.1], seeds=[0], base=SimpsonConfig(n_users=300), progress=False)
    >>> df[["bias", "seed"]].values.tolist()
    [[0.0, 0.0], [0.1, 0.0]]
    """
    if param not in SWEEP_PARAMS:
        raise ValueError(f"unknown sweep parameter {param!r}; choose one of {', '.join(SWEEP_PARAMS)}")
    combos = list(itertools.product(list(values), list(seeds)))
    cfgs = [base.replace(**{param: v, "seed": int(s)}) for v, s in combos]
    fn = simulate_and_measure if ips else functools.partial(simulate_and_measure, ips=False)
    return pd.DataFrame(run_many(fn, cfgs, executor, n_jobs, progress, f"sweep {param}"))


def sweeps(
    grids: dict,
    seeds: Sequence[int] = range(10),
    base: SimpsonConfig | dict = DEFAULT_CONFIG,
    ips: bool = True,
    progress: bool = True,
    n_jobs: int = 1,
    executor: str | Executor | None = None,
) -> dict:
    """``{param: sweep(param, values, seeds, base, ips)}`` for every ``param: values`` of ``grids``, the frames
    bit for bit :func:`sweep`'s, through one :func:`run_many`: one pool for all the sweeps, and a
    configuration that several sweeps share (their common base point) runs once.

    Parameters
    ----------
    grids : dict
        ``{param: values}``: each swept setting of :class:`SimpsonConfig` (one of ``SWEEP_PARAMS``) and its values.
    seeds : sequence of int
        Independent repetitions per value (the same seeds in every sweep).
    base : SimpsonConfig or dict
        Every other setting: one configuration for all the sweeps, or ``{param: configuration}``.
    ips : bool
        Also compute the IPS estimates.
    progress : bool
        Progress lines.
    n_jobs : int
        Worker processes when ``executor`` is None.
    executor : str or Executor, optional
        ``"serial"``, ``"process"``, ``"dask"`` or an executor (:func:`run_many`).

    Returns
    -------
    dict
        ``{param: DataFrame}``, one row per (value, seed) as :func:`sweep` gives it.

    >>> out = sweeps({"bias": [0.0, 0.1], "d1": [1.5]}, seeds=[0], base=SimpsonConfig(n_users=300), progress=False)
    >>> out["bias"][["bias", "seed"]].values.tolist(), out["d1"].equals(out["bias"].iloc[:1])
    ([[0.0, 0.0], [0.1, 0.0]], True)
    """
    for param in grids:
        if param not in SWEEP_PARAMS:
            raise ValueError(f"unknown sweep parameter {param!r}; choose one of {', '.join(SWEEP_PARAMS)}")
    cfgs = {
        p: [
            # numpy scalars as Python numbers: a config's repr is its task key, and the base point of one sweep
            # (d1=np.float64(1.5)) is then the same task as the other sweeps' (d1=1.5); the frames do not change
            (base[p] if isinstance(base, dict) else base).replace(**{p: _py(v), "seed": int(s)})
            for v, s in itertools.product(list(values), list(seeds))
        ]
        for p, values in grids.items()
    }
    fn = simulate_and_measure if ips else functools.partial(simulate_and_measure, ips=False)
    rows = run_many(
        fn, [c for cs in cfgs.values() for c in cs], executor, n_jobs, progress, f"sweeps {', '.join(grids)}"
    )
    out, k = {}, 0
    for p, cs in cfgs.items():
        out[p] = pd.DataFrame(rows[k : k + len(cs)])
        k += len(cs)
    return out


def _py(v: Any) -> Any:
    """A numpy scalar as the Python number it holds (other values unchanged)."""
    return v.item() if isinstance(v, np.generic) else v


ESTIMATORS = {
    "aggregate_gap": "AggregateGap (pooled pairs)",
    "naive_estimate": "naive estimate (random experiment, unweighted)",
    "ips_model": "IPS, logistic model on U_i (the paper's estimator)",
    "ips_counts": "IPS, count cells (10 quantile bins of U.mu_1/|mu_1|)",
    "ips_oracle": "IPS, oracle weights 1/n_s(u) (true propensities)",
    "ips_oracle_both": "IPS, oracle weights on users with both groups",
    "ips_estimand": "IPS estimand with true weights (no sampling)",
}
PAPER_GRID = {"aggregate_gap": 4.0, "ips_model": 0.9}  # pp; the paper's estimate is its model IPS


def grid(
    sigma1_values=None,
    d1_values=None,
    base: SimpsonConfig = SimpsonConfig(n_users=50_000, bias=0.03),
    seed: int = 0,
    progress: bool = True,
    n_jobs: int = 1,
    executor: str | Executor | None = None,
) -> pd.DataFrame:
    """The 160-simulation grid (docs/SIMPSON.md §3): sigma_1 in linspace(0,10,16) x d_1 in linspace(1.5,4,10),
    b = 0.03, one simulation each, N = 50,000 by default.

    Configuration k runs on the k-th child of ``SeedSequence(seed)`` (``spawn``), so grids with
    different seeds are independent and no configuration shares a stream with another.
    The configurations go through :func:`run_many` (the executor seam of ``facterlab sweep``):
    ``executor`` ``"serial"``, ``"process"`` (a pool of ``n_jobs`` processes), ``"dask"`` (a
    ``LocalCluster`` of ``n_jobs`` workers) or an :class:`~facterlab.executors.Executor` such as
    ``make_executor("dask", scheduler="tcp://head:8786")``; default: serial for ``n_jobs`` <= 1, else
    the process pool.  The frame is identical on every executor.
    """
    s_vals = np.linspace(0, 10, 16) if sigma1_values is None else np.asarray(sigma1_values, dtype=float)
    d_vals = np.linspace(1.5, 4, 10) if d1_values is None else np.asarray(d1_values, dtype=float)
    combos = list(itertools.product(s_vals, d_vals))
    children = np.random.SeedSequence(int(seed), spawn_key=tuple(base.stream)).spawn(len(combos))
    cfgs = [
        base.replace(sigma1=float(s), d1=float(d), seed=int(seed), stream=tuple(child.spawn_key))
        for (s, d), child in zip(combos, children)
    ]
    rows = run_many(simulate_and_measure, cfgs, executor, n_jobs, progress, f"grid seed {seed}")
    for k, res in enumerate(rows):
        res["configuration"] = k
    return pd.DataFrame(rows)


def _task_key(arg: Any) -> str:
    """A content key of one simulation's argument (its ``repr``: every field of the config, floats
    exactly), so that the same simulation asked twice is one task of the executor."""
    return "simpson-" + hashlib.sha1(repr(arg).encode()).hexdigest()[:16]


def _make(executor: str | Executor, n_jobs: int | None, ips: bool = False) -> Executor:
    """``executor`` itself, or the one it names, with ``n_jobs`` workers
    (:func:`facterlab.executors.make_executor`, as ``facterlab sweep`` makes its own); a process pool is
    started the platform's default way (``fork`` on Linux), as the grid's pool always was: the
    simulation loads no torch, and a script without a ``__main__`` guard still works.  With ``ips``
    (the simulations fit the logistic-model IPS) scikit-learn is imported here first, so that forked
    workers inherit it instead of each importing it (about 1.5 s CPU per worker, measured 2026-12-03)."""
    if not isinstance(executor, str):
        return executor
    if ips and executor == "process":
        import sklearn.linear_model  # noqa: F401  (inherited by the forked workers)
    return make_executor(executor, workers=max(1, int(n_jobs or 1)), start_method=None)


def run_many(
    fn: Callable[[Any], Any],
    args: Sequence,
    executor: str | Executor | None = None,
    n_jobs: int = 1,
    progress: bool = False,
    desc: str = "simulations",
    retries: int | None = None,
) -> list:
    """``[fn(a) for a in args]`` through an executor of :mod:`facterlab.executors` (the seam of
    ``facterlab sweep``); the results are the same on every executor, since every simulation carries
    its own random streams.

    ``executor``: a name (``"serial"``; ``"process"``: a pool of ``n_jobs`` processes; ``"dask"``: a
    ``LocalCluster`` of ``n_jobs`` workers; made here and closed at the end) or an
    :class:`~facterlab.executors.Executor` (not closed here: a Dask cluster at a scheduler's address, a
    Slurm cluster); default ``"serial"`` when ``n_jobs`` <= 1, else ``"process"`` with ``n_jobs`` workers.  ``fn``: a module-level function (pickled to the
    workers).  Equal arguments (by ``repr``) run once.  ``retries``: extra attempts of a failed
    simulation (default 0 in this process, where a simulation that raised raises again; 2 elsewhere,
    where a worker may die under it).  A simulation that still fails raises a one-line RuntimeError
    naming it.  ``progress``: a bar and log lines as each simulation finishes (``desc``).

    Parameters
    ----------
    fn : callable
        A module-level function of one argument (it travels to the workers).
    args : sequence
        One argument per simulation; equal ones (by ``repr``) run once.
    executor : str or Executor, optional
        ``"serial"``, ``"process"``, ``"dask"`` or an executor (default by ``n_jobs``).
    n_jobs : int
        Worker processes when ``executor`` is a name or None.
    progress : bool
        A progress bar and log lines.
    desc : str
        The name of the phase in the progress lines.
    retries : int, optional
        Extra attempts of a failed simulation.

    Returns
    -------
    list
        ``fn(a)`` for every ``a`` of ``args``, in order.

    See Also
    --------
    sweep : one grid of simulations through this function.
    facterlab.simpson.simulate_and_measure : the function a sweep runs on each setting.
    facterlab.reporting.batch.run_many : the same for FACTER runs (configs, run folders).

    Examples
    --------
    >>> run_many(abs, [-1, 2, -1], executor="serial")
    [1, 2, 1]
    """
    keys = [_task_key(a) for a in args]
    tasks = dict(zip(keys, args))
    if executor is None:
        executor = "serial" if n_jobs is None or int(n_jobs) <= 1 else "process"
    ex = _make(executor, n_jobs, ips=fn is simulate_and_measure)
    if retries is None:
        retries = 0 if isinstance(ex, SerialExecutor) else 2
    phase = Progress(
        desc,
        total=len(tasks),
        unit="simulations",
        log=log,
        bar=progress,
        every="default" if progress else None,
        summary=progress,
    )

    def event(kind: str, key: str, info: Any) -> None:
        if kind in ("done", "failed"):
            phase.update(1)
        elif kind == "retry":
            log.warning("%s: simulation %s failed (%s); retrying", desc, key, info)

    try:
        out = ex.run(fn, tasks, retries=retries, on_event=event)
    except BaseException:
        phase.close(failed=progress)
        raise
    finally:
        if isinstance(executor, str):
            ex.close()
    phase.close()
    failed = [o for o in out.values() if not o.ok]
    if failed:
        first = failed[0]
        log.debug("%s: simulation %s failed:\n%s", desc, first.key, first.trace)
        raise RuntimeError(
            f"{desc}: {len(failed)} of {len(out)} simulations failed on {ex.describe()}; "
            f"simulation {keys.index(first.key)} ({first.key}) after {first.attempts} attempt(s): {first.error}"
        )
    return [copy.copy(out[k].value) for k in keys]  # a copy per position: an argument given twice


def grid_seeds(
    seeds: Sequence[int] = (0, 1, 2),
    sigma1_values=None,
    d1_values=None,
    base: SimpsonConfig = SimpsonConfig(n_users=50_000, bias=0.03),
    progress: bool = True,
    n_jobs: int = 1,
    executor: str | Executor | None = None,
) -> pd.DataFrame:
    """:func:`grid` once per seed (independent grids), stacked; column ``seed`` tells them apart.

    Parameters
    ----------
    seeds : sequence of int
        One independent grid per seed.
    sigma1_values, d1_values : sequence of float, optional
        The grid's noise levels and densities (default: :func:`grid`'s, the paper's 160 settings).
    base : SimpsonConfig
        Every other setting (default N = 50,000 users, bias 0.03).
    progress : bool
        Progress lines while the grid runs.
    n_jobs : int
        Worker processes when ``executor`` is None (1: serial).
    executor : str or Executor, optional
        ``"serial"``, ``"process"``, ``"dask"`` or an executor; started once for all seeds.

    Returns
    -------
    pandas.DataFrame
        One row per simulation (:func:`simulate_and_measure`'s keys), with column ``seed``.
    """
    if executor is None:
        executor = "serial" if n_jobs is None or int(n_jobs) <= 1 else "process"
    ex = _make(executor, n_jobs, ips=True)
    try:
        frames = [grid(sigma1_values, d1_values, base, int(s), progress, n_jobs, ex) for s in seeds]
    finally:
        if isinstance(executor, str):
            ex.close()
    return pd.concat(frames, ignore_index=True)


def grid_summary(df: pd.DataFrame) -> dict:
    """Mean absolute errors (pp) against the true PerUserGap, how often signs disagree, and the
    acceptance rule per estimator (docs/SIMPSON.md §3): an estimator passes when its mean ``|error|`` is at
    most half the AggregateGap's (``passes_half_rule_<estimator>``; ``error_ratio_<estimator>`` is
    its error divided by the aggregate's).

    Parameters
    ----------
    df : pandas.DataFrame
        A grid (:func:`grid` or :func:`grid_seeds`).

    Returns
    -------
    dict
        Mean absolute errors per estimator, sign-disagreement shares, error ratios and half-rule verdicts.
    """
    pu = df["per_user_gap"]
    agg = float(100 * (df["aggregate_gap"] - pu).abs().mean())
    out = {"n_configurations": int(len(df)), "mean_abs_aggregate_minus_per_user_pp": agg}
    for k in ESTIMATORS:
        if k == "aggregate_gap" or k not in df:
            continue
        err = float(100 * (df[k] - pu).abs().mean())
        out[f"mean_abs_{k}_minus_per_user_pp"] = err
        out[f"sign_disagreement_{k}"] = float((np.sign(df[k]) != np.sign(pu)).mean())
        out[f"error_ratio_{k}"] = err / agg if agg > 0 else float("nan")
        out[f"passes_half_rule_{k}"] = bool(err <= 0.5 * agg)
    out["sign_disagreement_aggregate"] = float((np.sign(df["aggregate_gap"]) != np.sign(pu)).mean())
    if "share_defined" in df:
        out["mean_share_defined"] = float(df["share_defined"].mean())
        out["min_share_defined"] = float(df["share_defined"].min())
    out["paper_mean_abs_aggregate_minus_per_user_pp"] = PAPER_GRID["aggregate_gap"]
    out["paper_mean_abs_estimate_minus_per_user_pp"] = PAPER_GRID["ips_model"]
    return out


def comparison_table(df: pd.DataFrame) -> pd.DataFrame:
    """The like-for-like comparison with the paper: one row per estimator (named), its mean
    ``|x - PerUserGap|`` (pp) as mean and sd over the grid's seeds, the ratio to the aggregate's error,
    how many seeds pass the half rule, and the paper's number where the paper reports one (its
    estimate comes from a model of the user embedding: the logistic-model IPS).

    Parameters
    ----------
    df : pandas.DataFrame
        A grid over one or more seeds (:func:`grid_seeds`).

    Returns
    -------
    pandas.DataFrame
        One row per named estimator.
    """
    seeds = sorted(df["seed"].unique()) if "seed" in df else [None]
    per_seed = [grid_summary(df if s is None else df[df["seed"] == s]) for s in seeds]
    rows = []
    for k, label in ESTIMATORS.items():
        key = "mean_abs_aggregate_minus_per_user_pp" if k == "aggregate_gap" else f"mean_abs_{k}_minus_per_user_pp"
        if key not in per_seed[0]:
            continue
        errs = np.array([p[key] for p in per_seed])
        ratios = np.array([p.get(f"error_ratio_{k}", 1.0) for p in per_seed])
        sign = "sign_disagreement_aggregate" if k == "aggregate_gap" else f"sign_disagreement_{k}"
        rows.append(
            {
                "estimator": k,
                "label": label,
                "mean_abs_error_pp": errs.mean(),
                "sd_over_seeds_pp": errs.std(ddof=1) if len(errs) > 1 else float("nan"),
                "min_pp": errs.min(),
                "max_pp": errs.max(),
                "error_ratio_to_aggregate": ratios.mean(),
                "seeds_passing_half_rule": (
                    None if k == "aggregate_gap" else int(sum(p[f"passes_half_rule_{k}"] for p in per_seed))
                ),
                "n_seeds": len(per_seed),
                "sign_disagreement": float(np.mean([p[sign] for p in per_seed])),
                "paper_pp": PAPER_GRID.get(k, float("nan")),
            }
        )
    return pd.DataFrame(rows).set_index("estimator")


def summarise(df: pd.DataFrame, by: str, columns: Sequence[str] | None = None) -> pd.DataFrame:
    """Mean and sd over seeds per value of ``by`` (columns ``<col>_mean``, ``<col>_sd``)."""
    cols = [c for c in (columns or df.columns) if c != by and c != "seed" and pd.api.types.is_numeric_dtype(df[c])]
    g = df.groupby(by)[cols]
    mean, sd = g.mean(), g.std(ddof=1)
    out = pd.concat([mean.add_suffix("_mean"), sd.add_suffix("_sd")], axis=1)
    return out.reset_index()
