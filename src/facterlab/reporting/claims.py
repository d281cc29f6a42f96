"""Checked statements under one standard (notebook 09; written to metrics.json as ``claims``).

Every claim states its criterion, the test behind the verdict and the smallest effect that test can
detect at the sample size it had, and ends in one of four verdicts:

- **holds**: the 99% interval (or the one-sided 1% test) lies on the claimed side;
- **fails**: it lies on the other side;
- **too small to tell**: it straddles the criterion (more rows or seeds would be needed; the smallest
  detectable effect says how far off the criterion the truth would have to be to decide);
- **by construction**: the statement cannot fail in this setting (every twin distance is 0, so the
  flag cannot fire; FACTER made no rule, so its prompt is Fair's).  It is reported with its numbers but
  not counted among the holds (:func:`by_construction`, :func:`verdict_counts`).

One standard for all: a rate against a bound uses the exact Clopper-Pearson interval at 99%.  Two
rates of *independent* rows, ``p1 < factor * p2`` (:func:`two_rate_claim`): a two-proportion z-test at
one-sided 1% (z = 2.33), or Fisher's exact test when a cell of the 2 x 2 table has fewer than
:data:`SMALL_COUNT` rows, for factor 1; for another factor, the exact unconditional test at every count
(the z statistic made monotone, its p-value the largest tail probability over the whole null boundary
``p1 = factor * p2``), or conservative Bonferroni bounds beyond :data:`EXACT_TABLES` tables.
Two rates on the *same* rows (paired flags, :func:`paired_rate_claim`): the exact McNemar test on the
discordant rows for factor 1; for another factor, two one-sided 99.5% Clopper-Pearson bounds
(Bonferroni), valid whatever the dependence between the rows.  A difference of per-seed means: a
paired one-sided t-test at 1%, or, when the differences have zero spread, the exact sign-flip test
(which needs 7 seeds to reach 1%).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass, fields, replace
from functools import lru_cache

import numpy as np
import pandas as pd

__all__ = [
    "Claim",
    "HOLDS",
    "FAILS",
    "TOO_SMALL",
    "BY_CONSTRUCTION",
    "VERDICTS",
    "by_construction",
    "verdict_counts",
    "summary_line",
    "clopper_pearson",
    "rate_claim",
    "two_rate_claim",
    "exact_ratio_pvalues",
    "paired_claim",
    "paired_rate_claim",
    "claims_frame",
]

HOLDS, FAILS, TOO_SMALL = "holds", "fails", "too small to tell"
#: a statement that cannot fail in its setting: reported, never counted among the holds
BY_CONSTRUCTION = "by construction"
#: every verdict, in the order summaries give them
VERDICTS = (HOLDS, FAILS, TOO_SMALL, BY_CONSTRUCTION)
LEVEL = 0.99
Z_ONE_SIDED = 2.326  # one-sided 1%
#: below this many rows in a cell of the 2 x 2 table, two_rate_claim uses Fisher's exact test
SMALL_COUNT = 10


@dataclass(frozen=True)
class Claim:
    """One checked statement (module docstring)."""

    claim: str
    criterion: str
    measured: str
    test: str
    smallest_effect: str
    verdict: str

    def to_json(self) -> dict:
        """The claim as a JSON-ready dict of its fields."""
        return asdict(self)

    @property
    def counted(self) -> bool:
        """Whether the verdict is a test's outcome (every verdict but :data:`BY_CONSTRUCTION`)."""
        return self.verdict != BY_CONSTRUCTION


