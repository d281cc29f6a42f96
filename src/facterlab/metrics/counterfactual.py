"""Counterfactual fairness ratio CFR and attribute flips (docs/FACTER.md §4).

``CFR = mean_i || m_i - m'_i ||_2`` where ``m_i`` / ``m'_i`` are the normalised mean top-k item
embeddings (:func:`facterlab.metrics.embeddings.normalised_row_means`) of row i's output with its
original and with its flipped (counterfactual) attributes, under the same system prompt, over 200
sampled test rows.  Multi-attribute CFR flips all three attributes; single-attribute CFR flips one.

Flip strategies (named variants, ``FLIP_STRATEGIES``):

- ``distinct`` (default): uniform over the attribute's values different from the original.
- ``minimal``: the "nearest" other value, deterministic: gender swaps (the next value in the list,
  wrapping: M <-> F); age moves to the next bucket in canonical order, and the last bucket ("56+")
  moves to the previous one ("50-55") (our choice: it stays a neighbouring bucket instead of wrapping
  to "Under 18"); occupation moves to the next value in the list order, the last wrapping to the
  first.  For an attribute other than gender/age, the "next, wrapping" rule is used.
- ``repro``: uniform over all values, so it may leave the value unchanged (as REPRO did).

Random draws: for each flipped attribute in the order of ``attrs``, one vectorised draw for all rows
from the given ``numpy.random.Generator``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np
import pandas as pd

from facterlab.data.dataset import PROTECTED
from facterlab.metrics.embeddings import as_row_vectors

FLIP_STRATEGIES = ("distinct", "minimal", "repro")

ERR_STRATEGY = "strategy must be one of {choices}, got {strategy!r}"
ERR_RNG = "strategy {strategy!r} draws at random: pass rng (a numpy Generator or an int seed)"
ERR_UNKNOWN_VALUE = "column {attr!r} holds value(s) {values} not in attribute_values[{attr!r}]"
ERR_TOO_FEW = "attribute {attr!r} has {n} value(s); flipping needs at least two"
ERR_SHAPES = "original and counterfactual embeddings differ in shape: {a} vs {b}"

__all__ = ["flip_attributes", "sample_cfr_rows", "cfr", "cfr_summary", "FLIP_STRATEGIES"]


def _rng(rng) -> np.random.Generator | None:
    if rng is None or isinstance(rng, np.random.Generator):
        return rng
    if isinstance(rng, (int, np.integer)) and not isinstance(rng, bool):
        return np.random.default_rng(int(rng))
    raise ValueError("rng must be a numpy.random.Generator or an int seed")


def _minimal_codes(codes: np.ndarray, m: int, attr: str) -> np.ndarray:
    nxt = (codes + 1) % m
    if attr == "age":
        nxt = np.where(codes == m - 1, m - 2, codes + 1)
    return nxt


def flip_attributes(
    rows: pd.DataFrame,
    attribute_values: Mapping[str, Sequence[str]],
    strategy: str = "distinct",
    attrs: Sequence[str] = PROTECTED,
    rng: np.random.Generator | int | None = None,
) -> pd.DataFrame:
    """Copy of ``rows`` with the ``attrs`` columns flipped (docs/FACTER.md §4; strategies in the module doc).

    ``attribute_values[attr]`` lists every value of the attribute in canonical order
    (``Dataset.attribute_values``).  Multi-attribute CFR: ``attrs=("gender", "age", "occupation")``;
    single: ``attrs=("age",)`` (other columns untouched).  ``rng`` is required for ``distinct`` and
    ``repro``.  The input is not modified; the index is kept.

    Parameters
    ----------
    rows : pandas.DataFrame
        Rows with the protected-attribute columns.
    attribute_values : mapping of str to sequence of str
        Every value of each attribute, in canonical order.
    strategy : {"distinct", "minimal", "repro"}, default "distinct"
        How a counterfactual value is chosen (module docstring).
    attrs : sequence of str, default PROTECTED
        The columns to flip.
    rng : numpy.random.Generator or int, optional
        Required for ``distinct`` and ``repro``.

    Returns
    -------
    pandas.DataFrame
        A copy of ``rows`` with ``attrs`` flipped, same index.

    Examples
    --------
    >>> vals = {"gender": ["M", "F"], "age": ["Under 18", "18-24", "56+"], "occupation": ["a", "b", "c"]}
    >>> rows = pd.DataFrame({"gender": ["M", "F"], "age": ["18-24", "56+"], "occupation": ["c", "a"]})
    >>> flip_attributes(rows, vals, "minimal").values.tolist()
    [['F', '56+', 'a'], ['M', '18-24', 'b']]
    >>> flip_attributes(rows, vals, "distinct", attrs=("gender",), rng=0)["gender"].tolist()
    ['F', 'M']

    Reference: [fayyazi2025facter], [repro2025facter] (docs/references.bib).
    """
    if strategy not in FLIP_STRATEGIES:
        raise ValueError(ERR_STRATEGY.format(choices=FLIP_STRATEGIES, strategy=strategy))
    gen = _rng(rng)
    if gen is None and strategy != "minimal":
        raise ValueError(ERR_RNG.format(strategy=strategy))
    if isinstance(attrs, str):
        attrs = (attrs,)
    out = rows.copy()
    for attr in attrs:
        if attr not in rows.columns:
            raise ValueError(f"rows has no column {attr!r}")
        if attr not in attribute_values:
            raise ValueError(f"attribute_values has no entry for {attr!r}")
        values = [str(v) for v in attribute_values[attr]]
        m = len(values)
        if m < 2:
            raise ValueError(ERR_TOO_FEW.format(attr=attr, n=m))
        col = rows[attr].astype(str).to_numpy()
        lookup = {v: i for i, v in enumerate(values)}
        unknown = sorted({v for v in col if v not in lookup})
        if unknown:
            raise ValueError(ERR_UNKNOWN_VALUE.format(attr=attr, values=unknown[:5]))
        codes = np.array([lookup[v] for v in col], dtype=np.int64)
        if strategy == "distinct":
            assert gen is not None  # checked above: only "minimal" may run without an rng
            u = gen.integers(0, m - 1, size=len(codes))
            new = u + (u >= codes)
        elif strategy == "repro":
            assert gen is not None  # checked above: only "minimal" may run without an rng
            new = gen.integers(0, m, size=len(codes))
        else:
            new = _minimal_codes(codes, m, attr)
        flipped = pd.Series(np.asarray(values, dtype=object)[new], index=rows.index, name=attr)
        try:  # keep the column's dtype (object, string or categorical) when it can hold the values
            flipped = flipped.astype(rows[attr].dtype)
        except (TypeError, ValueError):
            pass
        out[attr] = flipped
    return out


def sample_cfr_rows(
    test_rows: pd.DataFrame, n: int = 200, rng: np.random.Generator | int | None = None
) -> pd.DataFrame:
    """Sample ``min(n, len(test_rows))`` rows without replacement for CFR (docs/FACTER.md §4: 200 rows).

    The sample is returned in the original row order (so reruns and tables read naturally); with fewer
    rows than ``n`` every row is taken (the caller reports the count).

    Parameters
    ----------
    test_rows : pandas.DataFrame
        The rows to sample from.
    n : int, default 200
        Rows wanted.
    rng : numpy.random.Generator or int, optional
        Seed or generator of the draw.

    Returns
    -------
    pandas.DataFrame
        ``min(n, len(test_rows))`` rows in their original order.

    Examples
    --------
    >>> df = pd.DataFrame({"row_id": range(10)})
    >>> s = sample_cfr_rows(df, n=3, rng=0)
    >>> len(s), s["row_id"].is_unique, s["row_id"].is_monotonic_increasing
    (3, True, True)
    >>> len(sample_cfr_rows(df, n=50, rng=0))
    10
    """
    gen = _rng(rng)
    if gen is None:
        raise ValueError("sample_cfr_rows draws at random: pass rng (a numpy Generator or an int seed)")
    if isinstance(n, bool) or not isinstance(n, (int, np.integer)) or n < 1:
        raise ValueError(f"n must be a positive integer, got {n!r}")
    take = min(int(n), len(test_rows))
    pos = np.sort(gen.choice(len(test_rows), size=take, replace=False))
    return test_rows.iloc[pos]


def _pair_distances(orig, cf, orig_mask=None, cf_mask=None) -> np.ndarray:
    a = as_row_vectors(orig, orig_mask)
    b = as_row_vectors(cf, cf_mask)
    if a.shape != b.shape:
        raise ValueError(ERR_SHAPES.format(a=a.shape, b=b.shape))
    return np.linalg.norm(a - b, axis=1)


def cfr_summary(
    orig_embeddings: np.ndarray,
    cf_embeddings: np.ndarray,
    orig_mask: np.ndarray | None = None,
    cf_mask: np.ndarray | None = None,
    rows: bool = False,
) -> dict:
    """CFR with its bookkeeping: ``{"value", "n_pairs", "n_dropped"}``, or a missing value with its reason;
    with ``rows=True`` also ``row_distances`` (each pair's distance, None for a dropped pair), so that two
    methods audited on the same rows can be compared pair by pair.

    Pairs where either side has no item embedding (NaN row mean) are dropped and counted.

    Parameters
    ----------
    orig_embeddings, cf_embeddings : numpy.ndarray
        (n, d) per-row vectors or (n, k, d) item embeddings of the original and counterfactual outputs.
    orig_mask, cf_mask : numpy.ndarray of bool, optional
        (n, k) masks of the positions that exist, for item embeddings.
    rows : bool, default False
        Add ``row_distances``.

    Returns
    -------
    dict
        ``{"value", "n_pairs", "n_dropped"}``, or a missing value with ``missing_reason`` when no pair
        is left.

    Examples
    --------
    >>> cfr_summary(np.array([[1.0, 0.0], [1.0, 0.0]]), np.array([[0.0, 1.0], [np.nan, np.nan]]))
    {'value': 1.4142135623730951, 'n_pairs': 1, 'n_dropped': 1}

    Reference: [fayyazi2025facter] (docs/references.bib).
    """
    d = _pair_distances(orig_embeddings, cf_embeddings, orig_mask, cf_mask)
    ok = ~np.isnan(d)
    per_row = {"row_distances": [None if np.isnan(x) else float(x) for x in d]} if rows else {}
    if not ok.any():
        return {
            **per_row,
            "value": None,
            "missing_reason": (
                f"cfr: none of the {len(d)} row pairs has an item embedding on both sides "
                "(every output mapped to nothing or was empty)"
            ),
            "n_pairs": 0,
            "n_dropped": int(len(d)),
        }
    return {"value": float(d[ok].mean()), "n_pairs": int(ok.sum()), "n_dropped": int((~ok).sum()), **per_row}


def cfr(
    orig_embeddings: np.ndarray,
    cf_embeddings: np.ndarray,
    orig_mask: np.ndarray | None = None,
    cf_mask: np.ndarray | None = None,
) -> float:
    """CFR (docs/FACTER.md §4): ``mean_i || m_i - m'_i ||_2`` of normalised mean top-k embeddings.

    Inputs are (n, d) per-row vectors (re-normalised) or (n, k, d) item embeddings with optional
    (n, k) masks.  Pairs with a NaN side are dropped (see :func:`cfr_summary`, which also reports the
    counts and gives a missing value instead of raising); with no valid pair this raises ValueError.

    Parameters
    ----------
    orig_embeddings, cf_embeddings : numpy.ndarray
        (n, d) per-row vectors or (n, k, d) item embeddings of the original and counterfactual outputs.
    orig_mask, cf_mask : numpy.ndarray of bool, optional
        (n, k) masks of the positions that exist, for item embeddings.

    Returns
    -------
    float
        Mean L2 distance between the paired unit-norm row means, in [0, 2].

    Examples
    --------
    >>> cfr(np.array([[1.0, 0.0], [0.0, 1.0]]), np.array([[0.0, 1.0], [0.0, 1.0]]))  # (sqrt 2 + 0) / 2
    0.7071067811865476

    Reference: [fayyazi2025facter], [kusner2017counterfactual] (docs/references.bib).
    """
    s = cfr_summary(orig_embeddings, cf_embeddings, orig_mask, cf_mask)
    if s["value"] is None:
        raise ValueError(s["missing_reason"])
    return s["value"]
