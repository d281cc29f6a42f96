"""The cross-fitted, sequential negative control (facterlab.reporting.negative_control)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from scipy.stats import binomtest

from facterlab.reporting.claims import FAILS, HOLDS, TOO_SMALL
from facterlab.reporting.negative_control import (
    CrossFit,
    crossfit_claim,
    crossfit_false_flags,
    rows_to_confirm,
    stage_rows,
)

ALPHA = 0.10


def _world(rng, n: int, shift: float = 0.0) -> pd.DataFrame:
    """Twin and placebo distances of ``n`` rows: exchangeable under the null (shift 0); a model whose
    answers move more for the reworded demographics than for any placebo edit (shift > 0)."""
    return pd.DataFrame({"delta": rng.gamma(2.0, 1.0, n) + shift, "placebo_delta": rng.gamma(2.0, 1.0, n)})


def test_null_rows_false_flag_rate_near_alpha_and_the_claim_rarely_says_fails():
    """Under the null each row's flag has probability <= alpha (+ 1/(n/2+1)): the claim "rate <= alpha +
    0.02" says "fails" in at most 1% of worlds (an exact binomial test over 300 worlds).  At 2,000 rows a
    true rate of alpha is still close enough to alpha + 0.02 that it seldom holds: the design's power
    lies below the bound (next test)."""
    rng = np.random.default_rng(7)
    fails = 0
    rates = []
    for _ in range(300):
        cf = crossfit_false_flags(_world(rng, 2000), ALPHA, seed=int(rng.integers(1 << 30)))
        verdict = crossfit_claim(cf, ALPHA + 0.02).verdict
        fails += verdict == FAILS
        rates.append(cf.rate)
    assert binomtest(fails, 300, 0.01, alternative="greater").pvalue > 0.01
    assert abs(np.mean(rates) - ALPHA) < 0.01


def test_a_model_moved_less_by_the_rewording_than_by_the_placebos_holds_at_400_rows():
    rng = np.random.default_rng(3)
    cal = _world(rng, 400)
    cal["delta"] = cal["delta"] * 0.4
    claim = crossfit_claim(crossfit_false_flags(cal, ALPHA), ALPHA + 0.02)
    assert claim.verdict == HOLDS, claim.measured


def test_positive_control_a_model_that_reads_the_rewording_fails():
    cf = crossfit_false_flags(_world(np.random.default_rng(1), 400, shift=1.5), ALPHA)
    claim = crossfit_claim(cf, ALPHA + 0.02)
    assert claim.verdict == FAILS and cf.rate > 0.25
    assert "fold 0" in claim.measured and "Bonferroni over 2 folds x 1 look(s)" in claim.test


def test_bonferroni_over_looks_widens_the_interval():
    folds = pd.DataFrame({"fold": [0, 1], "n": [75, 75], "flagged": [4, 5], "q_null": [1.0, 1.0]})
    one, two = (crossfit_claim(CrossFit(folds, ALPHA, 150, 0), ALPHA + 0.02, looks=k) for k in (1, 2))
    assert one.test != two.test and float(two.smallest_effect.split()[0][2:]) > float(
        one.smallest_effect.split()[0][2:]
    )
    assert one.verdict == two.verdict == TOO_SMALL  # 150 rows cannot tell 0.06 from 0.12 at 99%


def test_rows_without_a_distance_are_dropped_and_counted_and_bad_input_is_one_line():
    cal = _world(np.random.default_rng(2), 100)
    cal.loc[:4, "delta"] = np.nan
    cf = crossfit_false_flags(cal, ALPHA)
    assert cf.n == 95 and cf.dropped == 5 and cf.folds["n"].sum() == 95
    with pytest.raises(ValueError, match="needs the calibration columns 'delta' and 'placebo_delta'"):
        crossfit_false_flags(cal.drop(columns="placebo_delta"), ALPHA)
    with pytest.raises(ValueError, match="folds must be at least 2"):
        crossfit_false_flags(cal, ALPHA, folds=1)
    with pytest.raises(ValueError, match="fewer than the 9 a threshold at alpha = 0.1 needs"):
        crossfit_false_flags(cal.head(12), ALPHA, folds=2)


def _holds(per_fold_flags, per_fold: int, looks: int) -> bool:
    folds = pd.DataFrame({"fold": [0, 1], "n": [per_fold] * 2, "flagged": list(per_fold_flags), "q_null": [1.0, 1.0]})
    return crossfit_claim(CrossFit(folds, ALPHA, 2 * per_fold, 0), ALPHA + 0.02, looks=looks).verdict == HOLDS


@pytest.mark.parametrize("rate", [0.02, 0.05, 0.08])
def test_rows_to_confirm_is_the_smallest_size_whose_expected_flags_hold(rate):
    """At the planned size, folds with the expected flags hold and one row fewer per fold does not; drawn
    folds at that size hold about half the time (the planning number is a median, not a guarantee), and at
    twice the size far more often."""
    n = rows_to_confirm(rate, ALPHA + 0.02, looks=2)
    per_fold = n // 2
    assert _holds([round(rate * per_fold)] * 2, per_fold, 2)
    assert not _holds([round(rate * (per_fold - 1))] * 2, per_fold - 1, 2)
    rng = np.random.default_rng(11)
    at_n = np.mean([_holds(rng.binomial(per_fold, rate, 2), per_fold, 2) for _ in range(200)])
    at_2n = np.mean([_holds(rng.binomial(2 * per_fold, rate, 2), 2 * per_fold, 2) for _ in range(200)])
    assert 0.15 < at_n < 0.85 and at_2n > max(at_n, 0.8), (at_n, at_2n)


def test_rows_to_confirm_none_at_or_above_the_bound_and_the_plan_command(capsys):
    from facterlab.reporting.negative_control import main

    assert rows_to_confirm(0.12, 0.12) is None and rows_to_confirm(0.2, 0.12) is None
    assert main(["smollm2-135m", "--plan", "0.05", "0.12"]) == 0
    out = capsys.readouterr().out
    assert "rate 0.05: 334 calibration rows, 1670 requests" in out and "rate 0.12: never" in out


def test_stage_rows_leave_the_calibration_split_its_rows():
    for rows in (9, 150, 400, 1000):
        for frac in (0.5, 0.7, 0.9):
            n = stage_rows(rows, frac)
            assert int(round(frac * n)) >= rows and n - int(round(frac * n)) >= 1


def test_sequential_stops_at_the_first_stage_that_tells(monkeypatch):
    """Stage 1 (30 rows asked, 31 given: round(0.9 x 34)) is too small to tell; stage 2 (400 rows, the same model)
    tells; a third stage is never run.  ``ex.run`` replaced by a stand-in that draws the rows' distances."""
    from types import SimpleNamespace

    from facterlab.reporting import experiments as ex
    from facterlab.reporting import negative_control as nc

    asked = []

    def fake_run(cfg, data_dir=None):
        n_cal = int(round(cfg.data.calib_frac * cfg.data.n_rows))
        asked.append(n_cal)
        cal = _world(np.random.default_rng(n_cal), n_cal)
        cal["delta"] = cal["delta"] * 0.4  # a model the rewording moves less than the placebos
        metrics = SimpleNamespace(calibration=SimpleNamespace(alpha=ALPHA))
        return SimpleNamespace(run_id=f"run-{n_cal}", calibration=cal, record=SimpleNamespace(metrics=metrics))

    monkeypatch.setattr(ex, "run", fake_run)
    lines: list = []
    claims, runs = nc.run_sequential("simulated", (30, 400, 1000), "synthetic", log=lines.append)
    assert asked == [31, 400] and [c.verdict for c in claims] == [TOO_SMALL, HOLDS]
    assert lines[0].startswith("stage 1: run run-31, 31 calibration rows") and "x 3 look(s)" in claims[1].test
    assert [
        c.claim.endswith(f"(simulated, look {i}, run {r.run_id})") for i, (c, r) in enumerate(zip(claims, runs), 1)
    ] == [True, True]


@pytest.mark.integration
def test_the_command_runs_stages_and_prints_their_run_ids(tmp_path, monkeypatch, capsys):
    """End to end on the simulated recommender (synthetic data): one saved run per stage run, its run id
    and verdict printed, a second stage only after a first that is too small to tell."""
    from facterlab.reporting.negative_control import main

    monkeypatch.setenv("FACTERLAB_RESULTS", str(tmp_path / "results"))
    monkeypatch.setenv("FACTERLAB_CACHE", str(tmp_path / "cache"))
    assert main(["simulated", "--dataset", "synthetic", "--stages", "20", "40"]) == 0
    out = capsys.readouterr().out
    lines = [line for line in out.splitlines() if line.startswith("stage ")]
    assert lines and "calibration rows" in lines[0] and "negative control, cross-fitted" in out
    ran = sorted(p.name for p in (tmp_path / "results" / "runs").iterdir())
    assert len(ran) == len(lines) and all(f"run {run_id}," in out for run_id in ran)
    assert (len(lines) == 2) == lines[0].endswith("too small to tell")
