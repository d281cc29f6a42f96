"""Your own data: a :class:`~facterlab.data.Dataset` from any tables, RecBole atomic files, and imported
datasets stored by name (docs/OWN_DATA.md).

- :func:`from_tables` builds a dataset from three pandas tables (interactions, users, items) and a column
  mapping; the protected attributes are whichever user columns you name, with any values.
- :func:`read_recbole` reads RecBole's atomic files (``NAME.inter``, ``NAME.user``, ``NAME.item``, tab
  separated, ``field:type`` headers) into those three tables, with RecBole's defaults for the mapping.
- :func:`import_dataset` (``facterlab data import SRC --name NAME``) validates and writes a dataset into
  ``<data dir>/imported/NAME/``; afterwards ``NAME`` works wherever a built-in dataset name works
  (``facterlab run --dataset NAME``, sweeps, presets, the notebooks' ``DATASET`` parameter), through
  :func:`load_imported`.

How values are read (each choice is also in docs/OWN_DATA.md):

- **ids**: integer ids are kept; any other id (``"u17"``) is numbered 1..n in sorted order, the original
  kept in a ``source_id`` column.
- **feedback**: ``rating_col=None`` means implicit feedback: every interaction is a positive, stored
  as rating :data:`IMPLICIT_RATING` (5, above the protocol's ``min_rating`` of 4).
- **order**: ``timestamp_col=None`` orders each user's history by the interactions' row order.
- **missing protected values** (NaN, None, empty) become the value ``missing`` (default ``"unknown"``):
  a group of its own, shown in prompts, flipped to and from by twins and CFR; ``missing="drop"`` drops
  those users (and their interactions) instead, and says how many.
- **multi-valued protected values** (``"en|fr"`` with ``multi_sep="|"``) become one value per
  combination, the parts sorted and joined with ``+`` (``"en+fr"``): a group per combination.
- **item features** (the rules' and the simulator's features: genres for MovieLens) are the values of
  ``feature_cols``, each split on ``feature_sep`` (a list per item, empty allowed); item text (what the
  encoder embeds) is ``text_col``, else ``"{title} :: {feature|feature}"`` as for MovieLens.

Validation runs before any work; every problem is one :class:`DatasetError` line (a missing or misspelt
column with the closest match, duplicate ids, interactions naming unknown users or items, a protected
attribute with one value, a reserved attribute name, a non-UTF-8 byte with its file and offset), or a
warning kept in ``Dataset.info["warnings"]`` and logged (groups with fewer users than ``min_group``,
too few for the group metrics).

>>> import pandas as pd
>>> inter = pd.DataFrame({"user_id": [1, 1, 2, 2], "item_id": [10, 11, 10, 11]})
>>> users = pd.DataFrame({"user_id": [1, 2], "country": ["BR", "DE"]})
>>> items = pd.DataFrame({"item_id": [10, 11], "title": ["Data engineer", "Nurse"], "sector": ["tech", "health"]})
>>> ds = from_tables(inter, users, items, protected=["country"], feature_cols=["sector"], name="jobs", domain="job",
...                  rating_col=None, timestamp_col=None, min_group=1)
>>> ds.protected, ds.attribute_values, ds.items["features"].tolist()
(('country',), {'country': ['BR', 'DE']}, [['tech'], ['health']])
"""

from __future__ import annotations

import csv
import difflib
import json
import logging
import os
import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from facterlab.data.dataset import Dataset
from facterlab.data.textfiles import read_delimited, read_parquet

__all__ = [
    "DatasetError",
    "from_tables",
    "read_recbole",
    "read_table",
    "import_dataset",
    "load_imported",
    "imported_names",
    "imported_dir",
    "is_imported",
    "not_imported",
    "export_recbole",
    "IMPORT_DIR",
    "IMPLICIT_RATING",
    "RESERVED_NAMES",
]

log = logging.getLogger(__name__)

