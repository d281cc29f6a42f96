"""Vectorised, seeded simulation of the paper's synthetic recommender (Prost et al. 2022, §5;
docs/SIMPSON.md §3).

- Users U_i: uniform on the unit sphere of R^r (choice), r = 8.
- Items of group s: normalise(mu_s + Gaussian(0, (1/d_s) I)), mu_0 = [1, 0, ...], mu_1 by the
  ``mu1`` reading below; d_0 = 1.5, d_1 varied ("density").  M = 100 items, half in each group (choice).
- Relevance: Rel(i, j) = 1 iff U_i . V_j > T, T = 0.3 (21.6 % of pairs at r = 8).
- Score(i, j) = U_i . V_j + noise_ij + bias_j, bias_j = b for group-1 items (model bias),
  noise_ij ~ N(0, (sigma (1 + f(x)))^2), x = clip(U_i . mu_1/|mu_1|, -1, 1) (or V_j's, by the
  ``noise`` reading below), f linear with f(-1) = 0, f(1) = sigma_1 ("noise level"), i.e.
  f(x) = sigma_1 (x + 1)/2.  The standard normal draws are float32 (choice: faster, ties stay negligible).
- Full ranking by score (argsort of the N x M score matrix, chunked over users);
  Exp = f_exp(position), default 1/log2(1 + p).
- Random experiment: one item per user, drawn uniformly and independently of the user.
- Factor read-outs (docs/SIMPSON.md §3): a hypothetical user u* = mu_1/|mu_1| (excluded from the gaps):
  competition n(u*) and C(u*), performance nDCG(u*) (choice: the mean over ``probe_draws``
  independent noise draws).

Two readings of the paper's text are named variants (``docs/SIMPSON.md``):

- ``noise``: ``"user"`` (default) takes the noise level from the user's alignment
  x_i = U_i . mu_1/|mu_1| (the formula as printed names U_i); ``"item"`` takes it from the *item's*
  alignment x_j = V_j . mu_1/|mu_1| (the prose: items of group 1 are noisier).
- ``mu1``: ``"orthonormal"`` (default) mu_1 = [0, 1, 0, ...], the printed vector orthonormalised
  against mu_0 (the prose calls the two means orthogonal); ``"printed"`` mu_1 = [1, 1, 0, ...].

The defaults were chosen by the study in ``notebooks/12_simpson_fig4_aggregate_gap.ipynb``
(:func:`facterlab.simpson.study.variant_study`); ``docs/SIMPSON.md`` gives its numbers.

Random streams: ``numpy.random.SeedSequence(seed, spawn_key=stream).spawn(5)`` gives users, items,
noise, experiment and probe their own streams (so that e.g. the items do not change with N);
:func:`grid` hands every configuration its own child ``SeedSequence(seed).spawn(n)[k]``, so grids
with different seeds are independent, and the results do not depend on where a simulation runs:
:func:`grid`, :func:`sweep` and the studies go through :func:`run_many`, the executor seam of
``facterlab sweep`` (:mod:`facterlab.executors`: this process, a local process pool, a Dask cluster).
"""

from __future__ import annotations

import copy
import dataclasses
import functools
import hashlib
import itertools
import logging
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from facterlab.executors import Executor, SerialExecutor, make_executor
from facterlab.metrics.embeddings import normalise_rows
from facterlab.progress import Progress
from facterlab.simpson import ips as ips_mod
from facterlab.simpson.blas import one_thread
from facterlab.simpson.exposure import competition, get_exposure
from facterlab.simpson.gaps import UserStats, aggregate_gap, decompose, ips_estimand, lemma_aggregate_gap, per_user_gap

