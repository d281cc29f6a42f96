"""Nonconformity scores (FACTER Eq. 4-6; docs/FACTER.md §2).

For row i with top-1 prediction yhat_i, target y_i and counterfactual neighbours N(i):

    d_i     = 1 - cos(f(yhat_i), f(y_i))
    Delta_i = max_{j in N(i)} ||f(yhat_i) - f(yhat_j)||_2      (0 when N(i) is empty)
    S_i     = d_i + lambda * Delta_i                            (lambda = 0.7)

f(yhat) is the *item representation* of a prediction (:class:`ItemRepresenter`): the embedding of
the mapped catalogue item's text ("{title} :: {genres}" for MovieLens) when the prediction maps to a
catalogue item, the embedding of the raw generated title when nothing maps, and the zero vector
when there is no prediction at all (then d = 1 and Delta = ||f(yhat_j)|| = 1: an empty answer is
scored as maximally far, never silently as 0).  The same representation is used at calibration and
online (REPRO used raw text at calibration and mapped items online).

>>> p = np.array([[1.0, 0.0], [0.0, 1.0]]); t = np.array([[1.0, 0.0], [1.0, 0.0]])
>>> top1_distance(p, t).tolist()
[0.0, 1.0]
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd

from facterlab.config import FacterConfig
from facterlab.facter.neighbours import NeighbourIndex


def top1_distance(pred_emb: np.ndarray, target_emb: np.ndarray, chunk: int = 8192) -> np.ndarray:
    """d_i = 1 - cos(p_i, t_i) row-wise; cos with a zero vector is taken as 0 (so d = 1).

    Computed in float64 over row chunks (no full-size float64 copy of the inputs).

    Parameters
    ----------
    pred_emb : numpy.ndarray, shape (n, dim)
        Representations f(yhat_i) of the top-1 predictions (zero rows allowed).
    target_emb : numpy.ndarray, shape (n, dim)
        Representations f(y_i) of the targets; same shape as ``pred_emb``.
    chunk : int, default 8192
        Rows per chunk.

    Returns
    -------
    numpy.ndarray of float64, shape (n,)
        d_i in [0, 2]; 1 where either vector is zero.

    Reference: [fayyazi2025facter] (docs/references.bib).
    """
    p = np.asarray(pred_emb)
    t = np.asarray(target_emb)
    if p.shape != t.shape:
        raise ValueError(f"prediction and target embeddings differ in shape: {p.shape} vs {t.shape}")
    out = np.empty(len(p), dtype=np.float64)
    for s in range(0, len(p), chunk):
        a = p[s : s + chunk].astype(np.float64)
        b = t[s : s + chunk].astype(np.float64)
        num = np.einsum("ij,ij->i", a, b)
        den = np.linalg.norm(a, axis=1) * np.linalg.norm(b, axis=1)
        out[s : s + chunk] = 1.0 - np.divide(num, den, out=np.zeros_like(num), where=den > 0)
    return out


#: rows with at least this many neighbours are done one at a time (their per-row call overhead is
#: amortised); the others go through the chunked pair path (benchmarks/bench_metrics.py)
DISPARITY_ROW_MIN = 24


def counterfactual_disparity(
    pred_emb: np.ndarray,
    index: NeighbourIndex,
    ref_pred_emb: np.ndarray,
    max_chunk_bytes: float = 1e6,
    row_min: int = DISPARITY_ROW_MIN,
) -> np.ndarray:
    """Delta_i = max_{j in N(i)} ||p_i - r_j||_2, 0 for rows without neighbours.

    Bit-identical to a plain per-row loop ``np.linalg.norm(p[i] - r[N(i)], axis=1).max()`` in float64
    (the same subtraction, squares and row-wise ``add.reduce``; float32 inputs are widened exactly),
    and faster than it, with memory bounded by ``max_chunk_bytes`` whatever n:

    * a row with at least ``row_min`` neighbours is done on its own, in place on one gathered
      block (no copy of p_i per pair), in slices of about ``max_chunk_bytes``;
    * the other rows' pairs go through a preallocated float64 buffer of about ``max_chunk_bytes``
      (small enough to stay in cache): gathered, subtracted, squared and summed in place, the per-row
      maximum a ``maximum.reduceat`` over the contiguous neighbour lists.

    Parameters
    ----------
    pred_emb : numpy.ndarray, shape (n_query, dim)
        Representations p_i of the query rows' predictions.
    index : NeighbourIndex
        Counterfactual neighbours of each query row among the reference rows.
    ref_pred_emb : numpy.ndarray, shape (n_ref, dim)
        Representations r_j of the reference rows' predictions (the same array as ``pred_emb``
        when the index was built in self mode).
    max_chunk_bytes : float, default 1e6
        Memory budget in bytes of one float64 work buffer.
    row_min : int, default ``DISPARITY_ROW_MIN``
        Rows with at least this many neighbours are computed one at a time.

    Returns
    -------
    numpy.ndarray of float64, shape (n_query,)
        Delta_i, the largest L2 distance to a neighbour's prediction; 0.0 for rows without
        neighbours.

    Examples
    --------
    >>> from facterlab.facter.neighbours import NeighbourIndex
    >>> idx = NeighbourIndex(np.array([0, 2, 2]), np.array([0, 1]), np.ones(2, np.float32), 2)
    >>> p = np.array([[1.0, 0.0], [0.0, 1.0]]); r = np.array([[0.0, 1.0], [1.0, 0.0]])
    >>> np.round(counterfactual_disparity(p, idx, r), 4).tolist()
    [1.4142, 0.0]

    Reference: [fayyazi2025facter] (docs/references.bib).
    """
    p = np.asarray(pred_emb)
    r = np.asarray(ref_pred_emb)
    if index.n_query != len(p):
        raise ValueError(f"neighbour index has {index.n_query} query rows, predictions {len(p)}")
    if index.n_ref != len(r):
        raise ValueError(f"neighbour index has {index.n_ref} reference rows, reference predictions {len(r)}")
    out = np.zeros(len(p), dtype=np.float64)
    if len(index.indices) == 0:
        return out
    dim = p.shape[1]
    chunk = int(max(1, max_chunk_bytes // (8 * max(1, dim))))
    counts = index.counts
    indptr, cols_all = index.indptr, np.asarray(index.indices, dtype=np.intp)
    # rows with many neighbours: one (sliced) block each, p_i broadcast
    for i in np.flatnonzero(counts >= max(1, int(row_min))):
        p_i = p[i].astype(np.float64)
        best = 0.0
        for s in range(int(indptr[i]), int(indptr[i + 1]), chunk):
            d = r[cols_all[s : min(int(indptr[i + 1]), s + chunk)]].astype(np.float64)
            np.subtract(d, p_i, out=d)
            np.multiply(d, d, out=d)
            best = max(best, float(np.sqrt(np.add.reduce(d, axis=1)).max()))
        out[i] = best
    # rows with few neighbours: their pairs in cache-sized chunks
    light = (counts > 0) & (counts < max(1, int(row_min)))
    if not light.any():
        return out
    pair_rows = np.repeat(np.arange(len(p)), counts)
    keep = light[pair_rows]
    rows_all, cols_l = pair_rows[keep], cols_all[keep]
    n_pairs = len(rows_all)
    chunk = min(chunk, n_pairs)
    a_buf = np.empty((chunk, dim), dtype=np.float64)
    b_buf = np.empty((chunk, dim), dtype=np.float64)
    sq_buf = np.empty(chunk, dtype=np.float64)
    for s in range(0, n_pairs, chunk):
        e = min(n_pairs, s + chunk)
        m = e - s
        rows = rows_all[s:e]
        a, b, sq = a_buf[:m], b_buf[:m], sq_buf[:m]
        a[...] = p[rows]  # float32 -> float64 is exact: the same values as .astype(float64)
        b[...] = r[cols_l[s:e]]
        np.subtract(a, b, out=a)
        np.multiply(a, a, out=a)
        np.add.reduce(a, axis=1, out=sq)  # what np.linalg.norm(x, axis=1) sums, before its sqrt
        np.sqrt(sq, out=sq)
        starts = np.flatnonzero(np.r_[True, rows[1:] != rows[:-1]])
        seg_max = np.maximum.reduceat(sq, starts)
        u = rows[starts]
        out[u] = np.maximum(out[u], seg_max)  # a row split across chunks keeps its overall maximum
    return out


def nonconformity_scores(
    pred_emb: np.ndarray,
    target_emb: np.ndarray,
    index: NeighbourIndex,
    ref_pred_emb: np.ndarray,
    lam: float = FacterConfig.lam,
) -> pd.DataFrame:
    """S = d + lambda * Delta (FACTER Eq. 6) -> DataFrame with columns ``S``, ``d``, ``delta``,
    ``n_neighbours``.

    Parameters
    ----------
    pred_emb : numpy.ndarray, shape (n, dim)
        Representations f(yhat_i) of the top-1 predictions.
    target_emb : numpy.ndarray, shape (n, dim)
        Representations f(y_i) of the targets.
    index : NeighbourIndex
        Counterfactual neighbours of the n rows among the reference rows.
    ref_pred_emb : numpy.ndarray, shape (n_ref, dim)
        Representations of the reference rows' predictions.
    lam : float, default ``FacterConfig.lam``
        Weight lambda (>= 0) of the disparity term.

    Returns
    -------
    pandas.DataFrame
        n rows, in input order, with columns ``S`` (float64), ``d`` (float64, see
        :func:`top1_distance`), ``delta`` (float64, see :func:`counterfactual_disparity`) and
        ``n_neighbours`` (int64).

    Examples
    --------
    >>> from facterlab.facter.neighbours import NeighbourIndex
    >>> idx = NeighbourIndex(np.array([0, 1]), np.array([0]), np.ones(1, np.float32), 1)
    >>> p = np.array([[0.6, 0.8]]); t = np.array([[1.0, 0.0]]); r = np.array([[0.0, 1.0]])
    >>> nonconformity_scores(p, t, idx, r, lam=0.5).round(4).to_dict("records")
    [{'S': 0.7162, 'd': 0.4, 'delta': 0.6325, 'n_neighbours': 1}]

    Reference: [fayyazi2025facter] (docs/references.bib).
    """
    if lam < 0:
        raise ValueError(f"lambda must be >= 0, got {lam}")
    d = top1_distance(pred_emb, target_emb)
    delta = counterfactual_disparity(pred_emb, index, ref_pred_emb)
    return pd.DataFrame({"S": d + lam * delta, "d": d, "delta": delta, "n_neighbours": index.counts.astype(np.int64)})


class ItemRepresenter:
    """f(yhat): embeddings of predictions and items, memoised per text.

    ``items`` is the catalogue (indexed by item_id or with an ``item_id`` column) with a ``text``
    column (falls back to ``title``).  :meth:`predictions` takes (mapped id, raw title) pairs:
    mapped id >= 0 -> embedding of the item's text; else the raw title's embedding; an empty raw
    title -> the zero vector.

    Parameters
    ----------
    encoder : object
        Text encoder with ``encode(list[str]) -> array (n, dim)`` and optionally a ``dim``
        attribute.
    items : pandas.DataFrame
        The catalogue, indexed by ``item_id`` or with an ``item_id`` column, with a ``text`` or
        ``title`` column.

    Attributes
    ----------
    dim : int or None
        Embedding dimension: the encoder's ``dim`` if it has one, else known after the first
        encoding.
    """

    def __init__(self, encoder, items: pd.DataFrame):
        self.encoder = encoder
        tbl = items.set_index("item_id") if "item_id" in items.columns else items
        col = "text" if "text" in tbl.columns else "title"
        self._text = {int(i): str(t) for i, t in zip(tbl.index, tbl[col])}
        self._memo: dict = {}
        self.dim: int | None = getattr(encoder, "dim", None)

    def item_text(self, item_id: int) -> str:
        """The catalogue text of one item.

        Parameters
        ----------
        item_id : int
            Catalogue item id.

        Returns
        -------
        str
            The item's ``text`` (or ``title``) value; ``KeyError`` if the id is not in the catalogue.
        """
        try:
            return self._text[int(item_id)]
        except KeyError:
            raise KeyError(f"item id {item_id} is not in the catalogue") from None

    def texts(self, texts: Sequence[str]) -> np.ndarray:
        """Embeddings of ``texts`` (memoised); "" gives the zero vector.

        Parameters
        ----------
        texts : sequence of str
            Texts to embed; duplicates are encoded once.

        Returns
        -------
        numpy.ndarray of float32, shape (len(texts), dim)
            One row per text, in order; the zero vector for an empty string.
        """
        todo = sorted({t for t in texts if t and t not in self._memo})
        if todo:
            emb = np.asarray(self.encoder.encode(todo), dtype=np.float32)
            self.dim = emb.shape[1]
            for t, e in zip(todo, emb):
                self._memo[t] = e
        if self.dim is None:
            if not texts:
                raise ValueError("cannot infer the embedding dimension from no texts")
            self.dim = np.asarray(self.encoder.encode(["x"])).shape[1]
        zero = np.zeros(self.dim, dtype=np.float32)
        if len(texts) == 0:
            return np.zeros((0, self.dim), dtype=np.float32)
        return np.stack([self._memo[t] if t else zero for t in texts])

    def items(self, item_ids: Sequence[int]) -> np.ndarray:
        """Embeddings of catalogue items' texts.

        Parameters
        ----------
        item_ids : sequence of int
            Catalogue item ids.

        Returns
        -------
        numpy.ndarray of float32, shape (len(item_ids), dim)
            One row per item, in order.
        """
        return self.texts([self.item_text(i) for i in item_ids])

    def prediction_texts(self, mapped_ids: Sequence[int], raw_titles: Sequence[str]) -> list:
        """The text representing each prediction: item text if mapped, else the raw title.

        Parameters
        ----------
        mapped_ids : sequence of int or None
            Catalogue id each prediction maps to; a negative id or None means not mapped.
        raw_titles : sequence of str or None
            The generated titles, aligned with ``mapped_ids`` (pairs beyond the shorter sequence
            are dropped).

        Returns
        -------
        list of str
            One text per pair; "" for an unmapped prediction with an empty or None title.
        """
        return [
            self.item_text(m) if m is not None and int(m) >= 0 else (r or "") for m, r in zip(mapped_ids, raw_titles)
        ]

    def predictions(self, mapped_ids: Sequence[int], raw_titles: Sequence[str]) -> np.ndarray:
        """f(yhat) for each (mapped id, raw title) pair.

        Parameters
        ----------
        mapped_ids : sequence of int or None
            Catalogue id each prediction maps to; a negative id or None means not mapped.
        raw_titles : sequence of str or None
            The generated titles, aligned with ``mapped_ids``.

        Returns
        -------
        numpy.ndarray of float32, shape (n_pairs, dim)
            One representation per pair (see :meth:`prediction_texts`); zero rows for empty answers.
        """
        return self.texts(self.prediction_texts(mapped_ids, raw_titles))
