"""Nonconformity scores (FACTER Eq. 4-6; FACTER.md §2).

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

from typing import Optional, Sequence

import numpy as np
import pandas as pd

from facterlab.facter.neighbours import NeighbourIndex


def top1_distance(pred_emb: np.ndarray, target_emb: np.ndarray, chunk: int = 8192) -> np.ndarray:
    """d_i = 1 - cos(p_i, t_i) row-wise; cos with a zero vector is taken as 0 (so d = 1).

    Computed in float64 over row chunks (no full-size float64 copy of the inputs).
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


def counterfactual_disparity(
    pred_emb: np.ndarray, index: NeighbourIndex, ref_pred_emb: np.ndarray, max_chunk_bytes: float = 32e6
) -> np.ndarray:
    """Delta_i = max_{j in N(i)} ||p_i - r_j||_2, 0 for rows without neighbours.

    Neighbour pairs are processed in chunks of about ``max_chunk_bytes`` of gathered vectors
    (bounded memory); within a chunk the per-row maximum is a ``maximum.reduceat`` over the
    contiguous neighbour lists.

    >>> from facterlab.facter.neighbours import NeighbourIndex
    >>> idx = NeighbourIndex(np.array([0, 2, 2]), np.array([0, 1]), np.ones(2, np.float32), 2)
    >>> p = np.array([[1.0, 0.0], [0.0, 1.0]]); r = np.array([[0.0, 1.0], [1.0, 0.0]])
    >>> np.round(counterfactual_disparity(p, idx, r), 4).tolist()
    [1.4142, 0.0]
    """
    p = np.asarray(pred_emb)
    r = np.asarray(ref_pred_emb)
    if index.n_query != len(p):
        raise ValueError(f"neighbour index has {index.n_query} query rows, predictions {len(p)}")
    if index.n_ref != len(r):
        raise ValueError(f"neighbour index has {index.n_ref} reference rows, reference predictions {len(r)}")
    out = np.zeros(len(p), dtype=np.float64)
    n_pairs = len(index.indices)
    if n_pairs == 0:
        return out
    chunk = int(max(1, max_chunk_bytes // (16 * max(1, p.shape[1]))))
    rows_all = np.repeat(np.arange(len(p)), index.counts)
    for s in range(0, n_pairs, chunk):
        rows = rows_all[s : s + chunk]
        cols = index.indices[s : s + chunk]
        dist = np.linalg.norm(p[rows].astype(np.float64) - r[cols].astype(np.float64), axis=1)
        starts = np.flatnonzero(np.r_[True, rows[1:] != rows[:-1]])
        seg_max = np.maximum.reduceat(dist, starts)
        u = rows[starts]
        out[u] = np.maximum(out[u], seg_max)  # a row split across chunks keeps its overall maximum
    return out


def nonconformity_scores(
    pred_emb: np.ndarray,
    target_emb: np.ndarray,
    index: NeighbourIndex,
    ref_pred_emb: np.ndarray,
    lam: float = 0.7,
) -> pd.DataFrame:
    """S = d + lambda * Delta (FACTER Eq. 6) -> DataFrame with columns ``S``, ``d``, ``delta``,
    ``n_neighbours``.

    >>> from facterlab.facter.neighbours import NeighbourIndex
    >>> idx = NeighbourIndex(np.array([0, 1]), np.array([0]), np.ones(1, np.float32), 1)
    >>> p = np.array([[0.6, 0.8]]); t = np.array([[1.0, 0.0]]); r = np.array([[0.0, 1.0]])
    >>> nonconformity_scores(p, t, idx, r, lam=0.5).round(4).to_dict("records")
    [{'S': 0.7162, 'd': 0.4, 'delta': 0.6325, 'n_neighbours': 1}]
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
    """

    def __init__(self, encoder, items: pd.DataFrame):
        self.encoder = encoder
        tbl = items.set_index("item_id") if "item_id" in items.columns else items
        col = "text" if "text" in tbl.columns else "title"
        self._text = {int(i): str(t) for i, t in zip(tbl.index, tbl[col])}
        self._memo: dict = {}
        self.dim: Optional[int] = getattr(encoder, "dim", None)

    def item_text(self, item_id: int) -> str:
        try:
            return self._text[int(item_id)]
        except KeyError:
            raise KeyError(f"item id {item_id} is not in the catalogue") from None

    def texts(self, texts: Sequence[str]) -> np.ndarray:
        """Embeddings of ``texts`` (memoised); "" gives the zero vector."""
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
        """Embeddings of catalogue items' texts."""
        return self.texts([self.item_text(i) for i in item_ids])

    def prediction_texts(self, mapped_ids: Sequence[int], raw_titles: Sequence[str]) -> list:
        """The text representing each prediction: item text if mapped, else the raw title."""
        return [self.item_text(m) if m is not None and int(m) >= 0 else (r or "") for m, r in zip(mapped_ids, raw_titles)]

    def predictions(self, mapped_ids: Sequence[int], raw_titles: Sequence[str]) -> np.ndarray:
        """f(yhat) for each (mapped id, raw title) pair."""
        return self.texts(self.prediction_texts(mapped_ids, raw_titles))

    def list_means(self, mapped_lists: Sequence[Sequence[int]], raw_lists: Sequence[Sequence[str]], k: int = 10) -> np.ndarray:
        """Normalised mean of f over each row's top-k outputs (zero vector for an empty list)."""
        out = []
        for ids, raws in zip(mapped_lists, raw_lists):
            ids, raws = list(ids)[:k], list(raws)[:k]
            ids = ids + [-1] * (len(raws) - len(ids))
            e = self.predictions(ids, raws) if raws else np.zeros((0, self.dim or 1), dtype=np.float32)
            v = e.sum(axis=0) if len(e) else np.zeros(self.dim or 1, dtype=np.float32)
            n = np.linalg.norm(v)
            out.append((v / n if n > 0 else v).astype(np.float32))
        return np.stack(out) if out else np.zeros((0, self.dim or 1), dtype=np.float32)
