"""Simpson's paradox check on an LLM re-ranker's outputs (docs/SIMPSON.md §1-§2 applied to FACTER §1.2 step 5).

A rank-protocol run gives, per interaction row, a ranking of its 40 candidates; its relevance set is
the row's ``relevant`` list. We treat each row as one "user" of Prost et al. (choice: a user with
several rows counts once per row, since each row is a separate request with its own candidates),
positions 1..40 over the candidate list (f(p) = 1/log2(1+p) by default), and two item groups:

- group 0 = **popular** (head): the top ``head_share`` (default 20%) of catalogue items by their
  number of ratings in the dataset (training popularity); ties broken by item id, so the head has
  exactly ``ceil(head_share * n_items)`` items;
- group 1 = **long tail**: all other items (including items with no ratings).

Then PerUserGap (mean over rows with relevant items of both groups of e_0 - e_1) and AggregateGap
(pooled relevant pairs) come from :mod:`facterlab.simpson.gaps`; a positive gap means popular
relevant items get more exposure than long-tail relevant ones. The random experiment: per row one
candidate drawn uniformly (seeded); the naive estimate and the IPS estimates of
:mod:`facterlab.simpson.ips` use as user variable V the share of popular items in the row's history
(``counts``: quantile cells of V; ``model``: a logistic regression on V and the row's demographics).
Both views are also computed within each demographic group of the users.

>>> import pandas as pd
>>> ratings = pd.DataFrame({"item_id": [1, 1, 1, 2, 3, 4, 5]})
>>> popularity_groups(ratings, [1, 2, 3, 4, 5, 6], head_share=0.2).to_dict()
{1: 0, 2: 0, 3: 1, 4: 1, 5: 1, 6: 1}
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from types import SimpleNamespace

import numpy as np
import pandas as pd

from facterlab.datatypes import MissingValue
from facterlab.simpson.exposure import get_exposure
from facterlab.simpson.gaps import UserStats, gaps_from_table
from facterlab.simpson.ips import ips_estimate, naive_estimate

GROUP_NAMES = {0: "popular", 1: "long tail"}
RANKED_COLUMNS = ("ranked_ids", "mapped_ids", "pred_ids", "ranking", "ranked")


def popularity_groups(ratings: pd.DataFrame, item_ids: Sequence[int], head_share: float = 0.2) -> pd.Series:
    """Item group per item id: 0 = popular (the ``ceil(head_share * n_items)`` items with the most
    ratings, ties by item id), 1 = long tail."""
    if not 0.0 < head_share < 1.0:
        raise ValueError(f"head_share must be in (0, 1), got {head_share}")
    ids = pd.Index(np.sort(pd.unique(np.asarray(item_ids, dtype=np.int64))))
    counts = ratings["item_id"].value_counts().reindex(ids, fill_value=0).to_numpy()
    k = max(1, math.ceil(head_share * len(ids)))
    order = np.lexsort((ids.to_numpy(), -counts))  # by count desc, then id asc
    group = np.ones(len(ids), dtype=np.int64)
    group[order[:k]] = 0
    return pd.Series(group, index=ids, name="group")


def _ranked_column(rows: pd.DataFrame, ranked_col: str | None) -> str:
    if ranked_col is not None:
        if ranked_col not in rows.columns:
            raise ValueError(f"rows have no column {ranked_col!r}; columns: {list(rows.columns)}")
        return ranked_col
    for c in RANKED_COLUMNS:
        if c in rows.columns:
            return c
    raise ValueError(f"rows have none of the ranked-id columns {RANKED_COLUMNS}; columns: {list(rows.columns)}")


def ranking_long_table(
    rows: pd.DataFrame, item_group: pd.Series, ranked_col: str | None = None, unit_col: str = "row_id"
) -> pd.DataFrame:
    """Long table ``user, item, group, relevant, position`` from rank-protocol rows.

    Positions are 1-based over the row's candidates: the model's ranked ids first (ids not among the
    candidates and repeats are dropped), then any candidate the ranking left out, in candidate
    order. ``user`` is ``unit_col`` (the row id by default).
    """
    col = _ranked_column(rows, ranked_col)
    recs = []
    for r in rows.itertuples(index=False):
        rd = r._asdict()
        cands = [int(c) for c in rd["candidates"]]
        if not cands:
            raise ValueError(f"row {rd.get(unit_col)} has no candidates: not a rank-protocol row")
        cset = set(cands)
        order: list = []
        for i in rd[col]:
            i = int(i)
            if i in cset and i not in order:
                order.append(i)
        order += [c for c in cands if c not in set(order)]
        rel = {int(i) for i in rd["relevant"]}
        for pos, item in enumerate(order, start=1):
            recs.append((rd[unit_col], item, int(item_group.get(item, 1)), item in rel, pos))
    return pd.DataFrame(recs, columns=["user", "item", "group", "relevant", "position"])


def history_popular_share(rows: pd.DataFrame, item_group: pd.Series) -> np.ndarray:
    """Share of popular (group 0) items in each row's history: the user variable V."""
    return np.array(
        [np.mean([item_group.get(int(i), 1) == 0 for i in h]) if len(h) else 0.0 for h in rows["history"]], dtype=float
    )


