"""The twin monitor against recommenders that read text (notebook 09 section 7; docs/FACTER.md §7).

The simulated recommender of sections 1-6 takes the demographics from the request's fields, so a
placebo that rewrites the prompt cannot move it and the null threshold cannot fail there.  Here the
monitor meets the text-reading simulator (``sim.reads = "text"``, :data:`facterlab.models.simulated.TEXT_CASES`):
unbiased models that are moved by the prompt's surface (a set of lines, the whole prompt, sampling,
line order, an irrelevant field, all at once), one that depends on the values' meaning without a
direction (``semantic``), and biased ones (the default table, a narrow held-out style table, a bias
fired by one spelling).

Two estimands, each with its truth per case (:func:`case_truth`; docs/FACTER.md §7): **row-level
counterfactual dependence** ("does this user's answer depend on their demographics?", what the flag
tests: the surface cases are negatives, ``semantic`` and the biased tables positives) and **group-level
directional bias** ("is some group systematically pushed?", :mod:`facterlab.facter.directional`: only
the biased tables are positives).  The acceptance claims (:func:`acceptance_claims`):

- **false flags**: on every case where the demographics change nothing (the surface cases), Neutral's
  flag rate pooled over seeds has a 99% Clopper-Pearson upper bound <= alpha + 0.02;
- **rules**: on every case that pushes no group (the surface cases and ``semantic``) FACTER makes at
  most :data:`HANDFUL` distinct rules in a run;
- **no harm**: on every case FACTER's CFR is not above Fair's: the per-row CFR distances (the same
  rows and flips for both methods) are compared pair by pair, pooled over seeds; holds when the
  one-sided 99% upper bound of the mean difference is below :data:`CFR_MARGIN`, fails when the lower
  bound is above 0;
- **power** where the demographics change the answer (the biased cases and ``semantic``): recall and
  precision against the top-1 labels ("the demographics changed this row's top-1", "... this row's or
  its twin's") and against the list-level ones ("... the top-10 set": the twin Delta compares whole
  top-10 lists, :func:`facterlab.reporting.ground_truth.list_labels`); a flag on ``semantic`` is a true
  positive;
- **direction** (:func:`directional_claims`, the seeds' Neutral rows pooled per case): no group is
  declared pushed on a case without a direction (family-wise level :data:`DIRECTIONAL_ALPHA`), and a
  pushed cell of the table is found on a biased one.

Every testbed run measures the twin Delta and the placebos with the rank-weighted list statistic
(``facter.twin_distance = "list"``, :data:`TWIN_DISTANCE`), chosen from the **power study** (``--power``:
:func:`power_frame`, :func:`power_claims`, recall and precision against the requests per row for each statistic;
docs/FACTER.md §7.2).

A statement that cannot fail in its setting is reported with the verdict "by construction" and not
counted among the holds: no false flag when every twin distance of the Neutral rows is 0; FACTER's CFR
not above Fair's when FACTER made no rule in any run (its prompt is then Fair's).

:func:`acceptance_frame` has one row per run with the numbers behind every claim.

Two further checks of issue 43: the **attribution acceptance** (:func:`attribution_plan`,
:func:`attribution_frame`, :func:`attribution_claims`; ``--attribution``): confirmed rules made with the
all-attributes twin against per-attribute twins (``facter.attribution``, docs/FACTER.md §7.3) on the
default table, students -> Comedy and the narrow table, and on the unbiased cases; and the reword
placebo's **positive control** (:class:`LowercaseLineReader`, :func:`case_insensitive_run`;
``--case-insensitive``): a reader that ignores letter case, caught by the reword placebo alone once every
value has a synonym.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

import numpy as np
import pandas as pd

from facterlab.config import TWIN_DISTANCES
from facterlab.facter.record import METHODS
from facterlab.facter.truth import truth_labels
from facterlab.models.simulated import TEXT_CASES
from facterlab.reporting import experiments as ex
from facterlab.reporting.claims import FAILS, HOLDS, LEVEL, TOO_SMALL, Claim, by_construction, rate_claim
from facterlab.reporting.ground_truth import list_labels

__all__ = [
    "UNBIASED_CASES",
    "SEMANTIC_CASES",
    "BIASED_CASES",
    "DEPENDENCE",
    "DIRECTIONAL",
    "DIRECTIONAL_ALPHA",
    "case_truth",
    "pushed_cells",
    "run_directional_numbers",
    "case_directional",
    "directional_claims",
    "estimands_frame",
    "CASES",
    "case_overrides",
    "case_config",
    "VARIANTS",
    "acceptance_frame",
    "acceptance_claims",
    "cfr_pair_claim",
    "power_frame",
    "power_claims",
    "power_configs",
    "twin_statistic",
    "POWER_TARGET_RECALL",
    "POWER_TARGET_COST",
    "TWIN_DISTANCE",
    "HANDFUL",
    "CFR_MARGIN",
    "negative_control_config",
    "negative_control_claims",
    "LowercaseLineReader",
    "ATTRIBUTION_CASES",
    "ATTRIBUTION_VARIANTS",
    "ATTRIBUTION_CHOICES",
    "VARIANT_SETTINGS",
    "attribution_plan",
    "rule_cells",
    "true_cells",
    "attribution_frame",
    "attribution_claims",
    "case_flip_wordings",
    "case_insensitive_run",
]

#: the unbiased cases (beta = 0, moved by the prompt's surface only): negatives of both estimands, so every
#: flag on them is a false flag and every direction a false discovery
UNBIASED_CASES = ("lines-set", "prompt-hash", "per-call", "line-order", "irrelevant-field", "all-surfaces")
#: the cases that depend on the values' meaning without a direction (beta = 0, ``meaning_sd`` > 0): positives
#: of row-level counterfactual dependence (a flag on them is true), negatives of group-level directional bias
SEMANTIC_CASES = ("semantic",)
#: the biased cases: sim overrides (the default table read from the fields, a narrow table read from the
#: text, the bias fired by one spelling)
BIASED_CASES: dict = {
    "default-table": {"beta": 2.0},
    "narrow-table": {"reads": "text", "beta": 2.0, "bias_table": "narrow", "wording_sd": 0.5},
    "word-triggered": dict(TEXT_CASES["word-triggered"]),
}
CASES = (*UNBIASED_CASES, *SEMANTIC_CASES, *BIASED_CASES)
#: the attribution acceptance's biased cases (issue 43 item 2; :func:`attribution_plan`): the default table,
#: a push on one attribute correlated with others (students -> Comedy), the held-out narrow table
ATTRIBUTION_CASES: dict = {
    "default-table": dict(BIASED_CASES["default-table"]),
    "students-comedy": {"beta": 2.0, "bias_table": "students-comedy"},
    "narrow-table": dict(BIASED_CASES["narrow-table"]),
}
#: the attribution acceptance's monitor variants: the all-attributes twin, per-attribute twins on flagged rows,
#: per-attribute twins on every row; each with the top-1 items' features as a pair's evidence and, ``-list``, the
#: whole top-k lists' (``facter.rule_evidence = "list"``)
ATTRIBUTION_CHOICES = (
    "family",
    "attributed",
    "attributed-all",
    "family-list",
    "attributed-list",
    "attributed-all-list",
)
#: the variants notebook 09 §9 and ``--attribution`` run by default: the three top-1 ones and the twin monitor's
#: attribution candidate, per-attribute twins on every row with the whole lists (the only variant that finds at
#: least half of the narrow table's true cells; docs/FACTER.md §7.3 has the measured table of all six)
ATTRIBUTION_VARIANTS = ("family", "attributed", "attributed-all", "attributed-all-list")
#: the least share of confirmed rules that name a true (attribute value, feature) cell (attribution acceptance)
TRUE_RULE_SHARE = 0.9
#: the least share of the narrow table's true cells (per seed, pooled) that confirmed rules find
NARROW_FOUND_SHARE = 0.5
#: the two estimands (docs/FACTER.md §7): the flag tests the first, :mod:`facterlab.facter.directional` the second
DEPENDENCE, DIRECTIONAL = "row-level counterfactual dependence", "group-level directional bias"
#: the family-wise level of the directional claims (Holm over every cell; a negative case fails with at most this chance)
DIRECTIONAL_ALPHA = 0.01


def case_truth(case: str) -> dict:
    """The simulator's truth of a named case for each estimand: ``{DEPENDENCE: bool, DIRECTIONAL: bool}``.
    The surface cases are negatives of both, ``semantic`` is a positive of the first and a negative of the
    second, the biased tables are positives of both.

    >>> case_truth("lines-set")[DEPENDENCE], case_truth("semantic")[DEPENDENCE], case_truth("semantic")[DIRECTIONAL]
    (False, True, False)
    """
    if case in UNBIASED_CASES:
        return {DEPENDENCE: False, DIRECTIONAL: False}
    if case in SEMANTIC_CASES:
        return {DEPENDENCE: True, DIRECTIONAL: False}
    if case in BIASED_CASES:
        return {DEPENDENCE: True, DIRECTIONAL: True}
    raise ValueError(f"unknown case {case!r}; choose one of {', '.join(CASES)}")


#: "at most a handful of rules" on an unbiased model: distinct rules FACTER made in one run
HANDFUL = 5
#: non-inferiority margin of "FACTER's CFR is not above Fair's" (CFR lies in [0, 2])
CFR_MARGIN = 0.01


def case_overrides(case: str) -> dict:
    """The ``sim__`` overrides of a named case (:data:`CASES`).

    >>> case_overrides("lines-set")["sim__wording_sd"], case_overrides("default-table")
    (1.0, {'sim__beta': 2.0})
    """
    if case in BIASED_CASES:
        sim = BIASED_CASES[case]
    elif case in ATTRIBUTION_CASES:
        sim = ATTRIBUTION_CASES[case]
    elif case in TEXT_CASES:
        sim = TEXT_CASES[case]
    else:
        raise ValueError(f"unknown case {case!r}; choose one of {', '.join(CASES)}")
    return {f"sim__{k}": v for k, v in sim.items()}


#: the twin Delta's statistic of the testbed's runs (``facter.twin_distance``; issue 43 item 3): the rank-weighted
#: list mean, chosen from the power study (:func:`power_frame`, docs/FACTER.md §7.2); the global default stays
#: "top1", so the presets' run ids do not move
TWIN_DISTANCE = "list"

#: the monitor variants of section 7: name -> (placebo, rule mining, compliance)
VARIANTS: dict = {
    "family": ("family", "confirmed", "relative"),  # facterlab's twin monitor now
    "absolute": ("family", "confirmed", "absolute"),  # the same, the recommender only demotes what a rule names
    "count": ("family", "count", "relative"),  # the placebo family with FACTER's counted rules
    "order": ("order", "count", "relative"),  # the twin monitor before: one reversed-lines placebo, counted rules
    "reword": ("reword", "confirmed", "relative"),  # the reword placebo alone (its positive control, issue 43 item 5)
    "attributed": ("family", "confirmed", "relative"),  # "family" with per-attribute twins (VARIANT_SETTINGS)
    "attributed-all": ("family", "confirmed", "relative"),  # the same, every row's per-attribute pairs mined
    # the three above with the whole top-k lists as a pair's evidence (facter.rule_evidence = "list")
    "family-list": ("family", "confirmed", "relative"),
    "attributed-list": ("family", "confirmed", "relative"),
    "attributed-all-list": ("family", "confirmed", "relative"),
}
#: further settings of a variant (``facter__`` overrides), beside :data:`VARIANTS`' three
VARIANT_SETTINGS: dict = {
    "attributed": {"facter__attribution": "per-attribute"},
    "attributed-all": {"facter__attribution": "per-attribute-all"},
    "family-list": {"facter__rule_evidence": "list"},
    "attributed-list": {"facter__attribution": "per-attribute", "facter__rule_evidence": "list"},
    "attributed-all-list": {"facter__attribution": "per-attribute-all", "facter__rule_evidence": "list"},
}


def case_config(case: str, seed: int, variant: str = "family", **base):
    """The run config of ``case`` (:data:`CASES`) under monitor ``variant`` (:data:`VARIANTS`): the
    simulated recommender with the twin Delta and the null threshold; ``base`` holds
    :func:`facterlab.reporting.experiments.run_config`'s other arguments (dataset, sizes, encoder, ...).

    >>> cfg = case_config("lines-set", 0, dataset="synthetic", n_rows=300, encoder="hash-encoder")
    >>> cfg.sim.reads, cfg.sim.wording_sd, cfg.facter.placebo, cfg.facter.rule_mining
    ('text', 1.0, 'family', 'confirmed')
    """
    if variant not in VARIANTS:
        raise ValueError(f"unknown variant {variant!r}; choose one of {', '.join(VARIANTS)}")
    placebo, mining, compliance = VARIANTS[variant]
    return ex.run_config(
        model="simulated",
        seed=int(seed),
        facter__delta="twin",
        facter__threshold="null",
        facter__placebo=placebo,
        facter__rule_mining=mining,
        sim__compliance=compliance,
        **{
            "facter__twin_distance": TWIN_DISTANCE,  # ``base`` may choose another (the power study compares them)
            **case_overrides(case),
            **VARIANT_SETTINGS.get(variant, {}),
            **base,
        },
    )


def _cfr_rows(result, method: str) -> np.ndarray | None:
    detail = result.record.metrics.methods[method].cfr_detail or {}
    rows = (detail.get("multi") or {}).get("row_distances")
    return None if rows is None else np.array([np.nan if x is None else float(x) for x in rows], dtype=float)


def _rules(records: pd.DataFrame) -> tuple:
    """(distinct rules over all passes, distinct rules in the last pass)."""
    last = records[records["pass"] == records["pass"].max()]
    every = {x for rr in records["rules"] for x in rr}
    return len(every), len({x for rr in last["rules"] for x in rr})


def pushed_cells(result) -> set:
    """The (attribute, value, feature) cells the run's simulated recommender pushes (its bias table; none at
    beta 0): the truth of the directional test's ``more`` verdicts."""
    from facterlab.models.simulated import load_bias_table

    sim = result.record.config.setting("sim") or {}
    if not float(sim.get("beta", 0.0)):
        return set()
    table = load_bias_table(sim.get("bias_table", "default"))
    return {(a, str(v), f) for a, vals in table.items() for v, feats in vals.items() for f in feats}


