"""The interaction protocol (docs/FACTER.md §1.2): golden rows by hand, invariants, determinism, cache."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pandas as pd
import pytest

from facterlab.config import DataConfig
from facterlab.data import Dataset, load_dataset
from facterlab.data.movielens import items_frame
from facterlab.data.protocol import build_interactions, count_eligible, group_sizes, load_or_build_interactions


def tiny_dataset(n_items: int = 200) -> Dataset:
    """User 1: 13 positives (items 101..113) with a timestamp tie, plus low ratings; user 2: 10 positives."""
    rows = []
    # user 1: items 101..113 rated 5 at times 1..13, except 105 and 104 share time 4 (tie -> item id order)
    times = {101: 1, 102: 2, 103: 3, 105: 4, 104: 4, 106: 6, 107: 7, 108: 8, 109: 9, 110: 10, 111: 11, 112: 12, 113: 13}
    for item, t in times.items():
        rows.append((1, item, 5.0, t))
    rows += [(1, 150, 3.0, 5), (1, 151, 2.0, 12)]  # below min_rating: never in history or relevance
    rows += [(2, 120 + j, 4.0, 100 + j) for j in range(10)]  # exactly 10 positives: no eligible row
    r = pd.DataFrame(rows, columns=["user_id", "item_id", "rating", "timestamp"])
    r = r.sample(frac=1.0, random_state=0).reset_index(drop=True)  # file order must not matter
    ratings = pd.DataFrame(
        {
            "user_id": r.user_id.astype(np.int64),
            "item_id": r.item_id.astype(np.int64),
            "rating": r.rating.astype(np.float32),
            "timestamp": r.timestamp.astype(np.int64),
        }
    )
    users = pd.DataFrame(
        {"user_id": [1, 2], "gender": ["F", "M"], "age": ["25-34", "56+"], "occupation": ["writer", "retired"]}
    )
    ids = list(range(1, n_items + 1))
    items = items_frame(ids, [f"Movie {i} (1990)" for i in ids], [["Drama"]] * n_items)
    return Dataset(
        name="synthetic",
        domain="movie",
        is_synthetic=True,
        ratings=ratings,
        users=users,
        items=items,
        attribute_values={"gender": ["M", "F"], "age": ["25-34", "56+"], "occupation": ["writer", "retired"]},
    )


def test_golden_rows_by_hand():
    ds = tiny_dataset()
    cfg = DataConfig(n_rows=3, seed=0, tie_order="item_id")
    assert count_eligible(ds, cfg) == 3  # user 1: positions 10, 11, 12; user 2: none
    inter = build_interactions(ds, cfg)
    rows = inter.rows.set_index("target")
    order = [101, 102, 103, 104, 105, 106, 107, 108, 109, 110, 111, 112, 113]  # tie 104/105 by item id
    assert sorted(rows.index) == [111, 112, 113]
    for t in (10, 11, 12):
        row = rows.loc[order[t]]
        assert row["history"] == order[t - 10 : t]
        assert row["relevant"] == order[t : t + 10]  # cut at the user's end
        assert row["user_id"] == 1 and row["gender"] == "F" and row["occupation"] == "writer"
    assert rows.loc[111, "relevant"] == [111, 112, 113]
    # rows are numbered in sampled order
    assert inter.rows["row_id"].tolist() == [0, 1, 2]


def test_file_order_breaks_timestamp_ties_by_line():
    """REPRO's tie order (the repro preset): items with the same timestamp keep the ratings file's order."""
    ds = tiny_dataset()
    r = ds.ratings
    lines = r["item_id"].tolist()
    a, b = lines.index(104), lines.index(105)
    if a < b:  # put 105 on the earlier line, so that the file order differs from the item-id order
        idx = list(range(len(r)))
        idx[a], idx[b] = b, a
        ds = replace(ds, ratings=r.iloc[idx].reset_index(drop=True))
    order = [101, 102, 103, 105, 104, 106, 107, 108, 109, 110, 111, 112, 113]
    rows = build_interactions(ds, DataConfig(n_rows=3, seed=0, tie_order="file_order")).rows.set_index("target")
    for t in (10, 11, 12):
        assert rows.loc[order[t], "history"] == order[t - 10 : t]
    assert DataConfig().tie_order == "file_order"
    by_id = build_interactions(ds, DataConfig(n_rows=3, seed=0, tie_order="item_id"))
    by_file = build_interactions(ds, DataConfig(n_rows=3, seed=0, tie_order="file_order"))
    assert by_id.content_hash != by_file.content_hash
    with pytest.raises(ValueError, match="tie_order"):
        DataConfig(tie_order="time")


def test_too_few_rows_names_both_numbers():
    with pytest.raises(ValueError, match=r"has 3 eligible interaction rows .* fewer than the 4 rows requested"):
        build_interactions(tiny_dataset(), DataConfig(n_rows=4))


def test_candidates_tiny_catalogue_error():
    with pytest.raises(ValueError, match="too few to draw"):
        build_interactions(tiny_dataset(n_items=120), DataConfig(n_rows=3, n_candidates=200))


@pytest.fixture(scope="module")
def synth():
    import os
    import tempfile

    old = os.environ.get("FACTERLAB_CACHE")
    os.environ["FACTERLAB_CACHE"] = tempfile.mkdtemp()
    try:
        return load_dataset("synthetic", n_users=300, n_items=500, n_ratings=20000, seed=2)
    finally:
        if old is None:
            del os.environ["FACTERLAB_CACHE"]
        else:
            os.environ["FACTERLAB_CACHE"] = old


def _independent_positive_sequences(ds: Dataset, min_rating: int = 4, tie_order: str = "item_id") -> dict:
    """Each user's positives ordered by (timestamp, item id or file line), with plain Python sorting."""
    seqs: dict = {}
    for line, (u, i, r, t) in enumerate(ds.ratings.itertuples(index=False)):
        if r >= min_rating:
            seqs.setdefault(int(u), []).append((int(t), int(i) if tie_order == "item_id" else line, int(i)))
    return {u: [i for _, _, i in sorted(v)] for u, v in seqs.items()}