def shown_item_experiment(
    table: pd.DataFrame,
    rows: pd.DataFrame,
    item_group: pd.Series,
    seed: int = 0,
    exposure: str = "log",
    unit_col: str = "row_id",
) -> SimpleNamespace:
    """The random experiment: one candidate per row drawn uniformly (seeded); its relevance, group,
    exposure (f of its position), and the row's user variables."""
    rng = np.random.default_rng(seed)
    f = get_exposure(exposure)
    units = rows[unit_col].to_numpy()
    by_user = {u: g for u, g in table.groupby("user", sort=False)}
    rel, grp, expo = [], [], []
    for u in units:
        g = by_user[u]
        pick = g.iloc[int(rng.integers(len(g)))]
        rel.append(bool(pick["relevant"]))
        grp.append(int(pick["group"]))
        expo.append(float(f(np.array([pick["position"]]))[0]))
    v = history_popular_share(rows, item_group)
    demo = []
    for attr in ("gender", "age"):
        if attr in rows.columns:
            demo.append(pd.get_dummies(rows[attr].astype(str)).to_numpy(dtype=float))
    emb = np.column_stack([v, *demo]) if demo else v[:, None]
    return SimpleNamespace(
        relevant=np.array(rel), group=np.array(grp), exposure=np.array(expo), user_feature=v, user_embedding=emb
    )


def _val(x) -> float | None:
    if x is None or (isinstance(x, float) and not math.isfinite(x)):
        return None
    return float(x)


def _gap_block(table: pd.DataFrame, exposure: str) -> dict:
    pu, ag = gaps_from_table(table, exposure)
    out = {
        "n_users": int(pu.n_users),
        "per_user_gap": _val(pu.value) if pu.missing_reason is None else MissingValue(pu.missing_reason).to_json(),
        "share_defined": _val(pu.share_defined),
        "aggregate_gap": _val(ag.value) if ag.missing_reason is None else MissingValue(ag.missing_reason).to_json(),
        "mean_exposure_popular": _val(ag.mean_exposure_0),
        "mean_exposure_long_tail": _val(ag.mean_exposure_1),
        "n_relevant_popular": int(ag.n_pairs_0),
        "n_relevant_long_tail": int(ag.n_pairs_1),
    }
    pv, av = out["per_user_gap"], out["aggregate_gap"]
    if isinstance(pv, float) and isinstance(av, float):
        out["signs_disagree"] = bool(np.sign(pv) != np.sign(av) and pv != 0 and av != 0)
        out["abs_difference"] = abs(pv - av)
    else:
        out["signs_disagree"] = MissingValue("a gap is undefined").to_json()
        out["abs_difference"] = MissingValue("a gap is undefined").to_json()
    return out


