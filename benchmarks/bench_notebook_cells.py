"""CPU and wall seconds per cell of one notebook, run as a script from its jupytext ``.py`` twin (issue 45).

    FACTERLAB_RESULTS=... FACTERLAB_CACHE=... python benchmarks/bench_notebook_cells.py notebooks/09_facter_ground_truth.py
    python benchmarks/bench_notebook_cells.py notebooks/00_quickstart.py LLM=False      # a parameter set (Python literal)
    python benchmarks/bench_notebook_cells.py notebooks/09_facter_ground_truth.py --prof out.prof  # cProfile of the cells

Each ``# %%`` code cell runs in one namespace, in order, with ``KEY=VALUE`` assignments appended to the
parameters cell (as papermill's injected cell would set them; the notebook's parameter helper sees them as
passed).  Per cell it prints, on stderr, wall seconds and CPU seconds (user + system of this process and of
its finished children, e.g. ``run_many``'s workers) and the cell's first line; then the totals and the load.
No kernel, no papermill and no inline figures: ``bench_reproduce.py`` measures the notebook as
``facterlab reproduce`` runs it.  Set ``MPLBACKEND=Agg``.  Results go where ``FACTERLAB_RESULTS`` and
``FACTERLAB_CACHE`` say: point them at a benchmark's own folders (``bench_reproduce.py --keep DIR``).
"""

from __future__ import annotations

import argparse
import cProfile
import os
import re
import resource
import sys
import time


def _cpu() -> float:
    own, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + kids.ru_utime + kids.ru_stime


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("notebook", help="a notebook's jupytext .py twin")
    ap.add_argument("set", nargs="*", metavar="KEY=VALUE", help="parameters (Python literals)")
    ap.add_argument("--prof", default=None, metavar="FILE", help="write a cProfile of the cells to FILE")
    args = ap.parse_args(argv)
    with open(args.notebook, encoding="utf-8") as fh:
        cells = re.split(r"(?m)^(?=# %%)", fh.read())
    extra = "\n".join(f"{k.strip()} = {v}" for k, v in (s.split("=", 1) for s in args.set))
    # not "__main__": run_many's spawned workers must not run the notebook again
    ns: dict = {"__name__": "__notebook__", "__file__": os.path.abspath(args.notebook)}
    prof = cProfile.Profile() if args.prof else None
    t_all, c_all = time.perf_counter(), _cpu()
    for i, cell in enumerate(cells):
        if not cell.strip() or cell.startswith("# %% [markdown]"):
            continue
        code = cell + "\n" + extra + "\n" if 'tags=["parameters"]' in cell.splitlines()[0] and extra else cell
        t, c = time.perf_counter(), _cpu()
        if prof:
            prof.enable()
        exec(compile(code, f"{args.notebook}:cell{i}", "exec"), ns)  # noqa: S102 - the notebook's own code
        if prof:
            prof.disable()
        first = next((ln for ln in cell.splitlines()[1:] if ln.strip() and not ln.startswith("#")), "")[:70]
        print(f"cell {i}: {time.perf_counter() - t:7.1f} s wall {_cpu() - c:7.1f} s CPU | {first}", file=sys.stderr)
    print(
        f"total: {time.perf_counter() - t_all:.1f} s wall, {_cpu() - c_all:.1f} s CPU; load {os.getloadavg()[0]:.1f}",
        file=sys.stderr,
    )
    if prof:
        prof.dump_stats(args.prof)
    return 0


if __name__ == "__main__":
    sys.exit(main())
