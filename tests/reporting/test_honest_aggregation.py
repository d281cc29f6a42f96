"""Runs are pooled as seeds only when everything but the seed matches (issue 23).

Notebook 06's case: with ``MODEL = "simulated"`` the MODEL run (N_INTERACTIONS rows)
and the simulated run beside it (SIM_N_INTERACTIONS = 2,500 rows, 750 test rows) share a model name.
They used to be averaged as two seeds (``V(0) 43.5 ± 60.1``); the table and Figure 1 now show them side
by side, each labelled by what produced it.  The records here are built from the configs the notebook's
own parameter helper makes, so a change in how notebook 06 builds its runs is seen here.
"""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest

from facterlab import notebook
from facterlab.config import config_to_dict
from facterlab.facter.record import Fingerprints, RunConfigRecord, RunMetrics, RunRecord
from facterlab.params import declared_in_notebook, parameters_cell_of
from facterlab.reporting import tables as tb

mpl = pytest.importorskip("matplotlib")
mpl.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

from facterlab.reporting import facter_figures as ff  # noqa: E402

NB06 = Path(__file__).resolve().parents[2] / "notebooks" / "06_fig1_violations_by_pass.py"


@pytest.fixture(autouse=True)
def _close():
    yield
    plt.close("all")


def _metrics(run_id: str, n_calib: int, n_test: int, fixed: list, adaptive: list, q: list, beta: float) -> dict:
    facter = {
        "violations": {"adaptive": adaptive, "fixed_q0": fixed, "q_star": [1] * len(fixed), "repro_count": fixed},
        "threshold_path": q,
    }
    return {
        "run_id": run_id,
        "dataset": "ml-100k",
        "is_synthetic": False,
        "protocol": "open",
        "preset": "repro",
        "model": f"simulated:open:sim-v1:b{beta:g}",
        "model_name": "simulated",
        "encoder": "all-minilm-l6-v2@x",
        "encoder_name": "all-MiniLM-L6-v2",
        "n_calib": n_calib,
        "n_test": n_test,
        "variants": {"threshold_rule": "one_sided"},
        "calibration": {"alpha": 0.1, "q0": q[0], "k_index": int(np.ceil((n_calib + 1) * 0.9)), "n": n_calib},
        "methods": {"facter": facter, "neutral": {"violations": {"fixed_q0": fixed[:1]}}},
    }


def _record(cfg, metrics: dict) -> RunRecord:
    conf = RunConfigRecord(
        run_id=metrics["run_id"],
        config=config_to_dict(cfg),
        config_hash=metrics["run_id"].split("-")[0],
        dataset_requested="auto",
        dataset="ml-100k",
        is_synthetic=False,
        domain="movie",
        data_config=config_to_dict(cfg.data),
        content_hash="c",
        fingerprints=Fingerprints(llm=metrics["model"], encoder=metrics["encoder"]),
    )
    return RunRecord(config=conf, metrics=RunMetrics.partial(metrics))


def notebook06_records(seeds=(0,)):
    """Records shaped like notebook 06's runs with MODEL = "simulated": its MODEL run and its simulated run."""
    ns: dict = {"__file__": str(NB06)}
    exec(parameters_cell_of(NB06), ns)  # notebook 06's own parameters cell, then the user's change:
    ns.update(MODEL="simulated", SEEDS=list(seeds))
    P = notebook.parameters(ns, smoke=notebook.FACTER_SMOKE, quiet=True)
    small, large = [], []
    for s in seeds:
        small.append(
            _record(P.config(s), _metrics(f"a{s}-x", 28, 12, [1, 1, 2 + s], [1, 1, 1], [0.82, 0.83, 0.83, 0.83], 1))
        )
        large.append(
            _record(
                P.sim_config(s), _metrics(f"b{s}-x", 1750, 750, [86, 97, 97 - s], [27, 18, 9], [0.8, 1.2, 1.3, 1.4], 2)
            )
        )
    return small, large


def test_notebook06_runs_are_two_settings_not_two_seeds():
    small, large = notebook06_records()
    groups = tb.seed_groups(small + large)
    assert [len(g) for g in groups] == [1, 1]
    labels = tb.group_labels(groups)
    assert "28/12 calibration/test rows" in labels[0] and "1750/750 calibration/test rows" in labels[1]
    assert labels[0].startswith("simulated recommender (beta = 1") and labels[1].startswith(
        "simulated recommender (beta = 2"
    )


def test_seeds_of_one_setting_are_pooled():
    small, large = notebook06_records(seeds=(0, 1))
    groups = tb.seed_groups(small + large)
    assert [[r.run_id for r in g] for g in groups] == [["a0-x", "a1-x"], ["b0-x", "b1-x"]]


