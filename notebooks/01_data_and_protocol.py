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
# # 01 Data and protocol
#
# The datasets and the interaction protocol of FACTER (docs/FACTER.md §1): which dataset is used (`"auto"`
# picks MovieLens-1M, else MovieLens-100K, else a clearly flagged synthetic dataset), its size and the
# distribution of the protected attributes, the interaction rows (history of 10 positives, target, a
# relevance set of up to 10 items, 40 re-ranking candidates) with their 70/30 calibration/test split,
# how many rows each protected group gets (SNSR only uses groups with at least 30 test rows), and one
# example of each prompt.

# %% tags=["parameters"]
PROFILE = "default"  # default | paper | smoke (set by `facterlab reproduce`)
SMOKE = False  # True: a smaller sample, seconds
DATASET = "auto"  # auto | ml-1m | ml-100k | amazon | synthetic
N_ROWS = None  # None: the protocol's n (ML-1M 2,500; Amazon 3,750; others 2,500)
N_INTERACTIONS = 14  # rows of the FACTER runs in notebooks 00-08, compared with N_ROWS below (None: the protocol's n)
SEED = 0
MIN_GROUP = 30  # SNSR's minimum rows per group (REPRO: 30)
DATA_DIR = None  # None: $FACTERLAB_DATA

# %%
import matplotlib.pyplot as plt
import pandas as pd
from IPython.display import Markdown, display

from facterlab import notebook
from facterlab.config import DataConfig
from facterlab.data import load_dataset, resolve_dataset
from facterlab.data.protocol import default_n_rows, group_sizes, load_or_build_interactions, summarize
from facterlab.datatypes import Rule
from facterlab.facter import prompts
from facterlab.reporting.figures import apply_style, save_figure, title_with_provenance
from facterlab.reporting.labels import add_caption
from facterlab.reporting.results import write_metrics

# checks the parameters; PROFILE, and under SMOKE a smaller sample (and the FACTER notebooks' smoke rows) unless passed
P = notebook.parameters(globals(), smoke={"N_ROWS": 500, "N_INTERACTIONS": notebook.FACTER_SMOKE["N_INTERACTIONS"]})
apply_style()

# %% [markdown]
# ## The dataset

# %%
name = resolve_dataset(DATASET, DATA_DIR)
ds = load_dataset(name, DATA_DIR)
cfg = DataConfig(dataset=name, n_rows=N_ROWS, seed=SEED)
stats = summarize(ds, cfg)
if ds.is_synthetic:
    display(
        Markdown(
            "**SYNTHETIC DATA**: no real dataset was found in the data directory; numbers "
            "below describe the generated data, not MovieLens."
        )
    )
display(
    pd.Series(
        {
            k: stats[k]
            for k in (
                "dataset",
                "is_synthetic",
                "n_users",
                "n_items",
                "n_ratings",
                "n_positive_ratings",
                "eligible_rows",
                "n_users_with_eligible_rows",
            )
        },
        name="value",
    ).to_frame()
)

# %%
fig, axes = plt.subplots(1, 3, figsize=(14, 4), gridspec_kw={"width_ratios": [1, 2, 4]})
for ax, attr in zip(axes, ("gender", "age", "occupation")):
    dist = pd.Series(stats["attribute_distribution"][attr])
    dist.plot.bar(ax=ax, color="#1f77b4")
    ax.set_title(attr)
    ax.set_ylabel("users")
fig.suptitle(
    title_with_provenance(
        f"Users per protected attribute value (n = {stats['n_users']:,} users, all of the dataset)",
        ds.name,
        ds.is_synthetic,
        profile=PROFILE,
    )
)
save_figure(fig, "data_attribute_distribution")
plt.show()

# %% [markdown]
# ## Interaction rows and the calibration/test split

# %%
inter = load_or_build_interactions(ds, cfg, DATA_DIR)
print(f"rows: {len(inter.rows)}  calibration: {len(inter.calib)}  test: {len(inter.test)}")
print(f"distinct users: {inter.n_distinct_users}")
print(f"cache: {inter.cache_path}")
inter.rows.head(3)

# %% [markdown]
# ## Group sizes in the test split
#
# SNSR (proxy) compares groups with at least `MIN_GROUP` test rows; with 750 test rows most joint
# (gender, age, occupation) groups are far smaller, which is why the joint SNSR rests on few groups.

