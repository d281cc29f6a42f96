"""Simpson audit of your own exposure log (docs/SIMPSON.md §7, "Auditing your own exposure log").

A log has one row per (user, item) pair: the user, the item, the item's group, its position in the
user's ranked list (or its exposure) and its relevance.  Optional: a propensity per row, or a flag
marking the one item shown to each user at random (the paper's random experiment).  :func:`audit`
validates the log before any work, then computes on it

- the PerUserGap and the AggregateGap (:mod:`facterlab.simpson.gaps`), their three-factor
  decomposition, and whether their signs disagree (Simpson's reversal);
- IPS estimates of the per-user gap from the experiment rows (:mod:`facterlab.simpson.ips`) and the
  naive estimate beside them;
- 95% percentile intervals from one bootstrap over users (the same resampled users for every
  quantity; fixed seed).

Gaps are group 0 minus group 1 in pp (100 x a difference of mean exposures), or in positions for
``exposure="position"`` (then a positive gap means group 0 sits *lower* in the lists).

>>> log = pd.DataFrame({"user_id": ["a", "a", "b", "b"], "item_id": [1, 2, 1, 2], "group": ["x", "y", "x", "y"],
...                     "position": [1, 2, 2, 1], "relevance": [1, 1, 1, 1]})
>>> res = audit(log, min_count=1, n_boot=50)
>>> res.per_user.value, res.groups
(0.0, ('x', 'y'))
"""

from __future__ import annotations

import difflib
import json
import logging
import math
import os
from dataclasses import dataclass, field
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pandas as pd

from facterlab.data.textfiles import read_delimited, read_parquet
from facterlab.simpson import ips as ips_mod
from facterlab.simpson.exposure import EXPOSURES
from facterlab.simpson.gaps import (
    AggregateGap,
    Decomposition,
    PerUserGap,
    UserStats,
    aggregate_gap,
    decompose,
    per_user_gap,
)

log = logging.getLogger(__name__)

#: role -> default column name
DEFAULT_COLUMNS = {
    "user": "user_id",
    "item": "item_id",
    "group": "group",
    "position": "position",
    "relevance": "relevance",
}
#: role -> command-line flag that maps it
FLAGS = {
    "user": "--user-col",
    "item": "--item-col",
    "group": "--group-col",
    "position": "--position-col",
    "relevance": "--relevance-col",
    "exposure": "--exposure-col",
    "propensity": "--propensity-col",
    "random": "--random-col",
}
FORMATS = ("csv", "tsv", "parquet", "recbole")
SUFFIXES = {".csv": "csv", ".tsv": "tsv", ".tab": "tsv", ".parquet": "parquet", ".pq": "parquet", ".inter": "recbole"}
#: the exposure functions f(position) of ``--exposure``
EXPOSURE_CHOICES = tuple(EXPOSURES)
IPS_USERS = ("both", "all")
JSON_NAME = "simpson_audit.json"
USERS_NAME = "simpson_audit_users.csv"
FIGURE_NAME = "simpson_audit.png"


class LogError(ValueError):
    """A log that cannot be audited: one line naming the file, the column and what to do."""


# ------------------------------------------------------------------------------------------- reading
def read_log(path: os.PathLike | str, fmt: str | None = None) -> pd.DataFrame:
    """Read an exposure log: CSV, TSV, parquet or a RecBole atomic ``.inter`` file.

    The format comes from the suffix (``.csv``; ``.tsv``/``.tab``; ``.parquet``/``.pq``; ``.inter``)
    unless ``fmt`` names it.  Text files must be UTF-8 (a BOM is allowed): a byte that is not is a
    :class:`LogError` naming the file and its byte offset.  Every field of a text file is read as text
    (so ids such as ``007`` and ``7`` stay distinct; :func:`audit` converts positions, relevance and
    propensities to numbers, with a one-line error for a value that is not one); an empty field is
    missing.  RecBole headers ``name:type`` lose their ``:type`` suffix.  ``attrs["source"]`` holds the path and
    ``attrs["first_line"]`` the file line of the first row (text formats; None for parquet).

    >>> import tempfile
    >>> p = Path(tempfile.mkdtemp()) / "log.inter"
    >>> _ = p.write_text("user_id:token\\titem_id:token\\tgroup:token\\tposition:float\\trelevance:float\\nu1\\t7\\tA\\t1\\t1\\n")
    >>> df = read_log(p); list(df.columns), df["item_id"].tolist()
    (['user_id', 'item_id', 'group', 'position', 'relevance'], ['7'])
    >>> _ = p.write_bytes(b"user_id\\tgroup\\nu\\xe9\\tA\\n")
    >>> read_log(p, "tsv")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    facterlab.simpson.auditing.LogError: .../log.inter: byte 0xe9 at offset 15 (line 2) is not UTF-8; ...
    """
    path = Path(path)
    kind = fmt or SUFFIXES.get(path.suffix.lower())
    if kind not in FORMATS:
        raise LogError(
            f"{path}: unknown log format {fmt or path.suffix or '(no suffix)'!r}; "
            f"use a suffix of {', '.join(SUFFIXES)} or --format {'|'.join(FORMATS)}"
        )
    if not path.is_file():
        raise FileNotFoundError(f"{path}: no such log file")
    if kind == "parquet":
        df = read_parquet(path, LogError)
        df.attrs.update(source=str(path), first_line=None, format=kind)
        return df
    df = read_delimited(path, "," if kind == "csv" else "\t", LogError, kind)
    if kind == "recbole":
        names = [str(c).split(":", 1)[0] for c in df.columns]
        dups = sorted({n for n in names if names.count(n) > 1})
        if dups:
            raise LogError(f"{path}: RecBole header names {dups} twice after dropping the ':type' suffixes")
        df.columns = names
    df.attrs.update(source=str(path), first_line=2, format=kind)
    return df


