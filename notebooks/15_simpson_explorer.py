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
# # Simpson's paradox explorer
#
# Move the sliders (density d_1, noise sigma_1, model bias b, N, seed): each change reruns the simulation
# (synthetic data) and shows the PerUserGap (with |U*|/N), the AggregateGap, the naive and both IPS
# estimates, the decomposition and the factor read-outs. Sliders update on release
# (`continuous_update=False`).
#
# **It opens on a setting that shows the paradox**: d_1 = 3.0, sigma_1 = 5.0, b = 0.01, seed 0, where
# the AggregateGap and the PerUserGap favour different groups (SIGN REVERSAL in red above the numbers).
# The reversal is small and depends on the seed: move the seed slider to watch it come and go. The button
# **default setting** moves every slider to the default knobs (d_1 = 1.5, sigma_1 = 0, b = 0.03), where the
# two gaps agree in sign; **reversal setting** comes back. The static figures below show both settings,
# so that a non-interactive run (papermill) stores them too.
#
# Gaps are the exposure of **group 0** (reference items: density d_0 = 1.5, no extra noise, no bias)
# minus **group 1** (the varied items: density d_1, noise sigma_1, model bias +b). When the AggregateGap
# and the PerUserGap favour different groups, the explorer says **SIGN REVERSAL** (the paradox itself).
# The model IPS estimate carries a 95% interval: 1.96 sd over 6 random experiments re-drawn on the same
# simulated world, i.e. its sampling uncertainty at the slider's N. The default N is 20,000: at the
# default knobs the model IPS lands further from the PerUserGap than the AggregateGap in 15 of 21 seeds
# at N = 5,000, 12 at 10,000, 6 at 20,000 and 2 at 50,000 (docs/SIMPSON.md §6).

# %% tags=["parameters"]
PROFILE = "default"
SMOKE = False
N_USERS = 20_000  # simulated users (default N: the IPS estimate is reliable enough here, docs/SIMPSON.md)
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
from facterlab.simpson.explorer import DEFAULTS, OPENING, build_explorer, sign_reversal, static_figure

explorer = build_explorer(**{**OPENING, "n_users": N_USERS, "seed": SEED})
display(explorer)  # the widget; its text form (GitHub, no kernel) says what it is

# %% [markdown]
# The two settings, static: what a reader of the executed notebook sees without a kernel (the widget above
# redraws these live; its state is also saved in the notebook by papermill). First the setting the explorer
# opens on, then the default one; the line above each says whether the two gaps reverse.

# %%
from IPython.display import HTML

from facterlab.simpson.explorer import numbers_html

readouts = {}
for label, setting in (("opening", OPENING), ("default", DEFAULTS)):
    fig, readouts[label] = static_figure(setting, n_users=N_USERS, seed=SEED)
    print(f"{label} setting:", sign_reversal(readouts[label]) or "no sign reversal (the two gaps agree in sign)")
    save_figure(fig, f"simpson_explorer_{label}", source=f"Simpson simulation, {N_USERS} users, seed {SEED}")
    display(fig, HTML(numbers_html(readouts[label], ids=False)))  # shown whatever the matplotlib backend
    plt.close(fig)
res = readouts["default"]

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
        "opening_setting": OPENING,
        "opening_readouts": {k: v for k, v in readouts["opening"].items() if isinstance(v, (int, float))},
        "opening_reverses": sign_reversal(readouts["opening"]) is not None,
        "wall_seconds": time.time() - T0,
    },
)
