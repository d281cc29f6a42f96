"""``facterlab sweep``: a grid of runs fanned out through an executor (docs/SCALING.md).

``facterlab sweep --grid model__llm=fake --grid seed=0,1,2 --grid protocol=open,rank
[--set data__dataset=synthetic] [--file sweep.toml] [--preset repro] [--executor process|serial|dask]
[--workers 2] [--scheduler tcp://host:8786] [--executor slurm --cluster cluster.yaml] [--retries 2] [--server-url URL] [--dry-run] [--json]``

The grid is the cartesian product of every ``--grid KEY=V1,V2`` (keys as in
:func:`facterlab.config.preset`: ``section__field`` or a top-level field such as ``seed``, ``protocol``),
on top of the fixed ``--set KEY=VALUE`` values and the preset.  Values are read as the field's type
(``data__n_rows=60`` an integer).  A sweep file (``.json`` or ``.toml``) gives the same as
``{"preset": "repro", "set": {KEY: value}, "grid": {KEY: [v1, v2]}}``; the command line adds to it.

Plan (the driver, before any task starts): every config is validated (bounds, model names); its run
id is computed as the run would compute it (config hash, the interactions' content hash, the model
fingerprints; the interactions are built here once per data config, so tasks only read them);
configs with the same run id are one task; a run id whose run folder is complete is not started
("reused").  Then the tasks go to the executor (:mod:`facterlab.executors`) with bounded retries, a
progress line per finished task, and a summary table at the end, read from the run folders.

LLM and embedding caches: each task writes to its own shard, the shared cache is read-only while the
tasks run, and the driver merges the shards at the end (:mod:`facterlab.models.shards` says why).

>>> parse_grid(["seed=0,1", "data__n_rows=60", "model__llm=fake"])
{'seed': [0, 1], 'data__n_rows': [60], 'model__llm': ['fake']}
>>> [c.seed for c in expand_grid({"seed": [0, 1]}, {"model__llm": "fake"})]
[0, 1]
"""

from __future__ import annotations

import contextlib
import dataclasses
import itertools
import json
import logging
import os
import socket
import tempfile
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from facterlab.config import (
    BOUNDS,
    FAKE_LLM,
    HASH_ENCODER,
    PRESETS,
    SECTIONS,
    SIMULATED_LLM,
    Bound,
    RunConfig,
    cache_dir,
    config_to_dict,
    field_default,
    is_served_name,
    preset,
    results_dir,
)
from facterlab.data.protocol import load_or_build_interactions
from facterlab.datatypes import MissingValue
from facterlab.executors import EXECUTORS, MAX_RETRIES, MAX_WORKERS, TaskOutcome, make_executor, read_cluster_file
from facterlab.facter.pipeline import run_experiment, run_id_for
from facterlab.facter.record import RunConfigRecord, RunRecord
from facterlab.facter.runfolder import find
from facterlab.facter.validation import validate_config
from facterlab.models import served
from facterlab.models.served import ServerError, check_served
from facterlab.params import ParameterError, coerce, parse_set_items
from facterlab.paths import ENV_CACHE, pid_alive, runs_dir
from facterlab.progress import enable_logging, format_seconds
from facterlab.reporting.experiments import expected_fingerprints
from facterlab.reporting.runs import text_table
from facterlab.safeio import FileLimitError, read_json, read_toml

__all__ = [
    "parse_grid",
    "load_sweep_file",
    "expand_grid",
    "plan_sweep",
    "run_sweep",
    "run_task",
    "SweepTask",
    "SweepResult",
    "summary_table",
    "register",
]

log = logging.getLogger(__name__)

#: the metric columns of the summary table: (method, flat metric key)
SUMMARY_METRICS = (
    ("neutral", "ndcg@10_multi"),
    ("facter", "ndcg@10_multi"),
    ("neutral", "cfr_multi"),
    ("facter", "cfr_multi"),
)


# ---------------------------------------------------------------------------------------------
# the grid


