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
# # 09 FACTER against a recommender with known bias
#
# The bundled LLM (SmolLM2-135M) does not recommend, so nothing in notebooks 00-08 can show whether
# FACTER's conformal threshold and repair loop do what the paper claims.  Here the LLM is replaced by
# the **simulated recommender** (`MODEL = "simulated"`, docs/SIMULATED.md): PureSVD preferences fitted
# on the run's own training histories, a demographic bias of strength beta from a documented table
# (e.g. Romance, Musical, Children's pushed to women), score noise sigma, rule compliance rho (the
# probability that an `AVOID` line is honoured) and a title-corruption rate h.  For every answer the
# simulator records whether the bias changed its top-1 item, so the truth is known.  Everything else
# (calibration, neighbours, scores, the monitor, the metrics) is the same code as for an LLM, at the
# paper's sizes (n = 2,500, T = 3, 3 seeds).
#
# Sections 1-4 check the faithful FACTER (REPRO's neighbour Delta, conformal Q0, counted rules).
# Section 5 explains *why* its score does not see the bias, with a positive control where it does, and
# section 6 puts facterlab's **twin monitor** beside it (a facterlab extension, not FACTER's or REPRO's,
# docs/FACTER.md §7): each row is asked again with its protected attributes flipped (same history and
# seed), Delta is the distance between the two answers, and the flag is anchored at the null
# "demographics change nothing" (the quantile of placebo re-asks).  Section 7 puts that monitor in front
# of recommenders that **read the prompt text** (the simulator of sections 1-6 takes the demographics
# from the request's fields, so no rewording of the prompt can move it and the null cannot fail there):
# unbiased models moved by the prompt's surface, biased ones, and sampling.
#
# Every claim is checked under one standard (facterlab.reporting.claims): its criterion, the test
# behind the verdict (99% Clopper-Pearson intervals, one-sided 1% z- and t-tests) and the smallest
# effect that test could detect at this sample size, with the verdict **holds**, **fails** or **too
# small to tell**.  A "fails" is a finding, not a bug to tune away.

# %% tags=["parameters"]
PROFILE = "default"  # default | paper | smoke (set by `facterlab reproduce`)
SMOKE = False  # True: tiny sizes and the torch-free hash encoder, seconds
DATASET = "auto"  # auto | ml-1m | ml-100k | amazon | synthetic
PROTOCOL = "open"  # open | rank
PRESET = "repro"  # repro (alpha 0.10) | icml (alpha 0.20) | facterlab
ENCODER = "all-MiniLM-L6-v2"  # the measurement apparatus (contexts, items); "hash-encoder": torch-free
SEEDS = [0, 1, 2]  # independent repetitions (rows and recommender noise)
N_INTERACTIONS = 2500  # the paper's n: 1,750 calibration / 750 test rows; None: the dataset's REPRO size
PASSES = 3  # FACTER passes T
CFR_ROWS = 200  # REPRO: 200
BETAS = [0.0, 2.0, 6.0]  # bias strengths (score SDs): none, mid, high
RHOS = [0.0, 1.0]  # rule compliance: ignores, always listens
SIGMA = 0.5  # score noise
H = 0.05  # title-corruption rate (open generation)
PHI = 0.3  # share of the bias the Fair prompt removes
DEMOTE = 1.0  # score penalty of an honoured rule (after it cancels the push: sim.compliance "relative")
TWIN = True  # section 6: facterlab's twin monitor (twin Delta, null threshold) beside the faithful one
TESTBED = True  # section 7: the twin monitor against recommenders that read the prompt text
TESTBED_CASES = ["all"]  # section 7 cases (docs/SIMULATED.md): all of twin_acceptance.CASES, or a list of them
TESTBED_N = 1500  # rows per testbed run (1,050 calibration / 450 test)
TESTBED_VARIANTS = ["family", "absolute", "count", "order"]  # monitor variants (twin_acceptance.VARIANTS)
# section 9: the all-attributes twin and the attribution candidate (twin_acceptance.ATTRIBUTION_CHOICES; the
# command's default adds attributed and attributed-all, whose numbers docs/FACTER.md §7.3 gives)
ATTRIBUTION_VARIANTS = ["family", "attributed-all-list"]
POWER_TEMPERATURES = [1.0]  # sampling noise of the power study (score SDs; the target is at 1.0, add 0.5 to compare)
POWER_DRAWS = [1, 2, 4]  # draws per request k of the power study
POWER_STATISTICS = ["top1", "list"]  # the twin Delta's statistic (facter.twin_distance) of the power study
POWER_SEEDS = 3  # the power study's seeds: the first POWER_SEEDS of SEEDS
POWER_N = 1000  # rows per power-study run
NEGATIVE_CONTROL = ""  # an LLM name, e.g. smollm2-135m: add its negative control (the twin rewords the values)
NEGATIVE_CONTROL_STAGES = [150, 400]  # calibration rows per look of the negative control (cross-fitted, sequential)
ALPHAS = [0.05, 0.1, 0.2, 0.3]
LAMBDAS = [0.0, 0.35, 0.7, 1.4]
TAU_RHOS = [0.7, 0.8, 0.9]
DATA_DIR = None  # None: $FACTERLAB_DATA

# %%
from IPython.display import Markdown, display

from facterlab import notebook
from facterlab.reporting import experiments as ex
from facterlab.reporting import ground_truth as gt
from facterlab.reporting import ground_truth_figures as gtf
from facterlab.reporting import tables as tb
from facterlab.reporting.batch import run_many
from facterlab.reporting.claims import summary_line
from facterlab.reporting.figures import save_figure
from facterlab.reporting.results import write_metrics

