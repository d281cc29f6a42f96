"""Amazon Movies & TV 2018 loader (Ni, Li, McAuley 2019; docs/FACTER.md §1.1).

Files (in ``<data_dir>/amazon-movies-tv/``): the 5-core reviews ``Movies_and_TV_5.json.gz`` (fields
``reviewerID``, ``asin``, ``overall``, ``unixReviewTime``) and the metadata
``meta_Movies_and_TV.json.gz`` (``asin``, ``title``, ``category``).  Both are gzipped JSON lines read
as a stream: memory grows with the number of kept reviews (four numbers each) and items, never with
the review texts.

- Titles come from the metadata ``title`` (REPRO); ORIG used a review headline (a defect, not copied).
  Reviews of items without a metadata title are dropped and counted in ``Dataset.info``.
- Features: the metadata ``category`` list without the root "Movies & TV" (present on every item).
- Demographics: Amazon has none.  One seeded draw per user (``demographics_seed``): gender uniform
  {M, F}, age uniform over the 7 ML-1M age codes, occupation uniform over the 21 ML-1M codes; the
  labels are the ML-1M labels.  Users are drawn in sorted ``reviewerID`` order.
- Ids: ``item_id`` 1..n by sorted ``asin``, ``user_id`` 1..n by sorted ``reviewerID`` (kept in the
  ``asin`` and ``reviewer_id`` columns).
"""

from __future__ import annotations

import gzip
import html
import json
import os
from array import array
from pathlib import Path

import numpy as np
import pandas as pd

from facterlab.data.dataset import AGE_LABELS, AGE_ORDER, GENDERS, OCCUPATION_LABELS, Dataset
from facterlab.safeio import loads_json

REVIEWS_FILE = "Movies_and_TV_5.json.gz"
META_FILE = "meta_Movies_and_TV.json.gz"
ROOT_CATEGORY = "Movies & TV"


def draw_demographics(n_users: int, seed: int = 0) -> pd.DataFrame:
    """Seeded demographics for users 0..n-1 (docs/FACTER.md §1.1): gender, age and occupation labels.

    Gender uniform over {M, F}, age uniform over the ML-1M codes, occupation uniform over 0..20.

    >>> d = draw_demographics(1000, seed=3)
    >>> sorted(d["gender"].unique()), d["age"].nunique(), d["occupation"].nunique()
    (['F', 'M'], 7, 21)
    >>> draw_demographics(5, 3).equals(d.head(5))
    True
    """
    rng = np.random.default_rng(seed)
    # one (gender, age, occupation) draw per user, user after user: a prefix of users keeps its draws
    draws = rng.integers(0, [len(GENDERS), len(AGE_LABELS), len(OCCUPATION_LABELS)], size=(n_users, 3))
    g, a, o = draws[:, 0], draws[:, 1], draws[:, 2]
    return pd.DataFrame(
        {
            "gender": np.array(GENDERS, dtype=object)[g],
            "age": np.array(AGE_ORDER, dtype=object)[a],
            "occupation": np.array(list(OCCUPATION_LABELS.values()), dtype=object)[o],
        }
    )


def _lines(path: Path):
    lineno = 0
    try:
        with gzip.open(path, "rt", encoding="utf-8") as fh:
            for lineno, line in enumerate(fh, 1):
                if line.strip():
                    yield lineno, line
    except (EOFError, OSError, UnicodeDecodeError) as exc:  # cut download, not gzip, not UTF-8
        raise ValueError(
            f"{path}: unreadable after line {lineno} ({type(exc).__name__}: {exc}); the file is "
            "truncated or not the original gzipped JSON lines: download it again"
        ) from None


def _parse(path: Path, lineno: int, line: str) -> dict:
    try:
        rec = loads_json(line, f"{path}: line {lineno}")
    except json.JSONDecodeError as exc:
        raise ValueError(f"{path}: malformed line {lineno}: not a JSON object ({exc.msg})") from None
    if not isinstance(rec, dict):
        raise ValueError(f"{path}: malformed line {lineno}: not a JSON object")
    return rec


def _codes(keys: dict, codes: array):
    """First-seen codes -> codes in sorted key order; returns (sorted keys, recoded int64 array)."""
    names = list(keys)
    order = np.argsort(np.array(names, dtype=object), kind="stable")
    rank = np.empty(len(names), dtype=np.int64)
    rank[order] = np.arange(len(names))
    return [names[i] for i in order], rank[np.frombuffer(codes, dtype=np.int64)] if len(codes) else np.zeros(
        0, np.int64
    )