def _estimate_block(est) -> dict:
    if est.missing_reason is not None or not math.isfinite(est.value):
        return {
            "value": None,
            "missing_reason": est.missing_reason or "not finite",
            "n_observed_popular": int(est.n_0),
            "n_observed_long_tail": int(est.n_1),
        }
    return {"value": float(est.value), "n_observed_popular": int(est.n_0), "n_observed_long_tail": int(est.n_1)}


def llm_simpson_report(
    rows: pd.DataFrame,
    item_group: pd.Series,
    exposure: str = "log",
    seed: int = 0,
    by: Sequence[str] = ("gender", "age"),
    ranked_col: str | None = None,
    n_bins: int = 5,
) -> dict:
    """Per-user vs aggregate exposure gap (popular minus long tail) of one method's ranked rows,
    overall and within each demographic group, plus the naive and IPS estimates from one random
    shown item per row.  Returns a JSON-ready dict (missing values carry their reason)."""
    table = ranking_long_table(rows, item_group, ranked_col)
    out = {
        "exposure": exposure,
        "unit": "interaction row",
        "groups": dict(GROUP_NAMES),
        "overall": _gap_block(table, exposure),
    }
    exp = shown_item_experiment(table, rows, item_group, seed, exposure)
    out["random_experiment"] = {
        "n_rows": int(len(exp.relevant)),
        "naive": _estimate_block(naive_estimate(exp)),
        "ips_counts": _estimate_block(ips_estimate(exp, "counts", n_bins=n_bins)),
        "ips_model": _estimate_block(ips_estimate(exp, "model")),
        "user_variable": "share of popular items in the history (+ gender/age dummies for the model)",
    }
    per_group = {}
    for attr in by:
        if attr not in rows.columns:
            continue
        for value, sub in rows.groupby(attr, sort=True):
            t = table[table["user"].isin(set(sub["row_id"]))]
            per_group[f"{attr}={value}"] = _gap_block(t, exposure)
    out["by_user_group"] = per_group
    return out


def report_frame(reports: dict) -> pd.DataFrame:
    """One row per (method, user group): per-user gap, aggregate gap, share defined, disagreement."""
    recs = []
    for method, rep in reports.items():
        blocks = {"all rows": rep["overall"], **rep.get("by_user_group", {})}
        for grp, b in blocks.items():

            def num(x):
                return x if isinstance(x, (int, float)) and not isinstance(x, bool) else None

            recs.append(
                {
                    "method": method,
                    "users": grp,
                    "n_rows": b["n_users"],
                    "per_user_gap": num(b["per_user_gap"]),
                    "aggregate_gap": num(b["aggregate_gap"]),
                    "share_defined": b["share_defined"],
                    "signs_disagree": b["signs_disagree"] if isinstance(b["signs_disagree"], bool) else None,
                }
            )
    return pd.DataFrame(recs)


