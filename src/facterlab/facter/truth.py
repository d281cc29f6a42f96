"""The flags of a run checked against a known truth (``ground_truth.detector`` in metrics.json).

A recommender that knows what its bias did (the simulated recommender, docs/SIMULATED.md) writes it as
JSON into each answer's ``raw`` text.  :func:`detector_summary` turns a method's records into the
detector numbers that any run can be checked with from outside: precision, recall, base rate, flag
rate and AUC of the method's flag against the label

- ``demographics_changed_row_or_twin`` (``delta = "twin"``): the top-1 of the row or of its twin
  differs from the demographics-blind answer (no push, no rules, no term of the values' meaning) --
  what the twin Delta can see;
- ``demographics_changed_row`` (``delta = "neighbour"``): the row's own top-1 differs from it.

The label is the truth of **row-level counterfactual dependence** ("does this user's answer depend on
their demographics?"), the estimand the flag tests (the block's ``estimand``): a recommender that
answers as a random function of the values' meaning, pushing no group (the text simulator's
``semantic`` case), is a positive of it.  Group-level directional bias is another estimand, tested by
:mod:`facterlab.facter.directional`.

The flag is the method's fixed-bar flag (``viol_fixed``: S > Q0, or Delta > Q_null with
``threshold = "null"``) in its last pass; the AUC ranks rows by the flag's statistic (S, or Delta).
Records of any other recommender (no JSON truth) give ``None``: nothing is written.
"""

from __future__ import annotations

import functools
import json
import math

import numpy as np
import pandas as pd

from facterlab.datatypes import MissingValue

__all__ = ["parse_truth", "truth_labels", "rank_auc", "detector_summary", "ESTIMAND"]

#: what the flag tests and the label is the truth of (docs/FACTER.md §7)
ESTIMAND = "row-level counterfactual dependence"


def parse_truth(raw: object) -> dict | None:
    """The simulated recommender's JSON truth of one record's ``raw`` output (docs/SIMULATED.md), or
    None when the output is not such a truth (any other model's text, however hostile).

    Parameters
    ----------
    raw : object
        A record's ``raw`` value.

    Returns
    -------
    dict or None
        The truth (``top1_changed``, ``top1_unfair``, ``topk_changed``...), or None.

    Examples
    --------
    >>> parse_truth('{"top1_changed": true, "n_changed": 2}')["n_changed"]
    2
    >>> parse_truth("Toy Story (1995)") is None, parse_truth('{"title": "x"}') is None
    (True, True)
    >>> t = parse_truth('{"top1_changed": true}'); t["top1_changed"] = False  # each call gets its own dict
    >>> parse_truth('{"top1_changed": true}')
    {'top1_changed': True}
    """
    if isinstance(raw, str):  # a notebook asks for the same answers' truth section after section: parsed once
        got = _parse_text(raw)
        return None if got is None else dict(got)  # a copy: the caller may change its dict
    return _parse(raw)


@functools.lru_cache(maxsize=1 << 17)
def _parse_text(raw: str) -> dict | None:
    """:func:`_parse` of a text, remembered (a pure function of the text: the bound changes the speed only)."""
    return _parse(raw)


def _parse(raw: object) -> dict | None:
    try:
        t = json.loads(raw)  # type: ignore[arg-type]
    except (TypeError, ValueError, RecursionError):
        return None
    return t if isinstance(t, dict) and "top1_changed" in t else None


def _unfair(raw: str) -> bool | None:
    """The demographics changed the top-1: the push or the rules (``top1_unfair``), or a random function of
    the values' meaning (``meaning_top1_changed``, the text simulator's ``meaning_sd``): row-level
    counterfactual dependence, with or without a direction."""
    t = parse_truth(raw)
    return None if t is None else bool(t.get("top1_unfair", t["top1_changed"]) or t.get("meaning_top1_changed", False))


def truth_labels(records: pd.DataFrame, delta: str = "neighbour") -> np.ndarray | None:
    """Per record: did the demographics change the row's (or, with twins, the row's or its twin's)
    top-1 item?  ``None`` when the records carry no JSON truth.

    Parameters
    ----------
    records : pandas.DataFrame
        Monitor records with a ``raw`` column (and ``twin_raw`` for the twin label).
    delta : {"neighbour", "twin"}, default "neighbour"
        With ``"twin"`` (and a ``twin_raw`` column) a row is positive when the row's or its twin's
        top-1 changed; otherwise only the row's own.

    Returns
    -------
    numpy.ndarray of bool, shape (len(records),), or None
        The labels, or None when the records are empty, lack ``raw`` or any record (or twin)
        has no parsable JSON truth.
    """
    if "raw" not in records.columns or len(records) == 0:
        return None
    own = [_unfair(r) for r in records["raw"]]
    if any(v is None for v in own):
        return None
    lab = np.asarray(own, dtype=bool)
    if delta == "twin" and "twin_raw" in records.columns:
        tw = [_unfair(r) for r in records["twin_raw"]]
        if any(v is None for v in tw):
            return None
        lab = lab | np.asarray(tw, dtype=bool)
    return lab


