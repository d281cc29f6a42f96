"""CPU thread defaults that hold up on a busy machine: thread count and OpenMP wait policy.

Why: torch runs its CPU kernels on an OpenMP pool (libgomp).  By default its threads *spin* at
every barrier, which is cheap on an idle machine and ruinous on a shared one: when another process
holds one of the cores, the spinning thread burns its time slice waiting for a partner that is not
running.  Measured with SmolLM2-135M on 2 cores next to two busy processes (``benchmarks/
bench_threads.py``), torch's default was several times slower than one thread or a passive pool.

What is chosen (:func:`choose`), in order of precedence:

1. an explicit request: ``--threads N`` on the command line, or ``FACTERLAB_THREADS=N`` (``auto`` or
   an empty value means "choose for me"; ``off`` means "leave everything to torch's defaults");
2. ``OMP_NUM_THREADS`` already set in the environment (by the user or by a parent process that
   chose for us, e.g. ``facterlab reproduce`` for its notebook kernels) is kept;
3. otherwise ``auto``: one thread per physical core this process may use
   (``os.sched_getaffinity``, SMT siblings counted once, capped by a cgroup CPU quota).

The wait policy is ``PASSIVE`` (threads sleep at barriers instead of spinning) unless
``OMP_WAIT_POLICY`` is already set.  The load of the machine is logged but does not cut the thread
count: a passive pool wastes no CPU while it waits, and on a loaded machine each extra thread also
gets its own share of the CPU from the scheduler (the README's "CPU threads and speed" section has
the measurements of ``benchmarks/bench_threads.py``).  Both settings must be in the environment before torch loads
its OpenMP runtime, which reads them once: :func:`configure` therefore sets ``OMP_NUM_THREADS``,
``MKL_NUM_THREADS`` and ``OMP_WAIT_POLICY`` in ``os.environ`` and is called at the top of the CLI,
by the notebook runner for each kernel it starts, and (wait policy only, see
:func:`set_default_wait_policy`) when ``facterlab`` is imported.  When torch is already imported,
an explicit thread request still applies through ``torch.set_num_threads`` and the wait policy
cannot change any more (this is logged).

Every decision is logged on the ``facterlab.threads`` logger.

>>> choose(None, environ={}, cpus=2).env()
{'OMP_NUM_THREADS': '2', 'MKL_NUM_THREADS': '2', 'OMP_WAIT_POLICY': 'PASSIVE'}
>>> choose("3", environ={}, cpus=2).source
'--threads'
>>> choose(None, environ={"OMP_NUM_THREADS": "1", "OMP_WAIT_POLICY": "active"}, cpus=4).wait_policy
'ACTIVE'
"""

from __future__ import annotations

import logging
import math
import os
import sys
from collections.abc import Mapping, MutableMapping
from dataclasses import dataclass
from pathlib import Path

__all__ = [
    "ThreadPlan",
    "choose",
    "configure",
    "configure_cli",
    "parse_threads",
    "usable_cpus",
    "child_env",
    "set_default_wait_policy",
    "ENV_THREADS",
    "ENV_CHOSEN",
]

log = logging.getLogger("facterlab.threads")

ENV_THREADS = "FACTERLAB_THREADS"
#: set by :func:`configure` to the variables it wrote itself, so that a later call (or a child
#: process) can tell its own earlier choice from a user's explicit setting.
ENV_CHOSEN = "FACTERLAB_THREADS_CHOSEN"
THREAD_VARS = ("OMP_NUM_THREADS", "MKL_NUM_THREADS")
WAIT_VAR = "OMP_WAIT_POLICY"
WAIT_POLICIES = ("PASSIVE", "ACTIVE")
MANAGED_VARS = THREAD_VARS + (WAIT_VAR, ENV_THREADS, ENV_CHOSEN)


@dataclass(frozen=True)
class ThreadPlan:
    """A decision: ``threads`` (``None``: leave torch's default), OpenMP ``wait_policy``, why
    (``source``), the ``usable`` cores of an automatic choice and the 1-minute ``load`` average
    (logged only)."""

    threads: int | None
    wait_policy: str | None
    source: str
    usable: int | None = None
    load: float | None = None

    def env(self) -> dict:
        """Environment variables that carry this plan to torch (and to child processes)."""
        out = {}
        if self.threads is not None:
            out.update({v: str(self.threads) for v in THREAD_VARS})
        if self.wait_policy is not None:
            out[WAIT_VAR] = self.wait_policy
        return out

    def describe(self) -> str:
        """One line for the log, e.g. ``threads=2 OMP_WAIT_POLICY=PASSIVE (auto: 2 usable core(s);
        load average 1.3)``."""
        t = "torch default" if self.threads is None else str(self.threads)
        w = self.wait_policy or "runtime default"
        why = self.source
        if self.source == "auto" and self.usable is not None:
            load = "unknown" if self.load is None else f"{self.load:.1f}"
            why = f"auto: {self.usable} usable core(s); load average {load}"
        return f"threads={t} {WAIT_VAR}={w} ({why})"


