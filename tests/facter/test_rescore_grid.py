"""facterlab.facter.rescore: a grid over lambda builds each tau's neighbour indexes once, with the same S."""

from __future__ import annotations

import dataclasses

import numpy as np
import pandas as pd

from facterlab.facter import rescore as rs


def _inputs(seed=0, n_cal=120, n_test=60, dim=8):
    rng = np.random.default_rng(seed)

    def unit(n):
        v = rng.normal(size=(n, dim))
        return v / np.linalg.norm(v, axis=1, keepdims=True)

    groups = [("F", "18-24"), ("M", "18-24"), ("F", "35-44"), ("M", "35-44")]
    base = unit(4)  # contexts near four centres: every row has neighbours of other groups
    ctx = lambda n: base[rng.integers(0, 4, n)] + 0.2 * unit(n)  # noqa: E731
    return rs.RescoreInputs(
        cal_pred=unit(n_cal),
        cal_target=unit(n_cal),
        cal_ctx=ctx(n_cal),
        cal_groups=[groups[i] for i in rng.integers(0, 4, n_cal)],
        test_pred=unit(n_test),
        test_target=unit(n_test),
        test_ctx=ctx(n_test),
        test_groups=[groups[i] for i in rng.integers(0, 4, n_test)],
        records=pd.DataFrame({"row_id": range(n_test)}),
    )


def test_a_lambda_grid_reuses_each_taus_indexes_and_scores_the_same(monkeypatch):
    x = _inputs()
    built = []
    real = rs.counterfactual_neighbours
    monkeypatch.setattr(rs, "counterfactual_neighbours", lambda *a, **k: built.append(k["tau_rho"]) or real(*a, **k))
    grid = [(tau, lam) for tau in (0.7, 0.9) for lam in (0.0, 0.35, 1.4)]
    shared = {(tau, lam): rs.rescore(x, lam=lam, tau_rho=tau) for tau, lam in grid}
    assert sorted(built) == [0.7, 0.9] and set(x.indexes) == {(0.7, None), (0.9, None)}  # the calibration index
    for tau, lam in grid:  # each alone, on inputs without indexes: bit for bit the same
        alone = rs.rescore(dataclasses.replace(x, indexes={}), lam=lam, tau_rho=tau)
        got = shared[(tau, lam)]
        assert np.array_equal(got.S, alone.S) and got.q0 == alone.q0
        assert got.share_no_neighbour == alone.share_no_neighbour
    assert shared[(0.7, 1.4)].share_no_neighbour < 1.0  # neighbours exist: Delta counts
    assert not np.array_equal(shared[(0.7, 0.0)].S, shared[(0.7, 1.4)].S)
