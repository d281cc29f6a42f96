"""Simpson part: the reading study and the PerUserGap held fixed (Fig 4 panel)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from facterlab.simpson.simulate import SimpsonConfig
from facterlab.simpson.study import calibrate_bias, hold_per_user_gap, variant_study, variant_verdicts


def test_hold_per_user_gap_fixes_it_while_density_moves_the_aggregate():
    df = hold_per_user_gap("d1", [1.5, 4.0], seeds=[0], base=SimpsonConfig(n_users=1_500), progress=False)
    assert df["per_user_gap"].abs().max() < 5e-4  # held at 0 (within 0.05 pp)
    assert df["bias"].nunique() == 2  # a different bias was needed at each density
    agg = df.set_index("d1")["aggregate_gap"]
    assert abs(agg[4.0] - agg[1.5]) > 0.005  # the aggregate moves by more than 0.5 pp


def test_calibrate_bias_reports_an_unbracketed_target():
    with pytest.raises(ValueError, match="does not change sign"):
        calibrate_bias(SimpsonConfig(n_users=300), target=0.5)


def test_variant_verdicts_by_hand():
    rows = []
    for variant, slope in (("A", 0.02), ("B", 0.0)):
        for knob in ("sigma1", "d1"):
            for x in (0.0, 1.0):
                for seed in (0, 1):
                    pu = 0.01
                    agg = pu + 0.01 + (slope if knob == "sigma1" else 0.015) * x
                    rows.append(
                        {
                            "variant": variant,
                            "knob": knob,
                            "value": x,
                            "seed": seed,
                            "per_user_gap": pu,
                            "aggregate_gap": agg,
                            "ips_model": pu + 0.001,
                            "ips_counts": pu - 0.002,
                            "ips_oracle": pu,
                            "probe_ndcg": 0.9 - 0.1 * x,
                            "share_defined": 0.9,
                        }
                    )
    v = variant_verdicts(pd.DataFrame(rows))
    assert v.loc["A", "sigma1_range_agg_minus_pu_pp"] == pytest.approx(2.0)
    assert v.loc["B", "sigma1_range_agg_minus_pu_pp"] == pytest.approx(0.0)
    assert v.loc["A", "d1_range_agg_minus_pu_pp"] == pytest.approx(1.5)
    assert bool(v.loc["A", "both_knobs_move_aggregate"]) and not bool(v.loc["B", "both_knobs_move_aggregate"])
    assert v.loc["A", "mean_abs_ips_model_error_pp"] == pytest.approx(0.1)
    assert bool(v.loc["A", "model_ips_stays_close"])
    assert v.loc["A", "sigma1_ndcg_drop"] == pytest.approx(0.1)


def test_variant_study_names_every_reading():
    df = variant_study(n_users=300, seeds=[0], n_points=2, progress=False)
    assert set(df["variant"]) == {
        "noise=item, mu1=printed",
        "noise=item, mu1=orthonormal",
        "noise=user, mu1=printed",
        "noise=user, mu1=orthonormal",
    }
    assert len(df) == 4 * 2 * 2
    assert np.isfinite(df["ips_model"]).all()


def _effect_rows(deltas, knob="sigma1", ips_error=0.004):
    rows = []
    for seed, d in enumerate(deltas):
        for x, shift in ((0.0, 0.0), (10.0, d)):
            rows.append(
                {
                    "variant": "R",
                    "knob": knob,
                    "value": x,
                    "seed": seed,
                    "per_user_gap": 0.01,
                    "aggregate_gap": 0.02 + shift / 100,
                    "ips_model": 0.01 + ips_error * (-1) ** seed,
                    "probe_ndcg": 0.9,
                    "share_defined": 0.9,
                }
            )
    return rows


def test_variant_verdicts_give_the_signed_direction_of_the_noise_effect_with_its_interval():
    """The study's metric used to be a range (no sign); the signed, paired effect says which way noise
    moves AggregateGap - PerUserGap, and says 'inconclusive' when its interval over seeds covers 0."""
    falls = _effect_rows([-0.5, -0.6, -0.4, -0.55]) + _effect_rows([0.3, 0.2, 0.25, 0.35], "d1")
    v = variant_verdicts(pd.DataFrame(falls)).loc["R"]
    assert v["sigma1_effect_pp"] == pytest.approx(-0.5125) and v["sigma1_effect_direction"] == "falls"
    assert v["sigma1_effect_lo"] < v["sigma1_effect_pp"] < v["sigma1_effect_hi"] < 0
    assert v["d1_effect_direction"] == "rises" and v["n_seeds"] == 4
    assert v["sigma1_range_agg_minus_pu_pp"] == pytest.approx(0.5125)  # the unsigned range hides the sign
    noisy = _effect_rows([-0.5, 0.6, -0.4, 0.45]) + _effect_rows([0.3, 0.2, 0.25, 0.35], "d1")
    assert variant_verdicts(pd.DataFrame(noisy)).loc["R", "sigma1_effect_direction"] == "inconclusive"
    one = _effect_rows([-0.5]) + _effect_rows([0.3], "d1")
    assert variant_verdicts(pd.DataFrame(one)).loc["R", "sigma1_effect_direction"] == "inconclusive"


def test_model_ips_verdict_is_inconclusive_when_its_interval_covers_the_half_rule():
    def verdict(ips_error):
        rows = _effect_rows([-0.5, -0.6, -0.4, -0.55], ips_error=ips_error)
        rows += _effect_rows([0.3, 0.2, 0.25, 0.35], "d1", ips_error=ips_error)
        return variant_verdicts(pd.DataFrame(rows)).loc["R"]

    close, far = verdict(0.001), verdict(0.02)  # IPS off by 0.1 pp vs 2 pp; the aggregate by about 1 pp
    assert close["model_ips_verdict"] == "stays close" and close["model_error_ratio_hi"] <= 0.5
    assert far["model_ips_verdict"] == "not close" and far["model_error_ratio_lo"] > 0.5
    mixed = _effect_rows([-0.5, -0.6, -0.4, -0.55]) + _effect_rows([0.3, 0.2, 0.25, 0.35], "d1")
    for r in mixed:  # per-seed ratios on both sides of 0.5: the interval covers the rule
        r["ips_model"] = 0.01 + (0.001 if r["seed"] % 2 else 0.015)
    v = variant_verdicts(pd.DataFrame(mixed)).loc["R"]
    assert v["model_error_ratio_lo"] <= 0.5 < v["model_error_ratio_hi"] and v["model_ips_verdict"] == "inconclusive"