def _coerce_value(key: str, value: Any) -> Any:
    """``value`` (text from the command line, or a JSON/TOML value) as the type of config field ``key``."""
    if key == "preset":
        raise ParameterError("give the preset with --preset (or 'preset' in the sweep file), not in the grid")
    section, _, name = key.rpartition("__")
    if section not in SECTIONS:
        raise ParameterError(
            f"unknown config section {section!r} in {key!r}; sections: {', '.join(s for s in SECTIONS if s)}"
        )
    try:
        default = field_default(section, name)
    except ValueError as exc:
        raise ParameterError(f"{key}: {exc}") from None
    bound = BOUNDS.get(section, {}).get(name)
    if default is None and isinstance(bound, Bound):  # a numeric field whose default is None (n_rows)
        default = 0 if bound.integer else 0.0
        return coerce(key, value, default, nullable=True)
    return coerce(key, value, default, nullable=default is None)


def parse_grid(items: Sequence[str] | None, flag: str = "--grid") -> dict:
    """``["KEY=V1,V2", ...]`` -> ``{KEY: [v1, v2]}``, each value as the field's type."""
    raw = parse_set_items(items, flag)
    out = {}
    for key, text in raw.items():
        values = [v.strip() for v in text.split(",")]
        if not all(values):
            raise ParameterError(f"{flag} {key}={text!r}: an empty value in the list")
        out[key] = [_coerce_value(key, v) for v in values]
    return out


def load_sweep_file(path: os.PathLike | str) -> dict:
    """``{"preset": str | None, "set": {KEY: value}, "grid": {KEY: [values]}}`` from a ``.json`` or
    ``.toml`` file (unknown top-level keys are an error)."""
    p = Path(path)
    if p.exists() and not p.is_file():  # a folder, /dev/zero, a pipe
        raise ValueError(
            f"sweep file {str(p)!r} is not a regular file (a folder or a device); give a .json or .toml file"
        )
    if not p.is_file():
        raise FileNotFoundError(f"sweep file {str(p)!r} does not exist")
    try:
        if p.suffix == ".toml":
            data = read_toml(p, what="sweep file")
        elif p.suffix == ".json":
            data = read_json(p, what="sweep file")
        else:
            raise ValueError(f"sweep file {str(p)!r}: use a .json or .toml file")
    except (json.JSONDecodeError, ValueError) as exc:
        if isinstance(exc, (ParameterError, FileLimitError)):
            raise
        raise ValueError(f"sweep file {str(p)!r} does not parse: {str(exc).splitlines()[0]}") from None
    if not isinstance(data, dict):
        raise ValueError(f"sweep file {str(p)!r}: the top level must be a table/object")
    unknown = set(data) - {"preset", "set", "grid"}
    if unknown:
        raise ValueError(f"sweep file {str(p)!r}: unknown key(s) {sorted(unknown)}; known: 'preset', 'set', 'grid'")
    fixed, grid = data.get("set", {}), data.get("grid", {})
    if not isinstance(fixed, dict) or not isinstance(grid, dict):
        raise ValueError(f"sweep file {str(p)!r}: 'set' and 'grid' must be tables/objects")
    out_grid = {}
    for key, values in grid.items():
        values = values if isinstance(values, list) else [values]
        if not values:
            raise ValueError(f"sweep file {str(p)!r}: grid {key!r} has no values")
        out_grid[key] = [_coerce_value(key, v) for v in values]
    return {
        "preset": data.get("preset"),
        "set": {k: _coerce_value(k, v) for k, v in fixed.items()},
        "grid": out_grid,
    }


def expand_grid(
    grid: Mapping[str, Sequence], fixed: Mapping[str, Any] | None = None, preset_name: str = "repro"
) -> list:
    """The configs of the grid's cartesian product (first key slowest), each on top of ``fixed`` and
    the preset.  As ``facterlab run --model fake``: the fake model goes with the hash encoder unless an
    encoder is given."""
    fixed = dict(fixed or {})
    keys = list(grid)
    clash = sorted(set(keys) & set(fixed))
    if clash:
        raise ParameterError(f"{', '.join(clash)} given both as a fixed value and in the grid")
    out = []
    for combo in itertools.product(*(list(grid[k]) for k in keys)):
        over = {**fixed, **dict(zip(keys, combo))}
        if over.get("model__llm") == FAKE_LLM and "model__encoder" not in over:
            over["model__encoder"] = HASH_ENCODER
        if "seed" in over and "data__seed" not in over:
            over["data__seed"] = over["seed"]  # seeds are independent repetitions (rows and run), as in `run`
        out.append(preset(preset_name, **over))
    return out


# ---------------------------------------------------------------------------------------------
# plan