P = notebook.parameters(  # checks the parameters; PROFILE, and under SMOKE these sizes unless passed
    globals(),
    smoke={  # tiny sizes, torch-free encoder
        "N_INTERACTIONS": 300,
        "SEEDS": lambda seeds: seeds[:1],
        "CFR_ROWS": 20,
        "PASSES": 2,
        "BETAS": lambda betas: [b for b in betas if b in (0.0, max(betas))],
        "RHOS": lambda rhos: [r for r in rhos if r in (0.0, 1.0)],
        "ENCODER": "hash-encoder",
        "LAMBDAS": lambda lambdas: lambdas[-2:],
        "TAU_RHOS": lambda taus: taus[-1:],
        "TESTBED_CASES": lambda cases: ["lines-set", "default-table"] if cases == ["all"] else cases[:2],
        "TESTBED_N": 300,
        "TESTBED_VARIANTS": lambda variants: variants[:1],
        "POWER_N": 300,
        "POWER_TEMPERATURES": lambda temps: temps[-1:],
        "POWER_DRAWS": lambda draws: draws[:1],
        "POWER_SEEDS": 1,
    },
)
import pandas as pd


def config(seed, beta, rho, twin=False, **kw):
    """A simulated run (same parameters -> same run id -> the saved run is reused)."""
    return ex.run_config(
        dataset=DATASET,
        model="simulated",
        protocol=PROTOCOL,
        preset_name=PRESET,
        seed=seed,
        n_rows=N_INTERACTIONS,
        passes=PASSES,
        cfr_rows=CFR_ROWS,
        encoder=ENCODER,
        sim__beta=float(beta),
        sim__rho=float(rho),
        sim__sigma=float(SIGMA),
        sim__h=float(H),
        sim__phi=float(PHI),
        sim__demote=float(DEMOTE),
        **({"facter__delta": "twin", "facter__threshold": "null"} if twin else {}),
        **kw,
    )


def faithful_configs():
    """Sections 1-4: the faithful FACTER runs, per seed and beta (rho = 1), and per rho on the first seed."""
    return {("listening", seed, beta): config(seed, beta, 1.0) for seed in SEEDS for beta in BETAS} | {
        ("by_rho", beta, rho): config(SEEDS[0], beta, rho) for beta in BETAS for rho in RHOS if rho != 1.0
    }


def control_config():
    """Section 5's positive control: the bias pushes genres users rarely watch."""
    return config(SEEDS[0], BETAS[-1], 1.0, sim__bias_table="rare")


MID = [b for b in BETAS if b > 0][0]  # the mid bias of section 6's panel


def twin_configs():
    """Section 6: the twin monitor's runs, and the panel {faithful, twin} x {absolute, relative} x rho."""
    if not TWIN:
        return {}
    return (
        {("twin", seed, beta, 1.0): config(seed, beta, 1.0, twin=True) for seed in SEEDS for beta in BETAS}
        | {("twin", seed, MID, 0.0): config(seed, MID, 0.0, twin=True) for seed in SEEDS}
        | {("contrast",): config(SEEDS[0], MID, 1.0, twin=True, facter__rule_mining="contrast")}
        | {
            ("soft", twin, rho): config(SEEDS[0], MID, rho, twin=twin, sim__compliance="absolute")
            for twin in (False, True)
            for rho in RHOS
        }
    )


def testbed_base():
    """The testbed's sizes and settings (sections 7 and 9; `twin_acceptance.case_config`'s keywords)."""
    return dict(
        dataset=DATASET,
        protocol=PROTOCOL,
        preset_name=PRESET,
        n_rows=TESTBED_N,
        passes=PASSES,
        cfr_rows=CFR_ROWS,
        encoder=ENCODER,
    )


def testbed_configs():
    """Section 7: the text testbed's runs (as `python -m facterlab.reporting.twin_acceptance`) and the power study's."""
    from facterlab.reporting import twin_acceptance as ta

    if not TESTBED:
        return {}
    base = testbed_base()
    cases = list(ta.CASES) if TESTBED_CASES == ["all"] else TESTBED_CASES
    power_cfgs = ta.power_configs(
        POWER_STATISTICS, POWER_TEMPERATURES, POWER_DRAWS, SEEDS[:POWER_SEEDS], **{**base, "n_rows": POWER_N}
    )
    return {("testbed", *key): ta.case_config(*key, **base) for key in ta.plan(cases, SEEDS, TESTBED_VARIANTS)} | {
        ("power", *key): cfg for key, cfg in power_cfgs.items()
    }


# every simulated run of the notebook at once, in worker processes, one per CPU core (docs/SCALING.md;
# FACTERLAB_WORKERS): one pool, the first run of each row sample first (it encodes the sample's contexts),
# then all the others, so no core waits at the end of a section; the sections below read them back
ALL_RUNS = faithful_configs() | {("control",): control_config()} | twin_configs() | testbed_configs()
run_many(ALL_RUNS, data_dir=DATA_DIR, load=False)
runs = run_many(faithful_configs(), data_dir=DATA_DIR)
listening = {(seed, beta): r for (kind, seed, beta), r in runs.items() if kind == "listening"}
by_rho = {(beta, rho): r for (kind, beta, rho), r in runs.items() if kind == "by_rho"}
by_rho.update({(beta, 1.0): listening[(SEEDS[0], beta)] for beta in BETAS})
first = listening[(SEEDS[0], BETAS[0])].record.metrics  # the typed run record (docs/CONTRACTS.md)
DATASET_NAME, SYNTHETIC = first.dataset, bool(first.is_synthetic)
print(
    f"{len(listening) + len(by_rho) - len(BETAS)} simulated runs on {DATASET_NAME} (synthetic: {SYNTHETIC}): "
    f"{first.n_calib} calibration / {first.n_test} test rows, encoder {ENCODER}, "
    f"share of calibration rows without a counterfactual neighbour {first.calibration.share_no_neighbour:.3f}"
)
checks = []

