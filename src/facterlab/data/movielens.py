"""MovieLens-1M and MovieLens-100K loaders (docs/FACTER.md §1.1).

ML-1M: ``ratings.dat`` ``uid::mid::rating::ts``, ``users.dat`` ``uid::gender::age::occupation::zip``,
``movies.dat`` ``mid::title::genre|genre`` (latin-1).  Age and occupation codes become the README
labels (:data:`facterlab.data.AGE_LABELS`, :data:`facterlab.data.OCCUPATION_LABELS`).

ML-100K: ``u.data`` (tab: uid iid rating ts), ``u.user`` ``uid|age|gender|occupation|zip`` (numeric
age mapped to the ML-1M buckets by :func:`facterlab.data.age_bucket`, occupation names kept),
``u.item`` ``iid|title|release|video|url|19 genre flags`` (latin-1; the "unknown" flag is dropped).

Parsing is vectorised (pandas C parser); a malformed line is a ValueError naming the file and the
line number.  Values are checked too: integer columns must hold integers (a rating of 4.5 is an error,
never truncated), ratings lie in 1..5, ML-100K ages in 1..120, ML-1M codes in the README's lists,
and a file without a single rating is an error.  Encoding: a file that decodes as UTF-8 is read as
UTF-8 (a ``u.item`` re-saved as UTF-8 keeps its accents), else as latin-1 (the GroupLens files);
``Dataset.info["encodings"]`` says which.  ML-100K's ``u.info`` counts, when the file is there, are
compared with what was read (a file cut at a line boundary is reported in ``info["warnings"]``).
"""

from __future__ import annotations

import csv
import io
import os
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pandas as pd

from facterlab.data.dataset import AGE_LABELS, AGE_ORDER, GENDERS, GENRES, OCCUPATION_LABELS, Dataset, age_bucket

_SEP = "\x1f"  # "::" is rewritten to this single character so that the C parser can read ML-1M
ML100K_GENRES = ("unknown",) + GENRES


def _malformed(path: Path, lineno: int, line: str, expected: str) -> ValueError:
    return ValueError(f"{path}: malformed line {lineno}: {line[:120]!r} (expected {expected})")


RATING_RANGE = (1, 5)  # MovieLens star ratings
AGE_RANGE = (1, 120)  # ML-100K numeric ages


def decode_text(path: os.PathLike | str, encoding: str = "auto") -> tuple:
    """``(text, encoding used)``: ``"auto"`` reads UTF-8 when the bytes are valid UTF-8, else latin-1.

    >>> import tempfile, pathlib
    >>> p = pathlib.Path(tempfile.mkdtemp()) / "u.item"
    >>> _ = p.write_bytes("1|Misérables".encode("utf-8")); decode_text(p)
    ('1|Misérables', 'utf-8')
    >>> _ = p.write_bytes("1|Misérables".encode("latin-1")); decode_text(p)
    ('1|Misérables', 'latin-1')
    """
    data = Path(path).read_bytes()
    if encoding != "auto":
        return data.decode(encoding), encoding
    try:
        return data.decode("utf-8"), "utf-8"
    except UnicodeDecodeError:
        return data.decode("latin-1"), "latin-1"


