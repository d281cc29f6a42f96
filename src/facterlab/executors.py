"""The executor seam: run keyed tasks serially, in a local process pool, or on a Dask cluster.

An :class:`Executor` takes ``tasks``, a mapping ``key -> argument``, and a picklable module-level
function ``fn``; it calls ``fn(argument)`` once per key and returns ``key -> TaskOutcome`` (the value,
or the last error), in the mapping's order.  Keys are unique by construction (a mapping), so a task
asked for twice runs once.  A failed task (an exception, or a worker process that died under it) is
submitted again, at most ``retries`` more times; a task that still fails is reported, never dropped,
and never stops the others.

Executors (:func:`make_executor`):

- ``serial``: in this process, one task after another (the reference for byte-identical outputs);
- ``process`` (default): a :class:`concurrent.futures.ProcessPoolExecutor` of ``workers`` processes
  (started with ``spawn`` by default: no inherited torch threads or locks; ``start_method=None``: the platform's
  way, which the Simpson grid keeps).  Its workers die with the driver, even after ``kill -9``
  (:func:`_die_with_parent`).  A worker that dies breaks the whole pool; the pool is rebuilt
  and every task still pending is submitted again.  A task that had started in a worker counts an
  attempt (the pool cannot say which of the started tasks killed it); a task that had not started (it
  was queued behind them, or the broken pool refused it) does not (event ``requeued``), unless no task
  of that pool had started (a pool that breaks by itself: then every task counts, so retries end);
- ``dask``: Dask distributed (the ``dask`` extra): a ``LocalCluster`` of ``workers`` processes with one
  thread each, or the scheduler at ``scheduler`` (``tcp://host:8786``, a Slurm cluster from
  dask-jobqueue, ...), or an existing ``Client``.  When a worker dies, Dask's scheduler itself gives its
  task to another worker (up to ``distributed.scheduler.allowed-failures`` times); each such rerun
  counts an attempt (event ``rescheduled``); our retries then cover exceptions raised by the task.
  A ``LocalCluster`` listens on 127.0.0.1 only, its dashboard included (its link is logged).

``on_event(kind, key, info)`` is called in the driver for ``"start"`` (info: attempt), ``"done"`` (info:
the :class:`TaskOutcome`), ``"retry"`` (info: the error text), ``"requeued"`` (the process pool: a
task that had not started when its pool broke; info: the attempts so far) and ``"failed"``; callers turn it into
progress lines (``facterlab sweep``, the Simpson grid).  One class, ``_Attempts``, keeps the attempts,
the retry bound, the timings and the events for every executor.  In a Jupyter kernel the Dask
executor also shows Dask's own progress widget and the dashboard's link (:class:`DaskExecutor`).

>>> from operator import neg
>>> out = SerialExecutor().run(neg, {"a": 1, "b": 2})
>>> [(k, o.ok, o.value, o.attempts) for k, o in out.items()]
[('a', True, -1, 1), ('b', True, -2, 1)]
"""

from __future__ import annotations

import itertools
import logging
import os
import sys
import tempfile
import threading
import time
import traceback
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

__all__ = [
    "EXECUTORS",
    "TaskOutcome",
    "Executor",
    "SerialExecutor",
    "ProcessExecutor",
    "DaskExecutor",
    "make_executor",
    "slurm_executor",
    "read_cluster_file",
    "MAX_RETRIES",
    "MAX_WORKERS",
]

log = logging.getLogger(__name__)

EXECUTORS = ("process", "serial", "dask", "slurm")
#: bounds of ``retries`` and ``workers`` (a typo must not start 10,000 processes or retry forever)
MAX_RETRIES = 10
MAX_WORKERS = 1024

DASK_MISSING = (
    "--executor dask needs Dask distributed, which is not installed: pip install -e '.[dask]' "
    "(dask[distributed] and dask-jobqueue; docs/SCALING.md)"
)


@dataclass
class TaskOutcome:
    """What became of one task: ``ok`` with its ``value``, or the last ``error`` (one line) with its
    ``trace``; ``attempts`` submissions; ``seconds`` from its first submission to its end."""

    key: str
    ok: bool
    value: Any = None
    error: str = ""
    trace: str = ""
    attempts: int = 1
    seconds: float = 0.0


