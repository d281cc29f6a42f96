"""The twin monitor's negative control on a real LLM, cross-fitted and sequential (docs/FACTER.md §7.4).

The negative control asks the model the same question with the row's own demographics *reworded*
(``facter.twin = "reword"``), so the answer has no reason to move more than under the placebo edits:
every flag is a false flag, and the monitor's claim is that their rate is at most alpha (+ a margin).

A run's **calibration rows already hold what the claim needs**: each row's twin distance (``delta``)
and its placebo distance (``placebo_delta``, the family's max).  So the rate can be measured on them
alone, without the test rows' three methods, by cross-fitting:

1. the calibration rows are split at random into ``folds`` folds (seeded);
2. for each fold, Q_null is the null threshold (:func:`facterlab.facter.twins.null_threshold`) of the
   *other* folds' placebo distances, and the fold's rows are flagged where ``delta > Q_null``, the
   monitor's own rule;
3. given the other folds, a fold's flags are independent draws with one rate (the rows are drawn
   independently of each other), so an exact Clopper-Pearson interval holds for each fold's rate.

The claim "the false-flag rate is at most ``bound``" **holds** when every fold's upper bound is at most
``bound``, **fails** when some fold's lower bound is above it, and is **too small to tell** otherwise.
The intervals are Bonferroni-corrected over folds and looks (99% overall), so the design can be
**sequential**: a first stage of rows (150), and only when it is too small to tell, a second, larger
one (400), each look at ``1 - 0.01 / (folds * looks)``.

What it does not claim: the rate at a threshold fitted on half the rows is the rate the cross-fit
measures; the full monitor fits Q_null on all of them (a slightly tighter quantile).  Rows of one user
are treated as independent.

The cost: a calibration row is 5 requests (answer, twin, the family's three placebo edits); a test row
6 (the three methods' answers and twins).  With ``calib_frac`` = 0.9 a stage of 150 calibration rows is
a run of 167 rows: 750 of its 852 requests (88%) go to the rows the cross-fit reads.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, replace

import numpy as np
import pandas as pd

from facterlab.facter.twins import null_threshold
from facterlab.reporting.claims import FAILS, HOLDS, LEVEL, TOO_SMALL, Claim, clopper_pearson

__all__ = [
    "CrossFit",
    "crossfit_false_flags",
    "crossfit_claim",
    "stage_rows",
    "rows_to_confirm",
    "run_sequential",
    "DEFAULT_STAGES",
    "MARGIN",
    "REQUESTS_PER_ROW",
]

#: The sequential design's calibration rows per look: a first stage, and a larger one if needed.
DEFAULT_STAGES = (150, 400)
#: Requests per calibration row: the answer, the twin and the placebo family's three edits.
REQUESTS_PER_ROW = 5
#: The claim's margin over alpha (as :func:`facterlab.reporting.twin_acceptance.negative_control_claims`).
MARGIN = 0.02


@dataclass(frozen=True)
class CrossFit:
    """The cross-fitted false flags of one run's calibration rows.

    Parameters
    ----------
    folds : pandas.DataFrame
        One row per fold: ``fold``, ``n`` (rows), ``flagged``, ``q_null`` (the other folds' threshold).
    alpha : float
        The level the thresholds were fitted at.
    n : int
        Calibration rows used (rows with a finite twin and placebo distance).
    dropped : int
        Rows left out for a missing (non-finite) distance.
    """

    folds: pd.DataFrame
    alpha: float
    n: int
    dropped: int

    @property
    def flagged(self) -> int:
        """Flags over all folds."""
        return int(self.folds["flagged"].sum())

    @property
    def rate(self) -> float:
        """The pooled false-flag rate (a description; the claim reads the folds one by one)."""
        return self.flagged / self.n if self.n else math.nan


def crossfit_false_flags(
    calibration: pd.DataFrame, alpha: float, tol: float = 1e-6, folds: int = 2, seed: int = 0
) -> CrossFit:
    """Flag each calibration row against the null threshold fitted on the other folds' placebo distances
    (the argument: the module docstring).

    Parameters
    ----------
    calibration : pandas.DataFrame
        A run's calibration table (``RunResult.calibration``) with ``delta`` (the twin distance) and
        ``placebo_delta`` (the placebo family's distance): a run with ``facter.delta = "twin"`` and
        ``facter.threshold = "null"``.
    alpha : float
        Miscoverage level of the null threshold.
    tol : float, default 1e-6
        Added to the quantile, as the monitor does (``facter.null_tol``).
    folds : int, default 2
        Number of folds, at least 2.
    seed : int, default 0
        The split's seed.

    Returns
    -------
    CrossFit

    Raises
    ------
    ValueError
        Without the two columns, with fewer than 2 folds, or when a fold's complement is too small for
        a defined threshold at ``alpha``.

    Examples
    --------
    >>> rng = np.random.default_rng(0)
    >>> cal = pd.DataFrame({"delta": rng.random(200), "placebo_delta": rng.random(200)})
    >>> cf = crossfit_false_flags(cal, alpha=0.1)
    >>> cf.n, cf.folds["n"].tolist(), 0.0 < cf.rate < 0.25
    (200, [100, 100], True)
    """
    missing = [c for c in ("delta", "placebo_delta") if c not in calibration.columns]
    if missing:
        raise ValueError(
            f"the cross-fitted negative control needs the calibration columns 'delta' and 'placebo_delta' "
            f"(a run with facter.delta = 'twin' and facter.threshold = 'null'); missing: {missing}"
        )
    if int(folds) < 2:
        raise ValueError(f"folds must be at least 2, got {folds}")
    delta = calibration["delta"].to_numpy(dtype=float)
    placebo = calibration["placebo_delta"].to_numpy(dtype=float)
    ok = np.isfinite(delta) & np.isfinite(placebo)
    delta, placebo = delta[ok], placebo[ok]
    n = len(delta)
    order = np.random.default_rng(int(seed)).permutation(n)
    fold_of = np.empty(n, dtype=int)
    fold_of[order] = np.arange(n) % int(folds)
    out = []
    for f in range(int(folds)):
        own = fold_of == f
        need = math.ceil(1 / alpha) - 1  # the conformal quantile's smallest calibration size
        if (~own).sum() < need:
            raise ValueError(
                f"fold {f}: the other folds hold {(~own).sum()} rows, fewer than the {need} a threshold at "
                f"alpha = {alpha:g} needs; use more calibration rows or fewer folds"
            )
        q = null_threshold(placebo[~own], alpha, tol).q
        out.append({"fold": f, "n": int(own.sum()), "flagged": int((delta[own] > q).sum()), "q_null": q})
    return CrossFit(pd.DataFrame(out), float(alpha), int(n), int((~ok).sum()))


def crossfit_claim(cf: CrossFit, bound: float, looks: int = 1, what: str = "Neutral") -> Claim:
    """The claim "the false-flag rate is at most ``bound``", read fold by fold: each fold's exact interval
    at ``1 - (1 - LEVEL) / (folds * looks)`` (the argument: the module docstring).

    Examples
    --------
    >>> folds = pd.DataFrame({"fold": [0, 1], "n": [500, 500], "flagged": [9, 12], "q_null": [0.1, 0.1]})
    >>> crossfit_claim(CrossFit(folds, 0.1, 1000, 0), 0.12).verdict
    'holds'
    >>> folds["flagged"] = [40, 150]
    >>> crossfit_claim(CrossFit(folds, 0.1, 1000, 0), 0.12).verdict
    'fails'
    """
    m = len(cf.folds) * max(1, int(looks))
    level = 1 - (1 - LEVEL) / m
    bounds = [clopper_pearson(int(r.flagged), int(r.n), level) if r.n else (0.0, 1.0) for r in cf.folds.itertuples()]
    if all(hi <= bound for _, hi in bounds):
        verdict = HOLDS
    elif any(lo > bound for lo, _ in bounds):
        verdict = FAILS
    else:
        verdict = TOO_SMALL
    per_fold = "; ".join(
        f"fold {int(r.fold)} {int(r.flagged)}/{int(r.n)} [{lo:.3f}, {hi:.3f}]"
        for r, (lo, hi) in zip(cf.folds.itertuples(), bounds, strict=True)
    )
    return Claim(
        f"negative control, cross-fitted: {what}'s false-flag rate is at most {bound:g}",
        f"every fold's rate <= {bound:g}",
        f"{cf.flagged}/{cf.n} = {cf.rate:.3f}; {per_fold}",
        f"exact Clopper-Pearson per fold at {level:.4f} (Bonferroni over {len(cf.folds)} folds x {max(1, int(looks))} look(s))",
        f"+-{max((hi - lo) / 2 for lo, hi in bounds):.3f} (widest fold's half-width)",
        verdict,
    )


def rows_to_confirm(
    rate: float, bound: float, folds: int = 2, looks: int = 1, step: int = 1, limit: int = 100_000
) -> int | None:
    """The calibration rows a look needs for the claim to **hold** when the model's false-flag rate is
    ``rate``: the smallest total ``n`` (``folds`` equal folds) at which a fold holding the expected
    ``round(rate * n / folds)`` flags has its exact upper bound, at the claim's corrected level
    (:func:`crossfit_claim`), at most ``bound``.  A planning number, not a guarantee: a fold's count
    scatters around its mean, so at this size the claim holds about half the time.

    Returns ``None`` when ``rate >= bound`` (no size confirms it) or no size up to ``limit`` does.

    >>> rows_to_confirm(0.05, 0.12, looks=2), rows_to_confirm(0.08, 0.12, looks=2)
    (334, 1110)
    >>> rows_to_confirm(0.12, 0.12) is None
    True
    """
    if not 0.0 <= rate < bound or math.isclose(rate, bound):  # 0.1 + 0.02 is 0.12000000000000001
        return None
    m = int(folds) * max(1, int(looks))
    level = 1 - (1 - LEVEL) / m
    for per_fold in range(max(1, int(step)), limit // int(folds) + 1, max(1, int(step))):
        if clopper_pearson(int(round(rate * per_fold)), per_fold, level)[1] <= bound:
            return per_fold * int(folds)
    return None


def stage_rows(calibration_rows: int, calib_frac: float) -> int:
    """The run's ``n_rows`` whose calibration split holds at least ``calibration_rows`` rows and leaves at
    least one test row (the split takes ``round(calib_frac * n_rows)``).

    >>> stage_rows(150, 0.9), stage_rows(400, 0.9)
    (167, 445)
    """
    n = max(int(calibration_rows) + 1, math.ceil(calibration_rows / calib_frac))
    while int(round(calib_frac * n)) < calibration_rows:
        n += 1
    return n


def run_sequential(
    model: str,
    stages: Sequence[int] = DEFAULT_STAGES,
    dataset: str = "ml-100k",
    seed: int | None = None,
    calib_frac: float = 0.9,
    folds: int = 2,
    data_dir=None,
    log=print,
) -> tuple:
    """Run the negative control stage by stage (:func:`stage_rows` rows, ``calib_frac`` 0.9), stopping at
    the first stage whose claim is not too small to tell.  Each stage is an ordinary saved run (its run id
    printed); a stage interrupted resumes from the answer cache, and a later stage reuses the earlier
    stage's answers where its rows repeat them.  With the oneDNN kernel (the fast decoding switches of
    :func:`~facterlab.reporting.twin_acceptance.negative_control_config`) a batch holds 16 rows, as in the
    LLM notebooks: 19.0 CPU ms per token against 23.4 at 8 (docs/CPU_DECODING.md), and on that kernel a
    row's answer does not depend on its batch.

    Returns ``(claims, runs)``: one :class:`~facterlab.reporting.claims.Claim` and one run per stage run.
    """
    from facterlab.config import with_overrides
    from facterlab.reporting import experiments as ex
    from facterlab.reporting.twin_acceptance import negative_control_config

    claims, runs = [], []
    for look, rows in enumerate(stages, 1):
        cfg = negative_control_config(model, stage_rows(rows, calib_frac), dataset, seed)
        cfg = with_overrides(cfg, data__calib_frac=calib_frac)
        if cfg.model.linear_kernel == "onednn":  # 16 rows per batch: 1.23x less CPU per token than 8, same answers
            cfg = with_overrides(cfg, model__batch_size=16)
        res = ex.run(cfg, data_dir=data_dir)
        cal = res.record.metrics.calibration
        cf = crossfit_false_flags(res.calibration, float(cal.alpha), float(cfg.facter.null_tol), folds, seed or 0)
        claim = crossfit_claim(cf, float(cal.alpha) + MARGIN, looks=len(stages))
        claim = replace(claim, claim=f"{claim.claim} ({model}, look {look}, run {res.run_id})")
        log(f"stage {look}: run {res.run_id}, {cf.n} calibration rows: {claim.measured} -> {claim.verdict}")
        claims.append(claim)
        runs.append(res)
        if claim.verdict != TOO_SMALL:
            break
    return claims, runs


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m facterlab.reporting.negative_control MODEL``: the cross-fitted, sequential negative
    control (:func:`run_sequential`); prints each stage's run id and verdict, then the claims."""
    import argparse

    from facterlab.reporting.claims import claims_frame

    p = argparse.ArgumentParser(prog="python -m facterlab.reporting.negative_control", description=main.__doc__)
    p.add_argument("model", help="an LLM name, local path or hub id (facterlab models), or openai:<id>")
    p.add_argument("--stages", nargs="+", type=int, default=list(DEFAULT_STAGES), help="calibration rows per look")
    p.add_argument("--dataset", default="ml-100k")
    p.add_argument("--seed", type=int, default=None)
    p.add_argument("--folds", type=int, default=2)
    p.add_argument("--calib-frac", type=float, default=0.9)
    p.add_argument("--data-dir", default=None)
    p.add_argument(
        "--plan",
        nargs="+",
        type=float,
        default=None,
        metavar="RATE",
        help="instead of running: for each assumed false-flag rate, the calibration rows and requests a look "
        "needs for the claim to hold (rows_to_confirm, at --folds and len(--stages) looks, the bound from the "
        "run's own alpha), beside --stages",
    )
    a = p.parse_args(argv)
    if a.plan is not None:
        from facterlab.reporting.twin_acceptance import negative_control_config

        looks = len(a.stages)  # the bound the runs' claims use: their config's alpha + the margin
        bound = float(negative_control_config(a.model, stage_rows(a.stages[0], a.calib_frac), a.dataset).facter.alpha)
        bound += MARGIN
        print(f"stages {a.stages} (calibration rows per look), {a.folds} folds, {looks} look(s), bound {bound:g}")
        for rate in a.plan:
            n = rows_to_confirm(rate, bound, a.folds, looks)
            need = "never (rate >= bound)" if n is None else f"{n} calibration rows, {REQUESTS_PER_ROW * n} requests"
            print(f"rate {rate:g}: {need}")
        return 0
    if any(s < 2 for s in a.stages) or list(a.stages) != sorted(a.stages):
        p.error(f"--stages: increasing row counts of at least 2, got {a.stages}")
    claims, _ = run_sequential(a.model, a.stages, a.dataset, a.seed, a.calib_frac, a.folds, a.data_dir)
    print(claims_frame(claims)[["claim", "measured", "verdict"]].to_string(index=False))
    return 0


if __name__ == "__main__":  # pragma: no cover - the command line
    raise SystemExit(main())
