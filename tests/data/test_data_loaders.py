"""Loaders (ML-1M, ML-100K, Amazon, synthetic), downloads and dataset resolution on fixture files."""

from __future__ import annotations

import hashlib
import zipfile

import numpy as np
import pandas as pd
import pytest
from data_files import write_amazon, write_ml1m, write_ml100k

from facterlab.data import AGE_ORDER, GENRES, OCCUPATION_LABELS, age_bucket, load_dataset, resolve_dataset
from facterlab.data import download as dl
from facterlab.data.amazon import load_amazon
from facterlab.data.movielens import load_ml1m, load_ml100k
from facterlab.data.synthetic import generate, load_synthetic, params_hash, write_ml1m_format

# fixtures: tiny files in each format, written by hand (tests/helpers/data_files.py)


# ------------------------------------------------------------------------------------------------
# MovieLens-1M


def test_ml1m_tables_labels_and_dtypes(tmp_path):
    ds = load_ml1m(write_ml1m(tmp_path / "ml-1m"))
    assert ds.name == "ml-1m" and ds.domain == "movie" and ds.is_synthetic is False
    assert list(ds.ratings.columns) == ["user_id", "item_id", "rating", "timestamp"]
    assert [str(t) for t in ds.ratings.dtypes] == ["int64", "int64", "float32", "int64"]
    assert ds.ratings["rating"].tolist() == [5.0, 3.0, 4.0, 1.0]
    users = ds.users.set_index("user_id")
    assert users.loc[1, ["gender", "age", "occupation"]].tolist() == ["F", "Under 18", "K-12 student"]
    assert users.loc[2, ["age", "occupation"]].tolist() == ["56+", "self-employed"]
    assert users.loc[3, "occupation"] == "other or not specified"
    items = ds.items.set_index("item_id")
    assert items.loc[20, "title"] == "Amélie (2001)"  # latin-1 decoded
    assert items.loc[30, "title"] == "Star Wars: Episode IV - A New Hope (1977)"  # single colon kept
    assert items.loc[10, "features"] == ["Animation", "Children's", "Comedy"]
    assert items.loc[10, "text"] == "Toy Story (1995) :: Animation|Children's|Comedy"
    assert ds.attribute_values["age"] == list(AGE_ORDER)
    assert ds.attribute_values["occupation"][0] == "other or not specified"
    assert len(ds.attribute_values["occupation"]) == 21


def test_occupation_and_age_tables_match_readme():
    assert OCCUPATION_LABELS[4] == "college/grad student" and OCCUPATION_LABELS[17] == "technician/engineer"
    assert AGE_ORDER == ("Under 18", "18-24", "25-34", "35-44", "45-49", "50-55", "56+")


@pytest.mark.parametrize(
    "age,label",
    [
        (7, "Under 18"),
        (17, "Under 18"),
        (18, "18-24"),
        (24, "18-24"),
        (25, "25-34"),
        (34, "25-34"),
        (35, "35-44"),
        (44, "35-44"),
        (45, "45-49"),
        (49, "45-49"),
        (50, "50-55"),
        (55, "50-55"),
        (56, "56+"),
        (73, "56+"),
    ],
)
def test_age_bucket_boundaries(age, label):
    assert age_bucket(age) == label


@pytest.mark.parametrize(
    "bad,lineno",
    [
        ("1::10::5::978300760\n1::20::x::978300761\n", 2),  # non-integer rating
        ("1::10::5::978300760\n2::30::4::978300762\n1::20::3\n", 3),  # too few fields
        ("1::10::5::978300760::9\n", 1),  # too many fields
    ],
)
def test_ml1m_malformed_line_names_file_and_line(tmp_path, bad, lineno):
    d = write_ml1m(tmp_path / "ml-1m", ratings=bad)
    with pytest.raises(ValueError, match=rf"ratings\.dat: malformed line {lineno}:"):
        load_ml1m(d)


def test_ml1m_bad_age_code(tmp_path):
    d = write_ml1m(tmp_path / "ml-1m", users="1::F::1::10::1\n2::M::99::16::2\n3::M::25::0::3\n")
    with pytest.raises(ValueError, match=r"users\.dat: malformed line 2: age code 99"):
        load_ml1m(d)