def _error_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0] if text else ''}".rstrip(": ")


def _check(retries: int, workers: int | None = None) -> None:
    if isinstance(retries, bool) or not isinstance(retries, int) or not 0 <= retries <= MAX_RETRIES:
        raise ValueError(f"retries must be an integer in [0, {MAX_RETRIES}], got {retries!r}")
    if workers is not None and (
        isinstance(workers, bool) or not isinstance(workers, int) or not 1 <= workers <= MAX_WORKERS
    ):
        raise ValueError(f"workers must be an integer in [1, {MAX_WORKERS}], got {workers!r}")


def _noop(kind: str, key: str, info: Any) -> None:
    return None


def permanent(exc: BaseException | None) -> bool:
    """Whether ``exc`` says that another attempt would fail the same way: its class sets ``permanent =
    True`` (a served model's refusal, :class:`facterlab.models.served.ServerError`), so that a
    deterministic refusal costs one attempt, not ``retries + 1``."""
    return exc is not None and getattr(type(exc), "permanent", False) is True


class Executor:
    """Run keyed tasks, each on a worker, with retries and progress events; subclasses implement
    :meth:`run` (the contract: module docstring)."""

    name = "executor"
    workers = 1
    #: its workers are processes on this machine (they share its cores)
    local = False

    def run(
        self,
        fn: Callable[[Any], Any],
        tasks: Mapping[str, Any],
        retries: int = 2,
        on_event: Callable[[str, str, Any], None] | None = None,
    ) -> dict:
        """Call ``fn(argument)`` once per task, retrying a failed task at most ``retries`` more times.

        Parameters
        ----------
        fn : callable
            A picklable module-level function of one argument.
        tasks : mapping of str to object
            Task key -> argument.
        retries : int, default 2
            Extra attempts of a failed task (0..``MAX_RETRIES``).
        on_event : callable or None, default None
            ``on_event(kind, key, info)``, called in the driver (module docstring).

        Returns
        -------
        dict of str to TaskOutcome
            Every task's outcome, in the order of ``tasks``; a failed task is reported, never dropped.
        """
        raise NotImplementedError

    def describe(self) -> str:
        """One line for logs: the executor's name and its number of workers."""
        return f"{self.name} ({self.workers} worker{'s' * (self.workers != 1)})"

    def close(self) -> None:
        """Release what the executor started (a pool, a cluster)."""

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        self.close()


class _Attempts:
    """The retry bookkeeping of one :meth:`Executor.run`, shared by every executor: how many times each
    task was submitted, when it was first submitted, its outcome, and the events.  An executor calls
    :meth:`start` before each submission, then :meth:`succeeded` or :meth:`failed` (which says whether
    to submit the task again); :meth:`outcomes` gives the result in the tasks' order."""

    def __init__(self, tasks: Mapping[str, Any], retries: int, on_event: Callable[[str, str, Any], None] | None):
        _check(retries)
        self.tasks, self.retries, self.on_event = tasks, retries, on_event or _noop
        self.attempts = dict.fromkeys(tasks, 0)
        self.first: dict = {}
        self.results: dict = {}

    def start(self, key: str) -> Any:
        """Count a submission of ``key`` (event ``start``); returns the task's argument."""
        self.first.setdefault(key, time.perf_counter())
        self.attempts[key] += 1
        self.on_event("start", key, self.attempts[key])
        return self.tasks[key]

    def rescheduled(self, key: str, n: int) -> None:
        """``n`` more submissions of ``key`` that the executor made by itself (Dask's scheduler reruns a
        task whose worker died): counted as attempts (event ``rescheduled``, info: ``n``)."""
        if n > 0:
            self.attempts[key] += n
            self.on_event("rescheduled", key, n)

    def withdrawn(self, key: str) -> None:
        """The last submission of ``key`` never started (its pool broke first): not an attempt (event
        ``requeued``, info: the attempts counted so far)."""
        self.attempts[key] -= 1
        self.on_event("requeued", key, self.attempts[key])

    def succeeded(self, key: str, value: Any) -> None:
        self._end(TaskOutcome(key, True, value, attempts=self.attempts[key]))

    def failed(self, key: str, error: str, trace: str = "", exc: BaseException | None = None) -> bool:
        """A failed attempt of ``key``: True (event ``retry``) when it may be submitted again, else its
        outcome is the failure (event ``failed``) and False.  An exception ``exc`` that is
        :func:`permanent` (the same task would fail the same way) is never retried."""
        if self.attempts[key] <= self.retries and not permanent(exc):
            self.on_event("retry", key, error)
            return True
        self._end(TaskOutcome(key, False, None, error, trace, self.attempts[key]))
        return False

    def _end(self, outcome: TaskOutcome) -> None:
        outcome.seconds = time.perf_counter() - self.first[outcome.key]
        self.results[outcome.key] = outcome
        self.on_event("done" if outcome.ok else "failed", outcome.key, outcome)

    def outcomes(self) -> dict:
        return {k: self.results[k] for k in self.tasks}


