"""Figures of the Simpson part (Prost et al. 2022, Figs 3-5 and the 160-simulation grid).

matplotlib is imported inside the functions; every figure takes a ``title`` that the notebooks
build with :func:`facterlab.reporting.figures.title_with_provenance` (the data is synthetic).
Gaps are drawn in percentage points (pp = 100 x difference of mean exposures), as the mean over seeds
with a band: the 95% Student-t interval of the mean when the number of seeds is given (``n_seeds``),
else ± 1 sd; the caption under each figure says which, and how many simulated users and seeds.
"""

from __future__ import annotations

from facterlab.style import PALETTE, add_caption, degenerate_note

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


def band(
    ax, summary, x: str, col: str, label: str, color: str, scale: float = 100.0, n_seeds: int | None = None, **kw
) -> None:
    """Line of ``<col>_mean`` against ``x`` (values multiplied by ``scale``) with a band: the 95%
    Student-t interval of the mean over ``n_seeds`` seeds (``t_{n-1} sd / sqrt(n)``), or ± ``<col>_sd``
    when ``n_seeds`` is None."""
    xs = summary[x].to_numpy()
    m = summary[f"{col}_mean"].to_numpy() * scale
    s = summary[f"{col}_sd"].fillna(0).to_numpy() * scale * _t_factor(n_seeds)
    ax.plot(xs, m, marker="o", ms=3, color=color, label=label, **kw)
    ax.fill_between(xs, m - s, m + s, color=color, alpha=0.2, lw=0)


def _t_factor(n_seeds: int | None) -> float:
    """sd -> half-width of the 95% Student-t interval of a mean over ``n_seeds`` (1 for None: ± sd).

    >>> round(_t_factor(10), 3), _t_factor(None), _t_factor(1)
    (0.715, 1.0, 0.0)
    """
    if n_seeds is None:
        return 1.0
    if n_seeds < 2:
        return 0.0
    from scipy import stats

    return float(stats.t.ppf(0.975, n_seeds - 1)) / n_seeds**0.5


def band_text(n_seeds: int | None, n_users: int | None = None) -> str:
    """The caption line of a seed-averaged figure.

    >>> band_text(10, 10_000)
    'n = 10,000 simulated users per simulation, 10 seeds per point; line: mean over seeds, band: 95% Student-t interval of the mean.'
    """
    who = f"n = {n_users:,} simulated users per simulation, " if n_users else "n = "
    if n_seeds is None:
        return f"{who}seeds per point as in the title; line: mean over seeds, band: ± 1 sd over seeds."
    if n_seeds < 2:
        return f"{who}1 seed per point; line: that seed's value, no interval."
    return f"{who}{n_seeds} seeds per point; line: mean over seeds, band: 95% Student-t interval of the mean."


def _too_few_points(ax, summary, x: str) -> bool:
    if summary is None or len(summary) < 2:
        degenerate_note(ax, f"{0 if summary is None else len(summary)} value(s) of {x}: fewer than 2 points")
        return True
    return False


def plot_factors(summaries: dict, title: str = "", n_seeds: int | None = None, n_users: int | None = None):
    """Fig 3: parameters -> factors.  d_1 -> competition (n(u*), C(u*)); sigma_1 -> performance
    nDCG(u*); b -> PerUserGap (pp)."""
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 3, figsize=(14, 4))
    s = summaries["d1"]
    ax = axes[0]
    band(ax, s, "d1", "probe_competition", "competition C(u*)", PALETTE["fair"], scale=1.0, n_seeds=n_seeds)
    ax.set_ylabel("C(u*) (best mean exposure of its relevant items)")
    ax2 = ax.twinx()
    band(
        ax2, s, "d1", "probe_n_relevant", "relevant items n(u*)", PALETTE["facter"], scale=1.0, ls="--", n_seeds=n_seeds
    )
    ax2.set_ylabel("n(u*)")
    ax2.grid(False)
    h1, l1 = ax.get_legend_handles_labels()
    h2, l2 = ax2.get_legend_handles_labels()
    ax.legend(h1 + h2, l1 + l2, fontsize=8, loc="best")
    ax.set_xlabel(LABELS["d1"])
    ax.set_title("competition")
    ax = axes[1]
    band(
        ax,
        summaries["sigma1"],
        "sigma1",
        "probe_ndcg",
        "performance nDCG(u*)",
        PALETTE["fair"],
        scale=1.0,
        n_seeds=n_seeds,
    )
    band(
        ax,
        summaries["sigma1"],
        "sigma1",
        "mean_ndcg",
        "mean nDCG over users",
        PALETTE["neutral"],
        scale=1.0,
        ls="--",
        n_seeds=n_seeds,
    )
    ax.set_xlabel(LABELS["sigma1"])
    ax.set_ylabel("nDCG (full list, binary relevance)")
    ax.set_title("performance")
    ax.legend(fontsize=8)
    ax = axes[2]
    band(ax, summaries["bias"], "bias", "per_user_gap", "PerUserGap", PALETTE["per_user"], n_seeds=n_seeds)
    ax.axhline(0, color="black", lw=0.6)
    ax.set_xlabel(LABELS["bias"])
    ax.set_ylabel("PerUserGap (pp, group 0 - group 1)")
    ax.set_title("per-user gap")
    ax.legend(fontsize=8)
    for a, key in zip(axes, ("d1", "sigma1", "bias")):
        _too_few_points(a, summaries.get(key), key)
    if title:
        fig.suptitle(title, fontsize=10)
    add_caption(fig, band_text(n_seeds, n_users))
    return fig