def parse_threads(value) -> int | None | str:
    """``None``/``""``/``"auto"`` -> ``None`` (choose); ``"off"`` -> ``"off"``; a positive int -> it.

    >>> parse_threads("auto"), parse_threads(" 4 "), parse_threads("off"), parse_threads(2)
    (None, 4, 'off', 2)
    >>> parse_threads("0")
    Traceback (most recent call last):
    ...
    ValueError: threads must be a positive integer, 'auto' or 'off'; got '0'
    """
    if value is None:
        return None
    if isinstance(value, bool):
        raise ValueError(f"threads must be a positive integer, 'auto' or 'off'; got {value!r}")
    text = str(value).strip().lower()
    if text in ("", "auto"):
        return None
    if text == "off":
        return "off"
    try:
        n = int(text)
    except ValueError:
        n = 0
    if n < 1 or str(n) != text.lstrip("+"):
        raise ValueError(f"threads must be a positive integer, 'auto' or 'off'; got {value!r}")
    return n


def _affinity() -> list:
    try:
        return sorted(os.sched_getaffinity(0))
    except (AttributeError, OSError):  # not Linux
        return list(range(os.cpu_count() or 1))


def _cgroup_quota_cpus() -> float | None:
    """CPUs allowed by a cgroup quota (v2 ``cpu.max`` or v1 ``cfs_quota_us``), ``None`` if none."""
    try:
        text = Path("/sys/fs/cgroup/cpu.max").read_text().split()
        if text and text[0] != "max":
            return int(text[0]) / int(text[1])
    except (OSError, ValueError, IndexError):
        pass
    try:
        quota = int(Path("/sys/fs/cgroup/cpu/cpu.cfs_quota_us").read_text())
        period = int(Path("/sys/fs/cgroup/cpu/cpu.cfs_period_us").read_text())
        if quota > 0 and period > 0:
            return quota / period
    except (OSError, ValueError):
        pass
    return None


def usable_cpus(cpus: list | None = None) -> int:
    """Physical cores among the CPUs this process may run on (SMT siblings count once), capped by a
    cgroup CPU quota; at least 1."""
    cpus = _affinity() if cpus is None else list(cpus)
    cores = set()
    for c in cpus:
        base = Path(f"/sys/devices/system/cpu/cpu{c}/topology")
        try:
            cores.add(
                (base.joinpath("physical_package_id").read_text().strip(), base.joinpath("core_id").read_text().strip())
            )
        except OSError:
            cores.add(("cpu", str(c)))
    n = max(1, len(cores))
    quota = _cgroup_quota_cpus()
    if quota is not None:
        n = min(n, max(1, math.ceil(quota)))
    return n


def _loadavg() -> float | None:
    try:
        return float(os.getloadavg()[0])
    except (AttributeError, OSError):
        return None


def _ours(environ: Mapping) -> set:
    return set(filter(None, environ.get(ENV_CHOSEN, "").split(",")))


def choose(requested=None, environ: Mapping | None = None, cpus: int | None = None) -> ThreadPlan:
    """Decide the thread count and wait policy (the module docstring has the rules).

    ``requested`` is the ``--threads`` value (``None``: not given); ``cpus`` replaces the usable core
    count (for tests).  ``environ`` defaults to ``os.environ``; variables that an earlier
    :func:`configure` wrote itself (listed in ``FACTERLAB_THREADS_CHOSEN``) count as unset, so that
    a fresh automatic choice replaces them.
    """
    environ = os.environ if environ is None else environ
    ours = _ours(environ)

    def user(var):
        v = environ.get(var)
        return None if (v is None or var in ours or not str(v).strip()) else str(v).strip()

    wait = user(WAIT_VAR)
    if wait is not None and wait.upper() not in WAIT_POLICIES:
        raise ValueError(f"{WAIT_VAR}={wait!r} is not one of {', '.join(WAIT_POLICIES)}")
    wait = wait.upper() if wait else "PASSIVE"
    given = None
    for source, raw in (("--threads", requested), (ENV_THREADS, environ.get(ENV_THREADS))):
        if raw is None or (source == ENV_THREADS and not str(raw).strip()):
            continue
        try:
            given = (source, parse_threads(raw))
        except ValueError as exc:
            raise ValueError(f"{source}: {exc}") from None
        break  # the command line beats the environment
    if given is not None and given[1] == "off":
        return ThreadPlan(None, None, f"{given[0]}=off: torch and OpenMP defaults")
    if given is not None and given[1] is not None:
        return ThreadPlan(int(given[1]), wait, given[0])
    omp = user("OMP_NUM_THREADS") if given is None else None  # an explicit "auto" chooses afresh
    if omp is not None:
        try:
            n = parse_threads(omp)
        except ValueError:
            n = None
        if isinstance(n, int):
            return ThreadPlan(n, wait, "OMP_NUM_THREADS from the environment")
    n_cpu = usable_cpus() if cpus is None else max(1, int(cpus))
    return ThreadPlan(n_cpu, wait, "auto", n_cpu, _loadavg())


