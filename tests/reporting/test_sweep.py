"""facterlab sweep: the grid, the plan (run ids, duplicates, finished runs), the executors (serial,
process pool, a real Dask LocalCluster with a worker killed mid-sweep, dask-jobqueue's LocalCluster
through job scripts), the cache shards and the command line.

Every sweep here runs the fake recommender on tiny synthetic data (a run takes a few seconds on a
loaded 2-core machine); outputs of the executors are compared byte for byte with a serial sweep.
"""

from __future__ import annotations

import json
import os
import signal
import sqlite3
from pathlib import Path

import pytest

from facterlab.datatypes import Prediction
from facterlab.executors import ProcessExecutor, SerialExecutor, make_executor
from facterlab.models.cache import PredictionCache
from facterlab.models.shards import ShardedPredictionCache, merge_shards, prepare_base, shard_path
from facterlab.params import ParameterError
from facterlab.reporting.sweep import expand_grid, load_sweep_file, parse_grid, plan_sweep, run_sweep

REPO = Path(__file__).resolve().parents[2]
FIXED = {
    "model__llm": "fake",
    "data__dataset": "synthetic",
    "data__n_rows": 40,
    "facter__passes": 1,
    "metrics__cfr_rows": 4,
}
RUN_FILES = (
    "config.json",
    "metrics.json",
    "calibration.parquet",
    *(f"rows_{m}.parquet" for m in ("neutral", "fair", "facter")),
)

NO_DASK = "the dask extra is not installed (pip install -e '.[dask]')"


def _configs(seeds=(0, 1, 2, 0)):
    return expand_grid({"seed": list(seeds)}, FIXED)


def _files(root: Path) -> dict:
    """run id -> {file: bytes} of every run folder under ``root``."""
    return {
        d.name: {f: (d / f).read_bytes() for f in RUN_FILES}
        for d in sorted((root / "runs").iterdir())
        if d.is_dir() and not d.name.startswith(".")
    }


@pytest.fixture(scope="module")
def cache_root(tmp_path_factory):
    """One cache for the module (the synthetic interactions are built once), set before any cluster
    starts so that its workers inherit it."""
    root = tmp_path_factory.mktemp("cache")
    old = os.environ.get("FACTERLAB_CACHE")
    os.environ["FACTERLAB_CACHE"] = str(root)
    yield root
    if old is None:
        os.environ.pop("FACTERLAB_CACHE", None)
    else:
        os.environ["FACTERLAB_CACHE"] = old


@pytest.fixture(scope="module")
def serial(cache_root, tmp_path_factory):
    """The reference: the grid run serially in this process."""
    out = tmp_path_factory.mktemp("serial")
    res = run_sweep(_configs(), executor="serial", out_dir=out)
    return out, res


# ------------------------------------------------------------------------------------------ grid


def test_grid_values_take_the_fields_types_and_bad_keys_are_one_line_errors():
    assert parse_grid(["data__n_rows=40,60", "facter__alpha=0.1", "protocol=open,rank"]) == {
        "data__n_rows": [40, 60],
        "facter__alpha": [0.1],
        "protocol": ["open", "rank"],
    }
    with pytest.raises(ParameterError, match="unknown config section 'modle'"):
        parse_grid(["modle__llm=fake"])
    with pytest.raises(ParameterError, match="expected int"):
        parse_grid(["data__n_rows=4o"])
    with pytest.raises(ParameterError, match="given twice"):
        parse_grid(["seed=0", "seed=1"])
    with pytest.raises(ParameterError, match="both as a fixed value and in the grid"):
        expand_grid({"seed": [0]}, {"seed": 1})
    cfgs = expand_grid({"seed": [0, 1], "protocol": ["open", "rank"]}, {"model__llm": "fake"})
    assert [(c.seed, c.data.seed, c.protocol) for c in cfgs] == [
        (0, 0, "open"),
        (0, 0, "rank"),
        (1, 1, "open"),
        (1, 1, "rank"),
    ]
    assert {c.model.encoder for c in cfgs} == {"hash-encoder"}