def by_construction(claim: Claim | str, why: str, measured: str = "", criterion: str = "") -> Claim:
    """The statement ``claim`` with the verdict :data:`BY_CONSTRUCTION`: it cannot fail here, for the
    reason ``why``.  Given a :class:`Claim`, its criterion and measurement are kept and its test's
    name is prefixed by the reason.

    Parameters
    ----------
    claim : Claim or str
        A computed claim (its numbers are kept) or the statement's text.
    why : str
        Why the statement cannot fail in this setting.
    measured, criterion : str
        With a text ``claim``: what was measured and the criterion.

    Returns
    -------
    Claim
        The same statement with ``verdict = "by construction"``.

    Examples
    --------
    >>> c = by_construction(rate_claim("no false flag", 0, 900, 0.1, "<="), "every twin distance is 0")
    >>> c.verdict, c.counted, c.test.split(";")[0]
    ('by construction', False, 'not a test: every twin distance is 0')
    """
    if isinstance(claim, Claim):
        return Claim(
            claim.claim, claim.criterion, claim.measured, f"not a test: {why}; {claim.test}", "n/a", BY_CONSTRUCTION
        )
    return Claim(claim, criterion or "n/a", measured or "n/a", f"not a test: {why}", "n/a", BY_CONSTRUCTION)


def clopper_pearson(k: int, n: int, level: float = LEVEL) -> tuple:
    """Exact two-sided binomial interval for k successes in n trials.

    >>> lo, hi = clopper_pearson(10, 100, 0.95)
    >>> round(lo, 4), round(hi, 4)
    (0.049, 0.1762)
    """
    from scipy.stats import beta

    if n <= 0:
        raise ValueError("clopper_pearson needs n >= 1")
    a = 1.0 - level
    lo = 0.0 if k == 0 else float(beta.ppf(a / 2, k, n - k + 1))
    hi = 1.0 if k == n else float(beta.ppf(1 - a / 2, k + 1, n - k))
    return lo, hi


def rate_claim(claim: str, k: int, n: int, bound: float, side: str) -> Claim:
    """``k/n`` is ``side`` ("<=" or ">=") ``bound``: holds when the 99% Clopper-Pearson interval lies
    on that side, fails when it lies on the other, else too small to tell.

    >>> rate_claim("x", 0, 2000, 0.1, "<=").verdict, rate_claim("x", 5, 10, 0.1, "<=").verdict
    ('holds', 'fails')
    >>> rate_claim("x", 1, 10, 0.1, "<=").verdict
    'too small to tell'
    """
    if side not in ("<=", ">="):
        raise ValueError("side must be '<=' or '>='")
    crit = f"rate {side} {bound:g}"
    if n <= 0:
        return Claim(claim, crit, "no rows", "Clopper-Pearson 99%", "n/a", TOO_SMALL)
    lo, hi = clopper_pearson(int(k), int(n))
    if side == "<=":
        verdict = HOLDS if hi <= bound else (FAILS if lo > bound else TOO_SMALL)
    else:
        verdict = HOLDS if lo >= bound else (FAILS if hi < bound else TOO_SMALL)
    return Claim(
        claim,
        crit,
        f"{k}/{n} = {k / n:.3f}, 99% CI [{lo:.3f}, {hi:.3f}]",
        "exact Clopper-Pearson interval at 99%",
        f"+-{(hi - lo) / 2:.3f} (half-width of the interval)",
        verdict,
    )


