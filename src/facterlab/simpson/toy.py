"""The paper's toy example (Prost et al. 2022, Fig. 2; SIMPSON.md §4), exposure f(p) = p.

Average position (lower is better).  Two users, all listed items relevant, positions from 1:

- frequent user: B B B B B B O B B B   (Orange at 7.0, Blue at 48/9 = 5.33)
- casual user:   B O B O               (Orange at 3.0, Blue at 2.0)

Blue is ranked above Orange within every user, yet pooled over users Orange averages
13/3 = 4.33 and Blue 52/11 = 4.73: Orange looks better in aggregate (Simpson's paradox).
Group 0 = Orange, group 1 = Blue, so gaps are Orange minus Blue.

>>> t = toy_gaps()
>>> t["aggregate_orange"] == 13 / 3, t["aggregate_blue"] == 52 / 11, t["reversal"]
(True, True, True)
"""
from __future__ import annotations

from fractions import Fraction

import numpy as np
import pandas as pd

from facterlab.simpson.gaps import UserStats, aggregate_gap, per_user_gap

TOY_LISTS = {"frequent": "BBBBBBOBBB", "casual": "BOBO"}
TOY_GROUPS = {"O": 0, "B": 1}
TOY_COLORS = {"O": "#ff7f0e", "B": "#1f77b4"}
TOY_NAMES = {"O": "Orange", "B": "Blue"}


def toy_table(lists: dict = TOY_LISTS) -> pd.DataFrame:
    """The toy example as a long table (user, item, group, relevant, position), all items relevant.

    >>> toy_table().groupby("user").size().to_dict()
    {'casual': 4, 'frequent': 10}
    """
    rows = []
    for user, seq in lists.items():
        for p, c in enumerate(seq, start=1):
            if c not in TOY_GROUPS:
                raise ValueError(f"toy lists use 'O' (Orange) and 'B' (Blue); got {c!r}")
            rows.append({"user": user, "item": f"{user}-{p}", "group": TOY_GROUPS[c], "relevant": True, "position": p})
    return pd.DataFrame(rows)


def toy_gaps(lists: dict = TOY_LISTS) -> dict:
    """Per-user and aggregate average positions of the toy example, with exact fractions.

    ``reversal`` is True when every user favours Blue (smaller average position) while the
    aggregate favours Orange.
    """
    table = toy_table(lists)
    st = UserStats.from_table(table, exposure="position")
    agg = aggregate_gap(st)
    pug = per_user_gap(st)
    exact = {}
    for g, name in ((0, "orange"), (1, "blue")):
        pos = table.loc[table["group"] == g, "position"]
        exact[name] = Fraction(int(pos.sum()), len(pos))
    per_user = {u: {"orange": float(o), "blue": float(b)} for u, o, b in zip(st.users, st.e0, st.e1)}
    reversal = bool(np.all(st.e1 < st.e0) and agg.mean_exposure_0 < agg.mean_exposure_1)
    return {"aggregate_orange": agg.mean_exposure_0, "aggregate_blue": agg.mean_exposure_1,
            "aggregate_orange_exact": exact["orange"], "aggregate_blue_exact": exact["blue"],
            "aggregate_gap": agg.value, "per_user_gap": pug.value, "per_user": per_user,
            "reversal": reversal}


def draw_toy(ax=None, lists: dict = TOY_LISTS, title: str = ""):
    """Draw the toy example as the paper does: one row of coloured tiles per user, with the
    per-user and aggregate average positions.  Returns the matplotlib figure."""
    import matplotlib.pyplot as plt
    from matplotlib.patches import Patch, Rectangle

    res = toy_gaps(lists)
    if ax is None:
        fig, ax = plt.subplots(figsize=(9, 3.2))
    else:
        fig = ax.figure
    users = list(lists)
    width = max(len(s) for s in lists.values())
    for row, user in enumerate(users):
        y = len(users) - 1 - row
        for p, c in enumerate(lists[user], start=1):
            ax.add_patch(Rectangle((p - 1 + 0.05, y + 0.1), 0.9, 0.8, facecolor=TOY_COLORS[c], edgecolor="black", lw=0.6))
            ax.text(p - 0.5, y + 0.5, str(p), ha="center", va="center", color="white", fontsize=9, fontweight="bold")
        pu = res["per_user"][user]
        ax.text(-0.3, y + 0.5, f"{user} user", ha="right", va="center", fontsize=10)
        ax.text(width + 0.3, y + 0.5, f"Orange {pu['orange']:.2f}   Blue {pu['blue']:.2f}", ha="left", va="center", fontsize=9)
    ax.text(width + 0.3, -0.5, f"aggregate: Orange {res['aggregate_orange']:.2f} ({res['aggregate_orange_exact']})"
            f"   Blue {res['aggregate_blue']:.2f} ({res['aggregate_blue_exact']})", ha="left", va="center",
            fontsize=9, fontweight="bold")
    ax.set_xlim(-3.5, width + 8)
    ax.set_ylim(-1, len(users))
    ax.set_aspect("equal")
    ax.axis("off")
    ax.legend(handles=[Patch(color=TOY_COLORS[k], label=TOY_NAMES[k]) for k in ("O", "B")],
              loc="lower left", bbox_to_anchor=(0.0, 0.0), ncol=2, frameon=False, fontsize=9)
    if title:
        ax.set_title(title)
    return fig
