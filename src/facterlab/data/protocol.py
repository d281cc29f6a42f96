"""Interaction rows, calibration/test split, ground truth and candidates (docs/FACTER.md §1.2, REPRO protocol).

1. Positives: ratings >= ``min_rating`` (4).  Each user's positives are sorted by timestamp, ties
   broken by ``tie_order`` (docs/PROTOCOL.md): ``"file_order"`` (REPRO, the ``repro`` preset: the
   order of the ratings file, as REPRO's stable sort left them) or ``"item_id"`` (facterlab); a
   repeated (user, item) keeps its first occurrence (never in MovieLens; Amazon can repeat).
2. A row is a (user, position t) with t >= H = 10: history = positives t-H..t-1 (oldest first),
   target = positive t.
3. Relevance set ("multi"): positives t..t+W-1, W = 10, cut at the user's end; target first.
4. Exactly n rows are drawn without replacement by a seeded generator (default n: ml-1m 2,500,
   amazon 3,750, others 2,500); a plain seeded permutation puts round(0.7 n) rows in "calib" and the
   rest in "test" (REPRO's stratified split silently fell back to random; ours is random by design).
5. Candidates (C = 40 per row): positives = relevance set minus history, at most min(W, C - 1);
   negatives uniform without replacement from the catalogue minus history and positives; shuffled.

Random streams: sampling, split and candidates each use their own generator
``numpy.random.default_rng([seed, stream])`` with stream 0, 1, 2, so changing one step leaves the
others' draws unchanged.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import tempfile
import time
from dataclasses import dataclass, field, replace
from pathlib import Path

import numpy as np
import pandas as pd

from facterlab.config import DataConfig, config_to_dict
from facterlab.config import cache_dir as _cache_dir
from facterlab.corrupt import move_aside
from facterlab.data import load_dataset, resolve_dataset
from facterlab.data.dataset import PROTECTED, Dataset
from facterlab.paths import locked, remove_dead_temps
from facterlab.safeio import read_json

PROTOCOL_VERSION = 1
DEFAULT_N_ROWS = {"ml-1m": 2500, "amazon": 3750}
STREAM_SAMPLE, STREAM_SPLIT, STREAM_CANDIDATES = 0, 1, 2
LIST_COLUMNS = ("history", "relevant", "candidates")
#: the rows' columns for the built-in datasets; an imported dataset has its own attributes in PROTECTED's place
ROW_COLUMNS = ("row_id", "user_id") + PROTECTED + ("history", "target", "relevant", "candidates", "split")
#: column names of the rows table that no protected attribute may take
RESERVED_COLUMNS = ("row_id", "user_id", "item_id", "history", "target", "relevant", "candidates", "split")


def default_n_rows(dataset_name: str) -> int:
    """The protocol's n for a dataset: ml-1m 2,500, amazon 3,750, others 2,500.

    >>> default_n_rows("amazon"), default_n_rows("ml-100k")
    (3750, 2500)
    """
    return DEFAULT_N_ROWS.get(dataset_name, 2500)


@dataclass
class Interactions:
    """The protocol's interaction rows with their calibration/test split (the columns: module docstring and
    docs/CONTRACTS.md)."""

    rows: pd.DataFrame
    items: pd.DataFrame
    dataset: str
    domain: str
    is_synthetic: bool
    config: DataConfig
    content_hash: str
    n_distinct_users: dict = field(default_factory=dict)
    cache_path: Path | None = None
    #: the dataset's protected attributes (``Dataset.protected``), the rows' attribute columns in order
    protected: tuple = PROTECTED
    #: ``Dataset.attribute_values`` and ``Dataset.wordings`` of the rows' dataset
    attribute_values: dict = field(default_factory=dict)
    wordings: dict = field(default_factory=dict)

    @property
    def calib(self) -> pd.DataFrame:
        """Calibration rows, in row order."""
        return self.rows[self.rows["split"].to_numpy() == "calib"]

    @property
    def test(self) -> pd.DataFrame:
        """Test rows, in row order."""
        return self.rows[self.rows["split"].to_numpy() == "test"]


@dataclass
class _Positives:
    users: np.ndarray  # user id per positive, sorted by (user, timestamp, item)
    items: np.ndarray
    start: np.ndarray  # per positive: index of its user's first positive
    end: np.ndarray  # per positive: one past its user's last positive


def positives(dataset: Dataset, min_rating: int = 4, tie_order: str = "item_id") -> _Positives:
    """Positives sorted by (user, timestamp, tie breaker), repeats of a (user, item) dropped.

    ``tie_order``: ``"item_id"`` breaks equal timestamps by item id, ``"file_order"`` by the position
    in ``dataset.ratings`` (the file's line order).
    """
    if tie_order not in ("item_id", "file_order"):
        raise ValueError(f"unknown tie_order {tie_order!r}; choose 'file_order' or 'item_id'")
    r = dataset.ratings
    keep = r["rating"].to_numpy() >= min_rating
    u = r["user_id"].to_numpy()[keep]
    i = r["item_id"].to_numpy()[keep]
    t = r["timestamp"].to_numpy()[keep]
    tie = i if tie_order == "item_id" else np.flatnonzero(keep)
    order = np.lexsort((tie, t, u))
    u, i = u[order], i[order]
    if len(u):
        dup = pd.DataFrame({"u": u, "i": i}).duplicated().to_numpy()
        u, i = u[~dup], i[~dup]
    n = len(u)
    new_user = np.ones(n, dtype=bool)
    new_user[1:] = u[1:] != u[:-1]
    first = np.flatnonzero(new_user)
    sizes = np.diff(np.append(first, n))
    start = np.repeat(first, sizes)
    end = np.repeat(first + sizes, sizes)
    return _Positives(u, i, start, end)


def eligible_positions(pos: _Positives, history_len: int = 10) -> np.ndarray:
    """Indices (into the positives) of the rows' targets: positions t >= history_len, user order then t."""
    return np.flatnonzero(np.arange(len(pos.users)) - pos.start >= history_len)


def count_eligible(dataset: Dataset, cfg: DataConfig | None = None) -> int:
    """Number of eligible rows: sum over users of max(0, #positives - history_len)."""
    cfg = cfg or DataConfig()
    return int(len(eligible_positions(positives(dataset, cfg.min_rating), cfg.history_len)))


def _candidates(
    rng: np.random.Generator,
    catalogue: np.ndarray,
    cat_set: set,
    history: list,
    relevant: list,
    n_candidates: int,
    max_pos: int,
) -> list:
    """Positives (relevance minus history, capped) + uniform negatives, shuffled (docs/FACTER.md §1.2 step 5).

    Drawing need + |excluded| distinct catalogue items and keeping the first ``need`` not excluded is
    a uniform draw without replacement from the catalogue minus the excluded items.
    """
    hist = set(history)
    pos = [x for x in relevant if x not in hist][:max_pos]
    excl = hist | set(pos)
    need = n_candidates - len(pos)
    n_excl_in_cat = len(excl & cat_set)
    if len(catalogue) - n_excl_in_cat < need:
        raise ValueError(
            f"the catalogue has {len(catalogue)} items: too few to draw {need} negatives "
            f"outside a row's history and positives (n_candidates = {n_candidates})"
        )
    draw = catalogue[rng.choice(len(catalogue), size=min(len(catalogue), need + n_excl_in_cat), replace=False)]
    neg = [int(x) for x in draw if int(x) not in excl][:need]
    cands = pos + neg
    return [cands[j] for j in rng.permutation(len(cands))]


def build_interactions(dataset: Dataset, cfg: DataConfig | None = None, n_rows: int | None = None) -> Interactions:
    """Build the protocol's interaction rows from a dataset: history, target and candidates per row, split
    into calibration and test (docs/FACTER.md §1.2; each step: module docstring).

    ``n_rows`` overrides ``cfg.n_rows``, which overrides the dataset default.  Too few eligible rows
    is a ValueError naming both numbers.
    """
    cfg = cfg or DataConfig()
    n = int(n_rows if n_rows is not None else cfg.n_rows if cfg.n_rows is not None else default_n_rows(dataset.name))
    H, W, C = cfg.history_len, cfg.future_window, cfg.n_candidates
    if n < 2:
        raise ValueError(f"n_rows must be at least 2 (one calibration and one test row), got {n}")
    pos = positives(dataset, cfg.min_rating, cfg.tie_order)
    elig = eligible_positions(pos, H)
    if len(elig) < n:
        raise ValueError(
            f"dataset {dataset.name!r} has {len(elig)} eligible interaction rows (users' "
            f"positives at position >= {H} with rating >= {cfg.min_rating}), fewer than "
            f"the {n} rows requested"
        )
    rng_sample = np.random.default_rng([cfg.seed, STREAM_SAMPLE])
    p = elig[rng_sample.choice(len(elig), size=n, replace=False)]
    hist_idx = p[:, None] + np.arange(-H, 0)[None, :]
    history = pos.items[hist_idx]
    targets = pos.items[p]
    ends = np.minimum(p + W, pos.end[p])
    relevant = [pos.items[a:b].tolist() for a, b in zip(p, ends)]
    user_ids = pos.users[p]
    # split: plain seeded permutation
    n_calib = int(round(cfg.calib_frac * n))
    if not 0 < n_calib < n:
        raise ValueError(f"calib_frac = {cfg.calib_frac} leaves an empty split for n = {n} rows")
    perm = np.random.default_rng([cfg.seed, STREAM_SPLIT]).permutation(n)
    split = np.full(n, "test", dtype=object)
    split[perm[:n_calib]] = "calib"
    # candidates
    hist_lists = history.tolist()
    if C > 0:
        rng_c = np.random.default_rng([cfg.seed, STREAM_CANDIDATES])
        catalogue = np.sort(dataset.items["item_id"].to_numpy(np.int64))
        max_pos = min(W, C - 1)
        cat_set = set(catalogue.tolist())
        cands = [_candidates(rng_c, catalogue, cat_set, h, rel, C, max_pos) for h, rel in zip(hist_lists, relevant)]
    else:
        cands = [[] for _ in range(n)]
    users = dataset.users.set_index("user_id")
    attrs = users.loc[user_ids, list(dataset.protected)]
    rows = pd.DataFrame(
        {
            "row_id": np.arange(n, dtype=np.int64),
            "user_id": user_ids.astype(np.int64),
            **{a: attrs[a].to_numpy() for a in dataset.protected},
            "history": hist_lists,
            "target": targets.astype(np.int64),
            "relevant": relevant,
            "candidates": cands,
            "split": split.astype(str),
        }
    )
    eff = effective_config(dataset, cfg, n)
    return Interactions(
        rows=rows,
        items=dataset.items.set_index("item_id"),
        dataset=dataset.name,
        domain=dataset.domain,
        is_synthetic=dataset.is_synthetic,
        config=eff,
        content_hash=interactions_hash(dataset, eff),
        n_distinct_users=distinct_users(rows),
        **_dataset_parts(dataset),
    )


def _dataset_parts(dataset: Dataset) -> dict:
    """What :class:`Interactions` keeps of its dataset's description."""
    return {"protected": dataset.protected, "attribute_values": dataset.attribute_values, "wordings": dataset.wordings}


def distinct_users(rows: pd.DataFrame) -> dict:
    """Distinct users per split and overall: ``{"calib": a, "test": b, "all": c}``."""
    out = {s: int(rows.loc[rows["split"] == s, "user_id"].nunique()) for s in ("calib", "test")}
    out["all"] = int(rows["user_id"].nunique())
    return out


def effective_config(dataset: Dataset, cfg: DataConfig, n: int | None = None) -> DataConfig:
    """``cfg`` with the dataset name resolved and n_rows filled in (what the rows depend on)."""
    n = n if n is not None else cfg.n_rows if cfg.n_rows is not None else default_n_rows(dataset.name)
    return replace(cfg, dataset=dataset.name, n_rows=int(n))


def interactions_hash(dataset: Dataset, eff_cfg: DataConfig) -> str:
    """SHA-256 (16 hex) of the dataset content, the effective config and the protocol version."""
    blob = json.dumps(
        {"dataset": dataset.fingerprint(), "config": config_to_dict(eff_cfg), "protocol_version": PROTOCOL_VERSION},
        sort_keys=True,
    )
    return hashlib.sha256(blob.encode()).hexdigest()[:16]


def _read_rows(path: Path) -> pd.DataFrame:
    rows = pd.read_parquet(path)
    for col in LIST_COLUMNS:
        rows[col] = [np.asarray(v, dtype=np.int64).tolist() for v in rows[col]]
    for col in ("row_id", "user_id", "target"):
        rows[col] = rows[col].astype(np.int64)
    return rows


def load_or_build_interactions(
    dataset: Dataset | str | None = None,
    cfg: DataConfig | None = None,
    data_dir: os.PathLike | str | None = None,
    cache: os.PathLike | str | None = None,
) -> Interactions:
    """Build the rows once and reuse them: ``cache_dir()/interactions/<content hash>/``.

    The folder holds ``rows.parquet`` and ``config.json`` (effective config, dataset, is_synthetic,
    distinct users, content hash).  The hash covers the dataset's content and the config, so any
    change of either builds anew.  ``dataset`` may be a :class:`Dataset` or a name (default
    ``cfg.dataset``).
    """
    cfg = cfg or DataConfig()
    if not isinstance(dataset, Dataset):
        kw = {"demographics_seed": cfg.demographics_seed, "max_reviews": cfg.max_reviews}
        name = dataset or cfg.dataset
        resolved = resolve_dataset(name, data_dir)
        dataset = load_dataset(resolved, data_dir, **(kw if resolved == "amazon" else {}))
    eff = effective_config(dataset, cfg)
    h = interactions_hash(dataset, eff)
    d = _cache_dir(cache) / "interactions" / h
    cached = _cached_interactions(d, h, dataset, eff)
    if cached is not None:
        return cached
    inter = build_interactions(dataset, eff)
    d.parent.mkdir(parents=True, exist_ok=True)
    remove_dead_temps(d.parent, h)  # what a killed build left behind
    _remove_old_unnamed_temps(d.parent)
    tmp = Path(tempfile.mkdtemp(dir=d.parent, prefix=f".tmp-{h}-{os.getpid()}-"))
    try:
        inter.rows.to_parquet(tmp / "rows.parquet", index=False)
        (tmp / "config.json").write_text(
            json.dumps(
                {
                    "content_hash": h,
                    "dataset": dataset.name,
                    "dataset_fingerprint": dataset.fingerprint(),
                    "is_synthetic": dataset.is_synthetic,
                    "domain": dataset.domain,
                    "config": config_to_dict(eff),
                    "protocol_version": PROTOCOL_VERSION,
                    "n_rows": int(len(inter.rows)),
                    "n_calib": int(len(inter.calib)),
                    "n_test": int(len(inter.test)),
                    "n_distinct_users": inter.n_distinct_users,
                    "split": "plain seeded permutation (not stratified)",
                },
                indent=2,
                sort_keys=True,
            )
        )
        with locked(d.parent):  # concurrent builds of one entry take turns
            cached = _cached_interactions(d, h, dataset, eff)
            if cached is not None:  # another process put the same rows there first: use them
                return cached
            if d.exists():  # an incomplete entry (older versions wrote in place)
                shutil.rmtree(d)
            os.replace(tmp, d)
    finally:
        if tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)
    inter.cache_path = d
    return inter


