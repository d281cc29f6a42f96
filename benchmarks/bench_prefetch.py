"""Benchmark: a run's known requests asked together (facterlab.facter.prefetch) against phase by phase.

    python benchmarks/bench_prefetch.py                  # notebook 00's LLM run (SmolLM2, 14 rows), 2 rounds
    python benchmarks/bench_prefetch.py --rounds 3 --rows 40

The run is notebook 00 part 2's configuration (the run notebooks 02-04 and 06-08 read back):
``smollm2-135m``, open generation, 10 calibration / 4 test rows by default, T = 3, 1 CFR row,
112 new tokens, batch 16, the oneDNN kernel and stop-at-answer (``FAST_DECODING``), on ML-100K when
``FACTERLAB_DATA`` holds it, else the synthetic set.  Variants alternate (off on / on off ...), each
run in a fresh process with an empty LLM cache and results folder; the converted model
(``converted-gguf/``) is shared, so both variants load it from the same folder (run one round first
if it is not there yet: the first load converts it).  Per run: wall and CPU seconds of the child
(user + system, imports and model load included), the model calls it made, and the 1-minute load
average; then medians, the ratio on / off, and whether the two variants' run folders are identical
(every record and metric; timings.json and run.json's clock aside).

    python benchmarks/bench_prefetch.py --beside nice19,idle --rounds 2

``--beside``: the same run (prefetch on) beside a single-threaded numpy loop (a 1,500 x 1,500 matrix
product, repeated) started at ``nice 19`` or under Linux's ``SCHED_IDLE`` policy, alternating; what
``facterlab reproduce``'s side lane does to its main lane (docs/USAGE.md, "Two lanes").
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

CHILD = r"""
import json, sys, time
t0 = time.perf_counter()
from facterlab.reporting import experiments as ex
from facterlab.notebook import fast_decoding_overrides
calls = {"n": 0, "rows": 0}
import facterlab.models.cache as C
_predict = C.CachedRecommender.predict
cfg = ex.run_config(dataset="auto", model="smollm2-135m", protocol="open", preset_name="repro", seed=0,
                    n_rows=int(sys.argv[2]), passes=3, cfr_rows=1, max_new_tokens=112, batch_size=16,
                    device="auto", ranker="likelihood", metrics__snsr_min_group=30, **fast_decoding_overrides(True))
