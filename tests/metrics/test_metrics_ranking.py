"""Ranking metrics (docs/FACTER.md §4): golden values, ranx cross-check, random-floor enumeration."""

from __future__ import annotations

import itertools
import math
import warnings

import numpy as np
import pytest

from facterlab.metrics.ranking import (
    ERR_NO_ROWS,
    ndcg_at_k,
    random_ranking_floor,
    ranking_metrics,
    recall_at_k,
)

L2 = math.log2


# ---------------------------------------------------------------- golden values (by hand)
def test_single_target_golden():
    # target at rank 3 of 10: NDCG = 1/log2(4) = 0.5, IDCG = 1
    assert ndcg_at_k([9, 8, 7, 6], [7], k=10) == pytest.approx(0.5)
    assert recall_at_k([9, 8, 7, 6], [7], k=10) == 1.0
    # beyond k: no credit
    assert ndcg_at_k([9, 8, 7, 6], [7], k=2) == 0.0
    assert recall_at_k([9, 8, 7, 6], [7], k=2) == 0.0


def test_multi_golden_ideal_over_min_R_k():
    # R has 4 items, k = 3 -> IDCG over 3 positions: 1 + 1/log2(3) + 1/2
    ranked = [1, 50, 2, 3]
    rel = [1, 2, 3, 4]
    idcg = 1 + 1 / L2(3) + 0.5
    dcg = 1 + 0.5  # ranks 1 and 3 within k=3
    assert ndcg_at_k(ranked, rel, k=3) == pytest.approx(dcg / idcg)
    assert recall_at_k(ranked, rel, k=3) == pytest.approx(2 / 4)
    # k = 10: IDCG over 4 positions, hits at ranks 1, 3, 4
    idcg10 = 1 + 1 / L2(3) + 0.5 + 1 / L2(5)
    dcg10 = 1 + 0.5 + 1 / L2(5)
    assert ndcg_at_k(ranked, rel, k=10) == pytest.approx(dcg10 / idcg10)
    assert recall_at_k(ranked, rel, k=10) == pytest.approx(3 / 4)


def test_unmapped_and_duplicates_never_match():
    # -1 and None occupy a rank but never match; a repeated item counts once (first position)
    ranked = [-1, None, 5, 5, 6]
    rel = [5, 6]
    dcg = 1 / L2(4) + 1 / L2(6)  # 5 at rank 3, duplicate at rank 4 ignored, 6 at rank 5
    idcg = 1 + 1 / L2(3)
    assert ndcg_at_k(ranked, rel, k=10) == pytest.approx(dcg / idcg)
    assert recall_at_k(ranked, rel, k=10) == 1.0
    assert ndcg_at_k([5, 5, 5], [5, 6], k=10) <= 1.0
    # -1 in the relevance set is not a real item: it never matches an unmapped position
    assert recall_at_k([-1, -1], [-1, 3], k=10) == 0.0


def test_perfect_ranking_scores_one():
    assert ndcg_at_k([4, 2, 9], [9, 2, 4], k=10) == pytest.approx(1.0)
    assert ndcg_at_k(list(range(20)), list(range(15)), k=10) == pytest.approx(1.0)
    assert recall_at_k(list(range(20)), list(range(15)), k=10) == pytest.approx(10 / 15)


def test_empty_row_scores_zero_and_stays_in_mean():
    m = ranking_metrics([[1], [-1, -1, None], []], [[1], [2], [3]], k=10)
    assert m["ndcg"].tolist() == [1.0, 0.0, 0.0]
    assert m["ndcg_mean"] == pytest.approx(1 / 3)
    assert m["recall_mean"] == pytest.approx(1 / 3)
    assert m["n_rows"] == 3 and m["n_empty_rows"] == 2


def test_string_ids_and_scalar_relevance():
    m = ranking_metrics([["b", "a"], ["x"]], ["a", ["x", "y"]], k=10)
    assert m["ndcg"][0] == pytest.approx(1 / L2(3))
    assert m["recall"].tolist() == [1.0, 0.5]


