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
MODELS = None  # backbones; None: [MODEL] (paper profile: llama3-8b, llama2-7b, mistral-7b)

# %%
from IPython.display import Markdown, display

from facterlab import notebook
from facterlab.reporting import experiments as ex
from facterlab.reporting import tables as tb
from facterlab.reporting.results import write_metrics

P = notebook.parameters(globals(), smoke=notebook.FACTER_SMOKE)  # checks the parameters; PROFILE and SMOKE sizes
config = P.config  # run configs of this notebook's parameters


# %%
MODELS = MODELS or [MODEL]
if SMOKE:
    MODELS = MODELS[:2]
results = [ex.run(config(seed, model=model), data_dir=DATA_DIR) for model in MODELS for seed in SEEDS]
runs = [r.record for r in results]  # typed run records (docs/CONTRACTS.md)
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
            {"run_id": r.run_id, "model": r.record.metrics.model, "methods": ex.flat_json(r.record)} for r in results
        ],
    },
)
