"""The typed run record (facterlab.facter.record): round trip, old-format load, malformed files,
the flat view against the pre-record flattening, and the generated schema section of docs/CONTRACTS.md."""

from __future__ import annotations

import json
import math
import shutil
from pathlib import Path
from typing import Any

import pytest

from facterlab.datatypes import MissingValue
from facterlab.facter.record import (
    RECORD_FILES,
    RecordError,
    RunMetrics,
    RunRecord,
    schema_markdown,
    sync_schema_doc,
)
from facterlab.facter.runfolder import find
from facterlab.reporting import experiments as ex

REPO = Path(__file__).resolve().parents[2]
ATTRIBUTES = ("gender", "age", "occupation")


@pytest.fixture(scope="module")
def fake_run(tmp_path_factory):
    """One tiny fake-model run (its folder is copied by tests that change it)."""
    out = tmp_path_factory.mktemp("record")
    cfg = ex.run_config(dataset="synthetic", model="fake", n_rows=60, passes=2, cfr_rows=8, seed=1)
    return ex.run(cfg, progress=False, out_dir=out)


def _copy(res, tmp_path) -> Path:
    dst = tmp_path / res.run_id
    shutil.copytree(res.out_dir, dst)
    return dst


def test_round_trip_is_byte_identical(fake_run, tmp_path):
    rec = RunRecord.load(fake_run.out_dir)
    assert rec == fake_run.record and rec.folder == fake_run.out_dir
    assert rec.meta is not None and rec.meta.code_version and rec.meta.started_at <= rec.meta.finished_at
    rec.save(tmp_path)
    for _attr, name, _required in RECORD_FILES:
        assert (tmp_path / name).read_bytes() == (fake_run.out_dir / name).read_bytes(), name
    assert RunRecord.load(tmp_path) == rec


def test_run_json_is_not_part_of_the_run_id(fake_run, tmp_path):
    run_json = json.loads((fake_run.out_dir / "run.json").read_text())
    assert set(run_json) == {"started_at", "finished_at", "code_version", "command", "host"}
    assert "started_at" not in (fake_run.out_dir / "config.json").read_text()
    # a rerun of the same config gets the same id (and a new run.json)
    again = ex.run(
        ex.run_config(dataset="synthetic", model="fake", n_rows=60, passes=2, cfr_rows=8, seed=1),
        progress=False,
        out_dir=tmp_path,
    )
    assert again.run_id == fake_run.run_id and again.record.metrics == fake_run.record.metrics


def test_saved_runs_of_this_checkout_load_and_round_trip():
    """Backward compatibility: the run folders already in results/runs (written before the record existed)."""
    folders = [p for p in sorted((REPO / "results" / "runs").glob("*")) if (p / "metrics.json").is_file()]
    if not folders:
        pytest.skip("no saved runs in results/runs")
    for folder in folders:
        rec = RunRecord.load(folder)
        for name, obj in rec.parts().items():
            assert json.dumps(obj, indent=2, sort_keys=True) == (folder / name).read_text(), (folder, name)
        assert all(rec.metrics.flat(m) for m in rec.metrics.methods)


def _strip_new_keys(folder: Path) -> None:
    """Make ``folder`` look like an older run: no run.json, none of the keys added over time."""
    (folder / "run.json").unlink()
    m = json.loads((folder / "metrics.json").read_text())
    for k in ("model_name", "encoder_name", "n_distinct_users"):
        m.pop(k)
    for k in ("test_mean_neighbours", "test_share_no_neighbour", "degenerate"):
        m["calibration"].pop(k)
    for block in m["methods"].values():
        for k in ("n_degenerate", "degenerate", "mean_S", "cfr_detail", "n_recommender_calls"):
            block.pop(k)
    m["a_future_key"] = {"kept": True}
    (folder / "metrics.json").write_text(json.dumps(m, indent=2, sort_keys=True))


def test_old_format_loads_and_reads_as_missing(fake_run, tmp_path):
    folder = _copy(fake_run, tmp_path)
    _strip_new_keys(folder)
    rec = RunRecord.load(folder)
    assert rec.meta is None
    m = rec.metrics
    assert m.field_value("model") == m.model  # no registry name: the fingerprint
    assert m.model_name is None and "model_name" in m.absent
    flat = m.flat("facter")
    assert isinstance(flat["no_neighbour_test"], MissingValue) and "not recorded" in flat["no_neighbour_test"].reason
    assert "n_degenerate" not in flat and isinstance(flat["ndcg@10_multi"], float)
    # unknown keys survive; absent keys stay absent
    out = tmp_path / "resaved"
    rec.save(out)
    assert (out / "metrics.json").read_text() == (folder / "metrics.json").read_text()
    assert not (out / "run.json").exists()
    assert m.extra == {"a_future_key": {"kept": True}}


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        (lambda m: m.pop("n_test"), r"metrics\.json: key 'n_test' missing"),
        (
            lambda m: m["methods"]["facter"].__setitem__("cfr_multi", "abc"),
            r"metrics\.json\.methods\.facter\.cfr_multi",
        ),
        (lambda m: m.__setitem__("methods", []), r"metrics\.json\.methods: expected a JSON object"),
        (lambda m: m["calibration"].pop("q0"), r"metrics\.json\.calibration: key 'q0' missing"),
    ],
)
def test_malformed_record_names_file_and_key(fake_run, tmp_path, edit, message, caplog):
    folder = _copy(fake_run, tmp_path)
    m = json.loads((folder / "metrics.json").read_text())
    edit(m)
    (folder / "metrics.json").write_text(json.dumps(m))
    with pytest.raises(RecordError, match=message):
        RunRecord.load(folder)
    assert find(folder.parent, folder.name) is None
    assert "saved run ignored" in caplog.text