SWEEP_PARAMS = ("d1", "sigma1", "bias", "n_users", "d0", "sigma", "threshold", "rank", "n_items")
NOISE_READINGS = ("item", "user")
MU1_READINGS = ("printed", "orthonormal")

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class SimpsonConfig:
    """Every knob of the simulation; defaults are the choices of ``docs/SIMPSON.md`` (readings
    ``noise="user"``, ``mu1="orthonormal"``; ``stream`` is a ``SeedSequence`` spawn key).

    >>> SimpsonConfig().n_users, SimpsonConfig().rank, SimpsonConfig(d1=3.0).d1
    (10000, 8, 3.0)
    >>> SimpsonConfig(n_users=0)
    Traceback (most recent call last):
    ...
    ValueError: n_users must be >= 1, got 0
    """

    n_users: int = 10_000
    n_items: int = 100
    rank: int = 8
    threshold: float = 0.3
    d0: float = 1.5
    d1: float = 1.5
    sigma: float = 0.05
    sigma1: float = 0.0
    bias: float = 0.0
    exposure: str = "log"
    share_group1: float = 0.5
    seed: int = 0
    chunk_size: int = 10_000
    probe_draws: int = 32
    noise: str = "user"
    mu1: str = "orthonormal"
    stream: tuple = ()

    def __post_init__(self) -> None:
        if self.n_users < 1:
            raise ValueError(f"n_users must be >= 1, got {self.n_users}")
        if self.n_items < 2:
            raise ValueError(f"n_items must be >= 2, got {self.n_items}")
        if self.n_items > 32_767:
            raise ValueError("n_items must be <= 32767 (positions are stored as int16)")
        if self.rank < 2:
            raise ValueError(f"rank must be >= 2 (mu_1 needs two coordinates), got {self.rank}")
        if self.d0 <= 0 or self.d1 <= 0:
            raise ValueError("densities d0 and d1 must be > 0")
        if self.sigma < 0 or self.sigma1 < 0:
            raise ValueError("noise parameters sigma and sigma1 must be >= 0")
        if not 0.0 < self.share_group1 < 1.0:
            raise ValueError("share_group1 must be in (0, 1)")
        if self.chunk_size < 1 or self.probe_draws < 1:
            raise ValueError("chunk_size and probe_draws must be >= 1")
        if self.noise not in NOISE_READINGS:
            raise ValueError(f"unknown noise reading {self.noise!r}; choose one of {', '.join(NOISE_READINGS)}")
        if self.mu1 not in MU1_READINGS:
            raise ValueError(f"unknown mu1 reading {self.mu1!r}; choose one of {', '.join(MU1_READINGS)}")
        if not all(isinstance(k, (int, np.integer)) and k >= 0 for k in self.stream):
            raise ValueError(
                f"stream must be a tuple of non-negative ints (a SeedSequence spawn key), got {self.stream!r}"
            )
        get_exposure(self.exposure)

    def replace(self, **kw) -> SimpsonConfig:
        """A copy with the fields in ``kw`` changed (:func:`dataclasses.replace`)."""
        return dataclasses.replace(self, **kw)

    @property
    def variant(self) -> str:
        """The named reading of the paper's text, e.g. ``"noise=item, mu1=printed"``."""
        return f"noise={self.noise}, mu1={self.mu1}"

    def streams(self) -> list:
        """The five independent child streams (users, items, noise, experiment, probe)."""
        return np.random.SeedSequence(self.seed, spawn_key=tuple(int(k) for k in self.stream)).spawn(5)


#: Deprecated name of :class:`SimpsonConfig` (easily confused with the simulated FACTER recommender's
#: ``SimulatorConfig``); kept for code outside the Simpson notebooks that still imports it.
SimConfig = SimpsonConfig
#: the default configuration (a module-level singleton: used as a default argument)
DEFAULT_CONFIG = SimpsonConfig()


@dataclass
class Simulation:
    """One simulated world and the recommender's full rankings in it."""

    config: SimpsonConfig
    users: np.ndarray = field(repr=False)  # N x r, unit norm
    items: np.ndarray = field(repr=False)  # M x r, unit norm
    groups: np.ndarray = field(repr=False)  # M, 0/1
    positions: np.ndarray = field(repr=False)  # N x M int16, from 1
    relevant: np.ndarray = field(repr=False)  # N x M bool
    stats: UserStats = field(repr=False)
    probe: dict = field(default_factory=dict)

    @property
    def mu1_hat(self) -> np.ndarray:
        """``mu_1/|mu_1|`` under this world's configuration (:func:`mu1_hat`)."""
        return mu1_hat(self.config)

    @property
    def user_feature(self) -> np.ndarray:
        """``x_i = clip(U_i . mu_1/|mu_1|, -1, 1)``: the scalar user variable of the counts estimator."""
        return np.clip(self.users @ self.mu1_hat, -1.0, 1.0)