def log_from_simulation(sim, experiment=None) -> pd.DataFrame:
    """A simulated world (:func:`facterlab.simpson.simulate.simulate`) as an exposure log: one row per
    (user, item) with the default columns, and ``shown_at_random`` (1 on the item the random experiment
    showed the user, when ``experiment`` is given).  An example of the log format, and a log whose true
    gaps are known.

    >>> from facterlab.simpson.simulate import SimpsonConfig, simulate
    >>> log = log_from_simulation(simulate(SimpsonConfig(n_users=3, seed=0)))
    >>> log.shape, list(log.columns)
    ((300, 6), ['user_id', 'item_id', 'group', 'position', 'relevance', 'shown_at_random'])
    """
    n, m = sim.positions.shape
    users, items = np.repeat(np.arange(n), m), np.tile(np.arange(m), n)
    shown = np.zeros((n, m), dtype=np.int8)
    if experiment is not None:
        shown[np.arange(n), np.asarray(experiment.shown)] = 1
    return pd.DataFrame(
        {
            "user_id": users,
            "item_id": items,
            "group": np.asarray(sim.groups)[items],
            "position": sim.positions.ravel(),
            "relevance": sim.relevant.ravel().astype(np.int8),
            "shown_at_random": shown.ravel(),
        }
    )


# ---------------------------------------------------------------------------------------- validation
def _where(df: pd.DataFrame, i: int) -> str:
    """Where row ``i`` (0-based) sits: a file line for text logs, else a row number."""
    first = df.attrs.get("first_line")
    return f"line {first + i}" if first else f"row {i}"


def _py(v):
    """A numpy scalar as the Python value (so that messages show ``1``, not ``np.int64(1)``)."""
    return v.item() if isinstance(v, np.generic) else v


def _label(v) -> str:
    """A group value as ``--groups`` spells it: ``1.0`` (an int column with a gap, read as floats) as ``1``."""
    v = _py(v)
    return str(int(v)) if isinstance(v, float) and v.is_integer() else str(v)


def _source(df: pd.DataFrame) -> str:
    return str(df.attrs.get("source") or "log")


def _resolve_columns(df: pd.DataFrame, wanted: dict) -> None:
    """Every wanted column exists; else one line naming each missing one, its closest match and the flag."""
    cols = [str(c) for c in df.columns]
    problems = []
    for role, name in wanted.items():
        if name is None or name in cols:
            continue
        same_case = [c for c in cols if c.lower() == str(name).lower()]
        close = same_case or difflib.get_close_matches(str(name), cols, n=1, cutoff=0.6)
        hint = (
            f"closest: {close[0]!r}; map it with {FLAGS[role]} {close[0]}"
            if close
            else f"map it with {FLAGS[role]} NAME"
        )
        problems.append(f"no column {name!r} for the {role} ({hint})")
    if problems:
        shown = ", ".join(cols[:12]) + (", ..." if len(cols) > 12 else "")
        raise LogError(f"{_source(df)}: {'; '.join(problems)}; the log's columns: {shown}")


def _numeric(df: pd.DataFrame, col: str, role: str, booleans: bool = False) -> np.ndarray:
    """The column as floats (``booleans``: the texts true/false as 1/0 too); a value that is not a number
    is a one-line error naming its line.  Missing values stay NaN."""
    raw = df[col]
    if booleans and (raw.dtype == object or pd.api.types.is_string_dtype(raw)):
        low = raw.astype(str).str.strip().str.lower()
        raw = raw.where(~low.isin(["true", "false"]), (low == "true").astype(float))
    num = pd.to_numeric(raw, errors="coerce") if raw.dtype != bool else raw.astype(float)
    num = pd.Series(np.asarray(num, dtype=float), index=raw.index)
    bad = np.flatnonzero(num.isna().to_numpy() & raw.notna().to_numpy())
    if bad.size:
        i = int(bad[0])
        more = f" (and {bad.size - 1} more)" if bad.size > 1 else ""
        raise LogError(
            f"{_source(df)}: {role} column {col!r} is not numeric: {_py(raw.iloc[i])!r} at {_where(df, i)}{more}"
        )
    return num.to_numpy()


def _no_missing(df: pd.DataFrame, values: np.ndarray, col: str, role: str, what_to_do: str) -> None:
    miss = np.flatnonzero(np.isnan(values))
    if miss.size:
        raise LogError(
            f"{_source(df)}: {role} column {col!r} is empty in {miss.size} row(s), first at "
            f"{_where(df, int(miss[0]))}; {what_to_do}"
        )


def _group_codes(df: pd.DataFrame, col: str, groups) -> tuple:
    """(codes 0/1 or -1 for rows left out, (label 0, label 1), number of rows left out)."""
    raw = df[col]
    present = raw.dropna()
    values = [_py(v) for v in pd.unique(present)]
    src = _source(df)
    if groups is not None:
        groups = [str(g) for g in groups]
        if len(groups) != 2 or groups[0] == groups[1]:
            raise LogError(f"--groups needs two different values, e.g. --groups A,B; got {','.join(groups)!r}")
        as_text = raw.map(lambda v: None if pd.isna(v) else _label(v))
        found = set(as_text.dropna())
        unknown = [g for g in groups if g not in found]
        if unknown:
            shown = ", ".join(repr(str(v)) for v in sorted(found, key=str)[:10])
            raise LogError(f"{src}: group column {col!r} has no value {unknown[0]!r} (its values: {shown})")
        codes = np.where(as_text == groups[0], 0, np.where(as_text == groups[1], 1, -1))
        return codes, (groups[0], groups[1]), int((codes == -1).sum())
    if raw.isna().any():
        i = int(np.flatnonzero(raw.isna().to_numpy())[0])
        raise LogError(
            f"{src}: group column {col!r} is empty in {int(raw.isna().sum())} row(s), first at {_where(df, i)}; "
            "fill it, or pass --groups A,B to keep only the rows of two groups"
        )
    if len(values) < 2:
        raise LogError(
            f"{src}: group column {col!r} has one value ({values[0]!r}) in every row; the gaps compare two "
            "item groups (is it the item's group? map the right column with --group-col NAME)"
            if values
            else f"{src}: the log has no rows"
        )
    if len(values) > 2:
        shown = ", ".join(repr(v) for v in sorted(values, key=str)[:8]) + (", ..." if len(values) > 8 else "")
        raise LogError(
            f"{src}: group column {col!r} has {len(values)} values ({shown}); the gaps compare two groups: "
            f"pass --groups A,B to pick the pair (rows of other groups are left out), or map the column to "
            f"two values first"
        )
    try:
        ordered = sorted(values)
    except TypeError:  # mixed types
        ordered = sorted(values, key=str)
    codes = np.where(raw == ordered[0], 0, 1)
    return codes, (ordered[0], ordered[1]), 0