def bootstrap_gaps(stats, n_boot: int = 1000, level: float = 0.95, seed: int = 0) -> dict:
    """Percentile bootstrap intervals of the per-user and aggregate gaps of one set of users (rows),
    resampling the users with replacement: ``{"per_user_lo", "per_user_hi", "aggregate_lo",
    "aggregate_hi"}``; NaN where fewer than 2 users define the gap (no interval).

    >>> from facterlab.simpson.gaps import UserStats
    >>> st = UserStats(np.array([1, 1, 1]), np.array([1, 1, 1]), np.array([1.0, 2.0, 3.0]),
    ...                np.array([1.0, 1.0, 1.0]), "position")
    >>> b = bootstrap_gaps(st, n_boot=200)
    >>> 0.0 <= b["per_user_lo"] <= 1.0 <= b["per_user_hi"] <= 2.0
    True
    """
    n = len(stats.n0)
    nan = float("nan")
    out = {"per_user_lo": nan, "per_user_hi": nan, "aggregate_lo": nan, "aggregate_hi": nan}
    if n < 2:
        return out
    rng = np.random.default_rng(seed)
    idx = rng.integers(0, n, size=(n_boot, n))
    n0, n1 = stats.n0[idx].astype(float), stats.n1[idx].astype(float)
    s0, s1 = stats.sum0[idx], stats.sum1[idx]
    both = (n0 >= 1) & (n1 >= 1)
    with np.errstate(invalid="ignore", divide="ignore"):
        per_user = np.where(both, s0 / np.where(n0 > 0, n0, 1) - s1 / np.where(n1 > 0, n1, 1), 0.0)
        pu = per_user.sum(axis=1) / both.sum(axis=1)
        ag = s0.sum(axis=1) / n0.sum(axis=1) - s1.sum(axis=1) / n1.sum(axis=1)
    q = ((1 - level) / 2 * 100, (1 + level) / 2 * 100)
    if int(((stats.n0 >= 1) & (stats.n1 >= 1)).sum()) >= 2 and np.isfinite(pu).sum() >= 2:
        out["per_user_lo"], out["per_user_hi"] = (float(v) for v in np.nanpercentile(pu, q))
    if np.isfinite(ag).sum() >= 2:
        out["aggregate_lo"], out["aggregate_hi"] = (float(v) for v in np.nanpercentile(ag, q))
    return out


def gap_intervals(
    rows_by_method: dict,
    item_group: pd.Series,
    exposure: str = "log",
    by: Sequence[str] = ("gender", "age"),
    ranked_col: str | None = None,
    n_boot: int = 1000,
    seed: int = 0,
) -> pd.DataFrame:
    """95% bootstrap intervals (rows resampled) of the gaps of :func:`report_frame`, one row per
    (method, user group), with the same ``users`` names ("all rows", ``"gender=F"``...), for the figure's
    error bars (:func:`facterlab.reporting.facter_figures.gap_bars`)."""
    recs = []
    for method, rows in rows_by_method.items():
        table = ranking_long_table(rows, item_group, ranked_col)
        blocks = {"all rows": table}
        for attr in by:
            if attr not in rows.columns:
                continue
            for value, sub in rows.groupby(attr, sort=True):
                blocks[f"{attr}={value}"] = table[table["user"].isin(set(sub["row_id"]))]
        for users, t in blocks.items():
            stats = UserStats.from_table(t, exposure)
            recs.append({"method": method, "users": users, **bootstrap_gaps(stats, n_boot=n_boot, seed=seed)})
    return pd.DataFrame(recs)


def verdict(report: dict) -> str:
    """One sentence: do the per-user and the aggregate view disagree for this recommender?

    >>> verdict({"overall": {"per_user_gap": 0.02, "aggregate_gap": -0.01, "share_defined": 0.5,
    ...          "signs_disagree": True}, "random_experiment": {}})
    'DISAGREE: per-user gap +0.0200 (defined for 50% of rows) vs aggregate gap -0.0100 (popular minus long tail).'
    """
    o = report["overall"]
    pv, av = o["per_user_gap"], o["aggregate_gap"]
    if not isinstance(pv, float) or not isinstance(av, float):
        why = pv.get("missing_reason") if isinstance(pv, dict) else av.get("missing_reason")
        return f"UNDETERMINED: a gap is undefined ({why})."
    word = "DISAGREE" if o["signs_disagree"] else "AGREE in sign"
    text = (
        f"{word}: per-user gap {pv:+.4f} (defined for {o['share_defined']:.0%} of rows) vs aggregate gap "
        f"{av:+.4f} (popular minus long tail)."
    )
    ips = (report.get("random_experiment") or {}).get("ips_counts")
    if isinstance(ips, dict) and ips.get("value") is not None:
        text += f" IPS (counts) estimate of the per-user gap from one shown item per row: {ips['value']:+.4f}."
    return text
