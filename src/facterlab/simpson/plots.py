"""Figures of the Simpson part (Prost et al. 2022, Figs 3-5 and the 160-simulation grid).

matplotlib is imported inside the functions; every figure takes a ``title`` that the notebooks
build with :func:`facterlab.reporting.figures.title_with_provenance` (the data is synthetic).
Gaps are drawn in percentage points (pp = 100 x difference of mean exposures), mean ± sd over seeds.
"""

from __future__ import annotations

from facterlab.reporting.figures import PALETTE

LABELS = {"d1": "density of group 1, $d_1$", "sigma1": r"noise level $\sigma_1$", "bias": "model bias $b$"}
GAP_SERIES = {
    "aggregate_gap": ("AggregateGap", PALETTE["aggregate"]),
    "per_user_gap": ("PerUserGap (truth)", PALETTE["per_user"]),
    "ips_counts": ("IPS estimate (counts)", PALETTE["ips_counts"]),
    "ips_model": ("IPS estimate (logistic model)", PALETTE["ips_model"]),
    "naive_estimate": ("naive estimate", "#7f7f7f"),
    "ips_oracle": ("IPS estimate (oracle weights 1/n_s(u))", "#17becf"),
    "ips_oracle_both": ("IPS estimate (oracle weights, users with both groups)", "#bcbd22"),
    "ips_estimand": ("IPS estimand (true weights, no sampling)", "#e377c2"),
}


def band(ax, summary, x: str, col: str, label: str, color: str, scale: float = 100.0, **kw) -> None:
    """Line of ``<col>_mean`` with a ± ``<col>_sd`` band against ``x`` (values multiplied by ``scale``)."""
    xs = summary[x].to_numpy()
    m = summary[f"{col}_mean"].to_numpy() * scale
    s = summary[f"{col}_sd"].fillna(0).to_numpy() * scale
    ax.plot(xs, m, marker="o", ms=3, color=color, label=label, **kw)
    ax.fill_between(xs, m - s, m + s, color=color, alpha=0.2, lw=0)


def plot_factors(summaries: dict, title: str = ""):
    """Fig 3: parameters -> factors.  d_1 -> competition (n(u*), C(u*)); sigma_1 -> performance
    nDCG(u*); b -> PerUserGap (pp)."""
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 3, figsize=(14, 4))
    s = summaries["d1"]
    ax = axes[0]
    band(ax, s, "d1", "probe_competition", "competition C(u*)", PALETTE["fair"], scale=1.0)
    ax.set_ylabel("C(u*) (best mean exposure of its relevant items)")
    ax2 = ax.twinx()
    band(ax2, s, "d1", "probe_n_relevant", "relevant items n(u*)", PALETTE["facter"], scale=1.0, ls="--")
    ax2.set_ylabel("n(u*)")
    ax2.grid(False)
    h1, l1 = ax.get_legend_handles_labels()
    h2, l2 = ax2.get_legend_handles_labels()
    ax.legend(h1 + h2, l1 + l2, fontsize=8, loc="best")
    ax.set_xlabel(LABELS["d1"])
    ax.set_title("competition")
    ax = axes[1]
    band(ax, summaries["sigma1"], "sigma1", "probe_ndcg", "performance nDCG(u*)", PALETTE["fair"], scale=1.0)
    band(ax, summaries["sigma1"], "sigma1", "mean_ndcg", "mean nDCG over users", PALETTE["neutral"], scale=1.0, ls="--")
    ax.set_xlabel(LABELS["sigma1"])
    ax.set_ylabel("nDCG (full list, binary relevance)")
    ax.set_title("performance")
    ax.legend(fontsize=8)
    ax = axes[2]
    band(ax, summaries["bias"], "bias", "per_user_gap", "PerUserGap", PALETTE["per_user"])
    ax.axhline(0, color="black", lw=0.6)
    ax.set_xlabel(LABELS["bias"])
    ax.set_ylabel("PerUserGap (pp, group 0 - group 1)")
    ax.set_title("per-user gap")
    ax.legend(fontsize=8)
    if title:
        fig.suptitle(title, fontsize=10)
    return fig