def _flag(df: pd.DataFrame, col: str) -> np.ndarray:
    """A 0/1 / true/false column as bool; anything else is a one-line error."""
    raw = df[col]
    if pd.api.types.is_numeric_dtype(raw) or pd.api.types.is_bool_dtype(raw):
        num = raw.to_numpy(dtype=float, na_value=0.0)
        bad = np.flatnonzero(~np.isin(num, (0.0, 1.0)))
        if bad.size:
            i = int(bad[0])
            raise LogError(
                f"{_source(df)}: random-item column {col!r} must be 0/1 or true/false; got {num[i]:g} at {_where(df, i)}"
            )
        return num == 1.0
    text = raw.astype(str).str.strip().str.lower().where(raw.notna(), "")
    ok = {
        "1": True,
        "1.0": True,
        "true": True,
        "yes": True,
        "0": False,
        "0.0": False,
        "false": False,
        "no": False,
        "": False,
    }
    bad = np.flatnonzero(~text.isin(list(ok)).to_numpy())
    if bad.size:
        i = int(bad[0])
        raise LogError(
            f"{_source(df)}: random-item column {col!r} must be 0/1 or true/false; got {_py(raw.iloc[i])!r} at {_where(df, i)}"
        )
    return text.map(ok).to_numpy(dtype=bool)


# -------------------------------------------------------------------------------------------- result
def _missing(reason: str) -> dict:
    return {"value": None, "missing_reason": reason}


@dataclass
class Interval:
    """A 95% interval, or a missing one with its reason."""

    lo: float = float("nan")
    hi: float = float("nan")
    missing_reason: str | None = None