def two_rate_claim(claim: str, k1: int, n1: int, k2: int, n2: int, factor: float = 1.0) -> Claim:
    """``k1/n1 < factor * k2/n2`` on independent rows, one-sided at 1% each way (holds when the test says
    so, fails when the test the other way round does).  ``factor == 1``: the two-proportion z-test
    (z >= 2.33), or Fisher's exact test when a cell of the 2 x 2 table has fewer than
    :data:`SMALL_COUNT` rows.  Another factor: the exact unconditional test at every count
    (:func:`exact_ratio_pvalues`; the z-test's size at the boundary was 0.0155 at expected counts 20 and
    40, see tests/reporting/test_claims.py), or, beyond :data:`EXACT_TABLES` tables, two Bonferroni
    Clopper-Pearson bounds (conservative).  Rates of the *same* rows: :func:`paired_rate_claim`.

    Parameters
    ----------
    claim : str
        The statement.
    k1, n1 : int
        Successes and rows of the first rate (the one claimed lower).
    k2, n2 : int
        Successes and rows of the second rate.
    factor : float, default 1.0
        The claim is ``p1 < factor * p2`` (> 0).

    Returns
    -------
    Claim

    Examples
    --------
    >>> two_rate_claim("x", 10, 1000, 300, 1000, 0.5).verdict, two_rate_claim("x", 300, 1000, 300, 1000, 0.5).verdict
    ('holds', 'fails')
    >>> c = two_rate_claim("x", 1, 200, 30, 200, 0.5)
    >>> c.verdict, c.test.startswith("exact unconditional")
    ('holds', True)
    """
    if not factor > 0:
        raise ValueError("factor must be > 0")
    if n1 <= 0 or n2 <= 0:
        return Claim(claim, f"p1 < {factor:g} p2", "no rows", "two-proportion z", "n/a", TOO_SMALL)
    k1, n1, k2, n2 = int(k1), int(n1), int(k2), int(n2)
    if factor != 1:  # no conditional exact test: the exact unconditional one, or conservative bounds
        if (n1 + 1) * (n2 + 1) <= EXACT_TABLES:
            return _exact_ratio_claim(claim, k1, n1, k2, n2, float(factor))
        return _bonferroni_claim(claim, k1, n1, k2, n2, float(factor), "")
    if min(k1, n1 - k1, k2, n2 - k2) < SMALL_COUNT:
        return _fisher_claim(claim, k1, n1, k2, n2)
    p1, p2 = k1 / n1, k2 / n2
    se = math.sqrt(p1 * (1 - p1) / n1 + factor**2 * p2 * (1 - p2) / n2)
    se = max(se, 1.0 / max(n1, n2))  # no zero standard error when both rates are 0 or 1
    z = (factor * p2 - p1) / se
    verdict = HOLDS if z >= Z_ONE_SIDED else (FAILS if z <= -Z_ONE_SIDED else TOO_SMALL)
    return Claim(
        claim,
        f"p1 < {factor:g} x p2" if factor != 1 else "p1 < p2",
        f"p1 = {k1}/{n1} = {p1:.3f}, p2 = {k2}/{n2} = {p2:.3f}, z = {z:.2f}",
        "one-sided two-proportion z-test at 1% (z >= 2.33)",
        f"{Z_ONE_SIDED * se:.3f} (difference detectable at this n)",
        verdict,
    )


def _z_grid(n1: int, n2: int, factor: float) -> np.ndarray:
    """The z statistic of :func:`two_rate_claim` for every table (x1 = 0..n1 rows, x2 = 0..n2 columns)."""
    p1 = np.arange(n1 + 1)[:, None] / n1
    p2 = np.arange(n2 + 1)[None, :] / n2
    se = np.sqrt(p1 * (1 - p1) / n1 + factor**2 * p2 * (1 - p2) / n2)
    return (factor * p2 - p1) / np.maximum(se, 1.0 / max(n1, n2))


#: the exact unconditional test enumerates (n1 + 1) x (n2 + 1) tables up to this many; beyond, the
#: conservative Bonferroni bounds decide
EXACT_TABLES = 10_000_000
#: nuisance grid of the exact test: denser near 0, where the rates of interest lie
_GRID = np.linspace(0.0, 1.0, 801) ** 2


@lru_cache(maxsize=8)
def _ratio_setup(n1: int, n2: int, factor: float) -> tuple:
    """For one (n1, n2, factor): the two monotone envelopes of z, the boundary grid, the binomial
    pmf of x1 and the survival function and cdf of x2 on it (cached: a batch of claims shares them)."""
    from scipy.stats import binom

    z = _z_grid(n1, n2, factor)
    # p1 < factor p2: large z, running max over x1' >= x1 and x2' <= x2
    less = np.maximum.accumulate(np.maximum.accumulate(z[::-1, :], axis=0)[::-1, :], axis=1)
    # p1 > factor p2: large -z, running max over x1' <= x1 and x2' >= x2
    greater = np.maximum.accumulate(np.maximum.accumulate(-z, axis=0)[:, ::-1], axis=1)[:, ::-1]
    grid = _GRID * min(1.0, 1.0 / factor)
    pmf1 = binom.pmf(np.arange(n1 + 1)[None, :], n1, factor * grid[:, None])
    x2 = np.arange(-1, n2 + 2)[None, :]  # index j holds x2 = j - 1
    sf2 = binom.sf(x2 - 1, n2, grid[:, None])  # P(X2 >= x2)
    cdf2 = binom.cdf(x2, n2, grid[:, None])  # P(X2 <= x2)
    return less, greater, grid, pmf1, sf2, cdf2


