"""Every figure says how much data stands behind it, marks degenerate panels, and shows readable labels.

Each figure function is built on tiny hand-made inputs (matplotlib's Agg backend) and checked for:
its n (rows, users, simulations or seeds) in the title or caption; a visible note on a degenerate input
(all-equal values, no neighbours, empty groups, fewer than 2 points); no raw metric key
(``cfr_multi``, ``violations_adaptive_pass1``...) among its tick and legend labels.
"""

from __future__ import annotations

import re

import numpy as np
import pandas as pd
import pytest

mpl = pytest.importorskip("matplotlib")
mpl.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

from facterlab.facter.record import RunMetrics  # noqa: E402
from facterlab.reporting import facter_figures as ff  # noqa: E402
from facterlab.reporting import ground_truth_figures as gtf  # noqa: E402
from facterlab.reporting import labels as lb  # noqa: E402
from facterlab.reporting import tables as tb  # noqa: E402
from facterlab.simpson import plots  # noqa: E402

N_PATTERN = re.compile(r"\b[nN] ?= ?\d[\d,]*")


@pytest.fixture(autouse=True)
def _close_figures():
    yield
    plt.close("all")


def all_text(fig) -> str:
    """Suptitle, axes titles, figure texts (captions) and axes texts of a figure, one per line."""
    parts = []
    if fig._suptitle is not None:
        parts.append(fig._suptitle.get_text())
    parts += [t.get_text() for t in fig.texts]
    for ax in fig.axes:
        parts += [ax.get_title(loc) for loc in ("left", "center", "right")]
        parts += [t.get_text() for t in ax.texts]
    return "\n".join(p for p in parts if p)


def shown_labels(fig) -> list:
    """Tick labels of every axis and the texts of every legend (axes and figure legends)."""
    out = []
    for ax in fig.axes:
        out += [t.get_text() for t in ax.get_xticklabels() + ax.get_yticklabels()]
        if ax.get_legend() is not None:
            out += [t.get_text() for t in ax.get_legend().get_texts()]
    for leg in fig.legends:
        out += [t.get_text() for t in leg.get_texts()]
    return [t for t in out if t]


def degenerate_notes(fig) -> list:
    return [
        t.get_text().replace("\n", " ")  # notes are wrapped to their panel
        for ax in fig.axes
        for t in ax.texts
        if t.get_gid() == "facterlab-degenerate" or t.get_text().startswith(lb.DEGENERATE_PREFIX)
    ]


def check_figure(fig, n_text: str | None = None):
    text = all_text(fig)
    assert N_PATTERN.search(text), f"no n in the title or caption:\n{text}"
    if n_text is not None:
        assert n_text in text, f"{n_text!r} not in:\n{text}"
    raw = [t for t in shown_labels(fig) if lb.is_raw_key(t)]
    assert not raw, f"raw metric keys shown as labels: {raw}"


# --- FACTER figures -------------------------------------------------------------------------------


def run_metrics(seed: int = 0, n_test: int = 12, violations=True) -> RunMetrics:
    rng = np.random.default_rng(seed)
    methods = {}
    for m in ("neutral", "fair", "facter"):
        block = {
            "ndcg@10_multi": float(rng.uniform(0, 0.1)),
            "recall@10_multi": float(rng.uniform(0, 0.1)),
            "valid@10": float(rng.uniform(0.5, 1)),
            "cfr_multi": float(rng.uniform(0.2, 0.8)),
            "cfr_single": {"gender": 0.3, "age": 0.2, "occupation": {"value": None, "missing_reason": "no rows"}},
            "cfr_detail": {"n_rows": 3},
            "snsr_proxy": {"joint": {"value": None, "missing_reason": "no group reaches 30 rows"}},
            "threshold_path": [1.0, 1.1, 1.15, 1.2],
        }
        if violations:
            n_pass = 3 if m == "facter" else 1
            block["violations"] = {
                k: [int(rng.integers(0, n_test)) for _ in range(n_pass)] for k in ("adaptive", "fixed_q0", "q_star")
            }
        methods[m] = block
    obj = {
        "dataset": "synthetic",
        "is_synthetic": True,
        "model": "fake",
        "n_test": n_test,
        "n_calib": 28,
        "methods": methods,
        "calibration": {"share_no_neighbour": 0.9, "test_share_no_neighbour": 0.95},
    }
    return RunMetrics.partial(obj)  # a partial metrics.json: absent keys read as missing


def test_label_mapping_is_the_one_of_the_tables():
    """Tables' display headers and figures' labels come from one mapping."""
    for col in (*tb.OPEN_COLUMNS, *tb.THRESHOLD_COLUMNS):
        assert not lb.is_raw_key(col.label)
    for key in ("ndcg@10_multi", "recall@10_multi", "valid@10", "snsr_joint", "cfr_multi", "violations_fixed_q0"):
        assert lb.label(key) == next(c.label for c in tb.OPEN_COLUMNS if c.key == key)
    assert tb.METHOD_LABELS == lb.METHOD_LABELS
    assert lb.is_raw_key("cfr_multi") and not lb.is_raw_key(lb.label("cfr_multi"))