class SerialExecutor(Executor):
    """Each task in this process, in order; an exception is retried at once."""

    name = "serial"

    def run(self, fn, tasks, retries=2, on_event=None):
        """Each task in this process, in the order of ``tasks``: :meth:`Executor.run`."""
        book = _Attempts(tasks, retries, on_event)
        for key in tasks:
            while True:
                arg = book.start(key)
                try:
                    value = fn(arg)
                except Exception as exc:  # noqa: BLE001 - reported as the task's outcome
                    if book.failed(key, _error_line(exc), traceback.format_exc(), exc):
                        continue
                else:
                    book.succeeded(key, value)
                break
        return book.outcomes()


_MARKS = itertools.count()  # marker file names, unique in this process


def _marked_call(fn: Callable[[Any], Any], marker: str, arg: Any) -> Any:
    """``fn(arg)`` in a pool worker, after creating the file ``marker``: the driver then knows that the
    task had started when the pool broke."""
    os.close(os.open(marker, os.O_CREAT | os.O_WRONLY, 0o600))
    return fn(arg)


#: how often a pool worker looks whether its driver is still alive (:func:`_die_with_parent`)
WATCH_PARENT_S = 1.0
_PR_SET_PDEATHSIG = 1  # <linux/prctl.h>


def _die_with_parent(parent: int, kill_on_exit: bool) -> None:
    """A pool worker's initializer: the worker ends when its driver ``parent`` dies, even by ``kill -9``
    (a command, or a notebook kernel that died or was restarted), instead of computing on and writing run
    folders for nobody.

    - On Linux, the kernel sends the worker SIGKILL when its parent dies (``prctl(PR_SET_PDEATHSIG)``
      through ctypes), when ``kill_on_exit``: the pool was started from the driver's main thread (the
      signal follows the *thread* that started the worker, so a pool started from another thread would
      lose its workers when that thread ends).
    - Everywhere, a daemon thread looks every :data:`WATCH_PARENT_S` seconds whether the worker's parent
      is still ``parent`` (a dead parent's children are given to another process), and ends the worker
      when it is not; this also covers a driver that died before the signal was set.

    Never raises (a failed initializer would break the pool)."""
    if kill_on_exit and sys.platform.startswith("linux"):
        try:
            import ctypes
            import signal

            libc = ctypes.CDLL(None, use_errno=True)
            libc.prctl(_PR_SET_PDEATHSIG, int(signal.SIGKILL), 0, 0, 0)
        except (OSError, AttributeError):  # no libc prctl: the watchdog alone
            pass
    try:  # Ctrl-C is the driver's: it ends the pool (ProcessExecutor.run); no traceback from each worker
        import signal

        signal.signal(signal.SIGINT, _ignore_signal)
        # the driver started this worker with SIGINT blocked (_sigint_blocked): unblock it, now handled
        signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})
    except (ValueError, OSError, AttributeError):
        pass
    if os.getppid() != parent:  # the driver died before this worker was ready
        os._exit(1)
    threading.Thread(target=_watch_parent, args=(parent,), name="facterlab-parent-watch", daemon=True).start()


