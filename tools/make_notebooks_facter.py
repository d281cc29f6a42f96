"""Generate the FACTER notebooks (00, 02-08) and the LLM Simpson notebook (20).

Run from the repository root: ``python tools/make_notebooks_facter.py``.  The notebooks hold only
parameters, glue and plotting; the logic lives in ``facterlab.reporting`` (experiments, tables,
facter_figures, llm_simpson) and below it.

All FACTER notebooks share the same default run parameters, so they build the same configs, hit the
same ``results/runs/<run_id>/`` and the whole ``facterlab reproduce`` computes each run once.
"""
from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from nbgen import code, md, params, write_notebook  # noqa: E402

NB = Path(__file__).resolve().parents[1] / "notebooks"

# Default-profile sizes (2 CPU cores, SmolLM2-135M): see the report / README for the timing budget.
# SmolLM2-135M on 2 CPU cores costs seconds per generated list (prefill of a ~400-token prompt
# dominates), so the default profile is a demonstration of the machinery, not REPRO's sizes: an
# open run is about n_calib + (T + 1) n_test + 13 CFR_ROWS generations, a rank run likewise in
# likelihood scorings.  The paper profile passes REPRO's sizes.
# Measured on the shared 2-core development machine: about 30 CPU-seconds per generated open list
# (a ~400-token prompt's prefill dominates), about twice that per likelihood-ranked row of 40
# candidates.  Hence tiny sizes: the open run is about 14 + 4 x 6 + 13 = 51 lists, the rank run
# about 10 + 4 x 4 + 13 = 39 rankings, the ACI run of notebook 08 about 25 more lists.
DEFAULTS = dict(N_INTERACTIONS=40, CFR_ROWS=3, MAX_NEW_TOKENS=112, PASSES=3, BATCH_SIZE=8, RANKER="likelihood")
RANK_ROWS = 14  # notebooks 05 and 20 (the same rank run): 9-10 calibration / 4-5 test rows
RANK_CFR_ROWS = 1  # likelihood ranking of 40 candidates costs ~10-40 CPU-s per row on 2 cores
SMOKE_LINE = (
    "if SMOKE:  # tiny sizes (never larger than passed): seconds per notebook with the fake model\n"
    "    N_INTERACTIONS = min(N_INTERACTIONS or 24, 24)\n"
    "    CFR_ROWS, PASSES, MAX_NEW_TOKENS = min(CFR_ROWS, 2), min(PASSES, 2), min(MAX_NEW_TOKENS, 32)\n"
    "    SNSR_MIN_GROUP, SEEDS = min(SNSR_MIN_GROUP, 3), SEEDS[:1]"
)


SIM_LINES = """SIMULATED = True             # also run the simulated recommender with known bias beside the LLM (docs/SIMULATED.md)
SIM_N_INTERACTIONS = 2500    # its rows: the paper size (seconds of CPU, not hours)
SIM_BETA = 2.0               # its bias strength in score SDs (rules always honoured)
"""


def base_params(extra: str = "", protocol: str = "open", seeds: str = "[0]", simulated: bool = False) -> str:
    d = dict(DEFAULTS, N_INTERACTIONS=RANK_ROWS, CFR_ROWS=RANK_CFR_ROWS) if protocol == "rank" else DEFAULTS
    ranker = d["RANKER"]
    return f'''PROFILE = "default"          # default | paper | smoke (set by `facterlab reproduce`)
SMOKE = False                # True: tiny sizes, seconds per notebook
DATASET = "auto"             # auto | ml-1m | ml-100k | amazon | synthetic
MODEL = "smollm2-135m"       # registry name, local path, or "fake" (deterministic test model)
PROTOCOL = "{protocol}"            # open | rank
PRESET = "repro"             # repro (alpha 0.10) | paper (alpha 0.20)
SEEDS = {seeds}
N_INTERACTIONS = {d["N_INTERACTIONS"]}          # rows, split 70/30 calibration/test; None: the REPRO size (ML-1M 2,500)
PASSES = {d["PASSES"]}                   # FACTER passes T
CFR_ROWS = {d["CFR_ROWS"]}                 # counterfactual rows per method (REPRO: 200)
MAX_NEW_TOKENS = {d["MAX_NEW_TOKENS"]}         # REPRO: 250
BATCH_SIZE = {d["BATCH_SIZE"]}
DEVICE = "auto"
SNSR_MIN_GROUP = 30          # groups with fewer rows are left out of SNSR (REPRO: 30)
RANKER = "{ranker}"        # rank protocol only: likelihood (fast, CPU default) | generate (REPRO)
DATA_DIR = None              # None: $FACTERLAB_DATA
{SIM_LINES if simulated else ""}{extra}'''.rstrip() + "\n"