@dataclass
class AuditResult:
    """What :func:`audit` found in one log.  Gap values are in :attr:`unit` (pp, or positions).

    ``per_user`` / ``aggregate`` are the gaps of :mod:`facterlab.simpson.gaps` in exposure units (not
    scaled); :meth:`table` and :meth:`to_json` scale them to :attr:`unit`.
    """

    source: str
    format: str
    columns: dict
    exposure: str
    groups: tuple
    n_rows: int
    n_users: int
    n_items: int
    n_left_out: int
    stats: UserStats = field(repr=False)
    per_user: PerUserGap = field(repr=False)
    aggregate: AggregateGap = field(repr=False)
    decomposition: Decomposition | None = field(repr=False)
    decomposition_missing: str | None
    intervals: dict = field(repr=False)
    ips: list = field(repr=False)
    interval_method: str
    min_count: int
    warnings: list = field(default_factory=list)

    @property
    def scale(self) -> float:
        """100 (pp) for the log and given exposures, 1 (positions) for ``exposure="position"``."""
        return 1.0 if self.exposure == "position" else 100.0

    @property
    def unit(self) -> str:
        """``"pp"`` or ``"positions"``."""
        return "positions" if self.exposure == "position" else "pp"

    @property
    def reversal(self) -> bool | None:
        """True when the PerUserGap and the AggregateGap are both non-zero with opposite signs (Simpson's
        reversal); None when either is missing."""
        p, a = self.per_user.value, self.aggregate.value
        if not (math.isfinite(p) and math.isfinite(a)):
            return None
        return bool(p != 0 and a != 0 and (p > 0) != (a > 0))

    @property
    def reversal_clear(self) -> bool | None:
        """A reversal whose two intervals each exclude 0 (None when there is no reversal to judge or an
        interval is missing)."""
        if not self.reversal:
            return None
        ci = [c for c in (self.intervals.get(k) for k in ("per_user_gap", "aggregate_gap")) if c is not None]
        if len(ci) < 2 or any(c.missing_reason for c in ci):
            return None
        return all(c.lo > 0 or c.hi < 0 for c in ci)

    def reversal_text(self) -> str:
        """The reversal verdict in words."""
        r = self.reversal
        if r is None:
            return "not judged: " + (
                self.per_user.missing_reason or self.aggregate.missing_reason or "a gap is missing"
            )
        if not r:
            return "no: the PerUserGap and the AggregateGap have the same sign (or one is 0)"
        clear = self.reversal_clear
        how = (
            "both 95% intervals exclude 0"
            if clear
            else "not clear: an interval covers 0"
            if clear is False
            else "intervals missing"
        )
        return f"YES (Simpson's reversal): the PerUserGap and the AggregateGap have opposite signs; {how}"

    def _rows(self) -> list:
        s = self.scale
        rows = []

        def add(name, value, ci, n, note, reason=None):
            ok = value is not None and math.isfinite(value)
            rows.append(
                {
                    "quantity": name,
                    "value": float(value * s) if ok else None,
                    "lo": float(ci.lo * s) if ok and ci is not None and not ci.missing_reason else None,
                    "hi": float(ci.hi * s) if ok and ci is not None and not ci.missing_reason else None,
                    "n": n,
                    "note": (reason if not ok else note)
                    + (
                        f"; interval missing: {ci.missing_reason}"
                        if ok and ci is not None and ci.missing_reason
                        else ""
                    ),
                }
            )

        pu, ag = self.per_user, self.aggregate
        add(
            "PerUserGap",
            pu.value,
            self.intervals.get("per_user_gap"),
            pu.n_defined,
            f"users with relevant items of both groups: {pu.n_defined} of {pu.n_users}",
            pu.missing_reason,
        )
        add(
            "AggregateGap",
            ag.value,
            self.intervals.get("aggregate_gap"),
            ag.n_pairs_0 + ag.n_pairs_1,
            f"relevant pairs pooled: {ag.n_pairs_0} of group 0, {ag.n_pairs_1} of group 1",
            ag.missing_reason,
        )
        d = self.decomposition
        reason = self.decomposition_missing or ""
        add("  competition x performance term", d.competition_performance if d else None, None, None,
            "E_P0(C Perf) - E_P1(C Perf)", reason)  # fmt: skip
        add("  per-user gap term", d.per_user_gap_term if d else None, None, None,
            "E_P0(pi_1 G) + E_P1(pi_0 G)", reason)  # fmt: skip
        for e in self.ips:
            add(
                e["name"],
                e["value"],
                e["interval"],
                e["n_0"] + e["n_1"] if e["n_0"] is not None else None,
                f"estimates the {e['estimand']}; observed relevant rows {e['n_0']} + {e['n_1']}",
                e["missing_reason"],
            )
        return rows

    def table(self) -> pd.DataFrame:
        """One row per quantity: ``value``, ``lo``, ``hi`` (95% interval) in :attr:`unit`, ``n`` and a
        ``note`` (the reason where a value or interval is missing).

        >>> log = pd.DataFrame({"user_id": [1, 1, 2, 2], "item_id": [1, 2, 1, 2], "group": [0, 1, 0, 1],
        ...                     "position": [1, 2, 1, 2], "relevance": [1, 1, 1, 1]})
        >>> row = audit(log, n_boot=20).table().loc[0]
        >>> row["quantity"], float(round(row["value"], 2)), row["lo"], row["note"]  # 100 x (1 - 1/log2(3)); 2 users < 10
        ('PerUserGap', 36.91, None, 'users with relevant items of both groups: 2 of 2; interval missing: 2 user(s) with relevant items of both groups, fewer than min_count 10')
        """
        return pd.DataFrame(self._rows(), columns=["quantity", "value", "lo", "hi", "n", "note"])

    def per_user_table(self) -> pd.DataFrame:
        """Per user: ``n_0``, ``n_1`` (relevant items per group), ``e_0``, ``e_1`` (their mean
        exposure, not scaled) and ``gap`` = e_0 - e_1 in :attr:`unit` (empty where the user lacks a group)."""
        st, s = self.stats, self.scale
        return pd.DataFrame(
            {
                "user": st.users,
                "n_0": st.n0,
                "n_1": st.n1,
                "e_0": st.e0,
                "e_1": st.e1,
                "gap": self.per_user.per_user * s,
            }
        )

    def to_dict(self) -> dict:
        """The JSON form: every value in :attr:`unit`; a missing one is ``{"value": null, "missing_reason": ...}``."""

        def num(x):
            return None if x is None or not math.isfinite(x) else float(x)

        def entry(value, reason, ci, **extra):
            if value is None or not math.isfinite(value):
                return {**_missing(reason or "not computed"), **extra}
            out = {"value": value * self.scale, **extra}
            if ci is not None:
                out["interval"] = (
                    _missing(ci.missing_reason) if ci.missing_reason else [ci.lo * self.scale, ci.hi * self.scale]
                )
            return out

        pu, ag, d = self.per_user, self.aggregate, self.decomposition
        return {
            "source": self.source,
            "format": self.format,
            "columns": self.columns,
            "exposure": self.exposure,
            "unit": self.unit,
            "sign": "group 0 minus group 1",
            "groups": {"0": str(self.groups[0]), "1": str(self.groups[1])},
            "n_rows": self.n_rows,
            "n_rows_left_out": self.n_left_out,
            "n_users": self.n_users,
            "n_items": self.n_items,
            "per_user_gap": entry(
                pu.value,
                pu.missing_reason,
                self.intervals.get("per_user_gap"),
                n_users_both_groups=pu.n_defined,
                share_users_both_groups=num(pu.share_defined),
            ),  # fmt: skip
            "aggregate_gap": entry(
                ag.value,
                ag.missing_reason,
                self.intervals.get("aggregate_gap"),
                n_pairs_0=ag.n_pairs_0,
                n_pairs_1=ag.n_pairs_1,
            ),  # fmt: skip
            "decomposition": (
                {
                    "competition_performance": d.competition_performance * self.scale,
                    "per_user_gap_term": d.per_user_gap_term * self.scale,
                    "total": d.total * self.scale,
                }
                if d is not None
                else _missing(self.decomposition_missing or "not computed")
            ),
            "ips": [
                entry(
                    e["value"],
                    e["missing_reason"],
                    e["interval"],
                    name=e["name"],
                    method=e["method"],
                    estimand=e["estimand"],
                    rows=e["rows"],
                    n_0=e["n_0"],
                    n_1=e["n_1"],
                )  # fmt: skip
                for e in self.ips
            ],
            "reversal": {"value": self.reversal, "clear": self.reversal_clear, "text": self.reversal_text()},
            "interval_method": self.interval_method,
            "min_count": self.min_count,
            "warnings": list(self.warnings),
        }

    def to_json(self, indent: int | None = 2) -> str:
        """:meth:`to_dict` as JSON text."""
        return json.dumps(self.to_dict(), indent=indent, allow_nan=False)

    def figure(self, title: str = ""):
        """The report figure (:func:`plot_audit`)."""
        return plot_audit(self, title=title)

    def save(self, out_dir: os.PathLike | str, figure: bool = True) -> list:
        """Write ``simpson_audit.json``, ``simpson_audit_users.csv`` and (``figure``, matplotlib
        installed) ``simpson_audit.png`` into ``out_dir``; return the paths written."""
        out = Path(out_dir)
        out.mkdir(parents=True, exist_ok=True)
        paths = [out / JSON_NAME, out / USERS_NAME]
        paths[0].write_text(self.to_json() + "\n", encoding="utf-8")
        self.per_user_table().to_csv(paths[1], index=False)
        if figure:
            try:
                import matplotlib

                matplotlib.use("Agg", force=False)
            except ImportError:
                msg = "figure not written: matplotlib is not installed (pip install 'facterlab[notebooks]')"
                log.warning(msg)
                self.warnings.append(msg)
                return paths
            import matplotlib.pyplot as plt

            fig = self.figure()
            fig.savefig(out / FIGURE_NAME, bbox_inches="tight")
            plt.close(fig)
            paths.append(out / FIGURE_NAME)
        return paths