#: the sub-folder of the data directory that holds imported datasets, one folder per name
IMPORT_DIR = "imported"
#: the rating that implicit feedback is stored with (every interaction a positive under min_rating = 4)
IMPLICIT_RATING = 5.0
#: names an imported dataset cannot take (the built-in ones and "auto")
RESERVED_NAMES = ("auto", "ml-1m", "ml-100k", "amazon", "synthetic")
#: protected attribute names that would collide with the interaction rows' own columns
_RESERVED_ATTRS = ("row_id", "user_id", "item_id", "history", "target", "relevant", "candidates", "split", "protected")
_NAME_RE = re.compile(r"[a-z0-9][a-z0-9_.-]{0,63}")
_ATTR_RE = re.compile(r"[A-Za-z][A-Za-z0-9_]{0,39}")
_FORMAT_VERSION = 1


class DatasetError(ValueError):
    """An imported table or file that cannot be used: one line saying what and where."""


def closest_match(name: str, columns) -> str:
    """`` (did you mean 'x'?)`` for the closest of ``columns`` (case-insensitive), else "" (every
    "did you mean" of facterlab's data and bias-table checks).

    >>> closest_match("contry", ["country", "language"]), closest_match("zz", ["country"])
    (" (did you mean 'country'?)", '')
    """
    lower = {str(c).lower(): str(c) for c in columns}
    match = difflib.get_close_matches(str(name).lower(), list(lower), n=1, cutoff=0.6)
    return f" (did you mean {lower[match[0]]!r}?)" if match else ""


def _need(table: pd.DataFrame, what: str, cols: Sequence[str], flag: str = "") -> None:
    for c in cols:
        if c not in table.columns:
            raise DatasetError(
                f"{what}: no column {c!r}{closest_match(c, list(table.columns))}; its columns are "
                f"{', '.join(map(repr, map(str, table.columns)))}{flag}"
            )


def _ids(values: pd.Series) -> tuple:
    """``(int64 ids, source ids or None)``: integer ids kept, others numbered 1..n in sorted order."""
    s = values.astype(str).str.strip()
    if s.str.fullmatch(r"-?\d{1,18}").all():
        return s.astype(np.int64).to_numpy(), None
    uniq = np.array(sorted(set(s.tolist())), dtype=object)
    code = {v: i + 1 for i, v in enumerate(uniq)}
    return np.array([code[v] for v in s.tolist()], dtype=np.int64), s.to_numpy(dtype=object)


def _unique_ids(table: pd.DataFrame, col: str, what: str) -> tuple:
    """:func:`_ids` of a users or items table, whose ids must be unique (a :class:`DatasetError` otherwise)."""
    ids, src = _ids(table[col])
    dup = pd.Series(ids).duplicated()
    if dup.any():
        first = _v(table[col].iloc[int(np.argmax(dup))])
        raise DatasetError(f"{what}s: {int(dup.sum())} duplicate {what} id(s) in {col!r}, first {first}")
    return ids, src


def _map_ids(values: pd.Series, source: np.ndarray | None, own: np.ndarray) -> tuple:
    """``(ids, known)``: interaction ids in the numbering of the users/items table (``own`` ids,
    ``source`` their originals, None when the ids are the integers themselves), and which are known."""
    s = values.astype(str).str.strip()
    if source is None:
        ok = s.str.fullmatch(r"-?\d{1,18}").to_numpy()
        ids = np.zeros(len(s), dtype=np.int64)
        ids[ok] = s[ok].astype(np.int64).to_numpy()
        return ids, ok & np.isin(ids, own)
    code = dict(zip(source.tolist(), own.tolist()))
    got = [code.get(v) for v in s.tolist()]
    known = np.array([g is not None for g in got], dtype=bool)
    return np.array([g if g is not None else 0 for g in got], dtype=np.int64), known


def _v(x: Any) -> str:
    """A cell's value for an error line (a numpy scalar shown as the plain value)."""
    return repr(x.item() if isinstance(x, np.generic) else x)


