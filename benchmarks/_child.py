"""The benchmarks' one way to measure a variant in a fresh Python process.

``python benchmarks/bench_X.py`` puts this folder on ``sys.path``, so a benchmark imports it as ``_child``.
"""

from __future__ import annotations

import json
import subprocess
import sys


def run_child(code: str, args: list, env: dict, what: str) -> dict:
    """Run ``python -c code *args`` with ``env`` and return the JSON object its last stdout line prints;
    a child that fails stops the benchmark with ``what`` and the end of its stderr."""
    p = subprocess.run([sys.executable, "-c", code, *map(str, args)], env=env, capture_output=True, text=True)
    if p.returncode != 0:
        raise SystemExit(f"{what} failed:\n{p.stderr[-3000:]}")
    return json.loads(p.stdout.strip().splitlines()[-1])