def test_sweep_files_json_and_toml(tmp_path):
    (tmp_path / "s.toml").write_text('preset = "icml"\n[set]\nmodel__llm = "fake"\n[grid]\nseed = [0, 1]\n')
    (tmp_path / "s.json").write_text(json.dumps({"set": {"model__llm": "fake"}, "grid": {"seed": [0, 1]}}))
    toml, js = load_sweep_file(tmp_path / "s.toml"), load_sweep_file(tmp_path / "s.json")
    assert toml["grid"] == js["grid"] == {"seed": [0, 1]} and toml["preset"] == "icml"
    (tmp_path / "bad.json").write_text('{"grid": {"seed": [0, 1]}, "runs": 3}')
    with pytest.raises(ValueError, match="unknown key"):
        load_sweep_file(tmp_path / "bad.json")
    (tmp_path / "broken.toml").write_text("grid = [")
    with pytest.raises(ValueError, match="does not parse"):
        load_sweep_file(tmp_path / "broken.toml")


# ------------------------------------------------------------------------------------------ plan


def test_plan_merges_duplicates_and_the_serial_sweep_writes_each_run_once(serial):
    out, res = serial
    assert len(res.planned) == 3 and res.planned[0].n_configs == 2  # seed 0 twice: one run
    assert res.n_started == 3 and res.n_failed == 0
    assert sorted(_files(out)) == sorted(p.run_id for p in res.planned)
    text = res.table()
    assert "seed" in text.splitlines()[0] and all(p.run_id in text for p in res.planned)


def test_rerun_of_a_finished_sweep_starts_nothing(serial):
    out, _ = serial
    before = {p: p.stat().st_mtime_ns for p in (out / "runs").rglob("*")}
    calls = []
    again = run_sweep(_configs(), executor="serial", out_dir=out, on_event=lambda *a: calls.append(a))
    assert again.n_started == 0 and calls == [] and {r["status"] for r in again.rows} == {"reused"}
    assert {p: p.stat().st_mtime_ns for p in (out / "runs").rglob("*")} == before
    assert all(p.reused for p in plan_sweep(_configs(), out_dir=out))


# ------------------------------------------------------------------------------------------ executors


def _die_first_time(marker: str) -> int:
    """Kill this worker process the first time (no exception: the process just ends), then answer."""
    p = Path(marker)
    if not p.exists():
        p.write_text("x")
        os._exit(1)
    return os.getpid()


def _always_fails(x: int) -> int:
    raise RuntimeError(f"task {x} always fails")


def _task(arg: tuple):
    kind, value = arg
    return _die_first_time(value) if kind == "die" else _always_fails(value)


def test_process_pool_reruns_the_task_of_a_dead_worker_and_bounds_retries(tmp_path):
    ex = ProcessExecutor(workers=1)  # one worker: the failing task runs only after the dead worker's is redone
    events: dict = {}
    out = ex.run(
        _task,
        {"a": ("die", str(tmp_path / "marker")), "x": ("fail", 7)},
        retries=2,
        on_event=lambda kind, key, info: events.setdefault(key, []).append(kind),
    )
    assert out["a"].ok and out["a"].value != os.getpid() and events["a"][-1] == "done"
    assert not out["x"].ok and out["x"].attempts == 3 and "always fails" in out["x"].error
    assert events["x"][-6:] == ["start", "retry", "start", "retry", "start", "failed"]
    assert list(out) == ["a", "x"]
    ser = SerialExecutor().run(_always_fails, {"x": 1, "y": 2}, retries=0)
    assert [o.attempts for o in ser.values()] == [1, 1] and not any(o.ok for o in ser.values())
    with pytest.raises(ValueError, match="retries must be an integer in"):
        ex.run(_always_fails, {"x": 1}, retries=11)
    with pytest.raises(ValueError, match="workers must be"):
        make_executor("process", workers=0)


