"""Exposure functions (Prost et al. 2022, §2 "Exposure"; docs/SIMPSON.md §1).

``Exp(i, u) = f(Position(i, u))`` with positions counted from 1 over the full ranked list.

- ``"log"`` (default): f(p) = 1 / log2(1 + p), so f(1) = 1 (the DCG discount).
- ``"position"``: f(p) = p, the *average position* of the paper's toy example (lower is better).

Any callable mapping an integer array of positions to floats may be passed instead of a name.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

ExposureLike = str | Callable[[np.ndarray], np.ndarray]


def log_discount(position) -> np.ndarray:
    """f(p) = 1 / log2(1 + p) (docs/SIMPSON.md §1, default exposure).

    >>> log_discount(np.array([1, 3])).round(4).tolist()
    [1.0, 0.5]

    Reference: [jarvelin2002ndcg], [singh2018exposure] (docs/references.bib).
    """
    p = np.asarray(position, dtype=float)
    if np.any(p < 1):
        raise ValueError("positions start at 1; got a position below 1")
    return 1.0 / np.log2(1.0 + p)


def average_position(position) -> np.ndarray:
    """f(p) = p: the toy example's "average position" exposure (lower is better).

    >>> average_position([1, 7]).tolist()
    [1.0, 7.0]
    """
    p = np.asarray(position, dtype=float)
    if np.any(p < 1):
        raise ValueError("positions start at 1; got a position below 1")
    return p


EXPOSURES = {"log": log_discount, "position": average_position}


def get_exposure(exposure: ExposureLike = "log") -> Callable[[np.ndarray], np.ndarray]:
    """Resolve an exposure name (``"log"`` or ``"position"``) or pass a callable through.

    >>> get_exposure("position")([2]).tolist()
    [2.0]
    >>> get_exposure("dcg")
    Traceback (most recent call last):
    ...
    ValueError: unknown exposure 'dcg'; choose one of 'log', 'position' or pass a callable
    """
    if callable(exposure):
        return exposure
    if exposure not in EXPOSURES:
        raise ValueError(f"unknown exposure {exposure!r}; choose one of 'log', 'position' or pass a callable")
    return EXPOSURES[exposure]


def exposure_name(exposure: ExposureLike) -> str:
    """A printable name for an exposure option (``"log"``, ``"position"`` or the callable's name)."""
    return exposure if isinstance(exposure, str) else getattr(exposure, "__name__", repr(exposure))


def competition(n, exposure: ExposureLike = "log") -> np.ndarray:
    """Competition C(n) = (1/n) * sum_{p=1..n} f(p): the best mean exposure n relevant items can get.

    docs/SIMPSON.md §1 (three-factor decomposition).  C(0) is NaN (no relevant item: undefined).

    >>> competition(np.array([1, 3]), "log").round(4).tolist()
    [1.0, 0.7103]
    >>> competition(np.array([4]), "position").tolist()
    [2.5]

    Reference: [prost2022simpson] (docs/references.bib).
    """
    f = get_exposure(exposure)
    n = np.asarray(n)
    if np.any(n < 0):
        raise ValueError("counts of relevant items must be >= 0")
    n_max = int(n.max()) if n.size else 0
    cums = np.concatenate([[0.0], np.cumsum(f(np.arange(1, n_max + 1)))]) if n_max else np.zeros(1)
    out = np.full(n.shape, np.nan)
    pos = n > 0
    out[pos] = cums[n[pos]] / n[pos]
    return out
