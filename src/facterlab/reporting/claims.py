"""Checked statements under one standard (notebook 09; written to metrics.json as ``claims``).

Every claim states its criterion, the test behind the verdict and the smallest effect that test can
detect at the sample size it had, and ends in one of three verdicts:

- **holds**: the 99% interval (or the one-sided 1% test) lies on the claimed side;
- **fails**: it lies on the other side;
- **too small to tell**: it straddles the criterion (more rows or seeds would be needed; the smallest
  detectable effect says how far off the criterion the truth would have to be to decide).

One standard for all: a rate against a bound uses the exact Clopper-Pearson interval at 99%; a
difference of two independent rates a two-proportion z-test at one-sided 1% (z = 2.33), or Fisher's exact
test when a cell has fewer than :data:`SMALL_COUNT` rows; a difference of two rates on the *same* rows
(paired flags) the exact McNemar test on the discordant pairs (:func:`paired_rate_claim`); a difference
of per-seed means a paired one-sided t-test at 1%, or, when the differences have zero spread, the exact
sign-flip test (which needs 7 seeds to reach 1%).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass

import numpy as np
import pandas as pd

__all__ = [
    "Claim",
    "HOLDS",
    "FAILS",
    "TOO_SMALL",
    "clopper_pearson",
    "rate_claim",
    "two_rate_claim",
    "paired_claim",
    "paired_rate_claim",
    "claims_frame",
]

HOLDS, FAILS, TOO_SMALL = "holds", "fails", "too small to tell"
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
    """``k1/n1 < factor * k2/n2``: one-sided two-proportion z-test at 1% (holds when z >= 2.33,
    fails when z <= -2.33).

    >>> two_rate_claim("x", 10, 1000, 300, 1000, 0.5).verdict, two_rate_claim("x", 300, 1000, 300, 1000, 0.5).verdict
    ('holds', 'fails')
    """
    if n1 <= 0 or n2 <= 0:
        return Claim(claim, f"p1 < {factor:g} p2", "no rows", "two-proportion z", "n/a", TOO_SMALL)
    if factor == 1 and min(k1, n1 - k1, k2, n2 - k2) < SMALL_COUNT:
        return _fisher_claim(claim, int(k1), int(n1), int(k2), int(n2))
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


def paired_rate_claim(claim: str, b: int, c: int, n: int) -> Claim:
    """On the same n rows, condition A holds less often than condition B (p_A < p_B): the exact
    McNemar test on the discordant rows, one-sided at 1% each way; ``b`` rows have A and not B, ``c``
    rows B and not A.

    >>> paired_rate_claim("x", 1, 30, 500).verdict, paired_rate_claim("x", 30, 1, 500).verdict
    ('holds', 'fails')
    >>> paired_rate_claim("x", 3, 5, 500).verdict
    'too small to tell'
    """
    from scipy.stats import binom

    b, c = int(b), int(c)
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
    """The claims as a table, one row each."""
    return pd.DataFrame([c.to_json() for c in claims])
