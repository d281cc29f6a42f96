"""Simpson's paradox in recommender fairness (Prost et al., arXiv:2210.07755, 2022).

Per-user vs aggregate exposure gaps, their identities (lemma, matching theorem, three-factor
decomposition), a vectorised seeded simulator, IPS estimation from a random experiment, the toy
example and an interactive explorer.  Formulas: ``shared/spec/SIMPSON.md``.  Only numpy/pandas are
imported here; scikit-learn, matplotlib and ipywidgets load inside the functions that use them.
"""
from facterlab.simpson.exposure import average_position, competition, get_exposure, log_discount
from facterlab.simpson.gaps import (AggregateGap, Decomposition, PerUserGap, UserStats, aggregate_gap,
                                    decompose, expected_per_user_gap, gaps_from_arrays, gaps_from_table,
                                    lemma_aggregate_gap, per_user_gap, reweighted_aggregate_gap, user_mixtures)
from facterlab.simpson.ips import Estimate, ips_estimate, naive_estimate, weights_counts, weights_model
from facterlab.simpson.simulate import (RandomExperiment, SimConfig, Simulation, grid, grid_summary, measure,
                                        random_experiment, run, simulate, summarise, sweep)
from facterlab.simpson.toy import draw_toy, toy_gaps, toy_table

__all__ = [
    "average_position", "competition", "get_exposure", "log_discount",
    "AggregateGap", "Decomposition", "PerUserGap", "UserStats", "aggregate_gap", "decompose",
    "expected_per_user_gap", "gaps_from_arrays", "gaps_from_table", "lemma_aggregate_gap", "per_user_gap",
    "reweighted_aggregate_gap", "user_mixtures",
    "Estimate", "ips_estimate", "naive_estimate", "weights_counts", "weights_model",
    "RandomExperiment", "SimConfig", "Simulation", "grid", "grid_summary", "measure", "random_experiment",
    "run", "simulate", "summarise", "sweep",
    "draw_toy", "toy_gaps", "toy_table",
]
