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
# # 03 Table 1: open generation (Neutral, Fair, FACTER)
#
# REPRO's Table 1 (docs/FACTER.md §6): per dataset, NDCG@10 and Recall@10 (multi = the next 10 positives,
# single = the target), Valid@10, SNSR (`snsr_proxy`, joint groups with >= 30 rows), CFR (all three
# attributes flipped) and the violation counts of the last pass against the fixed Q0, V(0), and the
# adaptive threshold, V(t).  Cells are mean ± sd over seeds.  REPRO's published numbers (ML-1M,
# Llama-3-8B) follow as rows labelled with their source; they are not the same setting unless the
# `paper` profile ran.  "n/a [k]" cells give their reason in footnote k.
#
# With `SIMULATED = True` the table also has the rows of the **simulated recommender** (model
# `simulated`: PureSVD preferences plus a known demographic bias, docs/SIMULATED.md) at the paper's
# n = 2,500, so that the table has rows with signal even where the LLM is the tiny bundled one.  Its
# rows say `simulated` in the Model column; they are not LLM results.

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
DATASETS = None  # datasets of the table; None: [DATASET] (paper profile: ml-1m, amazon)

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
DATASETS = DATASETS or [DATASET]
results = [ex.run(config(seed, dataset=ds), data_dir=DATA_DIR) for ds in DATASETS for seed in SEEDS]
sim_results = (
    [ex.run(sim_config(seed, dataset=ds), data_dir=DATA_DIR, progress=False) for ds in DATASETS for seed in SEEDS]
    if SIMULATED
    else []
)
runs = [r.record for r in results + sim_results]  # typed run records (docs/CONTRACTS.md)
table = tb.method_table(
    runs,
    name="table1_open_generation",
    title="Table 1: open generation",
    columns=tb.OPEN_COLUMNS,
    row_by=("dataset", "model", "n_test"),
    profile=PROFILE,
)
display(Markdown(table.to_markdown()))

# %%
first = tb.seed_groups(runs)[0]  # the seeds of the first setting (runs differing only by seed)
fig = ff.method_bars(
    first,  # the figure names these runs and their code version
    ["ndcg@10_multi", "valid@10", "snsr_joint", "cfr_multi"],
    f"Table 1 (first dataset and model, {len(first)} seed(s))",
    PROFILE,
)

# %%
table.save()
save_figure(fig, "table1_open_generation")
write_metrics(
    "03_table1_open_generation",
    {
        **ex.provenance(results + sim_results, PROFILE, "03_table1_open_generation"),
        "runs": [
            {
                "run_id": r.run_id,
                "dataset": r.record.metrics.dataset,
                "model": r.record.metrics.model_name,
                "methods": ex.flat_json(r.record),
            }
            for r in results + sim_results
        ],
    },
)