# %%
gs = group_sizes(inter, "test", min_rows=MIN_GROUP)
display(pd.Series(gs["n_qualifying"], name=f"groups with >= {MIN_GROUP} test rows").to_frame())
fig, axes = plt.subplots(1, 4, figsize=(16, 4), gridspec_kw={"width_ratios": [1, 2, 4, 4]})
for ax, attr in zip(axes, ("gender", "age", "occupation", "joint")):
    df = gs[attr]
    if attr == "joint":
        df = df.head(25)
        labels = [f"{g}/{a}/{o}"[:28] for g, a, o in zip(df["gender"], df["age"], df["occupation"])]
    else:
        labels = df["value"].tolist()
    ax.bar(range(len(df)), df["n_rows"], color=["#2ca02c" if r else "#7f7f7f" for r in df["reaches_min"]])
    ax.axhline(MIN_GROUP, color="#d62728", lw=1, ls="--")
    ax.set_xticks(range(len(df)), labels, rotation=90, fontsize=7)
    ax.set_title(f"{attr} ({gs['n_qualifying'][attr]} of {len(gs[attr])} reach {MIN_GROUP})")
    ax.set_ylabel("test rows")
fig.suptitle(
    title_with_provenance(
        f"Test rows per protected group (green: enough for SNSR), computed on n = {len(inter.rows):,} rows "
        f"({len(inter.test):,} test)",
        ds.name,
        ds.is_synthetic,
        profile=PROFILE,
    )
)
run_rows = N_INTERACTIONS or default_n_rows(name)
run_test = run_rows - round(0.7 * run_rows)
largest = max(int(gs[a]["n_rows"].max()) for a in ("gender", "age", "occupation", "joint") if len(gs[a]))
add_caption(
    fig,
    f"Computed on {len(inter.rows):,} interaction rows ({len(inter.test):,} test rows; N_ROWS = {N_ROWS}). "
    f"The FACTER runs of this profile use N_INTERACTIONS = {run_rows:,} rows ({run_test:,} test rows): "
    f"{run_rows / len(inter.rows):.1%} of these, so their groups hold about that share of the counts drawn here "
    f"(the largest group here has {largest:,} test rows, i.e. about {largest * run_test / len(inter.test):.0f} "
    f"in such a run){'; no group can reach ' + str(MIN_GROUP) + ' there' if run_test < MIN_GROUP else ''}.",
)
save_figure(fig, "data_group_sizes")
plt.show()

# %% [markdown]
# ## Prompts (docs/FACTER.md §1.3)

# %%
row = inter.test.iloc[0]
domain = inter.domain
hist_features = [f for i in row["history"] for f in inter.items.loc[i, "features"]]
feature = pd.Series(hist_features).mode().iloc[0] if hist_features else inter.items.loc[row["target"], "title"]
example_rules = [
    Rule("gender", row["gender"], feature),
    Rule("age", row["age"], inter.items.loc[row["history"][0], "title"], kind="title"),
]
for kind in ("neutral", "fair", "facter"):
    display(Markdown(f"**System prompt: {kind}**" + (" (with example rules)" if kind == "facter" else "")))
    print(prompts.system_prompt(kind, example_rules if kind == "facter" else ()))
for protocol in ("open", "rank"):
    display(Markdown(f"**User prompt: {protocol}**"))
    print(prompts.user_prompt(row, inter.items, protocol, k=10, domain=domain))
display(Markdown("**Neighbour context (no demographics)**"))
print(prompts.context_text(inter.items.loc[row["history"], "title"].tolist()))

# %%
metrics = {
    "notebook": "01_data_and_protocol",
    "dataset": ds.name,
    "is_synthetic": ds.is_synthetic,
    "profile": PROFILE,
    "smoke": SMOKE,
    "seed": SEED,
    "counts": {
        k: stats[k]
        for k in (
            "n_users",
            "n_items",
            "n_ratings",
            "n_positive_ratings",
            "eligible_rows",
            "n_users_with_eligible_rows",
        )
    },
    "n_rows": len(inter.rows),
    "n_calib": len(inter.calib),
    "n_test": len(inter.test),
    "n_distinct_users": inter.n_distinct_users,
    "content_hash": inter.content_hash,
    "attribute_distribution": stats["attribute_distribution"],
    "test_group_sizes": {
        attr: dict(zip(gs[attr]["value"], gs[attr]["n_rows"])) for attr in ("gender", "age", "occupation")
    },
    "test_groups_reaching_min": gs["n_qualifying"],
    "min_group": MIN_GROUP,
    "largest_joint_groups": [
        {"gender": g, "age": a, "occupation": o, "n_rows": int(n)}
        for g, a, o, n in gs["joint"].head(10)[["gender", "age", "occupation", "n_rows"]].itertuples(index=False)
    ],
}
print(write_metrics("01_data_and_protocol", metrics))