def _neutral_last(r) -> pd.DataFrame:
    neu = r.rows["neutral"]
    return neu[neu["pass"] == neu["pass"].max()]


def run_directional_numbers(result, items, alpha: float = DIRECTIONAL_ALPHA) -> dict:
    """The directional test on a run's Neutral rows (:func:`facterlab.facter.directional.run_directional`)
    as numbers: testable cells, cells with a direction, ``more`` verdicts and those that name a pushed cell."""
    from facterlab.facter import directional as dr

    t = dr.run_directional(result, items, alpha=alpha)
    hits = t[t["verdict"].isin([dr.MORE, dr.LESS])]
    more = hits[hits["verdict"] == dr.MORE]
    pushed = pushed_cells(result)
    return {
        "directional_level": t.attrs["level"],
        "directional_testable": int(t.attrs["n_testable"]),
        "directional_cells": int(len(hits)),
        "directional_more": int(len(more)),
        "directional_more_pushed": int(
            sum((a, str(v), f) in pushed for a, v, f in more[["attribute", "value", "feature"]].itertuples(index=False))
        ),
    }


def acceptance_frame(runs: Mapping, items=None) -> pd.DataFrame:
    """One row per run of ``runs`` (``(case, seed, variant) -> RunResult``): the case's truth for each
    estimand (``dependence``, ``directional``: :func:`case_truth`), Neutral's flags on the last
    pass and their largest twin distance (``max_delta``), FACTER's rules, CFR of Fair and FACTER (means of
    the per-row distances), and, where the truth has positives, positives and true positives under the
    top-1 labels (``row``, ``either``) and the list-level ones (``row_list``, ``either_list``: the
    top-10 set changed).  The labels are row-level counterfactual dependence: the push, the rules or a
    random function of the values' meaning changed the answer.  With ``items`` (the catalogue), the
    directional test's numbers on Neutral's rows too (:func:`run_directional_numbers`, family-wise level
    :data:`DIRECTIONAL_ALPHA`)."""
    out = []
    for (case, seed, variant), r in runs.items():
        truth = case_truth(case) if case in CASES else {}
        neu = r.rows["neutral"]
        neu = neu[neu["pass"] == neu["pass"].max()]
        flag = neu["viol_fixed"].to_numpy(dtype=bool)
        own = truth_labels(neu, "neighbour")
        either = truth_labels(neu, "twin")
        own_list = list_labels(neu) if own is not None else None
        either_list = list_labels(neu, twin=True) if either is not None else None
        n_rules, n_last = _rules(r.rows["facter"])
        cfr_f, cfr_x = _cfr_rows(r, "fair"), _cfr_rows(r, "facter")
        out.append(
            {
                "case": case,
                "variant": variant,
                "seed": seed,
                "biased": case in BIASED_CASES,
                "dependence": truth.get(DEPENDENCE),
                "directional": truth.get(DIRECTIONAL),
                "run_id": r.run_id,
                "n": len(neu),
                "flagged": int(flag.sum()),
                "flag_rate": float(flag.mean()) if len(flag) else math.nan,
                "q_null": float(r.record.metrics.calibration.q_null),
                "positives_row": int(own.sum()) if own is not None else 0,
                "positives_either": int(either.sum()) if either is not None else 0,
                "true_pos_row": int((flag & own).sum()) if own is not None else 0,
                "true_pos_either": int((flag & either).sum()) if either is not None else 0,
                "positives_row_list": int(own_list.sum()) if own_list is not None else 0,
                "positives_either_list": int(either_list.sum()) if either_list is not None else 0,
                "true_pos_row_list": int((flag & own_list).sum()) if own_list is not None else 0,
                "true_pos_either_list": int((flag & either_list).sum()) if either_list is not None else 0,
                "max_delta": float(np.nanmax(neu["delta"].to_numpy(dtype=float))) if len(neu) else math.nan,
                "facter_rules": n_rules,
                "facter_rules_last_pass": n_last,
                "cfr_fair": float(np.nanmean(cfr_f)) if cfr_f is not None else math.nan,
                "cfr_facter": float(np.nanmean(cfr_x)) if cfr_x is not None else math.nan,
                **(run_directional_numbers(r, items) if items is not None else {}),
            }
        )
    return pd.DataFrame(out)


