"""The real MovieLens-100K files (FACTERLAB_DATA must point at a directory with ml-100k/)."""

from __future__ import annotations

import pytest
from conftest import real_data_dir

from facterlab.config import DataConfig
from facterlab.data import load_dataset
from facterlab.data.download import KNOWN_FILE_SHA256, file_sha256
from facterlab.data.protocol import build_interactions, count_eligible

pytestmark = pytest.mark.realdata

DATA = real_data_dir()
HAS_100K = DATA is not None and (DATA / "ml-100k" / "u.data").is_file()
needs_100k = pytest.mark.skipif(
    not HAS_100K,
    reason="set FACTERLAB_DATA to a directory holding ml-100k/ (u.data, u.user, u.item) to run the real-data tests",
)


@needs_100k
def test_ml100k_counts():
    ds = load_dataset("ml-100k", DATA)
    # the GroupLens README: 943 users, 1,682 items, 100,000 ratings, each user >= 20 ratings
    assert (len(ds.users), len(ds.items), len(ds.ratings)) == (943, 1682, 100_000)
    assert ds.ratings.groupby("user_id").size().min() >= 20
    assert ds.ratings["rating"].between(1, 5).all()
    items = ds.items.set_index("item_id")
    assert items.loc[1, "title"] == "Toy Story (1995)"
    assert items.loc[1, "features"] == ["Animation", "Children's", "Comedy"]
    assert ds.users["gender"].value_counts().to_dict() == {"M": 670, "F": 273}
    assert set(ds.users["age"]) <= set(ds.attribute_values["age"])


@needs_100k
def test_ml100k_files_are_the_original_ones():
    for (name, f), digest in KNOWN_FILE_SHA256.items():
        assert file_sha256(DATA / name / f) == digest, f


@needs_100k
def test_ml100k_protocol():
    ds = load_dataset("ml-100k", DATA)
    cfg = DataConfig(dataset="ml-100k")
    n_elig = count_eligible(ds, cfg)
    # independent count: per user max(0, #ratings >= 4 - 10)
    pos = ds.ratings[ds.ratings["rating"] >= 4].groupby("user_id").size()
    assert n_elig == int((pos - 10).clip(lower=0).sum())
    inter = build_interactions(ds, cfg)
    assert (len(inter.calib), len(inter.test)) == (1750, 750)
    assert inter.n_distinct_users["all"] <= 943