def rank_auc(score, label) -> float:
    """Area under the ROC curve of ``score`` for the binary ``label`` (Mann-Whitney, ties counted
    half); NaN when one class is empty.

    Parameters
    ----------
    score : array-like of float, shape (n,)
        The ranking statistic (higher = more likely positive).
    label : array-like of bool, shape (n,)
        The binary labels.

    Returns
    -------
    float
        The AUC in [0, 1], or NaN when all labels are equal.

    Examples
    --------
    >>> rank_auc([0.1, 0.4, 0.35, 0.8], [0, 0, 1, 1])
    0.75
    """
    s = np.asarray(score, dtype=np.float64)
    y = np.asarray(label, dtype=bool)
    n1, n0 = int(y.sum()), int((~y).sum())
    if n1 == 0 or n0 == 0:
        return float("nan")
    ranks = pd.Series(s).rank(method="average").to_numpy()
    return float((ranks[y].sum() - n1 * (n1 + 1) / 2.0) / (n1 * n0))


def _rate(k: int, n: int, why: str):
    return k / n if n else MissingValue(why).to_json()


def detector_summary(records: pd.DataFrame, delta: str = "neighbour", threshold: str = "conformal") -> dict | None:
    """The detector block of one method (module docstring) from its records, or None without truth.

    Parameters
    ----------
    records : pandas.DataFrame
        One method's monitor records, with ``pass``, ``raw``, ``viol_fixed``, ``S`` and ``delta``
        columns (``twin_raw`` for the twin label).
    delta : {"neighbour", "twin"}, default "neighbour"
        The run's Delta; chooses the label.
    threshold : {"conformal", "null"}, default "conformal"
        The run's threshold; ``"null"`` ranks by ``delta`` for the AUC, otherwise by ``S``.

    Returns
    -------
    dict or None
        For the last pass: ``label``, ``flag``, ``pass``, ``n``, ``positives``, ``flagged``,
        ``true_pos`` (ints), ``precision``, ``recall``, ``auc`` (floats, or a MissingValue's JSON
        form when undefined), ``base_rate`` and ``flag_rate`` (floats); None when the records are
        empty or carry no truth.

    Examples
    --------
    >>> raw = lambda c: json.dumps({"top1_changed": c, "top1_unfair": c})
    >>> rec = pd.DataFrame({"pass": [1, 1, 1, 1], "raw": [raw(True), raw(False), raw(True), raw(False)],
    ...                     "viol_fixed": [True, False, False, False], "S": [0.9, 0.1, 0.5, 0.2], "delta": 0.0})
    >>> d = detector_summary(rec)
    >>> d["precision"], d["recall"], d["base_rate"], d["flag_rate"], d["auc"]
    (1.0, 0.5, 0.5, 0.25, 1.0)
    """
    if len(records) == 0:
        return None
    last = records[records["pass"] == records["pass"].max()]
    lab = truth_labels(last, delta)
    if lab is None:
        return None
    flag = last["viol_fixed"].to_numpy(dtype=bool)
    stat = last["delta" if threshold == "null" else "S"].to_numpy(dtype=np.float64)
    n, pos, fl = len(lab), int(lab.sum()), int(flag.sum())
    tp = int((flag & lab).sum())
    auc = rank_auc(stat, lab)
    return {
        "estimand": ESTIMAND,
        "label": "demographics_changed_row_or_twin"
        if delta == "twin" and "twin_raw" in last.columns
        else "demographics_changed_row",
        "flag": "Delta > Q_null" if threshold == "null" else "S > Q0",
        "pass": int(last["pass"].max()),
        "n": n,
        "positives": pos,
        "flagged": fl,
        "true_pos": tp,
        "precision": _rate(tp, fl, "no row was flagged"),
        "recall": _rate(tp, pos, "no row was changed by the demographics"),
        "base_rate": pos / n,
        "flag_rate": fl / n,
        "auc": auc if not math.isnan(auc) else MissingValue("one class is empty: AUC undefined").to_json(),
    }
