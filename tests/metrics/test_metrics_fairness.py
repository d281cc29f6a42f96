"""SNSR/SNSV (docs/FACTER.md §4): golden values, fairlearn/scipy cross-checks, missing values."""

from __future__ import annotations

import math
import statistics

import numpy as np
import pandas as pd
import pytest
from scipy.spatial.distance import pdist

from facterlab.metrics.embeddings import normalised_row_means
from facterlab.metrics.fairness import group_centroids, jaccard_at_k, snsr_fairllm, snsr_proxy

R2 = math.sqrt(2)


def _golden():
    emb = np.array([[1, 0], [1, 0], [1, 0], [0, 1], [0, 1], [0, 1]], dtype=float)
    groups = pd.DataFrame(
        {
            "gender": ["M", "M", "F", "F", "M", "F"],
            "age": ["18-24", "25-34", "18-24", "35-44", "35-44", "25-34"],
            "occupation": ["writer"] * 6,
        }
    )
    return emb, groups


def test_snsr_proxy_golden():
    emb, groups = _golden()
    out = snsr_proxy(emb, groups, min_group=2)
    # gender: M = normalise(2/3, 1/3) = (2, 1)/sqrt5, F = (1, 2)/sqrt5, cos = 4/5 -> distance 0.2
    assert out["gender"]["snsr"] == pytest.approx(0.2)
    assert out["gender"]["snsv"] == pytest.approx(0.2)
    assert out["gender"]["n_groups"] == 2 and out["gender"]["group_sizes"] == {"F": 3, "M": 3}
    # age: 18-24 -> (1,0), 25-34 -> (1,1)/sqrt2, 35-44 -> (0,1)
    # distances 1 - 1/sqrt2, 1, 1 - 1/sqrt2: SNSR = 1, SNSV = (1 + 2 (1 - 1/sqrt2)) / 3
    assert out["age"]["snsr"] == pytest.approx(1.0)
    assert out["age"]["snsv"] == pytest.approx((1 + 2 * (1 - 1 / R2)) / 3)
    # occupation: one group only -> missing, never 0
    assert out["occupation"]["value"] is None and "snsr" not in out["occupation"]
    assert "writer: 6" in out["occupation"]["missing_reason"]
    # joint: six singleton tuples, none reaches min_group = 2
    assert out["joint"]["value"] is None
    assert "0 group(s) have at least min_group=2 rows" in out["joint"]["missing_reason"]
    assert set(out) == {"joint", "gender", "age", "occupation"}
    assert all(out[a]["n_rows_dropped"] == 0 and out[a]["min_group"] == 2 for a in out)


def test_snsr_proxy_min_group_excludes_small_groups():
    emb, groups = _golden()
    # min_group = 3: both genders (3 rows each) qualify, no age group (2 rows each) does
    out = snsr_proxy(emb, groups, min_group=3)
    assert out["gender"]["snsr"] == pytest.approx(0.2)
    assert out["age"]["value"] is None  # age groups have 2 rows each
    assert "min_group=3" in out["age"]["missing_reason"]
    assert "18-24: 2" in out["age"]["missing_reason"]
    # add a tiny group that would dominate SNSR if it were counted
    emb2 = np.vstack([emb, [[-1.0, 0.0]]])
    g2 = pd.concat([groups, pd.DataFrame({"gender": ["X"], "age": ["56+"], "occupation": ["writer"]})])
    out2 = snsr_proxy(emb2, g2, min_group=3)
    assert out2["gender"]["snsr"] == pytest.approx(0.2)
    assert out2["gender"]["n_groups_excluded"] == 1


def test_snsr_proxy_default_min_group_is_30():
    emb, groups = _golden()
    out = snsr_proxy(emb, groups)
    assert all(out[a]["value"] is None for a in ("joint", "gender", "age", "occupation"))
    assert "min_group=30" in out["gender"]["missing_reason"]


def test_item_level_input_with_mask_equals_row_level():
    rng = np.random.default_rng(3)
    n, k, d = 120, 5, 6
    items = rng.normal(size=(n, k, d))
    mask = rng.random((n, k)) < 0.8
    mask[0] = False  # a row without any item: dropped, counted
    groups = pd.DataFrame(
        {
            "gender": rng.choice(["M", "F"], n),
            "age": rng.choice(["a", "b", "c"], n),
            "occupation": rng.choice(["x", "y"], n),
        }
    )
    by_items = snsr_proxy(items, groups, min_group=10, mask=mask)
    by_rows = snsr_proxy(normalised_row_means(items, mask), groups, min_group=10)
    n_empty = int((~mask.any(axis=1)).sum())
    assert n_empty >= 1 and by_items["joint"]["n_rows_dropped"] == n_empty == by_rows["age"]["n_rows_dropped"]
    for a in ("joint", "gender", "age", "occupation"):
        assert by_items[a]["snsr"] == pytest.approx(by_rows[a]["snsr"])
        assert by_items[a]["snsv"] == pytest.approx(by_rows[a]["snsv"])


