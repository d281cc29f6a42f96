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
# # 04 Table 2: backbones
#
# REPRO's Table 2: the same open-generation protocol over several LLM backbones (REPRO: Llama-3-8B,
# Llama-2-7B, Mistral-7B; the `paper` profile runs those on a GPU).  The default profile has only the
# bundled SmolLM2-135M, so its run is the one of notebook 03 (shared from the cache).

# %% tags=["parameters"]
PROFILE = "default"  # default | paper | smoke (set by `facterlab reproduce`)
SMOKE = False  # True: tiny sizes, seconds per notebook
DATASET = "auto"  # auto | ml-1m | ml-100k | amazon | synthetic
MODEL = "smollm2-135m"  # registry name, local path, or "fake" (deterministic test model)
PROTOCOL = "open"  # open | rank
PRESET = "repro"  # repro (alpha 0.10) | paper (alpha 0.20)
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
MODELS = None  # backbones; None: [MODEL] (paper profile: llama3-8b, llama2-7b, mistral-7b)

# %%
from IPython.display import Markdown, display

from facterlab.reporting import experiments as ex
from facterlab.reporting import tables as tb
from facterlab.reporting.results import write_metrics

if SMOKE:  # tiny sizes (never larger than passed): seconds per notebook with the fake model
    N_INTERACTIONS = min(N_INTERACTIONS or 24, 24)
    CFR_ROWS, PASSES, MAX_NEW_TOKENS = min(CFR_ROWS, 2), min(PASSES, 2), min(MAX_NEW_TOKENS, 32)
    SNSR_MIN_GROUP, SEEDS = min(SNSR_MIN_GROUP, 3), SEEDS[:1]


def config(seed, dataset=None, model=None, protocol=None, **kw):
    """This notebook's run config (same parameters -> same run id -> shared cached run)."""
    return ex.run_config(
        dataset=dataset or DATASET,
        model=model or MODEL,
        protocol=protocol or PROTOCOL,
        preset_name=PRESET,
        seed=seed,
        n_rows=N_INTERACTIONS,
        passes=PASSES,
        cfr_rows=CFR_ROWS,
        max_new_tokens=MAX_NEW_TOKENS,
        batch_size=BATCH_SIZE,
        device=DEVICE,
        ranker=RANKER,
        metrics__snsr_min_group=SNSR_MIN_GROUP,
        **kw,
    )


def sim_config(seed, dataset=None, protocol=None):
    """The simulated recommender's run beside the LLM's (docs/SIMULATED.md): same dataset, preset and
    passes, the paper's n and 200 CFR rows (tiny sizes and the torch-free encoder under SMOKE)."""
    return ex.run_config(
        dataset=dataset or DATASET,
        model="simulated",
        protocol=protocol or PROTOCOL,
        preset_name=PRESET,
        seed=seed,
        n_rows=min(SIM_N_INTERACTIONS, 300) if SMOKE else SIM_N_INTERACTIONS,
        passes=PASSES,
        cfr_rows=CFR_ROWS if SMOKE else 200,
        encoder="hash-encoder" if SMOKE else "all-MiniLM-L6-v2",
        sim__beta=float(SIM_BETA),
        metrics__snsr_min_group=SNSR_MIN_GROUP if SMOKE else 30,
    )


# %%
MODELS = MODELS or [MODEL]
if SMOKE:
    MODELS = MODELS[:2]
results = [ex.run(config(seed, model=model), data_dir=DATA_DIR) for model in MODELS for seed in SEEDS]
runs = [r.metrics for r in results]
table = tb.method_table(
    runs,
    name="table2_backbones",
    title="Table 2: backbones (open generation)",
    columns=tb.OPEN_COLUMNS,
    row_by=("model", "dataset"),
    profile=PROFILE,
)
display(Markdown(table.to_markdown()))

# %%
table.save()
write_metrics(
    "04_table2_backbones",
    {
        **ex.provenance(results, PROFILE, "04_table2_backbones"),
        "runs": [
            {"run_id": r.run_id, "model": r.metrics["model"], "methods": ex.flat_json(r.metrics)} for r in results
        ],
    },
)