def test_method_bars_one_run_and_several():
    keys = ["ndcg@10_multi", "valid@10", "snsr_joint", "cfr_multi", "cfr_gender", "violations_adaptive_pass1"]
    fig = ff.method_bars(run_metrics(), keys, "Quickstart")
    check_figure(fig, "n = 12 test rows")
    assert "no interval" in all_text(fig)
    assert [t.get_text() for t in fig.axes[0].get_xticklabels()][:4] == ["NDCG@10", "Valid@10", "SNSR", "CFR"]
    fig = ff.method_bars([run_metrics(s) for s in range(3)], keys, "Three seeds")
    check_figure(fig, "3 runs")
    assert "95% Student-t" in all_text(fig)


def test_violations_by_pass_and_figure1():
    runs = [run_metrics(s) for s in range(2)]
    fig = ff.violations_by_pass(runs, "Violations")
    check_figure(fig, "n = 12 test rows")
    assert "95% Student-t interval" in all_text(fig)
    fig = ff.violations_by_pass([run_metrics(violations=False)], "No violations")
    assert degenerate_notes(fig), "a figure without per-pass violations must say so"
    fig = ff.figure1([("LLM", runs), ("simulated", [run_metrics(5, n_test=30)])], "Figure 1")
    check_figure(fig, "30 test rows")


def calibration_frame(n: int, degenerate: bool) -> pd.DataFrame:
    rng = np.random.default_rng(0)
    d = np.full(n, 0.5) if degenerate else rng.uniform(0, 1, n)
    delta = np.zeros(n) if degenerate else rng.uniform(0, 0.5, n)
    return pd.DataFrame(
        {
            "score": d + 0.7 * delta,
            "d": d,
            "delta": delta,
            "n_neighbours": np.zeros(n, int) if degenerate else rng.integers(0, 4, n),
        }
    )


def test_calibration_panels_state_n_and_mark_degenerate_panels():
    m = run_metrics()
    fig = ff.calibration_panels(calibration_frame(28, False), 0.9, "Calibration", m)
    check_figure(fig, "n = 28 calibration rows")
    assert not degenerate_notes(fig)
    fig = ff.calibration_panels(calibration_frame(28, True), 0.5, "Calibration", m)
    notes = degenerate_notes(fig)
    assert any("all 28 scores equal" in t for t in notes), notes
    assert any("no row of 28 has a counterfactual neighbour" in t.replace("\n", " ") for t in notes), notes
    assert any("Delta = 0 for all 28 rows" in t.replace("\n", " ") for t in notes), notes
    fig = ff.calibration_panels(calibration_frame(1, False), 0.5, "Calibration", m)
    assert any("fewer than 2 points" in t or "no distribution" in t for t in degenerate_notes(fig))


def gap_frame(nan: bool = False) -> pd.DataFrame:
    rows = []
    for method in ("neutral", "facter"):
        for users, n, share in (("all rows", 12, 0.5), ("gender=F", 3, 1 / 3), ("gender=M", 9, 5 / 9)):
            rows.append(
                {
                    "method": method,
                    "users": users,
                    "n_rows": n,
                    "per_user_gap": np.nan if nan else 0.01,
                    "aggregate_gap": np.nan if nan else -0.02,
                    "share_defined": share,
                    "signs_disagree": None if nan else True,
                }
            )
    return pd.DataFrame(rows)


def test_gap_bars_give_n_per_group_intervals_and_notes():
    frame = gap_frame()
    iv = frame[["method", "users"]].assign(per_user_lo=0.0, per_user_hi=0.02, aggregate_lo=-0.03, aggregate_hi=-0.01)
    fig = ff.gap_bars(frame, "Gaps", run_metrics(), intervals=iv)
    check_figure(fig, "n = 12 rows in all")
    assert "gender=F (n = 3, 1 with both; few rows)" in shown_labels(fig)
    assert "95% bootstrap interval" in all_text(fig)
    fig = ff.gap_bars(gap_frame(nan=True), "Gaps", run_metrics())
    assert degenerate_notes(fig)
    assert "undefined" in all_text(fig)


# --- ground-truth figures (notebook 09) -----------------------------------------------------------


