"""Per-row "normalised mean of the top-k item embeddings", shared by SNSR and CFR (docs/FACTER.md §4).

For row i with item embeddings e_i1..e_ik (those present under the mask),
``m_i = normalise(mean_j e_ij)`` with ``normalise(v) = v / ||v||_2``.  A row with no item (empty mask)
or with a zero mean has no representation: its output row is NaN, and callers drop it and say how
many they dropped (never a silent 0 vector).
"""

from __future__ import annotations

import numpy as np

ERR_NDIM = "embeddings must be (n, d) per-row vectors or (n, k, d) per-item vectors, got shape {shape}"
ERR_MASK = "mask must have shape (n, k) = {want}, got {got}"

__all__ = ["normalise_rows", "normalised_row_means", "as_row_vectors"]


def normalise_rows(x: np.ndarray, dtype=np.float64, zero: str = "nan", what: str = "rows") -> np.ndarray:
    """L2-normalise each row (last axis) of ``x``, computed in ``dtype``.

    ``zero``: what a row of norm 0 (or NaN) becomes: ``"nan"`` (a row of NaN, the default) or
    ``"raise"`` (a ``ValueError`` naming ``what``: cosine similarity is undefined for it).

    Parameters
    ----------
    x : numpy.ndarray
        Vectors along the last axis.
    dtype : numpy dtype, default float64
        Precision of the computation and of the result.
    zero : {"nan", "raise"}, default "nan"
        What a row of norm 0 (or NaN) becomes.
    what : str, default "rows"
        Name of the rows in the error message.

    Returns
    -------
    numpy.ndarray
        ``x`` with unit-norm rows, same shape.

    Examples
    --------
    >>> normalise_rows(np.array([[3.0, 4.0], [0.0, 0.0]])).tolist()
    [[0.6, 0.8], [nan, nan]]
    >>> normalise_rows(np.zeros((1, 2)), zero="raise", what="context embeddings")
    Traceback (most recent call last):
    ...
    ValueError: context embeddings contain a zero vector (or NaN); cosine similarity is undefined
    """
    if zero not in ("nan", "raise"):
        raise ValueError(f"zero must be 'nan' or 'raise', got {zero!r}")
    x = np.asarray(x, dtype=dtype)
    norm = np.linalg.norm(x, axis=-1, keepdims=True)
    bad = ~(norm[..., 0] > 0)
    if zero == "raise" and bad.any():
        raise ValueError(f"{what} contain a zero vector (or NaN); cosine similarity is undefined")
    with np.errstate(invalid="ignore", divide="ignore"):
        out = x / norm
    out[bad] = np.nan
    return out


def normalised_row_means(item_embeddings: np.ndarray, mask: np.ndarray | None = None) -> np.ndarray:
    """``m_i = normalise(mean_{j: mask_ij} e_ij)`` for (n, k, d) item embeddings (docs/FACTER.md §4).

    ``mask`` (n, k) marks the positions that exist (default: all).  Rows without any position give NaN.

    Parameters
    ----------
    item_embeddings : numpy.ndarray
        Shape (n, k, d): the embeddings of each row's top-k items.
    mask : numpy.ndarray of bool, optional
        Shape (n, k): the positions that exist (default: all).

    Returns
    -------
    numpy.ndarray
        Shape (n, d): unit-norm mean per row, NaN for a row without any position.

    Examples
    --------
    >>> e = np.array([[[1.0, 0.0], [0.0, 1.0]], [[1.0, 0.0], [9.0, 9.0]]])
    >>> normalised_row_means(e, np.array([[True, True], [True, False]])).round(4).tolist()
    [[0.7071, 0.7071], [1.0, 0.0]]
    """
    e = np.asarray(item_embeddings, dtype=np.float64)
    if e.ndim != 3:
        raise ValueError(ERR_NDIM.format(shape=e.shape))
    if mask is None:
        mask = np.ones(e.shape[:2], dtype=bool)
    mask = np.asarray(mask, dtype=bool)
    if mask.shape != e.shape[:2]:
        raise ValueError(ERR_MASK.format(want=e.shape[:2], got=mask.shape))
    summed = np.where(mask[..., None], e, 0.0).sum(axis=1)
    count = mask.sum(axis=1)
    with np.errstate(invalid="ignore", divide="ignore"):
        mean = summed / count[:, None]
    mean[count == 0] = np.nan
    return normalise_rows(mean)


def as_row_vectors(embeddings: np.ndarray, mask: np.ndarray | None = None) -> np.ndarray:
    """Accept (n, d) per-row vectors (re-normalised) or (n, k, d) item vectors (+ mask); return (n, d).

    Parameters
    ----------
    embeddings : numpy.ndarray
        Shape (n, d) per-row vectors or (n, k, d) item vectors.
    mask : numpy.ndarray of bool, optional
        Shape (n, k), for item vectors only.

    Returns
    -------
    numpy.ndarray
        Shape (n, d), unit-norm rows (NaN for a row without items).

    Examples
    --------
    >>> as_row_vectors(np.array([[2.0, 0.0]])).tolist()
    [[1.0, 0.0]]
    >>> as_row_vectors(np.array([[[2.0, 0.0], [0.0, 2.0]]])).round(4).tolist()
    [[0.7071, 0.7071]]
    """
    e = np.asarray(embeddings, dtype=np.float64)
    if e.ndim == 2:
        if mask is not None:
            raise ValueError("a mask is only accepted with (n, k, d) item embeddings")
        return normalise_rows(e)
    if e.ndim == 3:
        return normalised_row_means(e, mask)
    raise ValueError(ERR_NDIM.format(shape=e.shape))
