"""Catalogue mapping and Valid@k (docs/FACTER.md §4) with a tiny deterministic encoder and rapidfuzz."""

from __future__ import annotations

import os
import zlib
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from rapidfuzz import fuzz

from facterlab.data.titles import normalise_title
from facterlab.metrics.catalogue import CatalogueMapper, valid_at_k, valid_per_row
from facterlab.metrics.embeddings import normalised_row_means


class TrigramEncoder:
    """Character-trigram hashing into 256 dims, L2-normalised (stable crc32 hash, no torch)."""

    fingerprint = "trigram-256"
    dim = 256

    def __init__(self):
        self.calls = []

    def encode(self, texts):
        self.calls.append(list(texts))
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        for i, t in enumerate(texts):
            s = f"  {t.lower()}  "
            for j in range(len(s) - 2):
                out[i, zlib.crc32(s[j : j + 3].encode()) % self.dim] += 1.0
        return out / np.linalg.norm(out, axis=1, keepdims=True)


ITEMS = pd.DataFrame(
    {
        "item_id": [1, 2, 3, 4, 5],
        "title": [
            "Toy Story (1995)",
            "Usual Suspects, The (1995)",
            "Heat (1995)",
            "City of Lost Children, The (Cité des enfants perdus, La) (1995)",
            "Braveheart (1995)",
        ],
        "text": [
            "Toy Story (1995) :: Animation|Children's|Comedy",
            "Usual Suspects, The (1995) :: Crime|Thriller",
            "Heat (1995) :: Action|Crime|Thriller",
            "City of Lost Children, The (1995) :: Adventure|Sci-Fi",
            "Braveheart (1995) :: Action|Drama|War",
        ],
    }
)


def cos(a, b):
    return float(a @ b / np.linalg.norm(a) / np.linalg.norm(b))


# ---------------------------------------------------------------- encoder mapping
def test_encoder_exact_titles_map_with_cosine_one():
    m = CatalogueMapper(ITEMS, TrigramEncoder())
    ids, scores = m.map_with_scores(list(ITEMS["title"]))
    assert ids.tolist() == [1, 2, 3, 4, 5]
    np.testing.assert_allclose(scores, 1.0, atol=1e-6)


def test_encoder_threshold_and_recorded_similarity():
    enc = TrigramEncoder()
    m = CatalogueMapper(ITEMS, enc, threshold=0.65)
    query = "Toy Story"
    sims = [cos(enc.encode([query])[0], e) for e in enc.encode(list(ITEMS["title"]))]
    best = int(np.argmax(sims))
    ids, scores = m.map_with_scores([query, "zzzz qqqq", None, "  "])
    assert best == 0 and sims[0] >= 0.65
    assert ids.tolist() == [1, -1, -1, -1]
    assert scores[0] == pytest.approx(sims[0], abs=1e-6)
    assert np.isnan(scores[1:]).all()
    # a threshold just above the best similarity rejects it
    strict = CatalogueMapper(ITEMS, enc, threshold=sims[0] + 1e-3)
    assert strict.map([query]).tolist() == [-1]


def test_encoder_blocking_does_not_change_results():
    enc = TrigramEncoder()
    rng = np.random.default_rng(0)
    words = ["the", "story", "heat", "brave", "heart", "city", "lost", "usual", "toy", "suspect", "x"]
    queries = [" ".join(rng.choice(words, size=int(rng.integers(1, 4)))) for _ in range(50)]
    a = CatalogueMapper(ITEMS, enc, threshold=0.3).map_with_scores(queries)
    b = CatalogueMapper(ITEMS, enc, threshold=0.3, block_size=3).map_with_scores(queries)
    np.testing.assert_array_equal(a[0], b[0])
    np.testing.assert_allclose(a[1], b[1], atol=1e-6)
    # brute-force reference: argmax cosine over the catalogue titles
    q, c = enc.encode(queries), enc.encode(list(ITEMS["title"]))
    sims = q @ c.T
    ref = np.where(sims.max(axis=1) >= 0.3, ITEMS["item_id"].to_numpy()[sims.argmax(axis=1)], -1)
    np.testing.assert_array_equal(a[0], ref)