@dataclass(frozen=True)
class SweepTask:
    """What a worker needs to run one config: the config, the run id the driver planned, where data,
    results and cache shards are."""

    cfg: RunConfig
    run_id: str
    data_dir: str | None
    out_dir: str
    cache_root: str
    shard_dir: str
    immutable_cache: bool = True
    threads: int | None = None  # torch CPU threads of the run (local workers share the machine's cores)


@dataclass
class Planned:
    run_id: str
    cfg: RunConfig
    reused: bool
    n_configs: int = 1  # configs of the grid that gave this run id


#: a sweep of more configs than this starts only with ``--yes`` (``run_sweep(..., yes=True)``): a typo in
#: a grid (``seed=0..9999``) must not start 10,000 runs unasked; ``--dry-run`` shows the plan first
CONFIRM_ABOVE = 1000
#: seconds between the planning's progress lines
PLAN_PROGRESS_S = 10.0


def check_size(n_configs: int, yes: bool) -> None:
    """One line, before any work, for a sweep of more than :data:`CONFIRM_ABOVE` configs without ``yes``."""
    if n_configs > CONFIRM_ABOVE and not yes:
        raise ValueError(
            f"this sweep has {n_configs:,} configs, over the {CONFIRM_ABOVE:,} that start unasked: "
            "add --yes to start them (--dry-run shows the plan and writes nothing)"
        )


def plan_sweep(configs: Sequence[RunConfig], data_dir=None, out_dir=None) -> list:
    """Validate every config, compute its run id, merge duplicates, mark finished runs (module docstring).

    The model fingerprints of configs that differ only in what no model sees (the FACTER and metrics
    settings) are computed once (a simulated model's fingerprint fits it), and a line every
    :data:`PLAN_PROGRESS_S` seconds says how far the planning is."""
    root = results_dir(out_dir)
    seen_llm: set = set()
    seen_enc: set = set()
    for cfg in configs:  # each model name is checked once (a hub id may ask the network)
        m = cfg.model
        validate_config(cfg, out_dir=root, llm=m.llm not in seen_llm, encoder=m.encoder not in seen_enc)
        seen_llm.add(m.llm)
        seen_enc.add(m.encoder)
    check_servers(configs)
    inters: dict = {}
    plans: dict = {}
    prints: dict = {}  # what the model fingerprints depend on -> them
    t0 = last = time.monotonic()
    for i, cfg in enumerate(configs):
        if time.monotonic() - last >= PLAN_PROGRESS_S:
            last = time.monotonic()
            log.info("sweep: planned %d of %d configs (%s)", i, len(configs), format_seconds(last - t0))
        dkey = json.dumps(config_to_dict(cfg.data), sort_keys=True)
        if dkey not in inters:
            inters[dkey] = load_or_build_interactions(None, cfg.data, data_dir=data_dir)
        inter = inters[dkey]
        fkey = json.dumps(
            [inter.content_hash, cfg.protocol, cfg.seed, config_to_dict(cfg.model), dataclasses.asdict(cfg.sim)],
            sort_keys=True,
            default=str,
        )
        if fkey not in prints:
            prints[fkey] = expected_fingerprints(cfg, data_dir, inter)
        run_id = run_id_for(cfg, inter.content_hash, prints[fkey])
        if run_id in plans:
            plans[run_id].n_configs += 1
            continue
        plans[run_id] = Planned(run_id, cfg, reused=find(runs_dir(root), run_id) is not None)
    return list(plans.values())


def check_servers(configs: Sequence[RunConfig]) -> None:
    """Ask each distinct served model's server once whether it can answer (:func:`facterlab.models.served.
    check_served`: the model listed, log-probabilities for a likelihood ranker, token-id prompts with a
    tokenizer, the decoding fields); one line naming every refusal and how many runs it stops, before
    any run starts."""
    asked: dict = {}
    for cfg in configs:
        if not is_served_name(cfg.model.llm):
            continue
        key = json.dumps([config_to_dict(cfg.model), cfg.model.ranker_for(cfg.protocol)], sort_keys=True)
        if key not in asked:
            try:
                check_served(cfg.model, cfg.protocol)
                asked[key] = [None, 0]
            except ServerError as exc:
                asked[key] = [str(exc), 0]
        asked[key][1] += 1
    refusals: dict = {}
    for text, n in asked.values():
        if text is not None:
            refusals[text] = refusals.get(text, 0) + n
    if refusals:
        parts = [f"{text} ({n} run{'s' * (n != 1)})" for text, n in refusals.items()]
        raise ServerError(f"the sweep cannot start: {' | '.join(parts)}")


