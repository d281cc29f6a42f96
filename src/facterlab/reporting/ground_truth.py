"""FACTER's claims checked against a recommender whose unfairness is known (notebook 09; docs/SIMULATED.md).

The simulated recommender (:mod:`facterlab.models.simulated`) records, for every answer, whether its
demographic bias changed the top-1 item and the top-k list (``raw`` JSON of each row).  This module
turns saved runs into the notebook's checks:

- :func:`coverage_table`: the exceedance rate P(S > Q0) of exchangeable test rows (the Neutral method,
  whose prompt is the calibration prompt) against alpha, with its Clopper-Pearson interval, for any
  alpha from one run (Q0 is recomputed from the saved calibration scores);
- :func:`repair_table`: violations per pass against Q_t, Q0 and Q*;
- :func:`fairness_table`: CFR and SNSR of Neutral, Fair and FACTER;
- :func:`detector_table`: precision and recall of "S > Q0" as a detector of the rows whose top-1
  item the bias changed, for a grid of lambda and tau_rho (scores recomputed from the saved top-1
  items; no recommender call).
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterator, Mapping, Sequence

import numpy as np
import pandas as pd

from facterlab.blas import fingerprint_extra as blas_fingerprint
from facterlab.config import preset
from facterlab.data.handbuilt import make_world
from facterlab.data.protocol import build_interactions, load_or_build_interactions
from facterlab.datatypes import MissingValue
from facterlab.facter.conformal import ConformalThreshold
from facterlab.facter.pipeline import run_experiment, run_id_for
from facterlab.facter.record import METHODS, value_or_nan
from facterlab.facter.rescore import rescore, rescore_inputs
from facterlab.facter.runfolder import find, read_run_folder
from facterlab.facter.scores import ItemRepresenter, top1_distance
from facterlab.facter.truth import parse_truth, rank_auc
from facterlab.models.fake import HashEncoder
from facterlab.models.simulated import load_bias_table, simulated_from_config
from facterlab.paths import runs_dir
from facterlab.reporting.claims import (
    BY_CONSTRUCTION,
    FAILS,
    HOLDS,
    TOO_SMALL,
    Claim,
    by_construction,
    claims_frame,
    clopper_pearson,
    paired_claim,
    paired_rate_claim,
    rate_claim,
    two_rate_claim,
)

__all__ = [
    "clopper_pearson",
    "truth_frame",
    "list_labels",
    "BY_CONSTRUCTION",
    "records_with_reasons",
    "coverage_table",
    "repair_table",
    "fairness_table",
    "detector_table",
    "monitor_label",
    "run_detector_frame",
    "biased_share_table",
    "SharedFlags",
    "rules_vs_table",
    "twin_claims",
    "rho_claim",
    "handbuilt_control",
    "handbuilt_run",
    "decomposition_row",
    "d_shift",
    "coverage_checks",
    "repair_checks",
    "fairness_checks",
    "detector_checks",
    "checks_frame",
]


def _sim(result) -> dict:
    cfg = result.record.config
    if cfg.setting("model.llm") != "simulated":
        raise ValueError(f"run {result.run_id} is not a simulated-recommender run (model {cfg.setting('model.llm')})")
    return {**(cfg.setting("sim") or {}), "seed_run": cfg.setting("seed")}


def truth_frame(records: pd.DataFrame) -> pd.DataFrame:
    """The simulator's ground truth (``raw`` JSON) of each record as columns ``top1_changed``,
    ``topk_changed``, ``n_changed``, ``n_pushed_topk``, ``n_rules_honoured``, ``n_corrupted``."""
    if "raw" not in records.columns:
        raise ValueError("these records have no 'raw' column: rerun them with the current facterlab")
    rows = [parse_truth(raw) for raw in records["raw"]]
    if any(t is None for t in rows):
        raise ValueError("a record's raw output is not the simulated recommender's JSON truth")
    return pd.DataFrame(rows, index=records.index)


def list_labels(records: pd.DataFrame, twin: bool = False) -> np.ndarray:
    """The list-level label of each record: the demographics changed the row's top-10 set (the bias,
    ``topk_changed`` of the simulator's truth, or a random function of the values' meaning,
    ``meaning_topk_changed``: row-level counterfactual dependence), or, with ``twin``, the row's or its
    twin's (``twin_raw``).  Beside the
    top-1 labels, because the twin Delta compares whole top-10 lists: a push that reorders the list
    below its head moves Delta and is not a top-1 change.  ``topk_changed`` is measured against the
    same prompt without the push (rules kept): for Neutral and Fair, which have no rules, that is the
    demographics-blind answer.

    Parameters
    ----------
    records : pandas.DataFrame
        Records with the simulator's JSON truth in ``raw`` (and ``twin_raw`` for ``twin``).
    twin : bool, default False
        Also count the twin's list.

    Returns
    -------
    numpy.ndarray of bool, shape (len(records),)

    Examples
    --------
    >>> import json
    >>> raw = lambda t1, tk: json.dumps({"top1_changed": t1, "topk_changed": tk})
    >>> rec = pd.DataFrame({"raw": [raw(True, True), raw(False, True), raw(False, False)],
    ...                     "twin_raw": [raw(False, False), raw(False, False), raw(False, True)]})
    >>> list_labels(rec).tolist(), list_labels(rec, twin=True).tolist()
    ([True, True, False], [True, True, True])
    """
    lab = _topk_dependent(truth_frame(records))
    if twin and "twin_raw" in records.columns:
        lab = lab | _topk_dependent(truth_frame(records.rename(columns={"raw": "_row_raw", "twin_raw": "raw"})))
    return lab


def _topk_dependent(truth: pd.DataFrame) -> np.ndarray:
    """The top-10 set moved by the push, or by a random function of the values' meaning (``meaning_sd``)."""
    lab = truth["topk_changed"].to_numpy(dtype=bool)
    if "meaning_topk_changed" in truth.columns:
        lab = lab | truth["meaning_topk_changed"].fillna(False).to_numpy(dtype=bool)
    return lab