def _sections(reject: np.ndarray, upper: bool) -> np.ndarray:
    """Per x1, the cut of a monotone region: the least x2 in it (upper) or the largest (lower)."""
    n2 = reject.shape[1] - 1
    if upper:
        return np.where(reject.any(axis=1), reject.argmax(axis=1), n2 + 1)
    return np.where(reject.any(axis=1), n2 - reject[:, ::-1].argmax(axis=1), -1)


def _region_sup(n1: int, n2: int, factor: float, cut: np.ndarray, upper: bool) -> float:
    """The largest probability of the monotone region given by ``cut`` over the null boundary
    p1 = factor * p2: the grid's best point, then a finer grid between its neighbours."""
    from scipy.stats import binom

    _, _, grid, pmf1, sf2, cdf2 = _ratio_setup(n1, n2, factor)
    tab = sf2 if upper else cdf2
    vals = (pmf1 * tab[:, cut + 1]).sum(axis=1)
    i = int(np.argmax(vals))
    if vals[i] > 5 * (1 - LEVEL):  # far above the level: the grid's value decides (and is reported)
        return float(min(1.0, vals[i]))
    # near or below the level: refine with 65 points between the best grid point's neighbours
    fine = np.linspace(grid[max(i - 1, 0)], grid[min(i + 1, len(grid) - 1)], 65)[:, None]
    tail = binom.sf(cut[None, :] - 1, n2, fine) if upper else binom.cdf(cut[None, :], n2, fine)
    best = float((binom.pmf(np.arange(n1 + 1)[None, :], n1, factor * fine) * tail).sum(axis=1).max())
    return float(min(1.0, max(vals[i], best)))


def exact_ratio_pvalues(k1: int, n1: int, k2: int, n2: int, factor: float, need_both: bool = True) -> tuple:
    """One-sided p-values of ``p1 < factor * p2`` and of ``p1 > factor * p2`` for two independent
    binomial counts: the exact unconditional test (Barnard's construction, for a ratio boundary).

    Tables are ordered by the z statistic of :func:`two_rate_claim`, first made monotone (its running
    maximum towards fewer first and more second successes), so that each rejection region is a
    down-set in x1 and an up-set in x2; the probability of such a region is then largest on the null
    boundary ``p1 = factor * p2``, and the p-value is its supremum over that boundary (p2 in
    [0, min(1, 1/factor)]: a grid of 801 points, denser near 0, then, below 5%, 65 between
    the best one's neighbours).  Its size is at
    most the level at any sample size, up to the search's precision; the slow test measures it.

    Parameters
    ----------
    k1, n1, k2, n2 : int
        The counts (n1, n2 >= 1; at most :data:`EXACT_TABLES` tables).
    factor : float
        The ratio of the null boundary (> 0).
    need_both : bool, default True
        With False, ``p_greater`` is NaN (not computed) when ``p_less`` is already at most 1%.

    Returns
    -------
    tuple of float
        ``(p_less, p_greater)``; a p-value above 5% is the grid's (not refined).

    Examples
    --------
    >>> p_less, p_greater = exact_ratio_pvalues(0, 60, 12, 60, 0.5)
    >>> bool(p_less < 0.01), bool(p_greater > 0.5)
    (True, True)
    """
    n1, n2, factor = int(n1), int(n2), float(factor)
    if (n1 + 1) * (n2 + 1) > EXACT_TABLES:
        raise ValueError(f"{(n1 + 1) * (n2 + 1)} tables: more than EXACT_TABLES = {EXACT_TABLES}")
    less, greater, *_ = _ratio_setup(n1, n2, factor)
    k1, k2 = int(k1), int(k2)
    p_less = _region_sup(n1, n2, factor, _sections(less >= less[k1, k2] - 1e-9, True), True)
    if not need_both and p_less <= 1 - LEVEL:
        return p_less, float("nan")
    p_greater = _region_sup(n1, n2, factor, _sections(greater >= greater[k1, k2] - 1e-9, False), False)
    return p_less, p_greater