def _torch_loaded() -> bool:
    return "torch" in sys.modules


def configure(requested=None, environ: MutableMapping | None = None, where: str = "") -> ThreadPlan:
    """Choose (:func:`choose`) and apply: write the plan's variables into ``environ`` (default
    ``os.environ``) so that torch, loaded later in this process or in a child, picks them up; log it.

    If torch is already loaded, the environment no longer reaches its OpenMP runtime: an explicit
    request (``--threads``/``FACTERLAB_THREADS``) is then applied with ``torch.set_num_threads`` and
    an automatic one is only logged.
    """
    environ = os.environ if environ is None else environ
    plan = choose(requested, environ)
    ours = _ours(environ)
    explicit = plan.source in ("--threads", ENV_THREADS)
    if requested is not None:  # children (notebook kernels) and later calls keep the request
        value = parse_threads(requested)
        environ[ENV_THREADS] = "auto" if value is None else str(value)
    if plan.threads is None and plan.wait_policy is None:  # "off": undo our own earlier choice only
        for var in ours:
            environ.pop(var, None)
        environ.pop(ENV_CHOSEN, None)
    else:
        written = set()
        for var, val in plan.env().items():
            if environ.get(var) is not None and var not in ours and not explicit:
                continue  # the user's own setting (the plan already follows it where it matters)
            environ[var] = val
            written.add(var)
        keep = written | {v for v in ours if v in environ}
        if keep:
            environ[ENV_CHOSEN] = ",".join(sorted(keep))
    prefix = f"{where}: " if where else ""
    if environ is os.environ and _torch_loaded():
        import torch

        if plan.threads is not None and plan.source in ("--threads", ENV_THREADS):
            torch.set_num_threads(plan.threads)
            log.info(
                "%s%s; torch was already loaded: set_num_threads(%d) applied, the wait policy cannot change any more",
                prefix,
                plan.describe(),
                plan.threads,
            )
        else:
            log.info(
                "%storch was already loaded with %d thread(s); not changed (%s)",
                prefix,
                torch.get_num_threads(),
                plan.describe(),
            )
    else:
        log.info("%s%s", prefix, plan.describe())
    return plan


def child_env(requested=None, where: str = "child process") -> tuple:
    """The thread settings for a child process started now (e.g. a notebook kernel): a fresh
    choice that keeps explicit settings.  Returns ``(plan, {variable: value or None})`` over every
    variable this module manages (``None``: the child must not have it); ``os.environ`` is not
    changed."""
    env = dict(os.environ)
    plan = configure(requested, env, where=where)
    return plan, {k: env.get(k) for k in MANAGED_VARS}


class _StderrHandler(logging.StreamHandler):
    """Writes to whatever ``sys.stderr`` is at the time of the record (pytest swaps it)."""

    def __init__(self):
        super().__init__(sys.stderr)

    @property
    def stream(self):
        return sys.stderr

    @stream.setter
    def stream(self, value):
        pass


def configure_cli(argv: list) -> list:
    """The command line's hook: take ``--threads X`` (or ``--threads=X``) from anywhere in ``argv``,
    :func:`configure` with it (so before the sub-command imports torch), make sure the decision is
    printed on stderr (``facterlab: threads=...``), and return the remaining arguments."""
    import argparse

    pre = argparse.ArgumentParser(add_help=False, allow_abbrev=False)
    pre.add_argument("--threads", default=None)
    known, rest = pre.parse_known_args(list(argv))
    if not any(isinstance(h, _StderrHandler) for h in log.handlers):
        handler = _StderrHandler()
        handler.setFormatter(logging.Formatter("facterlab: %(message)s"))
        log.addHandler(handler)
    if log.level == logging.NOTSET or log.level > logging.INFO:
        log.setLevel(logging.INFO)
    configure(known.threads)
    return rest


def set_default_wait_policy(environ: MutableMapping | None = None) -> bool:
    """Set ``OMP_WAIT_POLICY=PASSIVE`` if nothing set it and torch is not loaded yet (cheap; called when ``facterlab`` is imported so that notebooks opened in Jupyter get it).
    Returns whether it wrote the variable.  ``FACTERLAB_THREADS=off`` disables it."""
    environ = os.environ if environ is None else environ
    if environ.get(ENV_THREADS, "").strip().lower() == "off" or environ.get(WAIT_VAR):
        return False
    if environ is os.environ and _torch_loaded():
        return False
    environ[WAIT_VAR] = "PASSIVE"
    ours = _ours(environ) | {WAIT_VAR}
    environ[ENV_CHOSEN] = ",".join(sorted(ours))
    return True
