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
# # 00 Quickstart: FACTER end to end, first where the truth is known, then on a real LLM
#
# The whole pipeline (docs/FACTER.md §1-§4) twice: sample interaction rows, calibrate the conformal
# threshold Q0 on the calibration rows (Neutral prompt), run Neutral, Fair and FACTER (T passes with the
# adaptive threshold and prompt repair) on the test rows, and compute NDCG@10, Recall@10, Valid@10,
# SNSR, CFR and the violation counts.
#
# 1. **The simulated recommender** (docs/SIMULATED.md): PureSVD preferences fitted on the run's own
#    histories, plus a demographic bias of known strength (beta = 2 score SDs pushing the genres of a
#    documented table).  Its answers record what the bias did, so every number can be read against the
#    truth.  It measures with the torch-free hash encoder (hashed character n-grams for the neighbour
#    search and the title matching: cruder than MiniLM, and seconds instead of a minute), so the first
#    figure comes within seconds: 16.7 s wall cold for its run on ML-100K at load 3.5 on the 2-core
#    machine, against 80.7 s with MiniLM at 1,000 rows (`SIM_ENCODER = "all-MiniLM-L6-v2"`, which the
#    `paper` profile sets; 2026-12-04, docs/BENCHMARKS.md).
# 2. **The bundled LLM** (SmolLM2-135M on CPU): the same pipeline on a real model, at the smallest size
#    the method allows (14 rows, 10 calibration / 4 test; 1 CFR row): 139 s wall cold on the 2-core
#    machine, 26 s of it loading the model (`make reproduce` with no data, 2026-12-04; part 1 took 8 s).
#    It is too small to recommend well (its lists barely map to catalogue items), so read part 2 as the
#    machinery running on an LLM; the `paper` profile runs the 7-8B backbones.  `LLM = False` skips it.
#
# Each part prints its numbers and how long it took here, and part 1 saves its figure and table before
# part 2 starts.  Both runs are cached in `results/runs/<run_id>/` (same parameters, same run id): a
# rerun reads them back.
#
# **Reading CFR.**  CFR is the distance between two unit vectors (the mean embedding of a row's top-k
# answer and of the answer with its demographics flipped), averaged over the CFR rows: it runs from 0 (the
# same answer) to 2, not 0 to 1 like the other bars.  Above 1 the two answers' embeddings are more than 60
# degrees apart (cosine below 0.5): flipping the demographics changed most of the list.  SmolLM2's CFR in
# part 2 can be above 1: with a model whose lists barely map to the catalogue, that is mostly noise (any
# change of the prompt changes its list), not a measured bias.
#
# **When FACTER's fairness term is zero.**  FACTER's score adds to the prediction error d a penalty Delta
# measured against *counterfactual neighbours*: calibration rows with a similar history and other
# demographics (docs/FACTER.md §2).  With only 10 calibration rows (part 2) no row has one ("no
# neighbour for 100% of calibration rows" in its table), so Delta = 0, the score is the prediction error
# alone, and FACTER there is an accuracy monitor: its repairs react to errors, not to unfairness.  Part 1's
# 1,750 calibration rows give the share printed below it.