def case_directional(runs: Mapping, items, case: str, variant: str = "family", alpha: float = DIRECTIONAL_ALPHA):
    """The directional test of one case on the Neutral rows of all its seeds' runs together (one Holm
    family over every cell at ``alpha``; the seeds' rows are independent): the table
    (:func:`facterlab.facter.directional.directional_table`), or None when the case has no run."""
    from facterlab.facter import directional as dr

    rows = [_neutral_last(r) for (c, _s, v), r in runs.items() if c == case and v == variant]
    if not rows:
        return None
    t = dr.directional_table(pd.concat(rows, ignore_index=True), items, alpha=alpha)
    t.attrs["runs"] = len(rows)
    return t


def directional_claims(runs: Mapping, items, variant: str = "family", alpha: float = DIRECTIONAL_ALPHA) -> list:
    """The directional claims of every case (group-level directional bias), the seeds pooled per case
    (:func:`case_directional`): on a negative case (the surface cases, ``semantic``) no (value, feature) cell
    has a direction at family-wise level ``alpha`` (the claim fails with at most that chance when the
    guarantee holds); on a biased case some cell the table pushes is found (a ``more`` verdict)."""
    from facterlab.facter import directional as dr

    out = []
    for case in dict.fromkeys(c for (c, _s, v) in runs if v == variant):
        if case not in CASES:
            continue
        t = case_directional(runs, items, case, variant, alpha)
        hits = t[t["verdict"].isin([dr.MORE, dr.LESS])]
        test = f"exact two-sided McNemar per cell, Holm over {t.attrs['n_testable']} testable cells at FWER {alpha:g}"
        measured = f"{len(hits)} of {t.attrs['n_testable']} cells with a direction ({t.attrs['runs']} runs, {t.attrs['n_rows']} rows)"
        tag = f"text testbed [{variant}] {case}"
        if not case_truth(case)[DIRECTIONAL]:
            out.append(
                Claim(
                    f"{tag} ({DIRECTIONAL}: negative): no group is declared pushed",
                    f"no cell with a direction at family-wise level {alpha:g}",
                    measured,
                    test,
                    "n/a",
                    HOLDS if len(hits) == 0 else FAILS,
                )
            )
        else:
            pushed = pushed_cells(next(r for (c, _s, v), r in runs.items() if c == case and v == variant))
            more = hits[hits["verdict"] == dr.MORE]
            good = [
                (a, str(x), f) in pushed for a, x, f in more[["attribute", "value", "feature"]].itertuples(index=False)
            ]
            out.append(
                Claim(
                    f"{tag} ({DIRECTIONAL}: positive): a pushed (value, feature) cell is found",
                    "a 'more' verdict on a cell of the bias table",
                    f"{measured}; {sum(good)} of {len(more)} 'more' verdicts name a pushed cell",
                    test,
                    "n/a",
                    HOLDS if any(good) else FAILS,
                )
            )
    return out


