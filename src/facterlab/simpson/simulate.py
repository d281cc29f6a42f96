"""Vectorised, seeded simulation of the paper's synthetic recommender (Prost et al. 2022, §5;
docs/SIMPSON.md §3).

- Users U_i: uniform on the unit sphere of R^r (choice), r = 8.
- Items of group s: normalise(mu_s + Gaussian(0, (1/d_s) I)), mu_0 = [1, 0, ...], mu_1 by the
  ``mu1`` reading below; d_0 = 1.5, d_1 varied ("density").  M = 100 items, half in each group (choice).
- Relevance: Rel(i, j) = 1 iff U_i . V_j > T, T = 0.3 (21.6 % of pairs at r = 8).
- Score(i, j) = U_i . V_j + noise_ij + bias_j, bias_j = b for group-1 items (model bias),
  noise_ij ~ N(0, (sigma (1 + f(x)))^2), x = clip(U_i . mu_1/‖mu_1‖, -1, 1) (or V_j's, by the
  ``noise`` reading below), f linear with f(-1) = 0, f(1) = sigma_1 ("noise level"), i.e.
  f(x) = sigma_1 (x + 1)/2.  The standard normal draws are float32 (choice: faster, ties stay negligible).
- Full ranking by score (argsort of the N x M score matrix, chunked over users);
  Exp = f_exp(position), default 1/log2(1 + p).
- Random experiment: one item per user, drawn uniformly and independently of the user.
- Factor read-outs (docs/SIMPSON.md §3): a hypothetical user u* = mu_1/‖mu_1‖ (excluded from the gaps):
  competition n(u*) and C(u*), performance nDCG(u*) (choice: the mean over ``probe_draws``
  independent noise draws).

Two readings of the paper's text are named variants (``docs/SIMPSON.md``):

- ``noise``: ``"user"`` (default) takes the noise level from the user's alignment
  x_i = U_i . mu_1/‖mu_1‖ (the formula as printed names U_i); ``"item"`` takes it from the *item's*
  alignment x_j = V_j . mu_1/‖mu_1‖ (the prose: items of group 1 are noisier).
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

import dataclasses
import logging
from dataclasses import dataclass, field

import numpy as np

from facterlab.blas import one_thread
from facterlab.metrics.embeddings import normalise_rows
from facterlab.simpson import ips as ips_mod
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
    """mu_1/‖mu_1‖ under the configuration's ``mu1`` reading."""
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
    with one_thread():  # N x 8 times 8 x M: one BLAS thread per worker process (facterlab.blas)
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