IMPORTS = code('''
from IPython.display import Markdown, display

from facterlab.reporting import experiments as ex
from facterlab.reporting import facter_figures as ff
from facterlab.reporting import tables as tb
from facterlab.reporting.figures import save_figure
from facterlab.reporting.results import write_metrics

''' + SMOKE_LINE + '''


def config(seed, dataset=None, model=None, protocol=None, **kw):
    """This notebook's run config (same parameters -> same run id -> shared cached run)."""
    return ex.run_config(dataset=dataset or DATASET, model=model or MODEL, protocol=protocol or PROTOCOL,
                         preset_name=PRESET, seed=seed, n_rows=N_INTERACTIONS, passes=PASSES,
                         cfr_rows=CFR_ROWS, max_new_tokens=MAX_NEW_TOKENS, batch_size=BATCH_SIZE,
                         device=DEVICE, ranker=RANKER, metrics__snsr_min_group=SNSR_MIN_GROUP, **kw)


def sim_config(seed, dataset=None, protocol=None):
    """The simulated recommender's run beside the LLM's (docs/SIMULATED.md): same dataset, preset and
    passes, the paper's n and 200 CFR rows (tiny sizes and the torch-free encoder under SMOKE)."""
    return ex.run_config(dataset=dataset or DATASET, model="simulated", protocol=protocol or PROTOCOL,
                         preset_name=PRESET, seed=seed, n_rows=min(SIM_N_INTERACTIONS, 300) if SMOKE else SIM_N_INTERACTIONS,
                         passes=PASSES, cfr_rows=CFR_ROWS if SMOKE else 200,
                         encoder="hash-encoder" if SMOKE else "all-MiniLM-L6-v2", sim__beta=float(SIM_BETA),
                         metrics__snsr_min_group=SNSR_MIN_GROUP if SMOKE else 30)
''')


def nb00():
    return [
        md('''
# 00 Quickstart: one FACTER run, end to end

One small run of the whole pipeline (FACTER.md §1-§4): sample interaction rows, calibrate the
conformal threshold Q0 on the calibration rows (Neutral prompt), then run Neutral, Fair and FACTER
(T passes with the adaptive threshold and prompt repair) on the test rows, and compute NDCG@10,
Recall@10, Valid@10, SNSR, CFR and the violation counts.  On CPU with the bundled SmolLM2-135M this
takes a few minutes; the run is cached in `results/runs/<run_id>/`, and notebooks 02, 03, 06, 07
reuse it (same parameters, same run id).

SmolLM2-135M is a tiny model: its lists are weak, so expect low NDCG; the point here is the
machinery, not the numbers.  The `paper` profile runs the 7-8B backbones.
'''),
        params(base_params()),
        IMPORTS,
        code('''
cfg = config(SEEDS[0])
result = ex.run(cfg, data_dir=DATA_DIR)
m = result.metrics
print(f"run {result.run_id}: dataset {m['dataset']} (synthetic: {m['is_synthetic']}), model {m['model']}, "
      f"{m['n_calib']} calibration / {m['n_test']} test rows, Q0 = {m['calibration']['q0']}")
'''),
        code('''
table = tb.method_table([m], name="quickstart_methods", title="Quickstart: Neutral, Fair and FACTER",
                        profile=PROFILE)
display(Markdown(table.to_markdown()))
'''),
        code('''
fig = ff.method_bars(m, ["ndcg@10_multi", "recall@10_multi", "valid@10", "snsr_joint", "cfr_multi"],
                     "Quickstart: quality and fairness by method", PROFILE,
                     labels={"ndcg@10_multi": "NDCG@10", "recall@10_multi": "Recall@10", "valid@10": "Valid@10",
                             "snsr_joint": "SNSR", "cfr_multi": "CFR"})
'''),
        code('''
save_figure(fig, "quickstart_methods")
table.save()
write_metrics("00_quickstart", {
    **ex.provenance([result], PROFILE, "00_quickstart"),
    "n_calib": m["n_calib"], "n_test": m["n_test"], "calibration": m["calibration"],
    "methods": ex.flat_json(m),
})
'''),
    ]


def nb02():
    return [
        md('''
# 02 Calibration: scores, Q0, neighbours, d against Delta

FACTER.md §2.  For every calibration row the nonconformity score is
S = d + lambda * Delta, with d = 1 - cos(f(yhat), f(y)) (top-1 prediction against the target) and
Delta the largest embedding distance to the predictions of its counterfactual neighbours (rows with
cosine context similarity > tau_rho = 0.90 and a different protected tuple; 0 when none).  Q0 is the
k-th smallest score, k = ceil((1 - alpha)(n + 1)).

The figure shows the score distribution with Q0, how many counterfactual neighbours the rows have
(with few neighbours Delta is mostly 0 and S is mostly d), and d against Delta.
'''),
        params(base_params()),
        IMPORTS,
        code('''
result = ex.run(config(SEEDS[0]), data_dir=DATA_DIR)
m = result.metrics
cal = result.calibration
summary = ex.calibration_summary(cal, m)
display(Markdown(tb.frame_table(ex.summary_frame(summary), name="calibration_summary",
                                title="Calibration summary").to_markdown()))
'''),
        code('''
cols = ex.calibration_columns(cal)
fig = ff.calibration_panels(cal, m["calibration"]["q0"], "Calibration scores, neighbours, d vs Delta", m, PROFILE, **cols)
'''),
        code('''
save_figure(fig, "calibration_scores")
write_metrics("02_calibration", {**ex.provenance([result], PROFILE, "02_calibration"), "calibration": summary})
'''),
    ]


