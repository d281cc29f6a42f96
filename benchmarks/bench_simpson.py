"""Benchmark of the Simpson simulator (docs/SIMPSON.md §3).

    python benchmarks/bench_simpson.py                # full: 3-seed grid at N=50,000 + figure sweeps
    python benchmarks/bench_simpson.py --grid-only    # stage timings + the 3-seed grid
    python benchmarks/bench_simpson.py --quick        # a few repeats only (no grid, no sweeps)
    python benchmarks/bench_simpson.py --explorer-n   # the explorer's default N (21 slider seeds per N)
    python benchmarks/bench_simpson.py --notebooks '1[1-5]_*'   # each Simpson notebook, cold (issue 30)
    python benchmarks/bench_simpson.py --threads-ab   # one BLAS thread (facterlab.blas.one_thread) vs the pools' default

Prints seconds per simulation (median of side-by-side repeats) for its stages, the chunk-size
ratio, the wall and CPU time of the grid over 3 independent seeds (3 x 160 configurations, N = 50,000,
``--jobs`` worker processes, default 2; target < 3 min on 2 cores) with its like-for-like table, the
figure sweeps (Figs 3/4 and 5, 10 seeds per point, N = 10,000; target < 5 min together), and peak memory.

``--notebooks GLOB`` (issue 30, "a time budget per notebook"): each matching notebook runs as
``facterlab reproduce --only NAME --profile PROFILE`` (the runner's kernel and thread plan, as a user
gets them) in a fresh results / figures / cache folder, ``--repeats`` times, notebooks alternating
(A B C, C B A, ...); per run the wall seconds, the CPU seconds of the whole process tree (user +
system of every child waited for: papermill, the kernel, its worker pools) and the 1-minute load
average before and after; then medians per notebook against the 120 s budget.

``--threads-ab`` (issue 30): one simulation with every read-out (N = 10,000, as in notebooks 12 and 13;
``--ab-users`` to change) with the thread pools limited to one thread around the linear algebra
(:mod:`facterlab.blas` one_thread, A) and left at their default (B, as before), alternating A B A B; medians
of wall and CPU seconds (the process's CPU: every thread of it) and the load, and whether A and B
gave the same read-outs.
"""

from __future__ import annotations

import argparse
import fnmatch
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import tracemalloc
from pathlib import Path

import numpy as np

from facterlab.simpson.simulate import SimpsonConfig, measure, random_experiment, simulate
from facterlab.simpson.sweeping import comparison_table, grid_seeds, sweep


def explorer_n(sizes=(5_000, 10_000, 20_000, 50_000), seeds=range(21)) -> None:
    """At the explorer's default knobs (d_1 1.5, sigma_1 0, b 0.03), per N over the slider's 21 seeds: how
    often the model IPS lands further from the PerUserGap than the AggregateGap, and the spread of both
    errors (what the explorer's default N rests on, docs/SIMPSON.md §6)."""
    from facterlab.simpson.simulate import simulate_and_measure

    for n in sizes:
        err, agg = [], []
        for seed in seeds:
            r = simulate_and_measure(SimpsonConfig(n_users=n, d1=1.5, sigma1=0.0, bias=0.03, seed=seed))
            err.append(100 * (r["ips_model"] - r["per_user_gap"]))
            agg.append(100 * (r["aggregate_gap"] - r["per_user_gap"]))
        e, a = np.array(err), np.array(agg)
        worse = int((np.abs(e) > np.abs(a)).sum())
        print(
            f"N={n:,}: model IPS further from the PerUserGap than the aggregate in {worse}/{len(e)} seeds; "
            f"IPS - PerUser {e.mean():+.3f} ± {e.std(ddof=1):.3f} pp (mean ± sd over seeds), "
            f"mean |IPS - PerUser| {np.abs(e).mean():.3f} pp; Agg - PerUser {a.mean():+.3f} ± {a.std(ddof=1):.3f} pp",
            flush=True,
        )


