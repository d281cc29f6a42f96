# ---
# jupyter:
#   jupytext:
#     notebook_metadata_filter: -jupytext.text_representation.jupytext_version
#     text_representation:
#       extension: .py
#       format_name: percent
#       format_version: '1.3'
#   kernelspec:
#     display_name: Python 3 (ipykernel)
#     language: python
#     name: python3
# ---

# %% [markdown]
# # Simpson's paradox, Fig 5: estimating the per-user gap from a random experiment
#
# Prost et al. (2022), Fig. 5 (synthetic data, b = 0.03): the AggregateGap, the true PerUserGap and the IPS
# estimates computed from a random experiment showing one uniformly drawn item per user. The paper's
# estimate comes from "a model that takes as input the user embedding U_i": the **logistic-model IPS**.
# Beside it: the count-cell IPS (10 quantile cells of U.mu_1/|mu_1|), the IPS with the **oracle weights**
# 1/n_s(u) (the true propensities, known only in a simulation) and that oracle's estimand without sampling
# noise. The oracle's estimand differs from the PerUserGap because some users have relevant items of one
# group only (share |U*|/N below). Left: against sigma_1 (d_1 = 1.5); right: against d_1 (sigma_1 = 0).

# %% tags=["parameters"]
PROFILE = "default"
SMOKE = False
N_USERS = 10_000
N_SEEDS = 10
N_POINTS = 11
BIAS = 0.03
N_JOBS = 2  # worker processes for the simulations (the results do not depend on it)

# %%
import time

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
from IPython.display import display

from facterlab import notebook
from facterlab.reporting.figures import apply_style, save_figure, title_with_provenance
from facterlab.reporting.results import write_metrics
from facterlab.simpson import SimpsonConfig, plots, summarise, sweeps

# checks the parameters; PROFILE, and under SMOKE these sizes unless passed
P = notebook.parameters(globals(), smoke={"N_USERS": 2_000, "N_SEEDS": 2, "N_POINTS": 4, "N_JOBS": 1})
apply_style()
T0 = time.time()


def title(text):
    return title_with_provenance(text, "simulation", True, "synthetic recommender", PROFILE)


# %%
base = SimpsonConfig(n_users=N_USERS, bias=BIAS)
# one pool for both sweeps; their common point (sigma_1 = 0, d_1 = 1.5) runs once per seed
raw = sweeps(
    {"sigma1": np.linspace(0, 10, N_POINTS), "d1": np.linspace(1.5, 4, N_POINTS)},
    seeds=range(N_SEEDS),
    base={"sigma1": base.replace(d1=1.5), "d1": base.replace(sigma1=0.0)},
    n_jobs=N_JOBS,
)
summaries = {p: summarise(df, p) for p, df in raw.items()}

# %%
fig = plots.plot_gap_sweeps(
    summaries,
    series=("aggregate_gap", "per_user_gap", "ips_model", "ips_counts", "ips_oracle", "ips_estimand"),
    params=("sigma1", "d1"),
    title=title(f"Fig 5: IPS estimates vs truth ({base.variant}; b={BIAS}, N={N_USERS}, {N_SEEDS} seeds)"),
    n_seeds=N_SEEDS,
    n_users=N_USERS,
)
save_figure(
    fig,
    "simpson_fig5_ips_estimate",
    source=f"Simpson simulation, {N_USERS} users x {N_SEEDS} seeds x {N_POINTS} points, bias {BIAS}",
)
plt.show()
allruns = pd.concat(raw.values())
errors_pp = {
    c: float(100 * (allruns[c] - allruns.per_user_gap).abs().mean())
    for c in (
        "aggregate_gap",
        "naive_estimate",
        "ips_model",
        "ips_counts",
        "ips_oracle",
        "ips_oracle_both",
        "ips_estimand",
    )
}
print("mean |x - PerUserGap| (pp):", {k: round(v, 3) for k, v in errors_pp.items()})
print(
    f"share of users with relevant items of both groups: mean {allruns.share_defined.mean():.3f}, min {allruns.share_defined.min():.3f}"
)
display(
    pd.concat(
        {
            p: s.set_index(p)[
                [
                    "share_defined_mean",
                    "per_user_gap_mean",
                    "aggregate_gap_mean",
                    "ips_model_mean",
                    "ips_counts_mean",
                    "ips_oracle_mean",
                    "ips_estimand_mean",
                ]
            ]
            for p, s in summaries.items()
        }
    ).round(4)
)

# %%
write_metrics(
    "13_simpson_fig5_ips_estimate",
    {
        "dataset": "simulation",
        "is_synthetic": True,
        "model": "synthetic recommender",
        "profile": PROFILE,
        "smoke": SMOKE,
        "reading": base.variant,
        "n_users": N_USERS,
        "n_seeds": N_SEEDS,
        "n_points": N_POINTS,
        "bias": BIAS,
        "mean_abs_error_vs_per_user_pp": errors_pp,
        "mean_share_defined": float(allruns.share_defined.mean()),
        "min_share_defined": float(allruns.share_defined.min()),
        "summaries": {p: s.to_dict(orient="list") for p, s in summaries.items()},
        "wall_seconds": time.time() - T0,
    },
)