# -------------------------------------------------------------------------------------------- audit
def audit(
    log_or_path,
    *,
    user_col: str = "user_id",
    item_col: str = "item_id",
    group_col: str = "group",
    position_col: str = "position",
    relevance_col: str = "relevance",
    exposure_col: str | None = None,
    propensity_col: str | None = None,
    random_col: str | None = None,
    groups=None,
    exposure: str = "log",
    relevant_min: float | None = None,
    ips_users: str = "both",
    n_boot: int = 1000,
    seed: int = 0,
    min_count: int = 10,
    fmt: str | None = None,
) -> AuditResult:
    """Simpson audit of an exposure log (a path or a DataFrame): gaps, decomposition, IPS, reversal.

    Parameters
    ----------
    log_or_path : str, Path or pandas.DataFrame
        The log, one row per (user, item); a file is read by :func:`read_log` (``fmt`` overrides the
        suffix).
    user_col, item_col, group_col, position_col, relevance_col : str
        Column names (defaults ``user_id``, ``item_id``, ``group``, ``position``, ``relevance``).
    exposure_col : str, optional
        A column of exposure values (>= 0) to use as they are, instead of f(position); then no position
        column is read and the decomposition (which needs f) is missing.
    propensity_col : str, optional
        P(Rel = 1 | user, S = the row's group): the chance that an item of this group shown to this user
        at random is relevant (the paper's h_s(u)).  IPS weights a row by 1/propensity.  Without
        ``random_col`` the rows with a propensity are the experiment.
    random_col : str, optional
        0/1 flag of the item shown to the user at random; those rows are the experiment.  Without a
        propensity, the weight is 1 / (the user's relevance rate among their logged items of the row's
        group): exact when the log lists every item for every user.
    groups : pair, optional
        The two group values to compare (the first is group 0); other rows are left out, with a warning.
        Without it the column must hold exactly two values (0/1, else sorted: the first is group 0).
    exposure : {"log", "position"}
        f(position): 1/log2(1 + p) (default) or p itself.
    relevant_min : float, optional
        Graded relevance: values >= this count as relevant.  Without it relevance must be 0/1.
    ips_users : {"both", "all"}
        ``"both"``: experiment rows of users whose log has relevant items of both groups only (the
        estimand is then the PerUserGap); ``"all"``: every user (mean e_0 over users with a relevant
        group-0 item minus the same for group 1).
    n_boot, seed : int
        Bootstrap over users: resamples and seed of the 95% percentile intervals.
    min_count : int
        Fewer users (an interval) or observed relevant rows per group (an IPS estimate) than this gives a
        missing value with its reason.

    Returns
    -------
    AuditResult
        With :meth:`~AuditResult.table`, :meth:`~AuditResult.to_json`, :meth:`~AuditResult.figure`.

    Examples
    --------
    The toy example of docs/SIMPSON.md §4 (average position: a higher value is a lower place):

    >>> from facterlab.simpson.toy import toy_table
    >>> t = toy_table().rename(columns={"user": "user_id", "item": "item_id", "relevant": "relevance"})
    >>> r = audit(t, exposure="position", min_count=1, n_boot=100)
    >>> round(r.per_user.value, 3), round(r.aggregate.value, 3), r.reversal
    (1.8, -0.333, True)
    """
    if exposure not in EXPOSURES:
        raise LogError(
            f"unknown exposure {exposure!r}; choose one of {', '.join(EXPOSURES)} (or pass an exposure column)"
        )
    if ips_users not in IPS_USERS:
        raise LogError(f"ips_users must be one of {', '.join(IPS_USERS)}; got {ips_users!r}")
    if not 0 <= n_boot <= 100_000 or min_count < 1:
        raise LogError(f"n_boot must be in 0..100000 and min_count >= 1; got {n_boot} and {min_count}")
    if isinstance(log_or_path, pd.DataFrame):
        df = log_or_path
        fmt_name = "dataframe"
    else:
        df = read_log(log_or_path, fmt)
        fmt_name = str(df.attrs.get("format"))
    src = _source(df)
    columns = {
        "user": user_col,
        "item": item_col,
        "group": group_col,
        "position": None if exposure_col else position_col,
        "exposure": exposure_col,
        "relevance": relevance_col,
        "propensity": propensity_col,
        "random": random_col,
    }
    _resolve_columns(df, {k: v for k, v in columns.items()})
    if len(df) == 0:
        raise LogError(f"{src}: the log has no rows")
    warnings: list = []

    for role, col in (("user", user_col), ("item", item_col)):
        empty = np.flatnonzero(df[col].isna().to_numpy())
        if empty.size:
            raise LogError(
                f"{src}: {role} column {col!r} is empty in {empty.size} row(s), first at {_where(df, int(empty[0]))}; "
                f"every row needs its {role}"
            )
    codes, labels, n_out = _group_codes(df, group_col, groups)
    pos_col = exposure_col or position_col
    pos = _numeric(df, pos_col, "exposure" if exposure_col else "position")
    _no_missing(df, pos, pos_col, "exposure" if exposure_col else "position",
                "every row needs one (leave items that were not ranked out of the log)")  # fmt: skip
    if exposure_col:
        if np.any(pos < 0):
            i = int(np.flatnonzero(pos < 0)[0])
            raise LogError(f"{src}: exposure column {exposure_col!r} is negative ({pos[i]}) at {_where(df, i)}")
    elif np.any(pos < 1):
        i = int(np.flatnonzero(pos < 1)[0])
        raise LogError(
            f"{src}: position column {position_col!r} holds {pos[i]:g} at {_where(df, i)}; positions count from 1 "
            f"(0-based ranks: add 1; exposure values: pass {FLAGS['exposure']} {position_col})"
        )
    rel_raw = _numeric(df, relevance_col, "relevance", booleans=True)
    _no_missing(df, rel_raw, relevance_col, "relevance", "every row needs one (leave unjudged items out of the log)")
    if relevant_min is None:
        bad = np.flatnonzero(~np.isin(rel_raw, (0.0, 1.0)))
        if bad.size:
            i = int(bad[0])
            raise LogError(
                f"{src}: relevance column {relevance_col!r} must be 0 or 1; got {rel_raw[i]:g} at {_where(df, i)} "
                f"(graded relevance: pass --relevant-min V to count values >= V as relevant)"
            )
        relevant = rel_raw == 1.0
    else:
        relevant = rel_raw >= relevant_min
    dup = df.duplicated([user_col, item_col], keep=False).to_numpy()
    if dup.any():
        idx = np.flatnonzero(dup)
        first = idx[0]
        key = (_py(df[user_col].iloc[first]), _py(df[item_col].iloc[first]))
        same = idx[(df[user_col].iloc[idx] == key[0]).to_numpy() & (df[item_col].iloc[idx] == key[1]).to_numpy()]
        n_extra = int(df.duplicated([user_col, item_col]).sum())
        raise LogError(
            f"{src}: {n_extra} duplicate (user, item) row(s); first: user {key[0]!r}, item {key[1]!r} at "
            f"{_where(df, int(same[0]))} and {_where(df, int(same[1]))}; the gaps need one row per pair "
            "(keep one impression per pair, e.g. the best position)"
        )
    rand = _flag(df, random_col) if random_col else None
    prop = None
    if propensity_col:
        prop = _numeric(df, propensity_col, "propensity")
        in_exp = rand if rand is not None else ~np.isnan(prop)
        need = in_exp & relevant & (codes >= 0)
        bad = np.flatnonzero(need & ~((prop > 0) & (prop <= 1)))
        if bad.size:
            i = int(bad[0])
            raise LogError(
                f"{src}: propensity column {propensity_col!r} must be in (0, 1] on the experiment's relevant "
                f"rows; got {prop[i]} at {_where(df, i)}"
            )

    # ------------------------------------------------------------------ the work starts here
    keep = codes >= 0
    if n_out:
        msg = f"{n_out} row(s) of groups other than {labels[0]!r} and {labels[1]!r} left out (--groups)"
        warnings.append(msg)
    table = pd.DataFrame(
        {
            "user": df[user_col].to_numpy()[keep],
            "item": df[item_col].to_numpy()[keep],
            "group": codes[keep],
            "relevant": relevant[keep],
            "position": pos[keep],
        }
    )
    exp_f = _given if exposure_col else EXPOSURES[exposure]
    st = UserStats.from_table(table, exposure=_given if exposure_col else exposure)
    pu, ag = per_user_gap(st), aggregate_gap(st)
    dec, dec_missing = None, None
    if exposure_col:
        dec_missing = "the competition C(u) needs f(position); the log gives exposure values (--exposure-col)"
    elif ag.missing_reason:
        dec_missing = ag.missing_reason
    else:
        dec = decompose(st)
    if pu.n_defined < min_count:
        warnings.append(
            f"only {pu.n_defined} user(s) have relevant items of both groups: the PerUserGap rests on few users"
        )

    codes_u = pd.Index(st.users).get_indexer(table["user"])
    how = f"95% percentile bootstrap over users ({n_boot} resamples, seed {seed}; every quantity on the same resamples)"
    specs: dict = {}
    intervals = {
        "per_user_gap": _spec_per_user(st, specs, min_count),
        "aggregate_gap": _spec_aggregate(st, specs, min_count),
    }
    values = np.asarray(exp_f(pos[keep]), dtype=float)
    ips_rows = _ips(
        table, values, codes_u, st, rand[keep] if rand is not None else None,
        prop[keep] if prop is not None else None, ips_users, specs, min_count,
    )  # fmt: skip
    samples = _bootstrap(specs, st.n_users, n_boot, seed)
    for key, ci in list(intervals.items()) + [(e["name"], e["interval"]) for e in ips_rows]:
        if ci is not None and ci.missing_reason is None:
            done = _percentile(samples[key], key)
            ci.lo, ci.hi, ci.missing_reason = done.lo, done.hi, done.missing_reason
    if rand is not None:
        per = np.bincount(codes_u[rand[keep]], minlength=st.n_users)
        if (per > 1).any():
            warnings.append(
                f"{int((per > 1).sum())} user(s) have more than one random-item row; each row counts, and the "
                "bootstrap resamples users"
            )
    for w in warnings:
        log.warning(w)
    return AuditResult(
        source=src,
        format=fmt_name,
        columns={k: v for k, v in columns.items() if v is not None},
        exposure="given" if exposure_col else exposure,
        groups=labels,
        n_rows=int(len(df)),
        n_users=st.n_users,
        n_items=int(table["item"].nunique()),
        n_left_out=n_out,
        stats=st,
        per_user=pu,
        aggregate=ag,
        decomposition=dec,
        decomposition_missing=dec_missing,
        intervals=intervals,
        ips=ips_rows,
        interval_method=how,
        min_count=min_count,
        warnings=warnings,
    )


