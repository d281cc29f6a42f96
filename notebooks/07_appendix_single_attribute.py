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
results = [ex.run(config(seed), data_dir=DATA_DIR) for seed in SEEDS]
runs = [r.record for r in results]  # typed run records (docs/CONTRACTS.md)
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
first = tb.seed_groups(runs)[0]  # the seeds of the first setting (runs differing only by seed)
fig = ff.method_bars(first, keys, f"Single-attribute SNSR and CFR ({len(first)} seed(s))", PROFILE)

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
                    r.record, keys=keys + ["snsv_gender", "snsv_age", "snsv_occupation", "valid@10"]
                ),
            }
            for r in results
        ],
    },
)
