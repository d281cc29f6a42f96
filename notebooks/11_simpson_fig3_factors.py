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
# # Simpson's paradox, Fig 3: simulation parameters drive the three factors
#
# Prost et al. (2022), Fig. 3, on the simulation of `docs/SIMPSON.md` (synthetic data). Each panel varies one
# knob from the base (d_1 = 1.5, sigma_1 = 0, b = 0): the density d_1 of group-1 items drives
# **competition** (how many relevant items a user aligned with mu_1 has, and C(u*)), the noise level
# sigma_1 drives **performance** (nDCG of that user), the model bias b drives the **per-user gap**.
# Mean ± sd over seeds (the same seeds at every x-value). The reading of the paper's text is named in the
# title (`noise=user, mu1=orthonormal` by default; notebook 12 has the study that chose it); the last table
# shows how much sigma_1 lowers performance under each reading.

# %% tags=["parameters"]
PROFILE = "default"
SMOKE = False
N_USERS = 10_000
N_SEEDS = 10
N_POINTS = 11
N_READING_USERS = 2_000
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
P = notebook.parameters(
    globals(), smoke={"N_USERS": 1_000, "N_SEEDS": 2, "N_POINTS": 4, "N_READING_USERS": 500, "N_JOBS": 1}
)
apply_style()
T0 = time.time()


def title(text):
    return title_with_provenance(text, "simulation", True, "synthetic recommender", PROFILE)


# %%
base = SimpsonConfig(n_users=N_USERS, bias=0.0, sigma1=0.0, d1=1.5)
print("reading:", base.variant)
grids = {
    "d1": np.linspace(1.5, 4.0, N_POINTS),
    "sigma1": np.linspace(0.0, 10.0, N_POINTS),
    "bias": np.linspace(0.0, 0.1, N_POINTS),
}
# one pool for the three sweeps; their common base point (d_1 = 1.5, sigma_1 = 0, b = 0) runs once per seed
raw = sweeps(grids, seeds=range(N_SEEDS), base=base, ips=False, n_jobs=N_JOBS)
summaries = {p: summarise(df, p) for p, df in raw.items()}

# %%
cols = ["probe_n_relevant", "probe_competition", "probe_ndcg", "mean_ndcg", "per_user_gap", "share_defined"]
display(pd.concat({p: s.set_index(p)[[c + "_mean" for c in cols]] for p, s in summaries.items()}).round(4))
fig = plots.plot_factors(
    summaries,
    title=title(f"Fig 3: parameters -> factors ({base.variant}; N={N_USERS}, {N_SEEDS} seeds)"),
    n_seeds=N_SEEDS,
    n_users=N_USERS,
)
save_figure(
    fig, "simpson_fig3_factors", source=f"Simpson simulation, {N_USERS} users x {N_SEEDS} seeds x {N_POINTS} points"
)
plt.show()

# %%
import functools

from facterlab.simpson.simulate import simulate_and_measure
from facterlab.simpson.study import VARIANTS
from facterlab.simpson.sweeping import run_many

cases = [(v, s1) for v in VARIANTS for s1 in (0.0, 10.0)]
runs = run_many(  # every (reading, sigma_1, seed) in one pool
    functools.partial(simulate_and_measure, ips=False),
    [base.replace(n_users=N_READING_USERS, sigma1=s1, seed=seed, **v) for v, s1 in cases for seed in range(N_SEEDS)],
    n_jobs=N_JOBS,
)
perf_rows = [
    {
        "reading": f"noise={v['noise']}, mu1={v['mu1']}",
        "sigma1": s1,
        "probe_ndcg": np.mean([x["probe_ndcg"] for x in runs[k * N_SEEDS : (k + 1) * N_SEEDS]]),
        "mean_ndcg": np.mean([x["mean_ndcg"] for x in runs[k * N_SEEDS : (k + 1) * N_SEEDS]]),
    }
    for k, (v, s1) in enumerate(cases)
]
perf = pd.DataFrame(perf_rows).pivot(index="reading", columns="sigma1", values=["probe_ndcg", "mean_ndcg"])
perf[("drop", "probe_ndcg")] = perf[("probe_ndcg", 0.0)] - perf[("probe_ndcg", 10.0)]
perf[("drop", "mean_ndcg")] = perf[("mean_ndcg", 0.0)] - perf[("mean_ndcg", 10.0)]
display(perf.round(4))


# %%
def slope(p, col):
    s = summaries[p]
    return float(np.polyfit(s[p], s[col + "_mean"], 1)[0])


write_metrics(
    "11_simpson_fig3_factors",
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
        "slopes": {
            "d1_vs_probe_n_relevant": slope("d1", "probe_n_relevant"),
            "d1_vs_probe_competition": slope("d1", "probe_competition"),
            "sigma1_vs_probe_ndcg": slope("sigma1", "probe_ndcg"),
            "bias_vs_per_user_gap": slope("bias", "per_user_gap"),
        },
        "ndcg_drop_sigma1_0_to_10_by_reading": {
            r: {
                "probe": float(perf.loc[r, ("drop", "probe_ndcg")]),
                "mean_over_users": float(perf.loc[r, ("drop", "mean_ndcg")]),
            }
            for r in perf.index
        },
        "summaries": {p: s.to_dict(orient="list") for p, s in summaries.items()},
        "wall_seconds": time.time() - T0,
    },
)
