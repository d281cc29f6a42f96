"""Simpson part: the grid of simulations (SIMPSON.md §3), reduced to 30 configurations (slow)."""
from __future__ import annotations

import numpy as np
import pytest

from facterlab.simpson.simulate import SimConfig, grid, grid_summary


@pytest.mark.slow
def test_ips_error_is_at_most_half_the_aggregate_error_on_a_reduced_grid():
    """sigma_1 in linspace(0,10,6) x d_1 in linspace(1.5,4,5), b = 0.03, N = 50,000 (the full
    160-run grid is notebook 14).  The counts IPS estimate's mean |error| is at most half the
    aggregate's, and the aggregate disagrees in sign with the PerUserGap in a visible share."""
    df = grid(np.linspace(0, 10, 6), np.linspace(1.5, 4, 5), base=SimConfig(n_users=50_000, bias=0.03), progress=False)
    s = grid_summary(df)
    assert s["n_configurations"] == 30
    agg = s["mean_abs_aggregate_minus_per_user_pp"]
    assert s["mean_abs_ips_counts_minus_per_user_pp"] <= 0.5 * agg
    assert s["mean_abs_ips_model_minus_per_user_pp"] < agg
    assert s["sign_disagreement_aggregate"] >= 0.1
