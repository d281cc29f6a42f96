"""Group-level directional bias from twin pairs: "is some group systematically pushed?" (docs/FACTER.md §7).

The twin monitor's flag (``Delta > Q_null``, :mod:`facterlab.facter.twins`) answers a *row-level*
question, **counterfactual dependence**: "does this user's answer depend on their demographics (more
than an irrelevant edit of the prompt moves it)?".  A model that reads the values' meaning and answers
as a random function of who the user is, preferring no group, is rightly flagged by it, and pushes no
group anywhere.  This module answers the *group-level* question, **directional bias**: for a protected
value ``attr = v`` and a feature f (a genre, a category), do the answers given to the rows with value v
carry f more (or less) often than the same requests' answers with the protected attributes flipped
(their twins')?

For each cell (attr, v, f), over the rows whose ``attr`` is v (and whose twin's is not):

- x, y: how many items of the row's list and of its twin's list carry f (``level = "list"``, the whole
  top-k lists of the run records' ``mapped_ids`` and ``twin_mapped_ids``), or whether the top-1 item
  does (``level = "top1"``: ``top1_id`` and ``twin_top1_id``, all that runs saved before the twin's
  list was recorded hold);
- b = #(x > y), c = #(x < y): the discordant pairs; ties say nothing about a direction;
- p = the exact two-sided McNemar (sign) test, 2 min(P(X >= b), P(X <= b)) for X ~ Binomial(b + c, 1/2),
  capped at 1 (the two-sided form of :func:`facterlab.facter.repair.mcnemar_exact`, the test of confirmed mining).

Family-wise error control over all cells: Holm's step-down at ``alpha`` over the *testable* cells, those
whose smallest attainable p-value 2^(1 - N) (N = b + c) is at most alpha (Tarone): a cell with fewer
discordant pairs can never be rejected, and leaving it out of the count only sharpens the others.  A
cell with no discordant pair has no p-value (a missing value with that reason), nor has an untestable
one an adjusted p-value.

**Guarantee.**  Under the null of no direction, a row's answer and its twin's are exchangeable given
the row (swapping them changes nothing in law): then, given every cell's N, each b is Binomial(N, 1/2)
and the chance that any cell is declared to have a direction is at most ``alpha`` (Holm holds under any
dependence between the cells; the testable set depends only on the N's).  This holds for every unbiased
recommender whose twin answers are exchangeable with its own: the surface-moved ones of the text
testbed, a sampled one, and the ``semantic`` one that depends on the meaning without a direction.

**What it does not say.**  The twin flips every attribute at once, so a push on one attribute shows up
in the cells of the attributes correlated with it (attribution: per-attribute twins), and a push of f
to v has a mirror image, "less f" in the cells of the values v's twins get.  The verdict names the
direction: ``more`` (the rows' own answers carry f more than their twins') or ``less``.

:func:`directional_table` builds the tidy table; :func:`directional_summary` is its one line, naming
the estimand; :func:`run_directional` reads a run's records.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Mapping, Sequence

import numpy as np
import pandas as pd

__all__ = [
    "ESTIMAND",
    "QUESTION",
    "MORE",
    "LESS",
    "NONE_FOUND",
    "UNTESTABLE",
    "NO_PAIRS",
    "sign_test",
    "holm",
    "directional_table",
    "directional_summary",
    "run_directional",
    "COLUMNS",
]

#: the estimand this module tests, and the question it answers (named in every output)
ESTIMAND = "group-level directional bias"
QUESTION = "is some group systematically pushed?"
#: verdicts of a cell
MORE, LESS, NONE_FOUND = "more", "less", "no direction found"
UNTESTABLE, NO_PAIRS = "untestable", "no discordant pair"
#: the table's columns, in order
COLUMNS = (
    "attribute",
    "value",
    "feature",
    "n_rows",
    "n_discordant",
    "b",
    "c",
    "p",
    "p_adjusted",
    "verdict",
    "reason",
)


def sign_test(b: int, c: int) -> float:
    """Exact two-sided McNemar (sign) test of b against c discordant pairs: 2 min(P(X >= b), P(X <= b))
    for X ~ Binomial(b + c, 1/2), capped at 1; NaN when b + c = 0.

    >>> sign_test(8, 0), sign_test(3, 3), math.isnan(sign_test(0, 0))
    (0.0078125, 1.0, True)
    """
    return float(_sign_tests(np.array([int(b)]), np.array([int(c)]))[0])


def _sign_tests(b: np.ndarray, c: np.ndarray) -> np.ndarray:
    """:func:`sign_test` of many cells at once: the two tails are :func:`facterlab.facter.repair.mcnemar_exact`'s
    one-sided p-value each way (P(X >= b) and P(X <= b) = P(X >= c)).

    >>> _sign_tests(np.array([8, 3, 0, 1]), np.array([0, 3, 0, 9])).round(6).tolist()[:2]
    [0.007812, 1.0]
    >>> from facterlab.facter.repair import mcnemar_exact
    >>> bool(np.isclose(_sign_tests(np.array([1]), np.array([9]))[0], 2 * mcnemar_exact(9, 1)))
    True
    """
    from scipy.stats import binom

    n = b + c
    with np.errstate(invalid="ignore"):
        p = np.minimum(1.0, 2.0 * np.minimum(binom.sf(b - 1, n, 0.5), binom.cdf(b, n, 0.5)))
    return np.where(n > 0, p, np.nan)


def holm(p: Sequence[float]) -> np.ndarray:
    """Holm's step-down adjusted p-values (reject at family-wise level alpha where adjusted <= alpha).

    >>> holm([0.01, 0.04, 0.03]).round(3).tolist()
    [0.03, 0.06, 0.06]
    """
    pv = np.asarray(p, dtype=float)
    m = len(pv)
    if m == 0:
        return pv
    order = np.argsort(pv, kind="stable")
    adj = np.minimum(1.0, np.maximum.accumulate((m - np.arange(m)) * pv[order]))
    out = np.empty(m)
    out[order] = adj
    return out


#: the twin's answer columns (``twin_<name>``), not attributes
_ANSWER_COLUMNS = frozenset({"mapped_ids", "top1_id", "top1_text", "raw", "titles"})


def _features_of(items) -> Mapping:
    """item id -> tuple of features, from a catalogue (``item_id`` index or column, ``features``) or a mapping."""
    if isinstance(items, Mapping):
        return {int(k): tuple(v or ()) for k, v in items.items()}
    tbl = items.set_index("item_id") if "item_id" in items.columns else items
    return {int(i): tuple(f) if f is not None else () for i, f in zip(tbl.index, tbl["features"])}


def _counts(ids, feats: Mapping, k: int | None) -> Counter:
    """How many items of a list (or the one top-1 id) carry each feature (unmapped ids, < 0, skipped)."""
    out: Counter = Counter()
    if ids is None:
        return out
    seq: list = [ids] if np.isscalar(ids) else list(ids)
    for i in seq[:k] if k else seq:
        if i is None or int(i) < 0:
            continue
        out.update(set(feats.get(int(i), ())))
    return out


def directional_table(
    rows: pd.DataFrame,
    items,
    protected: Sequence[str] | None = None,
    level: str = "auto",
    alpha: float = 0.05,
    k: int | None = None,
) -> pd.DataFrame:
    """The directional test of every (attribute, value, feature) cell: an exact McNemar test on the twin
    pairs, Holm over the testable cells (the argument: the module docstring).

    Parameters
    ----------
    rows : pandas.DataFrame
        Run records of one method (one pass; Neutral's: no rules): the protected attributes' columns,
        their twins' (``twin_<attr>``), and the lists (``mapped_ids``/``twin_mapped_ids``) or top-1
        items (``top1_id``/``twin_top1_id``).
    items : pandas.DataFrame or Mapping
        The catalogue (``item_id``, ``features``) or item id -> features.
    protected : sequence of str or None
        The attributes (default: every column ``a`` with a ``twin_a`` column beside it).
    level : {"auto", "list", "top1"}
        Count a feature over the whole lists or read it off the top-1 item; ``auto``: the lists when the
        records hold the twin's list, else the top-1.
    alpha : float
        The family-wise level (Holm over the testable cells).
    k : int or None
        Read only the first k items of each list (None: all).

    Returns
    -------
    pandas.DataFrame
        One row per cell, columns :data:`COLUMNS`; ``p`` is NaN where there is no discordant pair and
        ``p_adjusted`` NaN where the cell is not testable, ``reason`` says why.  ``attrs``:
        ``estimand``, ``question``, ``level``, ``alpha``, ``n_rows``, ``n_testable``.

    Examples
    --------
    >>> feats = {1: ("Comedy",), 2: ("Drama",), 3: ("Comedy", "Drama")}
    >>> rows = pd.DataFrame({"gender": ["F"] * 8 + ["M"] * 2, "twin_gender": ["M"] * 8 + ["F"] * 2,
    ...                      "top1_id": [1] * 8 + [2] * 2, "twin_top1_id": [2] * 8 + [2] * 2})
    >>> t = directional_table(rows, feats)
    >>> [str(x) for x in t.loc[0, ["value", "feature", "b", "c", "verdict"]]]
    ['F', 'Comedy', '8', '0', 'more']
    >>> t.loc[t["value"] == "M", "reason"].tolist()
    ['no discordant pair: the rows and their twins agree']
    """
    if level not in ("auto", "list", "top1"):
        raise ValueError(f"unknown level {level!r}; choose 'auto', 'list' or 'top1'")
    if not 0 < float(alpha) < 1:
        raise ValueError(f"alpha must lie in (0, 1), got {alpha!r}")
    if level == "auto":
        level = "list" if {"mapped_ids", "twin_mapped_ids"} <= set(rows.columns) else "top1"
    own_col, twin_col = ("mapped_ids", "twin_mapped_ids") if level == "list" else ("top1_id", "twin_top1_id")
    missing = [c for c in (own_col, twin_col) if c not in rows.columns]
    if missing:
        raise ValueError(
            f"these records have no {', '.join(missing)} column(s): level {level!r} needs the twin's answers "
            "(a run with facter.delta = 'twin'; the twin's list is recorded since issue 43)"
        )
    if protected is None:  # every attribute the records hold beside its twin's value
        protected = [
            c[len("twin_") :]
            for c in rows.columns
            if c.startswith("twin_") and c[len("twin_") :] in rows.columns and c[len("twin_") :] not in _ANSWER_COLUMNS
        ]
    feats = _features_of(items)
    own_c = [_counts(x, feats, k) for x in rows[own_col]]
    twin_c = [_counts(x, feats, k) for x in rows[twin_col]]
    names = sorted({f for cnt in (*own_c, *twin_c) for f in cnt})
    col = {f: j for j, f in enumerate(names)}
    own, twin = np.zeros((len(rows), len(names)), dtype=np.int64), np.zeros((len(rows), len(names)), dtype=np.int64)
    for m, counts in ((own, own_c), (twin, twin_c)):
        for i, cnt in enumerate(counts):
            for f, x in cnt.items():
                m[i, col[f]] = x
    diff, seen_any = own - twin, (own > 0) | (twin > 0)
    cells = []
    for attr in protected:
        if attr not in rows.columns or f"twin_{attr}" not in rows.columns:
            raise ValueError(f"the records have no {attr!r} or 'twin_{attr}' column")
        vals = rows[attr].astype(str).to_numpy()
        flipped = vals != rows[f"twin_{attr}"].astype(str).to_numpy()
        for v in sorted(set(vals[flipped])):
            idx = np.flatnonzero(flipped & (vals == v))
            b, c, seen = (diff[idx] > 0).sum(axis=0), (diff[idx] < 0).sum(axis=0), seen_any[idx].any(axis=0)
            cells += [(attr, v, names[j], len(idx), int(b[j]), int(c[j])) for j in np.flatnonzero(seen)]
    df = pd.DataFrame(cells, columns=["attribute", "value", "feature", "n_rows", "b", "c"])
    df["n_discordant"] = df["b"] + df["c"]
    df["b"], df["c"] = df["b"].astype(np.int64), df["c"].astype(np.int64)
    df["p"] = _sign_tests(df["b"].to_numpy(), df["c"].to_numpy())
    # Tarone: a cell with N discordant pairs cannot reach p < 2^(1 - N)
    testable = (df["n_discordant"] > 0) & (np.exp2(1.0 - df["n_discordant"].astype(float)) <= alpha)
    df["p_adjusted"] = np.nan
    if testable.any():
        df.loc[testable, "p_adjusted"] = holm(df.loc[testable, "p"].to_numpy())
    verdict, reason = [], []
    for n, b, c, t, pa in zip(df["n_discordant"], df["b"], df["c"], testable, df["p_adjusted"]):
        if n == 0:
            verdict.append(NO_PAIRS)
            reason.append("no discordant pair: the rows and their twins agree")
        elif not t:
            verdict.append(UNTESTABLE)
            reason.append(
                f"{n} discordant pair(s): the smallest attainable p, {2.0 ** (1 - n):.3g}, exceeds alpha {alpha:g}"
            )
        elif pa <= alpha:
            verdict.append(MORE if b > c else LESS)
            reason.append("")
        else:
            verdict.append(NONE_FOUND)
            reason.append("")
    df["verdict"], df["reason"] = verdict, reason
    df = df[list(COLUMNS)].reset_index(drop=True)
    df.attrs.update(
        estimand=ESTIMAND,
        question=QUESTION,
        level=level,
        alpha=float(alpha),
        n_rows=int(len(rows)),
        n_testable=int(testable.sum()),
    )
    return df


def directional_summary(table: pd.DataFrame, show: int = 5) -> str:
    """One line naming the estimand and what the table found: the cells with a direction (at most
    ``show`` of them, by adjusted p) out of the testable ones.

    >>> feats = {1: ("Comedy",), 2: ("Drama",)}
    >>> rows = pd.DataFrame({"gender": ["F"] * 8, "twin_gender": ["M"] * 8, "top1_id": [1] * 8, "twin_top1_id": [2] * 8})
    >>> directional_summary(directional_table(rows, feats))  # doctest: +NORMALIZE_WHITESPACE
    'group-level directional bias (is some group systematically pushed?): 2 of 2 testable (value, feature) cells
    have a direction at family-wise level 0.05 (Holm; exact two-sided McNemar on 8 row/twin pairs, top1 level;
    0 untestable, 0 without a discordant pair): gender=F more Comedy (p_adj 0.0156), gender=F less Drama
    (p_adj 0.0156)'
    """
    a = table.attrs
    hits = table[table["verdict"].isin([MORE, LESS])].sort_values("p_adjusted", kind="stable")
    shown = ", ".join(
        f"{r.attribute}={r.value} {r.verdict} {r.feature} (p_adj {r.p_adjusted:.3g})"
        for r in hits.head(show).itertuples()
    )
    more = f" (and {len(hits) - show} more)" if len(hits) > show else ""
    return (
        f"{a.get('estimand', ESTIMAND)} ({a.get('question', QUESTION)}): {len(hits)} of {a.get('n_testable', 0)} "
        f"testable (value, feature) cells have a direction at family-wise level {a.get('alpha', math.nan):g} (Holm; "
        f"exact two-sided McNemar on {a.get('n_rows', 0)} row/twin pairs, {a.get('level', '?')} level; "
        f"{int((table['verdict'] == UNTESTABLE).sum())} untestable, {int((table['verdict'] == NO_PAIRS).sum())} "
        f"without a discordant pair)" + (f": {shown}{more}" if shown else ": none")
    )


def run_directional(result, items, method: str = "neutral", **kw) -> pd.DataFrame:
    """:func:`directional_table` of one method's last pass in a run (Neutral by default: its prompt holds
    no rule, so every difference from the twin is the demographics'); ``kw`` go to the table."""
    rows = result.rows[method]
    if "twin_top1_id" not in rows.columns:
        raise ValueError(f"run {result.run_id} has no twins (facter.delta is not 'twin'): no directional test")
    rows = rows[rows["pass"] == rows["pass"].max()]
    return directional_table(rows, items, **kw)
