"""Notebook 09's figures: FACTER's claims against the simulated recommender with known bias, drawn from
the tables of :mod:`facterlab.reporting.ground_truth` (coverage, repair, fairness, the flag as a
detector, the score decomposed by the truth, and the twin monitor's repair).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from facterlab.reporting.claims import clopper_pearson
from facterlab.reporting.ground_truth import truth_frame
from facterlab.reporting.labels import add_caption, degenerate_note, mean_ci
from facterlab.reporting.labels import label as display_label
from facterlab.style import PALETTE, apply_style, title_with_provenance

__all__ = [
    "plot_coverage",
    "plot_repair",
    "plot_fairness",
    "plot_detector",
    "plot_decomposition",
    "plot_twin_repair",
    "plot_power",
]


def _fig_title(title: str, dataset: str, is_synthetic: bool, profile: str) -> str:
    return title_with_provenance(title, dataset, is_synthetic, "simulated recommender", profile)


def _finish(fig, title: str, dataset: str, is_synthetic: bool, profile: str):
    """The figure's title (with what made it) over its panels, laid out; returns the figure."""
    fig.suptitle(_fig_title(title, dataset, is_synthetic, profile), fontsize=9)
    fig.tight_layout()
    return fig


def plot_coverage(cov: pd.DataFrame, dataset: str, is_synthetic: bool, profile: str = "", note: str = ""):
    """Exceedance rate against alpha with 99% Clopper-Pearson bars and the conformal band."""
    import matplotlib.pyplot as plt

    apply_style()
    fig, ax = plt.subplots(figsize=(5.6, 4.4))
    a = cov["alpha"].to_numpy()
    lim = float(max(a.max(), cov["ci_hi"].max())) * 1.1
    ax.fill_between(
        [0, lim],
        [0 - 1.0 / (cov["n_calib"].min() + 1), lim - 1.0 / (cov["n_calib"].min() + 1)],
        [0, lim],
        color="#2ca02c",
        alpha=0.15,
        label="conformal band [alpha - 1/(n+1), alpha]",
    )
    ax.plot([0, lim], [0, lim], color="#2ca02c", lw=1)
    ax.errorbar(
        a,
        cov["rate"],
        yerr=[cov["rate"] - cov["ci_lo"], cov["ci_hi"] - cov["rate"]],
        fmt="o",
        color="#d62728",
        capsize=3,
        label="measured P(S > Q0), 99% CI",
    )
    ax.set_xlim(0, lim)
    ax.set_ylim(0, lim)
    ax.set_xlabel("alpha")
    ax.set_ylabel("share of test rows with S > Q0")
    ax.legend(loc="upper left", fontsize=8, frameon=True)
    n = int(cov["n_test"].iloc[0])
    ax.set_title(
        _fig_title(f"Coverage of Q0 (Neutral test rows, n = {n}{note})", dataset, is_synthetic, profile), fontsize=9
    )
    fig.tight_layout()
    return fig


