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


def plot_gap_sweeps(summaries: dict, series=("aggregate_gap", "per_user_gap"), title: str = "",
                    params=("d1", "sigma1", "bias")):
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


def plot_grid(df, summary: dict, title: str = ""):
    """160-simulation grid: estimated gaps against the true PerUserGap (pp), with y = x."""
    import matplotlib.pyplot as plt
    import numpy as np

    fig, axes = plt.subplots(1, 2, figsize=(11, 4.6))
    pu = df["per_user_gap"].to_numpy() * 100
    lo, hi = np.nanmin(pu), np.nanmax(pu)
    for col in ("aggregate_gap", "ips_counts", "ips_model"):
        label, color = GAP_SERIES[col]
        axes[0].scatter(pu, df[col] * 100, s=12, alpha=0.7, color=color, label=label)
        lo, hi = min(lo, np.nanmin(df[col] * 100)), max(hi, np.nanmax(df[col] * 100))
    axes[0].plot([lo, hi], [lo, hi], color="black", lw=0.8, label="y = x")
    axes[0].axhline(0, color="grey", lw=0.5)
    axes[0].axvline(0, color="grey", lw=0.5)
    axes[0].set_xlabel("true PerUserGap (pp)")
    axes[0].set_ylabel("gap or estimate (pp)")
    axes[0].legend(fontsize=8)
    names = ["aggregate", "IPS counts", "IPS model"]
    ours = [summary["mean_abs_aggregate_minus_per_user_pp"], summary["mean_abs_ips_counts_minus_per_user_pp"],
            summary["mean_abs_ips_model_minus_per_user_pp"]]
    paper = [4.0, 0.9, 0.9]
    x = np.arange(3)
    axes[1].bar(x - 0.2, ours, 0.4, label="facterlab", color=[PALETTE["aggregate"], PALETTE["ips_counts"], PALETTE["ips_model"]])
    axes[1].bar(x + 0.2, paper, 0.4, label="paper (estimate: method not split)", color="lightgrey", edgecolor="black")
    for xi, v in zip(x, ours):
        axes[1].text(xi - 0.2, v, f"{v:.2f}", ha="center", va="bottom", fontsize=8)
    axes[1].set_xticks(x, names)
    axes[1].set_ylabel("mean |gap - PerUserGap| (pp)")
    axes[1].legend(fontsize=8)
    if title:
        fig.suptitle(title, fontsize=10)
    return fig