# %% [markdown]
# ## 1. Coverage: P(S > Q0) <= alpha on exchangeable rows
#
# The Neutral method answers test rows under the calibration prompt, so its scores are exchangeable
# with the calibration scores and the split-conformal guarantee applies: alpha - 1/(n+1) <= P(S > Q0)
# <= alpha.  Q0 is recomputed for each alpha from the saved calibration scores; the rate is pooled over
# seeds with its 99% Clopper-Pearson interval.  Shown without bias (beta = 0) and at the largest beta
# (the guarantee does not depend on the bias: Q0 is calibrated on the biased model's own answers).

# %%
cov0 = gt.coverage_table([listening[(s, BETAS[0])] for s in SEEDS], ALPHAS)
cov_hi = gt.coverage_table([listening[(s, BETAS[-1])] for s in SEEDS], ALPHAS)
checks += gt.coverage_checks(cov0, f" (beta={BETAS[0]:g})") + gt.coverage_checks(cov_hi, f" (beta={BETAS[-1]:g})")
display(
    Markdown(
        tb.frame_table(
            cov0.drop(columns="per_run_rates").round(4),
            name="ground_truth_coverage",
            title=f"Coverage at beta = {BETAS[0]:g}",
        ).to_markdown()
    )
)
fig_cov = gtf.plot_coverage(cov0, DATASET_NAME, SYNTHETIC, PROFILE, note=f", {len(SEEDS)} seed(s), beta = {BETAS[0]:g}")

# %% [markdown]
# ## 2. The repair loop: do violations fall when the recommender listens?
#
# FACTER pass by pass, for each rule compliance rho and bias strength beta (seed 0): violations against
# the fixed Q0 (solid; the bar does not move) and against the adaptive Q_t (dashed; the one-sided
# update only raises the bar, so V(t) can fall without any repair), and the share of top-1 items that
# the bias changed (bottom row; the truth).

# %%
rep = gt.repair_table(list(by_rho.values()))
checks += gt.repair_checks(rep[rep["beta"] > 0])
display(
    Markdown(tb.frame_table(rep.round(4), name="ground_truth_repair", title="FACTER violations per pass").to_markdown())
)
fig_rep = gtf.plot_repair(rep, DATASET_NAME, SYNTHETIC, PROFILE)

# %% [markdown]
# ## 3. Fairness: CFR and SNSR of Neutral, Fair and FACTER against beta
#
# CFR (REPRO's counterfactual fairness ratio): for 200 test rows, the L2 distance between the
# normalised mean embeddings of the top-10 list and of the list the recommender gives when every
# protected attribute is flipped, averaged over the rows; it lies in [0, 2] (0: the list is unchanged);
# SNSR: the spread of list embeddings between demographic groups.  At beta = 0 the simulator's
# answers do not depend on the demographics at all, so CFR is exactly 0 for Neutral and Fair; FACTER's
# per-group rules can make it positive.

# %%
fair = gt.fairness_table(list(listening.values()))
checks += gt.fairness_checks(fair)
summary = (
    fair.groupby(["beta", "method"], sort=False)[["cfr_multi", "snsr_joint", "ndcg@10_multi", "share_top1_biased"]]
    .agg(["mean", "std"])
    .round(4)
)
display(summary)
fig_fair = gtf.plot_fairness(fair, DATASET_NAME, SYNTHETIC, PROFILE)

# %% [markdown]
# ## 4. Beyond both papers: violations as a detector of biased outputs
#
# Since the truth is known, we can ask how good "S > Q0" is at flagging the answers whose top-1 item
# the bias changed: precision (flagged answers that were biased), recall (biased answers that were
# flagged), and the base rate (share biased).  Scores are recomputed from the saved top-1 items for a
# grid of lambda (weight of the counterfactual penalty) and tau_rho (neighbour similarity cut), on the
# Neutral rows of seed 0 at the largest beta, and at the run's lambda and tau_rho for every beta.  Note
# that Q0 is calibrated on the same biased model, so at most about alpha of the rows can be flagged:
# recall is capped near alpha / base rate, and precision by 1, so lift (precision / base rate) is capped
# by its ceiling 1 / base rate (column `lift_ceiling`).

# %%

from facterlab.data.protocol import load_or_build_interactions
from facterlab.facter.pipeline import build_encoder

top = listening[(SEEDS[0], BETAS[-1])]
cfg_top = config(SEEDS[0], BETAS[-1], 1.0)
inter = load_or_build_interactions(None, cfg_top.data, data_dir=DATA_DIR)
encoder = build_encoder(cfg_top)
det = gt.detector_table(top, encoder, inter.items, inter.calib, inter.test, LAMBDAS, TAU_RHOS)
det_beta = pd.concat(
    [
        gt.detector_table(
            listening[(SEEDS[0], b)],
            encoder,
            inter.items,
            inter.calib,
            inter.test,
            [cfg_top.facter.lam],
            [cfg_top.facter.tau_rho],
        ).assign(beta=b)
        for b in BETAS
        if b > 0
    ],
    ignore_index=True,
)
checks += gt.detector_checks(det_beta)
display(
    Markdown(
        tb.frame_table(
            det.round(4), name="ground_truth_detector", title=f"Detector at beta = {BETAS[-1]:g}"
        ).to_markdown()
    )
)
fig_det = gtf.plot_detector(det, det_beta, DATASET_NAME, SYNTHETIC, PROFILE)