def nb03():
    return [
        md('''
# 03 Table 1: open generation (Neutral, Fair, FACTER)

REPRO's Table 1 (FACTER.md §6): per dataset, NDCG@10 and Recall@10 (multi = the next 10 positives,
single = the target), Valid@10, SNSR (`snsr_proxy`, joint groups with >= 30 rows), CFR (all three
attributes flipped) and the violation counts of the last pass against the fixed Q0, V(0), and the
adaptive threshold, V(t).  Cells are mean ± sd over seeds.  REPRO's published numbers (ML-1M,
Llama-3-8B) follow as rows labelled with their source; they are not the same setting unless the
`paper` profile ran.  "n/a [k]" cells give their reason in footnote k.

With `SIMULATED = True` the table also has the rows of the **simulated recommender** (model
`simulated`: PureSVD preferences plus a known demographic bias, docs/SIMULATED.md) at the paper's
n = 2,500, so that the table has rows with signal even where the LLM is the tiny bundled one.  Its
rows say `simulated` in the Model column; they are not LLM results.
'''),
        params(base_params('DATASETS = None              # datasets of the table; None: [DATASET] (paper profile: ml-1m, amazon)',
                           simulated=True)),
        IMPORTS,
        code('''
DATASETS = DATASETS or [DATASET]
results = [ex.run(config(seed, dataset=ds), data_dir=DATA_DIR) for ds in DATASETS for seed in SEEDS]
sim_results = [ex.run(sim_config(seed, dataset=ds), data_dir=DATA_DIR, progress=False)
               for ds in DATASETS for seed in SEEDS] if SIMULATED else []
runs = [r.metrics for r in results + sim_results]
table = tb.method_table(runs, name="table1_open_generation", title="Table 1: open generation",
                        columns=tb.OPEN_COLUMNS, row_by=("dataset", "model", "n_test"), profile=PROFILE)
display(Markdown(table.to_markdown()))
'''),
        code('''
fig = ff.method_bars(runs[0], ["ndcg@10_multi", "valid@10", "snsr_joint", "cfr_multi"],
                     "Table 1 (first dataset, seed 0)", PROFILE)
'''),
        code('''
table.save()
save_figure(fig, "table1_open_generation")
write_metrics("03_table1_open_generation", {
    **ex.provenance(results + sim_results, PROFILE, "03_table1_open_generation"),
    "runs": [{"run_id": r.run_id, "dataset": r.metrics["dataset"], "model": r.metrics["model_name"],
              "methods": ex.flat_json(r.metrics)} for r in results + sim_results],
})
'''),
    ]


def nb04():
    return [
        md('''
# 04 Table 2: backbones

REPRO's Table 2: the same open-generation protocol over several LLM backbones (REPRO: Llama-3-8B,
Llama-2-7B, Mistral-7B; the `paper` profile runs those on a GPU).  The default profile has only the
bundled SmolLM2-135M, so its run is the one of notebook 03 (shared from the cache).
'''),
        params(base_params('MODELS = None                # backbones; None: [MODEL] (paper profile: llama3-8b, llama2-7b, mistral-7b)')),
        IMPORTS,
        code('''
MODELS = MODELS or [MODEL]
if SMOKE:
    MODELS = MODELS[:2]
results = [ex.run(config(seed, model=model), data_dir=DATA_DIR) for model in MODELS for seed in SEEDS]
runs = [r.metrics for r in results]
table = tb.method_table(runs, name="table2_backbones", title="Table 2: backbones (open generation)",
                        columns=tb.OPEN_COLUMNS, row_by=("model", "dataset"), profile=PROFILE)
display(Markdown(table.to_markdown()))
'''),
        code('''
table.save()
write_metrics("04_table2_backbones", {
    **ex.provenance(results, PROFILE, "04_table2_backbones"),
    "runs": [{"run_id": r.run_id, "model": r.metrics["model"], "methods": ex.flat_json(r.metrics)} for r in results],
})
'''),
    ]