def _bonferroni_claim(claim: str, ka: int, na: int, kb: int, nb: int, factor: float, paired: str) -> Claim:
    """p_A < factor p_B by two one-sided 99.5% Clopper-Pearson bounds (Bonferroni: a 1% test, whatever
    the dependence between the two rates)."""
    from scipy.stats import beta as beta_dist

    a = (1 - LEVEL) / 2

    def upper(k: int, n: int) -> float:
        return 1.0 if k >= n else float(beta_dist.ppf(1 - a, k + 1, n - k))

    def lower(k: int, n: int) -> float:
        return 0.0 if k <= 0 else float(beta_dist.ppf(a, k, n - k + 1))

    ua, la, ub, lb = upper(ka, na), lower(ka, na), upper(kb, nb), lower(kb, nb)
    verdict = HOLDS if ua < factor * lb else (FAILS if la > factor * ub else TOO_SMALL)
    return Claim(
        claim,
        f"p_A < {factor:g} x p_B{paired}",
        f"p_A = {ka}/{na} = {ka / na:.3f} [{la:.3f}, {ua:.3f}], p_B = {kb}/{nb} = {kb / nb:.3f} [{lb:.3f}, {ub:.3f}]",
        "one-sided 99.5% Clopper-Pearson bounds of each rate (Bonferroni: a 1% test under any dependence "
        "between the rates; conservative)",
        f"{ua - ka / na + factor * (kb / nb - lb):.3f} (gap factor x p_B - p_A needed at this n)",
        verdict,
    )


def _exact_ratio_claim(claim: str, k1: int, n1: int, k2: int, n2: int, factor: float) -> Claim:
    """p1 < factor p2 by the exact unconditional test, one-sided at 1% each way (small counts)."""
    p_less, p_greater = exact_ratio_pvalues(k1, n1, k2, n2, factor, need_both=False)
    verdict = HOLDS if p_less <= 1 - LEVEL else (FAILS if p_greater <= 1 - LEVEL else TOO_SMALL)
    lo1, hi1 = clopper_pearson(k1, n1)
    lo2, hi2 = clopper_pearson(k2, n2)
    return Claim(
        claim,
        f"p1 < {factor:g} x p2",
        f"p1 = {k1}/{n1} = {k1 / n1:.3f}, p2 = {k2}/{n2} = {k2 / n2:.3f}, one-sided p = {p_less:.2g}",
        f"exact unconditional test of p1 < {factor:g} p2, one-sided at 1%",
        f"99% intervals p1 [{lo1:.3f}, {hi1:.3f}], p2 [{lo2:.3f}, {hi2:.3f}]",
        verdict,
    )


def _fisher_claim(claim: str, k1: int, n1: int, k2: int, n2: int) -> Claim:
    """p1 < p2 by Fisher's exact test, one-sided at 1% each way (small counts)."""
    from scipy.stats import fisher_exact

    table = [[k1, n1 - k1], [k2, n2 - k2]]
    p_less = float(fisher_exact(table, alternative="less")[1])
    p_greater = float(fisher_exact(table, alternative="greater")[1])
    verdict = HOLDS if p_less <= 1 - LEVEL else (FAILS if p_greater <= 1 - LEVEL else TOO_SMALL)
    lo1, hi1 = clopper_pearson(k1, n1)
    lo2, hi2 = clopper_pearson(k2, n2)
    return Claim(
        claim,
        "p1 < p2",
        f"p1 = {k1}/{n1} = {k1 / n1:.3f}, p2 = {k2}/{n2} = {k2 / n2:.3f}, one-sided p = {p_less:.2g}",
        f"Fisher's exact test, one-sided at 1% (a cell under {SMALL_COUNT} rows)",
        f"99% intervals p1 [{lo1:.3f}, {hi1:.3f}], p2 [{lo2:.3f}, {hi2:.3f}]",
        verdict,
    )