def cfr_pair_claim(claim: str, facter: np.ndarray, fair: np.ndarray, margin: float = CFR_MARGIN) -> Claim:
    """FACTER's CFR is not above Fair's, pair by pair (the same rows and flips): the mean of
    ``facter - fair`` over the pairs with both sides; holds when its one-sided 99% upper bound
    (t interval) is below ``margin``, fails when its one-sided 99% lower bound is above 0, else too
    small to tell.  Zero spread: the mean itself is the bound.

    >>> a = np.array([0.1, 0.2, 0.3, 0.2] * 50); cfr_pair_claim("x", a, a).verdict
    'holds'
    >>> cfr_pair_claim("x", a + 0.05 + np.resize([0.01, -0.01], 200), a).verdict
    'fails'
    """
    from scipy import stats

    x = np.asarray(facter, dtype=float) - np.asarray(fair, dtype=float)
    x = x[np.isfinite(x)]
    n = len(x)
    crit = f"mean(FACTER - Fair) per row < {margin:g} (non-inferiority)"
    if n < 2:
        return Claim(claim, crit, f"{n} pair(s)", "paired t", "n/a", TOO_SMALL)
    mean, sd = float(x.mean()), float(x.std(ddof=1))
    half = float(stats.t.ppf(LEVEL, n - 1)) * sd / math.sqrt(n)
    lo, hi = mean - half, mean + half
    verdict = HOLDS if hi < margin else (FAILS if lo > 0 else TOO_SMALL)
    return Claim(
        claim,
        crit,
        f"{n} row pairs: mean difference {mean:+.4f} (sd {sd:.4f}), one-sided 99% bounds [{lo:+.4f}, {hi:+.4f}]",
        "paired t bounds on the per-row CFR differences, one-sided 99% each way",
        f"+-{half:.4f} (half-width at this n)",
        verdict,
    )


def _facter_vs_fair(runs: Mapping, case: str, variant: str, tag: str, no_rules: bool) -> Claim | None:
    """The paired claim "FACTER's CFR is not above Fair's" over the runs of ``case`` and ``variant`` (seeds
    pooled, row by row; :func:`cfr_pair_claim`), reported as holding by construction when FACTER made no
    rule (its prompt is then Fair's); None without CFR rows."""
    fa, fx = [], []
    for (c, _seed, v), r in runs.items():
        if c == case and v == variant:
            a, b = _cfr_rows(r, "facter"), _cfr_rows(r, "fair")
            if a is not None and b is not None:
                fx.append(a)
                fa.append(b)
    if not fx:
        return None
    claim = cfr_pair_claim(f"{tag}: FACTER's CFR is not above Fair's", np.concatenate(fx), np.concatenate(fa))
    return by_construction(claim, "FACTER made no rule in any run, so its prompt is Fair's") if no_rules else claim


def acceptance_claims(frame: pd.DataFrame, runs: Mapping, alpha: float, variant: str = "family") -> list:
    """The acceptance claims (module docstring) for the runs of one ``variant``, pooled over seeds, by the
    case's truth for each estimand (:func:`case_truth`): the flag's false-flag rate where the demographics
    change nothing (the surface cases), its recall and precision where they do (the biased tables and
    ``semantic``: row-level counterfactual dependence), at most a handful of rules where no group is pushed."""
    out = []
    sel = frame[frame["variant"] == variant]
    for case, g in sel.groupby("case", sort=False):
        tag = f"text testbed [{variant}] {case}"
        biased = bool(g["biased"].iloc[0])
        truth = case_truth(case) if case in CASES else {DEPENDENCE: biased, DIRECTIONAL: biased}
        kind = "biased" if truth[DIRECTIONAL] else "depends without a direction" if truth[DEPENDENCE] else "unbiased"
        if not truth[DEPENDENCE]:
            c = rate_claim(
                f"{tag} (unbiased): Neutral's false-flag rate is at most alpha + 0.02 = {alpha + 0.02:g}",
                int(g["flagged"].sum()),
                int(g["n"].sum()),
                alpha + 0.02,
                "<=",
            )
            if "max_delta" in g.columns and bool((g["max_delta"] == 0).all()):
                c = by_construction(c, "every twin distance is 0, so Delta > Q_null cannot fire")
            out.append(c)
        if not truth[DIRECTIONAL]:
            most = int(g["facter_rules"].max())
            out.append(
                Claim(
                    f"{tag} ({kind}): FACTER makes at most {HANDFUL} rules in a run",
                    f"distinct rules per run <= {HANDFUL}",
                    f"per seed: {', '.join(str(int(x)) for x in g['facter_rules'])}",
                    "a count (every run)",
                    "n/a",
                    HOLDS if most <= HANDFUL else FAILS,
                )
            )
        if truth[DEPENDENCE]:
            for label in ("row", "either", "row_list", "either_list"):
                if f"positives_{label}" not in g.columns:
                    continue
                pos, tp = int(g[f"positives_{label}"].sum()), int(g[f"true_pos_{label}"].sum())
                words = {
                    "row": "this row's answer",
                    "either": "this row's or its twin's answer",
                    "row_list": "this row's top-10 set",
                    "either_list": "this row's or its twin's top-10 set",
                }[label]
                for what, k in (("recall", pos), ("precision", int(g["flagged"].sum()))):
                    out.append(
                        rate_claim(
                            f"{tag} ({kind}): {what} >= 0.5 ({DEPENDENCE}; label: the demographics changed {words})",
                            tp,
                            k,
                            0.5,
                            ">=",
                        )
                    )
        paired = _facter_vs_fair(
            runs, case, variant, tag, "facter_rules" in g.columns and int(g["facter_rules"].max()) == 0
        )
        if paired is not None:
            out.append(paired)
    return out


def estimands_frame(runs: Mapping, items, variant: str = "family", alpha: float = DIRECTIONAL_ALPHA) -> pd.DataFrame:
    """Both estimands side by side, one row per case (seeds pooled): the case's truth for each, the flag's
    answer to the first (Neutral's flag rate, recall and precision against the row-level dependence label,
    this row's or its twin's top-1) and the directional test's to the second (cells with a direction at
    family-wise level ``alpha`` out of the testable ones, and how many ``more`` verdicts name a pushed cell).
    """
    from facterlab.facter import directional as dr

    frame = acceptance_frame({k: r for k, r in runs.items() if k[2] == variant})
    out = []
    for case, g in frame.groupby("case", sort=False):
        t = case_directional(runs, items, case, variant, alpha)
        hits = t[t["verdict"].isin([dr.MORE, dr.LESS])].sort_values("p_adjusted", kind="stable")
        more = hits[hits["verdict"] == dr.MORE]
        pushed = pushed_cells(next(r for (c, _s, v), r in runs.items() if c == case and v == variant))
        n, fl, pos, tp = (int(g[x].sum()) for x in ("n", "flagged", "positives_either", "true_pos_either"))
        truth = case_truth(case)
        out.append(
            {
                "case": case,
                "seeds": len(g),
                f"truth: {DEPENDENCE}": truth[DEPENDENCE],
                f"truth: {DIRECTIONAL}": truth[DIRECTIONAL],
                "rows": n,
                "flag rate": fl / n if n else math.nan,
                "recall (dependence)": tp / pos if pos else math.nan,
                "precision (dependence)": tp / fl if fl else math.nan,
                "cells with a direction": len(hits),
                "testable cells": int(t.attrs["n_testable"]),
                "'more' on a pushed cell": int(
                    sum(
                        (a, str(x), f) in pushed
                        for a, x, f in more[["attribute", "value", "feature"]].itertuples(index=False)
                    )
                ),
                "strongest cell": (
                    f"{hits.iloc[0].attribute}={hits.iloc[0].value} {hits.iloc[0].verdict} {hits.iloc[0].feature}"
                    if len(hits)
                    else ""
                ),
            }
        )
    return pd.DataFrame(out)


def twin_statistic(result) -> str:
    """The twin Delta's statistic a run used (``facter.twin_distance``; "top1" for a run saved before the
    setting existed)."""
    from facterlab.config import saved_setting

    cfg = result.config.get("config", result.config) if isinstance(result.config, Mapping) else {}
    return str(saved_setting(cfg, "facter", "twin_distance") or "top1")


