"""What the online phase scores a test row with (docs/FACTER.md §3 step 3 and §7): S = d + lambda Delta.

- :class:`CalibrationState`: what the online phase keeps of calibration (Q0, Q_null, the calibration
  rows' contexts, protected tuples and f(yhat_j)); :func:`facterlab.facter.pipeline.calibrate` builds it.
- :class:`OnlineScorer`: Delta against the row's counterfactual neighbours among the calibration rows
  (the neighbour search done once, blocked, before the walk).
- :class:`TwinScorer`: Delta against the row's own counterfactual twin (facterlab's twin monitor);
  its rows' ``n_neighbours`` is :data:`NO_NEIGHBOUR_SEARCH`.

The :class:`~facterlab.facter.monitor.FacterMonitor` calls ``scorer.score`` once per row; these names are
re-exported by :mod:`facterlab.facter.monitor`, where they lived before issue 32.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from facterlab.config import FacterConfig
from facterlab.facter.neighbours import NeighbourIndex, counterfactual_neighbours
from facterlab.facter.scores import top1_distance
from facterlab.facter.twins import statistic_distance, top1_part


@dataclass
class CalibrationState:
    """What the online phase needs from calibration: Q0 and the calibration rows' contexts, protected
    tuples and prediction representations f(yhat_j).

    Parameters
    ----------
    q0 : float
        The conformal threshold Q0 of the calibration scores.
    context_emb : numpy.ndarray, shape (n, dim_context)
        Context embeddings of the calibration rows.
    groups : list of hashable, length n
        Protected tuple of each calibration row.
    pred_emb : numpy.ndarray, shape (n, dim)
        Representations f(yhat_j) of the calibration rows' top-1 predictions.
    alpha : float
        Miscoverage level Q0 was computed for.
    k_index : int
        1-based rank k of Q0 among the sorted calibration scores.
    n : int
        Calibration size.
    q_null : float or None, default None
        With ``threshold = "null"``: the placebo quantile plus tolerance; None otherwise.
    """

    q0: float
    context_emb: np.ndarray
    groups: list
    pred_emb: np.ndarray
    alpha: float
    k_index: int
    n: int
    q_null: float | None = None  # threshold "null": the placebo quantile + tolerance (facter/twins.py)


class OnlineScorer:
    """S for test rows against the calibration set (docs/FACTER.md §3 step 3).

    Neighbours of each test row among the calibration contexts are computed once, blocked
    (contexts do not depend on predictions); :meth:`score` then needs only f(yhat_t).

    Parameters
    ----------
    calib : CalibrationState
        The calibration state (contexts, groups and prediction representations are used).
    test_context_emb : numpy.ndarray, shape (n_test, dim_context)
        Context embeddings of the test rows, in walk order.
    test_groups : sequence of hashable, length n_test
        Protected tuple of each test row.
    target_emb : numpy.ndarray, shape (n_test, dim)
        Representations f(y_t) of the test rows' targets.
    lam : float, default ``FacterConfig.lam``
        Weight lambda of the disparity term.
    tau_rho : float, default ``FacterConfig.tau_rho``
        Cosine threshold of the neighbour search (see
        :func:`facterlab.facter.neighbours.counterfactual_neighbours`).
    tau_x : float or None, default None
        Optional L2 locality gate of the neighbour search; None disables it.
    index : NeighbourIndex, optional
        The test rows' neighbours among the calibration rows when already built with the same contexts,
        groups, ``tau_rho`` and ``tau_x`` (:func:`facterlab.facter.rescore.rescore` over a grid of lambda);
        None builds it.

    Attributes
    ----------
    index : NeighbourIndex
        Neighbours of each test row among the calibration rows.
    """

    def __init__(
        self,
        calib: CalibrationState,
        test_context_emb: np.ndarray,
        test_groups: Sequence,
        target_emb: np.ndarray,
        lam: float = FacterConfig.lam,
        tau_rho: float = FacterConfig.tau_rho,
        tau_x: float | None = None,
        index: NeighbourIndex | None = None,
    ):
        self.calib, self.lam = calib, float(lam)
        self.index: NeighbourIndex = (
            index
            if index is not None
            else counterfactual_neighbours(
                test_context_emb, list(test_groups), calib.context_emb, list(calib.groups), tau_rho=tau_rho, tau_x=tau_x
            )
        )
        self.target_emb = np.asarray(target_emb, dtype=np.float64)
        self.ref = np.asarray(calib.pred_emb, dtype=np.float64)

    def score(self, pos: int, pred_vec: np.ndarray) -> tuple:
        """(S, d, Delta, n_neighbours) for test position ``pos`` with representation ``pred_vec``.

        Parameters
        ----------
        pos : int
            0-based position of the row among the test rows.
        pred_vec : numpy.ndarray, shape (dim,)
            Representation f(yhat_t) of the row's top-1 prediction.

        Returns
        -------
        tuple of (float, float, float, int)
            S = d + lambda * Delta, d (see :func:`~facterlab.facter.scores.top1_distance`), Delta (the
            largest L2 distance to a calibration neighbour's prediction, 0.0 without neighbours) and
            the number of neighbours.
        """
        p = np.asarray(pred_vec, dtype=np.float64)[None, :]
        d = float(top1_distance(p, self.target_emb[pos : pos + 1])[0])
        nb = self.index.neighbours(pos)
        delta = float(np.linalg.norm(self.ref[nb] - p, axis=1).max()) if len(nb) else 0.0
        return d + self.lam * delta, d, delta, int(len(nb))


#: ``n_neighbours`` of a row scored with the twin Delta (no neighbour search): not a count
NO_NEIGHBOUR_SEARCH = -1


class TwinScorer:
    """S for test rows with the twin Delta (docs/FACTER.md §7): d against the row's target,
    Delta = ||f(yhat) - f(yhat_twin)|| (:func:`facterlab.facter.twins.twin_distance`); no neighbour
    search (``index`` is None).  The null-anchored threshold, when used, is ``calib.q_null``.

    Parameters
    ----------
    calib : CalibrationState
        The calibration state (its ``q0`` / ``q_null`` are read by the monitor).
    target_emb : numpy.ndarray, shape (n_test, dim)
        Representations f(y_t) of the test rows' targets, in walk order.
    lam : float, default ``FacterConfig.lam``
        Weight lambda of the disparity term.
    how : {"top1", "list"}, default "top1"
        ``facter.twin_distance``: the vectors scored are :func:`facterlab.facter.twins.answer_vectors`'
        (with ``"list"`` the top-1 half gives d, the list half Delta).
    """

    index = None

    def __init__(
        self, calib: CalibrationState, target_emb: np.ndarray, lam: float = FacterConfig.lam, how: str = "top1"
    ):
        self.calib, self.lam, self.how = calib, float(lam), str(how)
        self.target_emb = np.asarray(target_emb, dtype=np.float64)

    def score(self, pos: int, pred_vec: np.ndarray, twin_vec: np.ndarray) -> tuple:
        """(S, d, Delta, -1) for test position ``pos``.

        Parameters
        ----------
        pos : int
            0-based position of the row among the test rows.
        pred_vec : numpy.ndarray, shape (dim,)
            Representation f(yhat_t) of the row's top-1 prediction.
        twin_vec : numpy.ndarray, shape (dim,)
            Representation of the twin's top-1 prediction.

        Returns
        -------
        tuple of (float, float, float, int)
            S = d + lambda * Delta, d, Delta = ||pred_vec - twin_vec||_2 and
            :data:`NO_NEIGHBOUR_SEARCH` (-1).
        """
        p = np.asarray(pred_vec, dtype=np.float64)
        d = float(top1_distance(top1_part(p[None, :], self.how), self.target_emb[pos : pos + 1])[0])
        t = np.asarray(twin_vec, dtype=np.float64)[None, :]
        delta = float(statistic_distance(p[None, :], t, self.how)[0])
        return d + self.lam * delta, d, delta, NO_NEIGHBOUR_SEARCH