# %% tags=["parameters"]
PROFILE = "default"  # default | paper | smoke (set by `facterlab reproduce`)
SMOKE = False  # True: tiny sizes, seconds per notebook
DATASET = "auto"  # auto | ml-1m | ml-100k | amazon | synthetic
MODEL = "smollm2-135m"  # part 2: registry name, local path, or "fake" (deterministic test model)
PROTOCOL = "open"  # open | rank
PRESET = "repro"  # repro (alpha 0.10) | icml (alpha 0.20) | facterlab
SEEDS = [0]
SIM_N_INTERACTIONS = 2500  # part 1: rows of the simulated run (70/30 calibration/test)
SIM_BETA = 2.0  # part 1: bias strength in score SDs
SIM_ENCODER = (
    "hash-encoder"  # part 1: the text encoder (measurement apparatus): torch-free; "all-MiniLM-L6-v2": the paper's
)
LLM = True  # part 2: run the bundled LLM
N_INTERACTIONS = 14  # part 2: rows of the LLM run; None: the REPRO size (ML-1M 2,500)
PASSES = 3  # FACTER passes T
CFR_ROWS = 1  # part 2: counterfactual rows per method (REPRO: 200; part 1 uses 200)
MAX_NEW_TOKENS = 112  # REPRO: 250
BATCH_SIZE = 16  # prompts per LLM batch (16: fastest on 2 CPU cores, docs/CPU_DECODING.md)
FAST_DECODING = True  # oneDNN GEMMs on CPU, stop at the parsed answer (named switches; docs/CPU_DECODING.md)
DEVICE = "auto"
SNSR_MIN_GROUP = 30  # groups with fewer rows are left out of SNSR (REPRO: 30)
RANKER = "likelihood"  # rank protocol only: likelihood (fast, CPU default) | generate (REPRO)
DATA_DIR = None  # None: $FACTERLAB_DATA

# %%
import time

from IPython.display import Markdown, display

from facterlab import notebook
from facterlab.reporting import experiments as ex
from facterlab.reporting import facter_figures as ff
from facterlab.reporting import ground_truth as gt
from facterlab.reporting import tables as tb
from facterlab.reporting.figures import save_figure
from facterlab.reporting.results import write_metrics
from facterlab.style import add_caption

P = notebook.parameters(  # checks the parameters; PROFILE and SMOKE sizes
    globals(), smoke={**notebook.FACTER_SMOKE, "SIM_N_INTERACTIONS": 300, "SIM_ENCODER": "hash-encoder"}
)
config = P.config  # run configs of this notebook's parameters
METRICS = ["ndcg@10_multi", "recall@10_multi", "valid@10", "snsr_joint", "cfr_multi"]
LABELS = {"cfr_multi": "CFR (0-2)"}  # its range is not the others' 0-1


def reading_note(fig, metrics):
    """Add to a figure's caption what CFR's range means and whether FACTER's fairness term acted."""
    c = metrics.calibration
    share = c.share_no_neighbour if isinstance(c.share_no_neighbour, (int, float)) else None
    acts = (
        "no calibration row has a counterfactual neighbour, so FACTER's Delta = 0 and its score is the error d alone"
        if share == 1.0
        else "FACTER's Delta acts only on rows that have a counterfactual neighbour"
    )
    add_caption(
        fig,
        f"{fig._facterlab_caption} CFR runs from 0 (the same answer with flipped demographics) to 2; above 1 the "
        f"flipped answers' embeddings are more than 60 degrees apart; {ff.no_neighbour_text([metrics])}: {acts}.",
    )
    return fig


def print_numbers(part, metrics, extra=None):
    """The run's headline numbers as text (what `facterlab reproduce` shows of this notebook)."""
    flat = ex.flat_json(metrics, keys=METRICS)
    for method, vals in flat.items():
        cells = [f"{k} {v:.4f}" if isinstance(v, (int, float)) else f"{k} n/a" for k, v in vals.items()]
        more = f", {extra[method]}" if extra and method in extra else ""
        print(f"{part}: {method:<8} " + ", ".join(cells) + more)
    print(f"{part}: Q0 = {metrics.calibration.q0:.4f}; {ff.no_neighbour_text([metrics])}")


# %% [markdown]
# ## 1. The simulated recommender: a bias we planted
#
# Neutral sees the bias at full strength, Fair's prompt removes a share of it (phi = 0.3), FACTER adds
# the rules it mines from its violations.  The last columns are the truth: the share of test rows whose
# top-1 item the bias changed (against the same prompt without the push), per method.