def power_frame(runs: Mapping) -> pd.DataFrame:
    """Recall and precision (top-1 and list-level labels) and the requests each row costs, for the runs of a sampling
    grid (``(temperature, draws, seed) -> RunResult``, placebo family; a longer key ends with those three), pooled
    over seeds per (twin statistic, temperature, draws); the twin statistic (``statistic``:
    ``facter.twin_distance``) is read from each run."""
    rows = []
    for key, r in runs.items():
        temp, draws, seed = key[-3:]
        f = acceptance_frame({("power", seed, "family"): r}).iloc[0].to_dict()
        rows.append({"statistic": twin_statistic(r), "temperature": temp, "draws": draws, "seed": seed, **f})
    df = pd.DataFrame(rows)
    if not len(df):
        return df
    labels = ("row", "either", "row_list", "either_list")
    agg = df.groupby(["statistic", "temperature", "draws"], as_index=False, sort=False)[
        ["n", "flagged", *(f"positives_{x}" for x in labels), *(f"true_pos_{x}" for x in labels)]
    ].sum()
    agg["seeds"] = df.groupby(["statistic", "temperature", "draws"], sort=False)["seed"].nunique().to_numpy()
    for x in labels:
        agg[f"recall_{x}"] = agg[f"true_pos_{x}"] / agg[f"positives_{x}"].where(agg[f"positives_{x}"] > 0)
        agg[f"precision_{x}"] = agg[f"true_pos_{x}"] / agg["flagged"].where(agg["flagged"] > 0)
    # the cost: requests per row (row and twin per test row and pass; row, twin and 3 placebos per calibration row)
    agg["requests_per_test_row"] = 2 * agg["draws"]
    agg["requests_per_calibration_row"] = 5 * agg["draws"]
    return agg


def power_configs(
    statistics: Sequence[str], temperatures: Sequence[float], draws: Sequence[int], seeds: Sequence[int], **base
) -> dict:
    """The power study's run configs (notebook 09 §7, ``--power``): case ``sampled-bias`` for each twin statistic
    (``facter.twin_distance``), sampling temperature, draws per request and seed, as
    ``(statistic, temperature, draws, seed) -> RunConfig`` (the key :func:`power_frame` reads); ``base``:
    :func:`case_config`'s other keywords (sizes, encoder, ``sim__beta``).

    >>> cfgs = power_configs(["top1", "list"], [1.0], [1, 2], [0], dataset="synthetic", n_rows=300)
    >>> list(cfgs)[:2], cfgs[("list", 1.0, 2, 0)].facter.draws
    ([('top1', 1.0, 1, 0), ('top1', 1.0, 2, 0)], 2)
    """
    return {
        (stat, float(t), int(k), int(seed)): case_config(
            "sampled-bias",
            int(seed),
            sim__temperature=float(t),
            facter__draws=int(k),
            facter__twin_distance=stat,
            **base,
        )
        for stat in statistics
        for t in temperatures
        for k in draws
        for seed in seeds
    }


#: the power target of issue 43 item 3: recall at least this at temperature 1 ...
POWER_TARGET_RECALL = 0.6
#: ... for at most this many times the requests of one draw per request
POWER_TARGET_COST = 2


def power_claims(power: pd.DataFrame, temperature: float = 1.0, label: str = "either") -> list:
    """The power target (issue 43 item 3) for each twin statistic of ``power`` (:func:`power_frame`): at
    ``temperature``, the recall against ``label`` (``"either"``: the demographics changed the row's or its twin's
    top-1; ``"either_list"``: ... top-10 set) of the cheapest design that costs at most
    :data:`POWER_TARGET_COST` times the requests of k = 1 is at least :data:`POWER_TARGET_RECALL` (a one-sided
    99% Clopper-Pearson test, :func:`facterlab.reporting.claims.rate_claim`).  A statistic whose runs at that
    temperature include no such design gives no claim."""
    out = []
    sel = power[np.isclose(power["temperature"].astype(float), float(temperature))]
    for stat, g in sel.groupby("statistic", sort=False):
        ok = g[g["draws"] <= POWER_TARGET_COST]  # requests per row are proportional to the draws
        if not len(ok):
            continue
        best = ok.sort_values("draws").iloc[-1]  # the most draws within the budget
        out.append(
            rate_claim(
                f"power per request [{stat}]: recall >= {POWER_TARGET_RECALL:g} at temperature {temperature:g} with "
                f"k = {int(best['draws'])} (at most {POWER_TARGET_COST}x the requests of k = 1; label: {label})",
                int(best[f"true_pos_{label}"]),
                int(best[f"positives_{label}"]),
                POWER_TARGET_RECALL,
                ">=",
            )
        )
    return out


def plan(
    cases: Sequence[str] = CASES, seeds: Sequence[int] = (0, 1, 2), variants: Sequence[str] = tuple(VARIANTS)
) -> list:
    """The runs of notebook 09 §7 as ``(case, seed, variant)`` keys: every case under ``family`` at every
    seed; at the first seed, the two biased tables under ``absolute`` and ``lines-set`` and
    ``narrow-table`` under ``count`` and ``order`` (each only if in ``variants``).

    >>> len(plan(CASES, (0, 1, 2))), plan(("lines-set",), (0,))
    (36, [('lines-set', 0, 'family'), ('lines-set', 0, 'count'), ('lines-set', 0, 'order')])
    """
    seeds = list(seeds)
    keys = [(c, s, "family") for c in cases for s in seeds] if "family" in variants else []
    if "absolute" in variants:
        keys += [(c, seeds[0], "absolute") for c in ("default-table", "narrow-table") if c in cases]
    keys += [
        (c, seeds[0], v)
        for c in ("lines-set", "narrow-table")
        if c in cases
        for v in ("count", "order")
        if v in variants
    ]
    return keys


class LowercaseLineReader:
    """A stand-in model that defeats a case-changing rewording (issue 43 item 5): it reads only the
    demographic lines labelled ``labels`` (default: the occupation), lower-cased, and hands the request
    on to ``inner`` (the lines-set text reader at beta = 0: a fresh answer for every new set of line
    texts) with the other demographic lines dropped.  It has no preference for any group, so every
    flag on it is false; a reword placebo that only changes a value's letter case leaves its answer
    unchanged (placebo distance 0), so the reword placebo alone flags it far above alpha, and a real
    rewording (a synonym) keeps it at alpha: the positive control of
    :data:`facterlab.data.wording.OCCUPATION_SYNONYMS`.

    >>> from facterlab.datatypes import PromptRequest
    >>> r = PromptRequest(messages=(("user", "User demographics:\\n- Gender: F\\n- Occupation: Writer\\n\\nHistory"),))
    >>> LowercaseLineReader(None).rewrite(r).messages[0][1]
    'User demographics:\\n- Occupation: writer\\n\\nHistory'
    """

    takes_system_prompt = True

    def __init__(self, inner, labels: Sequence[str] = ("occupation",)):
        self.inner = inner
        self.labels = tuple(str(x).lower() for x in labels)
        self.fingerprint = f"{getattr(inner, 'fingerprint', 'none')}|lowercase-lines:{','.join(self.labels)}"

    def rewrite(self, req):
        import dataclasses
        import re

        def edit(m) -> str:
            keep = []
            for line in m.group(2).rstrip("\n").split("\n"):
                label, sep, value = line[2:].partition(":")
                if sep and label.strip().lower() in self.labels:
                    keep.append(f"- {label.strip()}: {value.strip().lower()}")
            tail = "\n" if m.group(2).endswith("\n") else ""
            return m.group(1) + "\n".join(keep) + tail

        block = re.compile(r"(User demographics:\n)((?:- [^\n]*\n?)+)")
        msgs = tuple((r, block.sub(edit, c, count=1) if r == "user" else c) for r, c in req.messages)
        return dataclasses.replace(req, messages=msgs)

    def plan_batches(self, requests):
        return None

    def predict(self, requests):
        return self.inner.predict([self.rewrite(r) for r in requests])