class _BreaksWhileSubmitting:
    """A real pool that refuses every submission from the ``at``-th on with BrokenProcessPool, as a pool
    that a dying worker broke while the executor was still submitting to it."""

    def __init__(self, pool, at: int):
        self.pool, self.at, self.calls = pool, at, 0

    def submit(self, fn, *args):
        from concurrent.futures.process import BrokenProcessPool

        self.calls += 1
        if self.calls >= self.at:
            raise BrokenProcessPool("a worker died")
        return self.pool.submit(fn, *args)

    def shutdown(self, **kw):
        self.pool.shutdown(**kw)


def test_a_pool_that_breaks_while_tasks_are_submitted_hands_the_refused_ones_to_the_next_pool():
    made: list = []

    class Breaking(ProcessExecutor):
        def _pool(self):
            pool = super()._pool()
            made.append(pool)
            return _BreaksWhileSubmitting(pool, at=2) if len(made) == 1 else pool

    events: dict = {}
    out = Breaking(1, start_method=None).run(
        abs, {"a": -1, "b": -2, "c": -3}, retries=0, on_event=lambda k, key, i: events.setdefault(key, []).append(k)
    )
    assert len(made) == 2 and {k: (o.ok, o.value, o.attempts) for k, o in out.items()} == {
        "a": (True, 1, 1),
        "b": (True, 2, 1),  # refused by the broken pool: no attempt counted, run by the next pool
        "c": (True, 3, 1),
    }
    assert events == {k: ["start", "done"] for k in "abc"}
    with pytest.raises(ValueError, match="unknown start method 'forkk'"):
        ProcessExecutor(1, start_method="forkk")


@pytest.mark.filterwarnings("ignore::DeprecationWarning")
def test_dask_cluster_survives_a_killed_worker_and_matches_the_serial_run_byte_for_byte(serial, tmp_path):
    pytest.importorskip("distributed", reason=NO_DASK)
    from distributed import LocalCluster

    ref_out, _ = serial
    killed: dict = {}
    with LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None) as cluster:
        # through its address, as `--executor dask --scheduler ADDRESS` connects
        with make_executor("dask", scheduler=cluster.scheduler_address) as ex:
            client = ex.client
            assert ex.workers == 2 and not ex.local
            pids = client.run(os.getpid)

            def kill_one(kind, key, info):
                if kind != "done" or killed:
                    return
                busy = {w: ks for w, ks in client.processing().items() if ks}
                if not busy:
                    return
                worker, keys = next(iter(busy.items()))
                killed.update(worker=worker, pid=pids[worker], key=str(next(iter(keys))))
                os.kill(pids[worker], signal.SIGKILL)

            res = run_sweep(_configs((0, 1, 2, 3)), executor=ex, out_dir=tmp_path, on_event=kill_one)
            events: list = []  # the same sweep again, on the same cluster: nothing is submitted
            again = run_sweep(
                _configs((0, 1, 2, 3)), executor=ex, out_dir=tmp_path, on_event=lambda *a: events.append(a)
            )
    assert again.n_started == 0 and events == [] and {r["status"] for r in again.rows} == {"reused"}
    assert killed, "no worker was busy when the first run finished: nothing was killed"
    assert res.n_failed == 0 and res.n_started == 4
    victim = next(k for k in res.outcomes if k in killed["key"])
    assert res.outcomes[victim].value["pid"] != killed["pid"]  # the killed worker's run was redone elsewhere
    assert res.outcomes[victim].attempts >= 2  # Dask's own rerun counts an attempt (issue 31)
    assert next(r for r in res.rows if r["run_id"] == victim)["attempts"] >= 2
    got, ref = _files(tmp_path), _files(ref_out)
    for run_id in ref:
        assert got[run_id] == ref[run_id], f"run {run_id} differs from the serial run"


