"""The paper's toy example (Prost et al. 2022, Fig. 2; docs/SIMPSON.md §4), exposure f(p) = p.

Average position (lower is better).  The paper prints the aggregates (Orange 4.3, Blue 4.7) and
describes the mechanism: the recommender *performs* better for the active user (its relevant items
are all ranked above the Grey, non-relevant ones) than for the casual user (Grey items above its
relevant ones), and Blue has more relevant content for casual users.  Two lists that satisfy every
clause (positions from 1; O = Orange, B = Blue relevant, G = Grey non-relevant):

- active user:  O O B O O O G G   (Orange at 18/5 = 3.6, Blue at 3.0)
- casual user:  G G B B B B B O   (Orange at 8.0, Blue at 5.0)

Blue is ranked above Orange within every user, yet pooled over users Orange averages 13/3 = 4.33
and Blue 14/3 = 4.67 (printed 4.3 and 4.7).  Within the bounds searched (:func:`find_toy_lists`: active
lists of up to 10 relevant tiles, casual lists of up to 10 tiles) there is no *performance-driven* pair
(:func:`performance_driven`) with Blue at 52/11 (4.73): up to 9 casual tiles no pair meets every clause
at 52/11; at 10 tiles ``BOBBO`` / ``BBBBGOBBBB`` (13/3 vs 52/11) does, but its reversal survives moving the
Grey tile down, so it is not driven by performance.  Hence 13/3 and 14/3.  Both users
have six relevant items, so their competition is equal: the reversal comes from performance alone.
Group 0 = Orange, group 1 = Blue, so gaps are Orange minus Blue.

>>> t = toy_gaps()
>>> t["aggregate_orange"] == 13 / 3, t["aggregate_blue"] == 14 / 3, t["reversal"]
(True, True, True)
"""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import pandas as pd

from facterlab.simpson.gaps import UserStats, aggregate_gap, decompose, per_user_gap

TOY_LISTS = {"active": "OOBOOOGG", "casual": "GGBBBBBO"}
TOY_GROUPS = {"O": 0, "B": 1}
TOY_COLORS = {"O": "#ff7f0e", "B": "#1f77b4", "G": "#b0b0b0"}
TOY_NAMES = {"O": "Orange", "B": "Blue", "G": "Grey (not relevant)"}


def toy_table(lists: dict = TOY_LISTS, include_grey: bool = False) -> pd.DataFrame:
    """The toy example as a long table (user, item, group, relevant, position, color).

    Grey tiles are non-relevant items: they take positions but belong to neither group, so they
    are left out of the gap table unless ``include_grey`` (then their group is -1).

    >>> toy_table().groupby("user").size().to_dict()
    {'active': 6, 'casual': 6}
    """
    rows = []
    for user, seq in lists.items():
        for p, c in enumerate(seq, start=1):
            if c not in TOY_COLORS:
                raise ValueError(f"toy lists use 'O' (Orange), 'B' (Blue) and 'G' (Grey); got {c!r}")
            if c == "G" and not include_grey:
                continue
            rows.append(
                {
                    "user": user,
                    "item": f"{user}-{p}",
                    "group": TOY_GROUPS.get(c, -1),
                    "relevant": c != "G",
                    "position": p,
                    "color": TOY_NAMES[c].split()[0],
                }
            )
    return pd.DataFrame(rows)