def test_ml1m_unknown_item_in_ratings(tmp_path):
    d = write_ml1m(tmp_path / "ml-1m", ratings="1::10::5::1\n1::99::4::2\n")
    with pytest.raises(ValueError, match=r"ratings\.dat: line 2 refers to item 99"):
        load_ml1m(d)


# ------------------------------------------------------------------------------------------------
# MovieLens-100K


def test_ml100k_fixture(tmp_path):
    ds = load_ml100k(write_ml100k(tmp_path / "ml-100k"))
    users = ds.users.set_index("user_id")
    assert users["age"].tolist() == ["18-24", "Under 18", "56+"]
    assert users["occupation"].tolist() == ["technician", "student", "writer"]
    assert ds.attribute_values["occupation"] == ["student", "technician", "writer"]
    items = ds.items.set_index("item_id")
    assert items.loc[1, "features"] == ["Animation", "Children's"]
    assert items.loc[2, "features"] == []  # "unknown" dropped
    assert items.loc[2, "title"] == "Café Society (1995)" and items.loc[2, "text"] == "Café Society (1995)"
    assert ds.ratings["timestamp"].tolist() == [874965758, 876893171, 878542960]


def test_ml100k_malformed_user_line(tmp_path):
    d = write_ml100k(tmp_path / "ml-100k")
    (d / "u.user").write_text("1|24|M|technician|85711\n2|old|F|student|94043\n")
    with pytest.raises(ValueError, match=r"u\.user: malformed line 2:"):
        load_ml100k(d)


# ------------------------------------------------------------------------------------------------
# Amazon


def test_amazon_fixture_titles_categories_and_drops(tmp_path):
    ds = load_amazon(write_amazon(tmp_path / "amazon-movies-tv"), demographics_seed=5)
    assert ds.name == "amazon" and ds.domain == "product" and not ds.is_synthetic
    items = ds.items.set_index("asin")
    assert set(items.index) == {"A1", "A2"}  # A3 has no title: dropped; A9 never reviewed
    assert items.loc["A1", "title"] == "Heat & Dust"  # HTML entity unescaped
    assert items.loc["A1", "features"] == ["Drama", "Independent"]  # root category removed
    assert items.loc["A2", "title"] == "Alien"  # first metadata record wins
    assert items.loc["A1", "text"] == "Heat & Dust"
    assert ds.info["n_reviews_dropped_no_title"] == 2
    assert sorted(ds.users["reviewer_id"]) == ["UA", "UB"]  # UC only reviewed the dropped item
    # ids by sorted asin / reviewerID
    assert items.loc["A1", "item_id"] == 1 and items.loc["A2", "item_id"] == 2
    r = ds.ratings.sort_values("timestamp")
    assert r[["user_id", "item_id", "rating", "timestamp"]].to_numpy().tolist() == [[1, 1, 4.0, 100], [2, 2, 5.0, 300]]
    for attr in ("gender", "age", "occupation"):
        assert set(ds.users[attr]) <= set(ds.attribute_values[attr])


def test_amazon_demographics_seeded(tmp_path):
    from facterlab.data.amazon import draw_demographics

    a, b, c = draw_demographics(3000, 1), draw_demographics(3000, 1), draw_demographics(3000, 2)
    assert a.equals(b) and not a.equals(c)
    # uniform draws: every value appears, no value far from its share (3000/21 = 143; 3000/7 = 429)
    occ = a["occupation"].value_counts()
    assert len(occ) == 21 and occ.min() > 80 and occ.max() < 220
    age = a["age"].value_counts()
    assert len(age) == 7 and age.min() > 330 and age.max() < 530
    assert set(a["occupation"]) == set(OCCUPATION_LABELS.values())


def test_amazon_malformed_json_line(tmp_path):
    d = write_amazon(tmp_path / "amazon-movies-tv", extra_review="{not json")
    with pytest.raises(ValueError, match=r"Movies_and_TV_5\.json\.gz: malformed line 5:"):
        load_amazon(d)


def test_amazon_max_reviews(tmp_path):
    ds = load_amazon(write_amazon(tmp_path / "amazon-movies-tv"), max_reviews=1)
    assert len(ds.ratings) == 1 and ds.items["asin"].tolist() == ["A2"]


