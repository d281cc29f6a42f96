"""Counterfactual neighbours of calibration / test contexts (FACTER §3.1, docs/FACTER.md §2).

Context x_i = f(context_text(history titles)), L2-normalised.  W_ij = cos(x_i, x_j).
Row j is a *counterfactual neighbour* of row i when

    W_ij > tau_rho  and  a_j != a_i  (protected tuple (gender, age, occupation))
    [and, optionally, ||x_i - x_j||_2 <= tau_x  (locality gate, off by default)]

and, when query and reference are the same set, j != i (the diagonal of W is excluded).

The similarities are computed in row blocks so that no n x n matrix is ever held: peak extra memory
is about ``max_block_bytes`` whatever n (100,000 calibration rows fit on a laptop).  The result is a
CSR-style :class:`NeighbourIndex` (``indptr``, ``indices``, ``sims``).

>>> x = np.array([[1, 0], [0.99, 0.141], [0, 1], [1, 0]], dtype=np.float32)
>>> idx = counterfactual_neighbours(x, ["M", "F", "F", "M"], tau_rho=0.9)
>>> [idx.neighbours(i).tolist() for i in range(4)]
[[1], [0, 3], [], [1]]
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from facterlab.config import FacterConfig
from facterlab.metrics.embeddings import normalise_rows
from facterlab.progress import Progress


@dataclass
class NeighbourIndex:
    """Sparse neighbour lists: the neighbours of query i are ``indices[indptr[i]:indptr[i+1]]``
    (reference row positions, ascending) with cosine similarities ``sims`` alongside.

    Parameters
    ----------
    indptr : numpy.ndarray of int64, shape (n_query + 1,)
        Offsets into ``indices``/``sims``; ``indptr[0] == 0``, non-decreasing.
    indices : numpy.ndarray of int64, shape (n_pairs,)
        Reference row positions (0-based) of all neighbours, query by query.
    sims : numpy.ndarray of float32, shape (n_pairs,)
        Cosine similarity of each (query, neighbour) pair.
    n_ref : int
        Number of reference rows the positions refer to.
    """

    indptr: np.ndarray
    indices: np.ndarray
    sims: np.ndarray
    n_ref: int

    @property
    def n_query(self) -> int:
        """Number of query rows (``len(indptr) - 1``)."""
        return len(self.indptr) - 1

    def neighbours(self, i: int) -> np.ndarray:
        """Reference positions of the neighbours of query row ``i``.

        Parameters
        ----------
        i : int
            Query row position (0-based).

        Returns
        -------
        numpy.ndarray of int64
            The neighbours' reference row positions (a view into ``indices``; may be empty).
        """
        return self.indices[self.indptr[i] : self.indptr[i + 1]]

    @property
    def counts(self) -> np.ndarray:
        """Number of neighbours per query row.

        Returns
        -------
        numpy.ndarray of int64, shape (n_query,)
            ``np.diff(indptr)``.
        """
        return np.diff(self.indptr)


def _label_key(g):
    if isinstance(g, np.generic):
        return g.item()
    if isinstance(g, (tuple, list, np.ndarray)):
        return tuple(_label_key(x) for x in g)
    return g


def group_codes(labels: Sequence) -> np.ndarray:
    """One integer per protected-group label, equal exactly when the labels are equal: numpy scalars
    compare as their Python values and lists as tuples, so ``("M", 25)`` and ``("M", np.int64(25))`` are
    one group (their ``repr`` differs under numpy 2).  An unhashable label is compared by its ``repr``.

    Parameters
    ----------
    labels : sequence
        Group labels (strings, tuples of attribute values, ...).

    Returns
    -------
    numpy.ndarray of int64
        Codes in order of first appearance.

    Examples
    --------
    >>> group_codes([("M", 25), ("F", 25), ("M", np.int64(25)), ["F", 25]]).tolist()
    [0, 1, 0, 1]
    """
    seen: dict = {}
    out = np.empty(len(labels), dtype=np.int64)
    for i, g in enumerate(labels):
        key = _label_key(g)
        try:
            out[i] = seen.setdefault(key, len(seen))
        except TypeError:  # unhashable inside: fall back to its text
            out[i] = seen.setdefault(("repr", repr(key)), len(seen))
    return out


def _normalise(x: np.ndarray) -> np.ndarray:
    x = np.asarray(x, dtype=np.float32)
    if x.ndim != 2:
        raise ValueError(f"embeddings must be a 2-d array (n, dim), got shape {x.shape}")
    return normalise_rows(x, dtype=np.float32, zero="raise", what="context embeddings")


def counterfactual_neighbours(
    query_emb: np.ndarray,
    query_groups: Sequence,
    ref_emb: np.ndarray | None = None,
    ref_groups: Sequence | None = None,
    tau_rho: float = FacterConfig.tau_rho,
    tau_x: float | None = None,
    max_block_bytes: float = 64e6,
    progress: bool = False,
) -> NeighbourIndex:
    """Counterfactual neighbours of each query row among the reference rows (docs/FACTER.md §2).

    j is a neighbour of i iff cos(x_i, r_j) > tau_rho, g_j != g_i, (tau_x is None or
    ||x_i - r_j||_2 <= tau_x) and, when ``ref_emb is None`` (self mode: reference = query), j != i.
    Groups may be any hashable labels (tuples, strings, ints).  Embeddings are re-normalised.

    Computed in blocks of query rows sized so that each block's similarity matrix and mask stay
    under ``max_block_bytes``; the group, locality and diagonal tests run only on the pairs above
    tau_rho.

    Parameters
    ----------
    query_emb : numpy.ndarray, shape (n_query, dim)
        Context embeddings of the query rows (any float dtype; computed in float32). A zero row
        raises ``ValueError``.
    query_groups : sequence of hashable, length n_query
        Protected-group label of each query row. Labels are compared by equality, numpy scalars as
        their Python values (``25 == np.int64(25)``) and lists as tuples (:func:`group_codes`).
    ref_emb : numpy.ndarray of shape (n_ref, dim) or None, default None
        Context embeddings of the reference rows; None means self mode (reference = query, the
        diagonal excluded, ``ref_groups`` ignored).
    ref_groups : sequence of hashable or None, default None
        Protected-group label of each reference row (length n_ref); required when ``ref_emb`` is
        given.
    tau_rho : float, default ``FacterConfig.tau_rho``
        Cosine-similarity threshold in [-1, 1]; a neighbour needs a similarity strictly above it.
    tau_x : float or None, default None
        Optional L2-distance gate (>= 0) between the normalised embeddings; None disables it.
    max_block_bytes : float, default 64e6
        Memory budget in bytes for one block's similarity matrix and mask.
    progress : bool, default False
        Show a progress bar (a log line is written either way for long searches).

    Returns
    -------
    NeighbourIndex
        n_query query rows over ``n_ref`` reference rows; each row's neighbour positions are
        ascending.

    Examples
    --------
    >>> q = np.array([[1.0, 0.0]]); r = np.array([[0.95, 0.312], [1.0, 0.0], [0.0, 1.0]])
    >>> counterfactual_neighbours(q, ["a"], r, ["b", "a", "b"], tau_rho=0.9).neighbours(0).tolist()
    [0]
    >>> counterfactual_neighbours(q, ["a"], r, ["b", "b", "b"], tau_rho=0.9, tau_x=0.1).neighbours(0).tolist()
    [1]

    Reference: [fayyazi2025facter] (docs/references.bib).
    """
    if not -1.0 <= tau_rho <= 1.0:
        raise ValueError(f"tau_rho must be a cosine in [-1, 1], got {tau_rho}")
    if tau_x is not None and tau_x < 0:
        raise ValueError(f"tau_x must be a non-negative L2 distance, got {tau_x}")
    self_mode = ref_emb is None
    q = _normalise(query_emb)
    r = q if ref_emb is None else _normalise(ref_emb)
    if r.shape[1] != q.shape[1]:
        raise ValueError(f"query and reference dims differ: {q.shape[1]} vs {r.shape[1]}")
    qg_raw = list(query_groups)
    rg_raw = qg_raw if self_mode else list(ref_groups if ref_groups is not None else [])
    if len(qg_raw) != len(q) or len(rg_raw) != len(r):
        raise ValueError("one protected-group label is needed per embedding row")
    codes = group_codes(qg_raw + rg_raw)
    qg, rg = codes[: len(qg_raw)], codes[len(qg_raw) :]
    n_q, n_r = len(q), len(r)
    block = int(max(1, min(n_q, max_block_bytes // max(1, 5 * n_r))))  # w (4 B) + mask (1 B) per pair
    # L2 gate on unit vectors: ||x - y||^2 = 2 - 2 cos  ->  cos >= 1 - tau_x^2 / 2
    cos_min_x = None if tau_x is None else 1.0 - tau_x * tau_x / 2.0
    counts = np.zeros(n_q, dtype=np.int64)
    idx_parts, sim_parts = [], []
    # a bar when asked; a log line every FACTERLAB_LOG_EVERY s (rate, time left) and a summary from 1 s
    phase = Progress(
        "neighbour search", total=n_q, unit="rows", bar=progress, log=logging.getLogger(__name__), summary_after=5
    )
    for s in range(0, n_q, block):
        e = min(n_q, s + block)
        w = q[s:e] @ r.T
        flat = np.flatnonzero(w > tau_rho)  # much faster than a 2-d np.nonzero on a sparse mask
        rows, cols = np.divmod(flat, n_r)
        sims = w[rows, cols]
        del w
        keep = qg[s + rows] != rg[cols]
        if cos_min_x is not None:
            keep &= sims >= cos_min_x
        if self_mode:
            keep &= (s + rows) != cols
        rows, cols, sims = rows[keep], cols[keep], sims[keep]
        counts[s:e] = np.bincount(rows, minlength=e - s)
        idx_parts.append(cols.astype(np.int64))
        sim_parts.append(sims.astype(np.float32))
        phase.update(e - s)
    phase.close()
    indptr = np.concatenate([[0], np.cumsum(counts)]).astype(np.int64)
    indices = np.concatenate(idx_parts) if idx_parts else np.zeros(0, dtype=np.int64)
    sims = np.concatenate(sim_parts) if sim_parts else np.zeros(0, dtype=np.float32)
    return NeighbourIndex(indptr=indptr, indices=indices, sims=sims, n_ref=n_r)
