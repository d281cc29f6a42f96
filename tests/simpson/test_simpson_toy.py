"""Simpson part: the paper's toy example (Fig 2; docs/SIMPSON.md §4), one test per clause of the
paper's description: Grey non-relevant items, relevant items above Grey for the active user but not
the casual one (performance), Blue has more relevant content for casual users, Blue ranked above
Orange within every user, and the aggregate 4.3 (Orange) vs 4.7 (Blue)."""

from __future__ import annotations

from fractions import Fraction

import pytest

from facterlab.simpson.toy import TOY_LISTS, draw_toy, relevant_above_grey, toy_gaps, toy_table


def test_lists_have_two_users_and_three_colours():
    assert set(TOY_LISTS) == {"active", "casual"}
    tiles = toy_table(include_grey=True)
    assert set(tiles["color"]) == {"Orange", "Blue", "Grey"}
    assert not tiles.loc[tiles.color == "Grey", "relevant"].any()
    assert tiles.loc[tiles.color != "Grey", "relevant"].all()
    # grey tiles take positions but never enter the gaps
    assert len(toy_table()) == len(tiles) - (tiles.color == "Grey").sum()


def test_aggregate_is_4_3_for_orange_and_4_7_for_blue():
    t = toy_gaps()
    assert t["aggregate_orange_exact"] == Fraction(13, 3)
    assert t["aggregate_blue_exact"] == Fraction(14, 3)
    assert t["aggregate_orange"] == pytest.approx(13 / 3, abs=1e-15)
    assert round(t["aggregate_orange"], 1) == 4.3 and round(t["aggregate_blue"], 1) == 4.7  # as printed
    assert t["aggregate_gap"] < 0  # Orange has the better (smaller) average position in aggregate


def test_blue_is_ranked_above_orange_within_every_user():
    t = toy_gaps()
    assert t["per_user"]["active"] == pytest.approx({"orange": 18 / 5, "blue": 3.0})
    assert t["per_user"]["casual"] == pytest.approx({"orange": 8.0, "blue": 5.0})
    assert all(v["blue"] < v["orange"] for v in t["per_user"].values())
    assert t["reversal"] is True and t["per_user_gap"] > 0 > t["aggregate_gap"]


def test_performance_relevant_above_grey_for_active_user_only():
    t = toy_gaps()
    assert t["relevant_above_grey"] == {"active": True, "casual": False}
    assert "G" in TOY_LISTS["active"] and "G" in TOY_LISTS["casual"]
    # performance = mean position / best possible mean position: 1 is perfect, larger is worse
    assert t["performance"]["active"] == pytest.approx(1.0, abs=1e-15)
    assert t["performance"]["casual"] > 1.0


def test_blue_has_more_relevant_content_for_casual_users():
    t = toy_gaps()
    assert t["share_blue"]["casual"] > t["share_blue"]["active"]
    assert TOY_LISTS["casual"].count("B") > TOY_LISTS["casual"].count("O")


def test_reversal_works_through_performance_not_competition():
    t = toy_gaps()
    # equal numbers of relevant items: equal competition
    assert t["n_relevant"]["active"] == t["n_relevant"]["casual"]
    assert t["competition"]["active"] == t["competition"]["casual"]
    # the competition/performance term opposes the per-user-gap term and outweighs it
    assert t["per_user_gap_term"] > 0 > t["competition_performance_term"]
    assert t["competition_performance_term"] + t["per_user_gap_term"] == pytest.approx(t["aggregate_gap"], abs=1e-12)
    # counterfactual: move the casual user's Grey items below its relevant ones -> no reversal
    fixed = {"active": TOY_LISTS["active"], "casual": TOY_LISTS["casual"].replace("G", "") + "GG"}
    assert relevant_above_grey(fixed["casual"])
    assert toy_gaps(fixed)["reversal"] is False


def test_no_reversal_when_lists_do_not_produce_one_and_bad_tiles():
    assert toy_gaps({"a": "BO", "b": "BO"})["reversal"] is False
    with pytest.raises(ValueError, match="toy lists use"):
        toy_table({"a": "BX"})


def test_draw_toy_draws_one_tile_per_item_including_grey():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.colors import to_hex
    from matplotlib.patches import Rectangle

    fig = draw_toy()
    tiles = [p for p in fig.axes[0].patches if isinstance(p, Rectangle)]
    assert len(tiles) == sum(len(s) for s in TOY_LISTS.values()) == 16
    colours = [to_hex(p.get_facecolor()) for p in tiles]
    assert colours.count("#b0b0b0") == 4
    texts = " ".join(t.get_text() for t in fig.axes[0].texts)
    assert "13/3" in texts and "14/3" in texts and "Grey above relevant" in texts
    plt.close(fig)


def test_exhaustive_search_finds_the_lists_and_no_52_over_11():
    from facterlab.simpson.toy import find_toy_lists

    found = find_toy_lists()
    assert found and all(o < b for _, _, o, b in found)
    active_relevant = TOY_LISTS["active"].rstrip("G")
    assert (active_relevant, TOY_LISTS["casual"], Fraction(13, 3), Fraction(14, 3)) in found
    assert not any(b == Fraction(52, 11) for *_, b in found)
    for a, c, _, _ in found[:5]:  # every clause holds for what the search returns
        t = toy_gaps({"active": a + "GG", "casual": c})
        assert t["reversal"] and t["relevant_above_grey"] == {"active": True, "casual": False}


@pytest.mark.slow
def test_52_over_11_has_no_performance_driven_pair_within_the_bounds_searched():
    """At 9 casual tiles no pair meets every clause at 52/11; one tile further one does, but its reversal
    survives moving the Grey tile down (not performance-driven), while the toy's own reversal does not."""
    from facterlab.simpson.toy import find_toy_lists, grey_moved_down, performance_driven, pooled_orange_ahead

    wider = find_toy_lists(max_casual=10)
    at_52 = [(a, c) for a, c, _o, b in wider if b == Fraction(52, 11)]
    assert ("BOBBO", "BBBBGOBBBB") in at_52
    assert not any(performance_driven(a, c) for a, c in at_52)
    assert pooled_orange_ahead("BOBBO", grey_moved_down("BBBBGOBBBB"))  # the aggregate still favours Orange
    assert not pooled_orange_ahead(TOY_LISTS["active"], grey_moved_down(TOY_LISTS["casual"]))
    assert performance_driven(TOY_LISTS["active"], TOY_LISTS["casual"])
    assert any(performance_driven(a, c) for a, c, _o, _b in wider)  # the check does pass real pairs
