"""Benchmark the data layer on a 1,000,000-rating MovieLens-1M-format file (synthetic generator).

Writes the files into a temporary directory, then times (median of side-by-side repeats) loading them
with the ML-1M loader and building the interaction rows (n = 2,500, 40 candidates each), and reports
peak Python memory (tracemalloc, a separate untimed run) of each step and the process's peak RSS.

    python benchmarks/bench_data.py [--repeats 3] [--n-ratings 1000000]
"""

from __future__ import annotations

import argparse
import resource
import statistics
import sys
import tempfile
import time
import tracemalloc
from pathlib import Path


def _timed(fn, repeats: int):
    """Median seconds over ``repeats`` plain runs, then one more run under tracemalloc for the peak
    (tracemalloc slows allocation-heavy code, so it is kept out of the timed runs)."""
    times, out = [], None
    for _ in range(repeats):
        t0 = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - t0)
    tracemalloc.start()
    fn()
    peak = tracemalloc.get_traced_memory()[1] / 2**20
    tracemalloc.stop()
    return out, statistics.median(times), peak


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--n-ratings", type=int, default=1_000_000)
    ap.add_argument("--n-users", type=int, default=6040)
    ap.add_argument("--n-items", type=int, default=3883)
    args = ap.parse_args(argv)

    from facterlab.config import DataConfig
    from facterlab.data.movielens import load_ml1m
    from facterlab.data.protocol import build_interactions, count_eligible
    from facterlab.data.synthetic import write_ml1m_format

    with tempfile.TemporaryDirectory() as tmp:
        d = Path(tmp) / "ml-1m-synthetic"
        t0 = time.perf_counter()
        write_ml1m_format(d, n_users=args.n_users, n_items=args.n_items, n_ratings=args.n_ratings, seed=0)
        t_write = time.perf_counter() - t0
        size_mb = (d / "ratings.dat").stat().st_size / 2**20
        ds, t_load, m_load = _timed(lambda: load_ml1m(d, name="synthetic", is_synthetic=True), args.repeats)
        cfg = DataConfig(n_rows=2500)
        inter, t_build, m_build = _timed(lambda: build_interactions(ds, cfg), args.repeats)
        n_elig = count_eligible(ds, cfg)
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # KiB on Linux
    print(
        f"data layer benchmark: {len(ds.ratings):,} ratings ({size_mb:.1f} MiB ratings.dat), "
        f"{len(ds.users):,} users, {len(ds.items):,} items, {n_elig:,} eligible rows; "
        f"median of {args.repeats} repeats"
    )
    print(f"{'step':34s} {'seconds':>9s} {'peak MiB (tracemalloc)':>24s}")
    print(f"{'write (generator, once)':34s} {t_write:9.2f} {'':>24s}")
    print(f"{'load_ml1m':34s} {t_load:9.2f} {m_load:24.1f}")
    print(f"{'build_interactions (n=2,500)':34s} {t_build:9.2f} {m_build:24.1f}")
    print(
        f"ratio build/load: {t_build / t_load:.2f}; process peak RSS: {rss:.0f} MiB; "
        f"rows {len(inter.rows)} (calib {len(inter.calib)}, test {len(inter.test)})"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