# ---------------------------------------------------------------------------------------------
# the task (runs in a worker)


def run_task(task: SweepTask) -> dict:
    """Run one planned config in this process (a worker) and return where it went.

    A run folder that is already complete (an earlier attempt finished before its worker died) is
    not redone.  LLM answers and embeddings go to this process's cache shards.  A served hint raised
    here names the sweep's ``--set`` (only within this call)."""
    with served.command("sweep"):
        return _run_task(task)


def _run_task(task: SweepTask) -> dict:
    t0 = time.perf_counter()
    where = {"host": socket.gethostname(), "pid": os.getpid()}
    if os.environ.get(ENV_CACHE) != task.cache_root:  # a worker reads the interactions the driver built
        os.environ[ENV_CACHE] = task.cache_root
    if task.threads:
        _set_threads(task.threads)
    if not any(getattr(h, "_facterlab_handler", False) for h in logging.getLogger("facterlab").handlers):
        enable_logging("WARNING", stream="stderr")  # a fresh worker: its warnings (a stalled server) show
    if find(runs_dir(task.out_dir), task.run_id) is not None:
        return {"run_id": task.run_id, "status": "reused", "seconds": 0.0, **where}
    recommender = encoder = None
    caches: list = []
    cfg = task.cfg
    base_llm = Path(task.cache_root) / "llm_cache.sqlite"
    base_emb = Path(task.cache_root) / "embeddings.sqlite"
    from facterlab.models.shards import ShardedEmbeddingCache, ShardedPredictionCache, shard_path

    if cfg.model.llm not in (FAKE_LLM, SIMULATED_LLM):
        from facterlab.models.rankers import make_recommender

        store = ShardedPredictionCache(shard_path(task.shard_dir, "llm", task.run_id), base_llm, task.immutable_cache)
        caches.append(store)
        recommender = make_recommender(cfg.model, cfg.protocol, cache=store)
    if cfg.model.encoder != HASH_ENCODER:
        from facterlab.models.encoder import load_encoder

        emb = ShardedEmbeddingCache(shard_path(task.shard_dir, "emb", task.run_id), base_emb, task.immutable_cache)
        caches.append(emb)
        encoder = load_encoder(cfg.model.encoder, device=cfg.model.device, cache=emb)
    try:
        res = run_experiment(
            cfg, recommender=recommender, encoder=encoder, data_dir=task.data_dir, out_dir=task.out_dir, progress=False
        )
    finally:
        for c in caches:
            c.close()
    if res.run_id != task.run_id:
        raise RuntimeError(
            f"the run got id {res.run_id}, the sweep planned {task.run_id}: the data or the model files changed "
            "during the sweep"
        )
    new = getattr(recommender, "n_generated", None)
    return {"run_id": res.run_id, "status": "ran", "seconds": time.perf_counter() - t0, "new_predictions": new, **where}


def _set_threads(n: int) -> None:
    """``n`` torch CPU threads in this worker: through the environment before torch loads (OpenMP reads
    it once), else ``torch.set_num_threads``."""
    import sys

    if "torch" in sys.modules:
        sys.modules["torch"].set_num_threads(int(n))
    else:
        os.environ["OMP_NUM_THREADS"] = os.environ["MKL_NUM_THREADS"] = str(int(n))


# ---------------------------------------------------------------------------------------------
# the sweep


def _host() -> str:
    return "".join(c if c.isalnum() or c == "." else "_" for c in socket.gethostname())[:40]


def sweep_shard_dir(cache_root: Path) -> Path:
    """This sweep's own folder of cache shards, ``<cache>/shards/sweep-<host>-<pid>/``: the driver merges
    only it at the end, so that a sweep of the same run ids running beside it keeps its shards."""
    return Path(cache_root) / "shards" / f"sweep-{_host()}-{os.getpid()}"


