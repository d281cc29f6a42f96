"""numpy's BLAS threads inside a run (facterlab.blas, issue 30): one thread against OpenBLAS's default.

    python benchmarks/bench_blas.py                       # quiet machine, then with 1 busy process
    python benchmarks/bench_blas.py --busy 0 --repeats 3  # only as the machine is
    python benchmarks/bench_blas.py --encoder all-MiniLM-L6-v2 --dataset ml-100k

Two measurements, each alternating the variants (A B B A A B ...), and medians:

1. **the product**: the catalogue mapper's product, (30 x dim) float32 titles against (1,682 x dim)
   float32 items, 200 times, on one thread and on OpenBLAS's default (one per core); wall and CPU per
   product;
2. **runs**: notebook 09's run types in a fresh process per variant (``FACTERLAB_BLAS_THREADS=1`` vs
   ``auto``), each on a fresh results folder and a shared, pre-filled embedding cache: the "lines-set"
   twin-acceptance case (n = ``--rows``) and a twin paper-size run (n = 2,500, beta = 2); wall and CPU
   of the process (imports included), then whether the two variants' results agree: every table and
   JSON of the run folders compared cell by cell, the run id and the ``blas_threads`` fingerprint aside.

``--busy N`` runs N processes that spin on the CPU during the measurement (a shared machine, as the
development machine usually is); the default measures with 0 and then with 1.  The load average is
printed with each run.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from _child import run_child  # this folder is on sys.path when a benchmark runs

CHILD = r"""
import json, sys, time
t0 = time.perf_counter(); c0 = time.process_time()
from facterlab.reporting import experiments as ex
from facterlab.reporting.twin_acceptance import case_config
dataset, rows, encoder, out, data_dir = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4], sys.argv[5] or None
cfgs = [
    case_config("lines-set", 12, "family", dataset=dataset, n_rows=rows, passes=3, cfr_rows=200, encoder=encoder),
    ex.run_config(dataset=dataset, model="simulated", seed=12, n_rows=2500, passes=3, cfr_rows=200, encoder=encoder,
                  sim__beta=2.0, sim__rho=1.0, facter__delta="twin", facter__threshold="null"),
]
per = []
for cfg in cfgs:
    t, c = time.perf_counter(), time.process_time()
    ex.run(cfg, data_dir=data_dir, out_dir=out, progress=False, reuse=False)
    per.append([time.perf_counter() - t, time.process_time() - c])
print(json.dumps({"wall_s": time.perf_counter() - t0, "cpu_s": time.process_time() - c0, "runs": per}))
"""


def _spin(stop) -> None:
    x = 0
    while not stop.is_set():
        for _ in range(100_000):
            x += 1


def _load() -> float:
    return os.getloadavg()[0]


def product(repeats: int, dim: int) -> dict:
    """Median ms (wall, CPU) per mapper-shaped product, one thread vs OpenBLAS's default."""
    import numpy as np
    from threadpoolctl import threadpool_limits

    rng = np.random.default_rng(0)
    items = rng.standard_normal((1682, dim)).astype(np.float32)
    q = rng.standard_normal((30, dim)).astype(np.float32)
    got: dict = {"one thread": [], "OpenBLAS default": []}
    for i in range(repeats * 2):
        order = ("one thread", "OpenBLAS default") if i % 2 == 0 else ("OpenBLAS default", "one thread")
        for v in order:
            with threadpool_limits(limits=1 if v == "one thread" else None, user_api="blas"):
                t, c = time.perf_counter(), time.process_time()
                for _ in range(200):
                    q @ items.T
                got[v].append(((time.perf_counter() - t) / 200 * 1e3, (time.process_time() - c) / 200 * 1e3))
    return {v: (statistics.median(w for w, _ in r), statistics.median(c for _, c in r)) for v, r in got.items()}


def _tables(out: str) -> dict:
    """(run key without its fingerprint hash, file) -> comparable content of every run under ``out``."""
    import pyarrow.parquet as pq

    got = {}
    for run in sorted(Path(out).glob("runs/*")):
        key = run.name.split("-")[0]
        for p in sorted(run.iterdir()):
            if p.suffix == ".parquet":
                got[(key, p.name)] = pq.read_table(p).to_pandas()
            elif p.suffix == ".json" and p.name != "timings.json":
                meta = json.loads(p.read_text())
                for k in ("command", "started_at", "finished_at", "code_version"):
                    meta.pop(k, None)
                text = json.dumps(meta, sort_keys=True).replace(run.name, "RUN")
                got[(key, p.name)] = json.loads(text.replace('"blas_threads": 1', '"blas_threads": null'))
    return got


def _json_leaves(o, path=""):
    if isinstance(o, dict):
        for k, v in o.items():
            yield from _json_leaves(v, f"{path}/{k}")
    elif isinstance(o, list):
        for i, v in enumerate(o):
            yield from _json_leaves(v, f"{path}[{i}]")
    else:
        yield path, o


