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
# # 20 Simpson's paradox in an LLM re-ranker
#
# Prost et al. (2022) show that an exposure gap between two item groups can have one sign when
# pooled over all (user, relevant item) pairs (AggregateGap) and the other when computed within each
# user and averaged (PerUserGap).  Here we apply both views to the LLM re-ranking outputs of
# notebook 05 (same run, from the cache): each test row ranks its 40 candidates; relevance = the
# row's relevance set; item groups = **popular** (top 20% of items by rating count in the dataset)
# vs **long tail**; exposure 1/log2(1 + position).  A positive gap means relevant popular items are
# ranked higher than relevant long-tail ones.  We also compute the gaps within the users' demographic
# groups, and the naive and IPS estimates from a random experiment that shows each row one random
# candidate (docs/SIMPSON.md §2).  The last cell says whether the two views disagree for this recommender.
# Each interaction row counts as one user (a user with several rows counts once per row).
# With `SIMULATED = True` the same analysis runs on the simulated recommender with known bias at the
# paper's n (750 test rows; docs/SIMULATED.md), where the groups are large enough for the per-user and
# the aggregate view to be compared; its table and figure are `simpson_sim_gaps`.  Group labels carry
# their n.

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
HEAD_SHARE = 0.2  # share of items that count as popular
EXPOSURE = "log"  # log: 1/log2(1+p) | position
SHOWN_SEED = 0  # seed of the random shown item per row

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
from facterlab.reporting import llm_simpson as ls

sources = [(f"LLM: {ex.model_label(MODEL)}", config(SEEDS[0]))]
if SIMULATED:
    sources.append((f"simulated recommender (beta = {SIM_BETA:g})", sim_config(SEEDS[0])))
results, frames, all_reports, verdicts, plot_frames, intervals = [], {}, {}, {}, {}, {}
for label, cfg in sources:
    result = ex.run(cfg, data_dir=DATA_DIR, progress=False)
    rows_by_method, item_group = ex.rank_rows_with_groups(result, cfg, head_share=HEAD_SHARE, data_dir=DATA_DIR)
    reports = {
        method: ls.llm_simpson_report(rows, item_group, exposure=EXPOSURE, seed=SHOWN_SEED)
        for method, rows in rows_by_method.items()
    }
    frame = ls.report_frame(reports)
    plot_frames[label] = frame.copy()  # the figure writes each group's n itself
    intervals[label] = ls.gap_intervals(rows_by_method, item_group, exposure=EXPOSURE, seed=SHOWN_SEED)
    frame["users"] = [f"{u} (n={n})" for u, n in zip(frame["users"], frame["n_rows"])]
    results.append(result)
    frames[label], all_reports[label] = frame, reports
    verdicts[label] = {method: ls.verdict(rep) for method, rep in reports.items()}
    m = result.record.metrics  # the typed run record (docs/CONTRACTS.md)
    display(
        Markdown(
            tb.frame_table(
                frame,
                name="simpson_llm_gaps",
                title=f"Exposure gaps (popular - long tail): {label}",
                notes=[f"profile {PROFILE}, dataset {m.dataset}, model {m.field_value('model')}, {m.n_test} test rows"],
                runs=[result],
            ).to_markdown()
        )
    )

# %%
figs = {}
for (label, _cfg), result in zip(sources, results):
    figs[label] = ff.gap_bars(
        plot_frames[label],
        f"Per-user vs aggregate exposure gap: {label} ({result.record.metrics.n_test} test rows)",
        result.record,  # the run record: the figure names its run id and code version
        PROFILE,
        intervals=intervals[label],
    )
    for method, text in verdicts[label].items():
        print(f"{label} / {method}: {text}")

# %%
for (label, _cfg), result in zip(sources, results):
    m = result.record.metrics
    name = "simpson_sim_gaps" if m.model_name == "simulated" else "simpson_llm_gaps"
    tb.frame_table(
        frames[label],
        name=name,
        title=f"Exposure gaps (popular minus long tail), {label}",
        notes=[
            f"Made by: dataset {m.dataset}, model {m.field_value('model')}, profile {PROFILE}, "
            f"{m.n_test} test rows; popular = top {HEAD_SHARE:.0%} of items by rating count; "
            f"exposure {EXPOSURE}; n = rows per user group (one row counts as one user)."
        ],
        runs=[result],
    ).save()
    save_figure(figs[label], name)
write_metrics(
    "20_simpson_in_llm_recommendations",
    {
        **ex.provenance(results, PROFILE, "20_simpson_in_llm_recommendations"),
        "head_share": HEAD_SHARE,
        "exposure": EXPOSURE,
        "sources": [
            {
                "label": label,
                "run_id": r.run_id,
                "model": r.record.metrics.model_name,
                "n_test": r.record.metrics.n_test,
                "reports": all_reports[label],
                "verdicts": verdicts[label],
            }
            for (label, _), r in zip(sources, results)
        ],
    },
)
