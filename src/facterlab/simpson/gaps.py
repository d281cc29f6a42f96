"""Per-user and aggregate exposure gaps, and the identities that link them.

Prost et al. (2022), "Simpson's Paradox in Recommender Fairness", §3 (definitions), the lemma
(aggregate = difference of user mixtures), the matching theorem and the three-factor
decomposition (competition, performance, per-user gap).  Formulas as fixed in docs/SIMPSON.md §1.

Notation: D_u^s relevant items of group s for user u, ``n_s(u) = |D_u^s|``, n(u) = n_0(u) + n_1(u),
e_s(u) = mean exposure of D_u^s.  Sign convention: group 0 minus group 1.

Two inputs give the same :class:`UserStats`:

- a long table with one row per (user, item) pair: columns ``user, item, group, relevant, position``
  (:meth:`UserStats.from_table`);
- dense arrays: positions (N x M, from 1), relevance (N x M, bool) and item groups (M,)
  (:meth:`UserStats.from_arrays`).

>>> pos = np.array([[1, 2, 3], [3, 1, 2]]); rel = np.array([[1, 1, 1], [0, 1, 1]], bool)
>>> st = UserStats.from_arrays(pos, rel, np.array([0, 1, 1]), exposure="position")
>>> per_user_gap(st).value, per_user_gap(st).share_defined, aggregate_gap(st).value
(-1.5, 0.5, -1.0)
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from facterlab.simpson.exposure import ExposureLike, competition, get_exposure

TABLE_COLUMNS = ("user", "item", "group", "relevant", "position")


@dataclass
class UserStats:
    """Sufficient statistics per user: counts n_s(u) and exposure sums of relevant items per group.

    ``sum0[u]`` = sum of Exp(i, u) over D_u^0, ``sum1`` likewise; ``exposure`` is the f used.
    """

    n0: np.ndarray
    n1: np.ndarray
    sum0: np.ndarray
    sum1: np.ndarray
    exposure: ExposureLike = "log"
    users: np.ndarray | None = None

    @property
    def n_users(self) -> int:
        """The number of users (rows of ``n0``)."""
        return int(self.n0.shape[0])

    @property
    def n(self) -> np.ndarray:
        """n(u) = n_0(u) + n_1(u)."""
        return self.n0 + self.n1

    @property
    def defined(self) -> np.ndarray:
        """Mask of U*: users with n_0(u) >= 1 and n_1(u) >= 1."""
        return (self.n0 >= 1) & (self.n1 >= 1)

    @property
    def e0(self) -> np.ndarray:
        """e_0(u), NaN where n_0(u) = 0."""
        return _safe_div(self.sum0, self.n0)

    @property
    def e1(self) -> np.ndarray:
        """e_1(u), NaN where n_1(u) = 0."""
        return _safe_div(self.sum1, self.n1)

    # ---------------------------------------------------------------------------------------
    @classmethod
    def from_arrays(cls, positions, relevant, groups, exposure: ExposureLike = "log") -> UserStats:
        """Statistics from dense arrays: positions (N x M, 1-based), relevance (N x M), groups (M,)."""
        positions = np.asarray(positions)
        relevant = np.asarray(relevant)
        groups = np.asarray(groups)
        if positions.ndim != 2:
            raise ValueError("positions must be a 2-D array (users x items)")
        if relevant.shape != positions.shape:
            raise ValueError(f"relevant has shape {relevant.shape}, positions {positions.shape}: they must match")
        if groups.shape != (positions.shape[1],):
            raise ValueError(f"groups must have one entry per item ({positions.shape[1]}), got shape {groups.shape}")
        _check_groups(groups)
        rel = relevant.astype(bool)
        exp = _exposure_of(positions, exposure) * rel
        g1 = groups.astype(bool)
        return cls(
            n0=rel[:, ~g1].sum(axis=1).astype(np.int64),
            n1=rel[:, g1].sum(axis=1).astype(np.int64),
            sum0=exp[:, ~g1].sum(axis=1),
            sum1=exp[:, g1].sum(axis=1),
            exposure=exposure,
        )

    @classmethod
    def from_table(cls, table: pd.DataFrame, exposure: ExposureLike = "log") -> UserStats:
        """Statistics from a long table with columns ``user, item, group, relevant, position``.

        Every user appearing in the table counts in N, with or without relevant rows.
        """
        missing = [c for c in TABLE_COLUMNS if c not in table.columns]
        if missing:
            raise ValueError(f"table is missing column(s) {missing}; need {list(TABLE_COLUMNS)}")
        if table.duplicated(["user", "item"]).any():
            raise ValueError("table has duplicate (user, item) rows")
        groups = table["group"].to_numpy()
        _check_groups(groups)
        codes, users = pd.factorize(table["user"], sort=True)
        rel = table["relevant"].to_numpy().astype(bool)
        exp = get_exposure(exposure)(table["position"].to_numpy()) * rel
        g1 = groups.astype(bool)
        n_users = len(users)
        bc = lambda w: np.bincount(codes, weights=w, minlength=n_users)  # noqa: E731
        return cls(
            n0=np.rint(bc((rel & ~g1).astype(float))).astype(np.int64),
            n1=np.rint(bc((rel & g1).astype(float))).astype(np.int64),
            sum0=bc(np.where(g1, 0.0, exp)),
            sum1=bc(np.where(g1, exp, 0.0)),
            exposure=exposure,
            users=np.asarray(users),
        )

    def concat(self, other: UserStats) -> UserStats:
        """Stack the users of two statistics objects (same exposure), e.g. chunks of a simulation."""
        return UserStats(
            n0=np.concatenate([self.n0, other.n0]),
            n1=np.concatenate([self.n1, other.n1]),
            sum0=np.concatenate([self.sum0, other.sum0]),
            sum1=np.concatenate([self.sum1, other.sum1]),
            exposure=self.exposure,
        )


@dataclass
class PerUserGap:
    """PerUserGap = mean over U* of e_0(u) - e_1(u), with the share ``|U*|/N`` where it is defined."""

    value: float
    share_defined: float
    n_defined: int
    n_users: int
    per_user: np.ndarray = field(repr=False)
    missing_reason: str | None = None


@dataclass
class AggregateGap:
    """AggregateGap = mean Exp over pooled relevant pairs of group 0 minus the same for group 1."""

    value: float
    mean_exposure_0: float
    mean_exposure_1: float
    n_pairs_0: int
    n_pairs_1: int
    missing_reason: str | None = None


def per_user_gap(stats: UserStats) -> PerUserGap:
    """PerUserGap = ``(1/|U*|) sum_{u in U*} [e_0(u) - e_1(u)]``,  ``U* = {u : n_0(u) >= 1, n_1(u) >= 1}``.

    docs/SIMPSON.md §1.  When U* is empty the value is NaN with ``missing_reason``.

    >>> st = UserStats(np.array([1, 2, 0]), np.array([1, 1, 3]), np.array([1., 3.]+[0.]), np.array([2., 4., 6.]), "position")
    >>> g = per_user_gap(st); g.value, g.n_defined, round(g.share_defined, 3)
    (-1.75, 2, 0.667)

    Reference: [prost2022simpson] (docs/references.bib).
    """
    mask = stats.defined
    gaps = np.where(mask, stats.e0 - stats.e1, np.nan)
    n_def = int(mask.sum())
    n = stats.n_users
    if n_def == 0:
        return PerUserGap(
            float("nan"),
            0.0 if n else float("nan"),
            0,
            n,
            gaps,
            "no user has relevant items of both groups (U* is empty)",
        )
    return PerUserGap(float(np.mean(gaps[mask])), n_def / n, n_def, n, gaps)


def aggregate_gap(stats: UserStats) -> AggregateGap:
    """AggregateGap = sum_u S_0(u) / sum_u n_0(u) - sum_u S_1(u) / sum_u n_1(u), S_s the exposure sums.

    docs/SIMPSON.md §1 (pairs pooled across users).  NaN with ``missing_reason`` if a group has no pair.

    >>> st = UserStats(np.array([1, 2]), np.array([1, 1]), np.array([1., 3.]), np.array([2., 4.]), "position")
    >>> aggregate_gap(st).value
    -1.6666666666666667

    Reference: [prost2022simpson] (docs/references.bib).
    """
    m0, m1 = int(stats.n0.sum()), int(stats.n1.sum())
    if m0 == 0 or m1 == 0:
        return AggregateGap(
            float("nan"), float("nan"), float("nan"), m0, m1, f"no relevant pair of group {0 if m0 == 0 else 1}"
        )
    a0 = float(stats.sum0.sum() / m0)
    a1 = float(stats.sum1.sum() / m1)
    return AggregateGap(a0 - a1, a0, a1, m0, m1)


def ips_estimand(stats: UserStats) -> float:
    """What IPS with the true weights 1/n_s(u) estimates: mean e_0(u) over users with n_0(u) >= 1
    minus mean e_1(u) over users with n_1(u) >= 1.  Equals the PerUserGap when every user with a
    relevant item has relevant items of both groups; otherwise the users lacking one group pull it
    away (docs/SIMPSON.md §2).  NaN when a group has no relevant pair.

    >>> st = UserStats(np.array([1, 1]), np.array([1, 0]), np.array([1., 3.]), np.array([2., 0.]), "position")
    >>> ips_estimand(st), per_user_gap(st).value  # (1 + 3)/2 - 2 vs 1 - 2
    (0.0, -1.0)

    Reference: [prost2022simpson] (docs/references.bib).
    """
    has0, has1 = stats.n0 >= 1, stats.n1 >= 1
    if not has0.any() or not has1.any():
        return float("nan")
    return float(np.mean(stats.e0[has0]) - np.mean(stats.e1[has1]))


def user_mixtures(stats: UserStats) -> tuple:
    """The lemma's user distributions P_s(u) = n_s(u) / sum_v n_s(v), s = 0, 1."""
    m0, m1 = stats.n0.sum(), stats.n1.sum()
    if m0 == 0 or m1 == 0:
        raise ValueError("a group has no relevant pair: its user mixture P_s is undefined")
    return stats.n0 / m0, stats.n1 / m1