def nb05():
    return [
        md('''
# 05 Table 3: re-ranking 40 candidates

FACTER.md §1.2 step 5: each test row has 40 candidates (its relevance set minus history, at most 10,
plus uniform negatives), and the model ranks them.  The random ranking is the floor to beat (about
0.24 NDCG@10 multi for this design); it is a row of the table.  Valid@10 is not a re-ranking metric
(every output is a candidate), so that column is left out.  With `SIMULATED = True` the rows of the
simulated recommender with known bias (docs/SIMULATED.md) follow, at the paper's n, labelled
`simulated`: a ranker with real signal, to read the floor against.
'''),
        params(base_params(protocol="rank", simulated=True)),
        IMPORTS,
        code('''
results = [ex.run(config(seed), data_dir=DATA_DIR) for seed in SEEDS]
sim_results = [ex.run(sim_config(seed), data_dir=DATA_DIR, progress=False) for seed in SEEDS] if SIMULATED else []
runs = [r.metrics for r in results + sim_results]
table = tb.method_table(runs, name="table3_reranking", title="Table 3: re-ranking 40 candidates",
                        columns=tb.RANK_COLUMNS, row_by=("dataset", "model", "n_test"), profile=PROFILE,
                        random_floor=True)
display(Markdown(table.to_markdown()))
'''),
        code('''
table.save()
write_metrics("05_table3_reranking", {
    **ex.provenance(results + sim_results, PROFILE, "05_table3_reranking"),
    "random_floor": [ex.flat_random_floor(r.metrics) for r in results + sim_results],
    "runs": [{"run_id": r.run_id, "model": r.metrics["model_name"], "methods": ex.flat_json(r.metrics)}
             for r in results + sim_results],
})
'''),
    ]


def nb06():
    return [
        md('''
# 06 Figure 1: violations by pass

FACTER.md §3 and §6.  Per pass over the test rows: violations against the adaptive threshold Q_t
(V(t), what FACTER's loop sees), against the fixed Q0 (V(0)), and against the final threshold Q* of
the last pass; plus the threshold path Q0 -> Q1 -> ... (right axis).  With the one-sided update
Q only rises, so V(t) falls partly because the bar moves: compare V(0), which keeps the bar fixed.
The figure shows counts as shares of the test rows, so that runs of different sizes compare;
REPRO's ML-1M numbers (15.3, 10.3, 9.0 adaptive; 57.0, 59.7, 53.7 fixed, of 750 test rows;
Q 1.004 -> 1.494) are drawn as hollow markers for reference.  The table keeps the counts.

One column per source of answers: the LLM run, and (with `SIMULATED = True`) the simulated
recommender with known bias at the paper's n (docs/SIMULATED.md), so that the figure has a panel
with signal on a CPU.  Rates (top) and thresholds (bottom) have their own axes.
'''),
        params(base_params(simulated=True)),
        IMPORTS,
        code('''
from facterlab.reporting.published import published_value

results = [ex.run(config(seed), data_dir=DATA_DIR) for seed in SEEDS]
sim_results = [ex.run(sim_config(seed), data_dir=DATA_DIR, progress=False) for seed in SEEDS] if SIMULATED else []
runs = [r.metrics for r in results]
sim_runs = [r.metrics for r in sim_results]
table = tb.per_pass_table(runs + sim_runs, name="fig1_violations_by_pass", title="Figure 1: FACTER violations by pass",
                          profile=PROFILE)
display(Markdown(table.to_markdown()))
ref = {k: [published_value("REPRO", "ml-1m", "llama3-8b", "open", "facter", key, i) for i in range(n)]
       for k, key, n in (("adaptive", "violations_adaptive_pass", 3), ("fixed_q0", "violations_fixed_q0_pass", 3),
                         ("threshold_path", "threshold_path", 4))}
panels = [(f"LLM: {ex.model_label(MODEL)}", runs)]
if sim_runs:
    panels.append((f"simulated recommender, known bias (beta = {SIM_BETA:g}, rho = 1)", sim_runs))
fig = ff.figure1(panels, "Figure 1: FACTER violations by pass", PROFILE, published=ref)
'''),
        code('''
table.save()
save_figure(fig, "fig1_violations_by_pass")
write_metrics("06_fig1_violations_by_pass", {
    **ex.provenance(results + sim_results, PROFILE, "06_fig1_violations_by_pass"),
    "runs": [{"run_id": r.run_id, "model": r.metrics["model_name"], "violations": r.metrics["methods"]["facter"]["violations"],
              "threshold_path": r.metrics["methods"]["facter"]["threshold_path"],
              "baselines": {b: r.metrics["methods"][b]["violations"] for b in ("neutral", "fair")}}
             for r in results + sim_results],
})
'''),
    ]