def _remove_old_unnamed_temps(folder: Path, age_s: float = 3600.0) -> None:
    """Older versions named their temporary entries ``.tmp-<random>`` (no key, no pid): remove those
    untouched for ``age_s`` seconds (no build takes that long between its writes)."""
    now = time.time()
    for p in folder.glob(".tmp-*"):
        if "-" not in p.name[len(".tmp-") :]:
            try:
                if now - p.stat().st_mtime > age_s:
                    shutil.rmtree(p, ignore_errors=True)
            except OSError:
                pass


def _cached_interactions(d: Path, h: str, dataset: Dataset, eff: DataConfig) -> Interactions | None:
    """The complete cache entry ``d`` (both files, the right content hash) read back, else None."""
    if not ((d / "rows.parquet").is_file() and (d / "config.json").is_file()):
        return None
    try:
        meta = read_json(d / "config.json", what="interactions cache sidecar")
    except (OSError, ValueError):
        return None
    if meta.get("content_hash") != h:
        return None
    try:
        rows = _read_rows(d / "rows.parquet")
    except Exception as exc:  # noqa: BLE001 - a damaged entry: moved aside, then built again (issue 44)
        move_aside(d, "interactions cache entry", exc, "it is built again")
        return None
    return Interactions(
        rows=rows,
        items=dataset.items.set_index("item_id"),
        dataset=dataset.name,
        domain=dataset.domain,
        is_synthetic=dataset.is_synthetic,
        config=eff,
        content_hash=h,
        n_distinct_users=meta["n_distinct_users"],
        cache_path=d,
        **_dataset_parts(dataset),
    )