class _sigint_blocked:
    """SIGINT blocked in this thread while a pool starts workers: a worker is born with it blocked, so a
    Ctrl-C during its start-up (before :func:`_die_with_parent` handles SIGINT) prints no traceback; the
    driver gets a Ctrl-C of that moment when the block ends (a blocked signal waits, it is not lost)."""

    def __enter__(self):
        import signal

        self.mask = None
        if hasattr(signal, "pthread_sigmask"):
            self.mask = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})
        return self

    def __exit__(self, *exc) -> None:
        import signal

        if self.mask is not None:
            signal.pthread_sigmask(signal.SIG_SETMASK, self.mask)


def _ignore_signal(signum: int, frame: Any) -> None:  # a handler, not SIG_IGN: what a worker execs gets the default
    return None


def _watch_parent(parent: int) -> None:
    while os.getppid() == parent:
        time.sleep(WATCH_PARENT_S)
    os._exit(1)


#: what a task's outcome says when its worker process died under it (the pool cannot say which task killed it)
WORKER_DIED = "a worker process died (killed, or out of memory) while this task was running in the pool"
#: ... when no task of the pool had started (the pool broke by itself: this task was still waiting)
WORKER_DIED_WAITING = "a worker process died (killed, or out of memory) before any task of its pool started"


class ProcessExecutor(Executor):
    """Run keyed tasks on a local pool of ``workers`` processes, started with ``spawn`` by default;
    ``start_method`` None: the platform's default (``fork`` on Linux before Python 3.14: fast, and a script needs no
    ``if __name__ == "__main__"`` guard, but it copies the parent's threads' state).

    ``keep_pool``: the pool lives from the first :meth:`run` to :meth:`close` (else one pool per call),
    so that successive calls (the waves of :func:`facterlab.reporting.batch.run_many`) start their
    workers, and import their models, once; a pool that broke (a worker died) is replaced."""

    name = "process"
    local = True

    def __init__(self, workers: int = 2, start_method: str | None = "spawn", keep_pool: bool = False):
        import multiprocessing

        _check(0, workers)
        methods = multiprocessing.get_all_start_methods()
        if start_method is not None and start_method not in methods:
            raise ValueError(f"unknown start method {start_method!r}; this platform has {', '.join(methods)}")
        self.workers = int(workers)
        self.start_method = start_method
        self.keep_pool = bool(keep_pool)
        self._live: Any = None  # the pool between calls (keep_pool)

    def _pool(self):
        import multiprocessing
        from concurrent.futures import ProcessPoolExecutor

        if self._live is None:
            # workers die with this process (_die_with_parent); they are started by the thread that submits
            self._live = ProcessPoolExecutor(
                max_workers=self.workers,
                mp_context=multiprocessing.get_context(self.start_method),
                initializer=_die_with_parent,
                initargs=(os.getpid(), threading.current_thread() is threading.main_thread()),
            )
        return self._live

    def _drop(self, kill: bool = False) -> None:
        """Shut the pool down: after its running tasks end, or at once (``kill``: Ctrl-C in the driver;
        its workers ignore SIGINT, so they are terminated here)."""
        if self._live is not None:
            if kill:
                for proc in list((getattr(self._live, "_processes", None) or {}).values()):
                    proc.terminate()
            self._live.shutdown(wait=True, cancel_futures=True)
            self._live = None

    def close(self) -> None:
        """Shut the pool down (its workers exit)."""
        self._drop()

    def run(self, fn, tasks, retries=2, on_event=None):
        """The tasks in a pool of worker processes, rebuilt when a worker dies: :meth:`Executor.run`."""
        from concurrent.futures import FIRST_COMPLETED, wait
        from concurrent.futures.process import BrokenProcessPool

        book = _Attempts(tasks, retries, on_event)
        todo = list(tasks)
        with tempfile.TemporaryDirectory(prefix="facterlab-pool-") as marks:  # one file per started task
            while todo:  # one pool per round: a dead worker breaks the pool, and its pending tasks come back here
                pool = self._pool()
                pending: dict = {}
                this_round, todo = todo, []
                lost: list = []  # (key, marker, error) of the tasks the broken pool lost
                interrupted = False
                try:
                    for key in this_round:
                        self._submit(pool, fn, key, book, pending, todo, marks)
                    while pending:
                        done, _ = wait(pending, return_when=FIRST_COMPLETED)
                        for fut in done:
                            key, marker = pending.pop(fut)
                            exc = fut.exception()
                            if exc is None:
                                book.succeeded(key, fut.result())
                            elif isinstance(exc, BrokenProcessPool):  # every pending task is lost with the pool
                                lost.append((key, marker, exc))
                            elif book.failed(key, _error_line(exc), _trace(exc), exc):
                                self._submit(pool, fn, key, book, pending, todo, marks)
                except KeyboardInterrupt:
                    interrupted = True
                    raise
                finally:
                    if lost or pending or not self.keep_pool:  # a broken or interrupted pool is never kept
                        self._drop(kill=interrupted)
                started = {key for key, marker, _ in lost if os.path.exists(marker)}
                for key, _, exc in lost:
                    if started and key not in started:  # queued behind the task that died: no attempt
                        book.withdrawn(key)
                        todo.append(key)
                    elif book.failed(key, WORKER_DIED if key in started else WORKER_DIED_WAITING, _trace(exc)):
                        todo.append(key)
        return book.outcomes()

    @staticmethod
    def _submit(pool, fn, key: str, book: _Attempts, pending: dict, todo: list, marks: str) -> None:
        """Submit ``key`` to ``pool``; a pool that broke meanwhile (a worker died) refuses it: then the
        next pool takes it, and this refused submission is no attempt.  The worker creates a marker file
        in ``marks`` when it starts the task (:func:`_marked_call`)."""
        from concurrent.futures.process import BrokenProcessPool

        marker = os.path.join(marks, str(next(_MARKS)))
        try:
            with _sigint_blocked():  # a submission may start a worker
                fut = pool.submit(_marked_call, fn, marker, book.tasks[key])
        except BrokenProcessPool:
            todo.append(key)
            return
        book.start(key)
        pending[fut] = (key, marker)


