"""Ranking metrics: Recall@k, NDCG@k and the random-ranking floor (docs/FACTER.md §4, §1.2 step 5).

Definitions (binary relevance, rank r counted from 1):

- ``Recall@k = |top-k ∩ R| / |R|``
- ``DCG@k = sum_{r <= k, item_r in R} 1 / log2(r + 1)``,
  ``IDCG@k = sum_{r=1}^{min(|R|, k)} 1 / log2(r + 1)``, ``NDCG@k = DCG@k / IDCG@k``.

``R`` is the relevance set: ``{target}`` ("single") or the row's ``relevant`` list ("multi").

Conventions (the spec leaves them open; they are the same in every function of this module):

- Unmapped positions are ``-1`` or ``None`` (also ``NaN``); they occupy their rank but never match.
- A repeated item counts only at its first position; later copies never match (so NDCG <= 1 and
  Recall <= 1).  ranx does the same (a run is a dict, one score per document).
- A row whose output maps to nothing scores 0 and stays in the mean.
- An empty relevance set is an error (the metric is undefined), never a silent 0.

REPRO instead scored the *compacted* list: unmapped and repeated positions dropped before ranking,
so a hit behind two unmapped titles counts at rank 1 (MetricsConfig.ndcg_positions = "compacted";
docs/PROTOCOL.md).  :func:`compact_ranking` gives that list; fed to these functions it gives REPRO's
values.
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from itertools import chain

import numpy as np
import pandas as pd

ERR_EMPTY_RELEVANT = "relevance set is empty for row {row}: Recall@k and NDCG@k are undefined"
ERR_BAD_K = "k must be a positive integer, got {k!r}"
ERR_LENGTHS = "got {n_ranked} ranked lists but {n_relevant} relevance sets: they must be aligned"
ERR_NO_ROWS = "no rows to evaluate: the metric mean is undefined"

__all__ = [
    "compact_ranking",
    "is_unmapped",
    "recall_at_k",
    "ndcg_at_k",
    "ranking_metrics",
    "random_ranking_floor",
]


_COLLECTIONS = (list, tuple, set, frozenset, np.ndarray, pd.Series, pd.Index)


def _check_k(k) -> int:
    if isinstance(k, (bool, np.bool_)) or not isinstance(k, (int, np.integer)) or k < 1:
        raise ValueError(ERR_BAD_K.format(k=k))
    return int(k)


def is_unmapped(x) -> bool:
    """True for an unmapped position: ``None``, ``-1`` or ``NaN``.

    Parameters
    ----------
    x : object
        A mapped position: an item id, or ``None`` / ``-1`` / ``NaN`` for a title that mapped to no item.

    Returns
    -------
    bool
        True when ``x`` marks an unmapped position.

    Examples
    --------
    >>> [is_unmapped(v) for v in (None, -1, float("nan"), 0, 7, "Heat (1995)")]
    [True, True, True, False, False, False]
    """
    if x is None:
        return True
    if isinstance(x, (bool, np.bool_)):
        return False
    if isinstance(x, (int, np.integer)):
        return int(x) == -1
    if isinstance(x, (float, np.floating)):
        return bool(np.isnan(x)) or float(x) == -1.0
    return False


def compact_ranking(ranked_ids: Sequence[Hashable]) -> list:
    """The ranked list with unmapped positions and repeats dropped, order kept (REPRO's NDCG input).

    Parameters
    ----------
    ranked_ids : sequence of hashable
        Item ids, best first (``-1`` / ``None`` / ``NaN``: unmapped).

    Returns
    -------
    list
        The mapped ids in their order, each once.

    Examples
    --------
    >>> compact_ranking([-1, None, 7, 3, 7, -1, 4])
    [7, 3, 4]
    >>> round(ndcg_at_k([-1, -1, 3], [3]), 3), ndcg_at_k(compact_ranking([-1, -1, 3]), [3])
    (0.5, 1.0)
    """
    seen: set = set()
    out = []
    for x in ranked_ids:
        if is_unmapped(x) or x in seen:
            continue
        seen.add(x)
        out.append(x)
    return out


def _discounts(n: int) -> np.ndarray:
    """``1 / log2(r + 1)`` for r = 1..n."""
    return 1.0 / np.log2(np.arange(2, n + 2, dtype=np.float64))


def _relevant_set(relevant_ids, row=0) -> set:
    rel = {x for x in relevant_ids if not is_unmapped(x)}
    if not rel:
        raise ValueError(ERR_EMPTY_RELEVANT.format(row=row))
    return rel


def _hits(ranked_ids, rel: set, k: int) -> np.ndarray:
    """0/1 hit vector of length <= k: first occurrences of relevant items."""
    seen: set = set()
    out = np.zeros(min(len(ranked_ids), k), dtype=np.float64)
    for r, x in enumerate(list(ranked_ids)[:k]):
        if is_unmapped(x) or x in seen:
            continue
        seen.add(x)
        if x in rel:
            out[r] = 1.0
    return out


def recall_at_k(ranked_ids: Sequence[Hashable], relevant_ids: Sequence[Hashable], k: int = 10) -> float:
    """Recall@k of one row (docs/FACTER.md §4): ``|top-k ∩ R| / |R|``.

    ``ranked_ids`` is the output, best first (``-1``/``None`` = unmapped, never matches);
    ``relevant_ids`` is ``R`` (``[target]`` for "single", the relevance set for "multi").

    Parameters
    ----------
    ranked_ids : sequence of hashable
        The output, best first (``-1`` / ``None``: unmapped, never a hit).
    relevant_ids : sequence of hashable
        The relevance set ``R``.
    k : int, default 10
        Cut-off.

    Returns
    -------
    float
        ``|top-k ∩ R| / |R|`` in [0, 1].

    Examples
    --------
    >>> recall_at_k([5, -1, 3, 9], [3, 4], k=10)
    0.5
    >>> recall_at_k([5, -1, 3, 9], [3, 4], k=2)
    0.0
    >>> recall_at_k([], [3], k=10)
    0.0
    """
    k = _check_k(k)
    rel = _relevant_set(relevant_ids)
    return float(_hits(ranked_ids, rel, k).sum() / len(rel))


def ndcg_at_k(ranked_ids: Sequence[Hashable], relevant_ids: Sequence[Hashable], k: int = 10) -> float:
    """NDCG@k of one row with binary gain (docs/FACTER.md §4).

    ``DCG@k = sum_{r<=k, item_r in R} 1/log2(r+1)``; ``IDCG@k = sum_{r=1}^{min(|R|,k)} 1/log2(r+1)``.

    Parameters
    ----------
    ranked_ids : sequence of hashable
        The output, best first (``-1`` / ``None``: unmapped, never a hit).
    relevant_ids : sequence of hashable
        The relevance set ``R`` (binary gain).
    k : int, default 10
        Cut-off.

    Returns
    -------
    float
        ``DCG@k / IDCG@k`` in [0, 1].

    Examples
    --------
    >>> ndcg_at_k([7, 3], [3], k=10)  # hit at rank 2: 1/log2(3)
    0.6309297535714575
    >>> round(ndcg_at_k([3, 8, 4], [3, 4], k=10), 6)  # (1 + 1/2) / (1 + 1/log2(3))
    0.919721
    >>> ndcg_at_k([-1, None], [3], k=10)
    0.0

    Reference: [jarvelin2002ndcg] (docs/references.bib).
    """
    k = _check_k(k)
    rel = _relevant_set(relevant_ids)
    h = _hits(ranked_ids, rel, k)
    dcg = float(h @ _discounts(len(h))) if len(h) else 0.0
    idcg = float(_discounts(min(len(rel), k)).sum())
    return dcg / idcg


def _as_lists(ranked, relevant):
    ranked = [list(r) if r is not None else [] for r in ranked]
    relevant = [list(r) if isinstance(r, _COLLECTIONS) else [r] for r in relevant]
    if len(ranked) != len(relevant):
        raise ValueError(ERR_LENGTHS.format(n_ranked=len(ranked), n_relevant=len(relevant)))
    if not ranked:
        raise ValueError(ERR_NO_ROWS)
    return ranked, relevant


def _flatten(lists, k=None):
    """Flatten lists (first k of each) into an object array with row and column positions."""
    cut = [r[:k] if k is not None else r for r in lists]
    lens = np.fromiter((len(r) for r in cut), dtype=np.int64, count=len(cut))
    arr = np.empty(int(lens.sum()), dtype=object)
    arr[:] = list(chain.from_iterable(cut))
    rows = np.repeat(np.arange(len(cut), dtype=np.int64), lens)
    starts = np.concatenate([[0], np.cumsum(lens)[:-1]]) if len(lens) else lens
    cols = np.arange(len(arr), dtype=np.int64) - np.repeat(starts, lens)
    return arr, rows, cols


def _unmapped_mask(arr: np.ndarray) -> np.ndarray:
    """Vectorised :func:`is_unmapped` over an object array."""
    if len(arr) == 0:
        return np.zeros(0, dtype=bool)
    na = pd.isna(arr)
    kind = pd.api.types.infer_dtype(arr, skipna=True)
    if kind in ("integer", "floating", "mixed-integer-float"):
        minus = np.zeros(len(arr), dtype=bool)
        minus[~na] = arr[~na].astype(np.float64) == -1.0
    else:
        minus = np.fromiter((is_unmapped(x) for x in arr), dtype=bool, count=len(arr))
    return na | minus


def _codes(ranked, relevant, k):
    """Integer-code the ids: returns (codes (n, k) with -1 for unmapped/padding, rel codes, rel row)."""
    n = len(ranked)
    r_arr, r_row, r_col = _flatten(ranked, k)
    keep = ~_unmapped_mask(r_arr)
    r_arr, r_row, r_col = r_arr[keep], r_row[keep], r_col[keep]
    g_arr, g_row, _ = _flatten(relevant)
    keep = ~_unmapped_mask(g_arr)
    g_arr, g_row = g_arr[keep], g_row[keep]
    counts = np.bincount(g_row, minlength=n)
    if (counts == 0).any():
        raise ValueError(ERR_EMPTY_RELEVANT.format(row=int(np.argmax(counts == 0))))
    both = np.concatenate([r_arr, g_arr])
    if pd.api.types.infer_dtype(both, skipna=False) == "integer":
        both = both.astype(np.int64)
    codes_all, uniques = pd.factorize(both)
    n_unique = max(len(uniques), 1)
    mat = np.full((n, k), -1, dtype=np.int64)
    mat[r_row, r_col] = codes_all[: len(r_arr)]
    return mat, codes_all[len(r_arr) :].astype(np.int64), g_row, n_unique


def ranking_metrics(ranked: Sequence[Sequence[Hashable]], relevant: Sequence[Sequence[Hashable]], k: int = 10) -> dict:
    """Vectorised Recall@k and NDCG@k over rows (docs/FACTER.md §4).

    Same formulas as :func:`recall_at_k` and :func:`ndcg_at_k`, computed for all rows at once.
    ``ranked[i]`` is row i's output (item ids, best first; ``-1``/``None`` unmapped, may be shorter
    than k or empty); ``relevant[i]`` is its relevance set (a scalar is read as ``[scalar]``).

    Returns ``{"ndcg": (n,) array, "recall": (n,) array, "ndcg_mean": float, "recall_mean": float,
    "n_rows": n, "n_empty_rows": rows with no mapped position in the top k, "k": k}``.

    Parameters
    ----------
    ranked : sequence of sequences of hashable
        One output per row, best first.
    relevant : sequence of sequences of hashable
        One relevance set per row (a scalar is read as a one-item set).
    k : int, default 10
        Cut-off.

    Returns
    -------
    dict
        Per-row arrays ``ndcg`` and ``recall``, their means, ``n_rows``, ``n_empty_rows`` and ``k``
        (above).

    Examples
    --------
    >>> m = ranking_metrics([[3, 8, 4], [-1, -1], [9, 1]], [[3, 4], [2], 1], k=10)
    >>> m["recall"].tolist(), m["n_empty_rows"]
    ([1.0, 0.0, 1.0], 1)
    >>> round(m["ndcg_mean"], 6)  # (0.919721 + 0 + 1/log2(3)) / 3
    0.516884

    Reference: [jarvelin2002ndcg] (docs/references.bib).
    """
    k = _check_k(k)
    ranked, relevant = _as_lists(ranked, relevant)
    n = len(ranked)
    mat, c_rel, rel_row, n_unique = _codes(ranked, relevant, k)
    # one key per (row, item): relevance lookup and first occurrence within the row (sort-based:
    # faster than hashing here); unmapped/padding positions get key -1 and are masked out
    valid = mat >= 0
    keys = np.where(valid, np.arange(n, dtype=np.int64)[:, None] * n_unique + mat, -1)
    rel_keys = np.sort(rel_row * n_unique + c_rel)
    rel_keys = rel_keys[np.concatenate([[True], rel_keys[1:] != rel_keys[:-1]])]
    n_rel = np.bincount(rel_keys // n_unique, minlength=n).astype(np.float64)
    flat = keys.ravel()
    order = np.argsort(flat, kind="stable")
    sorted_keys = flat[order]
    first = np.empty(n * k, dtype=bool)
    first[order] = np.concatenate([[True], sorted_keys[1:] != sorted_keys[:-1]])
    first = first.reshape(n, k) & valid
    pos = np.minimum(np.searchsorted(rel_keys, keys), len(rel_keys) - 1)
    hit = first & (rel_keys[pos] == keys)
    disc = _discounts(k)
    dcg = hit.astype(np.float64) @ disc
    cum = np.concatenate([[0.0], np.cumsum(disc)])
    idcg = cum[np.minimum(n_rel, k).astype(np.int64)]
    ndcg = dcg / idcg
    recall = hit.sum(axis=1) / n_rel
    return {
        "ndcg": ndcg,
        "recall": recall,
        "ndcg_mean": float(ndcg.mean()),
        "recall_mean": float(recall.mean()),
        "n_rows": n,
        "n_empty_rows": int((~valid.any(axis=1)).sum()),
        "k": k,
    }


def random_ranking_floor(
    candidates: Sequence[Sequence[Hashable]], relevant: Sequence[Sequence[Hashable]], k: int = 10
) -> dict:
    """Exact expected NDCG@k and Recall@k of a uniformly random ranking (docs/FACTER.md §1.2 step 5).

    For a row with N distinct candidates of which m are in R, a uniformly random permutation puts a
    relevant item at each rank r with probability m/N, so (by linearity of expectation)
    ``E[DCG@k] = (m/N) sum_{r=1}^{min(k,N)} 1/log2(r+1)``, ``E[NDCG@k] = E[DCG@k] / IDCG@k`` with
    ``IDCG@k`` over ``min(|R|, k)`` as in :func:`ndcg_at_k`, and
    ``E[Recall@k] = min(k, N) (m/N) / |R|``.  Computed analytically per row (no simulation).

    Returns the same keys as :func:`ranking_metrics` (per-row expectations and their means).

    Parameters
    ----------
    candidates : sequence of sequences of hashable
        Each row's candidate items (duplicates counted once).
    relevant : sequence of sequences of hashable
        Each row's relevance set.
    k : int, default 10
        Cut-off.

    Returns
    -------
    dict
        The keys of :func:`ranking_metrics`, holding exact expectations under a uniformly random order.

    Examples
    --------
    >>> f = random_ranking_floor([[1, 2, 3, 4]], [[1]], k=2)
    >>> f["recall"].tolist()  # two of four positions: P(hit) = 1/2
    [0.5]
    >>> round(f["ndcg_mean"], 6)  # (1/4) (1 + 1/log2(3))
    0.407732
    """
    k = _check_k(k)
    candidates, relevant = _as_lists(candidates, relevant)
    n = len(candidates)
    ndcg = np.zeros(n)
    recall = np.zeros(n)
    cum = np.concatenate([[0.0], np.cumsum(_discounts(k))])
    n_empty = 0
    for i, (cand, rel) in enumerate(zip(candidates, relevant)):
        rel_set = _relevant_set(rel, row=i)
        cand_set = {x for x in cand if not is_unmapped(x)}
        big_n = len(cand_set)
        if big_n == 0:
            n_empty += 1
            continue
        m = len(cand_set & rel_set)
        depth = min(k, big_n)
        p = m / big_n
        ndcg[i] = p * cum[depth] / cum[min(len(rel_set), k)]
        recall[i] = depth * p / len(rel_set)
    return {
        "ndcg": ndcg,
        "recall": recall,
        "ndcg_mean": float(ndcg.mean()),
        "recall_mean": float(recall.mean()),
        "n_rows": n,
        "n_empty_rows": n_empty,
        "k": k,
    }
