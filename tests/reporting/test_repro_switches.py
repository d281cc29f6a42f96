"""REPRO's readings beside ours (issue 23): SNSR's empty rows, and REPRO's names for its corrected counts."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from facterlab.config import ADDED_FIELDS, config_hash, config_to_dict, preset, saved_setting
from facterlab.facter.record import RunConfigRecord, RunMetrics
from facterlab.metrics.fairness import EMPTY_ROWS, snsr_proxy
from facterlab.reporting import tables as tb
from facterlab.reporting.labels import label


def _rows(empty_in_b: int):
    """Group A 30 mapped rows, group B 28 mapped + ``empty_in_b`` rows with no mapped item, group C 31."""
    rng = np.random.default_rng(0)
    sizes = {"A": 30, "B": 28 + empty_in_b, "C": 31}
    labels = [g for g, n in sizes.items() for _ in range(n)]
    vecs = rng.normal(size=(len(labels), 8))
    b_start = sizes["A"]
    vecs[b_start + 28 : b_start + 28 + empty_in_b] = np.nan  # no item mapped: no embedding
    groups = pd.DataFrame({"gender": labels, "age": "25-34", "occupation": "writer"})
    return vecs, groups


def test_snsr_zero_rows_can_lift_a_group_over_the_minimum():
    vecs, groups = _rows(3)
    ours = snsr_proxy(vecs, groups, min_group=30)["gender"]
    repro = snsr_proxy(vecs, groups, min_group=30, empty_rows="zero")["gender"]
    assert ours["n_groups"] == 2 and ours["n_rows_dropped"] == 3 and "n_rows_zero" not in ours
    assert repro["n_groups"] == 3 and repro["n_rows_dropped"] == 0 and repro["n_rows_zero"] == 3
    assert repro["group_sizes"]["B"] == 31
    # a third group changes the spread (max and mean over more pairs)
    assert repro["snsv"] != ours["snsv"]


def test_snsr_zero_rows_leave_a_centroid_direction_unchanged():
    vecs, groups = _rows(3)
    big = snsr_proxy(vecs, groups, min_group=28)["gender"]  # B qualifies either way
    zero = snsr_proxy(vecs, groups, min_group=28, empty_rows="zero")["gender"]
    assert zero["snsr"] == pytest.approx(big["snsr"]) and zero["snsv"] == pytest.approx(big["snsv"])
    assert zero["group_sizes"]["B"] == 31 and big["group_sizes"]["B"] == 28


def test_snsr_empty_rows_rejects_unknown_values():
    vecs, groups = _rows(0)
    assert set(EMPTY_ROWS) == {"drop", "zero"}
    with pytest.raises(ValueError, match="empty_rows must be one of"):
        snsr_proxy(vecs, groups, empty_rows="keep")


def test_snsr_empty_rows_is_a_protocol_switch_that_keeps_saved_run_ids():
    repro, ours = preset("repro"), preset("facterlab")
    assert repro.metrics.snsr_empty_rows == "zero" and ours.metrics.snsr_empty_rows == "drop"
    # "drop" is what every run saved before the switch did: left out of the id, so those runs keep theirs
    assert "snsr_empty_rows" not in config_to_dict(ours)["metrics"]
    assert config_to_dict(repro)["metrics"]["snsr_empty_rows"] == "zero"
    dropped = preset("repro", metrics__snsr_empty_rows="drop")
    assert config_hash(dropped) != config_hash(repro)
    # a saved config without the field reads as "drop" in every reader
    saved = config_to_dict(dropped)
    assert saved_setting(saved, "metrics", "snsr_empty_rows") == "drop"
    rec = RunConfigRecord(config=saved)
    assert rec.setting("metrics.snsr_empty_rows") == "drop" and rec.settings()["metrics.snsr_empty_rows"] == "drop"
    assert RunConfigRecord(config=config_to_dict(repro)).settings()["metrics.snsr_empty_rows"] == "zero"
    old = RunMetrics.partial({"variants": {"top1": "first_mapped"}})
    assert old.field_value("snsr_empty_rows") == "drop" and old.field_value("not_a_switch") is None
    assert ADDED_FIELDS[("metrics", "snsr_empty_rows")] == "drop"
    with pytest.raises(ValueError, match="snsr_empty_rows"):
        preset("repro", metrics__snsr_empty_rows="keep")


def _run(kinds: dict) -> dict:
    return {
        "run_id": "aaaaaaaaaaaa-11111111",
        "dataset": "ml-100k",
        "model": "smollm2-135m",
        "n_calib": 28,
        "n_test": 12,
        "variants": {"correction": "none"},
        "calibration": {"alpha": 0.1},
        "methods": {"facter": {"violations": kinds, "threshold_path": [1.0, 1.1]}},
    }


def test_repro_corrected_counts_under_repro_names():
    run = _run({"fixed_q0": [4], "corrected": [4], "repro_count": [3], "adaptive": [2]})
    t = tb.method_table(
        [RunMetrics.partial(run)],
        name="t",
        title="T",
        columns=tb.THRESHOLD_COLUMNS[:5],
        methods=("facter",),
        published=(),
    )
    header = t.header
    assert "REPRO fixed (corrected): Q0 + C/sqrt(n)" in header and "REPRO corrected-dynamic: Q_t + C/sqrt(n)" in header
    row = t.rows[0]
    assert row[header.index("REPRO fixed (corrected): Q0 + C/sqrt(n)")] == "3.0"  # our repro_count
    dyn = row[header.index("REPRO corrected-dynamic: Q_t + C/sqrt(n)")]
    assert dyn.startswith("n/a [")
    assert any("corrected-dynamic count (S > Q_t + C/sqrt(n)) is not computed" in f for f in t.footnotes)
    assert label("violations_repro_count") == "REPRO fixed (corrected)"
    assert label("violations_corrected") == "V(0) + our correction"
    # per pass: REPRO's name for repro_count, and the dynamic count shown when a run records it
    t = tb.per_pass_table([RunMetrics.partial(run)], name="p", title="P", published=False)
    assert "REPRO fixed (corrected)" in t.header and "REPRO corrected-dynamic" not in t.header
    assert any("with correction none it equals V(0)" in n for n in t.notes)
    run = _run({"fixed_q0": [4], "repro_count": [3], "adaptive": [2], "repro_dynamic": [1]})
    t = tb.per_pass_table([RunMetrics.partial(run)], name="p", title="P", published=False)
    i = t.header.index("REPRO corrected-dynamic")
    assert t.rows[1][i] == "1.0"
