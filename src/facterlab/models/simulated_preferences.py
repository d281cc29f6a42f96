"""The simulated recommender's preferences (point 1 of :mod:`facterlab.models.simulated`'s docstring;
docs/SIMULATED.md): the training pairs a run's rows allow (:func:`training_pairs`: the watch histories
minus every target and relevant item) and the PureSVD item factors fitted on them
(:func:`fit_preferences`).

It knows nothing of bias, rules or prompts: the recommender (:mod:`facterlab.models.simulated`, which
re-exports both names) folds a request's history into these factors.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd

from facterlab.config import SimulatorConfig

__all__ = ["training_pairs", "fit_preferences"]

_SIM_DEFAULTS = SimulatorConfig()  # the one owner of the knobs' defaults


def training_pairs(rows: pd.DataFrame) -> pd.DataFrame:
    """(user_id, item_id) pairs of the rows' watch histories, minus every pair that is a target or a
    relevant item of any row (so no calibration or test target is ever seen by the preference model).

    >>> rows = pd.DataFrame({"user_id": [1, 1], "history": [[10, 11], [11, 12]], "target": [12, 13],
    ...                      "relevant": [[12], [13, 14]]})
    >>> training_pairs(rows).values.tolist()
    [[1, 10], [1, 11]]
    """
    users = rows["user_id"].to_numpy(dtype=np.int64)
    hist = pd.DataFrame(
        {
            "user_id": np.repeat(users, [len(h) for h in rows["history"]]),
            "item_id": np.concatenate([np.asarray(h, dtype=np.int64) for h in rows["history"]])
            if len(rows)
            else np.zeros(0, dtype=np.int64),
        }
    )
    held = [(int(u), int(t)) for u, t in zip(users, rows["target"])]
    if "relevant" in rows.columns:
        held += [(int(u), int(i)) for u, rel in zip(users, rows["relevant"]) for i in rel]
    held_df = pd.DataFrame(held, columns=["user_id", "item_id"]).drop_duplicates()
    pairs = hist.drop_duplicates().merge(held_df, how="left", indicator=True)
    pairs = pairs[pairs["_merge"] == "left_only"].drop(columns="_merge")
    return pairs.sort_values(["user_id", "item_id"]).reset_index(drop=True)


def fit_preferences(
    pairs: pd.DataFrame, item_ids: Sequence[int], n_factors: int = _SIM_DEFAULTS.n_factors, seed: int = 0
) -> np.ndarray:
    """PureSVD item factors (n_items, f): a truncated SVD of the binary user x item matrix of ``pairs``,
    rows of the result aligned with ``item_ids``; ``score(h) = V V^T h`` for a history indicator h.

    >>> V = fit_preferences(pd.DataFrame({"user_id": [1, 1, 2, 2, 3], "item_id": [7, 8, 7, 8, 9]}), [7, 8, 9], 2)
    >>> V.shape
    (3, 2)

    Reference: [cremonesi2010puresvd] (docs/references.bib).
    """
    from scipy.sparse import csr_matrix
    from sklearn.decomposition import TruncatedSVD

    ids = np.asarray(item_ids, dtype=np.int64)
    pos = pd.Series(np.arange(len(ids)), index=ids)
    keep = pairs[pairs["item_id"].isin(pos.index)]
    if len(keep) == 0:
        raise ValueError(
            "the simulated recommender has no training interactions: the rows' histories are empty "
            "after removing targets and relevant items; increase data.n_rows or data.history_len"
        )
    users = pd.factorize(keep["user_id"])[0]
    cols = pos.loc[keep["item_id"].to_numpy()].to_numpy()
    X = csr_matrix((np.ones(len(keep), dtype=np.float64), (users, cols)), shape=(int(users.max()) + 1, len(ids)))
    f = int(min(n_factors, min(X.shape) - 1))
    if f < 1:
        raise ValueError(f"too few training users/items ({X.shape}) for a preference model")
    svd = TruncatedSVD(n_components=f, algorithm="randomized", n_iter=7, random_state=int(seed))
    svd.fit(X)
    return np.ascontiguousarray(svd.components_.T, dtype=np.float64)  # (n_items, f)