def test_metrics_without_their_config_differing_in_size_are_not_pooled():
    a = _metrics("a-x", 28, 12, [1], [1], [0.8, 0.8], 1)
    b = _metrics("b-x", 1750, 750, [86], [27], [0.8, 1.2], 1)
    b["model"] = a["model"]
    ra, rb, rc = (RunMetrics.partial(m) for m in (a, b, dict(a, run_id="c-x")))
    assert len(tb.seed_groups([ra, rb])) == 2
    assert len(tb.seed_groups([ra, rc])) == 1
    with pytest.raises(TypeError, match="RunMetrics.from_json"):  # readers take a run, never a bare dict
        tb.seed_groups([a, b])


def test_per_pass_table_shows_settings_side_by_side():
    small, large = notebook06_records()
    t = tb.per_pass_table(small + large, name="fig1", title="Figure 1", published=False)
    assert t.header[0] == "Runs"
    assert len(t.rows) == 2 * 4  # Q0 row and 3 passes per setting
    md = t.to_markdown()
    assert not any("±" in cell for row in t.rows for cell in row)  # one seed per setting: no sd across settings
    pass1 = [r for r in t.rows if r[1] == "1"]
    assert [r[3] for r in pass1] == ["1.0", "86.0"]  # V(0) of each setting, not their mean 43.5
    assert "43.5" not in md
    assert any("never pooled" in n for n in t.notes)
    rows = declared_in_notebook(NB06)["N_INTERACTIONS"].default  # the MODEL run's size: notebook 06's default
    assert any(n.startswith("Settings that differ") and f"rows {rows}" in n and "rows 2500" in n for n in t.notes)


def test_per_pass_table_pools_seeds_of_one_setting():
    small, _large = notebook06_records(seeds=(0, 1))
    t = tb.per_pass_table(small, name="fig1", title="Figure 1", published=False)
    assert t.header[0] == "Pass"  # one setting: no Runs column
    row3 = next(r for r in t.rows if r[0] == "3")
    assert row3[2] == "2.5 ± 0.7"  # V(0) pass 3 over seeds 2 and 3


def test_method_table_adds_a_setting_column_when_labels_do_not_tell_groups_apart():
    small, large = notebook06_records()
    cols = [tb.Column("violations_fixed_q0", "V(0)", 1)]
    t = tb.method_table(small + large, name="t", title="T", columns=cols, methods=("facter",), published=())
    assert "Setting" in t.header
    ours = [r for r in t.rows if r[0] == "ours"]
    assert len(ours) == 2 and {r[-1] for r in ours} == {"2.0", "97.0"}
    setting = t.header.index("Setting")
    assert "test rows 12" in ours[0][setting] and "test rows 750" in ours[1][setting]


def test_figure1_columns_per_setting_with_alpha_shared_scale_and_no_signal_note():
    small, large = notebook06_records()
    fig = ff.figure1([(None, small + large)], "Figure 1")
    rate_axes = fig.axes[:2]
    assert len(fig.axes) == 4  # two columns: the two settings are not pooled into one
    titles = [ax.get_title() for ax in rate_axes]
    assert titles[0].startswith("simulated recommender (beta = 1") and "28/12 calibration/test rows" in titles[0]
    assert titles[1].startswith("simulated recommender (beta = 2") and "1750/750" in titles[1]
    assert "NO SIGNAL: 12 test rows" in titles[0] and "NO SIGNAL" not in titles[1]
    assert rate_axes[0].get_facecolor() != rate_axes[1].get_facecolor()  # the quiet panel is tinted
    # alpha drawn as a horizontal line at 0.1 in every rate panel
    for ax in rate_axes:
        assert any(
            len(set(line.get_ydata())) == 1 and float(line.get_ydata()[0]) == pytest.approx(0.1) for line in ax.lines
        )
    # shared y scales: the rate panels and the threshold panels each have one scale
    assert rate_axes[0].get_ylim() == rate_axes[1].get_ylim()
    top = rate_axes[0].get_ylim()[1]  # every point drawn lies inside the shared scale (86/750 = 0.115 too)
    assert all(np.nanmax(np.asarray(line.get_ydata(), float)) <= top for ax in rate_axes for line in ax.lines)
    assert top >= 97 / 750
    assert fig.axes[2].get_ylim() == fig.axes[3].get_ylim()
    # markers stay visible when values coincide: the three series sit at different x within a pass
    xs = {round(float(line.get_xdata()[0]), 2) for line in rate_axes[0].lines if len(line.get_xdata()) == 3}
    assert len(xs) >= 3
    assert re.search(r"n = 12 test rows", fig._facterlab_caption)


def test_signal_problems_for_too_few_calibration_rows():
    m = _metrics("a-x", 8, 12, [1], [1], [0.9, 0.9], 1)
    m["calibration"].update(k_index=8, n=8)
    problems = ff.signal_problems([RunMetrics.partial(m)])
    assert any("largest of 8 calibration scores" in p for p in problems)


def test_one_panel_figures_refuse_to_pool_settings():
    small, large = notebook06_records()
    with pytest.raises(ValueError, match="2 settings"):
        ff.violations_by_pass(small + large, "V")
    with pytest.raises(ValueError, match="draw one figure per setting"):
        ff.method_bars(small + large, ["violations_fixed_q0"], "bars")
    ff.violations_by_pass(small, "V")  # one setting: drawn