res = ex.run(cfg, out_dir=sys.argv[1], progress=False)
print(json.dumps({"wall_s": time.perf_counter() - t0, "run_id": res.run_id, "timings": res.record.timings}))
"""


def _load() -> float:
    return float(Path("/proc/loadavg").read_text().split()[0]) if Path("/proc/loadavg").exists() else float("nan")


HOG = "import numpy as np\na = np.random.rand(1500, 1500)\nwhile True:\n    a = a @ a\n    a /= a.max()\n"


def _hog(policy: str) -> subprocess.Popen:
    """A one-thread numpy loop at ``nice 19`` (``"nice19"``) or under ``SCHED_IDLE`` (``"idle"``)."""

    def lower() -> None:
        if policy == "idle":
            os.sched_setscheduler(0, os.SCHED_IDLE, os.sched_param(0))
        else:
            os.nice(19)

    one = {"OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}
    return subprocess.Popen([sys.executable, "-c", HOG], env={**os.environ, **one}, preexec_fn=lower)


def _one(variant: str, rows: int, shared_model: Path | None, beside: str | None = None) -> dict:
    work = Path(tempfile.mkdtemp(prefix=f"bench_prefetch_{variant}_"))
    cache = work / "cache"
    cache.mkdir()
    if shared_model is not None and shared_model.is_dir():
        (cache / "converted-gguf").symlink_to(shared_model)
    env = {**os.environ, "FACTERLAB_CACHE": str(cache), "FACTERLAB_PREFETCH": "1" if variant == "on" else "0"}
    hog = _hog(beside) if beside else None
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    load0 = _load()
    t0 = time.perf_counter()
    out = subprocess.run(
        [sys.executable, "-c", CHILD, str(work / "results"), str(rows)], env=env, capture_output=True, text=True
    )
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if hog is not None:
        hog.kill()
        hog.wait()
    if out.returncode:
        raise SystemExit(f"{variant} run failed:\n{out.stderr[-3000:]}")
    got = json.loads(out.stdout.strip().splitlines()[-1])
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return {"variant": variant, "wall_s": wall, "cpu_s": cpu, "load": (load0, _load()), "dir": work, **got}


def _files(work: Path) -> dict:
    runs = sorted((work / "results" / "runs").glob("*"))
    out = {}
    for p in sorted(runs[0].rglob("*")):
        if p.is_file() and p.name not in ("timings.json", "run.json"):
            out[str(p.relative_to(runs[0]))] = p.read_bytes()
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--rows", type=int, default=14, help="data.n_rows of the run (default 14, notebook 00's)")
    ap.add_argument(
        "--model-cache",
        default=None,
        help="a converted-gguf/ folder to share (default: the one under FACTERLAB_CACHE or ~/.cache/facterlab)",
    )
    ap.add_argument("--beside", default=None, help="nice19,idle: the run (prefetch on) beside a numpy loop so started")
    args = ap.parse_args(argv)
    from facterlab.config import cache_dir

    shared = Path(args.model_cache) if args.model_cache else cache_dir() / "converted-gguf"
    print(
        f"model folder shared by every run: {shared} ({'present' if shared.is_dir() else 'absent: each run converts'})"
    )
    if args.beside:
        return _beside(args.beside.split(","), args.rounds, args.rows, shared)
    got: dict = {"off": [], "on": []}
    for r in range(args.rounds):
        order = ("off", "on") if r % 2 == 0 else ("on", "off")
        for v in order:
            res = _one(v, args.rows, shared)
            got[v].append(res)
            t = res["timings"]
            phases = ", ".join(f"{k[:-2]} {t[k]:.1f}" for k in t if k != "data_s")
            print(
                f"round {r + 1} {v:3}: wall {res['wall_s']:.1f} s, CPU {res['cpu_s']:.1f} s, load "
                f"{res['load'][0]:.2f}->{res['load'][1]:.2f}; phases (s): {phases}"
            )
    same = all(_files(a["dir"]) == _files(b["dir"]) for a in got["off"] for b in got["on"])
    print(f"run id: {got['on'][0]['run_id']} (on) / {got['off'][0]['run_id']} (off)")
    med = {
        v: (statistics.median(x["wall_s"] for x in rs), statistics.median(x["cpu_s"] for x in rs))
        for v, rs in got.items()
    }
    for v, (w, c) in med.items():
        print(f"median {v:3}: wall {w:.1f} s, CPU {c:.1f} s")
    print(f"ratio on / off: wall {med['on'][0] / med['off'][0]:.2f}, CPU {med['on'][1] / med['off'][1]:.2f}")
    print(f"run folders identical (records, metrics, calibration): {same}")
    for rs in got.values():
        for x in rs:
            shutil.rmtree(x["dir"], ignore_errors=True)
    return 0 if same else 1


def _beside(policies: list, rounds: int, rows: int, shared: Path) -> int:
    """The run with prefetch beside a numpy loop under each policy, alternating; medians (CPU: the run's
    and the loop's together, so it is not comparable with the plain runs')."""
    walls: dict = {p: [] for p in policies}
    for r in range(rounds):
        for policy in policies if r % 2 == 0 else policies[::-1]:
            res = _one("on", rows, shared, beside=policy)
            walls[policy].append(res["wall_s"])
            print(
                f"round {r + 1} beside a numpy loop ({policy}): wall {res['wall_s']:.1f} s, load {res['load'][0]:.2f}->{res['load'][1]:.2f}"
            )
            shutil.rmtree(res["dir"], ignore_errors=True)
    for policy, w in walls.items():
        print(f"median beside ({policy}): wall {statistics.median(w):.1f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