def test_unreadable_or_missing_file_is_named(fake_run, tmp_path):
    folder = _copy(fake_run, tmp_path)
    (folder / "run.json").write_text("{not json")
    with pytest.raises(RecordError, match=r"run\.json: does not load"):
        RunRecord.load(folder)
    (folder / "config.json").unlink()
    with pytest.raises(RecordError, match=r"config\.json: missing"):
        RunRecord.load(folder)


# The flattening tables used before the record (facterlab.reporting.tables at commit e96627b), kept
# verbatim as the reference the flat view must reproduce.
def _legacy_value(x: Any, what: str = "value") -> Any:
    if isinstance(x, MissingValue):
        return x
    if x is None:
        return MissingValue(f"{what} not recorded in metrics.json")
    if isinstance(x, dict):
        if "value" in x:
            if x["value"] is None:
                return MissingValue(str(x.get("missing_reason") or f"{what} missing (no reason given)"))
            return _legacy_value(x["value"], what)
        return MissingValue(f"{what} is a mapping without a value")
    if isinstance(x, bool):
        return float(x)
    try:
        v = float(x)
    except (TypeError, ValueError):
        return MissingValue(f"{what} is not a number: {x!r}")
    if not math.isfinite(v):
        return MissingValue(f"{what} is not finite ({v})")
    return v


def _legacy_flatten(method: dict) -> dict:
    out: dict = {}
    for key, val in method.items():
        if key in ("snsr_proxy", "cfr_single", "violations", "threshold_path", "parse_status"):
            continue
        if isinstance(val, (dict, list)) and not (isinstance(val, dict) and "value" in val):
            continue
        out[key] = _legacy_value(val, key)
    snsr = method.get("snsr_proxy")
    if isinstance(snsr, dict):
        for g, block in snsr.items():
            if isinstance(block, dict) and "snsr" in block:
                out[f"snsr_{g}"] = _legacy_value(block.get("snsr"), f"snsr_{g}")
                out[f"snsv_{g}"] = _legacy_value(block.get("snsv"), f"snsv_{g}")
                out[f"n_groups_{g}"] = _legacy_value(block.get("n_groups"), f"n_groups_{g}")
            else:
                miss = _legacy_value(block, f"snsr_{g}")
                for pre in ("snsr", "snsv", "n_groups"):
                    out[f"{pre}_{g}"] = (
                        miss if isinstance(miss, MissingValue) else MissingValue(f"snsr_{g} has no snsr/snsv fields")
                    )
    cfr = method.get("cfr_single")
    if isinstance(cfr, dict) and "value" not in cfr:
        for attr, val in cfr.items():
            out[f"cfr_{attr}"] = _legacy_value(val, f"cfr_{attr}")
    elif cfr is not None:
        miss = _legacy_value(cfr, "cfr_single")
        for attr in ATTRIBUTES:
            out[f"cfr_{attr}"] = miss
    viol = method.get("violations")
    if isinstance(viol, dict):
        for kind, series in viol.items():
            if isinstance(series, (list, tuple)):
                vals = [_legacy_value(v, f"violations_{kind}") for v in series]
                for i, v in enumerate(vals, start=1):
                    out[f"violations_{kind}_pass{i}"] = v
                if not vals:
                    out[f"violations_{kind}"] = MissingValue(f"violations_{kind}: no passes recorded")
                    continue
                out[f"violations_{kind}"] = vals[-1]
                miss = [v for v in vals if isinstance(v, MissingValue)]
                out[f"violations_{kind}_total"] = miss[0] if miss else float(sum(vals))
            else:
                out[f"violations_{kind}"] = _legacy_value(series, f"violations_{kind}")
    path = method.get("threshold_path")
    if isinstance(path, (list, tuple)) and path:
        out["q0"] = _legacy_value(path[0], "q0")
        out["q_final"] = _legacy_value(path[-1], "q_final")
    status = method.get("parse_status")
    if isinstance(status, dict):
        for k, v in status.items():
            out[f"parse_{k}"] = _legacy_value(v, f"parse_{k}")
    return out


