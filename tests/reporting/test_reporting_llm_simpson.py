"""Simpson's paradox glue for LLM re-ranking outputs (facterlab.reporting.llm_simpson)."""

from __future__ import annotations

import math

import pandas as pd
import pytest

from facterlab.reporting import llm_simpson as ls


def _toy_rows():
    """docs/SIMPSON.md §4 toy example as two re-ranking rows: Orange = group 0, Blue = group 1,
    every listed item relevant, f(p) = p.  Frequent user: B B B B B B O B B B; casual: B O B O."""
    rows = pd.DataFrame(
        {
            "row_id": [0, 1],
            "ranked_ids": [list(range(1, 11)), [11, 12, 13, 14]],
            "candidates": [list(range(10, 0, -1)), [14, 13, 12, 11]],
            "relevant": [list(range(1, 11)), [11, 12, 13, 14]],
            "history": [[1, 2], [7, 11]],
            "gender": ["F", "M"],
            "age": ["25-34", "25-34"],
        }
    )
    group = pd.Series({i: 1 for i in range(1, 15)})
    group[7] = group[12] = group[14] = 0
    return rows, group


def test_toy_example_views_disagree():
    rows, group = _toy_rows()
    rep = ls.llm_simpson_report(rows, group, exposure="position", seed=0)
    o = rep["overall"]
    # per user: (7 - 48/9) = 5/3 and (3 - 2) = 1 -> mean 4/3; aggregate 13/3 - 52/11
    assert math.isclose(o["per_user_gap"], 4 / 3)
    assert math.isclose(o["aggregate_gap"], 13 / 3 - 52 / 11)
    assert o["signs_disagree"] is True and o["share_defined"] == 1.0
    assert o["n_relevant_popular"] == 3 and o["n_relevant_long_tail"] == 11
    assert ls.verdict(rep).startswith("DISAGREE")
    # two rows: the random experiment cannot see both groups; reported as missing with a reason
    ips = rep["random_experiment"]["ips_counts"]
    assert ips["value"] is None or isinstance(ips["value"], float)
    assert set(rep["by_user_group"]) == {"gender=F", "gender=M", "age=25-34"}
    frame = ls.report_frame({"neutral": rep})
    assert list(frame["users"])[:1] == ["all rows"] and len(frame) == 4


def test_ranking_long_table_positions():
    rows = pd.DataFrame(
        {"row_id": [5], "ranked_ids": [[3, 99, 3, -1, 1]], "candidates": [[1, 2, 3]], "relevant": [[2]]}
    )
    t = ls.ranking_long_table(rows, pd.Series({1: 0, 2: 1, 3: 1}))
    # model order 3, 1 (99 and -1 are not candidates, the repeat of 3 is dropped), then 2 appended
    assert t.to_dict("list") == {
        "user": [5, 5, 5],
        "item": [3, 1, 2],
        "group": [1, 0, 1],
        "relevant": [False, False, True],
        "position": [1, 2, 3],
    }
    with pytest.raises(ValueError, match="not a rank-protocol row"):
        ls.ranking_long_table(rows.assign(candidates=[[]]), pd.Series(dtype=int))
    with pytest.raises(ValueError, match="ranked-id columns"):
        ls.ranking_long_table(rows.drop(columns="ranked_ids"), pd.Series(dtype=int))


def test_popularity_groups_counts_and_errors():
    ratings = pd.DataFrame({"item_id": [4, 4, 4, 2, 2, 9]})
    g = ls.popularity_groups(ratings, [2, 4, 9, 11], head_share=0.5)
    assert g.to_dict() == {2: 0, 4: 0, 9: 1, 11: 1}
    with pytest.raises(ValueError, match="head_share"):
        ls.popularity_groups(ratings, [1], head_share=1.0)


def test_random_experiment_naive_estimate_matches_shown_items():
    # many identical rows: every shown item's exposure is known, so the naive estimate is checkable
    n = 200
    rows = pd.DataFrame(
        {
            "row_id": range(n),
            "ranked_ids": [[1, 2, 3, 4]] * n,
            "candidates": [[1, 2, 3, 4]] * n,
            "relevant": [[1, 4]] * n,
            "history": [[1, 3]] * n,
            "gender": ["F", "M"] * (n // 2),
            "age": ["18-24"] * n,
        }
    )
    group = pd.Series({1: 0, 2: 0, 3: 1, 4: 1})
    rep = ls.llm_simpson_report(rows, group, exposure="position", seed=3, by=())
    # relevant popular item 1 sits at position 1, relevant long-tail item 4 at position 4
    assert rep["overall"]["per_user_gap"] == rep["overall"]["aggregate_gap"] == 1 - 4
    assert rep["random_experiment"]["naive"]["value"] == pytest.approx(-3.0)
    assert rep["random_experiment"]["n_rows"] == n