def _importable(name: str) -> bool:
    import importlib.util

    return importlib.util.find_spec(name) is not None


def _trace(exc: BaseException) -> str:
    return "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))


class DaskExecutor(Executor):
    """Run keyed tasks on a Dask cluster (local, at a scheduler's address, or Slurm's).  ``client``: an
    existing ``distributed.Client`` (not closed here); else ``scheduler``: an address to connect to; else a
    ``LocalCluster`` of ``workers`` processes, one thread each, started here and closed by :meth:`close`.

    ``progress`` (default: whether this process is a Jupyter kernel): show Dask's progress widget
    (``distributed``'s ``ProgressWidget``, an ipywidgets bar) for the tasks of each :meth:`run`, and log
    the link of the scheduler's dashboard when it has one (a ``LocalCluster`` started here gets a
    dashboard in a notebook when bokeh is installed).  The widget is fed from the client's event loop,
    a thread of its own, so it moves while the cell waits for the results."""

    name = "dask"

    def __init__(
        self, workers: int = 2, scheduler: str | None = None, client: Any = None, progress: bool | None = None
    ):
        _check(0, workers)
        try:
            import distributed
        except ImportError as exc:
            raise ValueError(DASK_MISSING) from exc
        from facterlab.progress import in_kernel

        self.widgets = in_kernel() if progress is None else bool(progress)
        self.bars: list = []  # the progress widgets shown (the last one follows every task still pending)
        self._own: list = []
        if client is not None:
            self.client = client
        elif scheduler:
            try:
                self.client = distributed.Client(scheduler, timeout="20s")
            except OSError as exc:
                raise ValueError(f"cannot reach the Dask scheduler at {scheduler!r}: {_error_line(exc)}") from None
            self._own.append(self.client)
        else:
            cluster = distributed.LocalCluster(
                n_workers=int(workers),
                threads_per_worker=1,
                processes=True,
                # this machine only (the scheduler and its HTTP server, which starts even without a
                # dashboard), on a free port (":8787" clashes)
                host="127.0.0.1",
                dashboard_address="127.0.0.1:0",
                scheduler_kwargs={"dashboard": self.widgets and _importable("bokeh")},
                silence_logs=logging.ERROR,
            )
            self.client = distributed.Client(cluster)
            self._own += [self.client, cluster]
            self.local = True
        info = self.client.scheduler_info()
        self.workers = max(1, len(info.get("workers", {}))) if client is not None or scheduler else int(workers)
        self.address = self.client.scheduler.address
        #: the link of the scheduler's dashboard; None when it shows none (its HTTP server runs without
        #: bokeh too, with nothing at the link)
        self.dashboard = None
        if "dashboard" in info.get("services", {}) and self._scheduler_has_bokeh():
            self.dashboard = self.client.dashboard_link
        if self.dashboard:
            log.info("Dask dashboard: %s", self.dashboard)

    def _rescheduled(self, dask_key: str) -> int:
        """How many times Dask's scheduler gave task ``dask_key`` to another worker because its worker
        died (the task's ``suspicious`` count); 0 when the scheduler cannot say."""
        probe = lambda dask_scheduler, k=dask_key: getattr(dask_scheduler.tasks.get(k), "suspicious", 0)  # noqa: E731
        try:
            return int(self.client.run_on_scheduler(probe) or 0)
        except Exception:  # noqa: BLE001 - a scheduler that runs no functions of ours
            return 0

    def _scheduler_has_bokeh(self) -> bool:
        # a lambda travels by value (cloudpickle): the scheduler needs no facterlab
        probe = lambda: __import__("importlib.util").util.find_spec("bokeh") is not None  # noqa: E731
        try:
            return bool(self.client.run_on_scheduler(probe))
        except Exception:  # noqa: BLE001 - a scheduler that runs no functions of ours: say no dashboard
            return False

    def describe(self) -> str:
        """One line for logs: the scheduler's address and the number of workers."""
        return f"dask at {self.address} ({self.workers} worker{'s' * (self.workers != 1)})"

    def run(self, fn, tasks, retries=2, on_event=None):
        """The tasks as Dask futures on the cluster, retried by this executor on exceptions: :meth:`Executor.run`."""
        from distributed import as_completed

        book = _Attempts(tasks, retries, on_event)

        def submit(key):
            arg = book.start(key)
            # a fresh Dask key per attempt: a failed future's key is remembered by the scheduler
            return self.client.submit(fn, arg, key=f"facterlab-{key}-a{book.attempts[key]}", pure=False)

        futures = {submit(k): k for k in tasks}
        self._show(list(futures))
        queue = as_completed(list(futures))
        for fut in queue:
            key = futures.pop(fut)
            book.rescheduled(key, self._rescheduled(fut.key))
            if fut.status == "finished":
                book.succeeded(key, fut.result())
            else:
                try:
                    exc = fut.exception()  # a cancelled future (its client lost the scheduler) raises instead
                except BaseException as raised:  # noqa: BLE001 - reported as the task's outcome
                    exc = raised
                if book.failed(key, _error_line(exc), _trace(exc), exc):
                    new = submit(key)
                    futures[new] = key
                    queue.add(new)
                    self._show(list(futures))  # the shown bar stopped at the error: a new one for what is left
            fut.release()
        return book.outcomes()

    def _show(self, futures: list) -> None:
        """Dask's progress widget for ``futures`` in this notebook (when :attr:`widgets`)."""
        if not self.widgets:
            return
        try:
            from distributed.diagnostics.progressbar import ProgressWidget
            from IPython.display import display

            bar = ProgressWidget(futures, scheduler=self.client.scheduler.address, complete=True)
            display(bar.widget)
        except Exception as exc:  # noqa: BLE001 - no ipywidgets, no display: the log lines still come
            log.warning("Dask's progress widget is not shown (%s); the log lines still are", _error_line(exc))
            self.widgets = False
            return
        # ProgressWidget's own display listens on the kernel's loop, which waits for the cell: use the client's
        self.client.loop.add_callback(bar.listen)
        self.bars.append(bar)

    def close(self) -> None:
        """Close what this executor opened: its client and, for a LocalCluster, the cluster; a client it was given stays open."""
        for obj in self._own:
            try:
                obj.close()
            except Exception:  # noqa: BLE001 - closing a cluster that is already gone
                pass
        self._own = []