def plot_gap_sweeps(
    summaries: dict,
    series=("aggregate_gap", "per_user_gap"),
    title: str = "",
    params=("d1", "sigma1", "bias"),
    n_seeds: int | None = None,
    n_users: int | None = None,
):
    """Fig 4 (and Fig 5 with the IPS series): gaps (pp) against each swept parameter."""
    import matplotlib.pyplot as plt

    params = [p for p in params if p in summaries]
    fig, axes = plt.subplots(1, len(params), figsize=(4.8 * len(params), 4), squeeze=False)
    for ax, p in zip(axes[0], params):
        for col in series:
            if f"{col}_mean" in summaries[p]:
                label, color = GAP_SERIES[col]
                band(ax, summaries[p], p, col, label, color, n_seeds=n_seeds)
        ax.axhline(0, color="black", lw=0.6)
        ax.set_xlabel(LABELS.get(p, p))
        ax.set_ylabel("exposure gap (pp, group 0 - group 1)")
        _too_few_points(ax, summaries[p], p)
    axes[0][0].legend(fontsize=8)
    if title:
        fig.suptitle(title, fontsize=10)
    add_caption(fig, band_text(n_seeds, n_users))
    return fig


def plot_grid(df, table, title: str = "", seed=None):
    """The grid, compared like for like.  Left: every estimate against the true PerUserGap (pp) for
    one seed, with y = x.  Right: mean ``|x - PerUserGap|`` (pp), mean ± sd over the grid's seeds, per
    named estimator (``table`` from :func:`facterlab.simpson.sweeping.comparison_table`), the paper's
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
    n_seeds = int(table["n_seeds"].iloc[0])
    sd = table.loc[keys, "sd_over_seeds_pp"].fillna(0).to_numpy() * _t_factor(n_seeds)
    ax = axes[1]
    ax.bar(
        x - 0.2,
        m,
        0.4,
        yerr=sd,
        capsize=3,
        color=[GAP_SERIES[k][1] for k in keys],
        label=f"facterlab (mean over {n_seeds} seeds, 95% t-interval)",
    )
    paper = table.loc[keys, "paper_pp"].to_numpy()
    has = np.isfinite(paper)
    ax.bar(x[has] + 0.2, paper[has], 0.4, color="lightgrey", edgecolor="black", label="paper")
    half = 0.5 * table.loc["aggregate_gap", "mean_abs_error_pp"]
    ax.axhline(half, color="black", ls="--", lw=0.8, label="half of the aggregate's error (acceptance)")
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
    if len(one) < 2:
        degenerate_note(axes[0], f"{len(one)} simulation(s): fewer than 2 points")
    if title:
        fig.suptitle(title, fontsize=10)
    fig.tight_layout()
    n_users = sorted(df["n_users"].unique()) if "n_users" in df else []
    add_caption(
        fig,
        f"n = {len(one)} simulations on the left (one seed), {len(df)} in all ({n_seeds} seeds)"
        + (f", {int(n_users[0]):,} simulated users each" if len(n_users) == 1 else "")
        + f". Right: bars = mean over the {n_seeds} seeds' grid errors, error bars = 95% Student-t interval"
        + (" (one seed: none)." if n_seeds < 2 else "."),
    )
    return fig


def plot_held_per_user_gap(held: dict, title: str = "", n_seeds: int | None = None, n_users: int | None = None):
    """Fig 4 panel: the AggregateGap against density and noise with the PerUserGap held fixed
    (the bias recalibrated at every point), mean ± sd over seeds; ``held`` maps the knob to the
    summary of :func:`facterlab.simpson.study.hold_per_user_gap`."""
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, len(held), figsize=(4.8 * len(held), 4), squeeze=False)
    for ax, (p, s) in zip(axes[0], held.items()):
        for col in ("aggregate_gap", "per_user_gap"):
            label, color = GAP_SERIES[col]
            band(ax, s, p, col, "PerUserGap (held fixed)" if col == "per_user_gap" else label, color, n_seeds=n_seeds)
        ax.axhline(0, color="black", lw=0.6)
        ax.set_xlabel(LABELS.get(p, p))
        ax.set_ylabel("exposure gap (pp, group 0 - group 1)")
        _too_few_points(ax, s, p)
    axes[0][0].legend(fontsize=8)
    if title:
        fig.suptitle(title, fontsize=10)
    add_caption(fig, band_text(n_seeds, n_users))
    return fig


def plot_variant_study(verdicts, title: str = "", n_seeds: int | None = None, n_users: int | None = None):
    """The reading study: per named reading, the *signed* change of AggregateGap - PerUserGap (pp) from
    the knob's lowest to its highest value (noise sigma_1 0 -> 10, density d_1 1.5 -> 4), paired per seed,
    with its 95% Student-t interval over seeds, and the direction it shows ("rises", "falls", or
    "inconclusive" when the interval covers 0); right, the model IPS's error ratio (``mean |IPS - PerUser| /
    mean |Agg - PerUser|``) with its interval over seeds against the half rule.  Older verdict tables
    without the interval columns are drawn without intervals."""
    import matplotlib.pyplot as plt
    import numpy as np

    fig, axes = plt.subplots(1, 2, figsize=(12.5, 4.2))
    names = list(verdicts.index)
    y = np.arange(len(names))

    def col(name, default=np.nan):
        return verdicts[name].to_numpy(dtype=float) if name in verdicts else np.full(len(names), default)

    for off, knob, label, colour in ((-0.2, "sigma1", r"noise $\sigma_1$: 0 -> 10", "#9467bd"),
                                     (0.2, "d1", "density $d_1$: 1.5 -> 4", "#ff7f0e")):  # fmt: skip
        eff = col(f"{knob}_effect_pp")
        lo, hi = col(f"{knob}_effect_lo"), col(f"{knob}_effect_hi")
        err = np.nan_to_num(np.vstack([eff - lo, hi - eff]).clip(min=0)) if np.isfinite(lo).any() else None
        axes[0].barh(y + off, np.nan_to_num(eff), 0.4, xerr=err, capsize=3, label=label, color=colour)
        dirs = verdicts[f"{knob}_effect_direction"] if f"{knob}_effect_direction" in verdicts else [""] * len(names)
        for yi, e, d in zip(y + off, eff, dirs):
            if np.isfinite(e):
                axes[0].text(0, yi, f" {d} " if e < 0 else f" {d}", va="center", ha="left" if e < 0 else "right",
                             fontsize=7)  # fmt: skip
    axes[0].axvline(0, color="black", lw=0.8)
    for x in (-1.0, 1.0):
        axes[0].axvline(x, color="black", ls="--", lw=0.8, label="1 pp rule" if x > 0 else None)
    axes[0].set_yticks(y, names, fontsize=8)
    axes[0].set_xlabel("change of AggregateGap - PerUserGap, lowest -> highest knob value (pp)")
    axes[0].legend(fontsize=7, loc="best")
    ratio, rlo, rhi = col("model_error_ratio"), col("model_error_ratio_lo"), col("model_error_ratio_hi")
    rerr = np.nan_to_num(np.vstack([ratio - rlo, rhi - ratio]).clip(min=0)) if np.isfinite(rlo).any() else None
    axes[1].barh(y, np.nan_to_num(ratio), 0.5, xerr=rerr, capsize=3, color=GAP_SERIES["ips_model"][1])
    axes[1].axvline(0.5, color="black", ls="--", lw=0.8, label="half rule (0.5)")
    verdict = verdicts["model_ips_verdict"] if "model_ips_verdict" in verdicts else [""] * len(names)
    for yi, r, h, v in zip(y, ratio, rhi, verdict):
        if np.isfinite(r):  # right of the interval
            axes[1].text(max(r, h) if np.isfinite(h) else r, yi, f"  {v}", va="center", ha="left", fontsize=7)
    axes[1].set_yticks(y, [""] * len(names))
    axes[1].set_xlabel("model IPS error / aggregate error (mean abs, vs PerUserGap)")
    axes[1].legend(fontsize=7)
    if len(names) == 0:
        degenerate_note(axes[0], "no reading in the study")
    if title:
        fig.suptitle(title, fontsize=10)
    fig.tight_layout()
    who = f"n = {n_users:,} simulated users per simulation, " if n_users else "n = "
    add_caption(
        fig,
        f"{who}{n_seeds if n_seeds else 'the stated number of'} seed(s) per point. Left: signed change, paired per "
        "seed (same seed at both ends), error bars = 95% Student-t interval over seeds; 'rises'/'falls' only when "
        "the interval excludes 0, else 'inconclusive'. Right: error ratio with its 95% interval over seeds; "
        "'inconclusive' when the interval covers the half rule.",
    )
    return fig