def case_flip_wordings(attribute_values: Mapping, attrs: Sequence[str] = ("occupation",)) -> dict:
    """A wording map that rewords each value of ``attrs`` by flipping its first letter's case (what the
    reword placebo did to ML-100K's occupations before :data:`facterlab.data.wording.OCCUPATION_SYNONYMS`):
    the "before" arm of the case-insensitive reader's control.

    >>> case_flip_wordings({"occupation": ["writer", "K-12 student"]})
    {'occupation': {'writer': 'Writer', 'K-12 student': 'k-12 student'}}
    """
    return {a: {str(v): str(v)[:1].swapcase() + str(v)[1:] for v in attribute_values[a]} for a in attrs}


def case_insensitive_run(seed: int, before: bool = False, out_dir=None, data_dir=None, **base):
    """One run of :class:`LowercaseLineReader` (over the lines-set reader at beta = 0) with the reword
    placebo alone and the null threshold: Neutral's flag rate is its false-flag rate.  ``before``: the
    occupations reworded by a case flip (:func:`case_flip_wordings`), as before the synonyms.  ``base``:
    :func:`facterlab.reporting.experiments.run_config`'s other arguments (dataset, n_rows, encoder ...)."""
    import dataclasses

    from facterlab.data.loading import load_dataset
    from facterlab.data.protocol import build_interactions
    from facterlab.facter.pipeline import run_experiment
    from facterlab.models.simulated import simulated_from_config

    base = {"passes": 1, **base}
    cfg = case_config("lines-set", seed, "reword", **base)
    ds = load_dataset(cfg.data.dataset, data_dir)
    if before:
        ds = dataclasses.replace(ds, wordings={**ds.wordings, **case_flip_wordings(ds.attribute_values)})
    rec = LowercaseLineReader(simulated_from_config(cfg, build_interactions(ds, cfg.data)))
    return run_experiment(cfg, recommender=rec, dataset=ds, out_dir=out_dir, progress=False)


# ---------------------------------------------------------------- attribution (issue 43 item 2)
def attribution_plan(
    seeds: Sequence[int] = (0, 1, 2),
    variants: Sequence[str] = ATTRIBUTION_VARIANTS,
    unbiased: Sequence[str] = UNBIASED_CASES,
) -> list:
    """The runs of the attribution acceptance as ``(case, seed, variant)`` keys: every case of
    :data:`ATTRIBUTION_CASES` and ``unbiased`` at every seed, under each variant (``"family"``: the
    all-attributes twin alone; ``"attributed"``: per-attribute twins, ``facter.attribution =
    "per-attribute"``).

    >>> len(attribution_plan((0, 1, 2))), attribution_plan((5,), ("attributed",), ())
    (108, [('default-table', 5, 'attributed'), ('students-comedy', 5, 'attributed'), ('narrow-table', 5, 'attributed')])
    """
    cases = (*ATTRIBUTION_CASES, *unbiased)
    return [(c, int(s), v) for v in variants for c in cases for s in seeds]


def rule_cells(records: pd.DataFrame) -> set:
    """The distinct feature rules FACTER showed in a run (any pass), as ``(attr, value, feature)`` cells.

    >>> rule_cells(pd.DataFrame({"rules": [["AVOID: (gender=F) -> (Comedy-only)"], []]}))
    {('gender', 'F', 'Comedy')}
    """
    from facterlab.models.fake import parse_avoid_rules

    out: set = set()
    for rr in records["rules"]:
        for text in rr:
            for attr, value, target, kind in parse_avoid_rules("- " + str(text)):
                if kind == "feature":
                    out.add((attr, value, target))
    return out


def true_cells(table: Mapping, attribute_values: Mapping | None = None) -> set:
    """The (attribute, value, feature) cells a bias table pushes, limited to the values of
    ``attribute_values`` (the values the run's users have; None: all).

    >>> sorted(true_cells({"occupation": {"student": ("Comedy",), "K-12 student": ("Comedy",)}}, {"occupation": ["student"]}))
    [('occupation', 'student', 'Comedy')]
    """
    out: set = set()
    for attr, by_value in table.items():
        seen = None if attribute_values is None else {str(v) for v in attribute_values.get(attr, ())}
        for value, feats in by_value.items():
            if seen is not None and str(value) not in seen:
                continue
            out.update((str(attr), str(value), str(f)) for f in feats)
    return out


def attribution_frame(runs: Mapping) -> pd.DataFrame:
    """One row per run of ``runs`` (``(case, seed, variant) -> RunResult``): FACTER's distinct confirmed
    rules, how many name a true cell of the run's bias table (``true_rules``; none on a beta-0 case), the
    true cells its users could carry (``true_cells``) and how many a rule found (``found``), the CFR of Fair
    and FACTER, and FACTER's requests (rows and twins over all passes; ``facter_requests``), of which the
    per-attribute twins' (``attr_twin_requests``)."""
    from facterlab.models.simulated_tables import load_bias_table

    out = []
    for (case, seed, variant), r in runs.items():
        fx = r.rows["facter"]
        cells = rule_cells(fx)
        beta = float(r.record.config.setting("sim.beta") or 0.0)
        table = load_bias_table(r.record.config.setting("sim.bias_table")) if beta > 0 else {}
        values = {a: sorted({str(v) for v in fx[a]}) for a in table if a in fx}
        truth = true_cells(table, values)
        draws = int(r.record.config.setting("facter.draws") or 1)
        attr_twins = int(fx["attr_twins"].sum()) if "attr_twins" in fx else 0
        # FACTER's requests: each row (all passes) and its twins, per-attribute twins included
        requests = len(fx) * draws + int(r.record.metrics.methods["facter"].n_twin_predictions or 0)
        cfr_f, cfr_x = _cfr_rows(r, "fair"), _cfr_rows(r, "facter")
        out.append(
            {
                "case": case,
                "variant": variant,
                "seed": seed,
                "run_id": r.run_id,
                "rules": len(cells),
                "true_rules": len(cells & truth),
                "wrong_rules": sorted(f"{a}={v} -> {f}" for a, v, f in cells - truth) if truth else [],
                "true_cells": len(truth),
                "found": len(cells & truth),
                "attr_twin_requests": attr_twins,
                "facter_requests": requests,
                "cfr_fair": float(np.nanmean(cfr_f)) if cfr_f is not None else math.nan,
                "cfr_facter": float(np.nanmean(cfr_x)) if cfr_x is not None else math.nan,
            }
        )
    return pd.DataFrame(out)


