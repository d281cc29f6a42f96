"""Simpson's paradox in recommender fairness (Prost et al., arXiv:2210.07755, 2022).

Per-user vs aggregate exposure gaps, their identities (lemma, matching theorem, three-factor
decomposition), a vectorised seeded simulator with the paper's ambiguous passages as named readings,
IPS estimation from a random experiment (model, count cells and oracle weights), the toy example, an
interactive explorer, and :func:`audit` of your own exposure log (``facterlab simpson audit LOG``,
module ``facterlab.simpson.auditing``: named apart from the function, as ``sweeping`` holds ``sweep``).  Design notes: ``docs/SIMPSON.md``.  Only numpy/pandas are
imported here; scikit-learn, matplotlib and ipywidgets load inside the functions that use them.
"""

from facterlab.simpson.auditing import AuditResult, LogError, audit, log_from_simulation, read_log
from facterlab.simpson.exposure import average_position, competition, get_exposure, log_discount
from facterlab.simpson.gaps import (
    AggregateGap,
    Decomposition,
    PerUserGap,
    UserStats,
    aggregate_gap,
    decompose,
    expected_per_user_gap,
    gaps_from_arrays,
    gaps_from_table,
    ips_estimand,
    lemma_aggregate_gap,
    per_user_gap,
    reweighted_aggregate_gap,
    user_mixtures,
)
from facterlab.simpson.ips import (
    Estimate,
    ips_estimate,
    naive_estimate,
    weighted_estimate,
    weights_counts,
    weights_model,
    weights_oracle,
)
from facterlab.simpson.simulate import (
    RandomExperiment,
    SimConfig,
    SimpsonConfig,
    Simulation,
    measure,
    random_experiment,
    simulate,
    simulate_and_measure,
)
from facterlab.simpson.study import calibrate_bias, hold_per_user_gap, variant_study, variant_verdicts
from facterlab.simpson.sweeping import (
    ESTIMATORS,
    comparison_table,
    grid,
    grid_seeds,
    grid_summary,
    summarise,
    sweep,
    sweeps,
)
from facterlab.simpson.toy import draw_toy, toy_gaps, toy_table

__all__ = [
    "AuditResult",
    "LogError",
    "audit",
    "log_from_simulation",
    "read_log",
    "average_position",
    "competition",
    "get_exposure",
    "log_discount",
    "AggregateGap",
    "Decomposition",
    "PerUserGap",
    "UserStats",
    "aggregate_gap",
    "decompose",
    "expected_per_user_gap",
    "gaps_from_arrays",
    "gaps_from_table",
    "ips_estimand",
    "lemma_aggregate_gap",
    "per_user_gap",
    "reweighted_aggregate_gap",
    "user_mixtures",
    "Estimate",
    "ips_estimate",
    "naive_estimate",
    "weighted_estimate",
    "weights_counts",
    "weights_model",
    "weights_oracle",
    "ESTIMATORS",
    "RandomExperiment",
    "SimpsonConfig",
    "SimConfig",
    "Simulation",
    "comparison_table",
    "grid",
    "grid_seeds",
    "grid_summary",
    "measure",
    "random_experiment",
    "simulate_and_measure",
    "simulate",
    "summarise",
    "sweep",
    "sweeps",
    "calibrate_bias",
    "hold_per_user_gap",
    "variant_study",
    "variant_verdicts",
    "draw_toy",
    "toy_gaps",
    "toy_table",
]