def test_encoder_encodes_each_distinct_title_once():
    enc = TrigramEncoder()
    m = CatalogueMapper(ITEMS, enc)
    m.map(["Heat", "Heat", "Braveheart", "Heat"])
    assert sorted(enc.calls[-1]) == ["Braveheart", "Heat"]


def test_encoder_required():
    with pytest.raises(ValueError, match="an encoder is required"):
        CatalogueMapper(ITEMS, None, method="encoder")
    with pytest.raises(ValueError, match="method must be one of"):
        CatalogueMapper(ITEMS, TrigramEncoder(), method="nearest")
    with pytest.raises(ValueError, match="item_id column"):
        CatalogueMapper(ITEMS.drop(columns="title"), TrigramEncoder())


def test_items_indexed_by_item_id():
    m = CatalogueMapper(ITEMS.set_index("item_id"), method="rapidfuzz")
    assert m.map(["Heat"]).tolist() == [3]


# ---------------------------------------------------------------- rapidfuzz mapping
@pytest.mark.parametrize(
    "raw, norm",
    [
        ("Usual Suspects, The (1995)", "the usual suspects"),
        ("The Usual Suspects", "the usual suspects"),
        ("Good, The Bad and The Ugly, The (1966)", "the good the bad and the ugly"),
        ("Âge d'or, L' (1930)", "l age d or"),
        ("Star Wars: Episode IV - A New Hope (1977)", "star wars episode iv a new hope"),
        ("Se7en (1995) ", "se7en"),
        ("1995 (2003)", "1995"),
    ],
)
def test_normalise_title(raw, norm):
    assert normalise_title(raw) == norm


def test_rapidfuzz_mapping_cases():
    m = CatalogueMapper(ITEMS, method="rapidfuzz")
    ids, scores = m.map_with_scores(
        [
            "The Usual Suspects",
            "toy story (1995)",
            "City of Lost Children",
            "La Cité des Enfants Perdus",
            "Braveheartt",
            "Batman",
            "",
        ]
    )
    assert ids.tolist() == [2, 1, 4, 4, 5, -1, -1]
    assert scores[0] == 100.0 and scores[4] == pytest.approx(fuzz.ratio("braveheartt", "braveheart"))
    assert np.isnan(scores[5:]).all()


def test_rapidfuzz_cutoff_is_85_by_default():
    # "heat wave" vs "heat": ratio 61.5 -> rejected; a one-letter typo of a long title -> accepted
    assert fuzz.ratio("toy storyy", "toy story") > 85 > fuzz.ratio("heat wave", "heat")
    m = CatalogueMapper(ITEMS, method="rapidfuzz")
    assert m.map(["Toy Storyy", "Heat Wave"]).tolist() == [1, -1]
    assert m.variant == "rapidfuzz(ratio>=85)"
    loose = CatalogueMapper(ITEMS, method="rapidfuzz", fuzzy_cutoff=60)
    assert loose.map(["Heat Wave"]).tolist() == [3]


def test_map_rows_splits_back():
    m = CatalogueMapper(ITEMS, method="rapidfuzz")
    rows = m.map_rows([["Heat", "Batman"], [], ["Braveheart"]])
    assert [r.tolist() for r in rows] == [[3, -1], [], [5]]
    assert [r.tolist() for r in m.map_rows([["Heat", "Batman"]], k=1)] == [[3]]


# ---------------------------------------------------------------- Valid@k
def test_valid_at_k_golden():
    mapped = [[1, 2, 3, 4], [1, 1, -1, None], [7], []]
    # row 0: 4 distinct of 4; row 1: one distinct (duplicate counts once); row 2: 1 of 4; row 3: 0
    assert valid_per_row(mapped, k=4).tolist() == [1.0, 0.25, 0.25, 0.0]
    assert valid_at_k(mapped, k=4) == pytest.approx((1 + 0.25 + 0.25 + 0) / 4)
    assert valid_at_k([[1, 2, 3, 4, 5, 6]], k=4) == 1.0  # only the first k positions count
    with pytest.raises(ValueError, match="Valid@k is undefined"):
        valid_at_k([], k=10)
    with pytest.raises(ValueError, match="k must be a positive integer"):
        valid_at_k([[1]], k=0)