# %% [markdown]
# ## 5. Why FACTER's score does not see this bias, and a positive control where it does
#
# S = d + lambda Delta.  Two things would have to move with the bias: d (the top-1's distance to the
# row's target) and Delta (the distance to counterfactual neighbours' answers).  Here we measure, on the
# Neutral rows of seed 0: the share of calibration rows without any counterfactual neighbour (then
# S = d), and d and S on the rows the bias changed against the others (AUC 0.5: S cannot tell them
# apart).  The **positive control** is the same faithful FACTER with the `rare` bias table, which pushes
# genres users rarely watch (under 2% of ML-100K ratings each): there the biased top-1 lies far from the
# user's taste, d sees it, and S > Q0 should flag biased rows more often than the base rate.  The
# second control is the tests' hand-built world (four taste genres; Romance, liked by nobody, pushed to
# women; hard rules), where the bias is what makes S large: there the faithful loop must work.


# %%
control = ex.run(control_config(), data_dir=DATA_DIR, progress=False)
decomp = pd.DataFrame(
    [gt.decomposition_row(listening[(SEEDS[0], b)], f"default table, beta={b:g}") for b in BETAS if b > 0]
    + [gt.decomposition_row(control, f"rare table (positive control), beta={BETAS[-1]:g}")]
)
decomp["paired d shift (changed rows)"] = [
    gt.d_shift(listening[(SEEDS[0], b)], encoder, inter.items, inter.test)["mean_shift"] for b in BETAS if b > 0
] + [float("nan")]
display(decomp.round(4))
fig_dec = gtf.plot_decomposition({b: listening[(SEEDS[0], b)] for b in BETAS}, DATASET_NAME, SYNTHETIC, PROFILE)
ctrl_det = control.record.metrics.methods["neutral"].ground_truth["detector"]
checks.append(
    gt.rate_claim(
        f"positive control (rare table, beta={BETAS[-1]:g}): faithful S > Q0 flags biased rows more often than "
        f"the base rate {ctrl_det['base_rate']:.3f}",
        int(ctrl_det["true_pos"]),
        int(ctrl_det["flagged"]),
        float(ctrl_det["base_rate"]),
        ">=",
    )
)
# the second positive control: the tests' hand-built world (Romance liked by nobody, pushed to women)
world = gt.handbuilt_control()
world_det = world[1.0].record.metrics.methods["neutral"].ground_truth["detector"]
checks.append(
    gt.rate_claim(
        "positive control (hand-built world, beta=6): faithful S > Q0 flags biased rows more often than the "
        f"base rate {world_det['base_rate']:.3f}",
        int(world_det["true_pos"]),
        int(world_det["flagged"]),
        float(world_det["base_rate"]),
        ">=",
    )
)
world_shares = gt.biased_share_table(list(world.values()))
checks.append(  # the same test rows with rho 1 and rho 0: McNemar on the rows paired by row_id
    gt.rho_claim(
        "positive control (hand-built world, beta=6): with rho=1 the faithful loop leaves fewer top-1 items "
        "changed by the push (p1) than with rho=0 (p2) by the last pass",
        world_shares,
        float(world_shares["beta"].max()),
    )
)
display(world_shares.round(3))
for b in [b for b in BETAS if b > 0]:
    d0 = listening[(SEEDS[0], b)].record.metrics.methods["neutral"].ground_truth["detector"]
    checks.append(
        gt.rate_claim(
            f"faithful S > Q0 (default table, beta={b:g}): flags biased rows more often than the base rate "
            f"{d0['base_rate']:.3f}",
            int(d0["true_pos"]),
            int(d0["flagged"]),
            float(d0["base_rate"]),
            ">=",
        )
    )

# %% [markdown]
# ## 6. facterlab's twin monitor beside the faithful one
#
# The same simulated runs with `facter.delta = "twin"` and `facter.threshold = "null"` (docs/FACTER.md
# §6): the label is now "the demographics changed the row's or its twin's top-1 item" (against the
# demographics-blind answer, so that unfairness the rules cause counts too).  The table gives each
# run's `ground_truth.detector` block from its metrics.json (precision, recall, base rate, flag rate,
# AUC, lift and its ceiling), the faithful runs beside, named.  Then the repair: the share of FACTER's
# top-1 items the push changed, per pass, against Fair's on the same rows (the same prompt without
# rules), with rho = 1 and rho = 0; and the rules of the last pass against the bias table.

