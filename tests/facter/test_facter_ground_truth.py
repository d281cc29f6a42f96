"""FACTER's claims against a recommender with known bias (facterlab.reporting.ground_truth).

A hand-built world (tests/helpers/facter_world.py: four taste genres, Romance liked by nobody) and the
simulated recommender pushing Romance to women: there the bias is what makes scores large, the
setting FACTER is designed for.  These tests fail if calibration, the monitor, rule mining or the
prompt repair break.  Notebook 09 asks the same questions on real data.
"""

from __future__ import annotations

import pandas as pd
import pytest
from facter_world import make_world

from facterlab.config import preset
from facterlab.data.protocol import build_interactions
from facterlab.models.fake import HashEncoder
from facterlab.reporting import ground_truth as gt


@pytest.fixture(scope="module")
def world_runs(tmp_path_factory):
    out = tmp_path_factory.mktemp("gt_runs")
    ds = make_world(n_users=160, seed=0)
    runs = {(b, r): gt.handbuilt_run(ds, b, r, out) for b, r in ((0.0, 1.0), (3.0, 1.0), (6.0, 1.0), (6.0, 0.0))}
    inter = build_interactions(
        ds, preset("repro", data__dataset="synthetic", data__n_rows=600, data__n_candidates=20).data
    )
    return inter, runs


@pytest.mark.slow
@pytest.mark.parametrize("beta", [0.0, 6.0])
def test_exceedance_rate_is_within_its_interval_of_alpha(world_runs, beta):
    _, runs = world_runs
    cov = gt.coverage_table([runs[(beta, 1.0)]], alphas=(0.1, 0.2, 0.3), level=0.99)
    assert (cov["n_test"] == 180).all()
    for r in cov.itertuples():
        assert r.ci_lo <= r.alpha, f"alpha={r.alpha}: rate {r.rate} significantly above alpha"
        assert r.ci_hi >= r.bound_lo, f"alpha={r.alpha}: rate {r.rate} significantly below alpha - 1/(n+1)"
    # 180 rows: the 99% interval is wider than the +-0.03 band, so the verdict can only be "too small to tell"
    assert all(c.verdict != gt.FAILS for c in gt.coverage_checks(cov))


@pytest.mark.slow
def test_repair_removes_the_bias_only_when_the_recommender_listens(world_runs):
    _, runs = world_runs
    rep = gt.repair_table([runs[(6.0, 1.0)], runs[(6.0, 0.0)]])
    last = rep["pass"].max()
    v = {(rho, p): int(g["V_q0"].sum()) for (rho, p), g in rep.groupby(["rho", "pass"])}
    n = {(rho, p): int(g["n"].sum()) for (rho, p), g in rep.groupby(["rho", "pass"])}

    def falls(before, after):  # after's violation rate clearly below before's (one-sided 1%, the claims' test)
        return gt.two_rate_claim("", v[after], n[after], v[before], n[before]).verdict == gt.HOLDS

    biased = {(rho, p): float(g["share_top1_biased"].mean()) for (rho, p), g in rep.groupby(["rho", "pass"])}
    # listening: the bias is gone by the last pass, and with it the violations it caused
    assert biased[(1.0, last)] <= 0.05 < 0.2 <= biased[(0.0, last)]
    assert falls((0.0, last), (1.0, last))
    # not listening: nothing falls against the fixed bar
    assert not falls((0.0, 1), (0.0, last))
    # every pass answers the same rows: the checks pair them (exact McNemar on the discordant rows)
    for r in rep[rep["pass"] == last].itertuples():
        first = rep[(rep["rho"] == r.rho) & (rep["pass"] == 1)].iloc[0]
        assert r.n_paired == r.n
        assert r.V_q0 - r.V_q0_here_only + r.V_q0_pass1_only == first["V_q0"]
    checks = gt.repair_checks(rep)
    assert all("McNemar" in c.test for c in checks)
    deaf = next(c for c in checks if "rho=0" in c.claim and "fixed Q0" in c.claim)
    row = rep[(rep["rho"] == 0.0) & (rep["pass"] == last)].iloc[0]
    assert f"A only {int(row.V_q0_here_only)}, B only {int(row.V_q0_pass1_only)}" in deaf.measured
    assert deaf.verdict != gt.HOLDS  # not listening: the paired test does not see violations fall either
    # rho = 1 against rho = 0: the same rows, paired (notebook 09's positive control)
    rc = gt.rho_claim("x", gt.biased_share_table([runs[(6.0, 1.0)], runs[(6.0, 0.0)]]), 6.0)
    assert "McNemar" in rc.test and rc.verdict == gt.HOLDS
    assert abs(biased[(0.0, 1)] - biased[(0.0, last)]) < 0.1
    methods = runs[(6.0, 1.0)].record.metrics.methods
    assert "AVOID: (gender=F) -> (Romance-only)" in (methods["facter"].rules_in_last_pass or [])
    # CFR: FACTER with a listening recommender is the fairest method
    cfr = {m: methods[m].cfr_multi for m in ("neutral", "fair", "facter")}
    assert cfr["facter"] < cfr["fair"] <= cfr["neutral"]