# ------------------------------------------------------------------------------------------------
# downloads, resolution, no silent fallback


def test_missing_file_offline_names_file_dir_and_url(tmp_path):
    with pytest.raises(FileNotFoundError) as exc:
        load_dataset("ml-1m", tmp_path)
    msg = str(exc.value)
    assert "ratings.dat" in msg and str(tmp_path / "ml-1m") in msg
    assert "https://files.grouplens.org/datasets/movielens/ml-1m.zip" in msg


def test_missing_amazon_says_unverified(tmp_path):
    with pytest.raises(FileNotFoundError, match="meta_Movies_and_TV.json.gz") as exc:
        load_dataset("amazon", tmp_path)
    assert "unverified" in str(exc.value) and "amazon-movies-tv" in str(exc.value)


def test_resolve_auto(tmp_path):
    assert resolve_dataset("auto", tmp_path) == "synthetic"
    write_ml100k(tmp_path / "ml-100k")
    assert resolve_dataset("auto", tmp_path) == "ml-100k"
    write_ml1m(tmp_path / "ml-1m")
    assert resolve_dataset("auto", tmp_path) == "ml-1m"
    assert resolve_dataset("ml-100k", tmp_path) == "ml-100k"
    with pytest.raises(ValueError, match="unknown dataset 'movielens'"):
        resolve_dataset("movielens", tmp_path)


def test_explicit_name_never_falls_back(tmp_path):
    write_ml100k(tmp_path / "ml-100k")
    with pytest.raises(FileNotFoundError, match="MovieLens-1M"):
        load_dataset("ml-1m", tmp_path)
    assert load_dataset("auto", tmp_path).name == "ml-100k"


def test_fetch_verifies_and_extracts(tmp_path):
    src = write_ml100k(tmp_path / "src" / "ml-100k")
    zpath = tmp_path / "ml-100k.zip"
    with zipfile.ZipFile(zpath, "w") as zf:
        for f in ("u.data", "u.user", "u.item"):
            zf.write(src / f, f"ml-100k/{f}")
    good = hashlib.sha256(zpath.read_bytes()).hexdigest()
    d = dl.Download(
        url=zpath.as_uri(),
        filename="ml-100k.zip",
        sha256=good,
        members=("ml-100k/u.data", "ml-100k/u.user", "ml-100k/u.item"),
    )
    out = tmp_path / "data" / "ml-100k"
    with open(tmp_path / "log.txt", "w") as log:
        dl.fetch(d, out, log=log)
    assert (out / "u.data").read_bytes() == (src / "u.data").read_bytes()
    assert "checksum verified" in (tmp_path / "log.txt").read_text()
    bad = dl.Download(url=zpath.as_uri(), filename="x.zip", sha256="0" * 64)
    with pytest.raises(ValueError, match="checksum mismatch for"), open(tmp_path / "log2.txt", "w") as log:
        dl.fetch(bad, tmp_path / "other", log=log)
    assert not (tmp_path / "other" / "x.zip").exists()
    none = dl.Download(url=zpath.as_uri(), filename="y.zip")
    assert dl.verify(zpath, none) == "unverified"


def test_pinned_sources_are_complete():
    for _name, src in dl.SOURCES.items():
        for d in src.downloads:
            assert d.url.startswith("https://")
            assert d.sha256 is None or len(d.sha256) == 64
    assert dl.SOURCES["ml-1m"].downloads[0].md5 == "c4d9eecfca2ab87c1945afe126590906"


# ------------------------------------------------------------------------------------------------
# synthetic generator


SMALL = dict(n_users=120, n_items=300, n_ratings=6000)


def test_synthetic_deterministic_and_seeded():
    a, b, c = generate(**SMALL, seed=3), generate(**SMALL, seed=3), generate(**SMALL, seed=4)
    for key in ("ratings", "movies"):
        for x, y in zip(a[key], b[key]):
            assert np.array_equal(np.asarray(x), np.asarray(y))
    assert not np.array_equal(a["ratings"][1], c["ratings"][1])
    assert params_hash(1, 2, 3, 4) != params_hash(1, 2, 3, 5)