def _same(a: Any, b: Any) -> bool:
    if isinstance(a, MissingValue) or isinstance(b, MissingValue):
        return a == b
    return math.isclose(a, b) if isinstance(a, float) and isinstance(b, float) else a == b


def test_flat_view_equals_the_old_flattening(fake_run, tmp_path):
    raw = json.loads((fake_run.out_dir / "metrics.json").read_text())
    # a degenerate variant too: every method's fairness metrics are missing values
    degenerate = json.loads(json.dumps(raw))
    for block in degenerate["methods"].values():
        block["cfr_multi"] = MissingValue("degenerate output").to_json()
        block["snsr_proxy"] = {g: MissingValue("degenerate output").to_json() for g in block["snsr_proxy"]}
        block["violations"] = {
            k: [MissingValue("degenerate").to_json() for _ in v] for k, v in block["violations"].items()
        }
    for metrics in (raw, degenerate):
        rec = RunMetrics.from_json(metrics)
        for method, block in metrics["methods"].items():
            old = _legacy_flatten(block)
            new = rec.methods[method].flat()
            assert set(old) == set(new), method
            assert all(_same(old[k], new[k]) for k in old), [k for k in old if not _same(old[k], new[k])]
            assert len(new) > 30  # the view is not trivially empty


def test_schema_doc_is_generated_from_the_code(tmp_path):
    assert sync_schema_doc(REPO / "docs" / "CONTRACTS.md"), (
        "docs/CONTRACTS.md differs from facterlab.facter.record.schema_markdown(): rewrite it with "
        "sync_schema_doc('docs/CONTRACTS.md', write=True)"
    )
    doc = tmp_path / "doc.md"
    text = (REPO / "docs" / "CONTRACTS.md").read_text()
    doc.write_text(text.replace("| `n_test` | int | required | test rows |", "| `n_test` | int | required | rows |"))
    assert not sync_schema_doc(doc)  # a hand edit is caught
    assert "`cfr_multi`" in schema_markdown() and "`started_at`" in schema_markdown()


def test_reuse_says_so_with_its_date(capsys, caplog, monkeypatch):
    import logging

    monkeypatch.setattr(
        logging.getLogger("facterlab"), "handlers", []
    )  # no log lines shown (an earlier CLI call may add one)
    cfg = ex.run_config(dataset="synthetic", model="fake", n_rows=60, passes=1, cfr_rows=4, seed=2)
    first = ex.run(cfg, progress=False)
    capsys.readouterr()
    with caplog.at_level("INFO", logger="facterlab.reporting.experiments"):
        again = ex.run(cfg, progress=False)
    assert again.run_id == first.run_id
    started = first.record.meta.started_at
    want = f"reusing run {first.run_id} from {started} ({first.out_dir})"
    assert capsys.readouterr().out.count(want) == 1
    assert any(want in r.getMessage() for r in caplog.records)


def test_reuse_is_said_once_when_facterlab_logs_are_shown(capsys):
    import logging

    cfg = ex.run_config(dataset="synthetic", model="fake", n_rows=60, passes=1, cfr_rows=4, seed=3)
    first = ex.run(cfg, progress=False)
    seen = []
    handler = logging.Handler(logging.INFO)
    handler.emit = lambda record: seen.append(record.getMessage())  # type: ignore[method-assign]
    logger = logging.getLogger("facterlab")
    old_level = logger.level
    logger.addHandler(handler)
    logger.setLevel(logging.INFO)
    try:
        capsys.readouterr()
        ex.run(cfg, progress=False)
    finally:
        logger.removeHandler(handler)
        logger.setLevel(old_level)
    assert [m for m in seen if m.startswith("reusing run")] == [
        f"reusing run {first.run_id} from {first.record.meta.started_at} ({first.out_dir})"
    ]
    assert "reusing run" not in capsys.readouterr().out  # the log line is the one saying it


def test_code_version_and_command(monkeypatch):
    from facterlab.facter import provenance, record  # record re-exports provenance's helpers (issue 32)

    if (REPO / ".git").exists():  # a git work tree: git describe
        assert record.code_version().startswith("git ")
    monkeypatch.setattr(provenance.shutil, "which", lambda name: None)  # no git: the package version
    from importlib.metadata import version

    assert record.code_version() == f"facterlab {version('facterlab')}"
    monkeypatch.setattr(provenance.sys, "argv", ["facterlab", "run", "--seed", "3"])
    assert record.run_command() == "facterlab run --seed 3"
    monkeypatch.setattr(provenance.sys, "argv", ["/x/ipykernel_launcher.py", "-f", "k.json"])
    monkeypatch.setenv("FACTERLAB_NOTEBOOK", "03_table1_open_generation")
    assert record.run_command() == "notebook 03_table1_open_generation"