def plot_gap_sweeps(
    summaries: dict, series=("aggregate_gap", "per_user_gap"), title: str = "", params=("d1", "sigma1", "bias")
):
    """Fig 4 (and Fig 5 with the IPS series): gaps (pp) against each swept parameter."""
    import matplotlib.pyplot as plt

    params = [p for p in params if p in summaries]
    fig, axes = plt.subplots(1, len(params), figsize=(4.8 * len(params), 4), squeeze=False)
    for ax, p in zip(axes[0], params):
        for col in series:
            if f"{col}_mean" in summaries[p]:
                label, color = GAP_SERIES[col]
                band(ax, summaries[p], p, col, label, color)
        ax.axhline(0, color="black", lw=0.6)
        ax.set_xlabel(LABELS.get(p, p))
        ax.set_ylabel("exposure gap (pp, group 0 - group 1)")
    axes[0][0].legend(fontsize=8)
    if title:
        fig.suptitle(title, fontsize=10)
    return fig


def plot_grid(df, table, title: str = "", seed=None):
    """The grid, compared like for like.  Left: every estimate against the true PerUserGap (pp) for
    one seed, with y = x.  Right: mean |x - PerUserGap| (pp), mean ± sd over the grid's seeds, per
    named estimator (``table`` from :func:`facterlab.simpson.simulate.comparison_table`), the paper's
    number beside the two it reports (its estimate is the model IPS), the half-of-aggregate line and
    each estimator's verdict."""
    import matplotlib.pyplot as plt
    import numpy as np

    fig, axes = plt.subplots(1, 2, figsize=(13, 5), gridspec_kw={"width_ratios": [1, 1.25]})
    one = df if seed is None or "seed" not in df else df[df["seed"] == seed]
    pu = one["per_user_gap"].to_numpy() * 100
    lo, hi = np.nanmin(pu), np.nanmax(pu)
    for col in ("aggregate_gap", "ips_model", "ips_counts", "ips_oracle"):
        if col not in one:
            continue
        label, color = GAP_SERIES[col]
        axes[0].scatter(pu, one[col] * 100, s=10, alpha=0.7, color=color, label=label)
        lo, hi = min(lo, np.nanmin(one[col] * 100)), max(hi, np.nanmax(one[col] * 100))
    axes[0].plot([lo, hi], [lo, hi], color="black", lw=0.8, label="y = x")
    axes[0].axhline(0, color="grey", lw=0.5)
    axes[0].axvline(0, color="grey", lw=0.5)
    axes[0].set_xlabel("true PerUserGap (pp)")
    axes[0].set_ylabel("gap or estimate (pp)")
    axes[0].set_title(f"seed {seed}" if seed is not None else "all runs", fontsize=9)
    axes[0].legend(fontsize=7)
    keys = [k for k in ("aggregate_gap", "ips_model", "ips_counts", "ips_oracle", "ips_estimand") if k in table.index]
    short = {
        "aggregate_gap": "AggregateGap",
        "ips_model": "IPS model\n(paper's)",
        "ips_counts": "IPS counts",
        "ips_oracle": "IPS oracle\n1/n_s(u)",
        "ips_estimand": "IPS estimand\n(no sampling)",
    }
    x = np.arange(len(keys))
    m = table.loc[keys, "mean_abs_error_pp"].to_numpy()
    sd = table.loc[keys, "sd_over_seeds_pp"].fillna(0).to_numpy()
    ax = axes[1]
    ax.bar(
        x - 0.2,
        m,
        0.4,
        yerr=sd,
        capsize=3,
        color=[GAP_SERIES[k][1] for k in keys],
        label="facterlab (mean ± sd over seeds)",
    )
    paper = table.loc[keys, "paper_pp"].to_numpy()
    has = np.isfinite(paper)
    ax.bar(x[has] + 0.2, paper[has], 0.4, color="lightgrey", edgecolor="black", label="paper")
    half = 0.5 * table.loc["aggregate_gap", "mean_abs_error_pp"]
    ax.axhline(half, color="black", ls="--", lw=0.8, label="half of the aggregate's error (acceptance)")
    n_seeds = int(table["n_seeds"].iloc[0])
    for xi, k, v in zip(x, keys, m):
        txt = f"{v:.2f}"
        if k != "aggregate_gap":
            ok = int(table.loc[k, "seeds_passing_half_rule"])
            txt += f"\n{'passes' if ok == n_seeds else 'fails' if ok == 0 else 'mixed'} ({ok}/{n_seeds})"
        ax.text(xi - 0.2, v + sd[list(keys).index(k)], txt, ha="center", va="bottom", fontsize=7)
    ax.set_xticks(x, [short[k] for k in keys], fontsize=8)
    ax.set_ylabel("mean |x - PerUserGap| (pp)")
    share = df["share_defined"]
    ax.set_title(
        f"users with relevant items of both groups: mean {share.mean():.1%}, min {share.min():.1%}", fontsize=9
    )
    ax.legend(fontsize=7, loc="upper right")
    if title:
        fig.suptitle(title, fontsize=10)
    fig.tight_layout()
    return fig