def attribution_claims(frame: pd.DataFrame, runs: Mapping, variant: str = "attributed") -> list:
    """The attribution acceptance (issue 43 item 2) for the runs of one ``variant``, pooled over seeds:

    - on the default table and students -> Comedy, at least :data:`TRUE_RULE_SHARE` of FACTER's
      confirmed rules name a true (attribute value, feature) cell (a count; the 99% Clopper-Pearson
      interval is shown beside it);
    - on the narrow table, at least :data:`NARROW_FOUND_SHARE` of its true (seed, cell)s are found;
    - on every biased case, FACTER's CFR is not above Fair's, pair by pair (:func:`cfr_pair_claim`;
      "by construction" when no rule was made);
    - on every unbiased case, at most :data:`HANDFUL` rules in a run."""
    from facterlab.reporting.claims import clopper_pearson

    out = []
    sel = frame[frame["variant"] == variant]
    for case, g in sel.groupby("case", sort=False):
        tag = f"attribution [{variant}] {case}"
        seeds = ", ".join(str(int(s)) for s in g["seed"])
        if case in ("default-table", "students-comedy"):
            k, n = int(g["true_rules"].sum()), int(g["rules"].sum())
            lo, hi = clopper_pearson(k, n) if n else (math.nan, math.nan)
            out.append(
                Claim(
                    f"{tag}: at least {TRUE_RULE_SHARE:.0%} of the confirmed rules name a true (value, feature) cell",
                    f"true rules / rules >= {TRUE_RULE_SHARE:g} (pooled over seeds {seeds})",
                    f"{k}/{n} = {k / n:.3f} (99% CI [{lo:.3f}, {hi:.3f}])" if n else "no rule made",
                    "a count over the runs' distinct rules",
                    "n/a",
                    (HOLDS if k >= TRUE_RULE_SHARE * n else FAILS) if n else TOO_SMALL,
                )
            )
        elif case == "narrow-table":
            k, n = int(g["found"].sum()), int(g["true_cells"].sum())
            out.append(
                Claim(
                    f"{tag}: at least {NARROW_FOUND_SHARE:.0%} of the true (seed, cell)s are found by a confirmed rule",
                    f"found / true cells >= {NARROW_FOUND_SHARE:g} (pooled over seeds {seeds})",
                    f"{k}/{n}" + (f" = {k / n:.3f}" if n else ""),
                    "a count",
                    "n/a",
                    (HOLDS if k >= NARROW_FOUND_SHARE * n else FAILS) if n else TOO_SMALL,
                )
            )
        else:
            most = int(g["rules"].max())
            out.append(
                Claim(
                    f"{tag} (unbiased): FACTER makes at most {HANDFUL} rules in a run",
                    f"distinct rules per run <= {HANDFUL}",
                    f"per seed ({seeds}): {', '.join(str(int(x)) for x in g['rules'])}",
                    "a count (every run)",
                    "n/a",
                    HOLDS if most <= HANDFUL else FAILS,
                )
            )
        if case in ATTRIBUTION_CASES:
            paired = _facter_vs_fair(runs, case, variant, tag, int(g["rules"].max()) == 0)
            if paired is not None:
                out.append(paired)
    return out


def negative_control_config(
    model: str, n_rows: int, dataset: str = "ml-100k", seed: int | None = None, fast_decoding: bool = True
):
    """The negative control on a real LLM (docs/FACTER.md §7.2): the twin holds the row's own
    demographics reworded (``facter.twin = "reword"``), so every flag is a false flag.  The config of
    ``facterlab run --model MODEL --dataset DATASET --n-rows N --passes 1 --delta twin --threshold null
    --twin reword`` (the same run id), with the fast CPU decoding switches when ``fast_decoding``
    (``model.linear_kernel = "onednn"``, ``model.stop_at_answer``: docs/CPU_DECODING.md).

    Parameters
    ----------
    model : str
        An LLM name, local path or hub id (``facterlab models``), or ``openai:<id>`` with a server.
    n_rows : int
        Interaction rows (70% calibrate Q_null, 30% are the test rows whose flags are counted).
    dataset : str
        The dataset (``facterlab run --dataset``).
    seed : int or None
        The run and data seed (None: the preset's).
    fast_decoding : bool
        Add the two decoding switches (named, in the run's fingerprint).

    Returns
    -------
    RunConfig
        Not validated here (:func:`facterlab.facter.validation.validate_config` does it when run).

    Examples
    --------
    >>> cfg = negative_control_config("smollm2-135m", 80)
    >>> cfg.facter.twin, cfg.facter.threshold, cfg.facter.placebo, cfg.model.stop_at_answer
    ('reword', 'null', 'family', True)
    """
    import argparse
    import dataclasses

    from facterlab.facter.commands import config_from_args, register

    argv = ["run", "--model", model, "--dataset", dataset, "--n-rows", str(int(n_rows)), "--passes", "1"]
    argv += ["--delta", "twin", "--threshold", "null", "--twin", "reword"]
    if seed is not None:
        argv += ["--seed", str(int(seed))]
    parser = argparse.ArgumentParser()
    register(parser.add_subparsers(dest="command"))  # the `facterlab run` parser itself
    cfg = config_from_args(parser.parse_args(argv))
    if fast_decoding:
        cfg = dataclasses.replace(
            cfg, model=dataclasses.replace(cfg.model, linear_kernel="onednn", stop_at_answer=True)
        )
    return cfg


