"""Figures of the FACTER notebooks (house style of :mod:`facterlab.reporting.figures`).

Each function takes metrics dicts / DataFrames and returns a matplotlib figure whose title says
which dataset, model and profile made it (synthetic data says so).  matplotlib is imported inside.
"""

from __future__ import annotations

import textwrap
from collections.abc import Sequence
from typing import Any

import numpy as np

from facterlab.facter.record import METHODS, RunMetrics, as_metrics, is_one_run, value_or_nan
from facterlab.reporting.figures import attach_runs
from facterlab.reporting.labels import add_caption, degenerate_note, mean_ci
from facterlab.reporting.labels import label as display_label
from facterlab.reporting.tables import (
    LABELLED_SETTINGS,
    MissingValue,
    differences_note,
    recommender_label,
    seed_groups,
    setting_differences,
)
from facterlab.style import PALETTE, apply_style, title_with_provenance

REPRO_N_TEST = 750  # ML-1M test rows of REPRO (docs/FACTER.md §1.2): scales its counts to rates


def _records(runs: Any) -> list[RunMetrics]:
    """The runs as typed run records (:func:`facterlab.facter.record.as_metrics`: records, run results
    or their metrics); empty entries dropped."""
    return [as_metrics(m) for m in ([runs] if is_one_run(runs) else runs) if m]


def _title(title: str, run: Any, profile: str) -> str:
    m = as_metrics(run)
    model = m.field_value("model")
    return title_with_provenance(title, str(m.dataset), bool(m.is_synthetic), str(model), profile)


def run_size_text(runs: Sequence[Any]) -> str:
    """How much data stands behind a FACTER figure: test and calibration rows, CFR rows, runs.

    >>> run_size_text([RunMetrics.partial({"n_test": 12, "n_calib": 28, "methods": {"facter": {"cfr_detail": {"n_rows": 3}}}})])
    'n = 12 test rows (28 calibration rows; CFR over 3 rows), 1 run'
    """
    runs = _records(runs)
    if not runs:
        return "n = 0 runs"
    n_test = sorted({int(m.n_test or 0) for m in runs})
    n_cal = sorted({int(m.n_calib or 0) for m in runs})
    cfr = sorted(
        {
            int(b.cfr_detail["n_rows"])
            for m in runs
            for b in m.methods.values()
            if isinstance(b.cfr_detail, dict) and b.cfr_detail.get("n_rows")
        }
    )

    def span(v):
        return str(v[0]) if len(v) == 1 else f"{v[0]}-{v[-1]}"

    text = f"n = {span(n_test)} test rows ({span(n_cal)} calibration rows"
    text += f"; CFR over {span(cfr)} rows)" if cfr else ")"
    return text + f", {len(runs)} run{'s' if len(runs) != 1 else ''}"


def _one_setting(runs: Any, what: str) -> None:
    """Refuse to pool runs of different settings as seeds: a one-panel figure averages its runs, which is
    honest only when they differ by seed alone (:func:`facterlab.reporting.tables.seed_groups`)."""
    if is_one_run(runs) or not isinstance(runs, Sequence):
        return
    groups = seed_groups([r for r in runs if r])
    if len(groups) > 1:
        diffs = setting_differences(groups)
        raise ValueError(
            f"{what} averages its runs as seeds, but they hold {len(groups)} settings ("
            + "; ".join(f"{i}: {d}" for i, d in enumerate(diffs, start=1))
            + "): draw one figure per setting (tables.seed_groups), or use figure1's columns"
        )