@pytest.mark.parametrize("bad_k", [0, -1, 2.5, True, None])
def test_bad_k(bad_k):
    with pytest.raises(ValueError, match="k must be a positive integer"):
        ranking_metrics([[1]], [[1]], k=bad_k)
    with pytest.raises(ValueError, match="k must be a positive integer"):
        ndcg_at_k([1], [1], k=bad_k)


def test_bad_input_errors():
    with pytest.raises(ValueError, match="relevance set is empty for row 1"):
        ranking_metrics([[1], [2]], [[1], []], k=10)
    with pytest.raises(ValueError, match="relevance set is empty"):
        recall_at_k([1], [None, -1], k=10)
    with pytest.raises(ValueError, match="must be aligned"):
        ranking_metrics([[1], [2]], [[1]], k=10)
    with pytest.raises(ValueError, match=ERR_NO_ROWS):
        ranking_metrics([], [], k=10)


def _random_rows(rng, n, n_items=60):
    ranked, relevant = [], []
    for _ in range(n):
        length = int(rng.integers(0, 16))
        r = rng.integers(0, n_items, size=length).tolist()  # duplicates happen
        for j in range(length):
            if rng.random() < 0.2:
                r[j] = -1 if rng.random() < 0.5 else None
        ranked.append(r)
        m = int(rng.integers(1, 15))
        relevant.append(rng.choice(n_items, size=m, replace=False).tolist())
    return ranked, relevant


@pytest.mark.parametrize("k", [1, 3, 10])
def test_vectorised_equals_per_row(k):
    rng = np.random.default_rng(7)
    ranked, relevant = _random_rows(rng, 300)
    m = ranking_metrics(ranked, relevant, k=k)
    ndcg = [ndcg_at_k(a, b, k) for a, b in zip(ranked, relevant)]
    rec = [recall_at_k(a, b, k) for a, b in zip(ranked, relevant)]
    np.testing.assert_allclose(m["ndcg"], ndcg, rtol=0, atol=1e-12)
    np.testing.assert_allclose(m["recall"], rec, rtol=0, atol=1e-12)
    assert np.all((m["ndcg"] >= 0) & (m["ndcg"] <= 1 + 1e-12))


# ---------------------------------------------------------------- ranx cross-check
def test_against_ranx_binary_relevance():
    """ranx (Jarvelin NDCG, recall = hits/|R|) agrees exactly with the spec formulas.

    ranx's run is a dict (one score per document), so we pass each row's first occurrences of its
    mapped ids with strictly decreasing scores; unmapped positions are dropped but keep their rank
    in our input, so to compare like with like the rows compared here put unmapped positions only
    after the top k.  Rows with nothing mapped get an empty run (make_comparable) and score 0 in both.
    """
    pytest.importorskip("ranx")
    from numba.core.errors import NumbaTypeSafetyWarning
    from ranx import Qrels, Run, evaluate

    rng = np.random.default_rng(11)
    k = 10
    ranked, relevant = [], []
    for i in range(400):
        length = int(rng.integers(0, 25))
        r = [int(x) for x in rng.permutation(80)[:length]]  # distinct ids (ranx keeps one per doc)
        if i % 7 == 0:
            r = r[:k] + [-1] * 3 + r[k:]  # unmapped after the top k: no effect within k
        ranked.append(r)
        m = int(rng.integers(1, 20))  # |R| > k happens: ideal DCG over min(|R|, k)
        rel = rng.choice(80, size=m, replace=False).tolist()
        if i % 5 == 0 and r:
            rel[0] = r[0]  # make sure hits at the top occur
        relevant.append([int(x) for x in set(rel)])
    qrels = Qrels({f"q{i}": {f"d{x}": 1 for x in rel} for i, rel in enumerate(relevant)})
    run_dict = {}
    for i, r in enumerate(ranked):
        docs = [x for x in r if x != -1]
        if docs:
            run_dict[f"q{i}"] = {f"d{x}": float(len(docs) - j) for j, x in enumerate(docs)}
    run = Run(run_dict)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", NumbaTypeSafetyWarning)
        ref = evaluate(qrels, run, [f"ndcg@{k}", f"recall@{k}"], return_mean=False, make_comparable=True)
    order = [int(q[1:]) for q in qrels.get_query_ids()]
    ours = ranking_metrics([ranked[i] for i in order], [relevant[i] for i in order], k=k)
    np.testing.assert_allclose(ours["ndcg"], ref[f"ndcg@{k}"], rtol=0, atol=1e-12)
    np.testing.assert_allclose(ours["recall"], ref[f"recall@{k}"], rtol=0, atol=1e-12)
    assert ours["ndcg"].max() > 0.5 and (ours["ndcg"] == 0).sum() > 10  # the comparison is not vacuous


