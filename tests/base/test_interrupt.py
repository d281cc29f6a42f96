"""Issue 44, case 6: Ctrl-C gives one line and rc 130, also when SIGINT was inherited ignored."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import psutil
import pytest


def _interrupt(tmp_path, args: list, ignored: bool, wait_for: str, group: bool = False) -> tuple:
    env = {**os.environ, "FACTERLAB_RESULTS": str(tmp_path / "results"), "FACTERLAB_CACHE": str(tmp_path / "cache")}

    def pre() -> None:
        if ignored:  # a script's background job: SIGINT inherited ignored
            signal.signal(signal.SIGINT, signal.SIG_IGN)

    proc = subprocess.Popen(
        [sys.executable, "-m", "facterlab.cli", *args],
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        preexec_fn=pre,
        start_new_session=group,
    )
    kids: list = []
    try:
        lines = []
        assert proc.stderr is not None
        for line in proc.stderr:  # wait until the work has started
            lines.append(line)
            if wait_for in line:
                break
        time.sleep(1.0)
        assert proc.poll() is None, "the command ended before Ctrl-C"
        kids = psutil.Process(proc.pid).children(recursive=True)
        if group:  # a terminal's Ctrl-C: the whole foreground process group
            os.killpg(proc.pid, signal.SIGINT)
        else:
            proc.send_signal(signal.SIGINT)
        rest = proc.stderr.read()
        rc = proc.wait(30)
        t0 = time.monotonic()
        while any(k.is_running() and k.status() != psutil.STATUS_ZOMBIE for k in kids) and time.monotonic() - t0 < 10:
            time.sleep(0.1)
        left = [k for k in kids if k.is_running() and k.status() != psutil.STATUS_ZOMBIE]
        return rc, rest, left
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(10)
        proc.stderr.close()
        for k in kids:
            try:
                k.kill()
            except psutil.NoSuchProcess:
                pass


@pytest.mark.integration
@pytest.mark.parametrize("ignored", [False, True])
def test_ctrl_c_in_run_is_one_line_and_rc_130(tmp_path, ignored):
    args = ["-v", "run", "--model", "fake", "--encoder", "hash-encoder", "--dataset", "synthetic"]
    rc, err, _ = _interrupt(tmp_path, [*args, "--n-rows", "3000", "--passes", "2"], ignored, "threads=")
    assert rc == 130, err
    assert "Traceback" not in err and "KeyboardInterrupt" not in err, err
    assert err.strip().splitlines() == [
        "facterlab run: interrupted (Ctrl-C); what was finished is kept: the same command goes on from there"
    ]


@pytest.mark.integration
def test_ctrl_c_in_a_sweep_ends_its_pool_workers_with_one_line(tmp_path):
    sets = ["model__llm=fake", "model__encoder=hash-encoder", "data__dataset=synthetic", "data__n_rows=3000"]
    args = ["sweep", *[a for s in sets for a in ("--set", s)], "--grid", "seed=0,1,2,3"]
    args += ["--executor", "process", "--workers", "2"]
    rc, err, left = _interrupt(tmp_path, args, True, "runs on process", group=True)
    assert rc == 130 and not left, (rc, left, err)
    assert "Traceback" not in err and "KeyboardInterrupt" not in err, err
    assert err.strip().splitlines()[-1].startswith("facterlab sweep: interrupted (Ctrl-C)")