def plot_repair(rep: pd.DataFrame, dataset: str, is_synthetic: bool, profile: str = ""):
    """Violations per pass as shares of the test rows, one panel per beta: solid V(Q0), dashed V(t),
    one colour per rho; a second row of panels: share of top-1 items the bias changed."""
    import matplotlib.pyplot as plt

    apply_style()
    betas = sorted(rep["beta"].unique())
    rhos = sorted(rep["rho"].unique())
    colours = dict(zip(rhos, ["#7f7f7f", "#ff7f0e", "#d62728", "#1f77b4", "#2ca02c"]))
    fig, axes = plt.subplots(2, len(betas), figsize=(3.6 * len(betas), 6.2), sharex=True, squeeze=False)
    for j, beta in enumerate(betas):
        g = rep[rep["beta"] == beta]
        ax, bx = axes[0, j], axes[1, j]
        for rho in rhos:
            h = (
                g[g["rho"] == rho]
                .groupby("pass")
                .agg(
                    V_q0=("V_q0", "sum"),
                    V_t=("V_adaptive", "sum"),
                    n=("n", "sum"),
                    biased=("share_top1_biased", "mean"),
                    seeds=("seed", "nunique"),
                )
            )
            if h.empty:
                continue
            for col, style, name, alpha in (("V_q0", "-o", "V(Q0)", 1.0), ("V_t", "--s", "V(t)", 0.8)):
                rate = h[col] / h["n"]
                ci = [clopper_pearson(int(k), int(n), 0.95) for k, n in zip(h[col], h["n"])]
                err = [rate.to_numpy() - [c[0] for c in ci], [c[1] for c in ci] - rate.to_numpy()]
                ax.errorbar(
                    h.index, rate, yerr=err, fmt=style, capsize=2, color=colours[rho], alpha=alpha,
                    label=f"rho={rho:g}: {name}",
                )  # fmt: skip
            bx.plot(
                h.index, h["biased"], "-o", color=colours[rho], label=f"rho={rho:g} ({int(h['seeds'].max())} seed(s))"
            )
        ax.set_title(f"beta = {beta:g}", fontsize=9)
        ax.set_ylabel("violations / test rows" if j == 0 else "")
        bx.set_ylabel("share of top-1 changed by bias" if j == 0 else "")
        bx.set_xlabel("pass")
        ax.set_xticks(sorted(rep["pass"].unique()))
        ax.set_ylim(bottom=0)
        bx.set_ylim(0, max(0.05, float(rep["share_top1_biased"].max()) * 1.15))
        if g.empty:
            degenerate_note(ax, f"no run with beta = {beta:g}")
    axes[0, -1].legend(fontsize=7, loc="center left", bbox_to_anchor=(1.02, 0.5))
    axes[1, -1].legend(fontsize=7, loc="center left", bbox_to_anchor=(1.02, 0.5))
    per_pass = rep.groupby(["beta", "rho", "pass"])["n"].sum()
    add_caption(
        fig,
        f"n = {per_pass.min()}-{per_pass.max()} test rows per (beta, rho, pass), pooled over "
        f"{int(rep['seed'].nunique())} seed(s). Error bars: 95% Clopper-Pearson interval of the pooled violation "
        "share; bottom row: mean share over seeds, no interval.",
    )
    title = "FACTER's repair loop against a recommender that listens with probability rho"
    return _finish(fig, title, dataset, is_synthetic, profile)


def plot_fairness(fair: pd.DataFrame, dataset: str, is_synthetic: bool, profile: str = ""):
    """CFR (left) and SNSR (right) of each method against beta: mean over seeds with 95% Student-t
    intervals (no interval with one seed)."""
    import matplotlib.pyplot as plt

    apply_style()
    fig, axes = plt.subplots(1, 2, figsize=(9.5, 3.9))
    n_seeds = int(fair["seed"].nunique())
    for ax, col, label in (
        (axes[0], "cfr_multi", "CFR (multi-attribute flip)"),
        (axes[1], "snsr_joint", "SNSR (joint groups)"),
    ):
        for k, (method, g) in enumerate(fair.groupby("method", sort=False)):
            cells = [(b, mean_ci(v.to_numpy(dtype=float))) for b, v in g.groupby("beta")[col]]
            x = np.array([b for b, _ in cells], dtype=float) + (k - 1) * 0.03
            mean = np.array([c[0] for _, c in cells])
            err = np.nan_to_num(np.array([[c[0] - c[1] for _, c in cells], [c[2] - c[0] for _, c in cells]]))
            ax.errorbar(
                x,
                mean,
                yerr=err if n_seeds > 1 else None,
                fmt="-o",
                capsize=3,
                color=PALETTE.get(method),
                label=display_label(method),
            )
        ax.set_xlabel("bias strength beta (score SDs)")
        ax.set_ylabel(label)
        ax.set_ylim(bottom=0)
    missing = fair.loc[fair["snsr_joint"].isna(), "snsr_missing"].unique()
    if len(missing):
        axes[1].text(
            0.02,
            0.95,
            "n/a: " + "; ".join(str(m) for m in missing)[:90],
            transform=axes[1].transAxes,
            fontsize=7,
            va="top",
        )
    axes[0].legend(fontsize=8)
    add_caption(
        fig,
        f"n = {n_seeds} seed(s) (runs) per point; each run's CFR is a mean over its sampled CFR rows, SNSR over its "
        "test rows. "
        + ("Error bars: 95% Student-t interval over the seeds." if n_seeds > 1 else "One seed: no interval."),
    )
    title = f"Counterfactual fairness against the true bias ({n_seeds} seed(s) per point)"
    return _finish(fig, title, dataset, is_synthetic, profile)


