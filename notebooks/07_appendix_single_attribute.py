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
# # 07 Appendix: single-attribute SNSR and CFR, Valid@k
#
# REPRO's appendix tables: SNSR/SNSV (`snsr_proxy`) computed for each protected attribute alone
# (gender, age, occupation: groups with >= 30 rows), CFR when only one attribute is flipped (the others
# fixed; flip strategy as stated under the table), and Valid@10.  SNSR needs at least two groups that
# reach the minimum size; when fewer do, the cell is "n/a" with the reason.

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

# %%
from IPython.display import Markdown, display

from facterlab.reporting import experiments as ex
from facterlab.reporting import facter_figures as ff
from facterlab.reporting import tables as tb
from facterlab.reporting.figures import save_figure
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
runs = [r.metrics for r in results]
cols = (
    [tb.Column(f"snsr_{a}", f"SNSR {a}") for a in ("gender", "age", "occupation")]
    + [tb.Column(f"cfr_{a}", f"CFR {a}") for a in ("gender", "age", "occupation")]
    + [tb.Column("valid@10", "Valid@10")]
)
table = tb.method_table(
    runs,
    name="appendix_single_attribute",
    title="Appendix: single-attribute SNSR and CFR",
    columns=cols,
    profile=PROFILE,
    published=(),
)
display(Markdown(table.to_markdown()))

# %%
keys = ["snsr_gender", "snsr_age", "snsr_occupation", "cfr_gender", "cfr_age", "cfr_occupation"]
fig = ff.method_bars(runs[0], keys, "Single-attribute SNSR and CFR (seed 0)", PROFILE)

# %%
table.save()
save_figure(fig, "appendix_single_attribute")
write_metrics(
    "07_appendix_single_attribute",
    {
        **ex.provenance(results, PROFILE, "07_appendix_single_attribute"),
        "runs": [
            {
                "run_id": r.run_id,
                "methods": ex.flat_json(
                    r.metrics, keys=keys + ["snsv_gender", "snsv_age", "snsv_occupation", "valid@10"]
                ),
            }
            for r in results
        ],
    },
)