def read_reviews(path: os.PathLike | str, max_reviews: int | None = None):
    """Stream the reviews file into integer codes (bounded memory: no per-review strings kept).

    Returns (sorted reviewer ids, user codes, sorted asins, item codes, ratings float32, times int64);
    code c refers to position c of the sorted id list.
    """
    path = Path(path)
    ukeys: dict = {}
    ikeys: dict = {}
    ucodes, icodes = array("q"), array("q")
    ratings, times = array("f"), array("q")
    for n, (lineno, line) in enumerate(_lines(path)):
        if max_reviews is not None and n >= max_reviews:
            break
        rec = _parse(path, lineno, line)
        try:
            u, i = str(rec["reviewerID"]), str(rec["asin"])
            r, t = float(rec["overall"]), int(rec["unixReviewTime"])
        except (KeyError, TypeError, ValueError) as exc:
            raise ValueError(
                f"{path}: malformed line {lineno}: needs reviewerID, asin, overall, "
                f"unixReviewTime ({type(exc).__name__}: {exc})"
            ) from None
        if not 1.0 <= r <= 5.0:  # also rejects NaN
            raise ValueError(f"{path}: malformed line {lineno}: overall {rec['overall']!r} is outside 1..5")
        if t < 0:
            raise ValueError(f"{path}: malformed line {lineno}: unixReviewTime {t} is negative")
        ucodes.append(ukeys.setdefault(u, len(ukeys)))
        icodes.append(ikeys.setdefault(i, len(ikeys)))
        ratings.append(r)
        times.append(t)
    reviewers, ucode = _codes(ukeys, ucodes)
    asins, icode = _codes(ikeys, icodes)
    return (
        reviewers,
        ucode,
        asins,
        icode,
        np.frombuffer(ratings, dtype=np.float32).copy(),
        np.frombuffer(times, dtype=np.int64).copy(),
    )


def read_metadata(path: os.PathLike | str, asins: set) -> dict:
    """Stream the metadata; return ``{asin: (title, categories)}`` for the wanted asins (first record wins)."""
    path = Path(path)
    out: dict = {}
    for lineno, line in _lines(path):
        rec = _parse(path, lineno, line)
        asin = rec.get("asin")
        if asin is None:
            raise ValueError(f"{path}: malformed line {lineno}: no asin field")
        if asin not in asins or asin in out:
            continue
        title = html.unescape(str(rec.get("title") or "")).strip()
        cats = rec.get("category") or []
        if not isinstance(cats, list):
            cats = [cats]
        cats = [html.unescape(str(c)).strip() for c in cats]
        out[asin] = (title, [c for c in cats if c and c != ROOT_CATEGORY])
    return out


def load_amazon(directory: os.PathLike | str, demographics_seed: int = 0, max_reviews: int | None = None) -> Dataset:
    """Load Amazon Movies & TV 2018 5-core with metadata titles/categories and seeded demographics."""
    d = Path(directory)
    rpath, mpath = d / REVIEWS_FILE, d / META_FILE
    for p in (rpath, mpath):
        if not p.is_file():
            raise FileNotFoundError(f"{p} not found (Amazon Movies & TV needs {REVIEWS_FILE} and {META_FILE} in {d})")
    reviewers_all, user_code, asins, asin_codes, ratings, times = read_reviews(rpath, max_reviews)
    if len(asin_codes) == 0:
        raise ValueError(
            f"{rpath}: no reviews (the file is empty); restore the original file or run "
            "`facterlab data download --dataset amazon`"
        )
    meta = read_metadata(mpath, set(asins))
    asins = np.array(asins, dtype=object)
    titled = np.array([bool(meta.get(a, ("", []))[0]) for a in asins], dtype=bool)
    keep = titled[asin_codes] if len(asin_codes) else np.zeros(0, dtype=bool)
    n_dropped = int((~keep).sum())
    used_users = np.unique(user_code[keep])
    new_user = np.full(len(reviewers_all), -1, dtype=np.int64)
    new_user[used_users] = np.arange(len(used_users))
    user_codes = new_user[user_code[keep]]
    reviewers = [reviewers_all[i] for i in used_users]
    kept_asins = asins[titled]
    new_item = np.full(len(asins), -1, dtype=np.int64)
    new_item[titled] = np.arange(1, len(kept_asins) + 1)
    ratings_df = pd.DataFrame(
        {
            "user_id": (user_codes + 1).astype(np.int64),
            "item_id": new_item[asin_codes[keep]],
            "rating": ratings[keep],
            "timestamp": times[keep],
        }
    )
    titles = [meta[a][0] for a in kept_asins]
    feats = [meta[a][1] for a in kept_asins]
    items = pd.DataFrame(
        {
            "item_id": np.arange(1, len(kept_asins) + 1, dtype=np.int64),
            "title": titles,
            "features": feats,
            "text": titles,
            "asin": list(kept_asins),
        }
    )
    demo = draw_demographics(len(reviewers), demographics_seed)
    users = pd.DataFrame(
        {"user_id": np.arange(1, len(reviewers) + 1, dtype=np.int64), **demo, "reviewer_id": list(reviewers)}
    )
    return Dataset(
        name="amazon",
        domain="product",
        is_synthetic=False,
        ratings=ratings_df,
        users=users,
        items=items,
        attribute_values={
            "gender": list(GENDERS),
            "age": list(AGE_ORDER),
            "occupation": list(OCCUPATION_LABELS.values()),
        },
        info={
            "source": str(d),
            "format": "amazon-2018",
            "demographics": "drawn at random (seeded)",
            "demographics_seed": demographics_seed,
            "max_reviews": max_reviews,
            "n_reviews_read": int(len(asin_codes)),
            "n_reviews_dropped_no_title": n_dropped,
            "n_items_without_title": int((~titled).sum()),
        },
    )