def coverage_table(
    results: Sequence, alphas: Sequence[float] = (0.05, 0.1, 0.2, 0.3), level: float = 0.99
) -> pd.DataFrame:
    """Exceedance of the Neutral test rows over Q0(alpha), pooled over ``results`` (one row per alpha).

    Columns: alpha, n_calib (per run), n_test (pooled), exceed, rate, ci_lo, ci_hi (Clopper-Pearson at
    ``level``), bound_hi = alpha (the conformal guarantee P(S > Q0) <= alpha), bound_lo = alpha -
    1/(n+1) (attained without ties), holds = ci_lo <= alpha, per_run_rates.
    """
    out = []
    for a in alphas:
        exceed = n = 0
        per_run, n_cal = [], []
        for r in results:
            cal = r.calibration["S"].to_numpy(dtype=float)
            q0 = ConformalThreshold(float(a)).fit(cal).threshold_
            rec = r.rows["neutral"]
            s = rec.loc[rec["pass"] == 1, "S"].to_numpy(dtype=float)
            e = int((s > q0).sum())
            exceed += e
            n += len(s)
            per_run.append(e / len(s))
            n_cal.append(len(cal))
        lo, hi = clopper_pearson(exceed, n, level)
        nc = min(n_cal)
        out.append(
            {
                "alpha": float(a),
                "n_calib": nc,
                "n_test": n,
                "exceed": exceed,
                "rate": exceed / n,
                "ci_lo": lo,
                "ci_hi": hi,
                "bound_lo": float(a) - 1.0 / (nc + 1),
                "bound_hi": float(a),
                "holds": bool(lo <= float(a)),
                "per_run_rates": per_run,
            }
        )
    return pd.DataFrame(out)


def _facter_passes(results: Sequence):
    """``(run, simulator settings, pass, that pass's FACTER records, their truth)`` for every run, pass by
    pass: the walk :func:`repair_table` and :func:`biased_share_table` share."""
    for r in results:
        s = _sim(r)
        rec = r.rows["facter"]
        truth = truth_frame(rec)
        for p, g in rec.groupby("pass", sort=True):
            yield r, s, int(p), g, truth.loc[g.index]


def _against_pass1(g: pd.DataFrame, first: pd.DataFrame, col: str) -> tuple:
    """(rows paired by ``row_id``, flagged in pass 1 only, flagged in this pass only) for flag ``col``."""
    m = g[["row_id", col]].merge(first[["row_id", col]], on="row_id", suffixes=("", "_1"))
    here, one = m[col].to_numpy(dtype=bool), m[f"{col}_1"].to_numpy(dtype=bool)
    return len(m), int((one & ~here).sum()), int((here & ~one).sum())


def repair_table(results: Sequence) -> pd.DataFrame:
    """One row per (run, pass) of the FACTER method: beta, rho, seed, pass, V(t) (adaptive), V(Q0),
    V(Q*), mean S, share of rows the bias changed (top-1), mean rules honoured, share without neighbour;
    and, pass 1's rows paired with this pass's by ``row_id`` (every pass answers the same test rows):
    ``n_paired``, ``V_q0_pass1_only`` / ``V_q0_here_only`` (rows violating Q0 in pass 1 and not here, and
    the reverse) and the same for the adaptive bar: the discordant counts of the McNemar test
    (:func:`repair_checks`)."""
    firsts: dict = {}
    out = []
    for r, s, p, g, t in _facter_passes(results):
        if p == 1 or r.run_id not in firsts:
            firsts[r.run_id] = g
        first = firsts[r.run_id]
        n_pair, q0_1, q0_h = _against_pass1(g, first, "viol_fixed")
        _, ad_1, ad_h = _against_pass1(g, first, "viol_adaptive")
        out.append(
            {
                "beta": s["beta"],
                "rho": s["rho"],
                "seed": s["seed_run"],
                "pass": p,
                "n": len(g),
                "V_adaptive": int(g["viol_adaptive"].sum()),
                "V_q0": int(g["viol_fixed"].sum()),
                "V_qstar": int(g["viol_q_star"].sum()),
                "mean_S": float(g["S"].mean()),
                "share_top1_biased": float(t["top1_changed"].mean()),
                "mean_rules_honoured": float(t["n_rules_honoured"].mean()),
                "share_no_neighbour": float((g["n_neighbours"] == 0).mean()),
                "n_paired": n_pair,
                "V_q0_pass1_only": q0_1,
                "V_q0_here_only": q0_h,
                "V_adaptive_pass1_only": ad_1,
                "V_adaptive_here_only": ad_h,
            }
        )
    return pd.DataFrame(out)