def test_group_centroids_and_snsr_against_fairlearn_and_scipy():
    from fairlearn.metrics import MetricFrame

    rng = np.random.default_rng(5)
    n, d = 900, 8
    groups = pd.DataFrame(
        {
            "gender": rng.choice(["M", "F"], n, p=[0.7, 0.3]),
            "age": rng.choice(["Under 18", "18-24", "25-34", "56+"], n, p=[0.05, 0.4, 0.45, 0.1]),
            "occupation": rng.choice(["writer", "artist", "lawyer"], n),
        }
    )
    shift = {"M": 0.0, "F": 0.6}
    raw = rng.normal(size=(n, d)) + np.array([shift[g] for g in groups["gender"]])[:, None]
    rows = raw / np.linalg.norm(raw, axis=1, keepdims=True)

    for attrs in (["gender"], ["age"], ["gender", "age", "occupation"]):
        # grouped means of the row vectors by fairlearn: y_true carries row indices
        metrics = {f"d{j}": (lambda yt, yp, j=j: float(rows[np.asarray(yt), j].mean())) for j in range(d)}
        mf = MetricFrame(metrics=metrics, y_true=np.arange(n), y_pred=np.zeros(n), sensitive_features=groups[attrs])
        ref_means = mf.by_group.to_numpy(dtype=float)
        ref_cent = ref_means / np.linalg.norm(ref_means, axis=1, keepdims=True)
        sizes = groups.groupby(attrs).size().reindex(mf.by_group.index).to_numpy()
        labels, our_sizes, cents = group_centroids(rows, groups, attrs)
        assert our_sizes.tolist() == sizes.tolist()
        np.testing.assert_allclose(cents, ref_cent, atol=1e-12)
        # SNSR pieces from scipy's cosine distance on the qualifying groups
        q = sizes >= 30
        dist = pdist(ref_means[q], metric="cosine")
        name = "joint" if len(attrs) == 3 else attrs[0]
        out = snsr_proxy(rows, groups, min_group=30)[name]
        assert out["n_groups"] == int(q.sum())
        assert out["snsr"] == pytest.approx(dist.max(), abs=1e-12)
        assert out["snsv"] == pytest.approx(dist.mean(), abs=1e-12)
    # the planted gender shift is visible
    assert snsr_proxy(rows, groups)["gender"]["snsr"] > 0.05


def test_snsr_proxy_bad_input():
    emb, groups = _golden()
    with pytest.raises(ValueError, match="must be aligned"):
        snsr_proxy(emb[:5], groups)
    with pytest.raises(ValueError, match="missing the attribute column"):
        snsr_proxy(emb, groups.drop(columns="age"))
    g = groups.copy()
    g.loc[2, "gender"] = None
    with pytest.raises(ValueError, match="attribute 'gender' has missing values in 1 row"):
        snsr_proxy(emb, g)
    with pytest.raises(ValueError, match="min_group must be a positive integer"):
        snsr_proxy(emb, groups, min_group=0)
    with pytest.raises(ValueError, match=r"\(n, d\) per-row vectors or \(n, k, d\)"):
        snsr_proxy(np.zeros(6), groups)


def test_nan_rows_are_dropped_not_zeroed():
    emb, groups = _golden()
    emb = np.vstack([emb, [[np.nan, np.nan]]] * 1)
    g = pd.concat([groups, groups.iloc[[0]]], ignore_index=True)
    out = snsr_proxy(emb, g, min_group=2)
    assert out["gender"]["n_rows_dropped"] == 1 and out["gender"]["n_rows"] == 6
    assert out["gender"]["snsr"] == pytest.approx(0.2)


# ---------------------------------------------------------------- snsr_fairllm
def test_jaccard_golden():
    assert jaccard_at_k([1, 2, 3], [2, 3, 4], k=3) == pytest.approx(2 / 4)
    assert jaccard_at_k([1, 2, 3, 9], [2, 3, 4], k=3) == pytest.approx(2 / 4)
    assert jaccard_at_k([1, -1, None], [1], k=3) == 1.0
    assert math.isnan(jaccard_at_k([], [-1], k=3))


def test_snsr_fairllm_golden():
    neutral = [[1, 2, 3], [4, 5, 6], [7, 8, 9]]
    lists = {
        "gender": {
            "M": [[1, 2, 3], [4, 5, 6], [7, 8, 9]],  # J = 1, 1, 1 -> 1
            "F": [[1, 2, 10], [4, 11, 12], [13, 14, 15]],
        },  # J = 2/4, 1/5, 0 -> 0.7/3
        "age": {
            "18-24": [[1, 2, 3], [4, 5, 12], [7, 8, 9]],  # 1, 2/4, 1 -> 2.5/3
            "25-34": [[3, 2, 1], [6, 5, 4], [9, 8, 7]],  # order inside top-k does not matter -> 1
            "56+": [[20, 21, 22], [4, 5, 6], [7, 8, 9]],
        },  # 0, 1, 1 -> 2/3
    }
    out = snsr_fairllm(lists, neutral, k=3)
    f = (0.5 + 0.2 + 0.0) / 3
    assert out["gender"]["similarity"] == {"M": pytest.approx(1.0), "F": pytest.approx(f)}
    assert out["gender"]["snsr"] == pytest.approx(1 - f)
    assert out["gender"]["snsv"] == pytest.approx((1 - f) / 2)  # population std of two values
    sims = [2.5 / 3, 1.0, 2 / 3]
    assert out["age"]["snsr"] == pytest.approx(1 - 2 / 3)
    assert out["age"]["snsv"] == pytest.approx(statistics.pstdev(sims))
    assert out["age"]["n_values"] == 3 and out["age"]["n_users"] == 3


def test_snsr_fairllm_missing_and_errors():
    out = snsr_fairllm({"gender": {"M": [[1]]}}, [[1]], k=10)
    assert out["gender"]["value"] is None and "two are needed" in out["gender"]["missing_reason"]
    # all pairs undefined for F (both lists empty after dropping unmapped): F drops out
    out = snsr_fairllm({"gender": {"M": [[1]], "F": [[-1]]}}, [[None]], k=10)
    assert out["gender"]["value"] is None and "1 undefined pairs" in out["gender"]["missing_reason"]
    with pytest.raises(ValueError, match="must be aligned per user"):
        snsr_fairllm({"gender": {"M": [[1], [2]], "F": [[1], [2]]}}, [[1]], k=10)
    with pytest.raises(ValueError, match="k must be a positive integer"):
        snsr_fairllm({}, [], k=0)