def read_table(
    path: os.PathLike | str,
    sep: str,
    names: Sequence[str],
    int_cols: Sequence[str] = (),
    expected: str = "",
    encoding: str = "auto",
) -> pd.DataFrame:
    """Read a delimited text file without header into string/int columns.

    ``sep`` may be multi-character (``"::"``).  Every line must have exactly ``len(names)`` fields and
    integer values in ``int_cols`` (``4.5`` is malformed, not truncated); otherwise ValueError
    ``"<path>: malformed line <n>: ..."``.  ``encoding="auto"``: :func:`decode_text`.

    >>> import tempfile, pathlib
    >>> p = pathlib.Path(tempfile.mkdtemp()) / "r.dat"
    >>> _ = p.write_text("1::10::5::978300760\\n2::20::4::978300761\\n")
    >>> read_table(p, "::", ["u", "i", "r", "t"], int_cols=["u", "i", "r", "t"]).to_numpy().tolist()
    [[1, 10, 5, 978300760], [2, 20, 4, 978300761]]
    """
    path = Path(path)
    raw, _ = decode_text(path, encoding)
    text = raw.replace("::", _SEP) if sep == "::" else raw
    psep = _SEP if sep == "::" else sep
    expected = expected or f"{len(names)} fields separated by {sep!r}"
    if not text.strip():
        return pd.DataFrame({n: pd.Series(dtype=np.int64 if n in int_cols else object) for n in names})
    # fast path: integer columns parsed directly by the C parser; any problem -> the checking path
    pos_dtypes = {j: (np.int64 if n in int_cols else str) for j, n in enumerate(names)}
    try:
        df = pd.read_csv(
            io.StringIO(text),
            sep=psep,
            header=None,
            dtype=pos_dtypes,
            quoting=csv.QUOTE_NONE,
            keep_default_na=False,
            skip_blank_lines=False,
            engine="c",
        )
        if df.shape[1] == len(names) and not df.isna().to_numpy().any():
            df.columns = list(names)
            return df
    except (ValueError, OverflowError, pd.errors.ParserError):
        pass
    # checking path: find the first line with the wrong number of fields, then the first bad value
    lines = raw.split("\n")
    plines = text.split("\n")
    if plines and plines[-1] == "":
        plines = plines[:-1]
    for i, line in enumerate(plines):
        if line.rstrip("\r").count(psep) != len(names) - 1:
            raise _malformed(path, i + 1, lines[i], expected)
    df = pd.read_csv(
        io.StringIO(text),
        sep=psep,
        header=None,
        names=list(names),
        dtype=str,
        quoting=csv.QUOTE_NONE,
        keep_default_na=False,
        na_filter=False,
        skip_blank_lines=False,
        engine="c",
        index_col=False,
    )
    bad = np.zeros(len(df), dtype=bool)
    converted = {}
    for col in int_cols:
        vals = pd.to_numeric(df[col], errors="coerce")
        arr = vals.to_numpy(dtype=float)
        bad |= ~np.isfinite(arr) | (arr != np.round(arr)) | (np.abs(arr) > 2**62)
        converted[col] = vals
    if bad.any():
        i = int(np.flatnonzero(bad)[0])
        raise _malformed(path, i + 1, lines[i] if i < len(lines) else "", expected)
    for col, vals in converted.items():
        df[col] = vals.to_numpy().astype(np.int64)
    return df


def _check_values(path: Path, series: pd.Series, allowed, what: str) -> None:
    bad = ~series.isin(list(allowed)).to_numpy()
    if bad.any():
        i = int(np.flatnonzero(bad)[0])
        value = series.iloc[i]
        value = value.item() if hasattr(value, "item") else value
        raise ValueError(f"{path}: malformed line {i + 1}: {what} {value!r} is not one of {sorted(allowed)}")


def _check_range(path: Path, series: pd.Series, lo: int, hi: int, what: str) -> None:
    arr = series.to_numpy()
    bad = (arr < lo) | (arr > hi)
    if bad.any():
        i = int(np.flatnonzero(bad)[0])
        raise ValueError(f"{path}: malformed line {i + 1}: {what} {arr[i].item()!r} is outside {lo}..{hi}")


def _check_nonempty(path: Path, df: pd.DataFrame, what: str) -> None:
    if len(df) == 0:
        raise ValueError(
            f"{path}: no {what} (the file is empty); restore the original file or run `facterlab data download`"
        )


def _check_unique_pairs(path: Path, df: pd.DataFrame) -> None:
    """MovieLens has one rating per (user, item): a repeated pair (a file concatenated with itself, a bad
    merge) is an error naming how many and the first line, not a silent change of every history.

    >>> import pandas as pd
    >>> _check_unique_pairs(Path("u.data"), pd.DataFrame({"user_id": [1, 1], "item_id": [2, 3]}))
    >>> _check_unique_pairs(Path("u.data"), pd.DataFrame({"user_id": [1, 1], "item_id": [2, 2]}))
    Traceback (most recent call last):
    ...
    ValueError: u.data: 1 of 2 ratings repeat an earlier (user, item) pair, first at line 2 (user 1, item 2); MovieLens rates each pair once: restore the original file or run `facterlab data download`
    """
    dup = df.duplicated(["user_id", "item_id"]).to_numpy()
    if dup.any():
        i = int(dup.argmax())
        raise ValueError(
            f"{path}: {int(dup.sum()):,} of {len(df):,} ratings repeat an earlier (user, item) pair, first at line "
            f"{i + 1} (user {int(df['user_id'].iloc[i])}, item {int(df['item_id'].iloc[i])}); MovieLens rates each "
            "pair once: restore the original file or run `facterlab data download`"
        )