def method_bars(metrics: Any, keys: Sequence[str], title: str, profile: str = "", labels: dict | None = None):
    """Grouped bars: one group per metric key (readable names, :func:`facterlab.reporting.labels.label`),
    one bar per method; missing values are marked 'n/a'.  ``metrics``: one run (record, result or RunMetrics), or a list
    of runs (seeds), then the bars are means with 95% Student-t intervals over the runs.  A caption gives
    the test rows and runs behind the bars."""
    import matplotlib.pyplot as plt

    _one_setting(metrics, "method_bars")
    runs = _records(metrics)
    if not runs:
        raise ValueError("method_bars needs at least one run's metrics")
    apply_style()
    fig, ax = plt.subplots(figsize=(1.6 + 1.5 * len(keys), 3.6))
    width = 0.8 / len(METHODS)
    x = np.arange(len(keys))
    for j, method in enumerate(METHODS):
        flats = [m.methods[method].flat() for m in runs if method in m.methods]
        if not flats:
            continue
        cells = []
        for k in keys:
            vals = [f.get(k, MissingValue("absent")) for f in flats]
            cells.append(mean_ci([float(v) for v in vals if not isinstance(v, MissingValue)]))
        heights = [0.0 if c[3] == 0 else c[0] for c in cells]
        err = None
        if len(runs) > 1:
            err = np.array(
                [[0.0 if c[3] < 2 else c[0] - c[1] for c in cells], [0.0 if c[3] < 2 else c[2] - c[0] for c in cells]]
            )
        bars = ax.bar(
            x + (j - 1) * width, heights, width, yerr=err, capsize=2, label=display_label(method), color=PALETTE[method]
        )
        for b, c in zip(bars, cells):
            if c[3] == 0:
                ax.text(b.get_x() + b.get_width() / 2, 0, "n/a", ha="center", va="bottom", fontsize=7, rotation=90)
    ax.set_xticks(x)
    ax.set_xticklabels([(labels or {}).get(k) or display_label(k) for k in keys])
    ax.legend(fontsize=8)
    ax.set_title(_title(title, runs[0], profile), fontsize=9)
    interval = (
        "Bars: mean over runs with 95% Student-t interval"
        if len(runs) > 1
        else "Bars: one run's values (means over its test rows); no interval: one run only"
    )
    add_caption(fig, f"{run_size_text(runs)}. {interval}; n/a: value missing (reason in the table).")
    return attach_runs(fig, metrics)