def test_synthetic_files_structure(tmp_path):
    write_ml1m_format(tmp_path / "s", **SMALL, seed=1)
    ds = load_ml1m(tmp_path / "s")
    assert len(ds.ratings) == 6000 and len(ds.users) == 120 and len(ds.items) == 300
    titles = ds.items["title"]
    assert titles.is_unique and titles.str.match(r".+ \((19|20)\d\d\)$").all()
    assert set(g for f in ds.items["features"] for g in f) <= set(GENRES)
    assert ds.items["features"].map(len).between(1, 3).all()
    # timestamps in order within each user, as written
    r = ds.ratings
    assert (r.groupby("user_id")["timestamp"].diff().fillna(0) >= 0).all()
    assert not r.duplicated(["user_id", "item_id"]).any()
    assert r.groupby("user_id").size().min() >= 20
    # popularity skew: the top 10% of items get far more than 10% of the ratings
    counts = r["item_id"].value_counts().to_numpy()
    assert counts[: len(counts) // 10].sum() / counts.sum() > 0.3


def test_synthetic_demographics_shift_tastes():
    """Women rate/choose Romance more than men; the young choose Animation/Children's more."""
    ds = load_synthetic(n_users=600, n_items=600, n_ratings=30000, seed=0)
    r = ds.ratings.merge(ds.users, on="user_id").merge(ds.items[["item_id", "features"]], on="item_id")
    romance = r["features"].map(lambda f: "Romance" in f)
    share = romance.groupby(r["gender"]).mean()
    assert share["F"] > 1.3 * share["M"]
    kids = r["features"].map(lambda f: "Children's" in f)
    by_age = kids.groupby(r["age"]).mean()
    assert by_age["Under 18"] > 1.5 * by_age["56+"]


def test_load_dataset_synthetic_is_flagged_and_cached(tmp_path, monkeypatch):
    monkeypatch.setenv("FACTERLAB_CACHE", str(tmp_path / "cache"))
    ds = load_dataset("synthetic", tmp_path / "nodata", **SMALL)
    assert ds.name == "synthetic" and ds.is_synthetic is True
    d = tmp_path / "cache" / "synthetic" / params_hash(SMALL["n_users"], SMALL["n_items"], SMALL["n_ratings"], 0)
    assert (d / "ratings.dat").is_file()
    again = load_dataset("synthetic", tmp_path / "nodata", **SMALL)
    pd.testing.assert_frame_equal(ds.ratings, again.ratings)
    assert ds.fingerprint() == again.fingerprint()


def test_synthetic_default_size_has_enough_rows(tmp_path, monkeypatch):
    from facterlab.data.protocol import count_eligible

    monkeypatch.setenv("FACTERLAB_CACHE", str(tmp_path / "cache"))
    assert count_eligible(load_dataset("synthetic")) >= 2500 * 5


def test_synthetic_rejects_impossible_sizes():
    with pytest.raises(ValueError, match="below 20 per user"):
        generate(n_users=100, n_items=100, n_ratings=1000)


def test_repeated_ratings_are_an_error_naming_the_first(tmp_path):
    """``u.data`` with every rating twice (issue 44, case 10): one line before any work, not a silent run."""
    d = write_ml100k(tmp_path / "ml-100k")
    text = (d / "u.data").read_text()
    (d / "u.data").write_text(text + text)
    n = len(text.splitlines())
    with pytest.raises(
        ValueError, match=rf"{n:,} of {2 * n:,} ratings repeat an earlier \(user, item\) pair, first at line {n + 1}"
    ):
        load_dataset("ml-100k", tmp_path)


@pytest.mark.parametrize("target", ["u.data", "/nonexistent/u.data"])
def test_a_data_file_that_is_a_broken_link_is_named_so(tmp_path, target):
    """A symbolic-link loop (or a link to nothing) for ``u.data`` is named as such, not as "missing"."""
    d = write_ml100k(tmp_path / "ml-100k")
    (d / "u.data").unlink()
    (d / "u.data").symlink_to(target)
    with pytest.raises(FileNotFoundError) as exc:
        load_dataset("ml-100k", tmp_path)
    said = str(exc.value)
    assert "missing" not in said and ("symbolic link loop" in said if target == "u.data" else "does not exist" in said)
