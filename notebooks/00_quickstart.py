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
# # 00 Quickstart: one FACTER run, end to end
#
# One small run of the whole pipeline (docs/FACTER.md §1-§4): sample interaction rows, calibrate the
# conformal threshold Q0 on the calibration rows (Neutral prompt), then run Neutral, Fair and FACTER
# (T passes with the adaptive threshold and prompt repair) on the test rows, and compute NDCG@10,
# Recall@10, Valid@10, SNSR, CFR and the violation counts.  On CPU with the bundled SmolLM2-135M this
# takes a few minutes; the run is cached in `results/runs/<run_id>/`, and notebooks 02, 03, 06, 07
# reuse it (same parameters, same run id).
#
# SmolLM2-135M is a tiny model: its lists are weak, so expect low NDCG; the point here is the
# machinery, not the numbers.  The `paper` profile runs the 7-8B backbones.

# %% tags=["parameters"]
PROFILE = "default"  # default | paper | smoke (set by `facterlab reproduce`)
SMOKE = False  # True: tiny sizes, seconds per notebook
DATASET = "auto"  # auto | ml-1m | ml-100k | amazon | synthetic
MODEL = "smollm2-135m"  # registry name, local path, or "fake" (deterministic test model)
PROTOCOL = "open"  # open | rank
PRESET = "repro"  # repro (alpha 0.10) | icml (alpha 0.20) | facterlab
SEEDS = [0]
N_INTERACTIONS = 40  # rows, split 70/30 calibration/test; None: the REPRO size (ML-1M 2,500)
PASSES = 3  # FACTER passes T
CFR_ROWS = 3  # counterfactual rows per method (REPRO: 200)
MAX_NEW_TOKENS = 112  # REPRO: 250
BATCH_SIZE = 8
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
cfg = config(SEEDS[0])
result = ex.run(cfg, data_dir=DATA_DIR)
m = result.record.metrics  # the typed run record (docs/CONTRACTS.md)
print(
    f"run {result.run_id}: dataset {m.dataset} (synthetic: {m.is_synthetic}), model {m.model}, "
    f"{m.n_calib} calibration / {m.n_test} test rows, Q0 = {m.calibration.q0}"
)

# %%
table = tb.method_table([m], name="quickstart_methods", title="Quickstart: Neutral, Fair and FACTER", profile=PROFILE)
display(Markdown(table.to_markdown()))

# %%
fig = ff.method_bars(
    result,  # the run (its typed record)
    ["ndcg@10_multi", "recall@10_multi", "valid@10", "snsr_joint", "cfr_multi"],
    "Quickstart: quality and fairness by method",
    PROFILE,
)

# %%
save_figure(fig, "quickstart_methods")
table.save()
write_metrics(
    "00_quickstart",
    {
        **ex.provenance([result], PROFILE, "00_quickstart"),
        "n_calib": m.n_calib,
        "n_test": m.n_test,
        "calibration": m.calibration,
        "methods": ex.flat_json(m),
    },
)