def merge_leftover_shards(cache_root: Path, run_ids: Sequence[str]) -> dict:
    """Merge what killed sweeps left: the shards of ``run_ids`` in the old flat ``<cache>/shards/``, and
    every shard folder of a sweep of this host whose driver process is gone (another host's
    folders are left alone: its driver cannot be asked)."""
    from facterlab.models.shards import merge_shards

    base = Path(cache_root) / "shards"
    merged = merge_shards(base, cache_root, run_ids)
    for d in sorted(base.glob(f"sweep-{_host()}-*")) if base.is_dir() else ():
        pid = d.name.rsplit("-", 1)[-1]
        if d.is_dir() and pid.isdigit() and not pid_alive(int(pid)):
            for kind, n in merge_shards(d, cache_root).items():
                merged[kind] = merged.get(kind, 0) + n
            _rmdir(d)
    return merged


def _rmdir(d: Path) -> None:
    try:
        d.rmdir()
    except OSError:  # not empty (a shard that could not be read stays for the next sweep), or gone
        pass


@dataclass
class SweepResult:
    """Per run id (plan order): the plan, the task outcome (None for a reused run) and the summary rows."""

    planned: list
    outcomes: dict
    rows: list = field(default_factory=list)
    executor: str = ""
    seconds: float = 0.0
    merged: dict = field(default_factory=dict)

    @property
    def n_failed(self) -> int:
        """Tasks that failed after their retries."""
        return sum(1 for o in self.outcomes.values() if not o.ok)

    @property
    def n_started(self) -> int:
        """Tasks run in this sweep (runs found finished are not started)."""
        return len(self.outcomes)

    def table(self) -> str:
        """The summary rows as a plain text table (:func:`summary_table`)."""
        return summary_table(self.rows)


def _varying(planned: Sequence[Planned]) -> list:
    """The flat config keys whose value differs between the planned runs."""
    flats = [_flat(p.cfg) for p in planned]
    keys = list(flats[0]) if flats else []
    return [k for k in keys if len({json.dumps(f.get(k), sort_keys=True) for f in flats}) > 1]


def _flat(cfg: RunConfig) -> dict:
    """The run's settings (:meth:`RunConfigRecord.settings`) under their ``section__field`` names."""
    return {k.replace(".", "__"): v for k, v in RunConfigRecord(config=config_to_dict(cfg)).settings().items()}


def _metric(metrics, method: str, key: str):
    block = metrics.methods.get(method)
    if block is None:
        return None
    v = block.flat().get(key)
    return None if v is None or isinstance(v, (MissingValue, dict, list)) else v


def _rows(planned: Sequence[Planned], outcomes: Mapping[str, TaskOutcome], root: Path) -> list:
    varying = _varying(planned)
    rows = []
    for p in planned:
        o = outcomes.get(p.run_id)
        flat = _flat(p.cfg)
        row: dict = {"run_id": p.run_id, **{k: flat.get(k) for k in varying}}
        if o is None:
            row.update(status="reused", attempts=0, seconds=None)
        elif o.ok:
            row.update(status=o.value.get("status", "ran"), attempts=o.attempts, seconds=round(o.seconds, 1))
        else:
            row.update(status="FAILED", attempts=o.attempts, seconds=round(o.seconds, 1), error=o.error)
        folder = find(runs_dir(root), p.run_id) if row["status"] != "FAILED" else None
        metrics = RunRecord.load(folder).metrics if folder is not None else None
        for method, key in SUMMARY_METRICS:
            row[f"{method}:{key}"] = _metric(metrics, method, key) if metrics is not None else None
        rows.append(row)
    return rows


def summary_table(rows: Sequence[Mapping]) -> str:
    """A plain text table of the summary rows (numbers to 4 decimals; missing as ``n/a``)."""
    if not rows:
        return "(no runs)"
    cols = list(dict.fromkeys(k for r in rows for k in r if k != "error"))

    def fmt(v, col):
        if v is None:
            return "n/a"
        if isinstance(v, float):
            return f"{v:.1f}" if col == "seconds" else f"{v:.4f}"
        return str(v)

    table = text_table(cols, [[fmt(r.get(c), c) for c in cols] for r in rows])
    return "\n".join([table, *(f"{r['run_id']}: {r['error']}" for r in rows if r.get("error"))])


