"""Loading the bundled SmolLM2-135M: from its GGUF file vs from the converted folder (facterlab.models.gguf_cache).

    python benchmarks/bench_load.py                # 3 rounds, A B / B A alternating
    python benchmarks/bench_load.py --rounds 5

Each load runs in a fresh process (imports included, as a notebook kernel pays them) with
``facterlab.models.llm.load_lm("smollm2-135m", device="cpu")``:

- **A, GGUF**: ``FACTERLAB_GGUF_CACHE=0``, the file parsed and dequantised by transformers, as before
  the converted folder existed;
- **B, converted**: the folder written once (before the rounds, not timed) under a temporary cache.

Per load: wall and CPU seconds of the whole child process, the seconds of the ``load_lm`` call alone,
and a SHA-256 over every parameter's bytes (names, dtypes, values).  Then medians, the ratios B / A and
whether every load gave the same parameters.  The machine is shared: the 1-minute load average is
printed before each load.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time

CHILD = r"""
import hashlib, json, time
t = time.perf_counter()
from facterlab.models.llm import load_lm
lm = load_lm("smollm2-135m", device="cpu")
seconds = time.perf_counter() - t
h = hashlib.sha256()
for name, p in sorted(lm.model.named_parameters()):
    h.update(name.encode()); h.update(str(p.dtype).encode()); h.update(p.detach().contiguous().numpy().tobytes())
print(json.dumps({"load_s": seconds, "params": h.hexdigest()}))
"""


def one(env: dict) -> dict:
    """One load in a fresh process: its JSON line plus wall and CPU seconds."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t = time.perf_counter()
    out = subprocess.run([sys.executable, "-c", CHILD], env=env, capture_output=True, text=True, check=True)
    wall = time.perf_counter() - t
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    got = json.loads(out.stdout.strip().splitlines()[-1])
    return {**got, "wall": wall, "cpu": cpu}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-load-") as tmp:
        base = {**os.environ, "FACTERLAB_CACHE": tmp, "PYTHONHASHSEED": "0"}
        envs = {"A": {**base, "FACTERLAB_GGUF_CACHE": "0"}, "B": {**base, "FACTERLAB_GGUF_CACHE": "1"}}
        one(envs["B"])  # writes the converted folder (not timed)
        got: dict = {"A": [], "B": []}
        for r in range(args.rounds):
            for key in ("A", "B") if r % 2 == 0 else ("B", "A"):
                load = os.getloadavg()[0]
                res = one(envs[key])
                got[key].append(res)
                print(
                    f"round {r + 1} {key}: wall {res['wall']:5.1f} s  CPU {res['cpu']:5.1f} s  "
                    f"load_lm {res['load_s']:5.1f} s  load {load:.2f}",
                    flush=True,
                )
    med = {k: {m: statistics.median(x[m] for x in v) for m in ("wall", "cpu", "load_s")} for k, v in got.items()}
    print(f"\nSmolLM2-135M load in a fresh process, {args.rounds} rounds A B / B A; medians")
    print("| variant | wall s | CPU s | load_lm s |")
    print("|---|---|---|---|")
    for key, label in (("A", "A: from the GGUF"), ("B", "B: converted folder")):
        m = med[key]
        print(f"| {label} | {m['wall']:.1f} | {m['cpu']:.1f} | {m['load_s']:.1f} |")
    print(
        f"ratio B / A: wall {med['B']['wall'] / med['A']['wall']:.2f}, CPU {med['B']['cpu'] / med['A']['cpu']:.2f}, "
        f"load_lm {med['B']['load_s'] / med['A']['load_s']:.2f}"
    )
    same = len({x["params"] for v in got.values() for x in v}) == 1
    print(f"same parameters (SHA-256 over every parameter) in every load: {same}")
    return 0 if same else 1


if __name__ == "__main__":
    sys.exit(main())