def lemma_aggregate_gap(stats: UserStats) -> float:
    """Lemma (user mixture): AggregateGap = E_{P_0}[e_0(u)] - E_{P_1}[e_1(u)].

    Computed from per-user means e_s(u) and the mixtures P_s, independently of the pooled sums.

    >>> st = UserStats(np.array([1, 2]), np.array([1, 1]), np.array([1., 3.]), np.array([2., 4.]), "position")
    >>> round(lemma_aggregate_gap(st), 12)
    -1.666666666667

    Reference: [prost2022simpson] (docs/references.bib).
    """
    p0, p1 = user_mixtures(stats)
    e0 = np.where(stats.n0 > 0, stats.e0, 0.0)
    e1 = np.where(stats.n1 > 0, stats.e1, 0.0)
    return float(np.sum(p0 * e0) - np.sum(p1 * e1))


def expected_per_user_gap(stats: UserStats, q) -> float:
    """E_Q[PerUserGap(u)] for a distribution q over users supported on U* (matching theorem).

    The theorem: if P_0 = P_1 = Q then AggregateGap = E_Q[PerUserGap(u)].
    """
    q = np.asarray(q, dtype=float)
    if q.shape != (stats.n_users,):
        raise ValueError("q must have one weight per user")
    if np.any(q < 0) or not np.isclose(q.sum(), 1.0):
        raise ValueError("q must be a probability distribution over users")
    if np.any(q[~stats.defined] > 0):
        raise ValueError("q puts mass on users outside U* (where the per-user gap is undefined)")
    g = np.where(stats.defined, stats.e0 - stats.e1, 0.0)
    return float(np.sum(q * g))