# ---------------------------------------------------------------- random-ranking floor
@pytest.mark.parametrize(
    "cands, rel, k",
    [
        ([1, 2, 3, 4, 5, 6], [1, 2], 3),
        ([1, 2, 3, 4, 5, 6], [1, 2, 99, 98], 3),  # relevant items outside the candidates
        ([1, 2, 3, 4], [2, 3, 4], 10),  # k > N
        ([1, 2, 3, 4, 5], [7], 2),  # no relevant candidate: floor 0
    ],
)
def test_random_floor_equals_exhaustive_enumeration(cands, rel, k):
    perms = [list(p) for p in itertools.permutations(cands)]
    m = ranking_metrics(perms, [rel] * len(perms), k=k)
    f = random_ranking_floor([cands], [rel], k=k)
    assert f["ndcg_mean"] == pytest.approx(m["ndcg_mean"], abs=1e-12)
    assert f["recall_mean"] == pytest.approx(m["recall_mean"], abs=1e-12)


def test_random_floor_protocol_design():
    # 40 candidates, 10 of them relevant, |R| = 10: every rank is relevant w.p. 1/4, so the
    # expectation is exactly 1/4 for NDCG@10 and Recall@10 (docs/FACTER.md §1.2 step 5: "about 0.24")
    cands = list(range(40))
    f = random_ranking_floor([cands], [list(range(10))], k=10)
    assert f["ndcg_mean"] == pytest.approx(0.25)
    assert f["recall_mean"] == pytest.approx(0.25)
    # only 6 of the 10 relevant items among the candidates (the rest were in the history): 6/40
    f2 = random_ranking_floor([list(range(4, 44))], [list(range(10))], k=10)
    assert f2["ndcg_mean"] == pytest.approx(6 / 40)
    assert f2["recall_mean"] == pytest.approx(6 / 40)


def test_random_floor_errors_and_empty_candidates():
    with pytest.raises(ValueError, match="relevance set is empty"):
        random_ranking_floor([[1, 2]], [[]], k=10)
    f = random_ranking_floor([[], [1, 2]], [[1], [1]], k=1)
    assert f["ndcg"].tolist() == [0.0, 0.5] and f["n_empty_rows"] == 1


def test_compacted_ranking_is_repros_ndcg_input():
    """REPRO drops unmapped and repeated positions before ranking (metrics.ndcg_positions="compacted")."""
    from facterlab.metrics import compact_ranking

    ranked = [-1, -1, 7, 7, 3, None, 9]
    assert compact_ranking(ranked) == [7, 3, 9]
    rel = [7, 9]
    # positional: hits at ranks 3 and 7; compacted: ranks 1 and 3 (REPRO's plain-loop NDCG, by hand)
    idcg = 1 + 1 / np.log2(3)
    assert ndcg_at_k(ranked, rel) == pytest.approx((1 / np.log2(4) + 1 / np.log2(8)) / idcg)
    assert ndcg_at_k(compact_ranking(ranked), rel) == pytest.approx((1 + 1 / np.log2(4)) / idcg)
    m = ranking_metrics([compact_ranking(ranked)], [rel], k=10)
    assert m["ndcg"][0] == pytest.approx((1 + 1 / np.log2(4)) / idcg)
    assert m["recall"][0] == ranking_metrics([ranked], [rel], k=10)["recall"][0] == 1.0
