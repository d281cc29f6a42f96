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
# # 02 Calibration: scores, Q0, neighbours, d against Delta
#
# docs/FACTER.md §2.  For every calibration row the nonconformity score is
# S = d + lambda * Delta, with d = 1 - cos(f(yhat), f(y)) (top-1 prediction against the target) and
# Delta the largest embedding distance to the predictions of its counterfactual neighbours (rows with
# cosine context similarity > tau_rho = 0.90 and a different protected tuple; 0 when none).  Q0 is the
# k-th smallest score, k = ceil((1 - alpha)(n + 1)).
#
# The figure shows the score distribution with Q0, how many counterfactual neighbours the rows have
# (with few neighbours Delta is mostly 0 and S is mostly d), and d against Delta.

# %% tags=["parameters"]
PROFILE = "default"  # default | paper | smoke (set by `facterlab reproduce`)
SMOKE = False  # True: tiny sizes, seconds per notebook
DATASET = "auto"  # auto | ml-1m | ml-100k | amazon | synthetic
MODEL = "smollm2-135m"  # registry name, local path, or "fake" (deterministic test model)
PROTOCOL = "open"  # open | rank
PRESET = "repro"  # repro (alpha 0.10) | icml (alpha 0.20) | facterlab
SEEDS = [0]
N_INTERACTIONS = 14  # rows, split 70/30 calibration/test; None: the REPRO size (ML-1M 2,500)
PASSES = 3  # FACTER passes T
CFR_ROWS = 1  # counterfactual rows per method (REPRO: 200)
MAX_NEW_TOKENS = 112  # REPRO: 250
BATCH_SIZE = 16  # prompts per LLM batch (16: fastest on 2 CPU cores, docs/CPU_DECODING.md)
FAST_DECODING = True  # oneDNN GEMMs on CPU, stop at the parsed answer (named switches; docs/CPU_DECODING.md)
DEVICE = "auto"
SNSR_MIN_GROUP = 30  # groups with fewer rows are left out of SNSR (REPRO: 30)
RANKER = "likelihood"  # rank protocol only: likelihood (fast, CPU default) | generate (REPRO)
DATA_DIR = None  # None: $FACTERLAB_DATA

# %%
from IPython.display import Markdown, display

from facterlab import notebook
from facterlab.reporting import experiments as ex
from facterlab.reporting import facter_figures as ff
from facterlab.reporting import tables as tb
from facterlab.reporting.figures import save_figure
from facterlab.reporting.results import write_metrics

P = notebook.parameters(globals(), smoke=notebook.FACTER_SMOKE)  # checks the parameters; PROFILE and SMOKE sizes
config = P.config  # run configs of this notebook's parameters


# %%
result = ex.run(config(SEEDS[0]), data_dir=DATA_DIR)
m = result.record.metrics  # the typed run record (docs/CONTRACTS.md)
cal = result.calibration
summary = ex.calibration_summary(cal, m)
display(
    Markdown(
        tb.frame_table(ex.summary_frame(summary), name="calibration_summary", title="Calibration summary").to_markdown()
    )
)

# %%
cols = ex.calibration_columns(cal)
fig = ff.calibration_panels(
    cal, m.calibration.q0, "Calibration scores, neighbours, d vs Delta", result, PROFILE, **cols
)

# %%
save_figure(fig, "calibration_scores")
write_metrics("02_calibration", {**ex.provenance([result], PROFILE, "02_calibration"), "calibration": summary})