def reweighted_aggregate_gap(positions, relevant, groups, exposure: ExposureLike = "log") -> float:
    """Matching theorem, constructive form: pool the relevant pairs of U*, weight a pair of group s
    by 1/n_s(u); the weighted pooled difference sum w Exp [S=0] / sum w [S=0] - (same for S=1)
    equals the PerUserGap.  Works on dense arrays, pair by pair (an independent computation).
    """
    positions = np.asarray(positions)
    rel = np.asarray(relevant).astype(bool)
    g1 = np.asarray(groups).astype(bool)
    _check_groups(np.asarray(groups))
    exp = get_exposure(exposure)(positions)
    n1 = (rel & g1[None, :]).sum(axis=1)
    n0 = (rel & ~g1[None, :]).sum(axis=1)
    in_star = (n0 >= 1) & (n1 >= 1)
    if not in_star.any():
        raise ValueError("no user has relevant items of both groups (U* is empty)")
    pairs = rel & in_star[:, None]
    ns = np.where(g1[None, :], n1[:, None], n0[:, None]).astype(float)
    w = np.where(pairs, 1.0 / np.maximum(ns, 1.0), 0.0)
    w0, w1 = w * ~g1[None, :], w * g1[None, :]
    return float((w0 * exp).sum() / w0.sum() - (w1 * exp).sum() / w1.sum())


@dataclass
class Decomposition:
    """Three-factor decomposition of the AggregateGap (docs/SIMPSON.md §1).

    ``competition_performance`` = E_{P_0}(C Perf) - E_{P_1}(C Perf);
    ``per_user_gap_term`` = E_{P_0}(pi_1 G) + E_{P_1}(pi_0 G); ``total`` is their sum.
    Per-user arrays: ``competition`` C(u), ``performance`` Perf(u), ``pi0``, ``pi1``, ``gap`` G(u).
    """

    competition_performance: float
    per_user_gap_term: float
    total: float
    competition: np.ndarray = field(repr=False)
    performance: np.ndarray = field(repr=False)
    pi0: np.ndarray = field(repr=False)
    pi1: np.ndarray = field(repr=False)
    gap: np.ndarray = field(repr=False)


