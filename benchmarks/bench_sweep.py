"""Overhead of the executor seam: serial vs local process pool vs Dask LocalCluster, for 8 short runs
(``facterlab sweep``) and for 8 simulations of the Simpson grid.

    .venv/bin/python benchmarks/bench_sweep.py [--runs 8] [--rounds 4] [--workers 2] [--n-rows 40]
        [--simpson-users 20000] [--only sweep|simpson]

Sweep: each measurement is a fresh sweep of ``--runs`` fake-model runs (synthetic data, 1 FACTER pass)
into a new results folder (so every run executes), with the interactions already built (one warm-up
sweep).  Simpson: each measurement is :func:`facterlab.simpson.simulate.grid` with ``--runs``
configurations (sigma_1 x d_1) of ``--simpson-users`` users, through the same executors (its process
pool is the grid's default one: started the platform's default way, fork on Linux); the frames of
every executor are checked equal to the serial one, bit for bit.

Executors alternate (A B C, then C B A, ...) so that a change in the machine's load hits each alike;
the tables give medians of wall time and of CPU time (this process plus every child process it
reaped: pool workers, Dask nannies and their workers), and the load average at the start and at the
end.  The Dask and pool times include starting and stopping the workers, as a user's
``--executor dask`` pays it.
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

KINDS = ("serial", "process", "dask")


def _cpu() -> float:
    own, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + kids.ru_utime + kids.ru_stime


def _alternate(name: str, rounds: int, once: Callable[[str, int], None]) -> dict:
    """``once(kind, n)`` for every executor, A B C then C B A ...; kind -> [(wall, cpu)]."""
    times: dict = {k: [] for k in KINDS}
    n = 0
    for r in range(rounds):
        for kind in KINDS if r % 2 == 0 else KINDS[::-1]:
            n += 1
            c0, t0 = _cpu(), time.perf_counter()
            once(kind, n)
            wall, cpu = time.perf_counter() - t0, _cpu() - c0
            times[kind].append((wall, cpu))
            print(f"{name} round {r + 1} {kind:8} wall {wall:6.1f} s  cpu {cpu:6.1f} s", file=sys.stderr)
    return times


def _table(times: dict) -> None:
    print(f"{'executor':10} {'median wall s':>14} {'median cpu s':>13} {'wall vs serial':>15}")
    base = statistics.median(w for w, _ in times["serial"])
    for kind in KINDS:
        wall = statistics.median(w for w, _ in times[kind])
        cpu = statistics.median(c for _, c in times[kind])
        print(f"{kind:10} {wall:14.1f} {cpu:13.1f} {wall / base:14.2f}x")


def bench_sweep(args, tmp: Path) -> None:
    from facterlab.executors import make_executor
    from facterlab.reporting.sweep import expand_grid, run_sweep

    fixed = {
        "model__llm": "fake",
        "data__dataset": "synthetic",
        "data__n_rows": args.n_rows,
        "facter__passes": 1,
        "metrics__cfr_rows": 4,
    }
    configs = expand_grid({"seed": list(range(args.runs))}, fixed)
    run_sweep(configs, executor="serial", out_dir=tmp / "warm")  # builds the interactions once

    def once(kind: str, n: int) -> None:
        ex = make_executor(kind, 1 if kind == "serial" else args.workers)
        res = run_sweep(configs, executor=ex, out_dir=tmp / f"m{n}")
        ex.close()
        assert res.n_started == args.runs and res.n_failed == 0, res.table()

    load0 = os.getloadavg()
    times = _alternate("sweep", args.rounds, once)
    load1 = os.getloadavg()
    print(f"sweep: {args.runs} runs (fake model, synthetic n_rows={args.n_rows}, 1 pass), {args.workers} workers, "
          f"{args.rounds} rounds, {os.cpu_count()} CPUs; load average {load0[0]:.1f} -> {load1[0]:.1f}")  # fmt: skip
    _table(times)


def bench_simpson(args) -> None:
    import numpy as np
    import pandas as pd

    from facterlab.simpson.simulate import SimpsonConfig
    from facterlab.simpson.sweeping import grid

    n_sigma = max(1, args.runs // 2)
    sig, d1 = np.linspace(0, 10, n_sigma), np.linspace(1.5, 4, max(1, args.runs // n_sigma))
    base = SimpsonConfig(n_users=args.simpson_users, bias=0.03)
    ref = grid(sig, d1, base=base, progress=False)  # also the warm-up (imports)

    def once(kind: str, n: int) -> None:
        df = grid(sig, d1, base=base, progress=False, n_jobs=args.workers, executor=kind)
        pd.testing.assert_frame_equal(df, ref, check_exact=True)  # milliseconds

    load0 = os.getloadavg()
    times = _alternate("simpson", args.rounds, once)
    load1 = os.getloadavg()
    print(f"simpson grid: {len(ref)} simulations of {args.simpson_users} users, {args.workers} workers, "
          f"{args.rounds} rounds, {os.cpu_count()} CPUs; load average {load0[0]:.1f} -> {load1[0]:.1f}; "
          "frames identical on every executor")  # fmt: skip
    _table(times)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=8)
    ap.add_argument("--rounds", type=int, default=4)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--n-rows", type=int, default=40)
    ap.add_argument("--simpson-users", type=int, default=20_000)
    ap.add_argument("--only", choices=("sweep", "simpson"), default=None)
    args = ap.parse_args(argv)

    tmp = Path(tempfile.mkdtemp(prefix="bench_sweep-"))
    os.environ["FACTERLAB_CACHE"] = str(tmp / "cache")
    os.environ.setdefault("FACTERLAB_LOG", "WARNING")
    if args.only in (None, "sweep"):
        bench_sweep(args, tmp)
    if args.only in (None, "simpson"):
        bench_simpson(args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