#: the keys of a ``--cluster`` file besides dask-jobqueue's ``SLURMCluster`` arguments
CLUSTER_OWN_KEYS = ("jobs", "start_timeout")
#: ``SLURMCluster``'s arguments a ``--cluster`` file may set (dask-jobqueue 0.9)
SLURM_KEYS = (
    "queue", "account", "cores", "processes", "memory", "walltime", "job_cpu", "job_mem", "interface",
    "scheduler_options", "worker_extra_args", "job_extra_directives", "job_directives_skip",
    "job_script_prologue", "local_directory", "log_directory", "shebang", "python", "death_timeout", "name",
    "nanny", "protocol", "security", "job_name",
)  # fmt: skip


def read_cluster_file(path: str) -> dict:
    """The settings of a ``--cluster`` file (``.yaml``/``.yml`` or ``.toml``): ``SLURMCluster``'s
    arguments (:data:`SLURM_KEYS`) plus ``jobs`` (Slurm jobs to submit, default 1) and
    ``start_timeout`` (seconds to wait for the first worker, default 3600); one line for a file that
    is missing, too large, does not parse, or has an unknown key."""
    from pathlib import Path

    from facterlab import safeio

    p = Path(path)
    if p.exists() and not p.is_file():  # a folder, /dev/zero, a pipe
        raise ValueError(f"cluster file {str(p)!r} is not a regular file (a folder or a device)")
    if not p.is_file():
        raise ValueError(f"cluster file {str(p)!r} does not exist")
    if p.suffix == ".toml":
        data = safeio.read_toml(p, what="cluster file")
    elif p.suffix in (".yaml", ".yml"):
        import yaml

        if p.stat().st_size > safeio.max_bytes():
            raise ValueError(f"cluster file {str(p)!r} is larger than {safeio.max_bytes():,} bytes")
        try:
            data = yaml.safe_load(p.read_text(encoding="utf-8"))
        except (yaml.YAMLError, RecursionError, UnicodeDecodeError) as exc:
            raise ValueError(f"cluster file {str(p)!r} does not parse: {str(exc).splitlines()[0]}") from None
    else:
        raise ValueError(f"cluster file {str(p)!r}: use a .yaml or .toml file")
    if not isinstance(data, dict):
        raise ValueError(f"cluster file {str(p)!r}: the top level must be a mapping of SLURMCluster's arguments")
    unknown = sorted(set(map(str, data)) - set(SLURM_KEYS) - set(CLUSTER_OWN_KEYS))
    if unknown:
        raise ValueError(
            f"cluster file {str(p)!r}: unknown key(s) {unknown}; known: {', '.join((*CLUSTER_OWN_KEYS, *SLURM_KEYS))}"
        )
    jobs, wait = data.get("jobs", 1), data.get("start_timeout", 3600)
    if isinstance(jobs, bool) or not isinstance(jobs, int) or not 1 <= jobs <= MAX_WORKERS:
        raise ValueError(f"cluster file {str(p)!r}: jobs must be an integer in [1, {MAX_WORKERS}], got {jobs!r}")
    if isinstance(wait, bool) or not isinstance(wait, int | float) or not 1 <= wait <= 7 * 86400:
        raise ValueError(f"cluster file {str(p)!r}: start_timeout must be seconds in [1, 604800], got {wait!r}")
    return data