def decompose(stats: UserStats) -> Decomposition:
    """AggregateGap = [E_{P_0}(C Perf) - E_{P_1}(C Perf)] + [E_{P_0}(pi_1 G) + E_{P_1}(pi_0 G)].

    C(u) = (1/n(u)) sum_{p=1..n(u)} f(p); Perf(u) = Ebar(u)/C(u) (nDCG with binary relevance for
    the log exposure); pi_s(u) = n_s(u)/n(u); G(u) = e_0(u) - e_1(u) on U*, 0 elsewhere.  Uses
    e_0 = C Perf + pi_1 G and e_1 = C Perf - pi_0 G.

    >>> st = UserStats(np.array([1, 2]), np.array([1, 1]), np.array([1., 3.]), np.array([2., 4.]), "position")
    >>> d = decompose(st); round(d.total, 12), round(d.competition_performance + d.per_user_gap_term, 12)
    (-1.666666666667, -1.666666666667)

    Reference: [prost2022simpson] (docs/references.bib).
    """
    p0, p1 = user_mixtures(stats)
    n = stats.n
    has = n > 0
    c = competition(n, stats.exposure)
    ebar = _safe_div(stats.sum0 + stats.sum1, n)
    perf = _safe_div(ebar, c)
    pi0 = _safe_div(stats.n0, n)
    pi1 = _safe_div(stats.n1, n)
    g = np.where(stats.defined, stats.e0 - stats.e1, 0.0)
    cp = np.where(has, c * perf, 0.0)
    pi0z, pi1z = np.where(has, pi0, 0.0), np.where(has, pi1, 0.0)
    term1 = float(np.sum(p0 * cp) - np.sum(p1 * cp))
    term2 = float(np.sum(p0 * pi1z * g) + np.sum(p1 * pi0z * g))
    return Decomposition(term1, term2, term1 + term2, c, perf, pi0, pi1, g)


def gaps_from_table(table: pd.DataFrame, exposure: ExposureLike = "log") -> tuple:
    """(PerUserGap, AggregateGap) from a long table (see :meth:`UserStats.from_table`).

    Examples
    --------
    The module's two users as a table (exposure = position): user ``a`` has relevant items of both
    groups, user ``b`` only of group 1, so the PerUserGap is user ``a``'s alone.

    >>> import pandas as pd
    >>> t = pd.DataFrame({"user": list("aaabbb"), "item": [0, 1, 2] * 2, "group": [0, 1, 1] * 2,
    ...                   "relevant": [1, 1, 1, 0, 1, 1], "position": [1, 2, 3, 3, 1, 2]})
    >>> pug, agg = gaps_from_table(t, exposure="position")
    >>> pug.value, pug.share_defined, agg.value
    (-1.5, 0.5, -1.0)

    See Also
    --------
    gaps_from_arrays : the same from dense arrays.
    facterlab.simpson.ips.ips_estimate : the per-user gap estimated from one shown item per user.
    """
    st = UserStats.from_table(table, exposure)
    return per_user_gap(st), aggregate_gap(st)


def gaps_from_arrays(positions, relevant, groups, exposure: ExposureLike = "log") -> tuple:
    """(PerUserGap, AggregateGap) from dense arrays (see :meth:`UserStats.from_arrays`)."""
    st = UserStats.from_arrays(positions, relevant, groups, exposure)
    return per_user_gap(st), aggregate_gap(st)


def _exposure_of(positions: np.ndarray, exposure: ExposureLike) -> np.ndarray:
    """f(positions); for integer positions through a lookup table of f(1..max) (same values, faster)."""
    f = get_exposure(exposure)
    if np.issubdtype(positions.dtype, np.integer) and positions.size:
        lo, hi = int(positions.min()), int(positions.max())
        if lo < 1:
            raise ValueError("positions start at 1; got a position below 1")
        if hi <= 10 * positions.size:
            return np.asarray(f(np.arange(1, hi + 1)), dtype=float)[positions - 1]
    return np.asarray(f(positions), dtype=float)


def _safe_div(a, b) -> np.ndarray:
    a = np.asarray(a, dtype=float)
    b = np.asarray(b, dtype=float)
    out = np.full(np.broadcast(a, b).shape, np.nan)
    np.divide(a, b, out=out, where=b != 0)
    return out


def _check_groups(groups: np.ndarray) -> None:
    vals = pd.unique(np.asarray(groups).ravel())
    bad = [v for v in vals if v not in (0, 1, True, False)]
    if bad:
        raise ValueError(f"item groups must be 0 or 1; got {bad[:5]}")