@pytest.mark.filterwarnings("ignore::DeprecationWarning")
# dask-jobqueue 0.9's LocalJob kills its job's process but never waits for it: Popen.__del__ warns
# "subprocess ... is still running"; the test checks below that every worker process is gone
@pytest.mark.filterwarnings("ignore::pytest.PytestUnraisableExceptionWarning")
def test_jobqueue_local_cluster_runs_the_sweep_through_job_scripts(serial, tmp_path):
    pytest.importorskip("distributed", reason=NO_DASK)
    jq = pytest.importorskip("dask_jobqueue.local", reason=NO_DASK)
    from distributed import Client

    from facterlab.executors import DaskExecutor

    ref_out, _ = serial
    with jq.LocalCluster(cores=1, processes=1, memory="2GB", walltime="00:10:00") as cluster:
        assert "distributed.cli.dask_worker" in cluster.job_script()
        cluster.scale(2)
        with Client(cluster) as client:
            client.wait_for_workers(2, timeout=120)
            worker_pids = list(client.run(os.getpid).values())
            res = run_sweep(_configs((0, 1)), executor=DaskExecutor(client=client), out_dir=tmp_path)
    assert res.n_failed == 0 and res.n_started == 2
    assert {o.value["pid"] for o in res.outcomes.values()} <= set(worker_pids)
    import psutil

    _, alive = psutil.wait_procs([p for p in map(_proc, worker_pids) if p is not None], timeout=30)
    assert not alive, f"job processes left running: {alive}"
    got, ref = _files(tmp_path), _files(ref_out)
    assert got and all(got[r] == ref[r] for r in got)


def _proc(pid: int):
    import psutil

    try:
        return psutil.Process(pid)
    except psutil.NoSuchProcess:
        return None


FLAKY_MODULE = """
import os, time


def nap(arg):
    seconds, marker = arg
    if marker and not os.path.exists(marker):
        open(marker, "w").close()
        raise RuntimeError("the first attempt fails")
    time.sleep(seconds)
    return seconds
"""

WIDGET_CELL = """
import os, sys, time
sys.path.insert(0, os.getcwd())  # flaky.py, for the kernel and (through sys.path) the Dask workers
import flaky
from facterlab.executors import make_executor
from facterlab.simpson.sweeping import run_many

ex = make_executor("dask", workers=1)
print("widgets", ex.widgets, "dashboard", ex.dashboard)
out = run_many(flaky.nap, [(0.2, ""), (0.3, "marker"), (0.4, "")], executor=ex, desc="naps")
first, last = ex.bars[0], ex.bars[-1]
t0 = time.time()
while (last.bar.bar_style, first.bar.bar_style) != ("success", "danger") and time.time() - t0 < 15:
    time.sleep(0.1)  # the kernel's own loop is blocked here: only the client's loop can move the bars
print("bars", len(ex.bars), "first", first.bar.bar_style, "last", last.bar.value, last.bar.bar_style, out)
ex.close()
"""


@pytest.mark.filterwarnings("ignore::DeprecationWarning")
def test_in_a_notebook_the_dask_executor_shows_dasks_progress_widget_moving_during_the_cell(tmp_path):
    """In a real Jupyter kernel the Dask executor displays distributed's ProgressWidget for its tasks and
    feeds it from the client's event loop: the bars move while the cell still runs.  A task that raises
    stops the first bar (red); its retry gets a new bar over what is left, which ends green."""
    pytest.importorskip("distributed", reason=NO_DASK)
    pytest.importorskip("ipywidgets")
    nbformat = pytest.importorskip("nbformat")
    from nbclient import NotebookClient

    (tmp_path / "flaky.py").write_text(FLAKY_MODULE)
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell(WIDGET_CELL)]
    env_log = os.environ.get("FACTERLAB_LOG")
    os.environ["FACTERLAB_LOG"] = "ERROR"  # the kernel inherits it: only the cell's own prints
    try:
        NotebookClient(
            nb, kernel_name="python3", timeout=240, resources={"metadata": {"path": str(tmp_path)}}
        ).execute()
    finally:
        if env_log is None:
            os.environ.pop("FACTERLAB_LOG", None)
        else:
            os.environ["FACTERLAB_LOG"] = env_log
    outputs = nb.cells[0].outputs
    text = "".join(o.get("text", "") for o in outputs if o.output_type == "stream")
    assert "widgets True dashboard None" in text, text  # no bokeh here: no dashboard, and no link logged
    assert "bars 2 first danger last 1.0 success [0.2, 0.3, 0.4]" in text, text
    views = [o for o in outputs if "application/vnd.jupyter.widget-view+json" in o.get("data", {})]
    assert len(views) == 2, outputs


