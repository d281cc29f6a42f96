"""Overhead of the executor seam: serial vs local process pool vs Dask LocalCluster, for 8 short runs
(``facterlab sweep``) and for 8 simulations of the Simpson grid.

    .venv/bin/python benchmarks/bench_sweep.py [--runs 8] [--rounds 4] [--workers 2] [--n-rows 40]
        [--simpson-users 20000] [--only sweep|simpson]
    .venv/bin/python benchmarks/bench_sweep.py --encode-ab REV_A[,REV_B] [--rounds 2] [--n-rows 400]

``--encode-ab`` (issue 45, "each text encoded once"): ``run_many``'s worker path (2 worker processes) on 10
simulated MiniLM runs (2 row samples x 5 bias strengths, ``--n-rows`` rows, 2 passes, 50 CFR rows; ML-100K
when ``FACTERLAB_DATA`` holds it, else synthetic), each measurement a fresh process with empty results and
cache folders, two git revisions alternating (A B, B A, ...: each ``REV``'s ``src`` from ``git archive``,
``REV_B`` defaulting to the working tree).  Per measurement: wall and CPU seconds (the process and its
workers), the texts the sweep's tasks encoded (the rows its cache shards held when merged) and the distinct
texts (the rows of the shared cache after); then medians and B / A.

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

from _child import run_child  # this folder is on sys.path when a benchmark runs

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


ENCODE_AB_CHILD = r"""
import json, os, resource, sqlite3, sys, time
t0 = time.perf_counter()
from facterlab.reporting import batch
from facterlab.reporting import experiments as ex
merged = []
real = batch.run_sweep
def run_sweep(*a, **k):
    res = real(*a, **k)
    merged.append(res.merged.get("emb", 0))
    return res
batch.run_sweep = run_sweep
dataset, n_rows = sys.argv[1], int(sys.argv[2])
cfgs = {(seed, beta): ex.run_config(dataset=dataset, model="simulated", seed=seed, n_rows=n_rows, passes=2, cfr_rows=50,
                                    encoder="all-MiniLM-L6-v2", sim__beta=beta, sim__h=0.05)
        for seed in (0, 1) for beta in (0.0, 1.0, 2.0, 4.0, 6.0)}
batch.run_many(cfgs, workers=2, load=False)
conn = sqlite3.connect(os.path.join(os.environ["FACTERLAB_CACHE"], "embeddings.sqlite"))
distinct = conn.execute("SELECT COUNT(*) FROM embeddings").fetchone()[0]
own, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
cpu = own.ru_utime + own.ru_stime + kids.ru_utime + kids.ru_stime
print(json.dumps({"wall_s": time.perf_counter() - t0, "cpu_s": cpu, "encoded": sum(merged), "distinct": distinct}))
"""


def _src_of(rev: str) -> str:
    """A temporary folder holding ``src`` of git revision ``rev`` (``git archive``)."""
    import subprocess
    import tarfile

    out = tempfile.mkdtemp(prefix=f"bench_sweep_src_{rev[:12]}_")
    tar = Path(out) / "src.tar"
    repo = Path(__file__).resolve().parents[1]
    with open(tar, "wb") as fh:
        subprocess.run(["git", "-C", str(repo), "archive", rev, "src"], stdout=fh, check=True)
    with tarfile.open(tar) as t:
        t.extractall(out, filter="data")
    return str(Path(out) / "src")


def bench_encode_ab(args) -> None:
    """``--encode-ab`` (module docstring): texts encoded by run_many's worker path, two revisions alternating."""

    rev_a, _, rev_b = args.encode_ab.partition(",")
    src = {"A": _src_of(rev_a), "B": _src_of(rev_b) if rev_b else str(Path(__file__).resolve().parents[1] / "src")}
    names = {"A": rev_a, "B": rev_b or "worktree"}
    data = os.environ.get("FACTERLAB_DATA", "")
    dataset = "ml-100k" if data and (Path(data) / "ml-100k").is_dir() else "synthetic"
    got: dict = {"A": [], "B": []}
    for r in range(args.rounds):
        for v in ("A", "B") if r % 2 == 0 else ("B", "A"):
            tmp = Path(tempfile.mkdtemp(prefix=f"bench_encode_ab_{v}_"))
            env = dict(
                os.environ,
                PYTHONPATH=src[v],
                FACTERLAB_RESULTS=str(tmp / "results"),
                FACTERLAB_CACHE=str(tmp / "cache"),
                HF_HUB_OFFLINE="1",
            )
            load0 = os.getloadavg()[0]
            m = run_child(ENCODE_AB_CHILD, [dataset, args.n_rows], env, f"{v} ({names[v]})")
            m["load"] = f"{load0:.1f}-{os.getloadavg()[0]:.1f}"
            got[v].append(m)
            print(
                f"round {r + 1} {v} ({names[v]}): wall {m['wall_s']:6.1f} s  CPU {m['cpu_s']:6.1f} s  "
                f"texts encoded {m['encoded']} ({m['distinct']} distinct)  load {m['load']}",
                flush=True,
            )
    print(
        f"\nrun_many's worker path, 2 workers, 10 simulated MiniLM runs ({dataset}, n_rows {args.n_rows}, 2 passes, "
        f"50 CFR rows); medians of {args.rounds} (A = {names['A']}, B = {names['B']})"
    )
    print("| version | wall s | CPU s | texts encoded | distinct texts | loads |")
    print("|---|---|---|---|---|---|")
    med: dict = {}
    for v in ("A", "B"):
        ms = got[v]
        med[v] = {k: statistics.median(m[k] for m in ms) for k in ("wall_s", "cpu_s", "encoded", "distinct")}
        print(
            f"| {v} {names[v]} | {med[v]['wall_s']:.1f} | {med[v]['cpu_s']:.1f} | {med[v]['encoded']:.0f} | "
            f"{med[v]['distinct']:.0f} | {', '.join(m['load'] for m in ms)} |"
        )
    a, b = med["A"], med["B"]
    print(f"ratio B / A: wall {b['wall_s'] / a['wall_s']:.2f}, CPU {b['cpu_s'] / a['cpu_s']:.2f}, "
          f"texts encoded {b['encoded'] / a['encoded']:.2f}")  # fmt: skip


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=8)
    ap.add_argument("--rounds", type=int, default=4)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--n-rows", type=int, default=40)
    ap.add_argument("--simpson-users", type=int, default=20_000)
    ap.add_argument("--only", choices=("sweep", "simpson"), default=None)
    ap.add_argument("--encode-ab", metavar="REV_A[,REV_B]", default=None, help="only: texts encoded by run_many, A/B")
    args = ap.parse_args(argv)
    if args.encode_ab:
        bench_encode_ab(args)
        return 0

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