def violations_by_pass(
    runs: Sequence[Any], title: str, profile: str = "", method: str = "facter", published: dict | None = None
):
    """Fig. 1: violations per pass against the adaptive threshold Q_t, the fixed Q0 and the final Q*
    as a share of the test rows (so that runs of different sizes compare; mean over runs, error bars
    = 95% Student-t interval when several), and the threshold path Q0, Q1, ... (right axis).
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
    given = runs
    _one_setting(runs, "violations_by_pass")
    runs = _records(runs)
    for m in runs:
        block = m.methods.get(method)
        v = block.violations if block else {}
        n_test = float(m.n_test or np.nan)
        for k, _, _ in kinds:
            series[k].append([value_or_nan(x) / n_test for x in (v.get(k) or [])])
        paths.append([value_or_nan(x) for x in (block.threshold_path if block else [])])
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
        mean, err = _mean_and_err(arr)
        ax.bar(x + (j - 1) * width, np.nan_to_num(mean), width, yerr=err, label=label, color=color, alpha=0.85)
        if published and published.get(k):
            pv = [v / REPRO_N_TEST if v is not None else np.nan for v in published[k][:n_pass]]
            ax.plot(
                x[: len(pv)] + (j - 1) * width, pv, "o", mfc="none", mec="black", label=f"REPRO {label.split(' ')[0]}"
            )
    ax.set_xlabel("pass")
    ax.set_ylabel("violations / test rows")
    ax.set_xticks(x)
    ax2 = ax.twinx()
    paths = [p[: n_pass + 1] for p in paths]  # the path as far as the passes drawn
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
    if n_pass == 0:
        degenerate_note(ax, f"no per-pass violations recorded for method {method!r}")
    add_caption(fig, f"{run_size_text(runs)}. {_interval_text(len(runs))}")
    return attach_runs(fig, given)


def _mean_and_err(arr: np.ndarray) -> tuple:
    """Column means of ``arr`` (runs x passes) and asymmetric error bars of the 95% Student-t interval
    over the runs (None for a single run: no interval)."""
    cells = [mean_ci(arr[:, j]) for j in range(arr.shape[1])]
    mean = np.array([c[0] for c in cells], dtype=float)
    if arr.shape[0] < 2:
        return mean, None
    err = np.array([[c[0] - c[1] for c in cells], [c[2] - c[0] for c in cells]], dtype=float)
    return mean, np.nan_to_num(err)


def _interval_text(n_runs: int) -> str:
    if n_runs > 1:
        return f"Error bars: 95% Student-t interval of the mean over the {n_runs} runs."
    return "One run: no interval across runs."


def no_neighbour_text(runs: Sequence[Any]) -> str:
    """``"no counterfactual neighbour: test 95.0%, calibration 96.9% of rows (Delta = 0: S = d)"``,
    mean over the runs; "n/a" for runs that did not record it.

    >>> no_neighbour_text([RunMetrics.partial({"calibration": {"share_no_neighbour": 0.969, "test_share_no_neighbour": 0.95}})])
    'no counterfactual neighbour: test 95.0%, calibration 96.9% of rows (Delta = 0: S = d)'
    """

    records = _records(runs)

    def share(key):
        vals = [float(v) for v in (getattr(m.calibration, key) for m in records) if isinstance(v, (int, float))]
        return f"{np.mean(vals):.1%}" if vals else "n/a"

    return (
        f"no counterfactual neighbour: test {share('test_share_no_neighbour')}, "
        f"calibration {share('share_no_neighbour')} of rows (Delta = 0: S = d)"
    )


def calibration_panels(
    cal,
    q0: float,
    title: str,
    metrics: Any,
    profile: str = "",
    score_col: str = "score",
    d_col: str = "d",
    delta_col: str = "delta",
    neigh_col: str = "n_neighbours",
):
    """Calibration: score histogram with Q0, neighbour counts, and d against Delta.  The title gives the
    number of calibration rows; a panel whose data is degenerate (all scores equal, no row with a
    counterfactual neighbour, every Delta = 0, fewer than 2 rows) shows a note saying so instead."""
    import matplotlib.pyplot as plt

    apply_style()
    fig, axes = plt.subplots(1, 3, figsize=(12, 3.6))
    s = cal[score_col].to_numpy(dtype=float)
    s = s[np.isfinite(s)]
    n = len(cal)
    if len(s) < 2:
        degenerate_note(axes[0], f"{len(s)} finite score(s): no distribution to draw")
    else:
        axes[0].hist(s, bins=30 if np.ptp(s) > 0 else 1, color=PALETTE["neutral"])
        if np.ptp(s) == 0:
            axes[0].text(
                0.5, 0.9, f"all {len(s)} scores equal {s[0]:.3f}: Q0 separates nothing",
                ha="center", transform=axes[0].transAxes, fontsize=8, gid="facterlab-degenerate",
                bbox={"boxstyle": "round", "facecolor": "#fff3cd", "edgecolor": "#d4a017", "linewidth": 0.8},
            )  # fmt: skip
    if q0 is not None and np.isfinite(q0):
        axes[0].axvline(q0, color=PALETTE["facter"], ls="--", label=f"Q0 = {q0:.3f}")
        axes[0].legend(fontsize=8)
    axes[0].set_xlabel("nonconformity score S = d + lambda Delta")
    axes[0].set_ylabel("calibration rows")
    axes[0].set_title(f"scores of {len(s)} calibration rows", fontsize=8)
    if neigh_col in cal.columns:
        counts = cal[neigh_col].to_numpy()
        top = int(counts.max()) if len(counts) else 0
        if top == 0:
            degenerate_note(axes[1], f"no row of {len(counts)} has a counterfactual neighbour: Delta = 0, S = d")
        else:
            axes[1].hist(counts, bins=np.arange(top + 2) - 0.5 if top < 30 else 30, color=PALETTE["fair"])
            axes[1].set_ylabel("calibration rows")
        axes[1].set_title(f"{int((counts > 0).sum())} of {len(counts)} rows have >= 1 neighbour", fontsize=8)
    else:
        degenerate_note(axes[1], "no neighbour counts recorded")
    axes[1].set_xlabel("counterfactual neighbours per row")
    if d_col in cal.columns and delta_col in cal.columns:
        dd = cal[[d_col, delta_col]].astype(float).dropna()
        if len(dd) < 2:
            degenerate_note(axes[2], f"{len(dd)} row(s) with d and Delta: fewer than 2 points")
        elif (dd[delta_col] == 0).all():
            degenerate_note(axes[2], f"Delta = 0 for all {len(dd)} rows (no neighbours): nothing to plot against d")
        else:
            axes[2].scatter(dd[d_col], dd[delta_col], s=6, alpha=0.5, color=PALETTE["facter"])
            axes[2].set_title(f"{int((dd[delta_col] > 0).sum())} of {len(dd)} rows with Delta > 0", fontsize=8)
    else:
        degenerate_note(axes[2], "d and Delta not recorded")
    axes[2].set_xlabel("d = 1 - cos(prediction, target)")
    axes[2].set_ylabel("Delta (counterfactual disparity)")
    fig.suptitle(_title(f"{title} (n = {n} calibration rows)", metrics, profile), fontsize=9)
    return attach_runs(fig, metrics)


def gap_bars(frame, title: str, metrics: dict, profile: str = "", intervals=None, min_rows: int = 10):
    """Per-user vs aggregate exposure gap (popular minus long tail) per method and user group.

    ``frame``: :func:`facterlab.reporting.llm_simpson.report_frame` (columns method, users, n_rows,
    per_user_gap, aggregate_gap, share_defined).  ``intervals``: optional frame of
    :func:`facterlab.reporting.llm_simpson.gap_intervals` (columns method, users, per_user_lo/hi,
    aggregate_lo/hi), drawn as error bars.  Each group's tick label says its n (rows, and rows with items
    of both groups, over which the per-user gap is a mean); a group with fewer than ``min_rows`` such
    rows is labelled "few rows" and a gap that is undefined is marked "undefined" instead of a 0 bar.
    """
    import matplotlib.pyplot as plt

    apply_style()
    methods = list(dict.fromkeys(frame["method"]))
    groups = list(dict.fromkeys(frame["users"]))
    if intervals is not None and len(intervals):
        frame = frame.merge(intervals, on=["method", "users"], how="left")
    fig, axes = plt.subplots(1, len(methods), figsize=(4.6 * len(methods), 0.4 * len(groups) + 2.4), squeeze=False)
    for ax, method in zip(axes[0], methods):
        sub = frame[frame["method"] == method].set_index("users").reindex(groups)
        y = np.arange(len(groups))
        for col, off, colour, name in (
            ("per_user_gap", -0.2, PALETTE["per_user"], "per-user gap"),
            ("aggregate_gap", 0.2, PALETTE["aggregate"], "aggregate gap"),
        ):
            vals = sub[col].astype(float).to_numpy()
            err = None
            short = "per_user" if col == "per_user_gap" else "aggregate"
            if f"{short}_lo" in sub.columns:
                lo = sub[f"{short}_lo"].astype(float).to_numpy()
                hi = sub[f"{short}_hi"].astype(float).to_numpy()
                err = np.nan_to_num(np.vstack([vals - lo, hi - vals]).clip(min=0))
            ax.barh(y + off, np.nan_to_num(vals), 0.4, xerr=err, capsize=2, color=colour, label=name)
            for yi, v in zip(y, vals):
                if not np.isfinite(v):
                    ax.text(0, yi + off, " undefined", va="center", fontsize=6)
        n_rows = sub["n_rows"].fillna(0).astype(int).to_numpy()
        share = sub["share_defined"].astype(float).fillna(0).to_numpy() if "share_defined" in sub else np.ones(len(y))
        n_both = np.rint(n_rows * share).astype(int)
        ticks = [
            f"{g} (n = {r}, {b} with both{'; few rows' if b < min_rows else ''})"
            for g, r, b in zip(groups, n_rows, n_both)
        ]
        ax.axvline(0, color="black", lw=0.8)
        ax.set_yticks(y)
        ax.set_yticklabels(ticks, fontsize=7)
        ax.invert_yaxis()
        ax.set_title(display_label(method), fontsize=9)
        ax.set_xlabel("exposure gap (popular - long tail)")
        if not len(sub) or not np.isfinite(sub[["per_user_gap", "aggregate_gap"]].astype(float).to_numpy()).any():
            degenerate_note(ax, "no group has a defined gap")
    axes[0][0].legend(fontsize=7)
    fig.suptitle(_title(title, metrics, profile), fontsize=9)
    interval = (
        "error bars: 95% bootstrap interval (rows resampled)"
        if intervals is not None and len(intervals)
        else "no interval drawn"
    )
    all_rows = frame.loc[frame["users"] == "all rows", "n_rows"]
    total = int(all_rows.max()) if len(all_rows) else int(frame.groupby("method")["n_rows"].max().max())
    add_caption(
        fig,
        f"n = {total} rows in all, per group in the labels (one row counts as one user); 'with both' = rows whose ranking holds relevant items of both "
        f"item groups, over which the per-user gap is a mean; 'few rows' = fewer than {min_rows}. {interval}.",
    )
    return attach_runs(fig, metrics)


NO_SIGNAL_FACE = "#fff6d5"  # background of a Figure 1 panel without signal
#: fewer expected violations than this at alpha (alpha x test rows) and a per-pass rate says nothing
MIN_EXPECTED_VIOLATIONS = 5.0


def signal_problems(runs: Sequence[Any]) -> list:
    """Why a column of Figure 1 carries no signal, as short phrases (empty when it does): too few test
    rows to read a rate against alpha (alpha x n_test < :data:`MIN_EXPECTED_VIOLATIONS`, so one violation
    moves the rate by 1/n_test), Q0 taken as the largest calibration score (the rank k reaches n: too few
    calibration rows for alpha), every calibration answer degenerate, Q0 missing.

    >>> P = RunMetrics.partial
    >>> signal_problems([P({"n_test": 12, "n_calib": 28, "calibration": {"alpha": 0.1, "q0": 0.8, "k_index": 27, "n": 28}})])
    ['12 test rows: 1.2 violations expected at alpha = 0.1, one violation moves the rate by 0.083']
    >>> signal_problems([P({"n_test": 750, "n_calib": 1750, "calibration": {"alpha": 0.1, "q0": 0.8, "k_index": 1576, "n": 1750}})])
    []
    """
    out = []
    recs = _records(runs)
    for m in recs[:1]:  # a column holds seeds of one setting: sizes and alpha are the same
        c = m.calibration
        alpha = c.alpha if isinstance(c.alpha, (int, float)) else None
        n_test = int(m.n_test or 0)
        if alpha is not None and n_test and alpha * n_test < MIN_EXPECTED_VIOLATIONS:
            out.append(
                f"{n_test} test rows: {alpha * n_test:.1f} violations expected at alpha = {alpha:g}, "
                f"one violation moves the rate by {1 / n_test:.3f}"
            )
        if "q0" in c.absent:
            pass  # not recorded (a hand-made or old record): nothing to judge
        elif not isinstance(c.q0, (int, float)) or not np.isfinite(float(c.q0)):
            out.append("no finite Q0 (too few calibration rows, or Q0 missing)")
        elif isinstance(c.k_index, (int, float)) and isinstance(c.n, (int, float)) and c.k_index >= c.n:
            out.append(f"Q0 = {float(c.q0):.3f} is the largest of {int(c.n)} calibration scores (too few for alpha)")
        deg = c.degenerate
        if deg is not None and getattr(deg, "all_degenerate", False):
            out.append("every calibration answer is degenerate (empty or one list for all)")
    return out


def _alpha(runs: Sequence[RunMetrics]) -> float | None:
    vals = {float(m.calibration.alpha) for m in runs if isinstance(m.calibration.alpha, (int, float))}
    return vals.pop() if len(vals) == 1 else None


def figure1(
    panels: Sequence[tuple], title: str, profile: str = "", method: str = "facter", published: dict | None = None
):
    """FACTER Fig. 1 in the paper's reading: one column per setting that produced answers (the LLM run and
    the simulated run, say), top row the violation *rate* per pass (V(t) against the adaptive Q_t, V(Q0)
    against the fixed Q0, V(Q*) against the final threshold; mean over the seeds of that setting, bars =
    95% Student-t interval when several), with the target rate alpha drawn as a line; bottom row the
    threshold path Q0..Q_T on its own axis.  Rates share one y scale across columns, thresholds another,
    so that columns compare by eye; the three series sit side by side within a pass, so that none hides
    another when they coincide (as they do at 12 test rows).

    Runs are pooled only when they differ by seed alone (:func:`facterlab.reporting.tables.seed_groups`):
    a panel whose runs hold several settings (two sizes, say) is split into one column per setting.
    Each column's title says what produced it (:func:`facterlab.reporting.tables.recommender_label`; a
    panel label, when given, goes first), its data, sizes and seeds, and its share of rows without a
    counterfactual neighbour; a column without signal (:func:`signal_problems`) says so in its title and
    in a note on the panel.  ``panels``: ``[(label or None, [run, ...]), ...]``; ``published``: REPRO's
    counts as in :func:`violations_by_pass` (hollow markers, scaled by REPRO's 750 test rows).
    """
    import matplotlib.pyplot as plt

    apply_style()
    kinds = (
        ("adaptive", "V(t): S > adaptive Q_t", PALETTE["facter"], "o", -0.12),
        ("fixed_q0", "V(Q0): S > fixed Q0", PALETTE["neutral"], "s", 0.0),
        ("q_star", "V(Q*): S > final Q*", PALETTE["fair"], "^", 0.12),
    )
    columns: list[tuple[str | None, list]] = []
    for lab, runs in panels:
        if not runs:
            continue
        for group in seed_groups(list(runs)):
            columns.append((lab, group))
    if not columns:
        raise ValueError("figure1 needs at least one panel with runs")
    all_runs = [r for _lab, g in columns for r in g]
    groups = [g for _lab, g in columns]
    diffs = setting_differences(groups, skip=LABELLED_SETTINGS, main=True)
    fig, axes = plt.subplots(
        2,
        len(columns),
        figsize=(4.8 * len(columns), 6.2),
        squeeze=False,
        sharey="row",
        gridspec_kw={"height_ratios": [2.2, 1]},
    )
    quiet = []
    for j, ((label, group), diff) in enumerate(zip(columns, diffs)):
        runs = _records(group)
        ax, qx = axes[0, j], axes[1, j]
        n_pass = 0
        for k, name, colour, marker, dx in kinds:
            rows = []
            for m in runs:
                block = m.methods.get(method)
                v = (block.violations.get(k) if block else None) or []
                rows.append([value_or_nan(x) / float(m.n_test or np.nan) for x in v])
            n_pass = max([n_pass] + [len(r) for r in rows])
            arr = np.array([r + [np.nan] * (n_pass - len(r)) for r in rows], dtype=float)
            x = np.arange(1, n_pass + 1)
            mean, err = _mean_and_err(arr)
            ax.errorbar(
                x + dx, mean, yerr=err, fmt="-" + marker, ms=6, color=colour, capsize=3, label=name if j == 0 else None
            )
            if published and published.get(k):
                pv = [v / REPRO_N_TEST if v is not None else np.nan for v in published[k][:n_pass]]
                ax.plot(
                    x[: len(pv)] + dx,
                    pv,
                    marker,
                    ms=7,
                    mfc="none",
                    mec=colour,
                    ls=":",
                    color=colour,
                    label=f"REPRO ML-1M Llama-3-8B, {name.split(':')[0]}" if j == 0 else None,
                )
        alpha = _alpha(runs)
        if alpha is not None:
            ax.axhline(
                alpha, color="black", ls="--", lw=1, label=f"alpha = {alpha:g} (target rate)" if j == 0 else None
            )
        ax.set_xticks(np.arange(1, n_pass + 1))
        ax.set_xlim(0.6, n_pass + 0.4)
        ax.set_ylabel("violations / test rows" if j == 0 else "")
        ax.tick_params(labelleft=True)
        n_test = int(runs[0].n_test or 0)
        n_cal = int(runs[0].n_calib or 0)
        m0 = runs[0]
        problems = signal_problems(runs)
        chars = 64  # a column is 4.8 in wide: longer title lines run into the next column's title
        who = recommender_label(group[0])
        head = f"{label}: {who}" if label else who
        parts = [
            head,
            f"{m0.dataset}{' (SYNTHETIC)' if m0.is_synthetic else ''}, {n_cal}/{n_test} calibration/test rows, "
            f"{len(runs)} seed{'s' if len(runs) != 1 else ''}" + (f"; {diff}" if diff else ""),
            no_neighbour_text(runs),
        ]
        if problems:
            parts.append("NO SIGNAL: " + "; ".join(problems))
            quiet.append(head)
            ax.set_facecolor(NO_SIGNAL_FACE)  # the panel is tinted, its data left uncovered
        ax.set_title("\n".join(textwrap.fill(part, chars) for part in parts), fontsize=7.5)
        paths = [
            [value_or_nan(x) for x in (m.methods[method].threshold_path if method in m.methods else [])] for m in runs
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
        qx.tick_params(labelleft=True)
    # one rate scale for every column, from 0 to the highest point drawn (data, REPRO, alpha), set once all
    # columns are drawn (a limit set on the first column would freeze the shared scale before the others)
    tops = [
        float(np.nanmax(y))
        for a in axes[0]
        for line in a.lines
        if len(y := np.asarray(line.get_ydata(), dtype=float)) and np.isfinite(y).any()
    ]
    tops += [
        float(np.nanmax(seg[:, 1]))
        for a in axes[0]
        for coll in a.collections
        for seg in getattr(coll, "get_segments", lambda: [])()
        if len(seg)
    ]
    top = 1.08 * max(tops) if tops and max(tops) > 0 else 1.0
    axes[0, 0].set_ylim(-0.04 * top, top)  # a margin below 0: markers at 0 violations stay whole
    handles, labels = [], []
    for a in axes.ravel():
        h, lab = a.get_legend_handles_labels()
        handles += h
        labels += lab
    # anchored in figure coordinates: the default anchor (the figure's box) moves to the bottom of the caption
    # when ``bbox_inches="tight"`` widens the box to hold it, and the legend then lands on the caption
    fig.legend(
        handles,
        labels,
        loc="lower center",
        bbox_to_anchor=(0.5, 0.0),
        bbox_transform=fig.transFigure,
        ncol=3,
        fontsize=7,
        frameon=False,
    )
    fig.suptitle(title_with_provenance(title, "", False, "", profile).strip(" ,"), fontsize=9)
    fig.tight_layout(rect=(0, 0.11, 1, 0.97))
    n_runs = {len(g) for g in groups}
    caption = "; ".join(f"column {i + 1}: {run_size_text(g)}" for i, g in enumerate(groups))
    caption += (
        ". Runs are averaged only over seeds of one setting; columns of different settings are never pooled. "
        "Rates share one y scale across columns, thresholds another; the three series are offset within a pass. "
    )
    caption += (
        _interval_text(max(n_runs))
        if len(n_runs) == 1
        else "Error bars: 95% Student-t interval over seeds where a column has several."
    )
    if quiet:
        caption += f" No signal (tinted panel; why in its title): {'; '.join(quiet)}."
    if note := differences_note(groups, "column"):
        caption += " " + note
    add_caption(fig, caption)
    return attach_runs(fig, all_runs)
