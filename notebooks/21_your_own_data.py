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
# # 21 Your own data and model: a job board audited end to end
#
# Everything here is what docs/OWN_DATA.md shows, on a domain outside movies: a small job board
# (`examples/jobs/`, written by `python examples/make_jobs.py`; seeded, so it is **generated data**)
# whose users have a `country` (5 values) and a `language` (4 values, 10% missing, kept as the value
# `unknown`). Four steps:
#
# 1. **Import** the RecBole files with the user's own protected attributes and a wording map.
# 2. **Audit a Python recommender** (a function written below, with no system prompt) with the twin
#    monitor and the null threshold. It has a bias we plant: it pushes finance jobs to seekers from
#    Brazil. The same function without the push is the negative control.
# 3. **FACTER with a prompt-taking model**: the simulated recommender (docs/SIMULATED.md) with a bias
#    table written for this dataset; its repair rules name the dataset's attributes.
# 4. **Simpson audit** of the board's exposure log (`exposure_log.csv`): per-user and aggregate
#    exposure gaps between office and field jobs, their decomposition, and the IPS estimate from the
#    one random ad per seeker.

# %% tags=["parameters"]
PROFILE = "default"  # default | paper | smoke (set by `facterlab reproduce`)
SMOKE = False  # True: tiny sizes, seconds per notebook
EXAMPLE_DIR = None  # None: examples/jobs/ of this clone; or a folder of NAME.inter/.user/.item
N_ROWS = 1000  # interaction rows of each run, split 70/30 calibration/test
PUSH = 2.0  # the planted push of the Python recommender, in units of a history share (0: no bias)
SIM_BETA = 3.0  # the simulated recommender's bias strength in score SDs
ENCODER = "all-MiniLM-L6-v2"  # the item encoder (hash-encoder: a fast test encoder)
CFR_ROWS = 200  # counterfactual rows per method
SEED = 0
N_BOOT = 1000  # bootstrap resamples of the Simpson audit's intervals

# %%
import json
import time
from pathlib import Path

import numpy as np
import pandas as pd
from IPython.display import Markdown, display

import facterlab
from facterlab import notebook, paths, preset
from facterlab.data import from_tables, read_recbole
from facterlab.facter import run_experiment
from facterlab.models.custom import FunctionRecommender
from facterlab.reporting.figures import save_figure
from facterlab.reporting.results import write_metrics
from facterlab.simpson import audit

P = notebook.parameters(globals(), smoke={"N_ROWS": 300, "N_BOOT": 100, "CFR_ROWS": 20})
T0 = time.time()
# the example's folder: EXAMPLE_DIR, else examples/jobs of the clone this notebook runs in (the working folder's,
# else the one facterlab is installed from, as `make install` does)
candidates = (
    [Path(EXAMPLE_DIR)]
    if EXAMPLE_DIR
    else [
        paths.project_root() / "examples" / "jobs",
        Path(facterlab.__file__).resolve().parents[2] / "examples" / "jobs",
    ]
)
example = next((c for c in candidates if (c / "jobs.inter").is_file()), candidates[0])
if not (example / "jobs.inter").is_file():
    raise FileNotFoundError(f"{example}: no jobs.inter; run `python examples/make_jobs.py` or set EXAMPLE_DIR")
out_dir = paths.results_dir() / "21_your_own_data"

# %% [markdown]
# ## 1. Import
#
# `read_recbole` reads the atomic files with RecBole's defaults (ids `user_id`/`item_id`; no `rating`
# field, so implicit feedback; the title is the item field named `title`; the features are the item's
# other token fields, here `sector`). `from_tables` validates and builds the dataset; the command line
# does the same with `facterlab data import examples/jobs --name jobs --protected country,language
# --domain job --wordings examples/jobs/wordings.json`.

# %%
wordings = json.loads((example / "wordings.json").read_text(encoding="utf-8"))
ds = from_tables(
    protected=["country", "language"], name="jobs", domain="job", wordings=wordings, **read_recbole(example)
)
print(f"{ds.name}: {len(ds.users)} users, {len(ds.items)} {ds.domain}s, {len(ds.ratings)} interactions; "
      f"fingerprint {ds.fingerprint()}")  # fmt: skip
