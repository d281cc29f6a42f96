"""Split-conformal threshold and finite-sample corrections (FACTER Eq. 7 and Eq. 15; docs/FACTER.md §2).

Q0 = S_(k), the k-th smallest of the n calibration scores, k = ceil((1 - alpha)(n + 1)).
With exchangeable scores, P(S_test > Q0) <= alpha.  If k > n the quantile is undefined (the
smallest usable n for this alpha is ceil((1 - alpha) / alpha)).

Corrections to the fixed threshold, Q0 + C / sqrt(n) (paper Eq. 15, C unspecified), as named options:

- ``none``:        C = 0.
- ``hoeffding``:   C = sqrt(log(2 / delta) / 2) (about 1.358 for delta = 0.05), n = calibration size.
- ``repro_count``: REPRO's code: C = how many of the last M = 50 corrected violations (a FIFO of the
  protected tuples of earlier rows with S > Q0 + C/sqrt(n), carried across passes) have this row's
  tuple; n = test-set size.

>>> ct = ConformalThreshold(alpha=0.1).fit([0.5, 0.1, 0.9, 0.3, 0.7, 0.2, 0.8, 0.4, 0.6, 1.0])
>>> ct.k_index_, ct.threshold_
(10, 1.0)
>>> conformal_k(19, 0.1), min_calibration_size(0.1), min_calibration_size(0.2)
(18, 9, 4)
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Hashable, Sequence

import numpy as np

NOT_FITTED = "This ConformalThreshold instance is not fitted yet: call fit(scores) before using threshold_."

_EPS = 1e-9  # guards ceil() against float noise such as 0.9 * 10 = 9.000000000000002


def conformal_k(n: int, alpha: float) -> int:
    """k = ceil((1 - alpha)(n + 1)) (1-based rank of the conformal quantile).

    Parameters
    ----------
    n : int
        Number of calibration scores (>= 0).
    alpha : float
        Miscoverage level, in the open interval (0, 1).

    Returns
    -------
    int
        The 1-based rank k; it may exceed ``n``, in which case the quantile is undefined.

    Examples
    --------
    >>> conformal_k(1750, 0.1), conformal_k(9, 0.1), conformal_k(100, 0.2)
    (1576, 9, 81)

    Reference: [vovk2005alrw], [angelopoulos2023gentle] (docs/references.bib).
    """
    if not 0.0 < alpha < 1.0:
        raise ValueError(f"alpha must be in (0, 1), got {alpha}")
    if n < 0:
        raise ValueError(f"n must be >= 0, got {n}")
    return int(math.ceil((1.0 - alpha) * (n + 1) - _EPS))


def min_calibration_size(alpha: float) -> int:
    """Smallest n with ceil((1 - alpha)(n + 1)) <= n, i.e. n >= (1 - alpha) / alpha.

    Parameters
    ----------
    alpha : float
        Miscoverage level, in the open interval (0, 1) (not checked here; an out-of-range value
        raises ``ValueError`` from :func:`conformal_k`, or ``ZeroDivisionError`` for 0).

    Returns
    -------
    int
        The smallest calibration size (>= 1) for which the conformal quantile is defined.

    Examples
    --------
    >>> min_calibration_size(0.05)
    19

    Reference: [angelopoulos2023gentle] (docs/references.bib).
    """
    if not 0.0 < alpha < 1.0:
        raise ValueError(f"alpha must be in (0, 1), got {alpha}")
    n = max(1, int(math.ceil((1.0 - alpha) / alpha - _EPS)))
    while conformal_k(n, alpha) > n:  # pragma: no cover - float safety
        n += 1
    return n


class ConformalThreshold:
    """Split-conformal quantile, sklearn/MAPIE style: ``fit(scores)`` sets ``threshold_`` (Q0),
    ``k_index_`` (k), ``n_`` (n) and ``scores_`` (sorted).

    Parameters
    ----------
    alpha : float, default 0.10
        Miscoverage level, in the open interval (0, 1).

    Attributes
    ----------
    threshold_ : float
        Q0, the k-th smallest calibration score (set by :meth:`fit`).
    k_index_ : int
        The 1-based rank k = ceil((1 - alpha)(n + 1)).
    n_ : int
        Number of calibration scores.
    scores_ : numpy.ndarray of shape (n,)
        The calibration scores, sorted ascending (float64).

    Examples
    --------
    >>> ConformalThreshold(0.1).fit([0.3, 0.1])
    Traceback (most recent call last):
    ...
    ValueError: Too few calibration scores for alpha=0.1: n=2 gives k=ceil((1-alpha)(n+1))=3 > n, so the conformal quantile is undefined; at least n=9 scores are needed.

    Reference: [vovk2005alrw], [angelopoulos2023gentle], [fayyazi2025facter] (docs/references.bib).
    """

    def __init__(self, alpha: float = 0.10):
        if not 0.0 < alpha < 1.0:
            raise ValueError(f"alpha must be in (0, 1), got {alpha}")
        self.alpha = float(alpha)

    def fit(self, scores: Sequence[float]) -> ConformalThreshold:
        """Compute the conformal quantile Q0 of the calibration scores.

        Parameters
        ----------
        scores : sequence of float or array-like
            Calibration nonconformity scores; flattened to 1-D, all finite, at least
            ``min_calibration_size(alpha)`` of them.

        Returns
        -------
        ConformalThreshold
            ``self``, with ``threshold_``, ``k_index_``, ``n_`` and ``scores_`` set.
        """
        s = np.asarray(scores, dtype=np.float64).ravel()
        if s.size and not np.all(np.isfinite(s)):
            raise ValueError("calibration scores contain NaN or infinite values")
        n = int(s.size)
        k = conformal_k(n, self.alpha)
        if k > n:
            raise ValueError(
                f"Too few calibration scores for alpha={self.alpha:g}: n={n} gives "
                f"k=ceil((1-alpha)(n+1))={k} > n, so the conformal quantile is undefined; "
                f"at least n={min_calibration_size(self.alpha)} scores are needed."
            )
        self.scores_ = np.sort(s)
        self.n_ = n
        self.k_index_ = k
        self.threshold_ = float(self.scores_[k - 1])
        return self

    def _check(self) -> None:
        if not hasattr(self, "threshold_"):
            raise RuntimeError(NOT_FITTED)

    def exceeds(self, scores: Sequence[float]) -> np.ndarray:
        """Boolean array S > Q0.

        Parameters
        ----------
        scores : sequence of float or array-like
            Test nonconformity scores, any shape.

        Returns
        -------
        numpy.ndarray of bool
            Same shape as ``scores``; True where the score is strictly above ``threshold_``.
            Raises ``RuntimeError`` if the instance is not fitted.
        """
        self._check()
        return np.asarray(scores, dtype=np.float64) > self.threshold_

    def __repr__(self) -> str:
        fitted = f", threshold_={self.threshold_:.4f}, n_={self.n_}" if hasattr(self, "threshold_") else ""
        return f"ConformalThreshold(alpha={self.alpha:g}{fitted})"


def hoeffding_constant(delta: float = 0.05) -> float:
    """C = sqrt(log(2 / delta) / 2).

    Parameters
    ----------
    delta : float, default 0.05
        Failure probability of the Hoeffding bound, in the open interval (0, 1).

    Returns
    -------
    float
        The constant C (about 1.358 for delta = 0.05).

    Examples
    --------
    >>> round(hoeffding_constant(0.05), 4)
    1.3581

    Reference: [hoeffding1963] (docs/references.bib).
    """
    if not 0.0 < delta < 1.0:
        raise ValueError(f"delta must be in (0, 1), got {delta}")
    return math.sqrt(math.log(2.0 / delta) / 2.0)


class ReproCountCorrection:
    """REPRO's corrected threshold Q0 + C_t / sqrt(n_test), C_t = count of this row's protected tuple
    among the last ``maxlen`` corrected violations (FIFO, carried across passes).

    Parameters
    ----------
    q0 : float
        The fixed conformal threshold Q0.
    n : int
        Test-set size (> 0), the n in C / sqrt(n).
    maxlen : int, default 50
        Length M of the FIFO of earlier corrected violations.

    Attributes
    ----------
    fifo : collections.deque
        Protected-attribute keys of the last ``maxlen`` corrected violations.
    last_c : int
        The count C used by the last :meth:`threshold` call.
    last_threshold : float
        The threshold returned by the last :meth:`threshold` call (Q0 before any call).

    Examples
    --------
    >>> rc = ReproCountCorrection(q0=1.0, n=4, maxlen=50)
    >>> [rc.step(("F",), s) for s in (1.2, 1.2, 1.6, 1.2)]
    [True, False, True, False]
    >>> rc.last_threshold
    2.0

    Reference: [repro2025facter] (docs/references.bib).
    """

    def __init__(self, q0: float, n: int, maxlen: int = 50):
        if n <= 0:
            raise ValueError(f"n (test-set size) must be positive, got {n}")
        self.q0, self.n = float(q0), int(n)
        self.fifo: deque[Hashable] = deque(maxlen=int(maxlen))
        self.last_c = 0
        self.last_threshold = float(q0)

    def threshold(self, key: Hashable) -> float:
        """Q0 + C/sqrt(n) for the current FIFO state.

        Parameters
        ----------
        key : hashable
            The row's protected-attribute tuple; C is its count in the FIFO.

        Returns
        -------
        float
            The corrected threshold (also stored in ``last_threshold``; C in ``last_c``).
        """
        self.last_c = sum(1 for k in self.fifo if k == key)
        self.last_threshold = self.q0 + self.last_c / math.sqrt(self.n)
        return self.last_threshold

    def step(self, key: Hashable, score: float) -> bool:
        """Flag S > Q0 + C/sqrt(n); push ``key`` into the FIFO on a corrected violation.

        Parameters
        ----------
        key : hashable
            The row's protected-attribute tuple.
        score : float
            The row's nonconformity score S.

        Returns
        -------
        bool
            True if S is strictly above the corrected threshold (a corrected violation).
        """
        v = bool(score > self.threshold(key))
        if v:
            self.fifo.append(key)
        return v


def corrected_threshold(q0: float, correction: str, n: int, delta: float = 0.05, count: int | None = None) -> float:
    """Q0 + C / sqrt(n) for ``correction`` in ``none`` | ``hoeffding`` | ``repro_count`` (needs ``count``).

    Parameters
    ----------
    q0 : float
        The fixed conformal threshold Q0.
    correction : {"none", "hoeffding", "repro_count"}
        Which constant C to use (see the module docstring).
    n : int
        Sample size in C / sqrt(n); must be > 0 unless ``correction`` is ``"none"`` (ignored then).
    delta : float, default 0.05
        Failure probability for ``"hoeffding"``; ignored otherwise.
    count : int or None, default None
        For ``"repro_count"``: the count C of earlier violations (required); ignored otherwise.

    Returns
    -------
    float
        The corrected threshold Q0 + C / sqrt(n).

    Examples
    --------
    >>> corrected_threshold(1.0, "none", 100), round(corrected_threshold(1.0, "hoeffding", 100), 4)
    (1.0, 1.1358)
    >>> corrected_threshold(1.0, "repro_count", 100, count=3)
    1.3

    Reference: [fayyazi2025facter], [hoeffding1963], [repro2025facter] (docs/references.bib).
    """
    if correction == "none":
        return float(q0)
    if n <= 0:
        raise ValueError(f"n must be positive for the {correction} correction, got {n}")
    if correction == "hoeffding":
        return float(q0) + hoeffding_constant(delta) / math.sqrt(n)
    if correction == "repro_count":
        if count is None:
            raise ValueError("the repro_count correction needs the count of earlier violations")
        return float(q0) + count / math.sqrt(n)
    raise ValueError(f"unknown correction {correction!r}; choose one of 'none', 'hoeffding', 'repro_count'")