def threads_ab(n_users: int = 10_000, repeats: int = 9) -> None:
    """Module docstring, ``--threads-ab``."""
    import contextlib
    import math

    from threadpoolctl import threadpool_info

    from facterlab import blas
    from facterlab.simpson.simulate import simulate_and_measure

    mods = [sys.modules["facterlab.simpson.ips"], sys.modules["facterlab.simpson.simulate"]]

    def run(limited: bool, seed: int) -> tuple:
        for m in mods:  # B: no limit, the pools at their default threads (the code before issue 30)
            m.one_thread = blas.one_thread if limited else contextlib.nullcontext
        cfg = SimpsonConfig(n_users=n_users, bias=0.03, sigma1=5.0, d1=2.5, seed=seed)
        t, c = time.perf_counter(), time.process_time()
        out = simulate_and_measure(cfg)
        return time.perf_counter() - t, time.process_time() - c, out

    run(True, 0), run(False, 0)  # warm-up: imports, first allocations
    got: dict = {"A": [], "B": []}
    same = True
    load0 = os.getloadavg()[0]
    for k in range(repeats):
        a = run(True, k)
        b = run(False, k)
        got["A"].append(a[:2])
        got["B"].append(b[:2])
        same &= all(
            v == b[2][key] or (isinstance(v, float) and math.isnan(v) and math.isnan(b[2][key]))
            for key, v in a[2].items()
        )
    for m in mods:
        m.one_thread = blas.one_thread
    pools = ", ".join(f"{p['internal_api']} {p['num_threads']}" for p in threadpool_info())
    print(
        f"simulate_and_measure, N = {n_users:,}, every read-out (model IPS included); {repeats} repeats, A B A B; "
        f"pools by default: {pools}; load {load0:.1f} -> {os.getloadavg()[0]:.1f}"
    )
    print("| variant | wall s (median) | CPU s (median) |")
    print("|---|---|---|")
    for key, label in (("A", "A: one thread (blas.one_thread)"), ("B", "B: default threads")):
        print(
            f"| {label} | {statistics.median(w for w, _ in got[key]):.3f} | {statistics.median(c for _, c in got[key]):.3f} |"
        )
    print(f"read-outs identical in A and B: {same}")


REPO = Path(__file__).resolve().parents[1]
BUDGET_S = 120.0  # issue 30: every notebook at most 2 minutes wall on the default profile


def _children_cpu() -> float:
    ru = resource.getrusage(resource.RUSAGE_CHILDREN)
    return ru.ru_utime + ru.ru_stime


def notebook_once(name: str, profile: str) -> dict:
    """One cold ``facterlab reproduce --only name`` in fresh folders: wall, CPU of the process tree, load."""
    tmp = Path(tempfile.mkdtemp(prefix="bench_simpson_nb_"))
    env = dict(
        os.environ,
        FACTERLAB_RESULTS=str(tmp / "results"),
        FACTERLAB_FIGURES=str(tmp / "figures"),
        FACTERLAB_CACHE=str(tmp / "cache"),
        MPLBACKEND="Agg",
    )
    exe = Path(sys.executable).with_name("facterlab")
    cmd = [str(exe)] if exe.is_file() else [sys.executable, "-m", "facterlab.cli"]
    cmd += ["reproduce", "--only", name, "--profile", profile]
    load0 = os.getloadavg()[0]
    c0, t0 = _children_cpu(), time.perf_counter()
    p = subprocess.run(cmd, cwd=REPO, env=env, capture_output=True, text=True)
    wall, cpu = time.perf_counter() - t0, _children_cpu() - c0
    shutil.rmtree(tmp, ignore_errors=True)
    if p.returncode != 0:
        raise SystemExit(f"{name} failed:\n{(p.stdout + p.stderr)[-3000:]}")
    return {"wall_s": wall, "cpu_s": cpu, "load0": load0, "load1": os.getloadavg()[0]}