# ---------------------------------------------------------------- item embeddings per row
def test_row_item_embeddings_use_mapped_text_or_raw_title():
    enc = TrigramEncoder()
    m = CatalogueMapper(ITEMS, enc)
    titles = [["Heat (1995)", "zzzz qqqq", "Braveheart"], ["Toy Story"], []]
    emb, mask = m.row_item_embeddings(titles, k=3)
    assert emb.shape == (3, 3, 256)
    assert mask.tolist() == [[True, True, True], [True, False, False], [False, False, False]]
    np.testing.assert_allclose(emb[0, 0], enc.encode([ITEMS["text"][2]])[0], atol=1e-6)  # mapped: item text
    np.testing.assert_allclose(emb[0, 1], enc.encode(["zzzz qqqq"])[0], atol=1e-6)  # unmapped: raw title
    np.testing.assert_allclose(emb[1, 0], enc.encode([ITEMS["text"][0]])[0], atol=1e-6)
    rows = m.row_embeddings(titles, k=3)
    manual = emb[0].sum(axis=0) / np.linalg.norm(emb[0].sum(axis=0))
    np.testing.assert_allclose(rows[0], manual, atol=1e-12)
    assert np.isnan(rows[2]).all()  # no item: no representation (dropped downstream, never 0)
    np.testing.assert_allclose(rows, normalised_row_means(emb, mask), equal_nan=True)


def test_row_item_embeddings_with_given_mapping_and_rapidfuzz():
    enc = TrigramEncoder()
    m = CatalogueMapper(ITEMS, enc, method="rapidfuzz")
    emb, mask = m.row_item_embeddings([["whatever", "x"]], mapped_per_row=[[5, -1]], k=2)
    np.testing.assert_allclose(emb[0, 0], enc.encode([ITEMS["text"][4]])[0], atol=1e-6)
    np.testing.assert_allclose(emb[0, 1], enc.encode(["x"])[0], atol=1e-6)
    # a repeated mapped item (and a repeated raw title) counts once unless dedupe=False
    _, mask = m.row_item_embeddings([["a", "b", "x", "x"]], mapped_per_row=[[5, 5, -1, -1]], k=4)
    assert mask.tolist() == [[True, False, True, False]]
    _, mask = m.row_item_embeddings([["a", "b", "x", "x"]], mapped_per_row=[[5, 5, -1, -1]], k=4, dedupe=False)
    assert mask.all()
    emb_t, _ = m.row_item_embeddings([["whatever"]], mapped_per_row=[[5]], k=1, represent="title")
    np.testing.assert_allclose(emb_t[0, 0], enc.encode(["Braveheart (1995)"])[0], atol=1e-6)
    with pytest.raises(ValueError, match='represent must be "text" or "title"'):
        m.row_item_embeddings([["x"]], k=1, represent="genres")
    with pytest.raises(ValueError, match="an encoder is required"):
        CatalogueMapper(ITEMS, method="rapidfuzz").row_embeddings([["Heat"]])


# ---------------------------------------------------------------- real data
def _ml100k_items():
    env = os.environ.get("FACTERLAB_DATA")
    path = Path(env) / "ml-100k" / "u.item" if env else None
    if path is None or not path.is_file():
        pytest.skip("MovieLens-100K u.item not found under FACTERLAB_DATA")
    df = pd.read_csv(path, sep="|", header=None, encoding="latin-1", usecols=[0, 1])
    df.columns = ["item_id", "title"]
    return df.dropna()


@pytest.mark.realdata
def test_rapidfuzz_maps_reformatted_ml100k_titles_back():
    items = _ml100k_items()
    m = CatalogueMapper(items, method="rapidfuzz")
    # what an LLM writes: leading article, no year
    generated = [normalise_title(t).title() for t in items["title"]]
    ids = m.map(generated)
    by_id = dict(zip(items["item_id"], items["title"].map(normalise_title)))
    same = [by_id.get(int(i)) == normalise_title(t) for i, t in zip(ids, items["title"])]
    assert np.mean(same) > 0.99