def plot_detector(det: pd.DataFrame, det_by_beta: pd.DataFrame, dataset: str, is_synthetic: bool, profile: str = ""):
    """Left: precision and recall of S > Q0 against lambda, one line per tau_rho (base rate dotted);
    right: recall and precision against beta at the run's lambda and tau_rho."""
    import matplotlib.pyplot as plt

    apply_style()
    fig, axes = plt.subplots(1, 2, figsize=(10, 3.9))
    ax = axes[0]
    for k, (tau, g) in enumerate(det.groupby("tau_rho", sort=True)):
        c = ["#1f77b4", "#ff7f0e", "#2ca02c", "#9467bd"][k % 4]
        ax.errorbar(
            g["lambda"],
            g["precision"],
            yerr=_cp_err(g["true_pos"], g["flagged"], g["precision"]),
            fmt="-o",
            capsize=2,
            color=c,
            label=f"precision, tau_rho={tau:g} ({g['share_no_neighbour'].iloc[0]:.0%} rows w/o neighbour)",
        )
        ax.errorbar(
            g["lambda"],
            g["recall"],
            yerr=_cp_err(g["true_pos"], g["biased"], g["recall"]),
            fmt="--s",
            capsize=2,
            color=c,
            label=f"recall, tau_rho={tau:g}",
        )
    ax.axhline(float(det["base_rate"].iloc[0]), color="k", ls=":", lw=1, label="base rate (share biased)")
    ax.set_xlabel("lambda (weight of the fairness penalty)")
    ax.set_ylabel("precision / recall")
    ax.set_ylim(0, 1)
    ax.legend(fontsize=6.5, loc="upper left", bbox_to_anchor=(0.0, -0.3), ncol=2, frameon=False)
    ax.set_title(f"Detector vs lambda and tau_rho (n = {int(det['biased'].iloc[0])} biased rows)", fontsize=9)
    bx = axes[1]
    d = det_by_beta[det_by_beta["beta"] > 0]
    if len(d) == 0:
        degenerate_note(bx, "no run with beta > 0: nothing is biased")
    bx.errorbar(
        d["beta"], d["recall"], yerr=_cp_err(d["true_pos"], d["biased"], d["recall"]), fmt="-o", capsize=2,
        color="#d62728", label="recall",
    )  # fmt: skip
    bx.errorbar(
        d["beta"], d["precision"], yerr=_cp_err(d["true_pos"], d["flagged"], d["precision"]), fmt="-s", capsize=2,
        color="#1f77b4", label="precision",
    )  # fmt: skip
    bx.plot(d["beta"], d["base_rate"], ":", color="k", label="base rate")
    bx.set_xlabel("bias strength beta")
    bx.set_ylim(0, 1)
    bx.legend(fontsize=8)
    bx.set_title("Detector vs beta (run's lambda, tau_rho)", fontsize=9)
    fig.suptitle(
        _fig_title("Violations as a detector of outputs the bias changed (top-1)", dataset, is_synthetic, profile),
        fontsize=9,
    )
    base = float(det["base_rate"].iloc[0])
    n_rows = int(round(float(det["biased"].iloc[0]) / base)) if base > 0 else None  # biased = base rate x rows
    add_caption(
        fig,
        (f"n = {n_rows} test rows, " if n_rows else "")
        + f"{int(det['biased'].iloc[0])} of them biased (left); right: one run per beta. "
        "Error bars: 95% Clopper-Pearson intervals (precision over flagged rows, recall over biased rows).",
    )
    fig.tight_layout()
    return fig