def paired_rate_claim(claim: str, b: int, c: int, n: int, factor: float = 1.0, both: int = 0) -> Claim:
    """On the same n rows, condition A holds less often than ``factor`` times condition B
    (p_A < factor p_B).  ``b`` rows have A and not B, ``c`` rows B and not A, ``both`` rows both.

    With ``factor == 1``: the exact McNemar test on the b + c discordant rows, one-sided at 1% each way
    (``both`` is not needed).  With another factor the discordant rows do not decide the question; the
    claim holds when the one-sided 99.5% Clopper-Pearson upper bound of p_A lies below ``factor`` times
    the 99.5% lower bound of p_B (fails the other way round): by Bonferroni a 1% test whatever the
    dependence between A and B on a row (conservative).

    Parameters
    ----------
    claim : str
        The statement.
    b, c : int
        Rows with A only, rows with B only.
    n : int
        Rows (paired).
    factor : float, default 1.0
        The claim is ``p_A < factor * p_B``.
    both : int, default 0
        Rows with A and B (needed when ``factor != 1``).

    Returns
    -------
    Claim

    Examples
    --------
    >>> paired_rate_claim("x", 1, 30, 500).verdict, paired_rate_claim("x", 30, 1, 500).verdict
    ('holds', 'fails')
    >>> paired_rate_claim("x", 3, 5, 500).verdict
    'too small to tell'
    >>> paired_rate_claim("x", 2, 150, 1000, factor=0.5, both=20).verdict
    'holds'
    """
    from scipy.stats import binom

    b, c, n, both = int(b), int(c), int(n), int(both)
    if factor != 1:
        if n <= 0:
            return Claim(claim, f"p_A < {factor:g} x p_B (paired rows)", "no rows", "Clopper-Pearson", "n/a", TOO_SMALL)
        got = _bonferroni_claim(claim, both + b, n, both + c, n, float(factor), " (paired rows)")
        return replace(got, measured=f"{n} rows (A only {b}, B only {c}, both {both}): {got.measured}")
    m = b + c
    p_less = float(binom.cdf(b, m, 0.5)) if m else 1.0
    p_greater = float(binom.sf(b - 1, m, 0.5)) if m else 1.0
    verdict = HOLDS if p_less <= 1 - LEVEL else (FAILS if p_greater <= 1 - LEVEL else TOO_SMALL)
    # the smallest imbalance detectable with m discordant rows: the least b - c such that P <= 1%
    need = next((m - 2 * j for j in range(m + 1) if m and binom.cdf(j, m, 0.5) > 1 - LEVEL), None)
    return Claim(
        claim,
        "p_A < p_B (paired rows)",
        f"{n} rows: A only {b}, B only {c} (p_A - p_B = {(b - c) / max(n, 1):+.3f}), one-sided p = {p_less:.2g}",
        "exact McNemar test on the discordant rows, one-sided at 1%",
        f"c - b >= {need + 2 if need is not None else 'n/a'} of {m} discordant rows" if m else "no discordant row",
        verdict,
    )


