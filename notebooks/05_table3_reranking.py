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
PRESET = "repro"  # repro (alpha 0.10) | paper (alpha 0.20)
SEEDS = [0]
N_INTERACTIONS = 14  # rows, split 70/30 calibration/test; None: the REPRO size (ML-1M 2,500)
PASSES = 3  # FACTER passes T
CFR_ROWS = 1  # counterfactual rows per method (REPRO: 200)
MAX_NEW_TOKENS = 112  # REPRO: 250
BATCH_SIZE = 8
DEVICE = "auto"
SNSR_MIN_GROUP = 30  # groups with fewer rows are left out of SNSR (REPRO: 30)
RANKER = "likelihood"  # rank protocol only: likelihood (fast, CPU default) | generate (REPRO)
DATA_DIR = None  # None: $FACTERLAB_DATA
SIMULATED = True  # also run the simulated recommender with known bias beside the LLM (docs/SIMULATED.md)
SIM_N_INTERACTIONS = 2500  # its rows: the paper size (seconds of CPU, not hours)
SIM_BETA = 2.0  # its bias strength in score SDs (rules always honoured)

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
results = [ex.run(config(seed), data_dir=DATA_DIR) for seed in SEEDS]
sim_results = [ex.run(sim_config(seed), data_dir=DATA_DIR, progress=False) for seed in SEEDS] if SIMULATED else []
runs = [r.metrics for r in results + sim_results]
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
        "random_floor": [ex.flat_random_floor(r.metrics) for r in results + sim_results],
        "runs": [
            {"run_id": r.run_id, "model": r.metrics["model_name"], "methods": ex.flat_json(r.metrics)}
            for r in results + sim_results
        ],
    },
)