def nb07():
    return [
        md('''
# 07 Appendix: single-attribute SNSR and CFR, Valid@k

REPRO's appendix tables: SNSR/SNSV (`snsr_proxy`) computed for each protected attribute alone
(gender, age, occupation: groups with >= 30 rows), CFR when only one attribute is flipped (the others
fixed; flip strategy as stated under the table), and Valid@10.  SNSR needs at least two groups that
reach the minimum size; when fewer do, the cell is "n/a" with the reason.
'''),
        params(base_params()),
        IMPORTS,
        code('''
results = [ex.run(config(seed), data_dir=DATA_DIR) for seed in SEEDS]
runs = [r.metrics for r in results]
cols = [tb.Column(f"snsr_{a}", f"SNSR {a}") for a in ("gender", "age", "occupation")] + \\
       [tb.Column(f"cfr_{a}", f"CFR {a}") for a in ("gender", "age", "occupation")] + [tb.Column("valid@10", "Valid@10")]
table = tb.method_table(runs, name="appendix_single_attribute", title="Appendix: single-attribute SNSR and CFR",
                        columns=cols, profile=PROFILE, published=())
display(Markdown(table.to_markdown()))
'''),
        code('''
keys = ["snsr_gender", "snsr_age", "snsr_occupation", "cfr_gender", "cfr_age", "cfr_occupation"]
fig = ff.method_bars(runs[0], keys, "Single-attribute SNSR and CFR (seed 0)", PROFILE)
'''),
        code('''
table.save()
save_figure(fig, "appendix_single_attribute")
write_metrics("07_appendix_single_attribute", {
    **ex.provenance(results, PROFILE, "07_appendix_single_attribute"),
    "runs": [{"run_id": r.run_id, "methods": ex.flat_json(r.metrics, keys=keys + ["snsv_gender", "snsv_age",
                                                                                "snsv_occupation", "valid@10"])}
             for r in results],
})
'''),
    ]


def nb08():
    return [
        md('''
# 08 Threshold dependence: the same runs against Q0, Q_t and Q*

FACTER.md §3: a violation count depends on the threshold it is counted against.  For the same
outputs we count against the fixed Q0, the adaptive Q_t (the loop's own), the final Q* of the last
pass, and the `repro_count` corrected threshold; and we compare the threshold rules `one_sided`
(REPRO: Q only rises, on violations) and `aci` (Gibbs and Candes 2021: Q moves every step toward
a long-run violation rate alpha).  Baselines are counted with the same calibration and Q0, like
beside like.
'''),
        params(base_params('THRESHOLD_RULES = ["one_sided", "aci"]')),
        IMPORTS,
        code('''
results = [ex.run(config(seed, facter__threshold_rule=rule), data_dir=DATA_DIR)
           for rule in THRESHOLD_RULES for seed in SEEDS]
runs = [r.metrics for r in results]
table = tb.method_table(runs, name="threshold_dependence", title="Violations against Q0, Q_t, Q* by threshold rule",
                        columns=tb.THRESHOLD_COLUMNS, row_by=("threshold_rule",), profile=PROFILE, published=())
display(Markdown(table.to_markdown()))
fig = ff.violations_by_pass([r.metrics for r in results if r.metrics["variants"]["threshold_rule"] == "aci"]
                            or runs, "Violations by pass, ACI threshold rule", PROFILE)
'''),
        code('''
table.save()
save_figure(fig, "threshold_dependence_aci")
write_metrics("08_threshold_dependence", {
    **ex.provenance(results, PROFILE, "08_threshold_dependence"),
    "runs": [{"run_id": r.run_id, "threshold_rule": r.metrics["variants"]["threshold_rule"],
              "methods": ex.flat_json(r.metrics, keys=["violations_fixed_q0", "violations_adaptive",
                                                       "violations_q_star", "violations_corrected", "q_final"])}
             for r in results],
})
'''),
    ]


SIM_PARAMS = """PROFILE = "default"          # default | paper | smoke (set by `facterlab reproduce`)
SMOKE = False                # True: tiny sizes and the torch-free hash encoder, seconds
DATASET = "auto"             # auto | ml-1m | ml-100k | amazon | synthetic
PROTOCOL = "open"            # open | rank
PRESET = "repro"             # repro (alpha 0.10) | paper (alpha 0.20)
ENCODER = "all-MiniLM-L6-v2" # the measurement apparatus (contexts, items); "hash-encoder": torch-free
SEEDS = [0, 1, 2]            # independent repetitions (rows and recommender noise)
N_INTERACTIONS = 2500        # the paper's n: 1,750 calibration / 750 test rows
PASSES = 3                   # FACTER passes T
CFR_ROWS = 200               # REPRO: 200
BETAS = [0.0, 2.0, 6.0]      # bias strengths (score SDs): none, mid, high
RHOS = [0.0, 0.5, 1.0]       # rule compliance: ignores, half, always listens
SIGMA = 0.5                  # score noise
H = 0.05                     # title-corruption rate (open generation)
PHI = 0.3                    # share of the bias the Fair prompt removes
DEMOTE = 1.0                 # score penalty of an honoured rule
ALPHAS = [0.05, 0.1, 0.2, 0.3]
LAMBDAS = [0.0, 0.35, 0.7, 1.4]
TAU_RHOS = [0.7, 0.8, 0.9]
DATA_DIR = None              # None: $FACTERLAB_DATA
"""