def fairness_table(results: Sequence, methods: Sequence[str] = METHODS) -> pd.DataFrame:
    """One row per (run, method): beta, rho, seed, CFR (multi), SNSR (joint tuple, proxy; NaN with the
    reason in ``snsr_missing`` when no group is large enough), NDCG@10, Recall@10, share of
    last-pass rows whose top-1 the bias changed."""
    out = []
    for r in results:
        s = _sim(r)
        for m in methods:
            flat = r.record.metrics.methods[m].flat()
            rec = r.rows[m]
            last = rec[rec["pass"] == rec["pass"].max()]
            snsr = flat.get("snsr_joint")
            out.append(
                {
                    "beta": s["beta"],
                    "rho": s["rho"],
                    "seed": s["seed_run"],
                    "method": m,
                    "cfr_multi": value_or_nan(flat.get("cfr_multi")),
                    "snsr_joint": value_or_nan(snsr),
                    "snsr_missing": snsr.reason if isinstance(snsr, MissingValue) else "",
                    "ndcg@10_multi": value_or_nan(flat.get("ndcg@10_multi")),
                    "recall@10_multi": value_or_nan(flat.get("recall@10_multi")),
                    "share_top1_biased": float(truth_frame(last)["top1_changed"].mean()),
                }
            )
    return pd.DataFrame(out)


def detector_table(
    result,
    encoder,
    items: pd.DataFrame,
    calib_rows: pd.DataFrame,
    test_rows: pd.DataFrame,
    lambdas: Sequence[float] = (0.0, 0.35, 0.7, 1.4),
    tau_rhos: Sequence[float] = (0.7, 0.8, 0.9),
    alpha: float | None = None,
    method: str = "neutral",
) -> pd.DataFrame:
    """Precision and recall of the violation flag S > Q0 as a detector of biased outputs, per (lambda,
    tau_rho), for ``method``'s first pass (Neutral by default: one static prompt, exchangeable with
    calibration).  Scores are recomputed from the saved top-1 items and raw titles of the calibration
    and test rows with the run's own representation (docs/FACTER.md §2); the truth is the simulator's
    ``top1_changed`` (the bias changed the top-1 item, the only item S looks at).

    Columns: lambda, tau_rho, q0, flagged, biased, true_pos, precision, recall, base_rate, lift
    (precision / base rate), share_no_neighbour (test rows); and against the list-level label (the
    bias changed the top-10 set, :func:`list_labels`): biased_list, true_pos_list, precision_list,
    recall_list, base_rate_list.
    """
    alpha = float(result.record.metrics.calibration.alpha if alpha is None else alpha)
    inputs = rescore_inputs(result, encoder, items, calib_rows, test_rows, method)
    truth = truth_frame(inputs.records)["top1_changed"].to_numpy(dtype=bool)
    truth_list = list_labels(inputs.records)
    out = []
    for tau in tau_rhos:
        for lam in lambdas:
            res = rescore(inputs, lam=float(lam), tau_rho=float(tau), alpha=alpha)
            s = res.S
            flag = s > res.q0
            tp = int((flag & truth).sum())
            base = float(truth.mean()) if len(truth) else float("nan")
            prec = tp / int(flag.sum()) if flag.any() else float("nan")
            recall = tp / int(truth.sum()) if truth.any() else float("nan")
            out.append(
                {
                    "lambda": float(lam),
                    "tau_rho": float(tau),
                    "q0": res.q0,
                    "flagged": int(flag.sum()),
                    "biased": int(truth.sum()),
                    "true_pos": tp,
                    "precision": prec,
                    "recall": recall,
                    "base_rate": base,
                    "lift": prec / base if base and not math.isnan(prec) else float("nan"),
                    "lift_ceiling": 1.0 / base if base else float("nan"),
                    "share_no_neighbour": res.share_no_neighbour,
                    **_list_numbers(flag, truth_list),
                }
            )
    return pd.DataFrame(out)


def _list_numbers(flag: np.ndarray, label: np.ndarray) -> dict:
    """Positives, true positives, precision, recall and base rate of ``flag`` against the list-level label."""
    tp, fl, pos = int((flag & label).sum()), int(flag.sum()), int(label.sum())
    return {
        "biased_list": pos,
        "true_pos_list": tp,
        "precision_list": tp / fl if fl else float("nan"),
        "recall_list": tp / pos if pos else float("nan"),
        "base_rate_list": pos / len(label) if len(label) else float("nan"),
    }


# ---------------------------------------------------------------------------------------------
# checked statements: one standard for all (facterlab.reporting.claims)


#: coverage is an equality claim (alpha - 1/(n+1) <= P(S > Q0) <= alpha); we check it within this tolerance
COVERAGE_TOLERANCE = 0.03


def coverage_checks(cov: pd.DataFrame, label: str = "") -> list:
    """One claim per alpha: the exceedance rate lies within +-0.03 of alpha (its 99% interval inside the band)."""
    out = []
    for r in cov.itertuples():
        lo_b, hi_b = r.alpha - COVERAGE_TOLERANCE, r.alpha + COVERAGE_TOLERANCE
        c = rate_claim(f"coverage{label}: P(S > Q0) is alpha = {r.alpha:g}", int(r.exceed), int(r.n_test), hi_b, "<=")
        inside = r.ci_lo >= lo_b and r.ci_hi <= hi_b
        outside = r.ci_hi < lo_b or r.ci_lo > hi_b
        out.append(
            Claim(
                c.claim,
                f"99% interval inside [{lo_b:.3f}, {hi_b:.3f}] (alpha +- {COVERAGE_TOLERANCE:g})",
                c.measured,
                c.test,
                c.smallest_effect,
                HOLDS if inside else (FAILS if outside else TOO_SMALL),
            )
        )
    return out


