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
# # 06 Figure 1: violations by pass
#
# docs/FACTER.md §3 and §6.  Per pass over the test rows: violations against the adaptive threshold Q_t
# (V(t), what FACTER's loop sees), against the fixed Q0 (V(0)), and against the final threshold Q* of
# the last pass; plus the threshold path Q0 -> Q1 -> ... (right axis).  With the one-sided update
# Q only rises, so V(t) falls partly because the bar moves: compare V(0), which keeps the bar fixed.
# The figure shows counts as shares of the test rows, so that runs of different sizes compare;
# REPRO's ML-1M numbers (15.3, 10.3, 9.0 adaptive; 57.0, 59.7, 53.7 fixed, of 750 test rows;
# Q 1.004 -> 1.494) are drawn as hollow markers for reference.  The table keeps the counts.
#
# One column per setting that produced answers: the MODEL run, and (with `SIMULATED = True`) the
# simulated recommender with known bias at the paper's n (docs/SIMULATED.md), so that the figure has a
# panel with signal on a CPU.  Each column's title names its recommender, sizes and seeds; runs are
# averaged only over seeds of one setting (the table too: one block of rows per setting).  Rates (top,
# with the target rate alpha dashed) share one y scale across columns, thresholds (bottom) another.
# A column with too few rows to read against alpha says "NO SIGNAL" and why.  The figure and table
# name the run ids and code version that made them.

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
SIMULATED = True  # also run the simulated recommender with known bias beside the LLM (docs/SIMULATED.md)
SIM_N_INTERACTIONS = 2500  # its rows: the paper size (seconds of CPU, not hours)
SIM_BETA = 2.0  # its bias strength in score SDs (rules always honoured)

# %%
from IPython.display import Markdown, display

from facterlab import notebook
from facterlab.reporting import experiments as ex
from facterlab.reporting import facter_figures as ff
from facterlab.reporting import tables as tb
from facterlab.reporting.figures import save_figure
from facterlab.reporting.results import write_metrics

P = notebook.parameters(globals(), smoke=notebook.FACTER_SMOKE)  # checks the parameters; PROFILE and SMOKE sizes
config, sim_config = P.config, P.sim_config  # run configs of this notebook's parameters


# %%
from facterlab.reporting.published import published_value

results = [ex.run(config(seed), data_dir=DATA_DIR) for seed in SEEDS]
sim_results = [ex.run(sim_config(seed), data_dir=DATA_DIR, progress=False) for seed in SEEDS] if SIMULATED else []
table = tb.per_pass_table(
    [r.record for r in results + sim_results],
    name="fig1_violations_by_pass",
    title="Figure 1: FACTER violations by pass",
    profile=PROFILE,
)
display(Markdown(table.to_markdown()))
ref = {
    k: [published_value("REPRO", "ml-1m", "llama3-8b", "open", "facter", key, i) for i in range(n)]
    for k, key, n in (
        ("adaptive", "violations_adaptive_pass", 3),
        ("fixed_q0", "violations_fixed_q0_pass", 3),
        ("threshold_path", "threshold_path", 4),
    )
}
# one column per setting, titled by what produced it (the recommender, its sizes); runs are averaged only
# over seeds of one setting: with MODEL = "simulated" the MODEL run (N_INTERACTIONS rows) and the
# simulated run (SIM_N_INTERACTIONS rows) stay two columns, never one pooled mean
fig = ff.figure1(
    [(None, results), (None, sim_results)],
    "Figure 1: FACTER violations by pass",
    PROFILE,
    published=ref,
)

# %%
table.save()
save_figure(fig, "fig1_violations_by_pass")
write_metrics(
    "06_fig1_violations_by_pass",
    {
        **ex.provenance(results + sim_results, PROFILE, "06_fig1_violations_by_pass"),
        "runs": [
            {
                "run_id": r.run_id,
                "model": r.record.metrics.model_name,
                "violations": r.record.metrics.methods["facter"].violations,
                "threshold_path": r.record.metrics.methods["facter"].threshold_path,
                "baselines": {b: r.record.metrics.methods[b].violations for b in ("neutral", "fair")},
            }
            for r in results + sim_results
        ],
    },
)