def _cp_err(k, n, rate):
    """Asymmetric 95% Clopper-Pearson error bars for rates k/n (zero-length where n = 0)."""
    lo, hi = [], []
    for kk, nn, r in zip(k, n, rate):
        if int(nn) <= 0 or not np.isfinite(r):
            lo.append(0.0)
            hi.append(0.0)
            continue
        a, b = clopper_pearson(int(kk), int(nn), 0.95)
        lo.append(max(0.0, float(r) - a))
        hi.append(max(0.0, b - float(r)))
    return np.array([lo, hi])


def plot_decomposition(results: dict, dataset: str, is_synthetic: bool, profile: str = ""):
    """ECDFs of d and S for the Neutral rows the bias changed (solid) and the others (dashed), one panel
    pair per beta (``results``: beta -> run), Q0 drawn on the S panels."""
    import matplotlib.pyplot as plt

    apply_style()
    betas = sorted(results)
    fig, axes = plt.subplots(2, len(betas), figsize=(3.4 * len(betas), 5.6), squeeze=False)
    for j, b in enumerate(betas):
        r = results[b]
        rec = r.rows["neutral"]
        truth = truth_frame(rec)["top1_changed"].to_numpy(dtype=bool)
        for i, col in enumerate(("d", "S")):
            ax = axes[i, j]
            for mask, style, name in ((truth, "-", "bias changed top-1"), (~truth, "--", "unchanged")):
                v = np.sort(rec[col].to_numpy(dtype=float)[mask])
                if len(v):
                    ax.step(v, np.arange(1, len(v) + 1) / len(v), style, where="post", label=f"{name} (n={len(v)})")
            if col == "S":
                ax.axvline(float(r.record.metrics.calibration.q0), color="k", lw=1, ls=":", label="Q0")
            ax.set_xlabel(col)
            ax.set_ylabel("ECDF" if j == 0 else "")
            ax.set_title(f"beta = {b:g}: {col}", fontsize=9)
            if not truth.any():
                degenerate_note(ax, "no row changed by the bias")
            ax.legend(fontsize=6.5, loc="lower right")
    add_caption(
        fig,
        "Neutral test rows of one run per beta (first pass). Identical curves: the score cannot separate biased rows.",
    )
    return _finish(fig, "Faithful FACTER's S = d + lambda Delta, split by the truth", dataset, is_synthetic, profile)


def plot_twin_repair(shares: pd.DataFrame, dataset: str, is_synthetic: bool, profile: str = ""):
    """Per monitor x compliance (columns): V(Q0)/n (top) and the share of top-1 items the push changed
    (bottom) per pass, one line per rho, Fair's share dotted (pooled over the seeds in ``shares``)."""
    import matplotlib.pyplot as plt

    apply_style()
    keys = sorted({(m, c) for m, c in zip(shares["monitor"], shares["compliance"])})
    fig, axes = plt.subplots(2, len(keys), figsize=(3.4 * len(keys), 5.6), sharex=True, squeeze=False)
    colours = {0.0: "#7f7f7f", 1.0: "#d62728"}
    for j, (mon, comp) in enumerate(keys):
        g = shares[(shares["monitor"] == mon) & (shares["compliance"] == comp)]
        for rho, h in g.groupby("rho"):
            p = h.groupby("pass")[["V_q0", "changed", "n", "fair_changed", "fair_n"]].sum()
            axes[0, j].plot(p.index, p["V_q0"] / p["n"], "-o", color=colours.get(rho, "#1f77b4"), label=f"rho={rho:g}")
            axes[1, j].plot(
                p.index, p["changed"] / p["n"], "-o", color=colours.get(rho, "#1f77b4"), label=f"rho={rho:g}"
            )
            axes[1, j].axhline(
                float(p["fair_changed"].iloc[0] / p["fair_n"].iloc[0]), color=colours.get(rho, "#1f77b4"), ls=":", lw=1
            )
        short = "faithful FACTER" if mon.startswith("FACTER") else "twin monitor (facterlab)"
        axes[0, j].set_title(f"{short}\n{comp} compliance", fontsize=8)
        axes[1, j].set_xticks(sorted(g["pass"].unique()))
        axes[1, j].set_xlabel("pass")
        axes[0, j].set_ylim(bottom=0)
        axes[1, j].set_ylim(bottom=0)
    axes[0, 0].set_ylabel("flagged / rows")
    axes[1, 0].set_ylabel("top-1 changed by push")
    axes[0, -1].legend(fontsize=7)
    add_caption(
        fig,
        "Dotted: Fair on the same rows (the same prompt without rules). Beta and seeds: the runs named in metrics.json.",
    )
    betas = ", ".join(f"{b:g}" for b in sorted(shares["beta"].unique()))
    seeds = ", ".join(str(x) for x in sorted(shares["seed"].unique()))
    title = f"Repair by monitor and rule compliance (beta = {betas}, seed {seeds})"
    return _finish(fig, title, dataset, is_synthetic, profile)