def run_sweep(
    configs: Sequence[RunConfig],
    executor: Any = "process",
    workers: int = 2,
    scheduler: str | None = None,
    retries: int = 2,
    data_dir=None,
    out_dir=None,
    on_event=None,
    cluster: str | None = None,
) -> SweepResult:
    """Plan ``configs``, run the runs not finished yet through ``executor`` (a name of
    :data:`facterlab.executors.EXECUTORS` or an :class:`~facterlab.executors.Executor`), merge the cache
    shards, and return the summary (the steps: module docstring).  ``on_event``: called as the executor's
    (``kind, run_id, info``) after the progress line."""
    from facterlab.models.shards import merge_shards, prepare_base

    t0 = time.perf_counter()
    root = results_dir(out_dir)
    planned = plan_sweep(configs, data_dir, out_dir)
    todo = [p for p in planned if not p.reused]
    n_dup = len(configs) - len(planned)
    log.info(
        "sweep: %d configs, %d runs (%d duplicate configs merged), %d finished already, %d to run",
        len(configs), len(planned), n_dup, len(planned) - len(todo), len(todo),
    )  # fmt: skip
    croot = cache_dir()
    shard_dir = sweep_shard_dir(croot)
    run_ids = [p.run_id for p in planned]
    merge_leftover_shards(croot, run_ids)  # of killed sweeps
    outcomes: dict = {}
    desc = "nothing to run"
    if todo:
        immutable = prepare_base(croot / "llm_cache.sqlite") & prepare_base(croot / "embeddings.sqlite")
        ex = make_executor(executor, workers, scheduler, cluster=cluster) if isinstance(executor, str) else executor
        # local workers share this machine's cores: each gets its part (a remote worker keeps its own setting)
        cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
        threads = max(1, cores // ex.workers) if ex.local else None
        tasks = {
            p.run_id: SweepTask(
                p.cfg,
                p.run_id,
                None if data_dir is None else str(data_dir),
                str(root),
                str(croot),
                str(shard_dir),
                immutable,
                threads,
            )
            for p in todo
        }
        desc = ex.describe()
        log.info("sweep: %d runs on %s", len(tasks), desc)
        finished = [0]
        started = time.perf_counter()

        def event(kind: str, key: str, info: Any) -> None:
            if kind in ("done", "failed"):
                finished[0] += 1
                left = len(tasks) - finished[0]
                rate = (time.perf_counter() - started) / finished[0]
                what = (
                    f"done in {format_seconds(info.seconds)}"
                    if info.ok
                    else f"FAILED after {info.attempts} attempts: {info.error}"
                )
                log.info(
                    "sweep %d/%d: run %s %s%s", finished[0], len(tasks), key, what,
                    f", about {format_seconds(rate * left)} left" if left else "",
                )  # fmt: skip
            elif kind == "retry":
                log.warning("sweep: run %s failed (%s); retrying", key, info)
            elif kind == "rescheduled":
                log.warning("sweep: run %s lost its worker; Dask's scheduler ran it again (%d time(s))", key, info)
            if on_event is not None:
                on_event(kind, key, info)

        try:
            outcomes = ex.run(run_task, tasks, retries=retries, on_event=event)
        finally:
            if isinstance(executor, str):
                ex.close()
            merged = merge_shards(shard_dir, croot)  # this sweep's own writers only
            _rmdir(shard_dir)
    else:
        merged = {}
    result = SweepResult(planned, outcomes, _rows(planned, outcomes, root), desc, time.perf_counter() - t0, merged)
    log.info(
        "sweep: %d runs, %d started, %d failed, in %s",
        len(planned), result.n_started, result.n_failed, format_seconds(result.seconds),
    )  # fmt: skip
    return result


# ---------------------------------------------------------------------------------------------
# the command


def register(subparsers) -> None:
    """Add the ``sweep`` command to the ``facterlab`` parser."""
    p = subparsers.add_parser("sweep", help="run a grid of configs through a process pool or a Dask cluster")
    p.add_argument(
        "--grid", action="append", default=[], metavar="KEY=V1,V2", help="a grid axis: section__field or seed/protocol"
    )
    p.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help="a fixed config value")
    p.add_argument("--file", default=None, help="a sweep file (.json or .toml: preset, set, grid)")
    p.add_argument(
        "--server-url",
        default=None,
        metavar="URL",
        help="the server of model__llm=openai:<model id> (model__server_url)",
    )
    p.add_argument("--preset", default=None, choices=PRESETS, help="the method's preset (default repro)")
    p.add_argument("--executor", default="process", choices=EXECUTORS, help="process (default) | serial | dask | slurm")
    p.add_argument(
        "--cluster",
        default=None,
        metavar="FILE",
        help="--executor slurm: a .yaml/.toml file of dask-jobqueue SLURMCluster settings and jobs (docs/SCALING.md)",
    )
    p.add_argument("--workers", type=int, default=2, help=f"worker processes, 1..{MAX_WORKERS} (default 2)")
    p.add_argument("--scheduler", default=None, metavar="ADDRESS", help="a running Dask scheduler (--executor dask)")
    p.add_argument("--retries", type=int, default=2, help=f"extra attempts of a failed run, 0..{MAX_RETRIES}")
    p.add_argument("--data-dir", default=None, help="data directory (default: $FACTERLAB_DATA)")
    p.add_argument("--out-dir", default=None, help="results root (default: $FACTERLAB_RESULTS or ./results)")
    p.add_argument(
        "--dry-run", action="store_true", help="print the plan (run ids, finished or not) and stop; writes nothing"
    )
    p.add_argument("--yes", action="store_true", help=f"start a sweep of more than {CONFIRM_ABOVE:,} configs")
    p.add_argument("--json", action="store_true", help="print the summary rows as JSON")
    p.set_defaults(func=cmd_sweep)