def compare(a: dict, b: dict) -> list:
    """Lines naming every difference between two variants' runs (cells of tables, leaves of JSON)."""
    lines = []
    for key in sorted(set(a) | set(b)):
        x, y = a.get(key), b.get(key)
        if x is None or y is None:
            lines.append(f"{key}: only in one variant")
        elif isinstance(x, dict):
            lx, ly = dict(_json_leaves(x)), dict(_json_leaves(y))
            lx.pop("/fingerprints/blas_threads", None)
            ly.pop("/fingerprints/blas_threads", None)
            diff = [k for k in sorted(set(lx) | set(ly)) if lx.get(k) != ly.get(k)]
            if diff:
                lines.append(f"{key}: {len(diff)} JSON values differ, e.g. {diff[:3]}")
        else:
            for col in x.columns:
                both_missing = x[col].isna().to_numpy() & y[col].isna().to_numpy()
                n = int(((x[col].astype(str) != y[col].astype(str)).to_numpy() & ~both_missing).sum())
                if n:
                    lines.append(f"{key}: column {col}: {n} of {len(x)} rows differ")
    return lines


def runs(repeats: int, dataset: str, rows: int, encoder: str) -> tuple:
    data_dir = os.environ.get("FACTERLAB_DATA", "")
    cache = tempfile.mkdtemp(prefix="bench_blas_cache_")
    env0 = dict(os.environ, HF_HUB_OFFLINE="1", FACTERLAB_CACHE=cache)
    # fill the embedding cache once, so that both variants read the same vectors
    warm = tempfile.mkdtemp(prefix="bench_blas_warm_")
    subprocess.run(
        [sys.executable, "-c", CHILD, dataset, str(rows), encoder, warm, data_dir],
        env=env0,
        check=True,
        capture_output=True,
    )
    got: dict = {"1": [], "auto": []}
    tables: dict = {}
    for i in range(repeats):
        for v in ("1", "auto") if i % 2 == 0 else ("auto", "1"):
            out = tempfile.mkdtemp(prefix=f"bench_blas_{v}_")
            load = _load()
            r = run_child(
                CHILD,
                [dataset, rows, encoder, out, data_dir],
                dict(env0, FACTERLAB_BLAS_THREADS=v),
                f"run (FACTERLAB_BLAS_THREADS={v})",
            )
            r["load"] = (load, _load())
            got[v].append(r)
            tables.setdefault(v, _tables(out))
            print(
                f"  FACTERLAB_BLAS_THREADS={v:4s} wall {r['wall_s']:6.1f} s  CPU {r['cpu_s']:6.1f} s  "
                f"runs (wall, CPU) {[(round(w, 1), round(c, 1)) for w, c in r['runs']]}  "
                f"load {load:.1f}-{_load():.1f}",
                flush=True,
            )
    return got, compare(tables["1"], tables["auto"])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--busy", type=int, nargs="*", default=[0, 1], help="spinning processes (default: 0, then 1)")
    ap.add_argument("--repeats", type=int, default=2, help="runs per variant (alternating)")
    ap.add_argument("--dataset", default="auto")
    ap.add_argument("--rows", type=int, default=1500, help="rows of the lines-set run (default 1500)")
    ap.add_argument("--encoder", default="hash-encoder")
    args = ap.parse_args()
    for busy in args.busy:
        stop = mp.Event()
        hogs = [mp.Process(target=_spin, args=(stop,), daemon=True) for _ in range(busy)]
        for h in hogs:
            h.start()
        try:
            time.sleep(2 if busy else 0)
            print(f"\n## {busy} busy process(es) beside the measurement, {os.cpu_count()} CPUs, load {_load():.1f}")
            prod = product(args.repeats * 3, 384 if "MiniLM" in args.encoder else 256)
            print("| product (30 x d) @ (d x 1,682) float32 | median wall ms | median CPU ms |")
            print("|---|---|---|")
            for v, (w, c) in prod.items():
                print(f"| {v} | {w:.3f} | {c:.3f} |")
            got, diffs = runs(args.repeats, args.dataset, args.rows, args.encoder)
        finally:
            stop.set()
            for h in hogs:
                h.join()
        print(
            f"\nnotebook 09's lines-set case (n = {args.rows}) and a twin paper-size run, {args.encoder}, "
            f"dataset {args.dataset}, medians over {args.repeats} processes per variant:"
        )
        print("| FACTERLAB_BLAS_THREADS | wall s | CPU s | load |")
        print("|---|---|---|---|")
        med = {}
        for v, rs in got.items():
            med[v] = (statistics.median(r["wall_s"] for r in rs), statistics.median(r["cpu_s"] for r in rs))
            loads = [x for r in rs for x in r["load"]]
            print(f"| {v} | {med[v][0]:.1f} | {med[v][1]:.1f} | {min(loads):.1f}-{max(loads):.1f} |")
        print(f"ratio auto / 1: wall {med['auto'][0] / med['1'][0]:.2f}, CPU {med['auto'][1] / med['1'][1]:.2f}")
        print("differences between the variants' runs:", "none" if not diffs else "")
        for line in diffs:
            print("  ", line)


if __name__ == "__main__":
    main()
