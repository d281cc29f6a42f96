"""Simpson part: the paper's toy example (Fig 2; SIMPSON.md §4)."""
from __future__ import annotations

from fractions import Fraction

import pytest

from facterlab.simpson.toy import draw_toy, toy_gaps, toy_table


def test_toy_aggregates_are_13_over_3_and_52_over_11():
    t = toy_gaps()
    assert t["aggregate_orange_exact"] == Fraction(13, 3)
    assert t["aggregate_blue_exact"] == Fraction(52, 11)
    assert t["aggregate_orange"] == pytest.approx(13 / 3, abs=1e-15)
    assert t["aggregate_blue"] == pytest.approx(52 / 11, abs=1e-15)
    assert round(t["aggregate_orange"], 1) == 4.3 and round(t["aggregate_blue"], 1) == 4.7  # as printed in the paper


def test_toy_per_user_reversal():
    t = toy_gaps()
    assert t["per_user"]["frequent"] == pytest.approx({"orange": 7.0, "blue": 48 / 9})
    assert t["per_user"]["casual"] == pytest.approx({"orange": 3.0, "blue": 2.0})
    # Blue has the better (smaller) average position for every user, Orange in aggregate.
    assert t["reversal"] is True
    assert t["per_user_gap"] == pytest.approx(((7 - 48 / 9) + (3 - 2)) / 2)
    assert t["per_user_gap"] > 0 > t["aggregate_gap"]


def test_no_reversal_when_lists_do_not_produce_one():
    t = toy_gaps({"a": "BO", "b": "BO"})
    assert t["reversal"] is False
    with pytest.raises(ValueError, match="toy lists use"):
        toy_table({"a": "BX"})


def test_draw_toy_draws_one_tile_per_item():
    import matplotlib

    matplotlib.use("Agg")
    from matplotlib.patches import Rectangle

    fig = draw_toy()
    tiles = [p for p in fig.axes[0].patches if isinstance(p, Rectangle)]
    assert len(tiles) == 14
    import matplotlib.pyplot as plt

    plt.close(fig)