def configs_from_args(args) -> list:
    spec = load_sweep_file(args.file) if args.file else {"preset": None, "set": {}, "grid": {}}
    fixed = dict(spec["set"])
    for key, text in parse_set_items(args.set).items():
        fixed[key] = _coerce_value(key, text)
    if args.server_url:
        fixed["model__server_url"] = args.server_url
    grid = dict(spec["grid"])
    grid.update(parse_grid(args.grid))
    if not grid and not fixed:
        raise ParameterError("an empty sweep: give --grid KEY=V1,V2 (and --set KEY=VALUE) or --file")
    return expand_grid(grid, fixed, args.preset or spec["preset"] or "repro")


@contextlib.contextmanager
def _scratch_cache():
    """``FACTERLAB_CACHE`` pointed at a temporary folder, removed at the end (``--dry-run``)."""
    old = os.environ.get(ENV_CACHE)
    with tempfile.TemporaryDirectory(prefix="facterlab-dry-run-") as tmp:
        os.environ[ENV_CACHE] = tmp
        try:
            yield
        finally:
            if old is None:
                os.environ.pop(ENV_CACHE, None)
            else:
                os.environ[ENV_CACHE] = old


def cmd_sweep(args) -> int:
    """Run ``facterlab sweep`` (served hints name the sweep's ``--set``, only within this call)."""
    with served.command("sweep"):
        return _cmd_sweep(args)


def _cmd_sweep(args) -> int:
    if not 0 <= args.retries <= MAX_RETRIES:
        raise ValueError(f"--retries {args.retries}: must be an integer in [0, {MAX_RETRIES}]")
    if not 1 <= args.workers <= MAX_WORKERS:
        raise ValueError(f"--workers {args.workers}: must be an integer in [1, {MAX_WORKERS}]")
    if args.scheduler and args.executor != "dask":
        raise ValueError("--scheduler needs --executor dask")
    if (args.cluster is not None) != (args.executor == "slurm"):
        raise ValueError("--executor slurm needs --cluster FILE, and --cluster needs --executor slurm")
    if args.cluster is not None:
        read_cluster_file(args.cluster)  # one line for a bad file, before any planning
    configs = configs_from_args(args)
    if args.dry_run:
        with _scratch_cache():  # the interactions it builds go to a temporary cache: a dry run writes nothing
            planned = plan_sweep(configs, args.data_dir, args.out_dir)
        for p in planned:
            print(f"{p.run_id}  {'finished' if p.reused else 'to run'}")
        print(f"{len(configs)} configs, {len(planned)} runs, {sum(not p.reused for p in planned)} to run")
        return 0
    check_size(len(configs), args.yes)
    res = run_sweep(
        configs,
        args.executor,
        args.workers,
        args.scheduler,
        args.retries,
        args.data_dir,
        args.out_dir,
        cluster=args.cluster,
    )
    if args.json:
        print(json.dumps(res.rows, indent=2, default=str))
    else:
        print(res.table())
        print(
            f"{len(res.planned)} runs: {res.n_started} started, {len(res.planned) - res.n_started} finished before, "
            f"{res.n_failed} failed ({res.executor}, {format_seconds(res.seconds)})"
        )
    return 1 if res.n_failed else 0