def slurm_executor(cluster_file: str, progress: bool | None = None) -> DaskExecutor:
    """A :class:`DaskExecutor` on Dask workers that Slurm runs (dask-jobqueue's ``SLURMCluster``, with
    the settings of ``cluster_file``: :func:`read_cluster_file`); ``jobs`` jobs are submitted with
    ``sbatch``, the driver's ``FACTERLAB_DATA``/``FACTERLAB_RESULTS``/``FACTERLAB_CACHE`` are exported in
    each job's prologue, and the first worker is awaited (a log line every 30 s) at most
    ``start_timeout`` seconds.  The cluster's jobs are cancelled (``scancel``) by :meth:`close`."""
    import os
    import shlex
    import shutil

    spec = dict(read_cluster_file(cluster_file))
    jobs, wait = int(spec.pop("jobs", 1)), float(spec.pop("start_timeout", 3600))
    try:
        import distributed
        from dask_jobqueue import SLURMCluster
    except ImportError as exc:
        raise ValueError(DASK_MISSING) from exc
    if shutil.which("sbatch") is None:
        raise ValueError("--executor slurm needs Slurm's sbatch on PATH (run the sweep on a login node)")
    prologue = list(spec.pop("job_script_prologue", None) or [])
    for var in ("FACTERLAB_DATA", "FACTERLAB_RESULTS", "FACTERLAB_CACHE"):
        if os.environ.get(var):
            prologue.append(f"export {var}={shlex.quote(os.path.abspath(os.environ[var]))}")
    spec.setdefault("cores", 1)
    spec.setdefault("memory", "8GB")
    try:
        cluster = SLURMCluster(job_script_prologue=prologue, **spec)
    except (TypeError, ValueError, KeyError) as exc:
        raise ValueError(f"cluster file {cluster_file!r}: SLURMCluster refused it: {_error_line(exc)}") from None
    client = None
    try:
        cluster.scale(jobs=jobs)
        client = distributed.Client(cluster)
        t0 = time.monotonic()
        while not client.scheduler_info().get("workers"):
            if time.monotonic() - t0 > wait:
                raise ValueError(
                    f"no Slurm job of the sweep started a worker within {wait:g} s (start_timeout in "
                    f"{cluster_file}); see squeue and the jobs' logs"
                )
            try:
                client.wait_for_workers(1, timeout=min(30.0, wait))
            except TimeoutError:
                log.info(
                    "slurm: waiting for the first of %d job(s) to start a worker (%.0f s so far; squeue -u $USER)",
                    jobs, time.monotonic() - t0,
                )  # fmt: skip
    except BaseException:
        for obj in (client, cluster):
            if obj is not None:
                obj.close()
        raise
    ex = DaskExecutor(client=client, progress=progress)
    ex._own += [client, cluster]
    ex.name = "slurm"
    ex.workers = jobs * int(spec.get("processes") or 1)
    log.info("slurm: %d job(s) of %s; scheduler %s", jobs, cluster_file, ex.address)
    return ex


