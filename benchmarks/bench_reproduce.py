"""Wall time of `facterlab reproduce` per notebook and in total.

    python benchmarks/bench_reproduce.py                    # default profile (about 30 min on 2 cores)
    python benchmarks/bench_reproduce.py --profile smoke    # seconds to a few minutes
    python benchmarks/bench_reproduce.py --warm             # run twice: cold, then from the caches

Runs the command in a subprocess from the repository root, then reads
``results/reproduce_timings.json`` and prints one row per notebook: seconds, share of the total,
and (with ``--warm``) the warm seconds and the cold/warm ratio.  Peak memory is the largest
resident set of the child processes (``resource.getrusage(RUSAGE_CHILDREN)``; kernels included).
A run's timings are one measurement, not a median: a full reproduction is too long to repeat.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def _facterlab() -> list:
    exe = Path(sys.executable).with_name("facterlab")
    return [str(exe)] if exe.is_file() else [sys.executable, "-m", "facterlab.cli"]


def run_once(profile: str, only: str | None, extra: list) -> tuple:
    cmd = [*_facterlab(), "reproduce", "--profile", profile, *(["--only", only] if only else []), *extra]
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, cwd=REPO, env={**os.environ, "PYTHONHASHSEED": "0"})
    wall = time.perf_counter() - t0
    results = Path(os.environ.get("FACTERLAB_RESULTS", REPO / "results"))
    if not results.is_absolute():
        results = REPO / results
    timings = json.loads((results / "reproduce_timings.json").read_text())
    return proc.returncode, wall, timings


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--profile", default="default", choices=["default", "paper", "smoke"])
    ap.add_argument("--only", default=None)
    ap.add_argument("--warm", action="store_true", help="run a second time (caches warm) and print the ratio")
    ap.add_argument("--set", action="append", default=[], metavar="KEY=VALUE")
    args = ap.parse_args(argv)
    extra = [a for kv in args.set for a in ("--set", kv)]

    rc, wall, cold = run_once(args.profile, args.only, extra)
    warm = None
    if args.warm:
        rc2, _, warm = run_once(args.profile, args.only, extra)
        rc = rc or rc2
    peak_mb = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024

    total = cold["total_seconds"]
    warm_by = {n["notebook"]: n["seconds"] for n in (warm or {}).get("notebooks", [])}
    w = max([len(n["notebook"]) for n in cold["notebooks"]] + [8])
    head = f"{'notebook':<{w}}  {'status':<6}  {'cold s':>8}  {'share':>6}"
    if warm:
        head += f"  {'warm s':>8}  {'cold/warm':>9}"
    print(f"\nfacterlab reproduce --profile {args.profile}" + (f" --only {args.only}" if args.only else ""))
    print(head)
    print("-" * len(head))
    for n in cold["notebooks"]:
        line = f"{n['notebook']:<{w}}  {n['status']:<6}  {n['seconds']:>8.1f}  {n['seconds'] / total:>6.1%}"
        if warm:
            ws = warm_by.get(n["notebook"])
            line += f"  {ws:>8.1f}  {n['seconds'] / ws:>9.1f}" if ws else f"  {'n/a':>8}  {'n/a':>9}"
        print(line)
    print("-" * len(head))
    line = f"{'total':<{w}}  {'':<6}  {total:>8.1f}  {1:>6.0%}"
    if warm:
        line += f"  {warm['total_seconds']:>8.1f}  {total / warm['total_seconds']:>9.1f}"
    print(line)
    print(
        f"command wall time {wall:.1f} s (incl. start-up); peak child RSS {peak_mb:.0f} MiB; "
        f"{os.cpu_count()} CPU cores visible; load average at the end {os.getloadavg()[0]:.1f}"
    )
    ds = cold.get("dataset") or {}
    print(f"dataset {ds.get('dataset', 'not recorded')} ({ds.get('how', '?')}); figures -> {cold.get('figures_dir')}")
    return rc


if __name__ == "__main__":
    sys.exit(main())