def _ratings_frame(df: pd.DataFrame) -> pd.DataFrame:
    return pd.DataFrame(
        {
            "user_id": df["user_id"].to_numpy(np.int64),
            "item_id": df["item_id"].to_numpy(np.int64),
            "rating": df["rating"].to_numpy(np.float32),
            "timestamp": df["timestamp"].to_numpy(np.int64),
        }
    )


def _check_ids(ratings: pd.DataFrame, users: pd.DataFrame, items: pd.DataFrame, path: Path) -> None:
    for col, table, what in (("user_id", users, "user"), ("item_id", items, "item")):
        ids = table[col].to_numpy()
        if len(np.unique(ids)) != len(ids):
            raise ValueError(f"{path.parent}: duplicate {what} ids in the {what} table")
        unknown = ~np.isin(ratings[col].to_numpy(), ids)
        if unknown.any():
            i = int(np.flatnonzero(unknown)[0])
            raise ValueError(
                f"{path}: line {i + 1} refers to {what} {int(ratings[col].iloc[i])}, which is not in the {what} table"
            )


def items_frame(item_ids, titles, features) -> pd.DataFrame:
    """The items table: item_id, title, features (list of genres), text ``"{title} :: {g1|g2}"``."""
    features = [list(f) for f in features]
    text = [f"{t} :: {'|'.join(f)}" if f else t for t, f in zip(titles, features)]
    return pd.DataFrame(
        {"item_id": np.asarray(item_ids, dtype=np.int64), "title": list(titles), "features": features, "text": text}
    )


def load_ml1m(directory: os.PathLike | str, name: str = "ml-1m", is_synthetic: bool = False) -> Dataset:
    """Load MovieLens-1M from ``directory`` (ratings.dat, users.dat, movies.dat; latin-1, ``::``).

    Age codes {1,18,25,35,45,50,56} and occupation codes 0..20 become the ML-1M README labels.
    """
    d = Path(directory)
    rpath, upath, mpath = d / "ratings.dat", d / "users.dat", d / "movies.dat"
    for p in (rpath, upath, mpath):
        if not p.is_file():
            raise FileNotFoundError(
                f"{p} not found (MovieLens-1M format needs ratings.dat, users.dat, movies.dat in {d})"
            )
    r = read_table(
        rpath,
        "::",
        ["user_id", "item_id", "rating", "timestamp"],
        int_cols=["user_id", "item_id", "rating", "timestamp"],
        expected="UserID::MovieID::Rating::Timestamp with integers",
    )
    _check_nonempty(rpath, r, "ratings")
    _check_unique_pairs(rpath, r)
    _check_range(rpath, r["rating"], *RATING_RANGE, "rating")
    _check_range(rpath, r["timestamp"], 0, 2**62, "timestamp")
    u = read_table(
        upath,
        "::",
        ["user_id", "gender", "age", "occupation", "zip"],
        int_cols=["user_id", "age", "occupation"],
        expected="UserID::Gender::Age::Occupation::Zip-code",
    )
    _check_values(upath, u["gender"], GENDERS, "gender")
    _check_values(upath, u["age"], AGE_LABELS, "age code")
    _check_values(upath, u["occupation"], OCCUPATION_LABELS, "occupation code")
    _check_nonempty(upath, u, "users")
    m = read_table(mpath, "::", ["item_id", "title", "genres"], int_cols=["item_id"], expected="MovieID::Title::Genres")
    _check_nonempty(mpath, m, "movies")
    users = pd.DataFrame(
        {
            "user_id": u["user_id"].to_numpy(np.int64),
            "gender": u["gender"].astype(str).to_numpy(),
            "age": u["age"].map(AGE_LABELS).to_numpy(),
            "occupation": u["occupation"].map(OCCUPATION_LABELS).to_numpy(),
        }
    )
    genres = [[g for g in s.split("|") if g and g != "(no genres listed)"] for s in m["genres"]]
    items = items_frame(m["item_id"], m["title"].tolist(), genres)
    ratings = _ratings_frame(r)
    _check_ids(ratings, users, items, rpath)
    return Dataset(
        name=name,
        domain="movie",
        is_synthetic=is_synthetic,
        ratings=ratings,
        users=users,
        items=items,
        attribute_values={
            "gender": list(GENDERS),
            "age": list(AGE_ORDER),
            "occupation": list(OCCUPATION_LABELS.values()),
        },
        info={"source": str(d), "format": "ml-1m", "encodings": {p.name: decode_text(p)[1] for p in (mpath,)}},
    )


