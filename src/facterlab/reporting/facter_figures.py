"""Figures of the FACTER notebooks (house style of :mod:`facterlab.reporting.figures`).

Each function takes metrics dicts / DataFrames and returns a matplotlib figure whose title says
which dataset, model and profile made it (synthetic data says so).  matplotlib is imported inside.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from facterlab.reporting.figures import PALETTE, apply_style, title_with_provenance
from facterlab.reporting.tables import METHOD_LABELS, MissingValue, flatten_method_metrics

METHODS = ("neutral", "fair", "facter")


REPRO_N_TEST = 750  # ML-1M test rows of REPRO (docs/FACTER.md §1.2): scales its counts to rates


def _title(title: str, m: dict, profile: str) -> str:
    model = m.get("model_name") or m.get("model")
    return title_with_provenance(title, str(m.get("dataset")), bool(m.get("is_synthetic")), str(model), profile)


def method_bars(metrics: dict, keys: Sequence[str], title: str, profile: str = "", labels: dict | None = None):
    """Grouped bars: one group per metric key, one bar per method; missing values are marked 'n/a'."""
    import matplotlib.pyplot as plt

    apply_style()
    fig, ax = plt.subplots(figsize=(1.6 + 1.5 * len(keys), 3.6))
    width = 0.8 / len(METHODS)
    x = np.arange(len(keys))
    for j, method in enumerate(METHODS):
        block = (metrics.get("methods") or {}).get(method)
        if not isinstance(block, dict):
            continue
        flat = flatten_method_metrics(block)
        vals = [flat.get(k, MissingValue("absent")) for k in keys]
        heights = [0.0 if isinstance(v, MissingValue) else float(v) for v in vals]
        bars = ax.bar(x + (j - 1) * width, heights, width, label=METHOD_LABELS[method], color=PALETTE[method])
        for b, v in zip(bars, vals):
            if isinstance(v, MissingValue):
                ax.text(b.get_x() + b.get_width() / 2, 0, "n/a", ha="center", va="bottom", fontsize=7, rotation=90)
    ax.set_xticks(x)
    ax.set_xticklabels([(labels or {}).get(k, k) for k in keys])
    ax.legend(fontsize=8)
    ax.set_title(_title(title, metrics, profile), fontsize=9)
    return fig


def violations_by_pass(
    runs: Sequence[dict], title: str, profile: str = "", method: str = "facter", published: dict | None = None
):
    """Fig. 1: violations per pass against the adaptive threshold Q_t, the fixed Q0 and the final Q*
    as a share of the test rows (so that runs of different sizes compare; mean over runs, error bars
    = sd when several), and the threshold path Q0, Q1, ... (right axis).
    ``published``: optional ``{"adaptive": [...], "fixed_q0": [...], "threshold_path": [...]}``
    (REPRO's ML-1M counts, divided by its 750 test rows) drawn as hollow markers.
    The share of test and calibration rows with no counterfactual neighbour (Delta = 0 there, so S is
    the prediction error alone) is written under the bars (:func:`no_neighbour_text`)."""
    import matplotlib.pyplot as plt

    apply_style()
    kinds = (
        ("adaptive", "V(t) vs adaptive Q_t", PALETTE["facter"]),
        ("fixed_q0", "V(0) vs fixed Q0", PALETTE["neutral"]),
        ("q_star", "V vs final Q*", PALETTE["fair"]),
    )
    series: dict[str, list[list[float]]] = {k: [] for k, _, _ in kinds}
    paths = []
    for m in runs:
        block = (m.get("methods") or {}).get(method) or {}
        v = block.get("violations") or {}
        n_test = float(m.get("n_test") or np.nan)
        for k, _, _ in kinds:
            series[k].append(
                [np.nan if x is None or isinstance(x, dict) else float(x) / n_test for x in (v.get(k) or [])]
            )
        paths.append(
            [np.nan if x is None or isinstance(x, dict) else float(x) for x in (block.get("threshold_path") or [])]
        )
    n_pass = max((len(s) for k in series for s in series[k]), default=0)
    fig, ax = plt.subplots(figsize=(6.4, 3.8))
    x = np.arange(1, n_pass + 1)
    width = 0.8 / len(kinds)
    for j, (k, label, color) in enumerate(kinds):
        arr = (
            np.array([s + [np.nan] * (n_pass - len(s)) for s in series[k]], dtype=float)
            if series[k]
            else np.full((1, n_pass), np.nan)
        )
        mean = np.nanmean(arr, axis=0) if np.isfinite(arr).any() else np.full(n_pass, np.nan)
        sd = np.nanstd(arr, axis=0, ddof=1) if arr.shape[0] > 1 else None
        ax.bar(x + (j - 1) * width, np.nan_to_num(mean), width, yerr=sd, label=label, color=color, alpha=0.85)
        if published and published.get(k):
            pv = [v / REPRO_N_TEST if v is not None else np.nan for v in published[k][:n_pass]]
            ax.plot(
                x[: len(pv)] + (j - 1) * width, pv, "o", mfc="none", mec="black", label=f"REPRO {label.split(' ')[0]}"
            )
    ax.set_xlabel("pass")
    ax.set_ylabel("violations / test rows")
    ax.set_xticks(x)
    ax2 = ax.twinx()
    parr = (
        np.array([p + [np.nan] * (n_pass + 1 - len(p)) for p in paths], dtype=float)
        if paths
        else np.full((1, n_pass + 1), np.nan)
    )
    ax2.plot(
        np.arange(0, n_pass + 1),
        np.nanmean(parr, axis=0) if np.isfinite(parr).any() else parr[0],
        "-s",
        color="black",
        label="threshold Q (after pass; 0 = Q0)",
    )
    if published and published.get("threshold_path"):
        pp = published["threshold_path"][: n_pass + 1]
        ax2.plot(np.arange(len(pp)), pp, "--", color="grey", label="REPRO threshold")
    ax2.set_ylabel("threshold Q")
    ax2.grid(False)
    h1, l1 = ax.get_legend_handles_labels()
    h2, l2 = ax2.get_legend_handles_labels()
    ax.legend(h1 + h2, l1 + l2, fontsize=7, loc="upper right")
    ax.set_title(_title(title, runs[0], profile), fontsize=9)
    ax.text(
        0.01,
        0.98,
        no_neighbour_text(runs),
        transform=ax.transAxes,
        ha="left",
        va="top",
        fontsize=7,
        bbox={"boxstyle": "round", "facecolor": "white", "alpha": 0.8, "linewidth": 0.5},
    )
    return fig


def no_neighbour_text(runs: Sequence[dict]) -> str:
    """``"no counterfactual neighbour: test 95.0%, calibration 96.9% of rows (Delta = 0: S = d)"``,
    mean over the runs; "n/a" for runs that did not record it.

    >>> no_neighbour_text([{"calibration": {"share_no_neighbour": 0.969, "test_share_no_neighbour": 0.95}}])
    'no counterfactual neighbour: test 95.0%, calibration 96.9% of rows (Delta = 0: S = d)'
    """

    def share(key):
        vals = [
            float(c[key]) for c in ((m.get("calibration") or {}) for m in runs) if isinstance(c.get(key), (int, float))
        ]
        return f"{np.mean(vals):.1%}" if vals else "n/a"

    return (
        f"no counterfactual neighbour: test {share('test_share_no_neighbour')}, "
        f"calibration {share('share_no_neighbour')} of rows (Delta = 0: S = d)"
    )


def calibration_panels(
    cal,
    q0: float,
    title: str,
    metrics: dict,
    profile: str = "",
    score_col: str = "score",
    d_col: str = "d",
    delta_col: str = "delta",
    neigh_col: str = "n_neighbours",
):
    """Calibration: score histogram with Q0, neighbour counts, and d against Delta."""
    import matplotlib.pyplot as plt

    apply_style()
    fig, axes = plt.subplots(1, 3, figsize=(12, 3.6))
    s = cal[score_col].to_numpy(dtype=float)
    axes[0].hist(s[np.isfinite(s)], bins=30, color=PALETTE["neutral"])
    if q0 is not None and np.isfinite(q0):
        axes[0].axvline(q0, color=PALETTE["facter"], ls="--", label=f"Q0 = {q0:.3f}")
        axes[0].legend(fontsize=8)
    axes[0].set_xlabel("nonconformity score S = d + lambda Delta")
    axes[0].set_ylabel("calibration rows")
    if neigh_col in cal.columns:
        n = cal[neigh_col].to_numpy()
        top = int(n.max()) if len(n) else 0
        axes[1].hist(n, bins=np.arange(top + 2) - 0.5 if top < 30 else 30, color=PALETTE["fair"])
    else:
        axes[1].text(0.5, 0.5, "n/a: no neighbour counts recorded", ha="center", transform=axes[1].transAxes)
    axes[1].set_xlabel("counterfactual neighbours per row")
    if d_col in cal.columns and delta_col in cal.columns:
        axes[2].scatter(cal[d_col], cal[delta_col], s=6, alpha=0.5, color=PALETTE["facter"])
    axes[2].set_xlabel("d = 1 - cos(prediction, target)")
    axes[2].set_ylabel("Delta (counterfactual disparity)")
    fig.suptitle(_title(title, metrics, profile), fontsize=9)
    return fig


def gap_bars(frame, title: str, metrics: dict, profile: str = ""):
    """Per-user vs aggregate exposure gap (popular minus long tail) per method and user group."""
    import matplotlib.pyplot as plt

    apply_style()
    methods = list(dict.fromkeys(frame["method"]))
    groups = list(dict.fromkeys(frame["users"]))
    fig, axes = plt.subplots(1, len(methods), figsize=(4.2 * len(methods), 0.35 * len(groups) + 2.2), squeeze=False)
    for ax, method in zip(axes[0], methods):
        sub = frame[frame["method"] == method].set_index("users").reindex(groups)
        y = np.arange(len(groups))
        ax.barh(
            y - 0.2, sub["per_user_gap"].astype(float).fillna(0), 0.4, color=PALETTE["per_user"], label="per-user gap"
        )
        ax.barh(
            y + 0.2,
            sub["aggregate_gap"].astype(float).fillna(0),
            0.4,
            color=PALETTE["aggregate"],
            label="aggregate gap",
        )
        ax.axvline(0, color="black", lw=0.8)
        ax.set_yticks(y)
        ax.set_yticklabels(groups, fontsize=7)
        ax.invert_yaxis()
        ax.set_title(METHOD_LABELS.get(method, method), fontsize=9)
        ax.set_xlabel("exposure gap (popular - long tail)")
    axes[0][0].legend(fontsize=7)
    fig.suptitle(_title(title, metrics, profile), fontsize=9)
    return fig


def figure1(
    panels: Sequence[tuple], title: str, profile: str = "", method: str = "facter", published: dict | None = None
):
    """FACTER Fig. 1 in the paper's reading: one column per source of answers (e.g. the LLM run and the
    simulated run, each labelled with what produced it), top row the violation *rate* per pass (lines:
    V(t) against the adaptive Q_t, V(Q0) against the fixed Q0, V(Q*) against the final threshold; mean
    over the runs of that column, bars = sd when several seeds), bottom row the threshold path Q0..Q_T
    on its own axis, so that rates and thresholds never share an axis.  The legend sits below the
    panels, clear of the data; each column's title gives its n (test rows x runs) and its share of
    rows without a counterfactual neighbour.  ``panels``: ``[(label, [metrics dict, ...]), ...]``;
    ``published``: REPRO's counts as in :func:`violations_by_pass` (drawn as hollow markers in every
    column, scaled by REPRO's 750 test rows).
    """
    import matplotlib.pyplot as plt

    apply_style()
    kinds = (
        ("adaptive", "V(t): S > adaptive Q_t", PALETTE["facter"], "-o"),
        ("fixed_q0", "V(Q0): S > fixed Q0", PALETTE["neutral"], "-s"),
        ("q_star", "V(Q*): S > final Q*", PALETTE["fair"], "-^"),
    )
    panels = [(lab, [m for m in runs if m]) for lab, runs in panels if runs]
    if not panels:
        raise ValueError("figure1 needs at least one panel with runs")
    fig, axes = plt.subplots(
        2, len(panels), figsize=(4.6 * len(panels), 5.8), squeeze=False, gridspec_kw={"height_ratios": [2.2, 1]}
    )
    for j, (label, runs) in enumerate(panels):
        ax, qx = axes[0, j], axes[1, j]
        n_pass = 0
        for k, name, colour, style in kinds:
            rows = []
            for m in runs:
                v = (((m.get("methods") or {}).get(method) or {}).get("violations") or {}).get(k) or []
                n_test = float(m.get("n_test") or np.nan)
                rows.append([np.nan if x is None or isinstance(x, dict) else float(x) / n_test for x in v])
            n_pass = max([n_pass] + [len(r) for r in rows])
            arr = np.array([r + [np.nan] * (n_pass - len(r)) for r in rows], dtype=float)
            x = np.arange(1, n_pass + 1)
            mean = np.nanmean(arr, axis=0) if np.isfinite(arr).any() else np.full(n_pass, np.nan)
            sd = np.nanstd(arr, axis=0, ddof=1) if arr.shape[0] > 1 else None
            ax.errorbar(x, mean, yerr=sd, fmt=style, color=colour, capsize=3, label=name if j == 0 else None)
            if published and published.get(k):
                pv = [v / REPRO_N_TEST if v is not None else np.nan for v in published[k][:n_pass]]
                ax.plot(
                    x[: len(pv)],
                    pv,
                    style[1],
                    mfc="none",
                    mec=colour,
                    ls=":",
                    color=colour,
                    label=f"REPRO ML-1M Llama-3-8B, {name.split(':')[0]}" if j == 0 else None,
                )
        ax.set_xticks(np.arange(1, n_pass + 1))
        ax.set_ylim(bottom=0)
        ax.set_ylabel("violations / test rows" if j == 0 else "")
        n_test = sum(int(m.get("n_test") or 0) for m in runs)
        m0 = runs[0]
        ax.set_title(
            f"{label}\n{m0.get('dataset')}{' (SYNTHETIC)' if m0.get('is_synthetic') else ''}, "
            f"{n_test} test rows in {len(runs)} run(s)\n{no_neighbour_text(runs)}",
            fontsize=7.5,
        )
        paths = [
            [
                np.nan if x is None or isinstance(x, dict) else float(x)
                for x in (((m.get("methods") or {}).get(method) or {}).get("threshold_path") or [])
            ]
            for m in runs
        ]
        width = max([n_pass + 1] + [len(p) for p in paths])
        parr = np.array([p + [np.nan] * (width - len(p)) for p in paths], dtype=float)
        qx.plot(
            np.arange(width),
            np.nanmean(parr, axis=0),
            "-D",
            color="black",
            label="threshold Q (0 = Q0, t = after pass t)" if j == 0 else None,
        )
        if published and published.get("threshold_path"):
            pp = published["threshold_path"][:width]
            qx.plot(np.arange(len(pp)), pp, ":", color="grey", label="REPRO threshold" if j == 0 else None)
        qx.set_xticks(np.arange(width))
        qx.set_xlabel("pass")
        qx.set_ylabel("threshold Q" if j == 0 else "")
    handles, labels = [], []
    for a in axes.ravel():
        h, lab = a.get_legend_handles_labels()
        handles += h
        labels += lab
    fig.legend(handles, labels, loc="lower center", ncol=3, fontsize=7, frameon=False)
    fig.suptitle(title_with_provenance(title, "", False, "", profile).strip(" ,"), fontsize=9)
    fig.tight_layout(rect=(0, 0.1, 1, 0.97))
    return fig