def nb09():
    return [
        md('''
# 09 FACTER against a recommender with known bias

The bundled LLM (SmolLM2-135M) does not recommend, so nothing in notebooks 00-08 can show whether
FACTER's conformal threshold and repair loop do what the paper claims.  Here the LLM is replaced by
the **simulated recommender** (`MODEL = "simulated"`, docs/SIMULATED.md): PureSVD preferences fitted
on the run's own training histories, a demographic bias of strength beta from a documented table
(e.g. Romance, Musical, Children's pushed to women), score noise sigma, rule compliance rho (the
probability that an `AVOID` line is honoured) and a title-corruption rate h.  For every answer the
simulator records whether the bias changed its top-1 item, so the truth is known.  Everything else
(calibration, neighbours, scores, the monitor, the metrics) is the same code as for an LLM, at the
paper's sizes (n = 2,500, T = 3, 3 seeds).

Each claim is printed as a checked statement with its measured number: **yes** when the measurement
supports it, **NO** when it does not.  A NO is a finding, not a bug to tune away.
'''),
        params(SIM_PARAMS),
        code('''
from IPython.display import Markdown, display

from facterlab.reporting import experiments as ex
from facterlab.reporting import ground_truth as gt
from facterlab.reporting import tables as tb
from facterlab.reporting.figures import save_figure
from facterlab.reporting.results import write_metrics

if SMOKE:  # tiny sizes, torch-free encoder
    N_INTERACTIONS, SEEDS, CFR_ROWS, PASSES = min(N_INTERACTIONS, 300), SEEDS[:1], min(CFR_ROWS, 20), min(PASSES, 2)
    BETAS, RHOS, ENCODER = [b for b in BETAS if b in (0.0, max(BETAS))], [r for r in RHOS if r in (0.0, 1.0)], "hash-encoder"
    LAMBDAS, TAU_RHOS = LAMBDAS[-2:], TAU_RHOS[-1:]


def config(seed, beta, rho, **kw):
    """A simulated run (same parameters -> same run id -> the saved run is reused)."""
    return ex.run_config(dataset=DATASET, model="simulated", protocol=PROTOCOL, preset_name=PRESET, seed=seed,
                         n_rows=N_INTERACTIONS, passes=PASSES, cfr_rows=CFR_ROWS, encoder=ENCODER,
                         sim__beta=float(beta), sim__rho=float(rho), sim__sigma=float(SIGMA), sim__h=float(H),
                         sim__phi=float(PHI), sim__demote=float(DEMOTE), **kw)


listening = {(seed, beta): ex.run(config(seed, beta, 1.0), data_dir=DATA_DIR, progress=False)
             for seed in SEEDS for beta in BETAS}
by_rho = {(beta, rho): ex.run(config(SEEDS[0], beta, rho), data_dir=DATA_DIR, progress=False)
          for beta in BETAS for rho in RHOS if rho != 1.0}
by_rho.update({(beta, 1.0): listening[(SEEDS[0], beta)] for beta in BETAS})
first = listening[(SEEDS[0], BETAS[0])].metrics
DATASET_NAME, SYNTHETIC = first["dataset"], bool(first["is_synthetic"])
print(f"{len(listening) + len(by_rho) - len(BETAS)} simulated runs on {DATASET_NAME} (synthetic: {SYNTHETIC}): "
      f"{first['n_calib']} calibration / {first['n_test']} test rows, encoder {ENCODER}, "
      f"share of calibration rows without a counterfactual neighbour {first['calibration']['share_no_neighbour']:.3f}")
checks = []
'''),
        md('''
## 1. Coverage: P(S > Q0) <= alpha on exchangeable rows

The Neutral method answers test rows under the calibration prompt, so its scores are exchangeable
with the calibration scores and the split-conformal guarantee applies: alpha - 1/(n+1) <= P(S > Q0)
<= alpha.  Q0 is recomputed for each alpha from the saved calibration scores; the rate is pooled over
seeds with its 99% Clopper-Pearson interval.  Shown without bias (beta = 0) and at the largest beta
(the guarantee does not depend on the bias: Q0 is calibrated on the biased model's own answers).
'''),
        code('''
cov0 = gt.coverage_table([listening[(s, BETAS[0])] for s in SEEDS], ALPHAS)
cov_hi = gt.coverage_table([listening[(s, BETAS[-1])] for s in SEEDS], ALPHAS)
checks += gt.coverage_checks(cov0, f" (beta={BETAS[0]:g})") + gt.coverage_checks(cov_hi, f" (beta={BETAS[-1]:g})")
display(Markdown(tb.frame_table(cov0.drop(columns="per_run_rates").round(4), name="ground_truth_coverage",
                                title=f"Coverage at beta = {BETAS[0]:g}").to_markdown()))
fig_cov = gt.plot_coverage(cov0, DATASET_NAME, SYNTHETIC, PROFILE, note=f", {len(SEEDS)} seed(s), beta = {BETAS[0]:g}")
'''),
        md('''
## 2. The repair loop: do violations fall when the recommender listens?

FACTER pass by pass, for each rule compliance rho and bias strength beta (seed 0): violations against
the fixed Q0 (solid; the bar does not move) and against the adaptive Q_t (dashed; the one-sided
update only raises the bar, so V(t) can fall without any repair), and the share of top-1 items that
the bias changed (bottom row; the truth).
'''),
        code('''
rep = gt.repair_table(list(by_rho.values()))
checks += gt.repair_checks(rep[rep["beta"] > 0])
display(Markdown(tb.frame_table(rep.round(4), name="ground_truth_repair", title="FACTER violations per pass").to_markdown()))
fig_rep = gt.plot_repair(rep, DATASET_NAME, SYNTHETIC, PROFILE)
'''),
        md('''
## 3. Fairness: CFR and SNSR of Neutral, Fair and FACTER against beta

CFR: the share of the top-10 list that changes when every protected attribute is flipped (200 test
rows); SNSR: the spread of list embeddings between demographic groups.  At beta = 0 the simulator's
answers do not depend on the demographics at all, so CFR is exactly 0 for Neutral and Fair; FACTER's
per-group rules can make it positive.
'''),
        code('''
fair = gt.fairness_table(list(listening.values()))
checks += gt.fairness_checks(fair)
summary = fair.groupby(["beta", "method"], sort=False)[["cfr_multi", "snsr_joint", "ndcg@10_multi",
                                                         "share_top1_biased"]].agg(["mean", "std"]).round(4)
display(summary)
fig_fair = gt.plot_fairness(fair, DATASET_NAME, SYNTHETIC, PROFILE)
'''),
        md('''
## 4. Beyond both papers: violations as a detector of biased outputs

Since the truth is known, we can ask how good "S > Q0" is at flagging the answers whose top-1 item
the bias changed: precision (flagged answers that were biased), recall (biased answers that were
flagged), and the base rate (share biased).  Scores are recomputed from the saved top-1 items for a
grid of lambda (weight of the counterfactual penalty) and tau_rho (neighbour similarity cut), on the
Neutral rows of seed 0 at the largest beta, and at the run's lambda and tau_rho for every beta.  Note
that Q0 is calibrated on the same biased model, so at most about alpha of the rows can be flagged:
recall is capped near alpha / base rate.
'''),
        code('''
import pandas as pd
from facterlab.data.protocol import load_or_build_interactions
from facterlab.facter.pipeline import build_encoder

top = listening[(SEEDS[0], BETAS[-1])]
cfg_top = config(SEEDS[0], BETAS[-1], 1.0)
inter = load_or_build_interactions(None, cfg_top.data, data_dir=DATA_DIR)
encoder = build_encoder(cfg_top)
det = gt.detector_table(top, encoder, inter.items, inter.calib, inter.test, LAMBDAS, TAU_RHOS)
det_beta = pd.concat([gt.detector_table(listening[(SEEDS[0], b)], encoder, inter.items, inter.calib, inter.test,
                                        [cfg_top.facter.lam], [cfg_top.facter.tau_rho]).assign(beta=b)
                      for b in BETAS if b > 0], ignore_index=True)
checks += gt.detector_checks(det_beta)
display(Markdown(tb.frame_table(det.round(4), name="ground_truth_detector",
                                title=f"Detector at beta = {BETAS[-1]:g}").to_markdown()))
fig_det = gt.plot_detector(det, det_beta, DATASET_NAME, SYNTHETIC, PROFILE)
'''),
        md('''
## The claims, checked
'''),
        code('''
table = gt.checks_frame(checks)
display(Markdown(table.to_markdown(index=False)))
print(f"{(table['holds'] == 'yes').sum()} of {len(table)} statements hold")
'''),
        code('''
for fig, name in ((fig_cov, "ground_truth_coverage"), (fig_rep, "ground_truth_repair"),
                  (fig_fair, "ground_truth_fairness"), (fig_det, "ground_truth_detector")):
    save_figure(fig, name)
write_metrics("09_facter_ground_truth", {
    "notebook": "09_facter_ground_truth", "profile": PROFILE, "dataset": DATASET_NAME, "is_synthetic": SYNTHETIC,
    "model": "simulated", "encoder": ENCODER, "protocol": PROTOCOL, "preset": PRESET,
    "run_ids": sorted({r.run_id for r in list(listening.values()) + list(by_rho.values())}), "seeds": SEEDS,
    "sim": {"betas": BETAS, "rhos": RHOS, "sigma": SIGMA, "h": H, "phi": PHI, "demote": DEMOTE},
    "coverage": gt.records_with_reasons(cov0), "coverage_high_beta": gt.records_with_reasons(cov_hi),
    "repair": gt.records_with_reasons(rep), "fairness": gt.records_with_reasons(fair),
    "detector": gt.records_with_reasons(det), "detector_by_beta": gt.records_with_reasons(det_beta),
    "checks": checks,
})
'''),
    ]