@pytest.mark.parametrize("tie_order", ["item_id", "file_order"])
def test_invariants_against_independent_sequences(synth, tie_order):
    cfg = DataConfig(n_rows=1000, seed=0, tie_order=tie_order)
    inter = build_interactions(synth, cfg)
    rows = inter.rows
    seqs = _independent_positive_sequences(synth, tie_order=tie_order)
    assert count_eligible(synth, cfg) == sum(max(0, len(s) - 10) for s in seqs.values())
    assert len(rows) == 1000 and rows["row_id"].tolist() == list(range(1000))
    assert len(inter.calib) == 700 and len(inter.test) == 300
    assert set(rows["split"]) == {"calib", "test"}
    assert not rows.duplicated(["user_id", "target"]).any()  # without replacement
    catalogue = set(synth.items["item_id"])
    users = synth.users.set_index("user_id")
    for row in rows.itertuples(index=False):
        seq = seqs[row.user_id]
        t = seq.index(row.target)
        assert t >= 10
        assert row.history == seq[t - 10 : t] and len(row.history) == 10
        assert row.target not in row.history
        assert row.relevant[0] == row.target and row.relevant == seq[t : t + 10]
        cands = row.candidates
        assert len(cands) == 40 and len(set(cands)) == 40 and set(cands) <= catalogue
        assert not set(cands) & set(row.history)
        positives = [x for x in row.relevant if x not in row.history][:10]
        assert set(positives) <= set(cands)
        assert users.loc[row.user_id, "age"] == row.age
    # candidates are shuffled: the target is not always first
    assert (rows["candidates"].map(lambda c: c[0]) != rows["target"]).mean() > 0.8
    # distinct users per split
    assert inter.n_distinct_users["calib"] == inter.calib["user_id"].nunique()
    assert inter.n_distinct_users["test"] == inter.test["user_id"].nunique()
    # calib/test keep row order
    assert inter.test["row_id"].is_monotonic_increasing


def test_negatives_are_uniform(synth):
    """Negatives cover the catalogue evenly: a popular item is not drawn more than a rare one."""
    inter = build_interactions(synth, DataConfig(n_rows=2000, seed=1))
    negs = [c for row in inter.rows.itertuples() for c in row.candidates if c not in row.relevant]
    counts = pd.Series(negs).value_counts().reindex(synth.items["item_id"], fill_value=0)
    pop = synth.ratings["item_id"].value_counts().reindex(synth.items["item_id"], fill_value=0)
    top, rest = pop.nlargest(50).index, pop.nsmallest(250).index
    # popular items are often in histories (excluded), so they may be drawn slightly less, never more
    assert counts[top].mean() < 1.1 * counts[rest].mean()
    expected = len(negs) / len(counts)
    assert abs(counts[rest].mean() - expected) / expected < 0.1


def test_determinism_and_seed(synth):
    cfg = DataConfig(n_rows=400, seed=5)
    a, b = build_interactions(synth, cfg), build_interactions(synth, cfg)
    pd.testing.assert_frame_equal(a.rows, b.rows)
    assert a.content_hash == b.content_hash
    c = build_interactions(synth, replace(cfg, seed=6))
    assert not a.rows["target"].equals(c.rows["target"])
    assert a.content_hash != c.content_hash


def test_n_rows_argument_and_defaults(synth):
    assert len(build_interactions(synth, DataConfig(n_rows=300), n_rows=200).rows) == 200
    inter = build_interactions(synth, DataConfig())
    assert len(inter.rows) == 2500 and len(inter.calib) == 1750 and inter.config.n_rows == 2500
    assert inter.config.dataset == "synthetic"


def test_no_candidates_option(synth):
    inter = build_interactions(synth, DataConfig(n_rows=50, n_candidates=0))
    assert inter.rows["candidates"].map(len).eq(0).all()


def test_cache_roundtrip(synth, tmp_path):
    cfg = DataConfig(n_rows=300, seed=3)
    built = load_or_build_interactions(synth, cfg, cache=tmp_path)
    assert built.cache_path.parent == tmp_path / "interactions"
    assert (built.cache_path / "rows.parquet").is_file() and (built.cache_path / "config.json").is_file()
    loaded = load_or_build_interactions(synth, cfg, cache=tmp_path)
    pd.testing.assert_frame_equal(built.rows, loaded.rows)
    assert isinstance(loaded.rows["history"].iloc[0], list)
    assert isinstance(loaded.rows["history"].iloc[0][0], int)
    assert loaded.n_distinct_users == built.n_distinct_users
    other = load_or_build_interactions(synth, replace(cfg, seed=4), cache=tmp_path)
    assert other.cache_path != built.cache_path


def test_group_sizes(synth):
    inter = build_interactions(synth, DataConfig(n_rows=600))
    gs = group_sizes(inter, "test", min_rows=30)
    assert gs["gender"]["n_rows"].sum() == len(inter.test)
    assert gs["joint"]["n_rows"].sum() == len(inter.test)
    expected = int((inter.test.groupby(["gender", "age", "occupation"]).size() >= 30).sum())
    assert gs["n_qualifying"]["joint"] == expected
