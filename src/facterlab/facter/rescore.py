"""Rescore a saved run with other settings, without asking the recommender again.

:func:`rescore` recomputes FACTER's S = d + lambda Delta (neighbour Delta) for a saved run's
calibration rows and one method's test records under another lambda, tau_rho, tau_x or alpha, from the
saved top-1 items and raw titles and the run's own item representation (docs/FACTER.md §2).  The
notebooks and :mod:`facterlab.reporting.ground_truth` call it instead of rebuilding calibration by hand.
The twin Delta cannot be rescored this way (it needs the twins' answers): rerun with ``facter.delta``.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from facterlab.config import FacterConfig
from facterlab.data.dataset import PROTECTED
from facterlab.facter import prompts
from facterlab.facter.conformal import ConformalThreshold
from facterlab.facter.monitor import CalibrationState, OnlineScorer
from facterlab.facter.neighbours import counterfactual_neighbours
from facterlab.facter.pipeline import context_embeddings
from facterlab.facter.scores import ItemRepresenter, nonconformity_scores

__all__ = ["Rescored", "RescoreInputs", "rescore_inputs", "rescore"]

_DEFAULTS = FacterConfig()


@dataclass
class RescoreInputs:
    """What rescoring needs from a saved run, embedded once: calibration and test predictions, targets,
    contexts and protected tuples (:func:`rescore_inputs`)."""

    cal_pred: np.ndarray
    cal_target: np.ndarray
    cal_ctx: np.ndarray
    cal_groups: list
    test_pred: np.ndarray
    test_target: np.ndarray
    test_ctx: np.ndarray
    test_groups: list
    records: pd.DataFrame
    #: the neighbour indexes by (tau_rho, tau_x): (calibration rows among themselves, test rows among the
    #: calibration rows); they depend on the contexts and groups only, so a grid over lambda builds them once
    indexes: dict = field(default_factory=dict, repr=False, compare=False)


@dataclass
class Rescored:
    """S of each test record under the new settings, Q0, and the neighbour coverage."""

    S: np.ndarray
    q0: float
    share_no_neighbour: float
    lam: float
    tau_rho: float
    alpha: float


def rescore_inputs(
    result,
    encoder,
    items: pd.DataFrame,
    calib_rows: pd.DataFrame,
    test_rows: pd.DataFrame,
    method: str = "neutral",
    attrs: tuple = PROTECTED,
) -> RescoreInputs:
    """Embed a saved run's calibration rows and ``method``'s first-pass records once.

    Parameters
    ----------
    result : a :class:`facterlab.facter.runfolder.RunResult` (a run read back or just run).
    encoder : the run's encoder.  items : the catalogue.  calib_rows, test_rows : the interaction rows.
    method : whose records to rescore ("neutral" by default: one static prompt, exchangeable with calibration).
    attrs : the dataset's protected attributes (``Interactions.protected``; the built-in ones by default).

    Returns
    -------
    RescoreInputs
    """
    if result.record is not None and result.record.config.setting("facter.delta") == "twin":
        raise ValueError("a run scored with the twin Delta cannot be rescored with neighbours: rerun it")
    items = items if items.index.name == "item_id" else items.set_index("item_id")
    rep = ItemRepresenter(encoder, items)
    cal = result.calibration.reset_index(drop=True)
    calib_rows = calib_rows.set_index("row_id").loc[cal["row_id"].to_numpy()].reset_index()
    rec = result.rows[method]
    rec = rec[rec["pass"] == 1].sort_values("position").reset_index(drop=True)
    test_rows = test_rows.set_index("row_id").loc[rec["row_id"].to_numpy()].reset_index()
    return RescoreInputs(
        cal_pred=rep.predictions(cal["top1_id"].tolist(), cal["top1_text"].tolist()),
        cal_target=rep.items(calib_rows["target"].tolist()),
        cal_ctx=context_embeddings(calib_rows, items, encoder, prompts),
        cal_groups=list(zip(*(calib_rows[a].astype(str).tolist() for a in attrs))),
        test_pred=rep.predictions(rec["top1_id"].tolist(), rec["top1_text"].tolist()),
        test_target=rep.items(test_rows["target"].tolist()),
        test_ctx=context_embeddings(test_rows, items, encoder, prompts),
        test_groups=list(zip(*(test_rows[a].astype(str).tolist() for a in attrs))),
        records=rec,
    )


def rescore(
    inputs: RescoreInputs,
    lam: float = _DEFAULTS.lam,
    tau_rho: float = _DEFAULTS.tau_rho,
    alpha: float = _DEFAULTS.alpha,
    tau_x: float | None = _DEFAULTS.tau_x,
) -> Rescored:
    """S of each test record and Q0 under (lambda, tau_rho, alpha, tau_x).

    Parameters
    ----------
    inputs : :func:`rescore_inputs` of the run.
    lam, tau_rho, alpha, tau_x : FACTER's settings (defaults: :class:`facterlab.config.FacterConfig`'s).

    Returns
    -------
    Rescored
    """
    x = inputs
    key = (float(tau_rho), None if tau_x is None else float(tau_x))
    index, test_index = x.indexes.get(key, (None, None))
    if index is None:
        index = counterfactual_neighbours(x.cal_ctx, x.cal_groups, tau_rho=float(tau_rho), tau_x=tau_x)
    sc = nonconformity_scores(x.cal_pred, x.cal_target, index, x.cal_pred, lam=float(lam))
    ct = ConformalThreshold(float(alpha)).fit(sc["S"].tolist())
    state = CalibrationState(
        q0=ct.threshold_,
        context_emb=x.cal_ctx,
        groups=x.cal_groups,
        pred_emb=x.cal_pred,
        alpha=float(alpha),
        k_index=ct.k_index_,
        n=ct.n_,
    )
    scorer = OnlineScorer(
        state, x.test_ctx, x.test_groups, x.test_target, float(lam), float(tau_rho), tau_x, index=test_index
    )
    x.indexes[key] = (index, scorer.index)
    s = np.array([scorer.score(i, x.test_pred[i])[0] for i in range(len(x.records))])
    assert scorer.index is not None
    return Rescored(
        S=s,
        q0=float(ct.threshold_),
        share_no_neighbour=float((scorer.index.counts == 0).mean()),
        lam=float(lam),
        tau_rho=float(tau_rho),
        alpha=float(alpha),
    )