def paired_claim(claim: str, a: Sequence[float], b: Sequence[float]) -> Claim:
    """mean(a) < mean(b) over paired seeds: one-sided paired t-test at 1%; fails when the difference
    is significant the other way; with fewer than 2 pairs, too small to tell.

    >>> paired_claim("x", [0.30, 0.31, 0.29], [0.40, 0.42, 0.41]).verdict
    'holds'
    """
    from scipy import stats

    x = np.asarray(a, dtype=float) - np.asarray(b, dtype=float)
    x = x[np.isfinite(x)]
    n = len(x)
    if n < 2:
        return Claim(claim, "mean(a) < mean(b)", f"{n} pair(s)", "paired t-test", "n/a", TOO_SMALL)
    sd = float(x.std(ddof=1))
    tcrit = float(stats.t.ppf(0.99, n - 1))
    if (
        sd <= 1e-12 * max(1.0, abs(float(x.mean())))
    ):  # zero spread (up to rounding): t is undefined: the exact sign-flip test (all n differences of one sign: p = 2^-n)
        p_sign = 0.5**n if x.mean() != 0 else 1.0
        verdict = (HOLDS if x.mean() < 0 else FAILS) if p_sign <= 1 - LEVEL else TOO_SMALL
        return Claim(
            claim,
            "mean(a) < mean(b)",
            f"a {np.mean(a):.3f}, b {np.mean(b):.3f}, every paired difference {x.mean():+.3f} ({n} seeds, zero spread)",
            f"exact sign-flip test, one-sided at 1% (zero spread: t undefined; p = 2^-{n} = {0.5**n:.3g})",
            "any difference of one sign in 7 or more seeds",
            verdict,
        )
    t = float(x.mean() / (sd / math.sqrt(n)))
    verdict = HOLDS if t <= -tcrit else (FAILS if t >= tcrit else TOO_SMALL)
    return Claim(
        claim,
        "mean(a) < mean(b)",
        f"a {np.mean(a):.3f}, b {np.mean(b):.3f}, paired difference {x.mean():+.3f} (sd {sd:.3f}, {n} seeds), t = {t:.2f}",
        f"one-sided paired t-test at 1% (|t| >= {tcrit:.2f} with {n - 1} df)",
        f"{tcrit * sd / math.sqrt(n):.3f} (difference detectable with {n} seeds)",
        verdict,
    )


def claims_frame(claims: Sequence[Claim]) -> pd.DataFrame:
    """The claims as a table, one row each, with a column ``counted`` (False for a verdict reached
    :data:`BY_CONSTRUCTION`, which summaries report apart from the holds).

    >>> claims_frame([rate_claim("x", 0, 900, 0.1, "<="), by_construction("y", "no rule")])["counted"].tolist()
    [True, False]
    """
    df = pd.DataFrame([c.to_json() for c in claims], columns=[f.name for f in fields(Claim)])
    df["counted"] = df["verdict"] != BY_CONSTRUCTION
    return df


def verdict_counts(claims: Sequence[Claim] | pd.DataFrame) -> dict:
    """How many claims reached each verdict (every key of :data:`VERDICTS`, zeros included).

    >>> verdict_counts([rate_claim("x", 0, 900, 0.1, "<="), by_construction("y", "no rule")])
    {'holds': 1, 'fails': 0, 'too small to tell': 0, 'by construction': 1}
    """
    got = list(claims["verdict"]) if isinstance(claims, pd.DataFrame) else [c.verdict for c in claims]
    return {v: got.count(v) for v in VERDICTS}


def summary_line(claims: Sequence[Claim] | pd.DataFrame) -> str:
    """The verdict counts in words; claims that hold by construction are named apart, outside the tested ones.

    Parameters
    ----------
    claims : sequence of Claim, or pandas.DataFrame
        The claims, or their :func:`claims_frame`.

    Returns
    -------
    str
        ``"<holds> holds, <fails> fails, <n> too small to tell of <tested> tested claims; <k> by construction
        (reported, not counted)"``.

    Examples
    --------
    >>> summary_line([rate_claim("x", 0, 900, 0.1, "<="), by_construction("y", "no rule")])
    '1 holds, 0 fails, 0 too small to tell of 1 tested claims; 1 by construction (reported, not counted)'
    """
    n = verdict_counts(claims)
    tested = n[HOLDS] + n[FAILS] + n[TOO_SMALL]
    return (
        f"{n[HOLDS]} holds, {n[FAILS]} fails, {n[TOO_SMALL]} too small to tell of {tested} tested claims; "
        f"{n[BY_CONSTRUCTION]} by construction (reported, not counted)"
    )