@dataclass
class RandomExperiment:
    """One uniformly drawn shown item per user, with what is observed about it."""

    shown: np.ndarray  # item index per user
    group: np.ndarray  # S of the shown item
    relevant: np.ndarray  # Rel of the shown item
    exposure: np.ndarray  # Exp the evaluated recommender gives the shown item
    user_feature: np.ndarray  # scalar x_i (for the counts cells)
    user_embedding: np.ndarray = field(repr=False)  # U_i (for the logistic model)
    n_relevant_0: np.ndarray | None = field(default=None, repr=False)  # true n_0(u) (oracle weights only)
    n_relevant_1: np.ndarray | None = field(default=None, repr=False)  # true n_1(u)


def _mu(s: int, r: int, reading: str = "printed") -> np.ndarray:
    """mu_0 = [1, 0, ...]; mu_1 = [1, 1, 0, ...] (``"printed"``) or [0, 1, 0, ...] (``"orthonormal"``).

    >>> _mu(1, 3).tolist(), _mu(1, 3, "orthonormal").tolist()
    ([1.0, 1.0, 0.0], [0.0, 1.0, 0.0])
    """
    mu = np.zeros(r)
    mu[0] = 1.0
    if s == 1:
        mu[1] = 1.0
        if reading == "orthonormal":
            mu[0] = 0.0
    return mu


def mu1_hat(cfg: SimpsonConfig) -> np.ndarray:
    """mu_1/|mu_1| under the configuration's ``mu1`` reading."""
    mu = _mu(1, cfg.rank, cfg.mu1)
    return mu / np.linalg.norm(mu)


def noise_sd(x, sigma: float, sigma1: float) -> np.ndarray:
    """sd = sigma (1 + f(x)), f(x) = sigma_1 (x + 1)/2 (linear, f(-1) = 0, f(1) = sigma_1), x clipped to [-1, 1].

    >>> noise_sd(np.array([-1.0, 0.0, 1.0, 2.0]), 0.05, 10.0).round(3).tolist()
    [0.05, 0.3, 0.55, 0.55]
    """
    x = np.clip(np.asarray(x, dtype=float), -1.0, 1.0)
    return sigma * (1.0 + sigma1 * (x + 1.0) / 2.0)


def noise_scale(cfg: SimpsonConfig, users: np.ndarray, items: np.ndarray) -> np.ndarray:
    """The score noise's standard deviation, broadcastable to users x items: one value per user
    (``noise="user"``: ``x = U_i . mu_1/|mu_1|``, shape N x 1) or per item (``noise="item"``:
    ``x = V_j . mu_1/|mu_1|``, shape 1 x M), sd = sigma (1 + f(x)) (:func:`noise_sd`)."""
    direction = mu1_hat(cfg)
    if cfg.noise == "user":
        return noise_sd(users @ direction, cfg.sigma, cfg.sigma1)[:, None]
    return noise_sd(items @ direction, cfg.sigma, cfg.sigma1)[None, :]


def ranks_from_scores(scores: np.ndarray) -> np.ndarray:
    """Positions (1 = top) of each item in each row's descending ranking.

    Ties (probability zero with continuous scores) are broken arbitrarily by numpy's quicksort.

    >>> ranks_from_scores(np.array([[0.1, 0.9, 0.5]])).tolist()
    [[3, 1, 2]]
    """
    return _positions_of_order(np.argsort(-scores, axis=1))