# %%
t0 = time.perf_counter()
sim_cfg = ex.run_config(
    dataset=DATASET,
    model="simulated",
    protocol=PROTOCOL,
    preset_name=PRESET,
    seed=SEEDS[0],
    n_rows=SIM_N_INTERACTIONS,
    passes=PASSES,
    cfr_rows=200 if not SMOKE else CFR_ROWS,
    encoder=SIM_ENCODER,
    sim__beta=float(SIM_BETA),
)
sim = ex.run(sim_cfg, data_dir=DATA_DIR, progress=False)
sm = sim.record.metrics
truth = gt.fairness_table([sim])[["method", "share_top1_biased", "cfr_multi", "ndcg@10_multi"]]
sim_seconds = time.perf_counter() - t0
print(
    f"part 1: run {sim.run_id} on {sm.dataset} (synthetic: {sm.is_synthetic}), {sm.n_calib} calibration / "
    f"{sm.n_test} test rows, beta = {SIM_BETA:g}: {sim_seconds:.0f} s here"
)
sim_table = tb.method_table(
    [sim], name="quickstart_simulated", title="Quickstart part 1: the simulated recommender", profile=PROFILE
)
display(Markdown(sim_table.to_markdown()))
display(truth.round(4))
print_numbers(
    "part 1",
    sm,
    {r.method: f"share of top-1 items the bias changed {r.share_top1_biased:.4f}" for r in truth.itertuples()},
)
fig_sim = reading_note(
    ff.method_bars(sim, METRICS, "Quickstart part 1: simulated recommender with known bias", PROFILE, LABELS), sm
)
# part 1's figure and table are saved now, before the LLM part starts
save_figure(fig_sim, "quickstart_simulated", runs=[sim])
sim_table.save()

# %% [markdown]
# ## 2. The bundled LLM
#
# The same pipeline on SmolLM2-135M (`MODEL`), at the smallest size the method allows: 14 rows, 10
# calibration / 4 test (at alpha = 0.10 the conformal quantile needs at least 9 calibration scores), one
# CFR row per method.  Notebooks 02-04 and 06-08 run this same configuration, so they read this run back
# instead of computing their own; the `paper` profile runs REPRO's sizes with the 7-8B backbones.

# %%
result = None
if LLM:
    t0 = time.perf_counter()
    result = ex.run(config(SEEDS[0]), data_dir=DATA_DIR)
    m = result.record.metrics  # the typed run record (docs/CONTRACTS.md)
    print(
        f"part 2: run {result.run_id}: dataset {m.dataset} (synthetic: {m.is_synthetic}), model {m.model}, "
        f"{m.n_calib} calibration / {m.n_test} test rows, Q0 = {m.calibration.q0}: "
        f"{time.perf_counter() - t0:.0f} s here"
    )
    table = tb.method_table(
        [result], name="quickstart_methods", title="Quickstart: Neutral, Fair and FACTER", profile=PROFILE
    )
    display(Markdown(table.to_markdown()))
    print_numbers("part 2", m)
    fig = reading_note(
        ff.method_bars(result, METRICS, "Quickstart part 2: quality and fairness by method", PROFILE, LABELS), m
    )

# %%
if result is not None:
    save_figure(fig, "quickstart_methods")
    table.save()
write_metrics(
    "00_quickstart",
    {
        # the top level describes the LLM run (part 2; part 1 when LLM is off), "simulated" part 1
        **ex.provenance([result if result is not None else sim], PROFILE, "00_quickstart"),
        "simulated": {
            **ex.provenance([sim], PROFILE, "00_quickstart"),
            "run_id": sim.run_id,
            "n_calib": sm.n_calib,
            "n_test": sm.n_test,
            "calibration": sm.calibration,
            "methods": ex.flat_json(sm),
            "truth": gt.records_with_reasons(truth),
        },
        **(
            {
                "n_calib": m.n_calib,
                "n_test": m.n_test,
                "calibration": m.calibration,
                "methods": ex.flat_json(m),
            }
            if result is not None
            else {}
        ),
    },
)