def test_ground_truth_figures():
    cov = pd.DataFrame(
        {"alpha": [0.1, 0.2], "rate": [0.1, 0.19], "ci_lo": [0.05, 0.12], "ci_hi": [0.16, 0.27], "n_calib": 70}
    ).assign(n_test=30)
    check_figure(gtf.plot_coverage(cov, "synthetic", True), "n = 30")
    rep = pd.DataFrame(
        [
            {
                "beta": b,
                "rho": r,
                "seed": 0,
                "pass": p,
                "n": 30,
                "V_q0": 5 + p,
                "V_adaptive": 3,
                "share_top1_biased": 0.3,
            }
            for b in (0.0, 2.0)
            for r in (0.0, 1.0)
            for p in (1, 2, 3)
        ]
    )
    fig = gtf.plot_repair(rep, "synthetic", True)
    check_figure(fig, "n = 30-30 test rows")
    assert "Clopper-Pearson" in all_text(fig)
    fair = pd.DataFrame(
        [
            {
                "beta": b,
                "seed": s,
                "method": m,
                "cfr_multi": 0.3 + 0.01 * s,
                "snsr_joint": np.nan,
                "snsr_missing": "few",
            }
            for b in (0.0, 2.0)
            for s in (0, 1)
            for m in ("neutral", "fair", "facter")
        ]
    )
    fig = gtf.plot_fairness(fair, "synthetic", True)
    check_figure(fig, "n = 2 seed(s)")
    assert "Neutral" in shown_labels(fig) and "FACTER" in shown_labels(fig)
    det = pd.DataFrame(
        {
            "lambda": [0.0, 0.7],
            "tau_rho": 0.9,
            "flagged": [4, 5],
            "biased": 10,
            "true_pos": [2, 3],
            "precision": [0.5, 0.6],
            "recall": [0.2, 0.3],
            "base_rate": 10 / 30,
            "share_no_neighbour": 0.9,
        }
    )
    by_beta = pd.DataFrame({"beta": [0.0], "recall": [np.nan], "precision": [np.nan], "base_rate": [0.0]}).assign(
        true_pos=0, biased=0, flagged=0
    )
    fig = gtf.plot_detector(det, by_beta, "synthetic", True)
    check_figure(fig, "n = 30 test rows")
    assert any("nothing is biased" in t for t in degenerate_notes(fig))


# --- Simpson figures --------------------------------------------------------------------------------


def summary(x: str, values, cols, n_points: int = 3) -> pd.DataFrame:
    out = {x: np.linspace(0, 1, n_points)}
    for c in cols:
        out[f"{c}_mean"] = np.linspace(0.01, 0.02, n_points)
        out[f"{c}_sd"] = 0.001
    return pd.DataFrame(out)


def test_simpson_sweeps_state_users_and_seeds():
    cols = ["probe_competition", "probe_n_relevant", "probe_ndcg", "mean_ndcg", "per_user_gap", "aggregate_gap"]
    sums = {p: summary(p, None, cols) for p in ("d1", "sigma1", "bias")}
    fig = plots.plot_factors(sums, n_seeds=10, n_users=10_000)
    check_figure(fig, "n = 10,000 simulated users per simulation, 10 seeds per point")
    assert "95% Student-t" in all_text(fig)
    fig = plots.plot_gap_sweeps(sums, n_seeds=3, n_users=2_000)
    check_figure(fig, "3 seeds per point")
    fig = plots.plot_gap_sweeps({"d1": summary("d1", None, cols, n_points=1)}, params=("d1",), n_seeds=1, n_users=50)
    assert any("fewer than 2 points" in t for t in degenerate_notes(fig))
    assert "no interval" in all_text(fig)
    fig = plots.plot_held_per_user_gap({"d1": sums["d1"]}, n_seeds=3, n_users=5_000)
    check_figure(fig, "5,000 simulated users")


def test_simpson_grid_and_study():
    rng = np.random.default_rng(0)
    df = pd.DataFrame(
        {
            "seed": np.repeat([0, 1], 4),
            "n_users": 3_000,
            "per_user_gap": rng.normal(0, 0.01, 8),
            "aggregate_gap": rng.normal(0, 0.02, 8),
            "ips_model": rng.normal(0, 0.01, 8),
            "ips_counts": rng.normal(0, 0.01, 8),
            "ips_oracle": rng.normal(0, 0.01, 8),
            "share_defined": 0.95,
        }
    )
    table = pd.DataFrame(
        {
            "mean_abs_error_pp": [1.4, 0.5, 1.0, 0.55],
            "sd_over_seeds_pp": [0.04, 0.01, 0.03, 0.01],
            "paper_pp": [4.0, 0.9, np.nan, np.nan],
            "n_seeds": 2,
            "seeds_passing_half_rule": [0, 2, 0, 2],
        },
        index=pd.Index(["aggregate_gap", "ips_model", "ips_counts", "ips_oracle"], name="estimator"),
    )
    fig = plots.plot_grid(df, table, seed=0)
    check_figure(fig, "n = 4 simulations")
    assert "95% Student-t" in all_text(fig)
    verdicts = pd.DataFrame(
        {
            "sigma1_range_agg_minus_pu_pp": [0.4],
            "d1_range_agg_minus_pu_pp": [1.2],
            "mean_abs_aggregate_error_pp": [0.8],
            "mean_abs_ips_model_error_pp": [0.4],
        },
        index=["noise=user, mu1=orthonormal"],
    )
    check_figure(plots.plot_variant_study(verdicts, n_seeds=3, n_users=10_000), "3 seed(s) per point")


def test_explorer_figure_states_n():
    from facterlab.simpson.explorer import explorer_figure

    res = {
        k: 0.01 for k in ("per_user_gap", "aggregate_gap", "naive_estimate", "ips_model", "ips_counts", "ips_oracle")
    }
    res.update(d1=1.5, sigma1=0.0, bias=0.03, n_users=1_000, seed=0)
    check_figure(explorer_figure(res, pyplot=True), "n = 1,000 simulated users")