def repair_checks(rep: pd.DataFrame) -> list:
    """Per beta > 0 and rho: do V(Q0) and V(t) fall from pass 1 to the last pass (counts summed over seeds)?
    Every pass answers the same test rows, so the test is the exact McNemar test on the rows paired by
    ``row_id`` (:func:`repair_table`'s discordant counts); a table without them (an older
    ``repair_table``) gets the unpaired test."""
    out = []
    last = int(rep["pass"].max())
    paired = {"n_paired", "V_q0_here_only"} <= set(rep.columns)
    for (beta, rho), g in rep.groupby(["beta", "rho"], sort=True):
        n1 = int(g.loc[g["pass"] == 1, "n"].sum())
        gl = g[g["pass"] == last]
        nl = int(gl["n"].sum())
        for col, name in (("V_q0", "the fixed Q0"), ("V_adaptive", "the adaptive Q_t")):
            text = f"faithful FACTER, repair (beta={beta:g}, rho={rho:g}): violations against {name} fall from pass 1"
            if paired and int(gl["n_paired"].sum()) == nl:
                out.append(
                    paired_rate_claim(
                        f"{text} (B) to pass {last} (A), the same rows",
                        int(gl[f"{col}_here_only"].sum()),
                        int(gl[f"{col}_pass1_only"].sum()),
                        nl,
                    )
                )
                continue
            k1 = int(g.loc[g["pass"] == 1, col].sum())
            kl = int(gl[col].sum())
            out.append(two_rate_claim(f"{text} (p2) to pass {last} (p1)", kl, nl, k1, n1))
    return out


def fairness_checks(fair: pd.DataFrame, label: str = "faithful FACTER") -> list:
    """Per beta > 0: is FACTER's CFR below Fair's (paired over seeds)?"""
    out = []
    for beta, g in fair.groupby("beta", sort=True):
        if beta == 0:
            continue
        w = g.pivot_table(index="seed", columns="method", values="cfr_multi")
        if not {"facter", "fair"} <= set(w.columns):
            continue
        out.append(
            paired_claim(f"{label}, fairness (beta={beta:g}): FACTER's CFR is below Fair's", w["facter"], w["fair"])
        )
    return out


def detector_checks(det_by_beta: pd.DataFrame, label: str = "faithful FACTER (S > Q0)") -> list:
    """Recall rises with beta (consecutive betas), and precision is above the base rate, per beta > 0.
    ``det_by_beta``: rows with beta, true_pos, flagged, biased, base_rate (one lambda and tau_rho)."""
    d = det_by_beta[det_by_beta["beta"] > 0].sort_values("beta")
    out = []
    rows = list(d.itertuples())
    for a, b in zip(rows, rows[1:]):
        out.append(
            two_rate_claim(
                f"{label}: recall rises from beta={a.beta:g} to beta={b.beta:g}",
                int(a.true_pos),
                int(a.biased),
                int(b.true_pos),
                int(b.biased),
            )
        )
    for r in rows:
        out.append(
            rate_claim(
                f"{label} (beta={r.beta:g}): precision is above the base rate {r.base_rate:.3f} "
                f"(lift ceiling 1/base rate = {1 / r.base_rate if r.base_rate else float('nan'):.2f})",
                int(r.true_pos),
                int(r.flagged),
                float(r.base_rate),
                ">=",
            )
        )
    return out


def checks_frame(checks: Sequence) -> pd.DataFrame:
    """The checked statements as a table (claim, criterion, measured, test, smallest effect, verdict)."""
    return claims_frame(list(checks))


# ---------------------------------------------------------------------------------------------
# facterlab's twin monitor beside the faithful one (docs/FACTER.md §7)


def monitor_label(result) -> str:
    """What flags in this run: the faithful FACTER (REPRO's neighbour Delta, conformal Q0) or facterlab's
    extension (twin Delta, its threshold, its rule mining)."""
    cfg = result.record.config
    delta, thr, mine = (
        cfg.setting(f"facter.{k}") or d
        for k, d in (("delta", "neighbour"), ("threshold", "conformal"), ("rule_mining", "count"))
    )
    if delta == "neighbour" and thr == "conformal" and mine == "count":
        return "FACTER (faithful: neighbour Delta, Q0, count rules)"
    return f"facterlab: {delta} Delta, {thr} threshold, {mine} rules"


#: the numbers of a run's ``ground_truth.detector`` block (facterlab.facter.truth) that tables show
DETECTOR_NUMBERS = ("n", "positives", "flagged", "true_pos", "precision", "recall", "base_rate", "flag_rate", "auc")