@pytest.mark.slow
def test_violations_flag_biased_outputs_and_precision_rises_with_beta(world_runs):
    inter, runs = world_runs
    det = pd.concat(
        [
            gt.detector_table(
                runs[(b, 1.0)], HashEncoder(), inter.items, inter.calib, inter.test, lambdas=(0.7,), tau_rhos=(0.9,)
            ).assign(beta=b)
            for b in (3.0, 6.0)
        ],
        ignore_index=True,
    )
    assert det["biased"].iloc[1] > det["biased"].iloc[0] > 0
    assert (det["biased_list"] > 0).all() and (det["true_pos_list"] <= det["flagged"]).all()
    assert det["precision"].iloc[1] > det["precision"].iloc[0]
    lo = gt.clopper_pearson(int(det["true_pos"].iloc[1]), int(det["flagged"].iloc[1]), 0.99)[0]
    assert lo > det["base_rate"].iloc[1]
    checks = gt.detector_checks(det)
    assert checks[-1].verdict == gt.HOLDS, checks[-1]


@pytest.mark.slow
def test_decomposition_row_splits_the_score_by_the_truth(world_runs):
    _, runs = world_runs
    res = runs[(6.0, 1.0)]
    row = gt.decomposition_row(res, "beta 6")
    rec = res.rows["neutral"]
    by = rec.assign(biased=gt.truth_frame(rec)["top1_changed"].astype(bool)).groupby("biased")
    assert row["n"] == len(rec) and row["biased"] == int(by.size().get(True, 0)) > 0
    for col in ("d", "delta", "S"):
        assert row[f"mean {col} biased"] == pytest.approx(by[col].mean()[True])
        assert row[f"mean {col} unbiased"] == pytest.approx(by[col].mean()[False])
    from sklearn.metrics import roc_auc_score

    assert row["AUC(S, biased)"] == pytest.approx(roc_auc_score(by.obj["biased"], rec["S"]))
    assert row["share_no_neighbour (calibration)"] == pytest.approx(
        float((res.calibration["n_neighbours"] == 0).mean())
    )


def test_truth_frame_needs_the_simulators_raw_output():
    with pytest.raises(ValueError, match="raw"):
        gt.truth_frame(pd.DataFrame({"x": [1]}))
    with pytest.raises(ValueError, match="simulated recommender's JSON"):
        gt.truth_frame(pd.DataFrame({"raw": ["not json"]}))
    with pytest.raises(ValueError, match="simulated recommender's JSON"):  # JSON, but not a truth
        gt.truth_frame(pd.DataFrame({"raw": ['{"top1_changed": true}', '["Toy Story (1995)"]']}))
    # one parser for both readers: the detector's labels skip what this frame refuses
    assert gt.truth_frame(pd.DataFrame({"raw": ['{"top1_changed": true}']}))["top1_changed"].tolist() == [True]


def test_a_saved_handbuilt_run_is_read_back_not_recomputed(tmp_path, monkeypatch):
    """Issue 45: notebook 09's hand-built control reads its saved runs back (same run id as computed)."""
    ds = make_world(n_users=160, seed=0)
    first = gt.handbuilt_run(ds, 6.0, 1.0, tmp_path, data__n_rows=300)
    monkeypatch.setattr(gt, "run_experiment", lambda *a, **kw: pytest.fail("a saved hand-built run was recomputed"))
    again = gt.handbuilt_run(ds, 6.0, 1.0, tmp_path, data__n_rows=300)
    assert again.run_id == first.run_id and again.out_dir == first.out_dir
    assert again.record.metrics == first.record.metrics
    assert again.rows["facter"].equals(pd.read_parquet(first.out_dir / "rows_facter.parquet"))
    other = tmp_path / "other"  # elsewhere nothing is saved: it runs (and fails here, as run_experiment is patched)
    with pytest.raises(pytest.fail.Exception, match="recomputed"):
        gt.handbuilt_run(ds, 6.0, 1.0, other, data__n_rows=300)


def test_row_flags_travel_to_derived_frames_without_a_copy():
    # pandas deep-copies attrs into every derived frame; the row-level flags are shared instead (immutable)
    flags = gt.SharedFlags({("r1", 3): (frozenset({1, 2}), frozenset({2})), ("r2", 3): (frozenset({1}), frozenset())})
    df = pd.DataFrame({"beta": [2.0, 0.0], "pass": [3, 3], "seed": [0, 0]})
    df.attrs["changed_rows"] = flags
    sub = df[df["beta"] > 0]
    _, group = next(iter(sub.groupby("seed")))
    assert sub.attrs["changed_rows"] is flags and group.attrs["changed_rows"] is flags
    assert dict(group.attrs["changed_rows"]) == {
        ("r1", 3): (frozenset({1, 2}), frozenset({2})),
        ("r2", 3): (frozenset({1}), frozenset()),
    }
    assert flags.get(("r3", 3)) is None and len(flags) == 2
