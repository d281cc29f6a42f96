"""Peak memory and time of a simulated run with bias tables of different sizes (issue 44's "a 1 MB table
peaked at 741 MB against 274 MB").

Each variant runs in a fresh Python process (its own peak RSS, ``ru_maxrss``), the variants alternated
(A B C A B C ...), medians quoted, CPU time beside wall:

- ``none``: the built-in default table's place taken by no push (``sim.bias_table`` a one-cell table);
- ``full``: every (attribute value, feature) cell of the dataset, weight 1: the largest table that
  passes the checks (a table names each cell at most once: repeated keys and repeated list entries are
  refused, and a name the dataset lacks is refused);
- ``repeated``: a ~1 MB table that repeats one feature in a list: refused before any work.

    python benchmarks/bench_bias_table.py [--repeats 2] [--rows 300] [--dataset synthetic]

The runs share a temporary cache (warmed by one untimed run first), so the encoder's first load is not
in any variant.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

CHILD = r"""
import json, resource, sys, time
from facterlab import preset
from facterlab.facter import run_experiment
t0, c0 = time.perf_counter(), time.process_time()
status = "ok"
try:
    run_experiment(preset("repro", sim__bias_table=sys.argv[1], model__llm="simulated",
                          data__dataset=sys.argv[2], data__n_rows=int(sys.argv[3])), out_dir=sys.argv[4])
except ValueError as e:
    status = "refused: " + str(e)[:90]
print(json.dumps({"wall": time.perf_counter() - t0, "cpu": time.process_time() - c0,
                  "peak_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, "status": status}))
"""


def tables(dataset: str, folder: Path) -> dict:
    from facterlab.data import load_dataset

    ds = load_dataset(dataset)
    features = sorted({f for fs in ds.items["features"] for f in fs})
    values = ds.attribute_values
    first = next(iter(values))
    out = {
        "none": {first: {str(values[first][0]): [features[0]]}},
        "full": {a: {str(v): {f: 1.0 for f in features} for v in vs} for a, vs in values.items()},
        "repeated": {first: {str(values[first][0]): [features[0]] * 90_000}},
    }
    paths = {}
    for name, table in out.items():
        paths[name] = folder / f"{name}.json"
        paths[name].write_text(json.dumps(table))
    return paths


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=2)
    ap.add_argument("--rows", type=int, default=300)
    ap.add_argument("--dataset", default="synthetic")
    args = ap.parse_args(argv)
    tmp = Path(tempfile.mkdtemp(prefix="bench-bias-"))
    env = {**os.environ, "FACTERLAB_CACHE": str(tmp / "cache"), "FACTERLAB_RESULTS": str(tmp / "results")}
    paths = tables(args.dataset, tmp)
    sizes = {k: p.stat().st_size for k, p in paths.items()}

    def once(name: str) -> dict:
        out = tmp / f"out-{name}"
        cmd = [sys.executable, "-c", CHILD, str(paths[name]), args.dataset, str(args.rows), str(out)]
        done = subprocess.run(cmd, env=env, capture_output=True, text=True, check=True)
        return json.loads(done.stdout.strip().splitlines()[-1])

    once("none")  # warm the cache (encoder, embeddings)
    results: dict = {k: [] for k in paths}
    for _ in range(args.repeats):
        for name in paths:
            results[name].append(once(name))
    with open("/proc/loadavg") if Path("/proc/loadavg").exists() else open(os.devnull) as f:
        load = f.read().split()[:3]
    print(f"dataset {args.dataset}, {args.rows} rows, {args.repeats} repeat(s) alternated; load {' '.join(load)}")
    print(f"{'table':<10} {'bytes':>10} {'peak MB':>9} {'wall s':>8} {'CPU s':>8}  status")
    for name, runs in results.items():
        med = {k: statistics.median(r[k] for r in runs) for k in ("peak_mb", "wall", "cpu")}
        print(
            f"{name:<10} {sizes[name]:>10,} {med['peak_mb']:>9.0f} {med['wall']:>8.1f} {med['cpu']:>8.1f}  "
            f"{runs[-1]['status']}"
        )
    base = statistics.median(r["peak_mb"] for r in results["none"])
    full = statistics.median(r["peak_mb"] for r in results["full"])
    print(f"peak ratio full/none: {full / base:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