def run_detector_frame(results: Sequence, methods: Sequence[str] = METHODS) -> pd.DataFrame:
    """One row per (run, method): monitor, beta, rho, seed and the run's own ``ground_truth.detector``
    (metrics.json; facterlab.facter.truth): label, flagged, positives, true_pos, n, precision, recall,
    base_rate, flag_rate, auc, lift and its ceiling 1/base rate.  Beside that top-1 label, the same
    flags (the last pass's ``viol_fixed``) against the list-level label (:func:`list_labels`, the row's
    or, with the twin Delta, its twin's top-10 set changed): biased_list, true_pos_list,
    precision_list, recall_list, base_rate_list; and ``max_delta``, the largest Delta of those rows
    (0: every twin distance is 0, so no flag can fire)."""
    out = []
    for r in results:
        s = _sim(r)
        for m in methods:
            gtb = (r.record.metrics.methods[m].ground_truth or {}).get("detector")
            if not gtb:
                raise ValueError(f"run {r.run_id} has no ground_truth.detector for {m}: rerun it with this facterlab")
            row = {
                "monitor": monitor_label(r),
                "beta": s["beta"],
                "rho": s["rho"],
                "seed": s["seed_run"],
                "method": m,
                "run_id": r.run_id,
            }
            row["label"] = gtb["label"]
            for k in DETECTOR_NUMBERS:
                row[k] = value_or_nan(gtb[k])
            row["lift"] = row["precision"] / row["base_rate"] if row["base_rate"] else float("nan")
            row["lift_ceiling"] = 1.0 / row["base_rate"] if row["base_rate"] else float("nan")
            rec = r.rows[m]
            last = rec[rec["pass"] == rec["pass"].max()]
            twin = (r.record.config.setting("facter.delta") or "neighbour") == "twin"
            row.update(_list_numbers(last["viol_fixed"].to_numpy(dtype=bool), list_labels(last, twin)))
            row["max_delta"] = float(np.nanmax(last["delta"].to_numpy(dtype=float))) if len(last) else float("nan")
            out.append(row)
    return pd.DataFrame(out)


class SharedFlags(Mapping):
    """A read-only mapping that a DataFrame's ``attrs`` carry without being copied.

    pandas deep-copies a frame's ``attrs`` into every frame derived from it (each filter, ``groupby``
    group, column assignment: ``NDFrame.__finalize__``), and :func:`biased_share_table`'s row-level flags
    are frozensets of row ids per (run, pass): thousands of objects copied per operation.  Its values are
    immutable, so a copy is the mapping itself (``copy.deepcopy(m) is m``).

    >>> import copy
    >>> m = SharedFlags({("run", 1): (frozenset({1, 2}), frozenset({2}))})
    >>> copy.deepcopy(m) is m, m[("run", 1)][1], len(m), m == {("run", 1): (frozenset({1, 2}), frozenset({2}))}
    (True, frozenset({2}), 1, True)
    """

    __slots__ = ("_d",)

    def __init__(self, items: Mapping):
        self._d = dict(items)

    def __getitem__(self, key):
        return self._d[key]

    def __iter__(self) -> Iterator:
        return iter(self._d)

    def __len__(self) -> int:
        return len(self._d)

    def __repr__(self) -> str:
        return f"SharedFlags({len(self._d)} entries)"

    def __copy__(self) -> SharedFlags:
        return self

    def __deepcopy__(self, memo) -> SharedFlags:
        return self


def biased_share_table(results: Sequence) -> pd.DataFrame:
    """One row per (run, pass): the share of FACTER's top-1 items the push changed (``top1_changed``) and
    that differ from the demographics-blind answer (``top1_unfair``), with counts, and Fair's
    ``top1_changed`` count on the same rows (the same prompt without rules).  Fair answers the same test
    rows, so the rows are also paired by ``row_id``: ``n_paired``, ``facter_only``, ``fair_only``,
    ``both_changed`` (the counts of the paired test in :func:`twin_claims`).  The row-level flags
    travel in ``df.attrs["changed_rows"]``, ``{(run_id, pass): (row ids, changed row ids)}`` (frozensets,
    in a :class:`SharedFlags`, which the frames derived from ``df`` share instead of copying), so that runs
    on the same rows (rho = 1 against rho = 0) can be paired too."""
    out, fair, fair_flags, rows_of = [], {}, {}, {}
    for r, s, p, g, t in _facter_passes(results):
        if r.run_id not in fair:
            fr = r.rows["fair"]
            fair[r.run_id] = truth_frame(fr)
            fair_flags[r.run_id] = (
                dict(zip(fr["row_id"].tolist(), fair[r.run_id]["top1_changed"].astype(bool).tolist()))
                if "row_id" in fr.columns
                else {}
            )
        changed = t["top1_changed"].astype(bool).to_numpy()
        ids = g["row_id"].tolist() if "row_id" in g.columns else []
        if ids:
            rows_of[(r.run_id, p)] = (frozenset(ids), frozenset(i for i, c in zip(ids, changed) if c))
        flags = fair_flags[r.run_id]
        pairs = [(bool(c), flags[i]) for i, c in zip(ids, changed) if i in flags]
        unfair = t["top1_unfair"] if "top1_unfair" in t.columns else t["top1_changed"]
        out.append(
            {
                "monitor": monitor_label(r),
                "run_id": r.run_id,
                "compliance": s.get("compliance", "absolute"),
                "beta": s["beta"],
                "rho": s["rho"],
                "seed": s["seed_run"],
                "pass": p,
                "n": len(g),
                "changed": int(t["top1_changed"].sum()),
                "unfair": int(unfair.sum()),
                "fair_changed": int(fair[r.run_id]["top1_changed"].sum()),
                "fair_n": len(fair[r.run_id]),
                "V_q0": int(g["viol_fixed"].sum()),
                "mean_pushed_topk": float(t["n_pushed_topk"].mean()),
                "n_paired": len(pairs),
                "facter_only": sum(a and not b for a, b in pairs),
                "fair_only": sum(b and not a for a, b in pairs),
                "both_changed": sum(a and b for a, b in pairs),
            }
        )
    df = pd.DataFrame(out)
    df.attrs["changed_rows"] = SharedFlags(rows_of)
    if len(df):
        df["share_changed"] = df["changed"] / df["n"]
        df["share_unfair"] = df["unfair"] / df["n"]
        df["fair_share_changed"] = df["fair_changed"] / df["fair_n"]
    return df