def toy_gaps(lists: dict = TOY_LISTS) -> dict:
    """Per-user and aggregate average positions of the toy example, with exact fractions.

    Parameters
    ----------
    lists : dict
        User name -> the user's ranked list as a string of tiles: ``O`` (Orange, relevant), ``B`` (Blue,
        relevant), ``G`` (Grey, not relevant); default :data:`TOY_LISTS`, the paper's Fig. 2.

    Returns
    -------
    dict
        ``aggregate_orange`` / ``aggregate_blue`` (mean positions, also as exact ``Fraction``),
        ``aggregate_gap``, ``per_user_gap``, ``per_user`` (each user's mean positions), ``reversal`` (True
        when every user favours Blue, a smaller average position, while the aggregate favours Orange),
        and the decomposition's terms per user (``share_blue``, ``competition``, ``performance``).

    Examples
    --------
    >>> r = toy_gaps()
    >>> str(r["aggregate_orange_exact"]), str(r["aggregate_blue_exact"]), r["reversal"]
    ('13/3', '14/3', True)
    """
    table = toy_table(lists)
    st = UserStats.from_table(table, exposure="position")
    agg = aggregate_gap(st)
    pug = per_user_gap(st)
    users = st.users
    assert users is not None  # from_table always records the users
    exact = {}
    for g, name in ((0, "orange"), (1, "blue")):
        pos = table.loc[table["group"] == g, "position"]
        exact[name] = Fraction(int(pos.sum()), len(pos))
    per_user = {u: {"orange": float(o), "blue": float(b)} for u, o, b in zip(users, st.e0, st.e1)}
    reversal = bool(np.all(st.e1 < st.e0) and agg.mean_exposure_0 < agg.mean_exposure_1)
    dec = decompose(st)
    return {
        "aggregate_orange": agg.mean_exposure_0,
        "aggregate_blue": agg.mean_exposure_1,
        "aggregate_orange_exact": exact["orange"],
        "aggregate_blue_exact": exact["blue"],
        "aggregate_gap": agg.value,
        "per_user_gap": pug.value,
        "per_user": per_user,
        "reversal": reversal,
        "n_relevant": {u: int(n) for u, n in zip(users, st.n)},
        "share_blue": {u: float(p) for u, p in zip(users, dec.pi1)},
        "competition": {u: float(c) for u, c in zip(users, dec.competition)},
        "performance": {u: float(x) for u, x in zip(users, dec.performance)},
        "competition_performance_term": dec.competition_performance,
        "per_user_gap_term": dec.per_user_gap_term,
        "relevant_above_grey": {u: relevant_above_grey(lists[u]) for u in lists},
    }


def relevant_above_grey(seq: str) -> bool:
    """True when every relevant tile of the list comes before every Grey tile (perfect performance).

    >>> relevant_above_grey("OBGG"), relevant_above_grey("GOB")
    (True, False)
    """
    last_rel = max((i for i, c in enumerate(seq) if c != "G"), default=-1)
    first_grey = min((i for i, c in enumerate(seq) if c == "G"), default=len(seq))
    return last_rel < first_grey


def draw_toy(ax=None, lists: dict = TOY_LISTS, title: str = ""):
    """Draw the toy example as the paper describes it: one row of tiles per user (Orange and Blue
    relevant items, Grey non-relevant ones), with the per-user and aggregate average positions and
    whether the user's relevant items all sit above the Grey ones.

    Parameters
    ----------
    ax : matplotlib.axes.Axes, optional
        Where to draw; a new figure when None.
    lists : dict
        The users' ranked lists, as for :func:`toy_gaps`.
    title : str
        The axes' title.

    Returns
    -------
    matplotlib.figure.Figure
        The figure drawn on.
    """
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
            ax.add_patch(
                Rectangle((p - 1 + 0.05, y + 0.1), 0.9, 0.8, facecolor=TOY_COLORS[c], edgecolor="black", lw=0.6)
            )
            ax.text(p - 0.5, y + 0.5, str(p), ha="center", va="center", color="white", fontsize=9, fontweight="bold")
        pu = res["per_user"][user]
        ax.text(-0.3, y + 0.5, f"{user} user", ha="right", va="center", fontsize=10)
        above = "relevant above Grey" if res["relevant_above_grey"][user] else "Grey above relevant"
        ax.text(
            width + 0.3,
            y + 0.5,
            f"Orange {pu['orange']:.2f}   Blue {pu['blue']:.2f}   ({above})",
            ha="left",
            va="center",
            fontsize=9,
        )
    ax.text(
        width + 0.3,
        -0.5,
        f"aggregate: Orange {res['aggregate_orange']:.2f} ({res['aggregate_orange_exact']})"
        f"   Blue {res['aggregate_blue']:.2f} ({res['aggregate_blue_exact']})",
        ha="left",
        va="center",
        fontsize=9,
        fontweight="bold",
    )
    ax.set_xlim(-3.5, width + 13)
    ax.set_ylim(-1, len(users))
    ax.set_aspect("equal")
    ax.axis("off")
    ax.legend(
        handles=[Patch(color=TOY_COLORS[k], label=TOY_NAMES[k]) for k in ("O", "B", "G")],
        loc="lower left",
        bbox_to_anchor=(0.0, 0.0),
        ncol=3,
        frameon=False,
        fontsize=9,
    )
    if title:
        ax.set_title(title)
    return fig