def notebooks_report(pattern: str, profile: str, repeats: int) -> None:
    """Module docstring, ``--notebooks``."""
    names = sorted(p.name for p in (REPO / "notebooks").glob("*.ipynb") if fnmatch.fnmatch(p.name, pattern))
    if not names:
        raise SystemExit(f"no notebook matches {pattern!r} in notebooks/")
    got: dict = {n: [] for n in names}
    for i in range(repeats):
        for n in names if i % 2 == 0 else names[::-1]:
            r = notebook_once(n, profile)
            got[n].append(r)
            print(
                f"  repeat {i + 1} {n:40s} wall {r['wall_s']:6.1f} s  CPU {r['cpu_s']:6.1f} s  "
                f"load {r['load0']:.1f} -> {r['load1']:.1f}",
                flush=True,
            )
    print(
        f"\nfacterlab reproduce --only NAME --profile {profile}, cold; medians over {repeats} run(s); {os.cpu_count()} CPUs"
    )
    print("| notebook | wall s | CPU s | CPU / wall | wall / 120 s budget |")
    print("|---|---|---|---|---|")
    for n in names:
        w = statistics.median(r["wall_s"] for r in got[n])
        c = statistics.median(r["cpu_s"] for r in got[n])
        print(f"| {n} | {w:.1f} | {c:.1f} | {c / w:.2f} | {w / BUDGET_S:.2f} |")


def timed(fn, *a, **kw):
    t = time.perf_counter()
    out = fn(*a, **kw)
    return time.perf_counter() - t, out


def stage_times(cfg: SimpsonConfig, repeats: int) -> dict:
    rows = {
        "simulate": [],
        "gaps+decomposition": [],
        "random experiment + naive + 2 IPS": [],
        "simulate (one chunk)": [],
    }
    for k in range(repeats):  # side by side: the stages and the chunk variant alternate per repeat
        c = cfg.replace(seed=k)
        t_sim, sim = timed(simulate, c)
        t_gap, _ = timed(measure, sim, None, False)
        t_all, _ = timed(measure, sim, random_experiment(sim), True)
        t_one, _ = timed(simulate, c.replace(chunk_size=c.n_users))
        rows["simulate"].append(t_sim)
        rows["gaps+decomposition"].append(t_gap)
        rows["random experiment + naive + 2 IPS"].append(max(t_all - t_gap, 0.0))
        rows["simulate (one chunk)"].append(t_one)
    return {k: statistics.median(v) for k, v in rows.items()}