# %%
twin_runs = {}
if TWIN:
    mid = MID
    # the panel {faithful, twin} x {absolute (soft: demote by DEMOTE SDs only), relative (the push cancelled)} x rho
    runs = run_many(twin_configs(), data_dir=DATA_DIR)
    twin_runs = {key[1:]: r for key, r in runs.items() if key[0] == "twin"}
    contrast_run = runs[("contrast",)]
    soft = {key[1:]: r for key, r in runs.items() if key[0] == "soft"}
    det_all = gt.run_detector_frame(list(twin_runs.values()) + list(listening.values()))
    display(
        Markdown(
            tb.frame_table(
                det_all.groupby(["monitor", "beta", "rho", "method"])[[*gt.DETECTOR_NUMBERS, "lift", "lift_ceiling"]]
                .mean()
                .round(4)
                .reset_index(),
                name="ground_truth_twin_detector",
                title="Detector of each monitor (mean over seeds; counts per run)",
            ).to_markdown()
        )
    )
    shares = gt.biased_share_table([r for k, r in twin_runs.items() if k[1] > 0])
    display(
        shares.groupby(["beta", "rho", "pass"])[
            ["share_changed", "share_unfair", "fair_share_changed", "mean_pushed_topk"]
        ]
        .mean()
        .round(4)
    )
    contrast_shares = gt.biased_share_table([contrast_run, twin_runs[(SEEDS[0], mid, 1.0)]])
    display(contrast_shares.round(3))
    rules = gt.rules_vs_table(
        [listening[(SEEDS[0], b)] for b in BETAS] + [twin_runs[(SEEDS[0], b, 1.0)] for b in BETAS] + [contrast_run]
    )
    display(rules.round(3))
    fair_twin = gt.fairness_table([twin_runs[(s, b, 1.0)] for s in SEEDS for b in BETAS])
    panel_runs = (
        list(soft.values()) + [by_rho[(mid, rho)] for rho in RHOS] + [twin_runs[(SEEDS[0], mid, rho)] for rho in RHOS]
    )
    panel = gt.biased_share_table(panel_runs)
    fig_panel = gtf.plot_twin_repair(panel, DATASET_NAME, SYNTHETIC, PROFILE)
    alpha = float(first.calibration.alpha)
    checks += gt.twin_claims(det_all[det_all["monitor"].str.startswith("facterlab")], shares, fair_twin, alpha)

# %% [markdown]
# ## 7. The twin monitor against recommenders that read text
#
# The simulator above takes the demographics from the request's fields: a placebo that rewrites the
# prompt cannot move it, every placebo distance is 0 and "no false flag at beta = 0" holds by
# construction.  Here the same monitor meets the **text-reading simulator** (`sim.reads = "text"`,
# docs/SIMULATED.md): it gets the demographics only by parsing the prompt, and has named surface
# sensitivities.  Unbiased cases (beta = 0: every flag is false): `lines-set` reads the demographics as a
# set of lines (order-invariant, but any change of a line's text moves its answer), `prompt-hash` (the
# whole prompt seeds it), `per-call` (sampling: a fresh draw per request), `line-order`, `irrelevant-field`,
# `all-surfaces`.  Biased cases: `default-table` (beta = 2, read from the fields: the positive control),
# `narrow-table` (one age group and two student occupations, small weights, read from the text) and
# `word-triggered` (the push fires on the spelling "female" / "F", not on "woman").
#
# Monitor variants (docs/FACTER.md §7): **family** (facterlab's twin monitor now: Q_null calibrated on the
# largest of three placebo edits per row, reword / irrelevant field / order, and rules only from
# twin-confirmed, enriched differences, dropped when they do not lower what they target), **absolute**
# (the same against a recommender that only demotes what a rule names), **count** (the placebo family
# with FACTER's counted rules) and **order** (the monitor before: one reversed-lines placebo and counted
# rules).  The acceptance claims: on every unbiased case the false-flag rate is at most alpha + 0.02 (99%
# upper bound) and FACTER makes at most a handful of rules; on every case FACTER's CFR is not above Fair's
# (per-row CFR distances, paired).  `lines-set` sits at alpha under the list statistic (its answer moves with
# any line's text, so twin and reword placebo move it alike).  Measured by `twin_acceptance` at one pass
# (docs/FACTER.md §7.2, with the command and its commit): 135/1,350 = 0.100 at three seeds, too small to tell
# against the 0.02 margin; 417/4,050 = 0.103, 99% CI [0.091, 0.116] at nine, where it holds.
#
# **The twin statistic** (`facter.twin_distance`, docs/FACTER.md §7.2).  FACTER's f(yhat) is the embedding of
# the top-1 item only, so a twin whose top-1 equals the row's is at distance 0 however much the rest of its
# top-10 list moved.  Every run of this section measures Delta (and every placebo distance, so Q_null is a
# quantile of the same statistic and the bound holds) as the distance between the rank-weighted mean
# embeddings of the two top-10 lists (`"list"`, `twin_acceptance.TWIN_DISTANCE`).  The **power study**
# (`sampled-bias`: beta = 2 read from the text, sampling at temperature 1, `POWER_TEMPERATURES`) puts the two statistics
# side by side against the requests each test row costs (2k for k draws per request), with the target of
# issue 43: recall at least 0.6 at temperature 1 within twice the requests of k = 1.

# %%
from facterlab.reporting import twin_acceptance as ta