def rules_vs_table(results: Sequence, table: dict | None = None) -> pd.DataFrame:
    """The rules of FACTER's last pass against the bias table: per run, how many feature rules there are,
    how many name a feature the table pushes to that value (``pushed``), and the share of last-pass
    rows whose prompt held at least one rule naming a pushed feature."""
    out = []
    for r in results:
        s = _sim(r)
        tbl = load_bias_table(table if table is not None else s.get("bias_table", "default"))
        rec = r.rows["facter"]
        last = rec[rec["pass"] == rec["pass"].max()]

        def pushed(rule: str, tbl: dict = tbl) -> bool | None:
            m = _RULE.match(rule)
            if not m or not m.group(3).endswith("-only"):
                return None
            attr, value, feat = m.group(1), m.group(2), m.group(3)[: -len("-only")]
            return feat in tbl.get(attr, {}).get(value, {})

        rules = sorted({x for rr in last["rules"] for x in rr})
        flags = [pushed(x) for x in rules]
        feat = [f for f in flags if f is not None]
        rows_hit = [any(pushed(x) for x in rr) for rr in last["rules"]]
        out.append(
            {
                "monitor": monitor_label(r),
                "beta": s["beta"],
                "rho": s["rho"],
                "seed": s["seed_run"],
                "feature_rules": len(feat),
                "pushed": int(sum(feat)),
                "share_pushed": (sum(feat) / len(feat)) if feat else float("nan"),
                "share_rows_with_pushed_rule": float(np.mean(rows_hit)) if rows_hit else float("nan"),
            }
        )
    return pd.DataFrame(out)


_RULE = re.compile(r"AVOID: \((\w+)=(.*?)\) -> \((.*)\)$")


def _rho_pairs(shares: pd.DataFrame, beta: float, last: int) -> tuple | None:
    """(rows, rho=1 only, rho=0 only) over the seeds where a rho = 1 and a rho = 0 run at ``beta`` answer
    the same rows in pass ``last`` (``shares.attrs["changed_rows"]``); None unless every seed pairs."""
    flags = shares.attrs.get("changed_rows") or {}
    sel = shares[(shares["beta"] == beta) & (shares["pass"] == last)]
    n = b = c = 0
    for _seed, g in sel.groupby("seed"):
        one, zero = g[g["rho"] == 1.0], g[g["rho"] == 0.0]
        if len(one) != 1 or len(zero) != 1:
            return None
        f1, f0 = flags.get((one["run_id"].iloc[0], last)), flags.get((zero["run_id"].iloc[0], last))
        if f1 is None or f0 is None or f1[0] != f0[0]:
            return None
        n, b, c = n + len(f1[0]), b + len(f1[1] - f0[1]), c + len(f0[1] - f1[1])
    return (n, b, c) if n else None


def rho_claim(claim: str, shares: pd.DataFrame, beta: float, last: int | None = None) -> Claim:
    """The share of top-1 items the push changed by pass ``last`` is lower with rho = 1 than with rho = 0,
    at ``beta``, pooled over seeds (``shares``: :func:`biased_share_table` of runs that differ only in
    rho).  Runs of one seed answer the same test rows, so the test is the exact McNemar test on the rows
    paired by ``row_id`` (A: rho = 1, B: rho = 0); when a seed lacks its pair or the row-level flags
    (``shares.attrs["changed_rows"]``), the unpaired :func:`two_rate_claim`.

    Parameters
    ----------
    claim : str
        The statement.
    shares : pandas.DataFrame
        :func:`biased_share_table`'s output (with its ``attrs``).
    beta : float
        The bias strength.
    last : int or None
        The pass (None: the last).

    Returns
    -------
    Claim
    """
    last = int(shares["pass"].max()) if last is None else int(last)
    pairs = _rho_pairs(shares, beta, last)
    if pairs is not None:
        n, b1, b0 = pairs
        return paired_rate_claim(claim + "; A: rho=1, B: rho=0, the same rows", b1, b0, n)
    sel = shares[(shares["beta"] == beta) & (shares["pass"] == last)]
    g1, g0 = sel[sel["rho"] == 1.0], sel[sel["rho"] == 0.0]
    return two_rate_claim(
        claim, int(g1["changed"].sum()), int(g1["n"].sum()), int(g0["changed"].sum()), int(g0["n"].sum())
    )


