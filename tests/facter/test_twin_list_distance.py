"""The twin Delta over whole lists (``facter.twin_distance = "list"``; issue 43 item 3, docs/FACTER.md §7.2).

- the statistic: a twin whose top-1 equals the row's but whose list differs is at distance 0 under
  ``"top1"`` and above 0 under ``"list"``;
- the setting: validated, and its default keeps every run id;
- the bound: row, twin and placebos measured with the same list statistic keep P(Delta > Q_null) <= alpha
  on a null model (many small replicates, one test row each, exact binomial test), and a positive control
  (a push below the list's head) that the top-1 statistic cannot see and the list statistic flags.
"""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest
from scipy.stats import binomtest

from facterlab.config import config_to_dict, preset
from facterlab.facter.twins import (
    answer_vectors,
    null_threshold,
    rank_weights,
    statistic_distance,
    top1_part,
)
from facterlab.reporting import twin_acceptance as ta

NULL = {"facter__delta": "twin", "facter__threshold": "null"}
DIM, N_ITEMS, K = 16, 120, 10
EMB = np.random.default_rng(7).normal(size=(N_ITEMS, DIM))
GENRE = np.arange(100, N_ITEMS)  # a "genre": items whose embeddings share a direction (what a bias pushes)
EMB[GENRE] = 0.5 * EMB[GENRE] + 4.0 * np.eye(DIM)[0]


def _represent(ids, raws):
    """A catalogue of random item embeddings; an unmapped position's raw title gets its own vector."""
    ids = np.asarray(ids, dtype=int)
    out = np.where((ids >= 0)[:, None], EMB[np.maximum(ids, 0)], 0.0)
    for j in np.flatnonzero(ids < 0):
        if raws[j]:
            out[j] = np.random.default_rng(abs(hash(raws[j])) % 2**32).normal(size=DIM)
    return out


def _answers(lists):
    post = [(list(x), int(x[0]) if x else -1, f"t{x[0]}" if x else "") for x in lists]
    preds = [SimpleNamespace(titles=[f"t{i}" for i in x]) for x in lists]
    return post, preds


def _vectors(lists, how):
    post, preds = _answers(lists)
    return answer_vectors(_represent, post, preds, how)


# ---------------------------------------------------------------- the statistic
def test_same_top1_different_list_is_zero_for_top1_and_positive_for_list():
    row, twin = [3, 5, 7, 9], [3, 11, 13, 9]
    for how, positive in (("top1", False), ("list", True)):
        a, b = _vectors([row], how), _vectors([twin], how)
        d = float(statistic_distance(a, b, how)[0])
        assert (d > 0) is positive, (how, d)
    # identical lists are at 0 under both; the top-1 half of "list" is the top-1 vector itself
    a = _vectors([row], "list")
    assert float(statistic_distance(a, _vectors([row], "list"), "list")[0]) == 0.0
    np.testing.assert_array_equal(top1_part(a, "list"), _vectors([row], "top1"))


def test_list_statistic_weights_the_head_more_and_handles_empty_and_unmapped():
    w = rank_weights(10)
    assert np.isclose(w.sum(), 1.0) and np.all(np.diff(w) < 0)
    base = [0, 1, 2, 3, 4, 5, 6, 7, 8, 9]
    swap_head, swap_tail = [50, *base[1:]], [*base[:9], 50]
    d_head = statistic_distance(_vectors([base], "list"), _vectors([swap_head], "list"), "list")[0]
    d_tail = statistic_distance(_vectors([base], "list"), _vectors([swap_tail], "list"), "list")[0]
    assert d_head > d_tail > 0
    v = _vectors([[], [-1, 2]], "list")  # an empty answer is the zero vector; an unmapped title is represented
    assert not v[0].any() and v[1, DIM:].any()
    with pytest.raises(ValueError, match="unknown twin_distance"):
        _vectors([base], "rbo")


# ---------------------------------------------------------------- the setting
def test_setting_is_validated_and_its_default_keeps_run_ids():
    cfg = preset("repro", **NULL)
    assert cfg.facter.twin_distance == "top1" and "twin_distance" not in config_to_dict(cfg)["facter"]
    lst = preset("repro", facter__twin_distance="list", **NULL)
    assert config_to_dict(lst)["facter"]["twin_distance"] == "list"
    with pytest.raises(ValueError, match="unknown twin_distance 'rbo'; choose one of 'top1', 'list'"):
        preset("repro", facter__twin_distance="rbo", **NULL)
    with pytest.raises(ValueError, match="needs facter.delta 'twin'"):
        preset("repro", facter__twin_distance="list")
    # the testbed's cases: the list statistic is a choice of the twin monitor's configs only
    tb = ta.case_config("sampled-bias", 0, dataset="synthetic", encoder="hash-encoder")
    assert tb.facter.twin_distance == ta.TWIN_DISTANCE