def load_ml100k(directory: os.PathLike | str) -> Dataset:
    """Load MovieLens-100K from ``directory`` (u.data, u.user, u.item; latin-1).

    Numeric ages are mapped to the ML-1M age buckets; occupation names are kept (their canonical
    order is ``u.occupation`` when present, else sorted); the "unknown" genre flag is dropped.
    """
    d = Path(directory)
    dpath, upath, ipath = d / "u.data", d / "u.user", d / "u.item"
    for p in (dpath, upath, ipath):
        if not p.is_file():
            raise FileNotFoundError(f"{p} not found (MovieLens-100K format needs u.data, u.user, u.item in {d})")
    r = read_table(
        dpath,
        "\t",
        ["user_id", "item_id", "rating", "timestamp"],
        int_cols=["user_id", "item_id", "rating", "timestamp"],
        expected="user id<TAB>item id<TAB>rating<TAB>timestamp with integers",
    )
    _check_nonempty(dpath, r, "ratings")
    _check_unique_pairs(dpath, r)
    _check_range(dpath, r["rating"], *RATING_RANGE, "rating")
    _check_range(dpath, r["timestamp"], 0, 2**62, "timestamp")
    u = read_table(
        upath,
        "|",
        ["user_id", "age", "gender", "occupation", "zip"],
        int_cols=["user_id", "age"],
        expected="user id|age|gender|occupation|zip code",
    )
    _check_nonempty(upath, u, "users")
    _check_values(upath, u["gender"], GENDERS, "gender")
    _check_range(upath, u["age"], *AGE_RANGE, "age")
    flags = [f"g{i}" for i in range(len(ML100K_GENRES))]
    it = read_table(
        ipath,
        "|",
        ["item_id", "title", "release", "video", "url"] + flags,
        int_cols=["item_id"] + flags,
        expected="movie id|title|release date|video release date|IMDb URL|19 genre flags",
    )
    _check_nonempty(ipath, it, "movies")
    flag_mat = it[flags].to_numpy(np.int64)
    if not np.isin(flag_mat, (0, 1)).all():
        i = int(np.flatnonzero(~np.isin(flag_mat, (0, 1)).all(axis=1))[0])
        raise ValueError(f"{ipath}: malformed line {i + 1}: genre flags must be 0 or 1")
    genres = [[g for g, f in zip(ML100K_GENRES, row) if f and g != "unknown"] for row in flag_mat]
    items = items_frame(it["item_id"], it["title"].tolist(), genres)
    users = pd.DataFrame(
        {
            "user_id": u["user_id"].to_numpy(np.int64),
            "gender": u["gender"].to_numpy(),
            "age": [age_bucket(a) for a in u["age"]],
            "occupation": u["occupation"].to_numpy(),
        }
    )
    occ_file = d / "u.occupation"
    if occ_file.is_file():
        occupations = [ln.strip() for ln in occ_file.read_text(encoding="latin-1").splitlines() if ln.strip()]
        _check_values(upath, users["occupation"], occupations, "occupation")
    else:
        occupations = sorted(users["occupation"].unique().tolist())
    ratings = _ratings_frame(r)
    _check_ids(ratings, users, items, dpath)
    warnings = _ml100k_info_warnings(d / "u.info", {"users": len(users), "items": len(items), "ratings": len(ratings)})
    return Dataset(
        name="ml-100k",
        domain="movie",
        is_synthetic=False,
        ratings=ratings,
        users=users,
        items=items,
        attribute_values={"gender": list(GENDERS), "age": list(AGE_ORDER), "occupation": occupations},
        info={
            "source": str(d),
            "format": "ml-100k",
            "n_duplicate_titles": int(items["title"].duplicated().sum()),
            "encodings": {p.name: decode_text(p)[1] for p in (ipath,)},
            "warnings": warnings,
        },
    )


def _ml100k_info_warnings(info_path: Path, counts: dict) -> list:
    """Differences between ``u.info`` ("943 users" ...) and the counts read (empty when it agrees or
    is absent)."""
    if not info_path.is_file():
        return []
    out = []
    for line in info_path.read_text(encoding="latin-1").splitlines():
        parts = line.split()
        if len(parts) == 2 and parts[0].isdigit() and parts[1] in counts and int(parts[0]) != counts[parts[1]]:
            out.append(
                f"{info_path} says {parts[0]} {parts[1]}, the files hold {counts[parts[1]]} "
                "(a truncated or edited file?)"
            )
    return out