def group_sizes(inter: Interactions, split: str | None = "test", min_rows: int = 30) -> dict:
    """Rows per value of each protected attribute and per joint tuple of them (``inter.protected``).

    Returns ``{attr: DataFrame[value, n_rows, reaches_min], ..., "joint": DataFrame[...],
    "n_qualifying": {attr: count of groups with >= min_rows rows}}`` for the given split (None: all).
    """
    rows = inter.rows if split is None else inter.rows[inter.rows["split"] == split]
    out: dict = {}
    qual = {}
    for attr in inter.protected:
        vc = rows[attr].value_counts()
        df = pd.DataFrame({"value": vc.index.astype(str), "n_rows": vc.to_numpy(np.int64)})
        df["reaches_min"] = df["n_rows"] >= min_rows
        out[attr] = df
        qual[attr] = int(df["reaches_min"].sum())
    joint = rows.groupby(list(inter.protected)).size().sort_values(ascending=False)
    jdf = joint.reset_index(name="n_rows")
    jdf["reaches_min"] = jdf["n_rows"] >= min_rows
    out["joint"] = jdf
    qual["joint"] = int(jdf["reaches_min"].sum())
    out["n_qualifying"] = qual
    return out


def summarize(dataset: Dataset, cfg: DataConfig | None = None) -> dict:
    """Dataset statistics for the CLI and notebook 01: sizes, positives, eligible rows, attributes."""
    cfg = cfg or DataConfig()
    pos = positives(dataset, cfg.min_rating)
    n_elig = int(len(eligible_positions(pos, cfg.history_len)))
    out = dataset.summary()
    out.update(
        {
            "n_positive_ratings": int(len(pos.users)),
            "min_rating": cfg.min_rating,
            "n_users_with_eligible_rows": int(len(np.unique(pos.users[eligible_positions(pos, cfg.history_len)]))),
            "eligible_rows": n_elig,
            "default_n_rows": default_n_rows(dataset.name),
        }
    )
    return out
