# ---
# jupyter:
#   jupytext:
#     text_representation:
#       extension: .py
#       format_name: percent
#       format_version: '1.3'
#       jupytext_version: 1.19.6
#   kernelspec:
#     display_name: Python 3
#     language: python
#     name: python3
# ---

# %% [markdown]
# # Simpson's paradox explorer
#
# Move the sliders (density d_1, noise sigma_1, model bias b, N, seed): each change reruns the simulation
# (synthetic data) and shows the PerUserGap (with |U*|/N), the AggregateGap, the naive and both IPS
# estimates, the decomposition and the factor read-outs. Sliders update on release
# (`continuous_update=False`). The static figure below is the default configuration, so that a
# non-interactive run (papermill) also stores one.

# %% tags=["parameters"]
PROFILE = "default"
SMOKE = False
N_USERS = 5_000
SEED = 0

# %%
import time

import matplotlib.pyplot as plt
from IPython.display import display

from facterlab import notebook
from facterlab.reporting.figures import apply_style, save_figure, title_with_provenance
from facterlab.reporting.results import write_metrics

# checks the parameters; PROFILE, and under SMOKE these sizes unless passed
P = notebook.parameters(globals(), smoke={"N_USERS": 1_000})
apply_style()
T0 = time.time()


def title(text):
    return title_with_provenance(text, "simulation", True, "synthetic recommender", PROFILE)


# %%
from facterlab.simpson.explorer import build_explorer, static_figure

explorer = build_explorer(n_users=N_USERS, seed=SEED)
display(explorer)  # the widget; its text form (GitHub, no kernel) says what it is

# %% [markdown]
# The default setting, static: what a reader of the executed notebook sees without a kernel (the
# widget above redraws these live; its state is also saved in the notebook by papermill).

# %%
from IPython.display import HTML

from facterlab.simpson.explorer import numbers_html

fig, res = static_figure(n_users=N_USERS, seed=SEED)
save_figure(fig, "simpson_explorer_default", source=f"Simpson simulation, {N_USERS} users, seed {SEED}")
display(fig, HTML(numbers_html(res, ids=False)))  # shown whatever the matplotlib backend (Agg included)
plt.close(fig)

# %%
write_metrics(
    "15_simpson_explorer",
    {
        "dataset": "simulation",
        "is_synthetic": True,
        "model": "synthetic recommender",
        "profile": PROFILE,
        "smoke": SMOKE,
        "n_users": N_USERS,
        "seed": SEED,
        "default_readouts": {k: v for k, v in res.items() if isinstance(v, (int, float))},
        "wall_seconds": time.time() - T0,
    },
)