# ---------------------------------------------------------------- the bound and a positive control
def _draw_lists(rng, pref, push=None, n_lists=1, fixed_head=False):
    """Sampled answers: the top-K of preference + Gumbel noise (temperature 1), ``n_lists`` independent draws;
    ``push`` adds to some items' scores (a bias); ``fixed_head`` keeps item 0 first (the top-1 never moves)."""
    out = []
    for _ in range(n_lists):
        s = pref + rng.gumbel(size=N_ITEMS) + (0 if push is None else push)
        if fixed_head:
            s[0] = np.inf
        out.append(list(np.argsort(-s)[:K]))
    return out


def _rows(rng, n, push=None, fixed_head=False):
    """n rows of (row list, twin list, three placebo lists); under H0 (no push) all five are exchangeable."""
    rows = []
    for _ in range(n):
        pref = rng.normal(scale=2.0, size=N_ITEMS)
        row = _draw_lists(rng, pref, fixed_head=fixed_head)[0]
        twin = _draw_lists(rng, pref, push, fixed_head=fixed_head)[0]
        rows.append((row, twin, _draw_lists(rng, pref, n_lists=3, fixed_head=fixed_head)))
    return rows


def _distances(rows, how, with_first=False):
    """(twin distances, placebo family max[, the first placebo's distances]), all with the statistic ``how``."""
    own = _vectors([r[0] for r in rows], how)
    twin = statistic_distance(own, _vectors([r[1] for r in rows], how), how)
    each = [statistic_distance(own, _vectors([r[2][j] for r in rows], how), how) for j in range(3)]
    return (twin, np.max(each, axis=0), each[0]) if with_first else (twin, np.max(each, axis=0))


def test_list_statistic_keeps_the_conformal_bound_on_a_null_model():
    """Replicates of (49 calibration rows, 1 test row) of a model whose twin and placebos are exchangeable
    draws: the test row's flag rate must be consistent with <= alpha by an exact one-sided binomial test at
    the 0.1% level (the family's max of three placebos).  Against one placebo (no max) the twin and the
    placebo are exchangeable and the list statistic is continuous, so the rate is also >= alpha - 1/(n+1)
    = 0.08: the bound is met by the quantile, not by a statistic that never flags."""
    how, rng = "list", np.random.default_rng(1)
    alpha, reps, hits, hits_one, hits_mixed = 0.1, 400, 0, 0, 0
    for _ in range(reps):
        rows = _rows(rng, 50)
        twin, plc, one = _distances(rows, how, with_first=True)
        q = null_threshold(plc[:49], alpha).q
        hits += int(twin[49] > q)
        hits_one += int(twin[49] > null_threshold(one[:49], alpha).q)
        # the test's own control: a twin measured another way (top-1) than its placebos (list) breaks the bound
        last = top1_part(_vectors([rows[49][0], rows[49][1]], how), how)
        hits_mixed += int(statistic_distance(last[:1], last[1:], "top1")[0] > q)
    for k in (hits, hits_one):
        p = binomtest(k, reps, alpha, alternative="greater").pvalue
        assert p > 1e-3, f"{how}: {k}/{reps} null test rows flagged (bound {alpha}), p = {p:.2g}"
    p = binomtest(hits_one, reps, 0.08, alternative="less").pvalue
    assert p > 1e-3, f"one placebo: {hits_one}/{reps} flagged, far below alpha (p = {p:.2g})"
    assert binomtest(hits_mixed, reps, alpha, alternative="greater").pvalue < 1e-3, f"mixed: {hits_mixed}/{reps}"


def test_positive_control_a_push_below_the_head_is_seen_by_the_list_only():
    """The twin's list is pushed toward a genre (items whose embeddings share a direction) while its top-1 is
    fixed: the top-1 statistic is 0 on every row (it cannot flag), the list statistic flags most rows against
    the same-statistic placebo threshold."""
    rng = np.random.default_rng(3)
    push = np.zeros(N_ITEMS)
    push[GENRE] = 4.0
    cal = _rows(rng, 199, fixed_head=True)  # calibration: placebos only matter
    test = _rows(rng, 200, push=push, fixed_head=True)
    rates = {}
    for how in ("top1", "list"):
        q = null_threshold(_distances(cal, how)[1], 0.1).q
        rates[how] = float((_distances(test, how)[0] > q).mean())
    assert rates["top1"] == 0.0 and rates["list"] >= 0.6, rates


def test_command_line_sets_the_twin_statistic():
    import argparse

    from facterlab.facter.commands import config_from_args, register

    parser = argparse.ArgumentParser()
    register(parser.add_subparsers(dest="cmd"))
    args = parser.parse_args(["run", "--delta", "twin", "--threshold", "null", "--twin-distance", "list"])
    assert config_from_args(args).facter.twin_distance == "list"
    with pytest.raises(SystemExit):  # argparse refuses an unknown value
        parser.parse_args(["run", "--delta", "twin", "--twin-distance", "rbo"])