testbed_runs, power_runs = {}, {}
if TESTBED:
    # the same runs as `python -m facterlab.reporting.twin_acceptance`, and the power study's
    runs = run_many(testbed_configs(), data_dir=DATA_DIR)
    testbed_runs = {key[1:]: r for key, r in runs.items() if key[0] == "testbed"}
    power_runs = {key[1:]: r for key, r in runs.items() if key[0] == "power"}
    tb_frame = ta.acceptance_frame(testbed_runs)
    alpha_tb = float(next(iter(testbed_runs.values())).record.metrics.calibration.alpha)
    checks += ta.acceptance_claims(tb_frame, testbed_runs, alpha_tb, "family")
    # the monitor before (one reversed-lines placebo), and counted rules, on the same cases: the cause of the failures
    checks += ta.acceptance_claims(tb_frame, testbed_runs, alpha_tb, "order")
    checks += [c for c in ta.acceptance_claims(tb_frame, testbed_runs, alpha_tb, "count") if "CFR" in c.claim]
    checks += [c for c in ta.acceptance_claims(tb_frame, testbed_runs, alpha_tb, "absolute") if "CFR" in c.claim]
    display(
        Markdown(
            tb.frame_table(
                tb_frame.groupby(["variant", "case"], sort=False)[
                    ["n", "flagged", "flag_rate", "facter_rules", "cfr_fair", "cfr_facter"]
                ]
                .agg(
                    {
                        "n": "sum",
                        "flagged": "sum",
                        "flag_rate": "mean",
                        "facter_rules": "max",
                        "cfr_fair": "mean",
                        "cfr_facter": "mean",
                    }
                )
                .round(4)
                .reset_index(),
                name="ground_truth_text_testbed",
                title="Twin monitor against text-reading recommenders (Neutral's flags; FACTER's rules, most in a run; CFR means)",
            ).to_markdown()
        )
    )
    # power per request (issue 43 item 3): recall and precision against the requests each test row costs, one
    # line per twin statistic; the target: recall >= 0.6 at temperature 1 within twice the requests of k = 1
    power = ta.power_frame(power_runs)
    display(
        power[
            ["statistic", "temperature", "draws", "seeds", "requests_per_test_row", "n", "flagged"]
            + [f"{w}_{x}" for w in ("recall", "precision") for x in ("row", "either", "row_list", "either_list")]
        ].round(3)
    )
    fig_power = gtf.plot_power(power, DATASET_NAME, SYNTHETIC, PROFILE)
    checks += ta.power_claims(power, 1.0, "either") + ta.power_claims(power, 1.0, "either_list")
negative_control = {}
if NEGATIVE_CONTROL:  # a real LLM: rewording the values must not be flagged beyond alpha (docs/FACTER.md §7.2)
    from facterlab.reporting import negative_control as nc

    # cross-fitted on the calibration rows, sequential: 150 rows, then 400 only when too small to tell
    nc_claims, nc_runs = nc.run_sequential(NEGATIVE_CONTROL, NEGATIVE_CONTROL_STAGES, DATASET_NAME, data_dir=DATA_DIR)
    checks.append(nc_claims[-1])  # the last look's verdict (each look's interval is corrected for both)
    negative_control = {
        "model": NEGATIVE_CONTROL,
        "run_ids": [r.run_id for r in nc_runs],
        "verdict": nc_claims[-1].verdict,
        "measured": nc_claims[-1].measured,
    }

# %% [markdown]
# What this testbed cannot test: a model's answer is a function of the prompt text and a seed here,
# and each surface sensitivity is an independent draw; a real LLM may be moved by a rewording more
# (or less) than by a changed value, in ways no simulator fixes in advance.  The null's assumption
# (docs/FACTER.md §7) is then an assumption about that model; the negative control checks it on one
# real LLM, not on every one: `NEGATIVE_CONTROL = "smollm2-135m"` adds its claim here (off by default, an
# LLM run of 852 requests per look; the same runs as `python -m facterlab.reporting.negative_control
# smollm2-135m --stages 150 400 --dataset ml-100k`, docs/FACTER.md §7.2: cross-fitted on the calibration
# rows, a second look of 400 rows only when the first is too small to tell; the claim names its run).  A bias fired by one spelling
# (`word-triggered`) is by construction not separable from an unbiased model that reacts to spelling:
# the reword placebo moves it as much as the twin does, so the null absorbs it (its recall claim says so).

# %% [markdown]
# ## The claims, checked

# %%
table = gt.checks_frame(checks)
display(Markdown(table.to_markdown(index=False)))
print(summary_line(table))  # claims that hold by construction are reported apart, not counted among the holds

# %% [markdown]
# ## In words
#
# The paragraph below is written from the verdicts above (nothing in it is typed by hand).


# %%
def said(prefix):
    sel = table[table["claim"].str.startswith(prefix)]
    return ", ".join(f"{v}: {n}" for v, n in sel["verdict"].value_counts().items()) or "not checked"


display(
    Markdown(
        f"On {DATASET_NAME} with the simulated recommender ({len(SEEDS)} seed(s), n = {first.n_calib} + {first.n_test}), "
        f"the conformal coverage of the faithful FACTER checks out ({said('coverage')}), but its score does not see "
        f"the planted bias: {first.calibration.share_no_neighbour:.1%} of calibration rows have no counterfactual "
        f"neighbour, so S = d there, and d does not move with the bias (section 5; claims on the faithful detector: "
        f"{said('faithful S > Q0')}).  The positive control shows the harness can see a bias FACTER's d reacts to "
        f"({said('positive control')}).  The faithful repair loop: {said('faithful FACTER, repair')}; its CFR against "
        f"Fair's: {said('faithful FACTER, fairness')}.  facterlab's twin monitor with the null-anchored threshold: "
        f"false flags at beta = 0 ({said('twin + null (beta=0)')}), recall and precision at beta > 0 "
        f"({said('twin + null (beta=' + format([b for b in BETAS if b > 0][0], 'g') + ')')}), repair "
        f"({said('twin repair')}), CFR against Fair's ({said('facterlab twin monitor')}).  Against recommenders "
        f"that read the prompt text (section 7), with the placebo family and confirmed rules: "
        f"{said('text testbed [family]')}; the monitor before (reversed-lines placebo, counted rules): "
        f"{said('text testbed [order]')}."
    )
)
# %%
all_runs = list(listening.values()) + list(by_rho.values())
for fig, name, runs in (
    (fig_dec, "ground_truth_decomposition", [listening[(SEEDS[0], b)] for b in BETAS]),
    *(((fig_panel, "ground_truth_twin_repair", panel_runs),) if TWIN else ()),
    *(((fig_power, "ground_truth_power_sampling", list(power_runs.values())),) if TESTBED else ()),
    (fig_cov, "ground_truth_coverage", [listening[(s, BETAS[0])] for s in SEEDS]),
    (fig_rep, "ground_truth_repair", list(by_rho.values())),
    (fig_fair, "ground_truth_fairness", list(listening.values())),
    (fig_det, "ground_truth_detector", [listening[(SEEDS[0], b)] for b in BETAS]),
):
    save_figure(fig, name, runs=runs)