def negative_control_claims(result, alpha: float | None = None) -> tuple:
    """The negative control's claim and numbers for a finished run of :func:`negative_control_config`:
    Neutral's false-flag rate on the test rows is at most alpha + 0.02 (99% Clopper-Pearson), and, as
    a description (the methods share their rows, so it is not a separate test), the flag rates of Fair
    and FACTER and the twin and placebo distances.

    Parameters
    ----------
    result : RunResult
        The run (``facterlab.reporting.experiments.run``).
    alpha : float or None
        The level (None: the run's calibration alpha).

    Returns
    -------
    tuple
        ``(claim, facts)``: a :class:`~facterlab.reporting.claims.Claim` and a dict of the numbers.
    """
    cal = result.record.metrics.calibration
    alpha = float(cal.alpha) if alpha is None else float(alpha)
    facts: dict = {"run_id": result.run_id, "alpha": alpha, "q_null": float(cal.q_null)}
    for method in METHODS:
        rows = result.rows[method]
        rows = rows[rows["pass"] == rows["pass"].max()]
        flag = rows["viol_fixed"].to_numpy(dtype=bool)
        facts[f"{method}_flagged"], facts[f"{method}_n"] = int(flag.sum()), int(len(flag))
        if "delta" in rows:
            facts[f"{method}_mean_twin_distance"] = float(np.nanmean(rows["delta"].to_numpy(dtype=float)))
    llm = result.record.config.setting("model.llm")
    claim = rate_claim(
        f"negative control ({llm}, twin = the same values reworded): "
        f"Neutral's false-flag rate is at most alpha + 0.02 = {alpha + 0.02:g}",
        facts["neutral_flagged"],
        facts["neutral_n"],
        alpha + 0.02,
        "<=",
    )
    return claim, facts


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m facterlab.reporting.twin_acceptance``: run (or reuse) notebook 09 §7's testbed runs
    and print their table and claims; the same configs as the notebook, so either reuses the other's runs."""
    import argparse

    from facterlab.reporting.claims import claims_frame

    p = argparse.ArgumentParser(prog="python -m facterlab.reporting.twin_acceptance", description=main.__doc__)
    p.add_argument("--cases", nargs="+", default=list(CASES), choices=CASES)
    p.add_argument("--seeds", nargs="+", type=int, default=[0, 1, 2])
    p.add_argument("--n", type=int, default=1500, help="rows per run (notebook 09: TESTBED_N)")
    p.add_argument("--dataset", default="auto")
    p.add_argument("--encoder", default="all-MiniLM-L6-v2")
    p.add_argument("--passes", type=int, default=3)
    p.add_argument("--cfr-rows", type=int, default=200)
    p.add_argument("--data-dir", default=None)
    p.add_argument(
        "--attribution",
        action="store_true",
        help="instead: the attribution acceptance (issue 43 item 2): attribution_plan at --seeds, the all-attributes "
        "twin ('family') against per-attribute twins on flagged rows ('attributed') and on every row ('attributed-all'); "
        "--cases limits the unbiased cases, --variants the monitor variants",
    )
    p.add_argument(
        "--case-insensitive",
        action="store_true",
        help="instead: the reword placebo's positive control (issue 43 item 5): LowercaseLineReader under the reword "
        "placebo alone, occupations reworded by a case flip (before) and by their synonyms (after), at --seeds, --n rows",
    )
    p.add_argument(
        "--negative-control",
        metavar="MODEL",
        default=None,
        help="instead: the negative control on a real LLM (twin = the same values reworded, one pass, "
        "--n rows, --dataset; negative_control_config)",
    )
    p.add_argument(
        "--power",
        action="store_true",
        help="instead: the power study (issue 43 item 3): case sampled-bias at --seeds, --n rows, each twin statistic "
        "(--statistics) x temperature (--temperatures) x draws (--draws); recall, precision and the power target",
    )
    p.add_argument(
        "--statistics",
        nargs="+",
        default=list(TWIN_DISTANCES),
        choices=TWIN_DISTANCES,
        help="--power: facter.twin_distance values",
    )
    p.add_argument("--temperatures", nargs="+", type=float, default=[1.0], help="--power: sim.temperature values")
    p.add_argument("--draws", nargs="+", type=int, default=[1, 2, 4], help="--power: facter.draws values")
    p.add_argument("--beta", type=float, default=None, help="--power: sim.beta (default: the case's, 2)")
    p.add_argument(
        "--variants",
        nargs="+",
        default=None,
        help=f"the monitor variants compared: the acceptance's (default and choices {list(VARIANTS)}), or with "
        f"--attribution the attribution's (default {list(ATTRIBUTION_VARIANTS)}; any of {list(ATTRIBUTION_CHOICES)})",
    )
    p.add_argument(
        "--sim-demote",
        type=float,
        default=None,
        help="the simulated recommender's sim.demote (the score penalty of an honoured rule after it cancels the "
        "push; default the config's 1.0): 0 honours a rule by cancelling the push only, the control for over-correction",
    )
    p.add_argument(
        "--twin-distance",
        default=TWIN_DISTANCE,
        choices=TWIN_DISTANCES,
        help=f"the acceptance's twin statistic (facter.twin_distance; default {TWIN_DISTANCE!r})",
    )
    a = p.parse_args(argv)
    known = ATTRIBUTION_CHOICES if a.attribution else tuple(VARIANTS)
    if a.variants is None:
        a.variants = list(ATTRIBUTION_VARIANTS if a.attribution else VARIANTS)
    elif unknown := [v for v in a.variants if v not in known]:
        p.error(
            f"--variants: unknown {unknown}{' with --attribution' if a.attribution else ''}; choose from {list(known)}"
        )
    if a.negative_control:
        dataset = "ml-100k" if a.dataset == "auto" else a.dataset
        res = ex.run(negative_control_config(a.negative_control, a.n, dataset), data_dir=a.data_dir)
        claim, facts = negative_control_claims(res)
        for key, value in facts.items():
            print(f"{key}: {value}")
        print(claims_frame([claim])[["claim", "measured", "verdict"]].to_string(index=False))
        return 0
    base = dict(
        dataset=a.dataset,
        protocol="open",
        preset_name="repro",
        n_rows=a.n,
        passes=a.passes,
        cfr_rows=a.cfr_rows,
        encoder=a.encoder,
    )
    if a.sim_demote is not None:
        base["sim__demote"] = float(a.sim_demote)
    if a.power:
        return _power_main(a, base)
    from facterlab.data.protocol import load_or_build_interactions
    from facterlab.reporting.batch import run_many  # the sweep machinery, for the command line only

    if a.case_insensitive:
        from facterlab.reporting.claims import clopper_pearson

        for before in (True, False):
            k = n = 0
            for seed in a.seeds:
                r = case_insensitive_run(seed, before=before, data_dir=a.data_dir, **{**base, "passes": 1})
                flags = r.rows["neutral"]["viol_fixed"].to_numpy(dtype=bool)
                k, n = k + int(flags.sum()), n + len(flags)
                print(f"{'case flip' if before else 'synonyms'} seed {seed}: {int(flags.sum())}/{len(flags)} flagged")
            lo, hi = clopper_pearson(k, n)
            print(f"{'case flip' if before else 'synonyms'}: {k}/{n} = {k / n:.3f} (99% CI [{lo:.3f}, {hi:.3f}])")
        return 0
    if a.attribution:
        unbiased = [c for c in a.cases if c in UNBIASED_CASES]
        keys = attribution_plan(a.seeds, a.variants, unbiased)
        configs = {key: case_config(*key, **base, facter__twin_distance=a.twin_distance) for key in keys}
        runs = run_many(configs, data_dir=a.data_dir)
        frame = attribution_frame(runs)
        print(frame.drop(columns=["run_id"]).to_string(index=False))
        checks = [c for v in a.variants for c in attribution_claims(frame, runs, v)]
        print(claims_frame(checks)[["claim", "measured", "verdict"]].to_string(index=False))
        return 0
    configs = {
        key: case_config(*key, **base, facter__twin_distance=a.twin_distance)
        for key in plan(a.cases, a.seeds, a.variants)
    }
    if not configs:
        p.error(
            f"--variants {a.variants}: the acceptance plan (plan()) has no run of these variants at --cases {a.cases}"
        )
    runs = run_many(configs, data_dir=a.data_dir)
    # the catalogue (every testbed run shares the dataset): the directional test reads the items' features
    items = load_or_build_interactions(None, next(iter(configs.values())).data, data_dir=a.data_dir).items
    frame = acceptance_frame(runs, items)
    alpha = float(next(iter(runs.values())).record.metrics.calibration.alpha)
    print(frame.drop(columns=["run_id"]).round(4).to_string(index=False))
    checks = [c for v in a.variants for c in acceptance_claims(frame, runs, alpha, v)]
    checks += directional_claims(runs, items, "family") if "family" in a.variants else []
    print(claims_frame(checks)[["claim", "measured", "verdict"]].to_string(index=False))
    return 0


def _power_main(a, base: dict) -> int:
    """``--power``: the power study's runs (as notebook 09 §7's, at the given sizes), their table and claims."""
    from facterlab.reporting.batch import run_many
    from facterlab.reporting.claims import claims_frame

    extra: dict = {} if a.beta is None else {"sim__beta": float(a.beta)}
    configs = power_configs(a.statistics, a.temperatures, a.draws, a.seeds, **extra, **base)
    runs = run_many(configs, data_dir=a.data_dir)
    power = power_frame(runs)
    cols = ["statistic", "temperature", "draws", "seeds", "requests_per_test_row", "n", "flagged"]
    cols += [f"{w}_{x}" for w in ("recall", "precision") for x in ("row", "either", "row_list", "either_list")]
    print(power[cols].round(3).to_string(index=False))
    checks = [c for t in a.temperatures for lab in ("either", "either_list") for c in power_claims(power, t, lab)]
    print(claims_frame(checks)[["claim", "measured", "verdict"]].to_string(index=False))
    print("runs:", " ".join(r.run_id for r in runs.values()))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