def twin_claims(det: pd.DataFrame, shares: pd.DataFrame, fair_twin: pd.DataFrame, alpha: float) -> list:
    """The acceptance claims of the twin monitor (docs/FACTER.md §7), pooled over seeds:

    - at beta = 0 the null threshold flags at most alpha of the Neutral rows (verdict "by construction"
      when every twin distance of those rows is 0: the flag Delta > Q_null cannot fire);
    - at beta > 0 recall >= 0.8 and precision >= 0.9 (Neutral rows), against the top-1 label ("the
      bias changed the row's or its twin's top-1") and against the list-level one ("... top-10 set");
    - recall rises with beta;
    - with rho = 1 the share of top-1 items the push changed, by pass 3, is below half of Fair's (the
      same rows: paired bounds); and below the rho = 0 runs' share (the same rows: exact McNemar);
    - FACTER-twin's CFR is below Fair's at beta = 2 (paired over seeds).
    """
    out = []
    nd = det[det["method"] == "neutral"]
    has_list = "true_pos_list" in nd.columns
    for beta, g in nd.groupby("beta", sort=True):
        k, n, tp, pos = int(g["flagged"].sum()), int(g["n"].sum()), int(g["true_pos"].sum()), int(g["positives"].sum())
        if beta == 0:
            c = rate_claim(f"twin + null (beta=0): the false-flag rate is at most alpha = {alpha:g}", k, n, alpha, "<=")
            if "max_delta" in g.columns and bool((g["max_delta"] == 0).all()):
                c = by_construction(c, "every twin distance is 0, so Delta > Q_null cannot fire")
            out.append(c)
            continue
        out.append(rate_claim(f"twin + null (beta={beta:g}): recall >= 0.8", tp, pos, 0.8, ">="))
        out.append(rate_claim(f"twin + null (beta={beta:g}): precision >= 0.9", tp, k, 0.9, ">="))
        if has_list:
            tpl, posl = int(g["true_pos_list"].sum()), int(g["biased_list"].sum())
            words = "label: the bias changed the row's or its twin's top-10 set"
            out.append(rate_claim(f"twin + null (beta={beta:g}): recall >= 0.8 ({words})", tpl, posl, 0.8, ">="))
            out.append(rate_claim(f"twin + null (beta={beta:g}): precision >= 0.9 ({words})", tpl, k, 0.9, ">="))
    betas = sorted(b for b in nd["beta"].unique() if b > 0)
    for a, b in zip(betas, betas[1:]):
        ga, gb = nd[nd["beta"] == a], nd[nd["beta"] == b]
        out.append(
            two_rate_claim(
                f"twin + null: recall rises from beta={a:g} to beta={b:g}",
                int(ga["true_pos"].sum()),
                int(ga["positives"].sum()),
                int(gb["true_pos"].sum()),
                int(gb["positives"].sum()),
            )
        )
    last = int(shares["pass"].max()) if len(shares) else 0
    for (beta, rho), g in shares[shares["beta"] > 0].groupby(["beta", "rho"], sort=True):
        gl = g[g["pass"] == last]
        fair_k = int(gl["fair_changed"].sum())
        fair_n = int(gl["fair_n"].sum())
        k, n = int(gl["changed"].sum()), int(gl["n"].sum())
        # Fair answers the same rows: pair them when every row found its Fair twin
        paired = "n_paired" in gl.columns and int(gl["n_paired"].sum()) == n == fair_n
        if rho > 0:
            text = (
                f"twin repair (beta={beta:g}, rho={rho:g}): by pass {last} the share of top-1 items the push "
                "changed (FACTER, A) is below half of Fair's (B)"
            )
            if paired:
                fo, fa, both = (int(gl[c].sum()) for c in ("facter_only", "fair_only", "both_changed"))
                c = paired_rate_claim(text + ", the same rows", fo, fa, n, 0.5, both)
            else:
                c = two_rate_claim(text, k, n, fair_k, fair_n, 0.5)
        else:  # the negative control: a recommender that ignores the rules is not repaired
            text = (
                f"twin repair, control (beta={beta:g}, rho=0): by pass {last} the share of top-1 items the push "
                "changed stays above half of Fair's (A: Fair's, B: FACTER's)"
            )
            if paired:
                fo, fa, both = (int(gl[c].sum()) for c in ("facter_only", "fair_only", "both_changed"))
                c = paired_rate_claim(text + ", the same rows", fa, fo, n, 2.0, both)
            else:
                c = two_rate_claim(text, fair_k, fair_n, k, n, 2.0)
        out.append(c)
    rhos = sorted(shares["rho"].unique()) if len(shares) else []
    if 0.0 in rhos and 1.0 in rhos:
        for beta in sorted(b for b in shares["beta"].unique() if b > 0):
            g1 = shares[(shares["beta"] == beta) & (shares["rho"] == 1.0) & (shares["pass"] == last)]
            g0 = shares[(shares["beta"] == beta) & (shares["rho"] == 0.0) & (shares["pass"] == last)]
            if not (len(g1) and len(g0)):
                continue
            out.append(
                rho_claim(
                    f"twin repair (beta={beta:g}): the pass-{last} share changed by the push is lower with rho=1 "
                    "than with rho=0 (the repair is the rules' doing)",
                    shares,
                    beta,
                    last,
                )
            )
    out += fairness_checks(fair_twin, label="facterlab twin monitor")
    return out


# ---------------------------------------------------------------------------------------------
# figures


def records_with_reasons(df: pd.DataFrame) -> list:
    """``df.to_dict("records")`` with every NaN replaced by an explicit missing value and its reason
    (a rate whose denominator is empty, SNSR without groups large enough), never a bare null."""
    reasons = {
        "precision": "no row was flagged (empty denominator)",
        "recall": "no row was biased (empty denominator)",
        "lift": "precision or base rate undefined",
        "snsr_joint": "SNSR undefined",
    }
    out = []
    for rec in df.to_dict("records"):
        row = {}
        for k, v in rec.items():
            if isinstance(v, float) and math.isnan(v):
                why = reasons.get(k, f"{k} undefined")
                if k == "snsr_joint" and rec.get("snsr_missing"):
                    why = str(rec["snsr_missing"])
                v = MissingValue(why).to_json()
            row[k] = v
        out.append(row)
    return out


# ---------------------------------------------------------------------------------------------
# why the faithful score misses the bias: S decomposed by truth (notebook 09, section 5)