def _positions_of_order(order: np.ndarray) -> np.ndarray:
    """The inverse permutation of each row of ``order`` (item indices, best first), from 1, as int16:
    ``pos[i, order[i, k]] = k + 1``, written through flat indices (``order`` is overwritten; the same
    array as ``np.put_along_axis``, four times faster at 10,000 x 100)."""
    n, m = order.shape
    pos = np.empty((n, m), dtype=np.int16)
    order += (np.arange(n, dtype=order.dtype) * m)[:, None]
    pos.reshape(-1)[order.reshape(-1)] = np.tile(np.arange(1, m + 1, dtype=np.int16), n)
    return pos


def simulate(cfg: SimpsonConfig = DEFAULT_CONFIG) -> Simulation:
    """Simulate users, items, relevance and the recommender's full rankings (docs/SIMPSON.md §3).

    >>> sim = simulate(SimpsonConfig(n_users=200, seed=1))
    >>> sim.positions.shape, int(sim.positions.min()), int(sim.positions.max()), int(sim.groups.sum())
    ((200, 100), 1, 100, 50)
    """
    streams = cfg.streams()
    users, items, groups = _users_items(cfg, streams)
    bias = _bias(groups, cfg)
    n, m = cfg.n_users, cfg.n_items
    positions = np.empty((n, m), dtype=np.int16)
    relevant = np.empty((n, m), dtype=bool)
    for start, scores in _unbiased_chunks(cfg, users, items, relevant, streams[2]):
        scores += bias[None, :]  # scores = aff + noise * sd + bias
        positions[start : start + len(scores)] = _rank_in_place(scores)
    stats = _stats_chunked(positions, relevant, groups, cfg)
    probe = _probe(items, groups, bias, cfg, np.random.default_rng(streams[4]))
    return Simulation(cfg, users, items, groups, positions, relevant, stats, probe)


def _users_items(cfg: SimpsonConfig, streams: list) -> tuple:
    """Users (N x r), items (M x r) and the items' groups (M,), each from its own stream (``cfg.streams()``)."""
    s_users, s_items = streams[:2]
    r, n, m = cfg.rank, cfg.n_users, cfg.n_items
    users = normalise_rows(np.random.default_rng(s_users).standard_normal((n, r)))
    m1 = int(round(m * cfg.share_group1))
    m0 = m - m1
    rng_items = np.random.default_rng(s_items)
    v0 = _mu(0, r) + rng_items.standard_normal((m0, r)) / np.sqrt(cfg.d0)
    v1 = _mu(1, r, cfg.mu1) + rng_items.standard_normal((m1, r)) / np.sqrt(cfg.d1)
    items = normalise_rows(np.vstack([v0, v1]))
    groups = np.r_[np.zeros(m0, dtype=np.int8), np.ones(m1, dtype=np.int8)]
    return users, items, groups


def _bias(groups: np.ndarray, cfg: SimpsonConfig) -> np.ndarray:
    """bias_j = b for the group-1 items, 0 for the others."""
    return np.where(groups == 1, cfg.bias, 0.0)


def _unbiased_chunks(cfg: SimpsonConfig, users: np.ndarray, items: np.ndarray, relevant: np.ndarray, s_noise):
    """Per chunk of users: ``(start, aff + noise * sd)``, the scores before the model bias (a new float64
    array each), writing ``relevant`` (``aff > T``) on the way.  The noise stream is drawn chunk after
    chunk, so the draws do not depend on the chunk size."""
    rng_noise = np.random.default_rng(s_noise)
    with one_thread():  # N x 8 times 8 x M: one BLAS thread per worker process (blas.py)
        for start in range(0, cfg.n_users, cfg.chunk_size):
            u = users[start : start + cfg.chunk_size]
            aff = u @ items.T
            sd = noise_scale(cfg, u, items)
            # aff + noise * sd computed in place: the same sum (a + b == b + a exactly), so the same bits as
            # the expression, with an array fewer
            scores = np.multiply(rng_noise.standard_normal(aff.shape, dtype=np.float32), sd)
            scores += aff
            np.greater(aff, cfg.threshold, out=relevant[start : start + len(u)])
            yield start, scores