def _given(x) -> np.ndarray:
    """The identity: exposure values given in the log (``--exposure-col``)."""
    return np.asarray(x, dtype=float)


def _percentile(samples: np.ndarray, what: str) -> Interval:
    if samples.size == 0:
        return Interval(missing_reason="no bootstrap resamples (n_boot = 0)")
    bad = ~np.isfinite(samples)
    if bad.mean() > 0.05:
        return Interval(
            missing_reason=f"{what} undefined in {int(bad.sum())} of {samples.size} resamples (too few users)"
        )
    lo, hi = np.percentile(samples[~bad], [2.5, 97.5])
    return Interval(float(lo), float(hi))


def _bootstrap(specs: dict, n_users: int, n_boot: int, seed: int) -> dict:
    """One bootstrap over users for every quantity: name -> ``n_boot`` resampled values.

    A spec is a list of ``(sign, a, b)``: the quantity is ``sum sign * (c . a) / (c . b)`` with c the
    resample's count of each user (weighted sums over the drawn users).  Resamples are drawn in chunks
    of at most 4 million counts, so the memory stays small for any number of users.
    """
    names = list(specs)
    cols = [v for n in names for (_, a, b) in specs[n] for v in (a, b)]
    if not names or n_boot == 0:
        return {n: np.empty(0) for n in names}
    mat = np.column_stack(cols).astype(float)
    rng = np.random.default_rng(seed)
    chunk = max(1, min(n_boot, 4_000_000 // max(n_users, 1)))
    parts = []
    for start in range(0, n_boot, chunk):
        b = min(chunk, n_boot - start)
        counts = np.stack([np.bincount(rng.integers(0, n_users, n_users), minlength=n_users) for _ in range(b)])
        parts.append(counts.astype(float) @ mat)
    sums = np.vstack(parts)
    out, k = {}, 0
    for n in names:
        total = np.zeros(n_boot)
        for sign, _, _ in specs[n]:
            total += sign * _ratio(sums[:, k], sums[:, k + 1])
            k += 2
        out[n] = total
    return out


def _ratio(num, den) -> np.ndarray:
    num, den = np.asarray(num, float), np.asarray(den, float)
    out = np.full(num.shape, np.nan)
    np.divide(num, den, out=out, where=den > 0)
    return out


def _spec_per_user(st: UserStats, specs: dict, min_count: int) -> Interval:
    n_def = int(st.defined.sum())
    if n_def < min_count:
        return Interval(
            missing_reason=f"{n_def} user(s) with relevant items of both groups, fewer than min_count {min_count}"
        )
    specs["per_user_gap"] = [(1.0, np.where(st.defined, st.e0 - st.e1, 0.0), st.defined.astype(float))]
    return Interval()


def _spec_aggregate(st: UserStats, specs: dict, min_count: int) -> Interval:
    k0, k1 = int((st.n0 > 0).sum()), int((st.n1 > 0).sum())
    if min(k0, k1) < min_count:
        return Interval(
            missing_reason=f"users with relevant items of group 0 / 1: {k0} / {k1}, fewer than min_count {min_count}"
        )
    specs["aggregate_gap"] = [(1.0, st.sum0, st.n0), (-1.0, st.sum1, st.n1)]
    return Interval()


def _ips(table, values, codes_u, st: UserStats, rand, prop, ips_users: str, specs: dict, min_count: int) -> list:
    """The IPS and the naive estimate from the experiment rows; their bootstrap specs go into ``specs``
    (the weights held fixed across resamples)."""
    if rand is None and prop is None:
        reason = "no experiment in the log: pass --random-col (the item shown at random) or --propensity-col"
        return [
            {"name": "IPS estimate", "method": None, "estimand": "PerUserGap", "rows": None, "value": None,
             "interval": None, "n_0": None, "n_1": None, "missing_reason": reason},
        ]  # fmt: skip
    in_exp = rand if rand is not None else ~np.isnan(prop)
    rows = "the random-item rows" if rand is not None else "the rows with a propensity"
    grp = table["group"].to_numpy()
    rel = table["relevant"].to_numpy()
    exp = SimpleNamespace(relevant=rel[in_exp], group=grp[in_exp], exposure=values[in_exp])
    user = codes_u[in_exp]
    if prop is not None:
        w = np.where(exp.relevant, 1.0 / np.where(exp.relevant, prop[in_exp], 1.0), 0.0)
        method, label = "1/propensity", "IPS (1/propensity)"
    else:  # the user's relevance rate among their logged items of the row's group
        m0 = np.bincount(codes_u[grp == 0], minlength=st.n_users)
        m1 = np.bincount(codes_u[grp == 1], minlength=st.n_users)
        rate = np.where(exp.group == 0, _ratio(st.n0, m0)[user], _ratio(st.n1, m1)[user])
        w = np.where(exp.relevant, 1.0 / np.where(rate > 0, rate, 1.0), 0.0)
        method, label = "1/log relevance rate", "IPS (1/log relevance rate)"
    if ips_users == "both":
        w = np.where(st.defined[user], w, 0.0)
        estimand = "PerUserGap"
        label += ", users in U*"
    else:
        estimand = "mean e_0 over users with a relevant group-0 item minus the same for group 1"
    out = []
    e = np.asarray(exp.exposure, float)
    for name, meth, weights, target in (
        (label, method, w, estimand),
        ("naive estimate (unweighted)", "naive", np.ones(len(w)), "AggregateGap"),
    ):
        est = ips_mod.weighted_estimate(exp, weights, meth) if meth != "naive" else ips_mod.naive_estimate(exp)
        used = exp.relevant & (weights > 0)
        n_s = [int((used & (exp.group == s)).sum()) for s in (0, 1)]
        entry = {"name": name, "method": meth, "estimand": target, "rows": rows, "n_0": n_s[0], "n_1": n_s[1]}
        if min(n_s) < min_count:
            entry.update(
                value=None,
                interval=None,
                missing_reason=f"observed relevant rows of group 0 / 1 in {rows}"
                + (" of users in U*" if meth != "naive" and ips_users == "both" else "")
                + f": {n_s[0]} / {n_s[1]}, fewer than min_count {min_count}"
                + (
                    " (no user's log has relevant items of both groups; with relevance known only on the "
                    "experiment rows pass --ips-users all)"
                    if meth != "naive" and ips_users == "both" and not st.defined.any()
                    else ""
                ),
            )
        elif est.missing_reason or not math.isfinite(est.value):
            entry.update(value=None, interval=None, missing_reason=est.missing_reason or "undefined")
        else:
            spec = []
            for s, sign in ((0, 1.0), (1, -1.0)):
                o = used & (exp.group == s)
                spec.append((sign, np.bincount(user[o], weights=(weights * e)[o], minlength=st.n_users),
                             np.bincount(user[o], weights=weights[o], minlength=st.n_users)))  # fmt: skip
            specs[name] = spec
            entry.update(value=est.value, interval=Interval(), missing_reason=None)
        out.append(entry)
    return out


# -------------------------------------------------------------------------------------------- figure
def plot_audit(res: AuditResult, title: str = ""):
    """Report figure: left, every gap and estimate with its 95% interval; middle, the decomposition;
    right, the distribution of the per-user gaps (users with relevant items of both groups)."""
    import textwrap

    import matplotlib.pyplot as plt

    from facterlab.simpson.plots import GAP_SERIES
    from facterlab.style import PALETTE, add_caption, degenerate_note

    t = res.table()
    fig, axes = plt.subplots(1, 3, figsize=(14, 4.2), gridspec_kw={"width_ratios": [1.3, 0.8, 1]})
    ax = axes[0]
    main = t[~t["quantity"].str.startswith("  ")].reset_index(drop=True)
    colours = {"PerUserGap": GAP_SERIES["per_user_gap"][1], "AggregateGap": GAP_SERIES["aggregate_gap"][1]}
    y = np.arange(len(main))[::-1]
    for yi, (_, r) in zip(y, main.iterrows()):
        colour = colours.get(
            r["quantity"], GAP_SERIES["naive_estimate"][1] if "naive" in r["quantity"] else GAP_SERIES["ips_model"][1]
        )
        if r["value"] is None or pd.isna(r["value"]):
            note = textwrap.shorten("missing: " + str(r["note"]), 110, placeholder=" ...")
            ax.text(0.02, yi, "\n".join(textwrap.wrap(note, 55)), va="center", fontsize=7, color="#b00020",
                    transform=ax.get_yaxis_transform())  # fmt: skip
            continue
        err = None
        if r["lo"] is not None and not pd.isna(r["lo"]):
            err = [[r["value"] - r["lo"]], [r["hi"] - r["value"]]]
        ax.errorbar(r["value"], yi, xerr=err, fmt="o", color=colour, capsize=4)
    ax.axvline(0, color="black", lw=0.6)
    ax.set_ylim(-0.6, len(main) - 0.4)
    ax.set_yticks(y, list(main["quantity"]), fontsize=8)
    ax.set_xlabel(f"gap ({res.unit}, group 0 {res.groups[0]!r} - group 1 {res.groups[1]!r})")
    ax.set_title("gaps and estimates (95% interval)" + ("  - REVERSAL" if res.reversal else ""), fontsize=9)
    ax = axes[1]
    if res.decomposition is None:
        degenerate_note(ax, res.decomposition_missing or "no decomposition")
    else:
        d = res.decomposition
        vals = [d.competition_performance * res.scale, d.per_user_gap_term * res.scale, d.total * res.scale]
        ax.bar([0, 1, 2], vals, color=[PALETTE["fair"], PALETTE["per_user"], PALETTE["aggregate"]])
        ax.set_xticks(
            [0, 1, 2], ["competition x\nperformance", "per-user\ngap term", "total =\nAggregateGap"], fontsize=8
        )
        ax.axhline(0, color="black", lw=0.6)
        ax.set_ylabel(res.unit)
    ax.set_title("decomposition of the AggregateGap", fontsize=9)
    ax = axes[2]
    g = res.per_user.per_user[np.isfinite(res.per_user.per_user)] * res.scale
    if g.size < 2:
        degenerate_note(ax, f"{g.size} user(s) with relevant items of both groups")
    else:
        ax.hist(g, bins=min(40, max(5, g.size // 5)), color=GAP_SERIES["per_user_gap"][1], alpha=0.7)
        ax.axvline(float(np.mean(g)), color="black", lw=1, label=f"PerUserGap {np.mean(g):+.2f}")
        ax.axvline(0, color="grey", lw=0.6)
        ax.legend(fontsize=8)
        ax.set_xlabel(f"per-user gap e_0(u) - e_1(u) ({res.unit})")
        ax.set_ylabel("users")
    ax.set_title("per-user gaps", fontsize=9)
    fig.suptitle(title or f"Simpson audit of {Path(res.source).name}", fontsize=10)
    fig.tight_layout()
    add_caption(
        fig,
        f"{res.n_rows:,} log rows, {res.n_users:,} users, {res.n_items:,} items; exposure {res.exposure}; "
        f"intervals: {res.interval_method}. Reversal: {res.reversal_text()}",
    )
    return fig
