"""Issue 44, cases 10 and 11: late, silent or misworded cases, each one line before work with the real cause."""

from __future__ import annotations

import os

import pytest

FAKE_RUN = ["run", "--model", "fake", "--encoder", "hash-encoder", "--dataset", "synthetic", "--n-rows", "40"]


def _one_error(capsys) -> str:
    """The command's error (a configuration's problems come as one heading and one line each)."""
    err = capsys.readouterr().err
    assert "Traceback" not in err and sum("error" in ln for ln in err.splitlines()) == 1, err
    return err


def test_a_runs_folder_that_links_to_itself_is_refused_before_work(tmp_path, monkeypatch, capsys):
    from facterlab.cli import main

    root = tmp_path / "results"
    root.mkdir()
    (root / "runs").symlink_to(root / "runs")
    monkeypatch.setenv("FACTERLAB_CACHE", str(tmp_path / "cache"))
    assert main([*FAKE_RUN, "--out-dir", str(root)]) == 1
    assert "is a symbolic link that leads nowhere (a loop, or a missing target)" in _one_error(capsys)
    assert not (tmp_path / "cache").exists()  # before any work


def test_an_empty_out_dir_is_an_error_not_the_current_folder(tmp_path, monkeypatch, capsys):
    from facterlab.cli import main

    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("FACTERLAB_RESULTS", str(tmp_path / "results"))
    assert main([*FAKE_RUN, "--out-dir", ""]) == 1
    assert "--out-dir / out_dir '' is empty: give a folder" in _one_error(capsys)
    assert not (tmp_path / "runs").exists() and not (tmp_path / "results").exists()


def test_an_unwritable_cache_is_named_as_such_not_as_a_full_disk(tmp_path, monkeypatch):
    from facterlab.config import preset
    from facterlab.facter import validation

    cache = tmp_path / "ro-cache"
    cache.mkdir()
    real = os.access
    monkeypatch.setattr(validation.os, "access", lambda p, mode: False if str(p) == str(cache) else real(p, mode))
    with pytest.raises(PermissionError) as info:  # root may write anywhere: the read-only answer is simulated
        validation.check_free_space(preset("repro"), tmp_path / "results", cache)
    assert "the cache folder cannot be written here" in str(info.value) and "FACTERLAB_CACHE" in str(info.value)
    assert "space" not in str(info.value)


@pytest.mark.parametrize("path", ["/dev/zero", "DIR"])
def test_a_sweep_file_that_is_a_device_or_a_folder_is_named_so(tmp_path, monkeypatch, capsys, path):
    from facterlab.cli import main

    path = str(tmp_path) if path == "DIR" else path
    monkeypatch.setenv("FACTERLAB_RESULTS", str(tmp_path / "results"))
    assert main(["sweep", "--file", path]) == 1
    line = _one_error(capsys)
    assert "is not a regular file" in line and "does not exist" not in line


def test_a_dead_workers_running_task_is_not_called_pending():
    from facterlab import executors

    assert "running" in executors.WORKER_DIED and "pending" not in executors.WORKER_DIED
    assert "before any task of its pool started" in executors.WORKER_DIED_WAITING