sizes = pd.DataFrame(
    [(a, v, int((ds.users[a] == v).sum())) for a in ds.protected for v in ds.attribute_values[a]],
    columns=["attribute", "value", "users"],
)
display(sizes.pivot_table(index="value", columns="attribute", values="users", fill_value=0).astype(int))
for w in ds.info["warnings"]:
    print("warning:", w)

# %% [markdown]
# ## 2. A Python recommender with a planted bias, audited by the twin monitor
#
# The recommender is an ordinary function: it scores each job by the share of the seeker's applications
# in its sector, plus a small popularity term, and (the planted bias) `PUSH` for finance jobs when the
# seeker is from Brazil: at the default `PUSH = 2` finance jobs outrank even the seeker's own sector. It never sees a prompt, so FACTER's prompt repair cannot reach it (the run
# says so); the twin monitor, the metrics and CFR do apply. The twin asks the same function again
# with every protected attribute flipped (facterlab docs/FACTER.md §7); the null threshold is
# calibrated on placebos (the same attributes in other words: `BR` -> `Brazil`, from the wording map;
# an extra irrelevant field; the lines in another order). A flag says the answer moved more under the
# demographic flip than under any irrelevant edit.

# %%
sector = dict(zip(ds.items["item_id"], [f[0] for f in ds.items["features"]]))
SECTORS = sorted(set(sector.values()))
ITEM_IDS = ds.items["item_id"].to_numpy()
ITEM_SECTOR = np.array([SECTORS.index(sector[i]) for i in ITEM_IDS])  # each job's sector, as an index
SECTOR_OF = dict(zip(ITEM_IDS.tolist(), ITEM_SECTOR.tolist()))
ITEM_POP = np.log1p(ds.ratings["item_id"].value_counts().reindex(ITEM_IDS).fillna(0).to_numpy())
FINANCE = ITEM_SECTOR == SECTORS.index("finance")


def make_board(push: float):
    def job_board(history, attributes, candidates):
        """Ranked job ids for a seeker: their sectors first, popular jobs next; `push` for finance jobs in Brazil."""
        share = np.bincount([SECTOR_OF[i] for i in history], minlength=len(SECTORS)) / max(1, len(history))
        score = share[ITEM_SECTOR] + 0.01 * ITEM_POP
        if attributes.get("country") == "BR":
            score = score + push * FINANCE
        score[np.isin(ITEM_IDS, list(history))] = -np.inf  # never recommend what they applied to
        return ITEM_IDS[np.argsort(-score, kind="stable")][:10].tolist()

    return job_board


base = dict(
    data__n_rows=N_ROWS,
    model__encoder=ENCODER,
    metrics__cfr_rows=CFR_ROWS,
    facter__delta="twin",
    facter__threshold="null",
    seed=SEED,
)
twin_cfg = preset("repro", facter__rule_mining="confirmed", facter__passes=1, **base)
audits = {}
for label, push in (("planted push", PUSH), ("no push (negative control)", 0.0)):
    rec = FunctionRecommender(make_board(push), ds.items, name="job_board", version=f"push={push:g}")
    audits[label] = run_experiment(twin_cfg, recommender=rec, dataset=ds, out_dir=out_dir, progress=False)


def flag_rates(run, attr="country"):
    rows = run.rows["neutral"]
    return rows.groupby(attr)["viol_fixed"].mean().rename(f"{run.run_id[:12]}")