def decomposition_row(result, label: str, method: str = "neutral") -> dict:
    """The score decomposed by the truth for one run: on ``method``'s rows, the mean of d, Delta and S
    over the rows the bias changed (top-1) and over the others, the biased count, the calibration share
    without a counterfactual neighbour, and AUC(S, biased) (:func:`facterlab.facter.truth.rank_auc`).

    Parameters
    ----------
    result : RunResult
        A simulated run (its records carry the JSON truth).
    label : str
        What the row says the run is.
    method : str, default "neutral"
        Whose rows.

    Returns
    -------
    dict
        ``run``, ``run_id``, ``n``, ``biased``, ``share_no_neighbour (calibration)``, ``mean <x> biased``
        and ``mean <x> unbiased`` for x in d, delta, S (NaN when a side is empty), ``AUC(S, biased)``.
    """
    rec = result.rows[method]
    truth = truth_frame(rec)["top1_changed"].to_numpy(dtype=bool)
    out = {"run": label, "run_id": result.run_id, "n": len(rec), "biased": int(truth.sum())}
    out["share_no_neighbour (calibration)"] = value_or_nan(result.record.metrics.calibration.share_no_neighbour)
    for col in ("d", "delta", "S"):
        v = rec[col].to_numpy(dtype=float)
        out[f"mean {col} biased"] = float(v[truth].mean()) if truth.any() else float("nan")
        out[f"mean {col} unbiased"] = float(v[~truth].mean()) if (~truth).any() else float("nan")
    out["AUC(S, biased)"] = rank_auc(rec["S"], truth)
    return out


def d_shift(result, encoder, items: pd.DataFrame, test_rows: pd.DataFrame, method: str = "neutral") -> dict:
    """The paired shift of d on the rows whose top-1 the bias changed: d of the answer given minus d of
    the answer without the push (``top1_unbiased``), both against the row's target with the run's
    representation.  Returns n, mean shift, its standard error and the share of rows where d rose."""
    items = items if items.index.name == "item_id" else items.set_index("item_id")
    rep = ItemRepresenter(encoder, items)
    rec = result.rows[method]
    rec = rec[rec["pass"] == 1].reset_index(drop=True)
    t = truth_frame(rec)
    changed = t["top1_changed"].to_numpy(dtype=bool)
    if not changed.any():
        return {"n": 0, "mean_shift": float("nan"), "se": float("nan"), "share_d_rose": float("nan")}
    rows = test_rows.set_index("row_id").loc[rec.loc[changed, "row_id"].to_numpy()]
    target = rep.items(rows["target"].tolist())
    given = rep.items([int(x) for x in rec.loc[changed, "top1_id"].clip(lower=0)])
    unbiased = rep.items([int(x) for x in t.loc[changed, "top1_unbiased"]])
    shift = top1_distance(given, target) - top1_distance(unbiased, target)
    n = len(shift)
    return {
        "n": n,
        "mean_shift": float(shift.mean()),
        "se": float(shift.std(ddof=1) / math.sqrt(n)) if n > 1 else float("nan"),
        "share_d_rose": float((shift > 0).mean()),
    }


def handbuilt_run(ds, beta: float, rho: float, out_dir=None, **overrides):
    """One run in the hand-built world ``ds`` (:func:`facterlab.data.handbuilt.make_world`): the simulated
    recommender with the ``romance`` table, hard rules, no title corruption, the hash encoder, 600 rows,
    T = 3; ``overrides`` are further ``section__field`` settings (e.g. ``facter__delta="twin"``).  A run
    saved under ``out_dir`` with the same run id (same config, world and fingerprints) is read back."""
    settings = {
        "data__dataset": "synthetic",
        "data__n_rows": 600,
        "data__n_candidates": 20,
        "model__llm": "simulated",
        "model__encoder": "hash-encoder",
        "facter__passes": 3,
        "metrics__cfr_rows": 50,
        "metrics__snsr_min_group": 10,
        "sim__beta": float(beta),
        "sim__rho": float(rho),
        "sim__demote": 1000.0,
        "sim__h": 0.0,
        "sim__n_factors": 8,
        "sim__bias_table": "romance",
        **overrides,
    }
    cfg = preset("repro", **settings)
    rec = simulated_from_config(cfg, build_interactions(ds, cfg.data))
    encoder = HashEncoder()
    # read back when saved: the run id run_experiment gives it (config, the interactions' hash, fingerprints)
    inter = load_or_build_interactions(ds, cfg.data)
    fingerprints = {"llm": str(rec.fingerprint), "encoder": str(encoder.fingerprint), **blas_fingerprint()}
    saved = find(runs_dir(out_dir), run_id_for(cfg, inter.content_hash, fingerprints))
    if saved is not None:
        return read_run_folder(saved)
    return run_experiment(cfg, recommender=rec, encoder=encoder, dataset=ds, out_dir=out_dir, progress=False)


#: the bias strength of notebook 09's hand-built positive control (score SDs)
HANDBUILT_BETA = 6.0


def handbuilt_control(out_dir=None, beta: float = HANDBUILT_BETA, seed: int = 0) -> dict:
    """The positive control of notebook 09: the faithful FACTER in the tests' hand-built world
    (:func:`facterlab.data.handbuilt.make_world`: four taste genres, Romance liked by nobody and pushed
    to women by the simulated recommender, hard rules), where the bias is what makes S large.  Runs
    rho = 1 and rho = 0 (:func:`handbuilt_run`, seconds) and returns ``{rho: run}``."""
    ds = make_world(n_users=160, seed=seed)
    return {rho: handbuilt_run(ds, beta, rho, out_dir) for rho in (1.0, 0.0)}