def peak_memory(cfg: SimpsonConfig) -> float:
    tracemalloc.start()
    sim = simulate(cfg)
    measure(sim)
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    return peak / 2**20


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="stage timings only (3 repeats at N=50,000)")
    ap.add_argument("--repeats", type=int, default=None, help="default 5 (stage timings), 1 (--notebooks)")
    ap.add_argument("--grid-only", action="store_true", help="skip the figure sweeps")
    ap.add_argument("--jobs", type=int, default=2, help="worker processes for the grid (default 2)")
    ap.add_argument(
        "--explorer-n", action="store_true", help="only: at the explorer's default knobs, IPS vs aggregate per N"
    )
    ap.add_argument("--notebooks", metavar="GLOB", help="only: time these notebooks cold (module docstring)")
    ap.add_argument("--threads-ab", action="store_true", help="only: one BLAS thread vs the default, A B A B")
    ap.add_argument("--ab-users", type=int, default=10_000, help="N of --threads-ab (default 10,000)")
    ap.add_argument("--profile", default="default", choices=["default", "paper", "smoke"])
    args = ap.parse_args()
    if args.notebooks:
        notebooks_report(args.notebooks, args.profile, args.repeats or 1)
        return
    if args.threads_ab:
        threads_ab(args.ab_users, args.repeats or 9)
        return
    if args.explorer_n:
        explorer_n()
        return
    cfg = SimpsonConfig(n_users=50_000, n_items=100, bias=0.03, sigma1=5.0, d1=2.5)
    reps = 3 if args.quick else (args.repeats or 5)
    st = stage_times(cfg, reps)
    total = st["simulate"] + st["gaps+decomposition"] + st["random experiment + naive + 2 IPS"]
    print(
        f"N = {cfg.n_users:,}, M = {cfg.n_items}, r = {cfg.rank}, chunk = {cfg.chunk_size:,}; median of {reps} repeats"
    )
    print(f"{'stage':<40}{'seconds':>10}{'share':>8}")
    for k in ("simulate", "gaps+decomposition", "random experiment + naive + 2 IPS"):
        print(f"{k:<40}{st[k]:>10.3f}{st[k] / total:>8.0%}")
    print(f"{'one full simulation (run)':<40}{total:>10.3f}")
    print(f"{'simulate, one chunk / chunked (ratio)':<40}{st['simulate (one chunk)'] / st['simulate']:>10.2f}")
    print(f"peak traced memory of one run (tracemalloc): {peak_memory(cfg):.0f} MiB")
    if not args.quick:

        def cpu_all():
            return (
                time.process_time()
                + resource.getrusage(resource.RUSAGE_CHILDREN).ru_utime
                + resource.getrusage(resource.RUSAGE_CHILDREN).ru_stime
            )

        cpu0 = cpu_all()
        t_grid, df = timed(
            grid_seeds, (0, 1, 2), base=SimpsonConfig(n_users=50_000, bias=0.03), progress=False, n_jobs=args.jobs
        )
        cpu_grid = cpu_all() - cpu0
        print(
            f"\n3-seed grid (3 x 160 runs, N=50,000, {SimpsonConfig().variant}, {args.jobs} process(es)): "
            f"{t_grid:.1f} s wall (target < 180 s), {cpu_grid:.1f} s CPU incl. workers "
            f"({cpu_grid / len(df):.3f} CPU s per simulation)"
        )
        table = comparison_table(df)
        for k, r in table.iterrows():
            paper = "" if r.paper_pp != r.paper_pp else f" (paper {r.paper_pp})"
            verdict = "" if k == "aggregate_gap" else f", half rule passed in {int(r.seeds_passing_half_rule)}/3 seeds"
            print(
                f"  {r.label}: mean |x - PerUser| = {r.mean_abs_error_pp:.2f} ± {r.sd_over_seeds_pp:.2f} pp{paper}{verdict}"
            )
        if args.grid_only:
            print(f"peak RSS of the process: {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:.0f} MiB")
            return
        base = SimpsonConfig(n_users=10_000)
        pts = np.linspace
        cpu0 = time.process_time()
        t34 = 0.0
        for p, v in {"d1": pts(1.5, 4, 11), "sigma1": pts(0, 10, 11), "bias": pts(0, 0.1, 11)}.items():
            t34 += timed(sweep, p, v, range(10), base, False, False)[0]
        base5 = base.replace(bias=0.03)
        t5 = timed(sweep, "sigma1", pts(0, 10, 11), range(10), base5, True, False)[0]
        t5 += timed(sweep, "d1", pts(1.5, 4, 11), range(10), base5.replace(sigma1=0.0), True, False)[0]
        print(
            f"figure sweeps, N=10,000, 10 seeds x 11 points: Figs 3/4 (330 runs, no IPS) {t34:.1f} s "
            f"({t34 / 330:.3f} s/sim); Fig 5 (220 runs with IPS) {t5:.1f} s ({t5 / 220:.3f} s/sim); "
            f"together {t34 + t5:.1f} s wall, {time.process_time() - cpu0:.1f} s CPU (target < 300 s)"
        )
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"peak RSS of the process: {rss:.0f} MiB")


if __name__ == "__main__":
    main()