# sections 8 and 9 add their claims and runs to the same file at the end
metrics09 = {
    "notebook": "09_facter_ground_truth",
    "profile": PROFILE,
    "dataset": DATASET_NAME,
    "is_synthetic": SYNTHETIC,
    "model": "simulated",
    "encoder": ENCODER,
    "protocol": PROTOCOL,
    "preset": PRESET,
    "run_ids": sorted({r.run_id for r in list(listening.values()) + list(by_rho.values())}),
    "seeds": SEEDS,
    "sim": {
        "betas": BETAS,
        "rhos": RHOS,
        "sigma": SIGMA,
        "h": H,
        "phi": PHI,
        "demote": DEMOTE,
        "compliance": "relative",
    },
    "coverage": gt.records_with_reasons(cov0),
    "coverage_high_beta": gt.records_with_reasons(cov_hi),
    "repair": gt.records_with_reasons(rep),
    "fairness": gt.records_with_reasons(fair),
    "detector": gt.records_with_reasons(det),
    "detector_by_beta": gt.records_with_reasons(det_beta),
    "decomposition": gt.records_with_reasons(decomp),
    "twin_detector": gt.records_with_reasons(det_all) if TWIN else [],
    "twin_shares": gt.records_with_reasons(shares) if TWIN else [],
    "compliance_panel": gt.records_with_reasons(panel) if TWIN else [],
    "contrast_vs_count": gt.records_with_reasons(contrast_shares) if TWIN else [],
    "rules_vs_table": gt.records_with_reasons(rules) if TWIN else [],
    "text_testbed": gt.records_with_reasons(tb_frame) if TESTBED else [],
    "negative_control": negative_control,
    "power_sampling": gt.records_with_reasons(power) if TESTBED else [],
    "text_testbed_run_ids": sorted(r.run_id for r in list(testbed_runs.values()) + list(power_runs.values())),
    "twin_run_ids": sorted(
        {r.run_id for r in list(twin_runs.values()) + (panel_runs + [contrast_run] if TWIN else [])}
    ),
    "control_run_id": control.run_id,
    "handbuilt_run_ids": [r.run_id for r in world.values()],
    "handbuilt_shares": gt.records_with_reasons(world_shares),
    "claims": [c.to_json() for c in checks],
}
write_metrics("09_facter_ground_truth", metrics09)

# %% [markdown]
# ## 8. Two estimands side by side: counterfactual dependence and directional bias
#
# The twin flag and the directional test answer two different questions (docs/FACTER.md §7):
#
# - **row-level counterfactual dependence**, "does this user's answer depend on their demographics?":
#   the flag `Delta > Q_null` (Neutral's flag rate, and its recall and precision against the simulator's
#   label "the demographics changed this row's or its twin's top-1");
# - **group-level directional bias**, "is some group systematically pushed?": per (attribute value,
#   feature) cell, the exact McNemar test that the rows' answers carry the feature more (or less) often
#   than their twins', Holm over every cell (`facterlab.facter.directional`; the seeds' Neutral rows pooled).
#
# Three cases at a small size: `lines-set` (moved by the prompt's surface only: a negative of both),
# `semantic` (answers as a random function of the values' meaning, preferring no group: a **positive of
# the first and a negative of the second**, so its flags are true ones) and `default-table` (pushes genres
# to groups: a positive of both).  The flag's recall and precision are checked against both labels: the top-1
# changed, and the top-10 set changed.  The runs use the testbed's list statistic (section 7).  With the top-1
# statistic a `semantic` row whose twin kept the same top-1 had Delta exactly 0 although its top-10 list
# differed (60% of the rows at these sizes), so recall against the list label was about 0.4 where recall
# against the top-1 label was 0.8-0.9.  With the list statistic the flag answers the list-level question:
# its recall and precision against the list label are the claims built for it.  Against the top-1 label its
# precision is low by design, because a row whose top-1 stayed and whose list moved is flagged, and the
# top-1 label calls that flag false (docs/FACTER.md §7.2 has both statistics' numbers).

# %%
from facterlab.data.protocol import load_or_build_interactions
from facterlab.facter import directional as dr
from facterlab.reporting import twin_acceptance as ta

ESTIMAND_CASES = ["lines-set", "semantic", "default-table"]  # negative of both; dependent, no direction; biased
ESTIMAND_N = 300 if SMOKE else 600  # rows per run: the contrast, not the power
ESTIMAND_SEEDS = SEEDS[:2]
est_configs = {
    (case, seed, "family"): ta.case_config(
        case,
        seed,
        dataset=DATASET,
        protocol=PROTOCOL,
        preset_name=PRESET,
        n_rows=ESTIMAND_N,
        passes=1,
        cfr_rows=CFR_ROWS,
        encoder=ENCODER,
    )
    for case in ESTIMAND_CASES
    for seed in ESTIMAND_SEEDS
}
est_runs = run_many(est_configs, data_dir=DATA_DIR)
est_items = load_or_build_interactions(None, next(iter(est_configs.values())).data, data_dir=DATA_DIR).items
estimands = ta.estimands_frame(est_runs, est_items)
display(
    Markdown(
        tb.frame_table(
            estimands.round(3),
            name="ground_truth_two_estimands",
            runs=list(est_runs.values()),
            title="The two estimands on three cases (Neutral's rows, seeds pooled): the flag and the directional test",
        ).to_markdown()
    )
)
for case in ESTIMAND_CASES:
    print(f"{case}: {dr.directional_summary(ta.case_directional(est_runs, est_items, case))}")