def make_executor(
    kind: str = "process",
    workers: int = 2,
    scheduler: str | None = None,
    start_method: str | None = "spawn",
    cluster: str | None = None,
) -> Executor:
    """The executor named ``kind`` (:data:`EXECUTORS`); ``scheduler`` only with ``dask``, ``cluster``
    (a cluster file, :func:`slurm_executor`) only and always with ``slurm``; ``start_method`` only
    matters to ``process`` (:class:`ProcessExecutor`).

    >>> make_executor("serial").describe()
    'serial (1 worker)'
    >>> make_executor("threads")
    Traceback (most recent call last):
    ...
    ValueError: unknown executor 'threads'; choose one of 'process', 'serial', 'dask', 'slurm'
    """
    if kind not in EXECUTORS:
        raise ValueError(f"unknown executor {kind!r}; choose one of {', '.join(map(repr, EXECUTORS))}")
    if scheduler and kind != "dask":
        raise ValueError(f"--scheduler needs --executor dask (got --executor {kind})")
    if (cluster is not None) != (kind == "slurm"):
        raise ValueError("--executor slurm needs --cluster FILE, and --cluster needs --executor slurm")
    if kind == "slurm":
        assert cluster is not None
        return slurm_executor(cluster)
    _check(0, workers)
    if kind == "serial":
        return SerialExecutor()
    if kind == "process":
        return ProcessExecutor(workers, start_method)
    return DaskExecutor(workers, scheduler)