def _rank_in_place(scores: np.ndarray) -> np.ndarray:
    """:func:`ranks_from_scores` of ``scores``, negating ``scores`` in place instead of into a copy."""
    np.negative(scores, out=scores)
    return _positions_of_order(np.argsort(scores, axis=1))


class BiasFreeWorld:
    """One simulated world whose model bias b is still open: users, items, relevance and the scores
    before the bias are drawn once, and :meth:`simulation` ranks them under any b.
    ``BiasFreeWorld(cfg).simulation(b)`` is ``simulate(cfg.replace(bias=b))`` bit for bit (the scores are
    ``(aff + noise * sd) + bias`` in both), without drawing the noise again: :func:`~facterlab.simpson.study.calibrate_bias`
    asks for the same world under a dozen biases.  It holds the N x M scores (8 bytes each)."""

    def __init__(self, cfg: SimpsonConfig) -> None:
        self.config = cfg
        self._streams = cfg.streams()  # the bias is no part of the seed: the same streams under every b
        self.users, self.items, self.groups = _users_items(cfg, self._streams)
        self.relevant = np.empty((cfg.n_users, cfg.n_items), dtype=bool)
        self._chunks = list(_unbiased_chunks(cfg, self.users, self.items, self.relevant, self._streams[2]))

    def _positions(self, bias: np.ndarray) -> np.ndarray:
        positions = np.empty(self.relevant.shape, dtype=np.int16)
        for start, unbiased in self._chunks:
            scores = unbiased + bias[None, :]
            positions[start : start + len(scores)] = _rank_in_place(scores)
        return positions

    def stats(self, b: float) -> UserStats:
        """The per-user statistics under bias ``b`` (what the PerUserGap needs; no probe)."""
        cfg = self.config.replace(bias=float(b))
        return _stats_chunked(self._positions(_bias(self.groups, cfg)), self.relevant, self.groups, cfg)

    def simulation(self, b: float) -> Simulation:
        """The whole :class:`Simulation` under bias ``b``: ``simulate(config.replace(bias=b))``."""
        cfg = self.config.replace(bias=float(b))
        bias = _bias(self.groups, cfg)
        positions = self._positions(bias)
        stats = _stats_chunked(positions, self.relevant, self.groups, cfg)
        probe = _probe(self.items, self.groups, bias, cfg, np.random.default_rng(self._streams[4]))
        return Simulation(cfg, self.users, self.items, self.groups, positions, self.relevant, stats, probe)


def _stats_chunked(positions, relevant, groups, cfg) -> UserStats:
    parts = [
        UserStats.from_arrays(positions[s : s + cfg.chunk_size], relevant[s : s + cfg.chunk_size], groups, cfg.exposure)
        for s in range(0, positions.shape[0], cfg.chunk_size)
    ]
    out = parts[0]
    for p in parts[1:]:
        out = out.concat(p)
    return out


def _probe(items, groups, bias, cfg: SimpsonConfig, rng) -> dict:
    """Competition and performance of a hypothetical user aligned with mu_1 (docs/SIMPSON.md §3)."""
    f = get_exposure(cfg.exposure)
    u = mu1_hat(cfg)
    aff = items @ u
    rel = aff > cfg.threshold
    n_rel = int(rel.sum())
    c = float(competition(np.array([n_rel]), cfg.exposure)[0]) if n_rel else float("nan")
    # the user reading: u* has x = 1, sd = sigma (1 + sigma_1); the item reading: each item's own sd
    sd = noise_scale(cfg, u[None, :], items)
    scores = aff[None, :] + rng.standard_normal((cfg.probe_draws, len(aff))) * sd + bias[None, :]
    pos = ranks_from_scores(scores)
    if n_rel:
        ebar = (f(pos) * rel[None, :]).sum(axis=1) / n_rel
        ndcg = float(np.mean(ebar / c))
    else:
        ndcg = float("nan")
    return {
        "probe_n_relevant": n_rel,
        "probe_n_relevant_0": int((rel & (groups == 0)).sum()),
        "probe_n_relevant_1": int((rel & (groups == 1)).sum()),
        "probe_competition": c,
        "probe_ndcg": ndcg,
    }