def nb20():
    return [
        md('''
# 20 Simpson's paradox in an LLM re-ranker

Prost et al. (2022) show that an exposure gap between two item groups can have one sign when
pooled over all (user, relevant item) pairs (AggregateGap) and the other when computed within each
user and averaged (PerUserGap).  Here we apply both views to the LLM re-ranking outputs of
notebook 05 (same run, from the cache): each test row ranks its 40 candidates; relevance = the
row's relevance set; item groups = **popular** (top 20% of items by rating count in the dataset)
vs **long tail**; exposure 1/log2(1 + position).  A positive gap means relevant popular items are
ranked higher than relevant long-tail ones.  We also compute the gaps within the users' demographic
groups, and the naive and IPS estimates from a random experiment that shows each row one random
candidate (SIMPSON.md §2).  The last cell says whether the two views disagree for this recommender.
Each interaction row counts as one user (a user with several rows counts once per row).
With `SIMULATED = True` the same analysis runs on the simulated recommender with known bias at the
paper's n (750 test rows; docs/SIMULATED.md), where the groups are large enough for the per-user and
the aggregate view to be compared; its table and figure are `simpson_sim_gaps`.  Group labels carry
their n.
'''),
        params(base_params('HEAD_SHARE = 0.2             # share of items that count as popular\n'
                           'EXPOSURE = "log"             # log: 1/log2(1+p) | position\n'
                           'SHOWN_SEED = 0               # seed of the random shown item per row',
                           protocol="rank", simulated=True)),
        IMPORTS,
        code('''
from facterlab.reporting import llm_simpson as ls

sources = [(f"LLM: {ex.model_label(MODEL)}", config(SEEDS[0]))]
if SIMULATED:
    sources.append((f"simulated recommender (beta = {SIM_BETA:g})", sim_config(SEEDS[0])))
results, frames, all_reports, verdicts = [], {}, {}, {}
for label, cfg in sources:
    result = ex.run(cfg, data_dir=DATA_DIR, progress=False)
    rows_by_method, item_group = ex.rank_rows_with_groups(result, cfg, head_share=HEAD_SHARE, data_dir=DATA_DIR)
    reports = {method: ls.llm_simpson_report(rows, item_group, exposure=EXPOSURE, seed=SHOWN_SEED)
               for method, rows in rows_by_method.items()}
    frame = ls.report_frame(reports)
    frame["users"] = [f"{u} (n={n})" for u, n in zip(frame["users"], frame["n_rows"])]
    results.append(result)
    frames[label], all_reports[label] = frame, reports
    verdicts[label] = {method: ls.verdict(rep) for method, rep in reports.items()}
    m = result.metrics
    display(Markdown(tb.frame_table(frame, name="simpson_llm_gaps", title=f"Exposure gaps (popular - long tail): {label}",
                                    notes=[f"profile {PROFILE}, dataset {m['dataset']}, model {m.get('model_name', m['model'])}, "
                                           f"{m['n_test']} test rows"]).to_markdown()))
'''),
        code('''
figs = {}
for (label, cfg), result in zip(sources, results):
    figs[label] = ff.gap_bars(frames[label], f"Per-user vs aggregate exposure gap: {label} "
                              f"({result.metrics['n_test']} test rows)", result.metrics, PROFILE)
    for method, text in verdicts[label].items():
        print(f"{label} / {method}: {text}")
'''),
        code('''
for (label, cfg), result in zip(sources, results):
    m = result.metrics
    name = "simpson_sim_gaps" if m.get("model_name") == "simulated" else "simpson_llm_gaps"
    tb.frame_table(frames[label], name=name, title=f"Exposure gaps (popular minus long tail), {label}",
                   notes=[f"Made by: dataset {m['dataset']}, model {m.get('model_name', m['model'])}, profile {PROFILE}, "
                          f"{m['n_test']} test rows; popular = top {HEAD_SHARE:.0%} of items by rating count; "
                          f"exposure {EXPOSURE}; n = rows per user group (one row counts as one user)."]).save()
    save_figure(figs[label], name)
write_metrics("20_simpson_in_llm_recommendations", {
    **ex.provenance(results, PROFILE, "20_simpson_in_llm_recommendations"),
    "head_share": HEAD_SHARE, "exposure": EXPOSURE,
    "sources": [{"label": label, "run_id": r.run_id, "model": r.metrics["model_name"], "n_test": r.metrics["n_test"],
                 "reports": all_reports[label], "verdicts": verdicts[label]} for (label, _), r in zip(sources, results)],
})
'''),
    ]


NOTEBOOKS = {
    "00_quickstart.ipynb": nb00,
    "02_calibration.ipynb": nb02,
    "03_table1_open_generation.ipynb": nb03,
    "04_table2_backbones.ipynb": nb04,
    "05_table3_reranking.ipynb": nb05,
    "06_fig1_violations_by_pass.ipynb": nb06,
    "07_appendix_single_attribute.ipynb": nb07,
    "08_threshold_dependence.ipynb": nb08,
    "09_facter_ground_truth.ipynb": nb09,
    "20_simpson_in_llm_recommendations.ipynb": nb20,
}


def main() -> None:
    for name, make in NOTEBOOKS.items():
        path = write_notebook(NB / name, make())
        print(f"wrote {path}")


if __name__ == "__main__":
    main()