def plot_held_per_user_gap(held: dict, title: str = ""):
    """Fig 4 panel: the AggregateGap against density and noise with the PerUserGap held fixed
    (the bias recalibrated at every point), mean ± sd over seeds; ``held`` maps the knob to the
    summary of :func:`facterlab.simpson.study.hold_per_user_gap`."""
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, len(held), figsize=(4.8 * len(held), 4), squeeze=False)
    for ax, (p, s) in zip(axes[0], held.items()):
        for col in ("aggregate_gap", "per_user_gap"):
            label, color = GAP_SERIES[col]
            band(ax, s, p, col, "PerUserGap (held fixed)" if col == "per_user_gap" else label, color)
        ax.axhline(0, color="black", lw=0.6)
        ax.set_xlabel(LABELS.get(p, p))
        ax.set_ylabel("exposure gap (pp, group 0 - group 1)")
    axes[0][0].legend(fontsize=8)
    if title:
        fig.suptitle(title, fontsize=10)
    return fig


def plot_variant_study(verdicts, title: str = ""):
    """The reading study: per named reading, how far each knob moves AggregateGap - PerUserGap (pp)
    and the mean errors of the aggregate and of the model IPS (pp)."""
    import matplotlib.pyplot as plt
    import numpy as np

    fig, axes = plt.subplots(1, 2, figsize=(12, 3.8))
    names = list(verdicts.index)
    y = np.arange(len(names))
    axes[0].barh(y - 0.2, verdicts["sigma1_range_agg_minus_pu_pp"], 0.4, label=r"noise $\sigma_1$", color="#9467bd")
    axes[0].barh(y + 0.2, verdicts["d1_range_agg_minus_pu_pp"], 0.4, label="density $d_1$", color="#ff7f0e")
    axes[0].axvline(1.0, color="black", ls="--", lw=0.8, label="1 pp rule")
    axes[0].set_yticks(y, names, fontsize=8)
    axes[0].set_xlabel("range of AggregateGap - PerUserGap over the knob (pp)")
    axes[0].legend(fontsize=8)
    axes[1].barh(
        y - 0.2,
        verdicts["mean_abs_aggregate_error_pp"],
        0.4,
        label="AggregateGap",
        color=GAP_SERIES["aggregate_gap"][1],
    )
    axes[1].barh(
        y + 0.2, verdicts["mean_abs_ips_model_error_pp"], 0.4, label="IPS model", color=GAP_SERIES["ips_model"][1]
    )
    axes[1].set_yticks(y, [""] * len(names))
    axes[1].set_xlabel("mean |x - PerUserGap| (pp)")
    axes[1].legend(fontsize=8)
    if title:
        fig.suptitle(title, fontsize=10)
    fig.tight_layout()
    return fig