table = pd.DataFrame({label: flag_rates(r) for label, r in audits.items()})
table.loc["all seekers"] = [float(r.rows["neutral"]["viol_fixed"].mean()) for r in audits.values()]
display(Markdown(f"Share of test rows flagged (Neutral, alpha = {twin_cfg.facter.alpha:g}), by country"))
display(table.round(3))
alpha = twin_cfg.facter.alpha
planted, control = (float(r.rows["neutral"]["viol_fixed"].mean()) for r in audits.values())
br = float(table.loc["BR", "planted push"])
print(
    f"planted push: {planted:.3f} of rows flagged, {br:.3f} of Brazilian seekers' rows; negative control: "
    f"{control:.3f} (a deterministic function that ignores the attributes answers its twin identically: "
    "0 by construction, not evidence of power)"
)

# %% [markdown]
# Only Brazilian seekers' answers move when their attributes are flipped (and seekers from elsewhere
# whose twin is drawn as Brazilian), so the flags concentrate there. This is the monitor's row-level
# question: *does this seeker's answer depend on their demographics?* It does not say which group is
# favoured; the rules of FACTER (next step) and CFR by attribute say more.

# %% [markdown]
# ## 3. FACTER with a prompt-taking model, on the same data
#
# The simulated recommender reads the prompt's rules, so FACTER's repair reaches it. Its bias table
# is written for this dataset (a table naming an attribute, value or feature the dataset lacks is
# refused with the closest match); the mined rules name the dataset's attributes.

# %%
table_path = example / "bias_table.json"  # {"country": {"BR": ["finance"]}, "language": {"hi": {"tech": 2.0}}}
print(table_path.read_text())
sim_cfg = preset(
    "repro", model__llm="simulated", sim__beta=SIM_BETA, sim__rho=1.0, sim__bias_table=str(table_path),
    facter__rule_mining="confirmed", **base,
)  # fmt: skip
sim = run_experiment(sim_cfg, dataset=ds, out_dir=out_dir, progress=False)
m = sim.record.metrics.methods


def last_pass(rows):
    return rows[rows["pass"] == rows["pass"].max()]


methods = pd.DataFrame(
    {
        name: {
            "CFR (all attributes)": m[name].cfr_multi,
            "CFR (country)": m[name].cfr_single["country"],
            "CFR (language)": m[name].cfr_single["language"],
            "flagged share, last pass": float(last_pass(sim.rows[name])["viol_fixed"].mean()),
        }
        for name in ("neutral", "fair", "facter")
    }
).T
display(methods.astype(float).round(4))
rules = sorted({r for rs in sim.rows["facter"]["rules"] for r in (rs if rs is not None else [])})
print(f"run {sim.run_id}: rules FACTER mined: {rules or 'none'}")

# %% [markdown]
# ## 4. Simpson audit of the board's exposure log
#
# The log lists, per seeker, the top 10 ads of the board's ranking and one ad drawn at random and
# logged at its rank; `relevance` says whether the ad is in one of the seeker's two sectors. The gaps
# compare office jobs (tech, finance, education) with field jobs. The logged gaps are over the logged
# rows (mostly the top 10); the IPS estimate uses the random rows alone and so estimates the per-user
# gap over the whole catalogue, where most relevant ads sit far down the ranking: the two answer
# different questions here, and the table says which is which.

# %%
res = audit(example / "exposure_log.csv", random_col="random", n_boot=N_BOOT, seed=SEED)
display(res.table())
fig = res.figure()
save_figure(fig, "own_data_simpson_audit", source=f"the exposure log {example.name}/exposure_log.csv")

# %%
write_metrics(
    "21_your_own_data",
    {
        "dataset": ds.name,
        "is_synthetic": True,  # the example is generated by examples/make_jobs.py
        "dataset_fingerprint": ds.fingerprint(),
        "protected": list(ds.protected),
        "profile": PROFILE,
        "smoke": SMOKE,
        "run_ids": [r.run_id for r in audits.values()] + [sim.run_id],
        "twin_flag_share": {"planted_push": planted, "negative_control": control, "planted_push_BR": br},
        "facter_rules": rules,
        "facter_cfr_multi": {k: m[k].cfr_multi for k in ("neutral", "fair", "facter")},
        "simpson": json.loads(res.to_json()),
        "seconds": time.time() - T0,
    },
)
print(f"notebook 21 done in {time.time() - T0:.0f} s")