# ------------------------------------------------------------------------------------------ cache shards


def _pred(title: str) -> Prediction:
    return Prediction(titles=(title,), parse_status="ok", raw=title)


def test_shards_one_writer_per_file_read_the_shared_cache_and_an_earlier_attempt_then_merge(tmp_path):
    base = PredictionCache(tmp_path / "llm_cache.sqlite")
    base.put_predictions([("k-base", _pred("Base"))])
    base.close()
    assert prepare_base(tmp_path / "llm_cache.sqlite")  # WAL folded in: tasks may read it immutable
    shards = tmp_path / "shards"
    shards.mkdir()
    earlier = ShardedPredictionCache(shards / "llm-run1-hostA-11.sqlite", tmp_path / "llm_cache.sqlite")
    earlier.put_predictions([("k-early", _pred("Early"))])
    earlier.close()  # that attempt's worker died after this batch
    mine = ShardedPredictionCache(shard_path(shards, "llm", "run1"), tmp_path / "llm_cache.sqlite")
    assert mine._conn.execute("PRAGMA journal_mode").fetchone()[0] == "delete"
    got = mine.get_predictions(["k-base", "k-early", "k-new"])
    assert {k: p.titles for k, p in got.items()} == {"k-base": ("Base",), "k-early": ("Early",)}
    mine.put_predictions([("k-new", _pred("New"))])
    mine.close()
    other = ShardedPredictionCache(shards / "llm-run2-hostB-12.sqlite", tmp_path / "llm_cache.sqlite")
    other.put_predictions([("k-other", _pred("Other"))])
    other.close()
    assert merge_shards(shards, tmp_path, run_ids=["run1"]) == {"llm": 2, "emb": 0}
    assert [p.name for p in shards.iterdir()] == ["llm-run2-hostB-12.sqlite"]  # another sweep's shard stays
    merge_shards(shards, tmp_path)
    final = PredictionCache(tmp_path / "llm_cache.sqlite")
    assert len(final) == 4 and not list(shards.iterdir())
    final.close()
    with sqlite3.connect(tmp_path / "llm_cache.sqlite") as conn:
        assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"  # the shared cache is unchanged in kind


# ------------------------------------------------------------------------------------------ command line


def test_cli_errors_are_one_line_before_any_work(tmp_path, monkeypatch, capsys):
    from facterlab.cli import main

    monkeypatch.setenv("FACTERLAB_RESULTS", str(tmp_path))
    monkeypatch.setenv("FACTERLAB_LOG", "WARNING")  # main(-q) exports it; restored after the test
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")  # an unknown model name is refused without asking the hub
    bad = [
        (["sweep"], "an empty sweep"),
        (["sweep", "--grid", "model__nope=1"], "unknown config field"),
        (["sweep", "--grid", "seed=0", "--set", "data__n_rows=5"], "too small"),
        (["sweep", "--grid", "seed=0", "--scheduler", "tcp://x:1"], "--scheduler needs --executor dask"),
        (["sweep", "--grid", "seed=0", "--retries", "99"], "--retries 99"),
        (["sweep", "--grid", "seed=0", "--set", "model__llm=no-such-model"], "is not a registry name"),
    ]
    for args, text in bad:
        rc = main(["-q", *args])
        err = capsys.readouterr().err
        assert rc != 0 and text in err, (args, err)
        assert err.strip().count("\n") <= 3 and "Traceback" not in err, err
    assert not (tmp_path / "runs").exists()


