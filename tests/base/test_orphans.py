"""Issue 44, case 1: a process pool's workers die with their driver, even when it is killed with -9."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time

import psutil
import pytest

DRIVER = textwrap.dedent(
    """
    import sys, threading, time
    from facterlab.executors import ProcessExecutor

    def sweep():
        with ProcessExecutor(2) as ex:
            ex.run(time.sleep, {"a": 300, "b": 300}, retries=0)

    if __name__ == "__main__":
        if sys.argv[1] == "main":
            sweep()
        else:  # the pool started from another thread: no parent-death signal, the watchdog alone
            t = threading.Thread(target=sweep)
            t.start()
            t.join()
    """
)


def _alive(proc: psutil.Process) -> bool:
    try:
        return proc.is_running() and proc.status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


@pytest.mark.parametrize("started_from", ["main", "thread"])
def test_pool_workers_die_with_killed_driver(tmp_path, started_from):
    script = tmp_path / "driver.py"
    script.write_text(DRIVER)
    driver = subprocess.Popen([sys.executable, str(script), started_from], env=os.environ.copy())
    descendants: list = []
    try:
        deadline = time.monotonic() + 60
        workers: list = []
        while time.monotonic() < deadline:
            kids = psutil.Process(driver.pid).children(recursive=True)
            workers = [k for k in kids if "spawn_main" in " ".join(k.cmdline())]
            if len(workers) == 2:
                break
            time.sleep(0.2)
        assert len(workers) == 2, f"the driver started {len(workers)} pool workers"
        time.sleep(1.0)  # let them reach their task
        assert driver.poll() is None, "the driver ended before it was killed"
        descendants[:] = psutil.Process(driver.pid).children(recursive=True)
        os.kill(driver.pid, signal.SIGKILL)
        driver.wait(10)
        t0 = time.monotonic()
        while any(map(_alive, descendants)) and time.monotonic() - t0 < 5:
            time.sleep(0.1)
        left = [p for p in descendants if _alive(p)]
        assert not left, f"{len(left)} of the driver's {len(descendants)} processes outlived it by 5 s"
    finally:  # this test's processes only, by their ids (orphans are no longer our children)
        driver.kill()
        for proc in descendants:  # psutil checks that each is still the process it was (not a reused id)
            try:
                proc.kill()
            except psutil.NoSuchProcess:
                pass
