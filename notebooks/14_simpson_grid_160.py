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
# # Simpson's paradox: the 160-simulation grid, compared like for like
#
# Prost et al. (2022), §5 (synthetic data): sigma_1 in linspace(0, 10, 16) x d_1 in linspace(1.5, 4, 10),
# b = 0.03, one run each at N = 50,000, repeated over **3 independent seeds** (every configuration of every
# seed has its own `SeedSequence` child stream). The paper reports mean |AggregateGap - PerUserGap| = 4.0 pp
# and mean |estimate - PerUserGap| = 0.9 pp, where its estimate comes from a model of the user embedding:
# the **logistic-model IPS** is the like-for-like comparison. The count-cell IPS, the oracle-weight IPS
# (true 1/n_s(u)) and the oracle's estimand are shown beside it, each named. Acceptance (fixed before the
# runs): an estimator passes when its mean error is at most half the aggregate's. Exact values depend on the
# paper's unknown N, M and r; the reading of the paper's text is named in the table.

# %% tags=["parameters"]
PROFILE = "default"
SMOKE = False
N_USERS = 50_000
N_SIGMA1 = 16
N_D1 = 10
BIAS = 0.03
SEEDS = [0, 1, 2]
N_JOBS = 2

# %%
import time

import matplotlib.pyplot as plt
import numpy as np
from IPython.display import display

from facterlab import notebook
from facterlab.reporting.figures import apply_style, save_figure, title_with_provenance
from facterlab.reporting.results import write_metrics
from facterlab.simpson import SimpsonConfig, plots

# checks the parameters; PROFILE, and under SMOKE these sizes unless passed
P = notebook.parameters(globals(), smoke={"N_USERS": 3_000, "N_SIGMA1": 3, "N_D1": 2, "SEEDS": [0, 1], "N_JOBS": 1})
apply_style()
T0 = time.time()


def title(text):
    return title_with_provenance(text, "simulation", True, "synthetic recommender", PROFILE)


# %%
from facterlab.simpson.sweeping import ESTIMATORS, comparison_table, grid_seeds, grid_summary

base = SimpsonConfig(n_users=N_USERS, bias=BIAS)
t_grid = time.time()
df = grid_seeds(SEEDS, np.linspace(0, 10, N_SIGMA1), np.linspace(1.5, 4, N_D1), base=base, n_jobs=N_JOBS)
t_grid = time.time() - t_grid
table = comparison_table(df)
print(
    f"reading: {base.variant}; {len(df)} runs ({len(SEEDS)} seeds x {len(df) // len(SEEDS)} configurations) in {t_grid:.1f} s"
)
display(table.drop(columns=["n_seeds"]).round(3))
share = df.groupby("seed").share_defined.mean()
print(
    f"share of users with relevant items of both groups: mean {df.share_defined.mean():.3f} "
    f"(per seed {share.round(3).tolist()}), min {df.share_defined.min():.3f}"
)
for k in ("ips_model", "ips_counts", "ips_oracle", "ips_estimand"):
    r = table.loc[k]
    verdict = (
        "passes" if r.seeds_passing_half_rule == r.n_seeds else "fails" if r.seeds_passing_half_rule == 0 else "mixed"
    )
    print(
        f"{ESTIMATORS[k]}: error ratio to the aggregate {r.error_ratio_to_aggregate:.2f} -> {verdict} "
        f"the half rule ({r.seeds_passing_half_rule:.0f}/{r.n_seeds} seeds)"
    )

# %%
fig = plots.plot_grid(
    df,
    table,
    seed=SEEDS[0],
    title=title(
        f"Grid of {len(df) // len(SEEDS)} simulations x {len(SEEDS)} seeds ({base.variant}; b={BIAS}, N={N_USERS})"
    ),
)
save_figure(
    fig,
    "simpson_grid_160",
    source=f"Simpson simulation grid, {N_USERS} users, seeds {SEEDS}, {N_SIGMA1} x {N_D1} settings",
)
plt.show()


# %%
def jsonable_table(t):
    out = {}
    for k, r in t.iterrows():
        row = {c: (v.item() if hasattr(v, "item") else v) for c, v in r.items()}
        if not np.isfinite(row["paper_pp"]):
            row["paper_pp"] = {"value": None, "missing_reason": "the paper reports no number for this estimator"}
        out[k] = row
    return out


per_seed = {int(s): grid_summary(g) for s, g in df.groupby("seed")}
write_metrics(
    "14_simpson_grid_160",
    {
        "dataset": "simulation",
        "is_synthetic": True,
        "model": "synthetic recommender",
        "profile": PROFILE,
        "smoke": SMOKE,
        "reading": base.variant,
        "n_users": N_USERS,
        "bias": BIAS,
        "seeds": SEEDS,
        "n_configurations_per_seed": len(df) // len(SEEDS),
        "grid_wall_seconds": t_grid,
        "n_jobs": N_JOBS,
        "comparison": jsonable_table(table),
        "per_seed": per_seed,
        "like_for_like": {
            "paper_estimate_pp": 0.9,
            "ips_model_pp_mean": float(table.loc["ips_model", "mean_abs_error_pp"]),
            "ips_model_pp_sd": float(table.loc["ips_model", "sd_over_seeds_pp"]),
        },
        "mean_share_defined": float(df.share_defined.mean()),
        "min_share_defined": float(df.share_defined.min()),
        "runs": df.to_dict(orient="list"),
        "wall_seconds": time.time() - T0,
    },
)