def test_cli_dry_run_lists_the_plan(cache_root, serial, monkeypatch, capsys):
    from facterlab.cli import main

    out, res = serial
    monkeypatch.setenv("FACTERLAB_RESULTS", str(out))
    monkeypatch.setenv("FACTERLAB_LOG", "WARNING")
    args = ["sweep", "--grid", "seed=0,1,2,0", "--dry-run"] + [f"--set={k}={v}" for k, v in FIXED.items()]
    assert main(["-q", *args]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[-1] == "4 configs, 3 runs, 0 to run"
    assert {ln.split()[0] for ln in lines[:-1]} == {p.run_id for p in res.planned}


def test_dask_executor_without_the_extra_is_one_line(monkeypatch):
    import sys

    monkeypatch.setitem(sys.modules, "distributed", None)  # as if the dask extra were not installed
    with pytest.raises(
        ValueError, match=r"--executor dask needs Dask distributed, which is not installed: pip install"
    ):
        make_executor("dask")


def test_a_run_that_keeps_failing_is_reported_and_the_others_finish(cache_root, tmp_path, monkeypatch, caplog):
    import logging

    import facterlab.reporting.sweep as sweep

    real = sweep.run_task
    configs = _configs((0, 1))
    bad = plan_sweep(configs, out_dir=tmp_path)[1].run_id

    def flaky(task):
        if task.run_id == bad:
            raise RuntimeError("the GPU node went away")
        return real(task)

    monkeypatch.setattr(sweep, "run_task", flaky)
    with caplog.at_level(logging.INFO, logger="facterlab.reporting.sweep"):
        res = run_sweep(configs, executor="serial", retries=1, out_dir=tmp_path)
    # the command line's progress: a line per finished run, with the time left, and one per retry
    lines = [r.getMessage() for r in caplog.records if r.name == "facterlab.reporting.sweep"]
    good = next(p.run_id for p in res.planned if p.run_id != bad)
    assert any(ln.startswith(f"sweep 1/2: run {good} done in ") and ln.endswith(" left") for ln in lines), lines
    assert f"sweep 2/2: run {bad} FAILED after 2 attempts: RuntimeError: the GPU node went away" in lines, lines
    assert f"sweep: run {bad} failed (RuntimeError: the GPU node went away); retrying" in lines, lines
    row = {r["run_id"]: r for r in res.rows}
    assert row[bad]["status"] == "FAILED" and row[bad]["attempts"] == 2
    assert row[bad]["error"] == "RuntimeError: the GPU node went away" and row[bad]["facter:cfr_multi"] is None
    assert res.n_failed == 1 and [r["status"] for r in res.rows if r["run_id"] != bad] == ["ran"]
    assert f"{bad}: RuntimeError: the GPU node went away" in res.table()
    assert not (tmp_path / "runs" / bad).exists()


@pytest.mark.filterwarnings("ignore::DeprecationWarning")
def test_the_local_dask_cluster_listens_on_this_machine_only(caplog):
    pytest.importorskip("distributed", reason=NO_DASK)
    import logging

    import psutil

    caplog.set_level(logging.INFO, logger="facterlab.executors")
    with make_executor("dask", workers=1) as ex:
        assert ex.address.startswith("tcp://127.0.0.1:")
        procs = [psutil.Process(), *psutil.Process().children(recursive=True)]
        listening = {
            c.laddr.ip for p in procs for c in p.net_connections(kind="inet") if c.status == psutil.CONN_LISTEN
        }
    assert listening and listening <= {"127.0.0.1"}, listening
    if ex.dashboard:
        assert "127.0.0.1" in ex.dashboard and any(ex.dashboard in r.getMessage() for r in caplog.records)


def test_run_ids_and_metrics_are_the_same_in_another_environment(tmp_path):
    """Issue 31: the same sweep in two environments (another working directory, HOME, hash seed, locale,
    cache folder, and a process pool against serial) prints the same run ids and the same numbers: a run
    id hashes only the config, the data's content and the model files."""
    import subprocess
    import sys

    cmd = [sys.executable, "-m", "facterlab.cli", "-q", "sweep", "--grid", "seed=0,1", "--set", "model__llm=fake"]
    cmd += ["--set", "data__dataset=synthetic", "--set", "data__n_rows=60", "--set", "facter__passes=1", "--json"]
    keep = {k: v for k, v in os.environ.items() if not k.startswith(("FACTERLAB_", "LC_", "LANG", "PYTHONHASHSEED"))}
    envs = {
        "serial": (
            {"HOME": str(tmp_path / "h1"), "PYTHONHASHSEED": "0", "LC_ALL": "C.UTF-8"},
            ["--executor", "serial"],
        ),
        "process": ({"HOME": str(tmp_path / "h2"), "PYTHONHASHSEED": "4242", "LC_ALL": "C"}, ["--workers", "2"]),
    }
    rows = {}
    for i, (name, (extra, flags)) in enumerate(envs.items()):
        cwd = tmp_path / f"cwd{i}"
        cwd.mkdir()
        env = {**keep, **extra, "FACTERLAB_CACHE": str(tmp_path / f"cache{i}"), "FACTERLAB_LOG": "WARNING"}
        out = subprocess.run(
            [*cmd, *flags, "--out-dir", str(tmp_path / f"out{i}")], cwd=cwd, env=env, capture_output=True, text=True
        )
        assert out.returncode == 0, out.stderr[-2000:]
        rows[name] = [{k: v for k, v in r.items() if k not in ("seconds", "attempts")} for r in json.loads(out.stdout)]
    assert rows["serial"] == rows["process"]
    assert len({r["run_id"] for r in rows["serial"]}) == 2
    files = [_files(tmp_path / f"out{i}") for i in range(2)]
    assert files[0] == files[1]  # every run folder's content, byte for byte


def test_a_sweep_merges_only_its_own_shards_and_those_of_dead_sweeps(tmp_path, monkeypatch):
    """Issue 31: a sweep of the same run ids running beside this one keeps its shards (the final merge
    takes this sweep's folder only); a killed sweep's folder (its driver gone) is merged at the start."""
    import subprocess
    import sys

    from facterlab.reporting.sweep import sweep_shard_dir

    monkeypatch.setenv("FACTERLAB_CACHE", str(tmp_path / "cache"))
    (cfg,) = _configs((0,))
    (planned,) = plan_sweep([cfg], out_dir=tmp_path / "out")
    live = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    try:
        folders = {}
        for name, pid in (("live", live.pid), ("dead", int(dead.stdout))):
            monkeypatch.setattr(os, "getpid", lambda pid=pid: pid)
            folders[name] = sweep_shard_dir(tmp_path / "cache")
            folders[name].mkdir(parents=True)
            shard = ShardedPredictionCache(
                shard_path(folders[name], "llm", planned.run_id), tmp_path / "cache" / "llm_cache.sqlite"
            )
            shard.put_predictions([(f"k-{name}", _pred(name))])
            shard.close()
        monkeypatch.undo()
        monkeypatch.setenv("FACTERLAB_CACHE", str(tmp_path / "cache"))
        res = run_sweep([cfg], executor="serial", out_dir=tmp_path / "out")
        assert res.n_failed == 0
        assert len(list(folders["live"].glob("*.sqlite"))) == 1  # the running sweep's shard is untouched
        assert not folders["dead"].exists()  # merged, then removed
        merged = PredictionCache(tmp_path / "cache" / "llm_cache.sqlite")
        assert set(merged.get_predictions(["k-live", "k-dead"])) == {"k-dead"}
        merged.close()
    finally:
        live.kill()
        live.wait()


# ------------------------------------------------------------------------------------------ Slurm

SBATCH = """#!/usr/bin/env bash
# stand-in sbatch: run the job script on this machine in a session of its own, print a job id as Slurm does
set -e
script="${@: -1}"
copy="$STANDIN_DIR/job-$$.sh"
cp "$script" "$copy"
echo "$*" >> "$STANDIN_DIR/sbatch.calls"
setsid bash "$copy" > "$copy.log" 2>&1 < /dev/null &
echo "Submitted batch job $!"
"""
SCANCEL = """#!/usr/bin/env bash
# stand-in scancel: end each job's session
for id in "$@"; do kill -TERM -- "-$id" 2>/dev/null || true; echo "$id" >> "$STANDIN_DIR/scancel.calls"; done
"""


@pytest.mark.filterwarnings("ignore::DeprecationWarning")
def test_sweep_executor_slurm_runs_through_a_stand_in_sbatch(serial, tmp_path):
    """Issue 31: ``facterlab sweep --executor slurm --cluster cluster.yaml`` submits its Dask workers with
    sbatch (here a stand-in that runs the job script on this machine), runs the sweep on them, cancels
    the jobs at the end, and gives the serial run's files."""
    pytest.importorskip("dask_jobqueue", reason=NO_DASK)
    import subprocess
    import sys

    ref_out, _ = serial
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for name, text in (("sbatch", SBATCH), ("scancel", SCANCEL)):
        (bin_dir / name).write_text(text)
        (bin_dir / name).chmod(0o755)
    cluster = tmp_path / "cluster.yaml"
    cluster.write_text(
        "jobs: 1\nqueue: gpu\ncores: 1\nprocesses: 1\nmemory: 2GB\nwalltime: '00:10:00'\n"
        "interface: lo\nscheduler_options: {interface: lo}\njob_extra_directives: ['--gres=gpu:1']\n"
        "job_script_prologue: ['export OMP_NUM_THREADS=1']\nstart_timeout: 240\n"
    )
    env = {
        **os.environ,
        "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}",
        "STANDIN_DIR": str(tmp_path),
        "FACTERLAB_LOG": "INFO",
    }
    args = [sys.executable, "-m", "facterlab.cli", "sweep", "--executor", "slurm", "--cluster", str(cluster)]
    args += ["--out-dir", str(tmp_path / "out"), "--grid", "seed=0,1"]
    for key, value in FIXED.items():
        args += ["--set", f"{key}={value}"]
    out = subprocess.run(args, env=env, capture_output=True, text=True, timeout=400)
    assert out.returncode == 0, out.stderr[-3000:]
    assert "2 runs: 2 started" in out.stdout and "slurm: 1 job(s)" in out.stderr
    [job] = list(tmp_path.glob("job-*.sh"))
    script = job.read_text()
    assert "#SBATCH -p gpu" in script and "#SBATCH --gres=gpu:1" in script and "#SBATCH -t 00:10:00" in script
    assert f"export FACTERLAB_CACHE={os.environ['FACTERLAB_CACHE']}" in script  # the driver's shared folders
    assert (tmp_path / "scancel.calls").read_text().split()  # the job was cancelled at the end
    got, ref = _files(tmp_path / "out"), _files(ref_out)
    assert len(got) == 2 and all(got[r] == ref[r] for r in got)


def test_a_bad_cluster_file_is_one_line_before_any_work(tmp_path, capsys, monkeypatch):
    from facterlab.cli import main

    monkeypatch.setenv("FACTERLAB_LOG", "WARNING")  # -q exports it: restored after the test

    cases = {
        "nope.yaml": None,
        "bad.yaml": "jobs: [1\n",
        "unknown.yaml": "jobs: 1\nqueu: gpu\n",
        "zero.toml": "jobs = 0\n",
        "list.yaml": "- 1\n",
    }
    for name, text in cases.items():
        if text is not None:
            (tmp_path / name).write_text(text)
        args = ["-q", "sweep", "--executor", "slurm", "--cluster", str(tmp_path / name), "--grid", "seed=0"]
        assert main([*args, "--set", "model__llm=fake", "--out-dir", str(tmp_path / "out")]) != 0
        err = [ln for ln in capsys.readouterr().err.splitlines() if "thread" not in ln]
        assert len(err) == 1 and "cluster file" in err[0], (name, err)
    assert main(["-q", "sweep", "--executor", "slurm", "--grid", "seed=0", "--set", "model__llm=fake"]) != 0
    assert "--executor slurm needs --cluster FILE" in capsys.readouterr().err
    assert not (tmp_path / "out").exists()
