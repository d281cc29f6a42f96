"""Many runs of a notebook at once: :func:`run_many` (docs/SCALING.md, "Many runs of a notebook").

A notebook section that needs a dozen simulated runs hands them all to :func:`run_many`, which reads
back the finished ones and runs the others through a sweep (:func:`facterlab.reporting.sweep.run_sweep`)
on a pool of worker processes, or one by one here when the machine has too few cores for that to pay.
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Mapping
from typing import Any

from facterlab.config import RunConfig, config_hash, config_to_dict
from facterlab.executors import ProcessExecutor, make_executor
from facterlab.paths import runs_dir
from facterlab.reporting.experiments import _logging_shows_info, find_saved_run, load_saved_run, run
from facterlab.reporting.sweep import run_sweep

__all__ = ["MIN_RUNS_PER_WORKER", "default_workers", "run_many"]

log = logging.getLogger(__name__)

#: the fewest runs that :func:`run_many` gives a worker process (fewer runs: fewer workers)
MIN_RUNS_PER_WORKER = 5


def default_workers() -> int:
    """How many runs :func:`run_many` runs at once by default: ``FACTERLAB_WORKERS`` when set (an
    integer >= 1), else one per CPU core this process may use (at least 1, at most 8).

    Why one per core: a run keeps one core busy since numpy's BLAS runs on one thread inside it
    (:mod:`facterlab.blas`).  Notebook 09 cold on the 2-core machine (``bench_reproduce.py --only 09
    --no-warm``, 2026-12-04, one BLAS thread per run): 530.2 s wall, 880.2 s CPU on 2 workers (load
    0.8-1.7), against 771.5 s wall, 752.5 s CPU one by one (another engineer's benchmarks beside it).
    Before that limit, OpenBLAS's threads of two workers waited for each other and 2 workers were
    slower (1,213.2 s against 830.5 s).  More cores than two were not measured."""
    from facterlab import envvars

    n = envvars.get("FACTERLAB_WORKERS")  # a whole number in [1, 1024]; one line otherwise
    if n is not None:
        return int(n)
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    return max(1, min(8, cores))


def run_many(
    configs: Mapping[Any, RunConfig],
    data_dir: os.PathLike | str | None = None,
    workers: int | None = None,
    executor: str = "process",
    load: bool = True,
) -> dict:
    """Run many experiments at once and return ``key -> RunResult`` in ``configs``' order.

    Runs finished earlier are read back (as :func:`run`); the others go to ``workers`` worker
    processes through :func:`facterlab.reporting.sweep.run_sweep` (each with its share of the cores, its
    own cache shards merged at the end), and are then read back from their run folders.  A worker runs
    the same ``run_experiment`` as :func:`run`: with the torch-free hash encoder the run folders are byte
    for byte those of :func:`run` one after the other (tests/reporting/test_run_many.py).  With a neural encoder
    a text's embedding can differ in its last bits with the other texts of its batch, and which texts
    share a batch depends on what the embedding cache held when the run started, here as in any rerun:
    8 simulated MiniLM runs on ML-100K differed from the one-by-one runs by at most 2.2e-7 in any
    number, with every flag, count, rule and recommendation equal.

    The first run of each row sample (its ``data`` section: dataset, rows, seed) goes first, so that
    the contexts it encodes are in the shared embedding cache before the other runs of that sample
    start.  The pool of workers is started once for all of them.  Each worker gets at least
    :data:`MIN_RUNS_PER_WORKER` runs (fewer workers, or none: one by one here), because each first imports
    the models and a few runs are faster one by one: measured on 2 cores, 8 warm runs took 42-62 s
    one by one and 53-71 s on 2 workers, 18 warm runs 100-143 s one by one and 64-66 s on 2 workers.

    Parameters
    ----------
    configs : Mapping
        Any keys (a notebook's ``(seed, beta)``, ...) to run configs; equal configs run once.
    data_dir : path-like, optional
        The data folder (``FACTERLAB_DATA`` when None).
    workers : int, optional
        Worker processes (:func:`default_workers` when None); 1 runs everything here, in this process.
    executor : str
        ``"process"`` (default) or ``"serial"`` (:mod:`facterlab.executors`).
    load : bool, default True
        Read every run back; False only makes sure each run is saved, and returns an empty dict (a
        notebook that runs all its runs first and reads each section's back later).

    Returns
    -------
    dict
        ``key -> RunResult`` for every key of ``configs`` (empty with ``load=False``).

    Raises
    ------
    RuntimeError
        When a run failed after its retries (every failed run is named, with its error).

    See Also
    --------
    facterlab.facter.run_experiment : one run.
    facterlab.reporting.experiments.run : one run, or the saved one read back.
    facterlab.reporting.sweep.run_sweep : the sweep behind this (``facterlab sweep``; Dask, Slurm).
    facterlab.simpson.sweeping.run_many : the same for Simpson simulations.

    Examples
    --------
    Two tiny simulated runs (no data, no model; see :func:`~facterlab.facter.run_experiment`), one without
    and one with a demographic bias, with the results and the cache in a scratch folder
    (``$FACTERLAB_RESULTS``, ``$FACTERLAB_CACHE``).  Asked again, the finished runs are read back, not
    redone (each says ``reusing run <id> from <its start time> (<its folder>)``, printed, or logged where
    facterlab's log lines show; kept out of this example's output):

    >>> import contextlib, io, os, tempfile
    >>> from unittest import mock
    >>> from facterlab import preset
    >>> from facterlab.reporting.batch import run_many
    >>> configs = {beta: preset("repro", data__dataset="synthetic", data__n_rows=40, model__llm="simulated",
    ...                         model__encoder="hash-encoder", sim__beta=beta, facter__passes=1)
    ...            for beta in (0.0, 2.0)}
    >>> scratch = tempfile.mkdtemp()
    >>> with mock.patch.dict(os.environ, FACTERLAB_RESULTS=scratch, FACTERLAB_CACHE=scratch):
    ...     runs = run_many(configs, workers=1)
    ...     with contextlib.redirect_stdout(io.StringIO()):
    ...         again = run_many(configs, workers=1)
    >>> {beta: round(r.record.metrics.methods["neutral"].cfr_multi, 2) for beta, r in runs.items()}
    {0.0: 0.0, 2.0: 0.63}
    >>> [again[beta].run_id == runs[beta].run_id for beta in configs]
    [True, True]
    >>> [again[beta].record.meta.started_at == runs[beta].record.meta.started_at for beta in configs]  # read back
    [True, True]
    """
    workers = default_workers() if workers is None else int(workers)
    if workers < 1:
        raise ValueError(f"workers={workers}: expected at least 1")
    saved = {key: find_saved_run(cfg, data_dir) for key, cfg in configs.items()}
    todo = {key: cfg for key, cfg in configs.items() if saved[key] is None}
    by_hash: dict = {}
    for cfg in todo.values():
        by_hash.setdefault(config_hash(cfg), cfg)
    workers = min(workers, len(by_hash) // MIN_RUNS_PER_WORKER)
    if workers <= 1:
        if not load:  # only the missing runs: the saved ones are not read back
            for cfg in todo.values():
                run(cfg, data_dir=data_dir, progress=False)
            return {}
        return {key: run(cfg, data_dir=data_dir, progress=False) for key, cfg in configs.items()}
    # waves: the first run of each row sample (it encodes the sample's contexts), then the rest
    waves: list = [[], []]
    samples: set = set()
    for cfg in by_hash.values():
        sample = json.dumps(config_to_dict(cfg.data), sort_keys=True)
        waves[sample in samples].append(cfg)
        samples.add(sample)
    pool = ProcessExecutor(workers, keep_pool=True) if executor == "process" else make_executor(executor, workers)
    try:
        for wave in waves:
            if not wave:
                continue
            res = run_sweep(wave, executor=pool, data_dir=data_dir)
            if res.n_failed:
                failed = [f"{key}: {o.error}" for key, o in res.outcomes.items() if not o.ok]
                raise RuntimeError(f"{len(failed)} of {len(wave)} runs failed: " + " | ".join(failed))
    finally:
        pool.close()
    out: dict = {}
    msg = (
        f"run_many: {len(configs) - len(todo)} of {len(configs)} runs read back from {runs_dir(None)}, "
        f"{len(by_hash)} run on {workers} worker processes"
    )
    log.info(msg)
    if not _logging_shows_info():
        print(msg)
    if not load:
        return out
    for key, cfg in configs.items():
        path = saved[key] or find_saved_run(cfg, data_dir)
        if path is None:
            raise RuntimeError(f"run {key!r} finished but its run folder is missing or incomplete")
        out[key] = load_saved_run(path)
    return out