def random_experiment(sim: Simulation, seed: int | None = None) -> RandomExperiment:
    """Show each user one item drawn uniformly (independently of the user) and observe it.

    ``seed=None`` uses the simulation's own experiment stream; an int draws a fresh experiment
    on the same world (used to check that the naive estimator is unbiased).
    """
    if seed is None:
        rng = np.random.default_rng(sim.config.streams()[3])
    else:
        rng = np.random.default_rng(
            np.random.SeedSequence([sim.config.seed, 7919, int(seed)], spawn_key=tuple(sim.config.stream))
        )
    n, m = sim.positions.shape
    shown = np.asarray(rng.integers(0, m, size=n))
    rows = np.arange(n)
    f = get_exposure(sim.config.exposure)
    return RandomExperiment(
        shown=shown,
        group=sim.groups[shown].astype(np.int8),
        relevant=sim.relevant[rows, shown],
        exposure=f(sim.positions[rows, shown]),
        user_feature=sim.user_feature,
        user_embedding=sim.users,
        n_relevant_0=sim.stats.n0,
        n_relevant_1=sim.stats.n1,
    )


def measure(sim: Simulation, experiment: RandomExperiment | None = None, ips: bool = True, n_bins: int = 10) -> dict:
    """All read-outs of one simulation: true gaps, decomposition, factors and estimates (raw units)."""
    st = sim.stats
    pug = per_user_gap(st)
    agg = aggregate_gap(st)
    dec = decompose(st)
    out = {
        "per_user_gap": pug.value,
        "share_defined": pug.share_defined,
        "aggregate_gap": agg.value,
        "ips_estimand": ips_estimand(st),
        "lemma_aggregate_gap": lemma_aggregate_gap(st),
        "competition_performance_term": dec.competition_performance,
        "per_user_gap_term": dec.per_user_gap_term,
        "relevance_rate": float(sim.relevant.mean()),
        "mean_n_relevant_0": float(st.n0.mean()),
        "mean_n_relevant_1": float(st.n1.mean()),
        "mean_ndcg": float(np.nanmean(dec.performance)),
    }
    out.update(sim.probe)
    if ips:
        exp = experiment if experiment is not None else random_experiment(sim)
        out["naive_estimate"] = ips_mod.naive_estimate(exp).value
        out["ips_counts"] = ips_mod.ips_estimate(exp, "counts", n_bins=n_bins).value
        out["ips_model"] = ips_mod.ips_estimate(exp, "model").value
        out["ips_oracle"] = ips_mod.ips_estimate(exp, "oracle").value
        out["ips_oracle_both"] = ips_mod.ips_estimate(exp, "oracle_both").value
        out["n_observed_0"] = int((exp.relevant & (exp.group == 0)).sum())
        out["n_observed_1"] = int((exp.relevant & (exp.group == 1)).sum())
    return out


def simulate_and_measure(cfg: SimpsonConfig = DEFAULT_CONFIG, ips: bool = True) -> dict:
    """One simulation: simulate + random experiment + measure, as a flat dict of the config's knobs and
    read-outs (called ``run`` before; "run" now means one FACTER run only, docs/ARCHITECTURE.md).

    Parameters
    ----------
    cfg : SimpsonConfig
        The simulation's settings (default :data:`DEFAULT_CONFIG`).
    ips : bool
        Also compute the IPS estimates (the slowest read-out).

    Returns
    -------
    dict
        The config's knobs (``n_users``, ``d1``, ``sigma1``, ``bias``, ``seed``, ...) and the read-outs of
        :func:`measure` (gaps in pp units of exposure, IPS estimates, factor read-outs).
    """
    sim = simulate(cfg)
    res = {
        k: getattr(cfg, k)
        for k in ("n_users", "n_items", "rank", "d0", "d1", "sigma", "sigma1", "bias", "seed", "noise", "mu1")
    }
    res.update(measure(sim, ips=ips))
    return res


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