def _position_sums(seq: str | tuple[str, ...]) -> tuple[int, int, int, int]:
    """(sum of Orange positions, #Orange, sum of Blue positions, #Blue) of a list."""
    so = co = sb = cb = 0
    for p, c in enumerate(seq, start=1):
        if c == "O":
            so, co = so + p, co + 1
        elif c == "B":
            sb, cb = sb + p, cb + 1
    return so, co, sb, cb


def pooled_reversal(active: str, casual: str) -> bool:
    """Whether pooling the two users reverses the within-user order: Blue ahead of Orange (lower average
    position) for each user that has both, Orange ahead pooled over both users.

    >>> pooled_reversal("OOBOOOGG", "GGBBBBBO"), pooled_reversal("OOBOOOGG", "BBBBBOGG")
    (True, False)
    """
    sums = [_position_sums(x) for x in (active, casual)]
    within = all(Fraction(sb, cb) < Fraction(so, co) for so, co, sb, cb in sums if co and cb)
    so, co, sb, cb = (sum(t) for t in zip(*sums))
    return within and co > 0 and cb > 0 and Fraction(so, co) < Fraction(sb, cb)


def grey_moved_down(casual: str) -> str:
    """The casual list with its Grey (non-relevant) tiles moved below every relevant one, relevant order
    kept: the list a recommender that *performs* well for this user would give.

    >>> grey_moved_down("GGBBBBBO")
    'BBBBBOGG'
    """
    return casual.replace("G", "") + "G" * casual.count("G")


def pooled_orange_ahead(active: str, casual: str) -> bool:
    """Whether Orange's pooled average position over both users is lower (better) than Blue's."""
    so, co, sb, cb = (sum(t) for t in zip(*(_position_sums(x) for x in (active, casual))))
    return co > 0 and cb > 0 and Fraction(so, co) < Fraction(sb, cb)


def performance_driven(active: str, casual: str) -> bool:
    """Whether a toy pair's reversal comes from performance, as in the paper's description: it reverses
    (:func:`pooled_reversal`), and once the casual user's Grey tiles are moved below its relevant ones
    (:func:`grey_moved_down`) Orange is no longer ahead pooled (:func:`pooled_orange_ahead`).

    >>> performance_driven("OOBOOO", "GGBBBBBO"), performance_driven("BOBBO", "BBBBGOBBBB")
    (True, False)
    """
    return pooled_reversal(active, casual) and not pooled_orange_ahead(active, grey_moved_down(casual))


def find_toy_lists(max_active: int = 10, max_casual: int = 9, orange: float = 4.3, blue: float = 4.7) -> list:
    """Every (active, casual) list pair, up to symmetric duplicates, that meets each clause of the
    paper's description: Blue ahead of Orange within both users; the active user's relevant items
    (at most ``max_active``) all above Grey; a Grey item above a relevant one for the casual user
    (list of at most ``max_casual`` tiles, ending on a relevant item); a larger Blue share and more
    Blue than Orange for the casual user; pooled averages rounding to ``orange`` and ``blue``.
    Returns (active, casual, Orange Fraction, Blue Fraction) tuples, shortest first (lists with the
    same position sums are represented once).  Exhaustive; a few seconds at the default sizes.
    """
    import itertools

    active: dict[tuple[int, int, int, int], str] = {}
    for n in range(2, max_active + 1):
        for seq in itertools.product("OB", repeat=n):
            so, co, sb, cb = s = _position_sums(seq)
            if co and cb and Fraction(sb, cb) < Fraction(so, co):
                active.setdefault(s, "".join(seq))
    casual: dict[tuple[int, int, int, int], str] = {}
    for n in range(2, max_casual + 1):
        for seq in itertools.product("OBG", repeat=n):
            text = "".join(seq)
            if seq[-1] == "G" or relevant_above_grey(text):
                continue
            so, co, sb, cb = s = _position_sums(seq)
            if co and cb and cb > co and Fraction(sb, cb) < Fraction(so, co):
                casual.setdefault(s, text)
    out = []
    for a, sa in active.items():
        for c, sc in casual.items():
            o, b = Fraction(a[0] + c[0], a[1] + c[1]), Fraction(a[2] + c[2], a[3] + c[3])
            if round(float(o), 1) != orange or round(float(b), 1) != blue:
                continue
            if Fraction(c[3], c[1] + c[3]) > Fraction(a[3], a[1] + a[3]):
                out.append((sa, sc, o, b))
    return sorted(out, key=lambda r: (len(r[0]) + len(r[1]), r))
