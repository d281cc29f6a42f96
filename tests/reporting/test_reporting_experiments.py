"""Saved-run reuse: a finished run is read back only for the same config, data and model fingerprints."""

from __future__ import annotations

import shutil

import pandas as pd
import pytest

from facterlab.facter.record import RunRecord
from facterlab.reporting import experiments as ex


@pytest.mark.slow
def test_saved_run_is_reused_only_with_the_same_fingerprints(monkeypatch, caplog):
    cfg = ex.run_config(dataset="synthetic", model="fake", n_rows=60, passes=1, cfr_rows=4)
    assert ex.find_saved_run(cfg) is None
    first = ex.run(cfg, progress=False)
    saved = ex.find_saved_run(cfg)
    assert saved is not None and saved.name == first.run_id
    fp = RunRecord.load(saved).config.fingerprints
    assert {"llm": fp.llm, "encoder": fp.encoder, **fp.extra} == ex.expected_fingerprints(cfg)
    assert fp.extra == {"blas_threads": 1}  # numpy's BLAS threads (facterlab.blas): another setting, another run
    monkeypatch.setenv("FACTERLAB_BLAS_THREADS", "auto")
    assert ex.find_saved_run(cfg) is None
    monkeypatch.delenv("FACTERLAB_BLAS_THREADS")
    again = ex.run(cfg, progress=False)  # read back, not recomputed
    assert again.run_id == first.run_id and again.timings == first.timings
    # the same config with other model files (or a newer parser) has another run id: not reused
    real = ex.expected_fingerprints

    def other_model(c, data_dir=None, inter=None):
        fp = real(c, data_dir, inter)
        return {**fp, "llm": fp["llm"] + "-other"}

    monkeypatch.setattr(ex, "expected_fingerprints", other_model)
    assert ex.find_saved_run(cfg) is None
    monkeypatch.setattr(ex, "expected_fingerprints", real)
    # a folder that does not load completely is not a finished run, and the lookup says why
    rows = saved / "rows_facter.parquet"
    good = rows.read_bytes()
    rows.write_bytes(good[: len(good) // 2])  # truncated parquet beside an intact metrics.json
    # said in one log line (not a Python warning with its source line: issue 44, case 11)
    for broken, said in (
        (lambda: None, "rows_facter.parquet does not load"),
        (
            lambda: (rows.write_bytes(good), (saved / "metrics.json").write_text('{"run_id": ')),
            "metrics.json does not load",
        ),
        (lambda: (saved / "rows_fair.parquet").unlink(), "lacks rows_fair.parquet"),
    ):
        broken()
        caplog.clear()
        assert ex.find_saved_run(cfg) is None
        lines = [r.getMessage() for r in caplog.records if r.levelname == "WARNING"]
        assert any("saved run ignored" in m and said in m for m in lines), lines
    redone = ex.run(cfg, progress=False)  # redone and put in place of the broken folder
    assert redone.run_id == first.run_id and ex.find_saved_run(cfg) == saved
    assert (saved / "rows_facter.parquet").read_bytes() == good
    shutil.rmtree(saved)


def test_a_saved_run_is_checked_once_and_its_tables_read_when_used(tmp_path, monkeypatch):
    """Issue 45: lookups section after section check a folder once, and read each parquet file once,
    when it is used; a changed file is checked again; a file that fails when read is named."""
    from facterlab.facter import runfolder
    from facterlab.facter.record import RecordError

    monkeypatch.setenv("FACTERLAB_RESULTS", str(tmp_path / "results"))
    monkeypatch.setenv("FACTERLAB_CACHE", str(tmp_path / "cache"))
    cfg = ex.run_config(dataset="synthetic", model="fake", n_rows=60, passes=1, cfr_rows=4)
    first = ex.run(cfg, progress=False)
    checks, loads, frames = [], [], []
    real_problem, real_load, real_frame = runfolder.run_folder_problem, runfolder.RunRecord.load, runfolder._read_frame
    monkeypatch.setattr(runfolder, "run_folder_problem", lambda p, full=True: checks.append(p) or real_problem(p, full))
    monkeypatch.setattr(runfolder.RunRecord, "load", lambda p: loads.append(p) or real_load(p))
    monkeypatch.setattr(runfolder, "_read_frame", lambda p: frames.append(p.name) or real_frame(p))
    again = [ex.run(cfg, progress=False) for _ in range(3)]
    assert len(checks) == 1 and len(loads) == 1 and frames == []  # the record from the check, no table yet
    assert all(r.run_id == first.run_id and r.record == first.record for r in again)
    folder = first.out_dir
    for r in again:  # what the files hold (read directly)
        assert r.rows["facter"].equals(pd.read_parquet(folder / "rows_facter.parquet"))
        assert r.calibration.equals(pd.read_parquet(folder / "calibration.parquet"))
    assert sorted(frames) == ["calibration.parquet", "rows_facter.parquet"]  # each once, for all three
    again[0].record.metrics.methods["facter"].n_degenerate = -1  # a caller's change stays in its own record
    assert ex.run(cfg, progress=False).record == first.record and len(checks) == 1
    (folder / "metrics.json").write_text((folder / "metrics.json").read_text() + "\n")  # changed: checked again
    assert ex.find_saved_run(cfg) == folder and len(checks) == 2
    late = ex.run(cfg, progress=False)
    (folder / "rows_fair.parquet").unlink()  # gone before it was used: named in one line
    with pytest.raises(RecordError, match=r"rows_fair\.parquet does not load .*delete .* to redo the run"):
        late.rows["fair"]
