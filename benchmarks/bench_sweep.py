"""Overhead of the sweep executors: serial vs local process pool vs Dask LocalCluster, 8 short runs.

    .venv/bin/python benchmarks/bench_sweep.py [--runs 8] [--rounds 2] [--workers 2] [--n-rows 40]

Each measurement is a fresh sweep of ``--runs`` fake-model runs (synthetic data, 1 FACTER pass) into a
new results folder (so every run executes), with the interactions already built (one warm-up sweep).
Executors alternate (A B C, then C B A, ...) so that a change in the machine's load hits each alike;
the table gives medians of wall time and of CPU time (this process plus every child process it reaped:
pool workers, Dask nannies and their workers), and the load average at the start and at the end.
The Dask time includes starting and stopping the LocalCluster, as a user's ``--executor dask`` pays it.
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import sys
import tempfile
import time
from pathlib import Path


def _cpu() -> float:
    own, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + kids.ru_utime + kids.ru_stime


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=8)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--n-rows", type=int, default=40)
    args = ap.parse_args(argv)

    tmp = Path(tempfile.mkdtemp(prefix="bench_sweep-"))
    os.environ["FACTERLAB_CACHE"] = str(tmp / "cache")
    os.environ.setdefault("FACTERLAB_LOG", "WARNING")
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
    kinds = ["serial", "process", "dask"]
    times: dict = {k: [] for k in kinds}
    load0 = os.getloadavg()
    n = 0
    for r in range(args.rounds):
        for kind in kinds if r % 2 == 0 else kinds[::-1]:
            n += 1
            c0, t0 = _cpu(), time.perf_counter()
            ex = make_executor(kind, 1 if kind == "serial" else args.workers)
            res = run_sweep(configs, executor=ex, out_dir=tmp / f"m{n}")
            ex.close()
            wall, cpu = time.perf_counter() - t0, _cpu() - c0
            assert res.n_started == args.runs and res.n_failed == 0, res.table()
            times[kind].append((wall, cpu))
            print(f"round {r + 1} {kind:8} wall {wall:6.1f} s  cpu {cpu:6.1f} s", file=sys.stderr)
    load1 = os.getloadavg()
    print(f"{args.runs} runs (fake model, synthetic n_rows={args.n_rows}, 1 pass), {args.workers} workers, "
          f"{args.rounds} rounds, {os.cpu_count()} CPUs; load average {load0[0]:.1f} -> {load1[0]:.1f}")  # fmt: skip
    print(f"{'executor':10} {'median wall s':>14} {'median cpu s':>13} {'wall vs serial':>15}")
    base = statistics.median(w for w, _ in times["serial"])
    for kind in kinds:
        wall = statistics.median(w for w, _ in times[kind])
        cpu = statistics.median(c for _, c in times[kind])
        print(f"{kind:10} {wall:14.1f} {cpu:13.1f} {wall / base:14.2f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
