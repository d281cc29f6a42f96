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
# # 05 Table 3: re-ranking 40 candidates
#
# docs/FACTER.md §1.2 step 5: each test row has 40 candidates (its relevance set minus history, at most 10,
# plus uniform negatives), and the model ranks them.  The random ranking is the floor to beat (about
# 0.24 NDCG@10 multi for this design); it is a row of the table.  Valid@10 is not a re-ranking metric
# (every output is a candidate), so that column is left out.  With `SIMULATED = True` the rows of the
# simulated recommender with known bias (docs/SIMULATED.md) follow, at the paper's n, labelled
# `simulated`: a ranker with real signal, to read the floor against.

# %% tags=["parameters"]
PROFILE = "default"  # default | paper | smoke (set by `facterlab reproduce`)
SMOKE = False  # True: tiny sizes, seconds per notebook
DATASET = "auto"  # auto | ml-1m | ml-100k | amazon | synthetic
MODEL = "smollm2-135m"  # registry name, local path, or "fake" (deterministic test model)
PROTOCOL = "rank"  # open | rank
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
from facterlab.reporting import tables as tb
from facterlab.reporting.results import write_metrics

P = notebook.parameters(globals(), smoke=notebook.FACTER_SMOKE)  # checks the parameters; PROFILE and SMOKE sizes
config, sim_config = P.config, P.sim_config  # run configs of this notebook's parameters


# %%
results = [ex.run(config(seed), data_dir=DATA_DIR) for seed in SEEDS]
sim_results = [ex.run(sim_config(seed), data_dir=DATA_DIR, progress=False) for seed in SEEDS] if SIMULATED else []
runs = [r.record for r in results + sim_results]  # typed run records (docs/CONTRACTS.md)
table = tb.method_table(
    runs,
    name="table3_reranking",
    title="Table 3: re-ranking 40 candidates",
    columns=tb.RANK_COLUMNS,
    row_by=("dataset", "model", "n_test"),
    profile=PROFILE,
    random_floor=True,
)
display(Markdown(table.to_markdown()))

# %%
table.save()
write_metrics(
    "05_table3_reranking",
    {
        **ex.provenance(results + sim_results, PROFILE, "05_table3_reranking"),
        "random_floor": [ex.flat_random_floor(r.record) for r in results + sim_results],
        "runs": [
            {"run_id": r.run_id, "model": r.record.metrics.model_name, "methods": ex.flat_json(r.record)}
            for r in results + sim_results
        ],
    },
)
