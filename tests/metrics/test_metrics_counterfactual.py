"""Counterfactual flips and CFR (docs/FACTER.md §4)."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from facterlab.metrics.counterfactual import cfr, cfr_summary, flip_attributes, sample_cfr_rows
from facterlab.metrics.embeddings import normalised_row_means

AGES = ["Under 18", "18-24", "25-34", "35-44", "45-49", "50-55", "56+"]
OCCS = ["other or not specified", "academic/educator", "artist", "clerical/admin", "writer"]
VALUES = {"gender": ["M", "F"], "age": AGES, "occupation": OCCS}
ATTRS = ("gender", "age", "occupation")


def _rows(n=600, seed=0):
    rng = np.random.default_rng(seed)
    return pd.DataFrame(
        {
            "row_id": np.arange(n),
            "gender": rng.choice(VALUES["gender"], n),
            "age": rng.choice(AGES, n),
            "occupation": rng.choice(OCCS, n),
            "history": [[1, 2]] * n,
        },
        index=np.arange(100, 100 + n),
    )


def test_distinct_never_leaves_a_value_unchanged_and_covers_the_others():
    rows = _rows()
    out = flip_attributes(rows, VALUES, "distinct", rng=np.random.default_rng(1))
    for a in ATTRS:
        assert (out[a] != rows[a]).all()
        assert set(out[a]) <= set(VALUES[a])
    # every other value is reachable: from "18-24" all six other buckets appear
    from_1824 = out.loc[rows["age"] == "18-24", "age"]
    assert set(from_1824) == set(AGES) - {"18-24"}
    assert out.index.equals(rows.index) and out["history"].equals(rows["history"])
    assert rows.equals(_rows())  # input untouched


def test_repro_sometimes_leaves_the_value_unchanged():
    rows = _rows()
    out = flip_attributes(rows, VALUES, "repro", rng=np.random.default_rng(2))
    same = (out["gender"] == rows["gender"]).mean()
    assert 0.4 < same < 0.6  # uniform over two values: unchanged half of the time
    assert (out["occupation"] == rows["occupation"]).any()


def test_minimal_is_deterministic_with_documented_edges():
    rows = pd.DataFrame(
        {
            "gender": ["M", "F", "M"],
            "age": ["Under 18", "50-55", "56+"],
            "occupation": ["other or not specified", "artist", "writer"],
        }
    )
    out = flip_attributes(rows, VALUES, "minimal")
    assert out["gender"].tolist() == ["F", "M", "F"]
    assert out["age"].tolist() == ["18-24", "56+", "50-55"]  # last bucket goes back one
    assert out["occupation"].tolist() == ["academic/educator", "clerical/admin", "other or not specified"]
    again = flip_attributes(rows, VALUES, "minimal", rng=np.random.default_rng(99))
    assert again.equals(out)


@pytest.mark.parametrize("strategy", ["distinct", "minimal"])
@pytest.mark.parametrize("attr", ATTRS)
def test_single_flip_changes_exactly_that_column(strategy, attr):
    rows = _rows(200)
    out = flip_attributes(rows, VALUES, strategy, attrs=(attr,), rng=3)
    changed = [a for a in ATTRS if not out[a].equals(rows[a])]
    assert changed == [attr]
    assert (out[attr] != rows[attr]).all()


def test_seeded_flips_are_reproducible():
    rows = _rows(50)
    a = flip_attributes(rows, VALUES, "distinct", rng=np.random.default_rng(4))
    b = flip_attributes(rows, VALUES, "distinct", rng=np.random.default_rng(4))
    assert a.equals(b)


def test_flip_errors():
    rows = _rows(5)
    with pytest.raises(ValueError, match="strategy must be one of"):
        flip_attributes(rows, VALUES, "swap", rng=0)
    with pytest.raises(ValueError, match="draws at random: pass rng"):
        flip_attributes(rows, VALUES, "distinct")
    bad = rows.copy()
    bad.loc[bad.index[0], "age"] = "99+"
    with pytest.raises(ValueError, match=r"column 'age' holds value\(s\) \['99\+'\]"):
        flip_attributes(bad, VALUES, "minimal")
    with pytest.raises(ValueError, match="has 1 value"):
        flip_attributes(rows.assign(gender="M"), {**VALUES, "gender": ["M"]}, "minimal")


def test_sample_cfr_rows():
    rows = _rows(500)
    s = sample_cfr_rows(rows, n=200, rng=np.random.default_rng(0))
    assert len(s) == 200 and s["row_id"].is_unique and s["row_id"].is_monotonic_increasing
    assert s.equals(sample_cfr_rows(rows, n=200, rng=np.random.default_rng(0)))
    assert not s.equals(sample_cfr_rows(rows, n=200, rng=np.random.default_rng(1)))
    assert len(sample_cfr_rows(rows.iloc[:30], n=200, rng=0)) == 30


def test_cfr_golden():
    orig = np.array([[1.0, 0.0], [0.0, 2.0], [3.0, 4.0]])
    cf = np.array([[0.0, 1.0], [0.0, 1.0], [-3.0, -4.0]])
    # distances after normalising: sqrt 2, 0, 2
    assert cfr(orig, cf) == pytest.approx((math.sqrt(2) + 0 + 2) / 3)


def test_cfr_item_level_with_masks():
    # row 0: items (1,0),(0,1) -> (1,1)/sqrt2 vs item (1,0): distance sqrt(2 - sqrt2)
    orig = np.array([[[1.0, 0.0], [0.0, 1.0]]])
    cf = np.array([[[1.0, 0.0], [5.0, 5.0]]])
    mask_cf = np.array([[True, False]])
    assert cfr(orig, cf, cf_mask=mask_cf) == pytest.approx(math.sqrt(2 - math.sqrt(2)))
    # identical outputs -> 0
    rng = np.random.default_rng(0)
    e = rng.normal(size=(20, 10, 4))
    assert cfr(e, e.copy()) == pytest.approx(0.0, abs=1e-12)
    assert cfr(e, normalised_row_means(e)) == pytest.approx(0.0, abs=1e-12)


def test_cfr_missing_rows_and_errors():
    orig = np.array([[1.0, 0.0], [np.nan, np.nan]])
    cf = np.array([[0.0, 1.0], [1.0, 0.0]])
    s = cfr_summary(orig, cf)
    assert s == {"value": pytest.approx(math.sqrt(2)), "n_pairs": 1, "n_dropped": 1}
    none = cfr_summary(orig[1:], cf[1:])
    assert none["value"] is None and "none of the 1 row pairs" in none["missing_reason"]
    with pytest.raises(ValueError, match="none of the 1 row pairs"):
        cfr(orig[1:], cf[1:])
    with pytest.raises(ValueError, match="differ in shape"):
        cfr(orig, cf[:1])