def plot_power(power: pd.DataFrame, dataset: str, is_synthetic: bool, profile: str = ""):
    """Recall and precision of the twin monitor against the requests each test row costs (2k for k draws per
    request), one line per twin statistic (``facter.twin_distance``) and sampling temperature, with 95%
    Clopper-Pearson bars: recall under the top-1 label (the demographics changed the row's or its twin's
    top-1) and the list label (... top-10 set), precision under both
    (:func:`facterlab.reporting.twin_acceptance.power_frame`)."""
    import matplotlib.pyplot as plt

    apply_style()
    fig, axes = plt.subplots(1, 3, figsize=(12, 3.6), sharey=True)
    power = power if "statistic" in power.columns else power.assign(statistic="top1")
    colors = list(PALETTE.values())
    for i, ((stat, temp), g) in enumerate(power.groupby(["statistic", "temperature"], sort=True)):
        g = g.sort_values("draws")
        x = g["requests_per_test_row"].to_numpy(dtype=float)
        color, style = colors[(i + 1) % len(colors)], "-" if stat == "list" else "--"
        name = f"{stat}, temperature {temp:g}"
        for ax, label, what, ls in (
            (axes[0], "either", "recall", style),
            (axes[1], "either_list", "recall", style),
            (axes[2], "either", "precision", style),
            (axes[2], "either_list", "precision", ":"),
        ):
            tp = g[f"true_pos_{label}"]
            n = g[f"positives_{label}"] if what == "recall" else g["flagged"]
            rate = g[f"{what}_{label}"].to_numpy(dtype=float)
            suffix = "" if ax is not axes[2] else (" (top-1 label)" if label == "either" else " (top-10 label)")
            ax.errorbar(x, rate, yerr=_cp_err(tp, n, rate), marker="o", capsize=3, color=color, ls=ls,
                        label=name + suffix)  # fmt: skip
    for ax, words in (
        (axes[0], "recall; label: the demographics changed the row's or its twin's top-1"),
        (axes[1], "recall; label: ... the row's or its twin's top-10 set"),
        (axes[2], "precision under both labels"),
    ):
        ax.set_xscale("log", base=2)
        ax.set_xlabel("requests per test row (2k for k draws)")
        ax.set_title(words, fontsize=8)
        ax.set_ylim(0, 1.05)
        ax.axhline(0.6, color="grey", lw=0.8, ls=":")
    axes[0].set_ylabel("Neutral rows, last pass")
    axes[0].legend(fontsize=6)
    axes[2].legend(fontsize=5)
    return _finish(
        fig, "Twin monitor under sampling: power per request, by twin statistic", dataset, is_synthetic, profile
    )