est_alpha = float(next(iter(est_runs.values())).record.metrics.calibration.alpha)
est_checks = [
    c
    for c in ta.acceptance_claims(ta.acceptance_frame(est_runs), est_runs, est_alpha)
    if "CFR" not in c.claim  # one pass: FACTER makes no rule here
] + ta.directional_claims(est_runs, est_items)
est_table = gt.checks_frame(est_checks)
display(Markdown(est_table.to_markdown(index=False)))
print(summary_line(est_table))


# %% [markdown]
# ## 9. Rules for the right attribute: per-attribute twins
#
# The twin flips every protected attribute at once, and confirmed mining counts a flagged pair toward the
# row's value of *every* attribute.  Where attributes are correlated a push on one shows up as an effect of
# the others: a model that pushes Comedy to students gets `age=18-24 -> Comedy`, a rule that demotes Comedy
# for every young user.  With `facter.attribution = "per-attribute"` the monitor also asks each flagged
# FACTER row with one attribute flipped at a time and mines each attribute against its own twin, counting
# the rows whose own twin moved the answer past Q_null; `"per-attribute-all"` asks every row so and counts
# every rule-free pair (the group-level directional test; docs/FACTER.md §7.3).  Each compares, per pair and
# feature, the top-1 items' features; with `facter.rule_evidence = "list"` (`attributed-all-list`) it compares
# how many items of the row's and the twin's whole top-10 lists carry the feature, which gives a narrow push
# many more discordant pairs (a feature that a stronger rule of the same group co-tags is re-tested without
# that rule's items).  The runs below compare `ATTRIBUTION_VARIANTS` (`family` = the all-attributes twin,
# and the candidate `attributed-all-list`) on the default table, a students -> Comedy table and the held-out
# narrow table, and on the unbiased text readers, with the acceptance of issue 43: at least 90% of the
# confirmed rules name a true (attribute value, feature) cell, at least half of the narrow table's true cells
# are found, FACTER's CFR is not above Fair's (pair by pair), at most a handful of rules on an unbiased model.
# The same runs as `python -m facterlab.reporting.twin_acceptance --attribution --variants family attributed-all-list`.
#
# At these three seeds `attributed-all-list`'s narrow-table CFR claim passes within its 0.01 margin; at nine
# seeds (docs/FACTER.md §7.3, with the commands) it **fails**: FACTER - Fair = +0.0073 (99% bounds [+0.0038,
# +0.0108]) with MiniLM, +0.0140 with the hash encoder, almost all rules true.  The cause is the rules' dose:
# an honoured rule cancels the push and then demotes the feature by `sim.demote` = 1 score SD, more than the
# narrow table's small pushes, so the twins part again the other way.  The control, the same runs with
# `sim.demote` = 0 (`--sim-demote 0`), makes the same rules and holds (-0.0063 with MiniLM, -0.0106 with the
# hash encoder).  An AVOID rule has no size; FACTER cannot say how hard to avoid.

# %%
from facterlab.reporting import twin_acceptance as ta_attr

ATTRIBUTION = TESTBED  # this section runs with the testbed's sizes
attr_checks, attr_frame = [], None
if ATTRIBUTION:
    attr_keys = ta_attr.attribution_plan(SEEDS, ATTRIBUTION_VARIANTS, () if SMOKE else ta_attr.UNBIASED_CASES)
    attr_base = testbed_base()
    attr_runs = run_many({k: ta_attr.case_config(*k, **attr_base) for k in attr_keys}, data_dir=DATA_DIR)
    attr_frame = ta_attr.attribution_frame(attr_runs)
    attr_checks = [c for v in ATTRIBUTION_VARIANTS for c in ta_attr.attribution_claims(attr_frame, attr_runs, v)]
    display(
        Markdown(
            tb.frame_table(
                attr_frame.assign(wrong_rules=attr_frame["wrong_rules"].map("; ".join)).drop(columns=["run_id"]),
                name="ground_truth_attribution",
                runs=list(attr_runs.values()),
                title="Confirmed rules against the bias table: the all-attributes twin (family) and per-attribute twins",
                notes=[
                    "attr_twin_requests: the per-attribute twins' requests, of facter_requests (FACTER's rows and twins, all passes)"
                ],
            ).to_markdown()
        )
    )
    attr_table = gt.checks_frame(attr_checks)
    display(Markdown(attr_table.to_markdown(index=False)))
    print(summary_line(attr_table))

# %%
# sections 8 and 9 in the notebook's metrics.json beside sections 1-7 (results/09_facter_ground_truth/)
metrics09["estimand_claims"] = [c.to_json() for c in est_checks]
metrics09["estimand_run_ids"] = sorted(r.run_id for r in est_runs.values())
metrics09["attribution"] = gt.records_with_reasons(attr_frame) if attr_frame is not None else []
metrics09["attribution_claims"] = [c.to_json() for c in attr_checks]
metrics09["attribution_run_ids"] = sorted(r.run_id for r in attr_runs.values()) if ATTRIBUTION else []
print("metrics:", write_metrics("09_facter_ground_truth", metrics09))