def _is_missing(v: Any) -> bool:
    if v is None:
        return True
    if isinstance(v, float) and np.isnan(v):
        return True
    return isinstance(v, str) and v.strip() == ""


def _protected_values(col: pd.Series, missing: str, multi_sep: str | None) -> list:
    out: list[str | None] = []
    for v in col.tolist():
        if _is_missing(v):
            out.append(None)
            continue
        t = str(v).strip()
        if multi_sep:
            parts = sorted({p.strip() for p in t.split(multi_sep) if p.strip()})
            t = "+".join(parts) if parts else ""
            if not t:
                out.append(None)
                continue
        out.append(t)
    return out


def _features(items: pd.DataFrame, cols: Sequence[str], sep: str) -> list:
    feats: list = [[] for _ in range(len(items))]
    for c in cols:
        for i, v in enumerate(items[c].tolist()):
            if _is_missing(v):
                continue
            if isinstance(v, list | tuple | np.ndarray):
                parts = [str(p).strip() for p in v]
            else:
                parts = [p.strip() for p in str(v).split(sep)] if sep else [str(v).strip()]
            for p in parts:
                if p and p not in feats[i]:
                    feats[i].append(p)
    return feats


def from_tables(
    interactions: pd.DataFrame,
    users: pd.DataFrame,
    items: pd.DataFrame,
    protected: Sequence[str],
    *,
    name: str = "custom",
    domain: str = "item",
    user_col: str = "user_id",
    item_col: str = "item_id",
    rating_col: str | None = "rating",
    timestamp_col: str | None = "timestamp",
    title_col: str = "title",
    feature_cols: Sequence[str] = (),
    text_col: str | None = None,
    feature_sep: str = "|",
    missing: str = "unknown",
    multi_sep: str | None = None,
    values: Mapping[str, Sequence[str]] | None = None,
    wordings: Mapping[str, Mapping[str, str]] | None = None,
    min_group: int = 30,
    source: str = "tables",
) -> Dataset:
    """A :class:`~facterlab.data.Dataset` from three tables and a column mapping (the rules: module docstring).

    Parameters
    ----------
    interactions, users, items : pandas.DataFrame
        What users interacted with; one row per user with the protected attributes; one row per item.
    protected : sequence of str
        The user columns that are protected attributes, in the order prompts show them (at least one).
    name : str, default "custom"
        The dataset's name (run ids and outputs name it).
    domain : str, default "item"
        What an item is, as a singular noun: the prompts say "Recommend the next 10 {domain}s".
    user_col, item_col, rating_col, timestamp_col, title_col, text_col : str or None
        Column names; ``rating_col=None`` is implicit feedback, ``timestamp_col=None`` the row order.
    feature_cols : sequence of str, default ()
        Item columns whose values are the item's features (genres, categories, sectors).
    feature_sep : str, default "|"
        Separator of several features in one cell ("" keeps each cell whole).
    missing : str, default "unknown"
        The value missing protected values take, or ``"drop"`` to drop those users.
    multi_sep : str or None, default None
        Separator of a multi-valued protected cell (each combination becomes one value, parts joined by "+").
    values : mapping or None, default None
        Canonical order of each attribute's values (a superset of those observed); default: sorted,
        the missing value last.
    wordings : mapping or None, default None
        ``{attr: {value: the same value in other words}}`` for the twin monitor's reword placebo.
    min_group : int, default 30
        Groups with fewer users are reported in ``info["warnings"]`` (too small for SNSR's groups).
    source : str, default "tables"
        Where the tables came from (kept in ``info``).

    Returns
    -------
    Dataset

    Raises
    ------
    DatasetError
        One line per problem (module docstring).
    """
    for what, t in (("interactions", interactions), ("users", users), ("items", items)):
        if not isinstance(t, pd.DataFrame):
            raise DatasetError(f"{what} must be a pandas DataFrame, got {type(t).__name__}")
    name = str(name)
    if not _NAME_RE.fullmatch(name):
        raise DatasetError(
            f"dataset name {name!r}: use lower-case letters, digits, '-', '_' or '.', starting with a letter or digit"
        )
    protected = [str(a) for a in ([protected] if isinstance(protected, str) else protected)]
    if not protected:
        raise DatasetError("name at least one protected attribute (a column of the users table)")
    if len(set(protected)) != len(protected):
        raise DatasetError(f"protected attributes named twice: {protected}")
    for a in protected:
        if a in _RESERVED_ATTRS:
            raise DatasetError(f"protected attribute {a!r} collides with a column of the interaction rows; rename it")
        if not _ATTR_RE.fullmatch(a):
            raise DatasetError(f"protected attribute {a!r}: use letters, digits and '_', starting with a letter")
    if missing != "drop" and (not isinstance(missing, str) or not missing.strip()):
        raise DatasetError(f"missing must be a non-empty label or 'drop', got {missing!r}")
    feature_cols = [feature_cols] if isinstance(feature_cols, str) else list(feature_cols)
    _need(interactions, "interactions", [user_col, item_col] + [c for c in (rating_col, timestamp_col) if c])
    _need(users, "users", [user_col, *protected])
    _need(items, "items", [item_col, title_col, *feature_cols] + ([text_col] if text_col else []))
    warnings: list = []

    # users: ids, protected values
    users = users.reset_index(drop=True)
    uid, u_src = _unique_ids(users, user_col, "user")
    attr_cols = {a: _protected_values(users[a], missing, multi_sep) for a in protected}
    keep_user = np.ones(len(users), dtype=bool)
    n_missing = {a: sum(v is None for v in vals) for a, vals in attr_cols.items()}
    if missing == "drop":
        for vals in attr_cols.values():
            keep_user &= np.array([v is not None for v in vals], dtype=bool)
        if (~keep_user).any():
            warnings.append(
                f"{int((~keep_user).sum())} user(s) with a missing protected value dropped (missing='drop')"
            )
    else:
        for a in protected:
            attr_cols[a] = [missing if v is None else v for v in attr_cols[a]]
            if n_missing[a]:
                warnings.append(f"{a}: {n_missing[a]} missing value(s) kept as the value {missing!r}")

    # items
    items = items.reset_index(drop=True)
    iid, i_src = _unique_ids(items, item_col, "item")
    titles = items[title_col].tolist()
    bad = [i for i, t in enumerate(titles) if _is_missing(t)]
    if bad:
        raise DatasetError(
            f"items: {len(bad)} item(s) without a title in {title_col!r}, first item {_v(items[item_col].iloc[bad[0]])}"
        )
    titles = [str(t) for t in titles]  # as given (a trailing space is kept: titles are matched exactly)
    feats = _features(items, feature_cols, feature_sep)
    texts = (
        [str(t) for t in items[text_col].fillna("").tolist()]
        if text_col
        else [f"{t} :: {'|'.join(f)}" if f else t for t, f in zip(titles, feats)]
    )

    # interactions
    inter = interactions.reset_index(drop=True)
    iu, u_known = _map_ids(inter[user_col], u_src, uid)
    ii, i_known = _map_ids(inter[item_col], i_src, iid)
    for what, known, col in (("users", u_known, user_col), ("items", i_known, item_col)):
        unknown = ~known
        if unknown.any():
            first = inter[col].iloc[int(np.argmax(unknown))]
            raise DatasetError(
                f"interactions: {int(unknown.sum())} row(s) name {what} not in the {what} table "
                f"(column {col!r}, first {_v(first)})"
            )
    if rating_col:
        r = pd.to_numeric(inter[rating_col], errors="coerce")
        if r.isna().any():
            raise DatasetError(
                f"interactions: {int(r.isna().sum())} non-numeric value(s) in {rating_col!r}, first "
                f"{_v(inter[rating_col][r.isna()].iloc[0])} (rating_col=None for implicit feedback)"
            )
        rating = r.to_numpy(np.float32)
    else:
        rating = np.full(len(inter), IMPLICIT_RATING, dtype=np.float32)
    if timestamp_col:
        ts = pd.to_numeric(inter[timestamp_col], errors="coerce")
        if ts.isna().any():
            parsed = pd.to_datetime(inter[timestamp_col], errors="coerce", utc=True)
            if parsed.isna().any():
                raise DatasetError(
                    f"interactions: {int(parsed.isna().sum())} timestamp(s) in {timestamp_col!r} that are neither "
                    f"numbers nor dates, first {_v(inter[timestamp_col][parsed.isna()].iloc[0])}"
                )
            ts = pd.Series(parsed.astype("int64") // 10**9)
        stamp = ts.to_numpy().astype(np.int64)
    else:
        stamp = np.arange(len(inter), dtype=np.int64)
    kept_users = set(uid[keep_user].tolist())
    keep_inter = np.array([u in kept_users for u in iu.tolist()], dtype=bool) if not keep_user.all() else None
    ratings = pd.DataFrame({"user_id": iu, "item_id": ii, "rating": rating, "timestamp": stamp})
    if keep_inter is not None:
        ratings = ratings[keep_inter].reset_index(drop=True)
    if len(ratings) == 0:
        raise DatasetError("interactions: no rows left to use")

    users_df = pd.DataFrame(
        {"user_id": uid[keep_user], **{a: np.array(v, dtype=object)[keep_user] for a, v in attr_cols.items()}}
    )
    if u_src is not None:
        users_df["source_id"] = u_src[keep_user]
    items_df = pd.DataFrame({"item_id": iid, "title": titles, "features": feats, "text": texts})
    if i_src is not None:
        items_df["source_id"] = i_src

    # vocabularies
    attribute_values: dict = {}
    for a in protected:
        observed = sorted(set(users_df[a].tolist()) - {missing}) + ([missing] if missing in set(users_df[a]) else [])
        if values and a in values:
            order = [str(v) for v in values[a]]
            extra = [v for v in observed if v not in order]
            if extra:
                raise DatasetError(f"users: attribute {a!r} holds value(s) {extra[:5]} not in the values given for it")
            observed = order
        if len(set(users_df[a])) < 2:
            raise DatasetError(
                f"protected attribute {a!r} has one value ({_v(users_df[a].iloc[0])}) among the users: "
                "there is nothing to compare; leave it out of protected"
            )
        attribute_values[a] = observed
        counts = users_df[a].value_counts()
        small = [f"{v} ({int(counts[v])})" for v in counts.index if int(counts[v]) < int(min_group)]
        if small:
            warnings.append(
                f"{a}: {len(small)} group(s) with fewer than {int(min_group)} users, too small for the group metrics "
                f"(SNSR reports them missing): {', '.join(small[:6])}{' ...' if len(small) > 6 else ''}"
            )
    wmap = {str(a): {str(k): str(v) for k, v in (m or {}).items()} for a, m in (wordings or {}).items()}
    for a, m in wmap.items():
        if a not in protected:
            raise DatasetError(f"wordings: {a!r} is not a protected attribute{closest_match(a, protected)}")
        unknown = [k for k in m if k not in attribute_values[a]]
        if unknown:
            raise DatasetError(
                f"wordings[{a!r}]: value {unknown[0]!r} is not a value of {a!r}{closest_match(unknown[0], attribute_values[a])}"
            )
    for w in warnings:
        log.warning("%s: %s", name, w)
    info = {
        "source": source,
        "warnings": warnings,
        "missing_values": n_missing,
        "implicit_feedback": rating_col is None,
        "history_order": "timestamp" if timestamp_col else "row order",
        "n_feature_values": int(len({f for fs in feats for f in fs})),
    }
    return Dataset(
        name=name,
        domain=str(domain),
        is_synthetic=False,
        ratings=ratings,
        users=users_df,
        items=items_df,
        attribute_values=attribute_values,
        info=info,
        wordings=wmap,
    )


# ------------------------------------------------------------------------------------------------ files


def read_table(path: os.PathLike | str, fmt: str | None = None) -> pd.DataFrame:
    """One table from a CSV, TSV or parquet file (``fmt``: "csv", "tsv", "parquet"; default by suffix).

    Text files must be UTF-8 (a non-UTF-8 byte is a :class:`DatasetError` naming its offset); every
    column is read as text (ids stay exact), empty cells as missing.
    """
    p = Path(path)
    if not p.is_file():
        raise DatasetError(f"{p}: no such file")
    fmt = fmt or {".parquet": "parquet", ".pq": "parquet", ".tsv": "tsv", ".tab": "tsv"}.get(p.suffix.lower(), "csv")
    if fmt == "parquet":
        return read_parquet(p, DatasetError)
    return read_delimited(p, "\t" if fmt == "tsv" else ",", DatasetError, fmt.upper())


def _read_atomic(path: Path) -> tuple:
    """A RecBole atomic file: ``(table, {field: type})`` with the ``:type`` suffixes stripped."""
    df = read_delimited(path, "\t", DatasetError, "RecBole atomic", quoting=csv.QUOTE_NONE)
    types = {}
    cols = []
    for c in df.columns:
        field, _, typ = str(c).partition(":")
        if typ not in ("token", "token_seq", "float", "float_seq"):
            raise DatasetError(
                f"{path}: header field {str(c)!r} is not 'name:type' with a RecBole type (token, token_seq, float, float_seq)"
            )
        types[field] = typ
        cols.append(field)
    df.columns = cols
    return df, types


def read_recbole(
    src: os.PathLike | str,
    name: str | None = None,
    *,
    user_col: str = "user_id",
    item_col: str = "item_id",
    title_col: str | None = None,
    feature_cols: Sequence[str] | None = None,
) -> dict:
    r"""RecBole atomic files as :func:`from_tables` arguments.

    ``src`` is a folder holding ``NAME.inter``, ``NAME.user`` and ``NAME.item`` (``name`` defaults to the
    folder's name, else the only ``*.inter`` in it), or the path of the ``.inter`` file.  Defaults: the
    ids are ``user_id`` and ``item_id``; the rating is ``rating`` when present (else implicit feedback);
    the timestamp ``timestamp`` when present; the title the item field named ``title`` or ending in
    ``title``; the features the item's other ``token`` and ``token_seq`` fields (``token_seq`` split on
    spaces).  Each is overridable.

    Parameters
    ----------
    src : path
        The folder of the atomic files, or the ``.inter`` file.
    name : str or None, default None
        The files' stem (``NAME.inter``); None: the folder's name, else its only ``.inter`` file.
    user_col, item_col : str
        The id fields.
    title_col : str or None, default None
        The item title field; None: the field named ``title`` or ending in ``title``.
    feature_cols : sequence of str or None, default None
        The item feature fields; None: the other ``token`` and ``token_seq`` fields.

    Returns
    -------
    dict
        ``interactions``, ``users``, ``items`` and the mapping keywords of :func:`from_tables`.

    Raises
    ------
    DatasetError
        A missing file, a header that is not ``name:type``, no title field, a non-UTF-8 byte.

    Examples
    --------
    >>> from pathlib import Path
    >>> import tempfile
    >>> d = Path(tempfile.mkdtemp()) / "shop"
    >>> d.mkdir()
    >>> _ = (d / "shop.inter").write_text("user_id:token\titem_id:token\n1\t7\n")
    >>> _ = (d / "shop.user").write_text("user_id:token\tregion:token\n1\tnorth\n")
    >>> _ = (d / "shop.item").write_text("item_id:token\titem_title:token\tcategory:token_seq\n7\tLamp\thome garden\n")
    >>> kw = read_recbole(d)
    >>> kw["title_col"], kw["feature_cols"], kw["rating_col"], kw["feature_sep"]
    ('item_title', ['category'], None, ' ')
    """
    p = Path(src)
    if p.is_file() and p.suffix == ".inter":
        folder, stem = p.parent, p.stem
    elif p.is_dir():
        folder = p
        stem = name or p.name
        if not (folder / f"{stem}.inter").is_file():
            found = sorted(folder.glob("*.inter"))
            if len(found) != 1:
                raise DatasetError(
                    f"{folder}: no {stem}.inter"
                    + (f" (found {', '.join(f.name for f in found)}: pass --recbole-name)" if found else "")
                )
            stem = found[0].stem
    else:
        raise DatasetError(f"{p}: neither a folder of RecBole files nor a .inter file")
    files = {kind: folder / f"{stem}.{kind}" for kind in ("inter", "user", "item")}
    for f in files.values():
        if not f.is_file():
            raise DatasetError(f"{f}: missing (RecBole needs {stem}.inter, {stem}.user and {stem}.item for an audit)")
    inter, itypes = _read_atomic(files["inter"])
    users, _ = _read_atomic(files["user"])
    items, types = _read_atomic(files["item"])
    if title_col is None:
        named = [f for f in items.columns if f == "title"] or [f for f in items.columns if f.endswith("title")]
        if not named:
            raise DatasetError(
                f"{files['item']}: no field named 'title' or ending in 'title'; name the title field (--title-col)"
            )
        title_col = named[0]
    if feature_cols is None:
        feature_cols = [f for f, t in types.items() if t in ("token", "token_seq") and f not in (item_col, title_col)]
    seps = {types.get(c) for c in feature_cols}
    return {
        "interactions": inter,
        "users": users,
        "items": items,
        "user_col": user_col,
        "item_col": item_col,
        "rating_col": "rating" if "rating" in itypes else None,
        "timestamp_col": "timestamp" if "timestamp" in itypes else None,
        "title_col": title_col,
        "feature_cols": list(feature_cols),
        "feature_sep": " " if "token_seq" in seps else "",
        "source": f"recbole:{files['inter']}",
    }


def export_recbole(ds: Dataset, folder: os.PathLike | str, name: str | None = None) -> Path:
    """Write a dataset as RecBole atomic files (``NAME.inter``, ``.user``, ``.item``) into ``folder``.

    The features are one ``features:token_seq`` field (spaces inside a feature become ``_``), so
    :func:`read_recbole` reads back what was written.
    """
    out = Path(folder)
    out.mkdir(parents=True, exist_ok=True)
    stem = name or ds.name
    r = ds.ratings
    pd.DataFrame(
        {
            "user_id:token": r["user_id"],
            "item_id:token": r["item_id"],
            "rating:float": r["rating"],
            "timestamp:float": r["timestamp"],
        }
    ).to_csv(out / f"{stem}.inter", sep="\t", index=False)
    u = ds.users
    pd.DataFrame({"user_id:token": u["user_id"], **{f"{a}:token": u[a] for a in ds.protected}}).to_csv(
        out / f"{stem}.user", sep="\t", index=False
    )
    it = ds.items
    pd.DataFrame(
        {
            "item_id:token": it["item_id"],
            "title:token": it["title"],
            "features:token_seq": [" ".join(str(f).replace(" ", "_") for f in fs) for fs in it["features"]],
        }
    ).to_csv(out / f"{stem}.item", sep="\t", index=False, quoting=3, escapechar="\\")
    return out


# --------------------------------------------------------------------------------------------- storage


def imported_dir(name: str, data_dir: os.PathLike | str | None = None) -> Path:
    """``<data dir>/imported/<name>/``."""
    from facterlab.config import data_dir as _data_dir

    return _data_dir(data_dir) / IMPORT_DIR / name


def imported_names(data_dir: os.PathLike | str | None = None) -> list:
    """The names of the datasets imported into the data directory (sorted)."""
    from facterlab.config import data_dir as _data_dir

    root = _data_dir(data_dir) / IMPORT_DIR
    if not root.is_dir():
        return []
    return sorted(p.name for p in root.iterdir() if (p / "dataset.json").is_file())


def import_dataset(ds: Dataset, data_dir: os.PathLike | str | None = None, overwrite: bool = False) -> Path:
    """Write ``ds`` into ``<data dir>/imported/<ds.name>/`` (parquet tables + ``dataset.json``).

    A name that is built in, or already imported (unless ``overwrite``), is a :class:`DatasetError`.
    """
    if ds.name in RESERVED_NAMES:
        raise DatasetError(f"{ds.name!r} is a built-in dataset name; choose another --name")
    d = imported_dir(ds.name, data_dir)
    if (d / "dataset.json").exists() and not overwrite:
        raise DatasetError(f"{d}: a dataset named {ds.name!r} is already imported (--overwrite replaces it)")
    tmp = d.with_name(f".tmp-{ds.name}-{os.getpid()}")
    tmp.mkdir(parents=True, exist_ok=True)
    ds.ratings.to_parquet(tmp / "ratings.parquet", index=False)
    ds.users.to_parquet(tmp / "users.parquet", index=False)
    ds.items.to_parquet(tmp / "items.parquet", index=False)
    meta = {
        "format_version": _FORMAT_VERSION,
        "name": ds.name,
        "domain": ds.domain,
        "protected": list(ds.protected),
        "attribute_values": ds.attribute_values,
        "wordings": ds.wordings,
        "info": ds.info,
        "fingerprint": ds.fingerprint(),
    }
    (tmp / "dataset.json").write_text(json.dumps(meta, indent=2, sort_keys=True, default=str), encoding="utf-8")
    if d.exists():
        import shutil

        shutil.rmtree(d)
    os.replace(tmp, d)
    return d


def not_imported(name: str, data_dir: os.PathLike | str | None = None) -> DatasetError:
    """The error for a dataset name that is neither built in nor imported into the data directory."""
    d = imported_dir(name, data_dir)
    have = imported_names(data_dir)
    return DatasetError(
        f"unknown dataset {name!r}: not built in ({', '.join(RESERVED_NAMES)}) and not imported in {d.parent}"
        + (f" (imported: {', '.join(have)})" if have else "")
        + f"; import it with: facterlab data import SRC --name {name}"
    )


def is_imported(name: str, data_dir: os.PathLike | str | None = None) -> bool:
    """Whether a dataset named ``name`` is imported into the data directory."""
    return (imported_dir(name, data_dir) / "dataset.json").is_file()


def load_imported(name: str, data_dir: os.PathLike | str | None = None) -> Dataset:
    """An imported dataset by name (:func:`import_dataset`), its fingerprint checked against the one
    recorded at import (a changed file is a :class:`DatasetError`)."""
    d = imported_dir(name, data_dir)
    if not (d / "dataset.json").is_file():
        raise not_imported(name, data_dir)
    try:
        meta = json.loads((d / "dataset.json").read_text(encoding="utf-8"))
        tables = {t: pd.read_parquet(d / f"{t}.parquet") for t in ("ratings", "users", "items")}
    except (OSError, ValueError) as exc:
        raise DatasetError(
            f"{d}: the imported dataset cannot be read ({type(exc).__name__}: {exc}); import it again"
        ) from None
    items = tables["items"]
    items["features"] = [list(map(str, f)) for f in items["features"]]
    ds = Dataset(
        name=str(meta["name"]),
        domain=str(meta["domain"]),
        is_synthetic=False,
        ratings=tables["ratings"],
        users=tables["users"],
        items=items,
        attribute_values={a: list(meta["attribute_values"][a]) for a in meta["protected"]},
        info={**meta.get("info", {}), "imported_from": str(d)},
        wordings=meta.get("wordings") or {},
    )
    if ds.fingerprint() != meta.get("fingerprint"):
        raise DatasetError(
            f"{d}: the tables differ from what was imported (fingerprint {ds.fingerprint()} against "
            f"{meta.get('fingerprint')}); import the dataset again"
        )
    return ds
