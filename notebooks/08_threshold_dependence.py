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
# # 08 Threshold dependence: the same runs against Q0, Q_t and Q*
#
# docs/FACTER.md §3: a violation count depends on the threshold it is counted against.  For the same
# outputs we count against the fixed Q0, the adaptive Q_t (the loop's own), the final Q* of the last
# pass, and the `repro_count` corrected threshold; and we compare the threshold rules `one_sided`
# (REPRO: Q only rises, on violations) and `aci` (Gibbs and Candes 2021: Q moves every step toward
# a long-run violation rate alpha).  Baselines are counted with the same calibration and Q0, like
# beside like.

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
THRESHOLD_RULES = ["one_sided", "aci"]

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
results = [
    ex.run(config(seed, facter__threshold_rule=rule), data_dir=DATA_DIR) for rule in THRESHOLD_RULES for seed in SEEDS
]
table = tb.method_table(
    [r.record for r in results],  # typed run records (docs/CONTRACTS.md)
    name="threshold_dependence",
    title="Violations against Q0, Q_t, Q* by threshold rule",
    columns=tb.THRESHOLD_COLUMNS,
    row_by=("threshold_rule",),
    profile=PROFILE,
    published=(),
)
display(Markdown(table.to_markdown()))
fig = ff.violations_by_pass(
    [r.record for r in results if r.record.metrics.variants["threshold_rule"] == "aci"]
    or [r.record for r in tb.seed_groups(results)[0]],
    "Violations by pass, ACI threshold rule",
    PROFILE,
)

# %%
table.save()
save_figure(fig, "threshold_dependence_aci")
write_metrics(
    "08_threshold_dependence",
    {
        **ex.provenance(results, PROFILE, "08_threshold_dependence"),
        "runs": [
            {
                "run_id": r.run_id,
                "threshold_rule": r.record.metrics.variants["threshold_rule"],
                "methods": ex.flat_json(
                    r.record,
                    keys=[
                        "violations_fixed_q0",
                        "violations_adaptive",
                        "violations_q_star",
                        "violations_corrected",
                        "q_final",
                    ],
                ),
            }
            for r in results
        ],
    },
)
