"""Concurrent writers of one entry (docs/FAULTS.md): N processes forked from one parent, released at one instant.

``python tests/helpers/race_writers.py interactions N CACHE [DELAY_S]``: N builds of one synthetic interactions entry
into ``CACHE/interactions``.  ``python tests/helpers/race_writers.py runfolder N RESULTS [DELAY_S]``: N writes of the
run folder found in ``RESULTS/src/`` (made beforehand with ``facterlab run ... --out-dir RESULTS`` and
``mv RESULTS/runs RESULTS/src``) into ``RESULTS/runs``.  Prints the outcomes counted and the entries left.
Set ``PYTHONPATH`` to the source tree to measure.  tests/facter/test_faults.py runs the same races in-process.
"""

from __future__ import annotations

import multiprocessing as mp
import sys
import time
from collections import Counter
from pathlib import Path

import facterlab.data.protocol  # noqa: F401 - imported before the fork, as the children use it
import facterlab.facter.pipeline  # noqa: F401


def _wait(t0: float) -> None:
    while time.time() < t0:
        pass


def build_interactions(cache: str, t0: float) -> str:
    from facterlab.config import DataConfig
    from facterlab.data.protocol import load_or_build_interactions
    from facterlab.data.synthetic import load_synthetic

    ds = load_synthetic(n_users=200, n_items=300, n_ratings=6000)
    _wait(t0)
    try:
        load_or_build_interactions(ds, DataConfig(dataset="synthetic", n_rows=40), cache=cache)
        return "ok"
    except Exception as exc:  # noqa: BLE001 - counted
        return f"{type(exc).__name__}: {exc}"[:200]


def write_run(results: str, t0: float) -> str:
    from facterlab.facter.runfolder import read_run_folder, write_run_folder

    run = next(p for p in (Path(results) / "src").iterdir() if p.is_dir())
    res = read_run_folder(run)
    _wait(t0)
    try:
        write_run_folder(Path(results) / "runs" / run.name, res.record, res.calibration, res.rows)
        return "ok"
    except Exception as exc:  # noqa: BLE001 - counted
        return f"{type(exc).__name__}: {exc}"[:200]


def main(argv: list) -> None:
    kind, n, where = argv[0], int(argv[1]), argv[2]
    t0 = time.time() + float(argv[3] if len(argv) > 3 else 20)
    fn = build_interactions if kind == "interactions" else write_run
    with mp.get_context("fork").Pool(n) as pool:
        out = pool.starmap(fn, [(where, t0)] * n)
    counts = Counter("ok" if o == "ok" else o.split(":")[0] + ": " + o.split("]")[0].split("[")[-1] for o in out)
    print(counts.most_common(), "first error:", next((o for o in out if o != "ok"), None))
    folder = Path(where) / ("interactions" if kind == "interactions" else "runs")
    print("entries:", sorted(p.name for p in folder.iterdir()))


if __name__ == "__main__":
    main(sys.argv[1:])
