"""``facterlab reproduce``: run every notebook in ``notebooks/`` with papermill, in numeric order.

Profiles (the notebooks' parameter cells hold the ``default`` values; a profile passes ``PROFILE``,
``SMOKE`` and overrides, each only to the notebooks that declare that parameter):

- ``default``: bundled SmolLM2-135M + MiniLM, dataset ``auto`` (ML-1M if present, else ML-100K,
  fetched if possible, else synthetic), sizes chosen so that all notebooks together finish within
  about 30 minutes on 2 CPU cores of an otherwise idle machine.
- ``paper``: REPRO's sizes (ML-1M, n = 2,500 rows, 3 seeds, T = 3 passes, 200 CFR rows) and the
  7-8B backbones (``llama3-8b``, ``llama2-7b``, ``mistral-7b``): for a GPU machine.
- ``smoke``: ``SMOKE = True`` and synthetic data: tiny sizes, a check that everything runs.

Notebooks run with ``kernel_name="python3"`` and the project root (:func:`facterlab.paths.project_root`)
as working directory, whatever the caller's directory; executed copies go to ``build/notebooks/``.
The kernels get ``PROFILE``, ``SMOKE`` and the ``--set`` values; each notebook's parameter helper
(:mod:`facterlab.notebook`) applies the rest of the profile and the smoke sizes.  ``--set KEY=VALUE``
is checked before any notebook runs: a name no selected notebook declares is an error naming the close
matches, and the value is coerced by each notebook's declared type (:mod:`facterlab.params`).

The report run writes the committed ``figures/``: ``--profile default`` without ``--set`` on the
report's own dataset (:data:`REPORT_DATASET`, MovieLens-100K), or any run with ``--report``, sets
``FACTERLAB_REPORT=1`` for its kernels; every other run writes its figures beside its results
(``results/figures/``; docs/PATHS.md), so a fresh clone without data leaves ``git status`` clean.
Without ML-1M or ML-100K in the data directory the default profile first tries to fetch MovieLens-100K
(:func:`choose_dataset`; ``--no-download`` skips it); the run says which dataset it took and where its
figures went, at the start and at the end.  Kernels run on the ``ipc`` transport
(:func:`kernel_manager_kwargs`).
A failing notebook does not stop the others; at the end the command names every failed notebook
with its cell error and exits non-zero. Wall times go to ``results/reproduce_timings.json``.

Two lanes (``--jobs``; the command's default ``auto`` is 2 where this process may use 2 or more cores,
else 1; the Python API's default is 1).  With 2, the notebooks that read and write no FACTER run
(:data:`SIDE_LANE`: the Simpson notebooks 10-15) run one after the other in a *side lane*, a child
process at the lowest CPU priority (nice :data:`SIDE_NICE`), while this process runs every other
notebook in numeric order as with ``--jobs 1``: the side lane is meant to take only the core time the
main lane leaves idle, so that the command's wall time drops toward the main lane's.
The side lane's lines come prefixed with ``[side]``; a side-lane notebook's seconds include the time
it waited for the main lane, so they can be longer than the same notebook's under ``--jobs 1`` (the
table and the timings file name each notebook's lane).  ``--jobs 1`` runs every notebook in this
process, one at a time: per-notebook times comparable with earlier runs.  When either lane would be
empty (e.g. ``--only 14``) everything runs in this process.

>>> filter_parameters({"SMOKE": True, "MODELS": ["x"]}, {"SMOKE", "DATASET"})
({'SMOKE': True}, ['MODELS'])
>>> sorted(PROFILES)
['default', 'paper', 'smoke']
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import asdict, dataclass, field
from pathlib import Path

from facterlab import paths, threads
from facterlab.config import results_dir
from facterlab.gitstate import OUTPUT_PATHS, changed_tracked_files
from facterlab.params import PAPER_MODELS as PAPER_MODELS  # re-exported: the profiles live in facterlab.params
from facterlab.params import (
    PROFILES,
    ParameterError,
    declared_in_notebook,
    resolve,
    unknown_message,
    validate,
)
from facterlab.reporting.papermill_engine import kernel_manager_kwargs  # the kernel on ipc, as the engine


@dataclass
class NotebookRun:
    """The outcome of one notebook: wall time, status (``ok``/``failed``), the parameters passed and
    skipped, and the error (cell and exception) when it failed."""

    notebook: str
    seconds: float
    status: str
    output: str
    parameters: dict = field(default_factory=dict)
    skipped_parameters: list = field(default_factory=list)
    error: str | None = None
    threads: str | None = None  # the kernel's CPU thread settings (facterlab.threads)
    lane: str = "main"  # "side": in the low-priority side lane (SIDE_LANE); its seconds include waiting for the CPU


def numeric_order(paths: Iterable[Path]) -> list:
    """Notebooks sorted by their leading number (``2_x`` before ``10_y``), then by name.

    >>> [p.name for p in numeric_order([Path("10_a.ipynb"), Path("2_b.ipynb"), Path("00_q.ipynb")])]
    ['00_q.ipynb', '2_b.ipynb', '10_a.ipynb']
    """

    def key(p: Path):
        m = re.match(r"(\d+)", p.name)
        return (int(m.group(1)) if m else 10**9, p.name)

    return sorted(paths, key=key)


def discover_notebooks(notebooks_dir: Path, only: str | None = None) -> list:
    """The ``*.ipynb`` files of ``notebooks_dir`` (checkpoints excluded) in numeric order,
    filtered by ``only`` (a glob such as ``0[3-5]*``, or a substring of the name)."""
    import fnmatch

    notebooks_dir = Path(notebooks_dir)
    if not notebooks_dir.is_dir():
        raise FileNotFoundError(f"no notebooks directory at {notebooks_dir}; run from the repository root")
    paths = [p for p in notebooks_dir.glob("*.ipynb") if ".ipynb_checkpoints" not in p.parts]
    if only:
        paths = [p for p in paths if fnmatch.fnmatch(p.name, only) or fnmatch.fnmatch(p.stem, only) or only in p.name]
    return numeric_order(paths)


def declared_parameters(notebook: Path) -> set:
    """Names of the parameters a notebook declares in its tagged ``parameters`` cell."""
    import papermill

    return set(papermill.inspect_notebook(str(notebook)).keys())


def kernel_parameters(profile: str, extra: dict | None = None) -> dict:
    """What the runner passes to every notebook: PROFILE, SMOKE and ``extra`` (``--set``); the
    notebooks' parameter helper applies the profile's other values to what was not passed.

    >>> kernel_parameters("smoke", {"MODEL": "fake"})
    {'PROFILE': 'smoke', 'SMOKE': True, 'MODEL': 'fake'}
    """
    if profile not in PROFILES:
        raise ValueError(f"unknown profile {profile!r}; choose one of {', '.join(map(repr, PROFILES))}")
    return {"PROFILE": profile, "SMOKE": bool(PROFILES[profile]["smoke"]), **(extra or {})}


def _check_dataset(passed: dict) -> None:
    """A DATASET named by the profile or ``--set`` exists (built in, or imported into the data directory),
    before any kernel starts: ``--set DATASET=ml-10m`` is one line here, not an error in a notebook cell."""
    name = passed.get("DATASET")
    if isinstance(name, str) and name != "auto":
        from facterlab.data import resolve_dataset

        try:
            resolve_dataset(name, passed.get("DATA_DIR"))
        except ValueError as exc:
            raise ParameterError(f"parameter DATASET: {exc}") from None


def check_extra(extra: dict, declared_by: dict) -> dict:
    """Validate ``--set`` values against the notebooks' declared parameters (``declared_by``: notebook
    name -> ``{name: Declared}``) before anything runs: a name no notebook declares is an error naming
    the close matches; each value is coerced by every declaring notebook's type.  Returns
    ``{notebook: {name: value}}`` of the coerced values each notebook gets."""
    union = sorted({n for d in declared_by.values() for n in d})
    unknown = [k for k in extra if k not in union]
    problems = [unknown_message(unknown, union, "the selected notebooks (--set)")] if unknown else []
    out: dict = {}
    for nb, decl in declared_by.items():
        mine = {k: v for k, v in extra.items() if k in decl}
        try:
            out[nb] = validate(mine, decl, nb)
        except ParameterError as exc:
            problems.append(f"{nb}: {exc}")
    if problems:
        raise ParameterError("; ".join(dict.fromkeys(problems)))
    return out


def filter_parameters(params: dict, declared: Iterable[str]) -> tuple:
    """Split ``params`` into those the notebook declares (passed) and the others (skipped, sorted)."""
    declared = set(declared)
    passed = {k: v for k, v in params.items() if k in declared}
    return passed, sorted(k for k in params if k not in declared)


def profile_parameters(profile: str, extra: dict | None = None) -> dict:
    """All parameters a profile passes (before per-notebook filtering): PROFILE, SMOKE, overrides,
    then ``extra`` (``--set KEY=VALUE``) on top.

    >>> profile_parameters("smoke")["SMOKE"], profile_parameters("smoke", {"MODEL": "fake"})["MODEL"]
    (True, 'fake')
    """
    if profile not in PROFILES:
        raise ValueError(f"unknown profile {profile!r}; choose one of {', '.join(map(repr, PROFILES))}")
    spec = PROFILES[profile]
    params = {"PROFILE": profile, "SMOKE": bool(spec["smoke"]), **spec["overrides"]}
    params.update(extra or {})
    return params


def _error_text(exc: BaseException) -> str:
    ename = getattr(exc, "ename", type(exc).__name__)
    evalue = getattr(exc, "evalue", str(exc))
    cell = getattr(exc, "exec_count", None)
    where = f"cell [{cell}]" if cell is not None else "notebook"
    return f"{where}: {ename}: {evalue}".strip()


def run_notebooks(
    profile: str = "default",
    only: str | None = None,
    data_dir: str | None = None,
    out: os.PathLike | str = "build/notebooks",
    notebooks_dir: os.PathLike | str = "notebooks",
    cwd: os.PathLike | str | None = None,
    extra: dict | None = None,
    timings_path: os.PathLike | str | None = None,
    log=None,
    report: bool | None = None,
    download: bool = True,
    jobs: int = 1,
    notebooks: Iterable[os.PathLike | str] | None = None,
    lane: str = "main",
    on_run: Callable[[NotebookRun], None] | None = None,
) -> list:
    """Execute the notebooks with papermill; return one :class:`NotebookRun` each, in numeric order
    (never raises on a notebook's failure: the caller decides).  Writes ``results/reproduce_timings.json``.

    ``extra``: ``--set`` values (text or Python values), validated against the selected notebooks'
    declared parameters before anything runs (:class:`ParameterError`).  ``report``: whether this is
    the report run that writes the committed ``figures/`` (default: ``profile == "default"``, no
    ``extra`` and dataset ``auto`` resolving to the report's own dataset, :data:`REPORT_DATASET`);
    ``download``: under the default profile without data, fetch MovieLens-100K first
    (:func:`choose_dataset`); ``cwd`` default: the project root.

    ``jobs``: 1 (the default) runs every notebook here, one after the other; 2 or more runs the
    notebooks matching :data:`SIDE_LANE` in a side lane, a child process at nice :data:`SIDE_NICE`,
    beside the others (:func:`split_lanes`).  Internal, for the side lane's own process:
    ``notebooks`` (an explicit list of notebook paths, relative to ``notebooks_dir``, instead of
    ``only``), ``lane`` (the lane name its runs carry; ``"side"`` also leaves the dataset lines to
    the parent) and ``on_run`` (called with each notebook's :class:`NotebookRun` as it ends).

    ``log(line)`` (default: print and flush) gets a line when each notebook starts and ends (with its
    wall time) and, as they come, the kernel's output lines (facterlab's log lines: phases, cached vs
    new predictions, time left) prefixed with ``[<notebook>]``; the side lane's lines come prefixed
    with ``"[side] "``."""
    t_all = time.perf_counter()  # the whole call: the dataset check (and a download) included
    if log is None:
        log = _say
    params = kernel_parameters(profile, extra)
    if data_dir is not None:
        os.environ["FACTERLAB_DATA"] = str(Path(data_dir).expanduser().resolve())
    # the code the runs are made by; the side lane's parent has checked it (and decided ``report``)
    tree_why = uncommitted_reason(CODE_ROOT) if report is not False and lane != "side" else None
    if report and tree_why:  # an explicit --report: refused before anything runs
        raise ParameterError(
            f"--report writes the committed figures/, which must be made from a commit: {tree_why}; "
            "commit or stash the changes first (or leave out --report: figures then go to results/figures/)"
        )
    choice = choose_dataset(profile, extra, download=download, log=log)
    not_report_why = None
    if report is None:
        report = profile == "default" and not extra and choice.dataset == REPORT_DATASET
        if report and tree_why:
            report, not_report_why = False, tree_why
    cwd = Path(cwd) if cwd is not None else paths.project_root()
    nb_dir, out = _under(cwd, notebooks_dir), _under(cwd, out)
    out.mkdir(parents=True, exist_ok=True)
    if notebooks is not None:
        selected = numeric_order(_under(nb_dir, nb) for nb in notebooks)
    else:
        selected = discover_notebooks(nb_dir, only)
    if not selected:
        raise FileNotFoundError(f"no notebooks matched in {nb_dir}" + (f" for --only {only!r}" if only else ""))
    # a notebook without a tagged parameters cell (one a user added) takes no parameters: it runs as it is
    declared_by = {nb.stem: declared_in_notebook(nb, missing_ok=True) for nb in selected}
    typed_extra = check_extra(dict(extra or {}), declared_by)  # before any notebook runs
    for nb in selected:  # the profile's values fit every notebook's declared types
        passed, _ = filter_parameters({**params, **typed_extra[nb.stem]}, declared_by[nb.stem])
        resolve(declared_by[nb.stem], passed, where=nb.stem)
        _check_dataset(passed)
    main_lane, side_lane = split_lanes(selected, jobs)
    runs = []
    saved_env = {k: os.environ.get(k) for k in (*threads.MANAGED_VARS, paths.ENV_REPORT, "FACTERLAB_NOTEBOOK")}
    _set_env({paths.ENV_REPORT: "1" if report else None})  # the kernels inherit it
    where, fig_dir = report_line(report, choice.dataset, profile, extra, not_report_why), paths.figures_dir()
    if lane != "side":
        log(f"[reproduce] dataset: {choice.describe()}")
        log(f"[reproduce] {where}")
    side = None
    try:
        if side_lane:
            log = _serialised(log)  # the side lane's reader thread logs too: whole lines, one at a time
            log(
                f"[reproduce] 2 lanes: main lane {len(main_lane)} notebook(s) here; side lane (nice {SIDE_NICE}, "
                f"another process, lines prefixed [side]): {', '.join(nb.stem for nb in side_lane)}"
            )
            side = SideLane(
                side_lane,
                {
                    "profile": profile,
                    "extra": extra,
                    "out": str(out),
                    "notebooks_dir": str(nb_dir),
                    "cwd": str(cwd),
                    "report": report,
                },
                env={**os.environ, "FACTERLAB_DATA": choice.data_dir, "PYTHONUNBUFFERED": "1"},
                log=log,
            )
        for nb in main_lane:
            passed, skipped = filter_parameters({**params, **typed_extra[nb.stem]}, declared_by[nb.stem])
            runs.append(_run_one(nb, out, cwd, profile, passed, skipped, log, t_all, lane))
            if on_run is not None:
                on_run(runs[-1])
        if side is not None:
            if side.running():
                log(f"[reproduce] main lane done in {time.perf_counter() - t_all:.1f} s; waiting for the side lane")
            runs = numeric_order_runs(runs + side.wait())
        if lane != "side":
            log(f"[reproduce] dataset: {choice.describe()}")
            log(f"[reproduce] {where}")
    finally:
        if side is not None:
            side.stop()  # Ctrl-C or an error here: the side lane does not outlive this process
        _set_env(saved_env)
    total = time.perf_counter() - t_all  # unrounded: with one lane never below the sum of its parts
    path = Path(timings_path) if timings_path else results_dir() / "reproduce_timings.json"
    if not path.is_absolute():
        path = cwd / path
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(
        json.dumps(
            {
                "profile": profile,
                "profile_description": PROFILES[profile]["description"],
                "report": report,
                "parameters": params,
                "data_dir": os.environ.get("FACTERLAB_DATA"),
                "dataset": asdict(choice),
                "figures_dir": str(fig_dir),
                "jobs": jobs,
                "lanes": ["main", "side"] if side_lane else [lane],
                "side_nice": SIDE_NICE if side_lane else None,
                "total_seconds": total,  # wall time of the whole call
                "notebook_seconds": sum(r.seconds for r in runs),  # above the wall time with two lanes
                "notebooks": [asdict(r) for r in runs],
            },
            indent=2,
            default=str,
        )
    )
    return runs


def _under(base: Path, path: os.PathLike | str) -> Path:
    """``path`` as is when absolute, else under ``base``."""
    path = Path(path)
    return path if path.is_absolute() else base / path


def _run_one(
    nb: Path, out: Path, cwd: Path, profile: str, passed: dict, skipped: list, log, t_all: float, lane: str
) -> NotebookRun:
    """Execute one notebook with papermill in a fresh kernel (thread settings chosen now, output lines
    streamed to ``log``) and return its :class:`NotebookRun`; a notebook's failure is its status."""
    import papermill

    target = out / nb.name
    log(f"[reproduce] {nb.name} (profile {profile}; parameters {passed})")
    # the kernel inherits os.environ: thread settings chosen now, before it loads torch
    plan, kernel_env = threads.child_env(where=f"{nb.name} kernel")
    _set_env({**kernel_env, "FACTERLAB_NOTEBOOK": nb.stem})  # the run record names its notebook
    log(f"[reproduce] {nb.name} kernel: {plan.describe()}")
    t0 = time.perf_counter()
    lines = KernelLines(nb.stem, log)
    try:
        papermill.execute_notebook(
            str(nb),
            str(target),
            parameters=passed,
            kernel_name="python3",
            cwd=str(cwd),
            progress_bar=False,
            log_output=False,
            stdout_file=lines,  # the kernel's output, streamed as it comes: log lines, prints
            stderr_file=lines,
            **kernel_manager_kwargs(),
        )
        status, error = "ok", None
    except Exception as exc:  # noqa: BLE001 - report every notebook's failure, then go on
        status, error = "failed", _error_text(exc)
        lines.finish()
        log(f"[reproduce] FAILED {nb.name}: {error}")
    lines.finish()
    run = NotebookRun(
        nb.stem, time.perf_counter() - t0, status, str(target), passed, skipped, error, plan.describe(), lane
    )
    log(f"[reproduce] {nb.name}: {status} in {run.seconds:.1f} s (total {time.perf_counter() - t_all:.1f} s)")
    return run


#: The side lane's notebooks (``--jobs 2``), as globs on the notebook's name: notebooks that neither read
#: nor write a FACTER run (they import none of facterlab.facter, facterlab.reporting.experiments and
#: facterlab.reporting.batch; tests/reporting/test_reproduce_lanes.py checks that of every notebook that
#: matches), so they can run beside the others in any order.  Notebook 20 runs FACTER experiments: main lane.
SIDE_LANE = ("1[0-5]_simpson_*",)
#: The side lane's CPU priority (``nice``): the lowest, so it takes only the core time the main lane leaves.
#: On Linux the side lane also runs under the ``SCHED_IDLE`` policy, which yields a core at once to any
#: other task: SmolLM2's run of notebook 00 beside a single-threaded numpy loop took a median 133.8 s with
#: the loop at nice 19 and 119.1 s with it under SCHED_IDLE (109.0 s alone; ``benchmarks/bench_prefetch.py
#: --beside nice19,idle``, docs/BENCHMARKS.md).
SIDE_NICE = 19


def in_side_lane(notebook: os.PathLike | str) -> bool:
    """Whether a notebook (path or name) matches :data:`SIDE_LANE`.

    >>> in_side_lane("notebooks/14_simpson_grid_160.ipynb"), in_side_lane("20_simpson_in_llm_recommendations")
    (True, False)
    """
    import fnmatch

    stem = Path(notebook).stem
    return any(fnmatch.fnmatch(stem, pattern) for pattern in SIDE_LANE)


def split_lanes(notebooks: list, jobs: int) -> tuple:
    """``(main lane, side lane)`` for ``jobs``: with 2 or more, the notebooks of :data:`SIDE_LANE` go to the
    side lane; with 1, or where either lane would be empty, every notebook stays in the main lane.

    >>> nbs = [Path("09_a.ipynb"), Path("10_simpson_b.ipynb")]
    >>> [[p.name for p in lane] for lane in split_lanes(nbs, 2)]
    [['09_a.ipynb'], ['10_simpson_b.ipynb']]
    >>> [[p.name for p in lane] for lane in split_lanes(nbs, 1)], split_lanes(nbs[1:], 2)[1]
    ([['09_a.ipynb', '10_simpson_b.ipynb'], []], [])
    """
    if jobs < 1:
        raise ValueError(f"jobs must be at least 1, got {jobs}")
    side = [nb for nb in notebooks if jobs > 1 and in_side_lane(nb)]
    main = [nb for nb in notebooks if nb not in side]
    return (main, side) if main and side else (list(notebooks), [])


def numeric_order_runs(runs: list) -> list:
    """:class:`NotebookRun` objects in the notebooks' numeric order (:func:`numeric_order`)."""
    by_name = {r.notebook: r for r in runs}
    return [by_name[p.name] for p in numeric_order(Path(name) for name in by_name)]


def auto_jobs() -> int:
    """``--jobs auto``: 2 where this process may use 2 or more cores (``os.sched_getaffinity``), else 1."""
    try:
        cores = len(os.sched_getaffinity(0))
    except AttributeError:  # macOS, Windows: no affinity mask
        cores = os.cpu_count() or 1
    return 2 if cores >= 2 else 1


def parse_jobs(text: str) -> int:
    """``--jobs``: ``auto`` (:func:`auto_jobs`) or a whole number >= 1 (2 or more: two lanes).

    >>> parse_jobs("1"), parse_jobs("2"), parse_jobs("auto") in (1, 2)
    (1, 2, True)
    """
    if text.strip().lower() == "auto":
        return auto_jobs()
    try:
        jobs = int(text)
    except ValueError:
        jobs = 0
    if jobs < 1:
        raise argparse.ArgumentTypeError(f"expected auto or a whole number >= 1, got {text!r}")
    return jobs


def _serialised(log):
    """``log`` behind a lock: two threads (the main lane, the side lane's reader) never mix their lines."""
    lock = threading.Lock()

    def locked(line: str) -> None:
        with lock:
            log(line)

    return locked


class SideLane:
    """The side lane: its notebooks run in a child process (``python -m facterlab.reporting.reproduce <spec>``)
    at nice :data:`SIDE_NICE`, which its kernels and their workers inherit; the child's output lines go
    to ``log`` as they come, prefixed ``"[side] "``, and each notebook's :class:`NotebookRun` comes back
    through a JSON-lines file as it ends.

    Parameters
    ----------
    notebooks : list of Path
        The side lane's notebooks, in the order to run them.
    spec : dict
        :func:`run_notebooks`'s arguments for the child (``profile``, ``extra``, ``out``, ``notebooks_dir``,
        ``cwd``, ``report``); the child adds ``download=False`` and its own timings file.
    env : dict
        The child's environment.
    log : callable
        Where the child's lines go (called from a reader thread).
    """

    #: The child's command before its one argument (the JSON spec): this module, whose ``__main__`` is
    #: :func:`run_lane`; tests replace it.
    command: tuple = (sys.executable, "-m", __name__)

    def __init__(self, notebooks: list, spec: dict, env: dict, log):
        self.notebooks, self.log = list(notebooks), log
        self._tmp = tempfile.TemporaryDirectory(prefix="facterlab-side-lane-")
        self.runs_path = Path(self._tmp.name) / "runs.jsonl"
        spec = {
            **spec,
            "notebooks": [str(nb) for nb in self.notebooks],
            "runs_path": str(self.runs_path),
            "timings_path": str(Path(self._tmp.name) / "timings.json"),
        }
        self.proc: subprocess.Popen | None = None
        self.start_error: str | None = None
        self._reader: threading.Thread | None = None
        try:
            self.proc = subprocess.Popen(
                [*self.command, json.dumps(spec, default=str)],
                env=env,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                text=True,
                bufsize=1,
                preexec_fn=_lower_priority if hasattr(os, "nice") else None,
            )
        except (OSError, subprocess.SubprocessError) as exc:  # no such executable, a failed preexec_fn
            self.start_error = f"side lane could not start: {type(exc).__name__}: {exc}"
            log(f"[reproduce] {self.start_error}")
            return
        self._reader = threading.Thread(target=self._read, name="facterlab-side-lane", daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.proc is not None and self.proc.stdout is not None
        for line in self.proc.stdout:
            if line.strip():
                self.log(f"[side] {line.rstrip()}")

    def running(self) -> bool:
        """Whether the child is still running."""
        return self.proc is not None and self.proc.poll() is None

    def wait(self) -> list:
        """Wait for the child to end; one :class:`NotebookRun` per side-lane notebook: those it reported,
        and for each of the others a failed one that says why (the child could not start, or ended early)."""
        code = self.proc.wait() if self.proc is not None else None
        self._join_reader()
        reported = {}
        if self.runs_path.is_file():
            for line in self.runs_path.read_text().splitlines():
                if line.strip():
                    run = NotebookRun(**json.loads(line))
                    reported[run.notebook] = run
        why = self.start_error or f"side lane exited with code {code} before running it"
        runs = []
        for nb in self.notebooks:
            run = reported.get(nb.stem) or NotebookRun(nb.stem, 0.0, "failed", "", error=why, lane="side")
            if run.notebook not in reported:
                self.log(f"[reproduce] FAILED {nb.name}: {why}")
            runs.append(run)
        return runs

    def stop(self, grace: float = 10.0) -> None:
        """End the child if it still runs (SIGTERM: it shuts its kernel down; SIGKILL after ``grace``
        seconds), and remove the temporary folder."""
        if self.running():
            assert self.proc is not None
            self.proc.terminate()
            try:
                self.proc.wait(grace)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self._join_reader()
        self._tmp.cleanup()

    def _join_reader(self, grace: float = 30.0) -> None:
        # the child has ended; a process it left behind (a kernel) may hold the pipe open: wait a while, no more
        if self._reader is not None:
            self._reader.join(grace)
            if not self._reader.is_alive() and self.proc is not None and self.proc.stdout is not None:
                self.proc.stdout.close()


def _lower_priority() -> None:  # pragma: no cover - runs in the child between fork and exec
    os.nice(SIDE_NICE)
    idle = getattr(os, "SCHED_IDLE", None)  # Linux: run only when no other task wants the core
    if idle is not None and hasattr(os, "sched_setscheduler"):
        try:
            os.sched_setscheduler(0, idle, os.sched_param(0))
        except OSError:  # not allowed here: nice 19 alone
            pass


def run_lane(spec: dict) -> int:
    """The side lane's process (:class:`SideLane`): run the notebooks of ``spec`` one after the other with
    :func:`run_notebooks` (no download: the parent decided the dataset; the parent's ``report``), each
    notebook's :class:`NotebookRun` appended to ``spec["runs_path"]`` as a JSON line as it ends.  SIGTERM
    (the parent stopping it) exits through Python, so the running kernel is shut down.  Returns 0."""
    import signal

    signal.signal(signal.SIGTERM, lambda signum, frame: sys.exit(128 + signum))
    runs_path = Path(spec["runs_path"])

    def record(run: NotebookRun) -> None:
        with runs_path.open("a") as f:
            f.write(json.dumps(asdict(run), default=str) + "\n")

    run_notebooks(
        profile=spec["profile"],
        out=spec["out"],
        notebooks_dir=spec["notebooks_dir"],
        cwd=spec["cwd"],
        extra=spec.get("extra"),
        timings_path=spec["timings_path"],
        report=spec["report"],
        download=False,
        notebooks=spec["notebooks"],
        lane="side",
        on_run=record,
    )
    return 0


#: The dataset the committed report (figures/, README "Results of the default profile") was made on:
#: only a default-profile run on it rewrites figures/.
REPORT_DATASET = "ml-100k"
#: What the default profile fetches when the data directory has neither ML-1M nor ML-100K.
DEFAULT_DOWNLOAD = "ml-100k"


@dataclass
class DatasetChoice:
    """What dataset ``auto`` means for this run, where it lies, and how it was reached."""

    dataset: str  # auto's resolution (ml-1m, ml-100k or synthetic), or the profile's/--set's explicit name
    data_dir: str
    how: str  # "found", "downloaded", "fallback" (no data, no download), "explicit"
    note: str = ""

    def describe(self) -> str:
        """One line for the log: the dataset's name and how it was reached (found, downloaded, named, or the synthetic stand-in and why)."""
        label = {"ml-1m": "MovieLens-1M", "ml-100k": "MovieLens-100K", "amazon": "Amazon Movies & TV"}
        name = f"{label[self.dataset]} ({self.dataset})" if self.dataset in label else self.dataset.upper()
        if self.how == "explicit":
            return f"{name}, named by the profile or --set"
        if self.how == "found":
            return f"{name}, found in {self.data_dir}"
        if self.how == "downloaded":
            return f"{name}, downloaded into {self.data_dir} (checksum verified)"
        return f"{name} (seeded stand-in; every title says SYNTHETIC): {self.note}"


def choose_dataset(profile: str, extra: dict | None = None, download: bool = True, log=None) -> DatasetChoice:
    """What the notebooks' dataset ``auto`` will resolve to, after fetching MovieLens-100K where it helps.

    Only when the profile leaves DATASET at ``auto`` (not ``smoke``/``paper``, no ``--set DATASET``) and
    the data directory holds neither ML-1M nor ML-100K: with ``download`` and a reachable server, the
    pinned ML-100K zip is fetched and checked (:func:`facterlab.data.download.ensure_dataset`); offline,
    the check fails within seconds and the run falls back to the synthetic set, saying why."""
    from facterlab.config import data_dir
    from facterlab.data import download as dl
    from facterlab.data.loading import resolve_dataset

    log = log or _say
    extra = extra or {}
    folder = str(data_dir())
    fixed = extra.get("DATASET", PROFILES[profile]["overrides"].get("DATASET"))
    if fixed is not None and str(fixed) != "auto":
        return DatasetChoice(str(fixed), folder, "explicit")
    found = resolve_dataset("auto")
    if found != "synthetic":
        return DatasetChoice(found, folder, "found")
    if not download:
        return DatasetChoice("synthetic", folder, "fallback", f"no ml-1m/ or ml-100k/ in {folder}; download off")
    src = dl.source(DEFAULT_DOWNLOAD)
    log(f"[reproduce] no ml-1m/ or ml-100k/ in {folder}: trying to fetch {src.label} ({src.downloads[0].url})")
    reason = dl.unreachable(src.downloads[0].url)
    if reason is None:
        try:
            dl.ensure_dataset(DEFAULT_DOWNLOAD, download=True)
        except (OSError, ValueError) as exc:  # DownloadError, a checksum mismatch, a full disk
            reason = str(exc).splitlines()[0]
        else:
            return DatasetChoice(DEFAULT_DOWNLOAD, folder, "downloaded")
    return DatasetChoice(
        "synthetic",
        folder,
        "fallback",
        f"no ml-1m/ or ml-100k/ in {folder} and {src.label} could not be fetched ({reason}); "
        f"for real data set FACTERLAB_DATA or run `.venv/bin/facterlab data download --dataset {DEFAULT_DOWNLOAD}`",
    )


#: paths whose changes do not make a tree unfit for the report: the report's own outputs
REPORT_OUTPUTS = OUTPUT_PATHS
#: the work tree of the code that makes the runs (where :func:`facterlab.facter.provenance.code_version` looks)
CODE_ROOT = Path(__file__).resolve().parents[3]


def uncommitted_reason(root: os.PathLike | str) -> str | None:
    """Why the code at ``root`` is not a commit the report can name (None: a clean git work tree).

    The tracked files that differ from ``HEAD`` (outside :data:`REPORT_OUTPUTS`, which the report run
    rewrites itself), or that ``root`` is not a git work tree, or that git cannot say.  Untracked
    files are not counted (``git describe --dirty``, which every run records, does not count them
    either).  Notebooks are compared through ``cat`` as the clean filter, as
    :func:`facterlab.facter.provenance.code_version` does (nbstripout would start Python per file).

    >>> import tempfile
    >>> uncommitted_reason(tempfile.mkdtemp()).startswith("not a git work tree")
    True
    """
    if shutil.which("git") is None:
        return "git is not installed, so the commit cannot be named"
    changed = changed_tracked_files(root, REPORT_OUTPUTS)
    if changed is None:
        return f"not a git work tree ({root}), or git status failed there, so the commit cannot be named"
    if not changed:
        return None
    shown = ", ".join(changed[:5]) + (f" and {len(changed) - 5} more" if len(changed) > 5 else "")
    return f"{len(changed)} tracked file(s) differ from the last commit ({shown})"


def report_line(
    report: bool, dataset: str, profile: str, extra: dict | None = None, not_report_why: str | None = None
) -> str:
    """Where this run's figures and tables go, and why (one line)."""
    if report:
        return f"report run: figures and tables -> {paths.report_figures_dir()} (the committed report)"
    if not_report_why:
        why = f"uncommitted code: {not_report_why}"
    elif profile != "default" or extra:
        why = f"profile {profile}" + (" with --set" if extra else "")
    elif dataset != REPORT_DATASET:
        why = f"dataset {dataset}, not the report's {REPORT_DATASET}"
    else:
        why = "--no-report"
    return f"not the report run ({why}): figures and tables -> {paths.figures_dir()}; figures/ is left as it is"


def _say(line: str) -> None:
    print(line, flush=True)


class KernelLines:
    """A file-like sink for papermill's ``stdout_file``/``stderr_file``: each complete line of the
    kernel's output goes to ``log`` as ``[<name>] <line>`` (``\\r`` also ends a line, for text
    progress bars; blank lines are dropped).

    >>> out = []
    >>> k = KernelLines("06_x", out.append)
    >>> for chunk in ("a\\nb", "c\\r\\n\\n", "tail"):
    ...     _ = k.write(chunk)
    >>> k.finish()
    >>> out
    ['[06_x] a', '[06_x] bc', '[06_x] tail']
    """

    def __init__(self, name: str, log):
        self.name, self.log, self._buf = name, log, ""

    def write(self, text: str) -> int:
        """Take a chunk of the kernel's output; each line it completes goes to ``log``.

        Parameters
        ----------
        text : str
            The chunk.

        Returns
        -------
        int
            ``len(text)``, as a file's ``write`` returns.
        """
        self._buf += str(text)
        *done, self._buf = re.split(r"\r\n|\r|\n", self._buf)
        for line in done:
            if line.strip():
                self.log(f"[{self.name}] {line.rstrip()}")
        return len(text)

    def flush(self) -> None:
        """Nothing to flush: a line goes out when it is complete (:meth:`finish` sends the rest)."""
        pass

    def finish(self) -> None:
        """Emit what is left of an unterminated last line."""
        if self._buf.strip():
            self.log(f"[{self.name}] {self._buf.rstrip()}")
        self._buf = ""


def _set_env(values: dict) -> None:
    """Set (or, for ``None``, remove) environment variables of this process."""
    for key, value in values.items():
        if value is None:
            os.environ.pop(key, None)
        else:
            os.environ[key] = value


def timings_table(runs: list, profile: str = "", wall: float | None = None) -> str:
    """A plain-text table: notebook, status, seconds, and the total.

    With one lane the total is the sum of the notebooks' seconds, as before lanes existed.  With a side
    lane (``--jobs 2``) a lane column, the sum of the notebooks' seconds and the command's ``wall`` time
    (the lanes overlap: the wall time is below the sum), and a note that the side lane's seconds are at
    low priority.

    >>> runs = [NotebookRun("09_a", 50.0, "ok", ""), NotebookRun("10_simpson_b", 20.0, "ok", "", lane="side")]
    >>> print(timings_table(runs, "smoke", wall=55.0))
    notebook      lane  status   seconds
    ------------------------------------
    09_a          main  ok          50.0
    10_simpson_b  side  ok          20.0
    ------------------------------------
    sum of notebooks (profile smoke)      70.0
    wall, both lanes                      55.0
    (side: nice 19, beside the main lane; its seconds include waiting for the CPU)
    """
    width = max([len(r.notebook) for r in runs] + [8])
    suffix = f" (profile {profile})" if profile else ""
    if all(r.lane == "main" for r in runs):
        lines = [f"{'notebook':<{width}}  {'status':<6}  {'seconds':>8}", "-" * (width + 18)]
        lines += [f"{r.notebook:<{width}}  {r.status:<6}  {r.seconds:>8.1f}" for r in runs]
        lines.append("-" * (width + 18))
        lines.append(f"{'total' + suffix:<{width}}  {'':<6}  {sum(r.seconds for r in runs):>8.1f}")
        return "\n".join(lines)
    rule = "-" * (width + 24)
    lines = [f"{'notebook':<{width}}  {'lane':<4}  {'status':<6}  {'seconds':>8}", rule]
    lines += [f"{r.notebook:<{width}}  {r.lane:<4}  {r.status:<6}  {r.seconds:>8.1f}" for r in runs]
    totals = [("sum of notebooks" + suffix, sum(r.seconds for r in runs))]
    if wall is not None:
        totals.append(("wall, both lanes", wall))
    label = max([len(t[0]) for t in totals] + [width + 14])  # the numbers under the seconds column
    lines.append(rule)
    lines += [f"{name:<{label}}  {value:>8.1f}" for name, value in totals]
    lines.append(f"(side: nice {SIDE_NICE}, beside the main lane; its seconds include waiting for the CPU)")
    return "\n".join(lines)


def _parse_set(items: list | None) -> dict:
    """``["KEY=VALUE", ...]`` -> ``{KEY: "VALUE"}``: the text as given; each notebook's declared type
    coerces it (:func:`check_extra`)."""
    out = {}
    for item in items or []:
        if "=" not in item or not item.split("=", 1)[0].strip():
            raise ParameterError(f"--set expects KEY=VALUE, got {item!r}")
        key, raw = item.split("=", 1)
        out[key.strip()] = raw.strip()
    return out


def _cmd(args) -> int:
    t0 = time.perf_counter()
    try:
        runs = run_notebooks(
            profile=args.profile,
            only=args.only,
            data_dir=args.data_dir,
            out=Path(args.out).resolve() if args.out else "build/notebooks",  # default: under the project root
            extra=_parse_set(args.set),
            report=args.report,
            download=args.download,
            jobs=args.jobs,
        )
    except ParameterError as exc:
        print(f"facterlab reproduce: {exc}", file=sys.stderr)
        return 2
    print(timings_table(runs, args.profile, wall=time.perf_counter() - t0))
    failed = [r for r in runs if r.status != "ok"]
    if failed:
        print(f"\nfacterlab reproduce: {len(failed)} of {len(runs)} notebook(s) failed:", file=sys.stderr)
        for r in failed:
            copy = f"  (executed copy: {r.output})" if r.output else ""
            print(f"  {r.notebook}: {r.error}{copy}", file=sys.stderr)
        return 1
    return 0


def register(subparsers) -> None:
    """Add ``facterlab reproduce`` to the CLI."""
    p = subparsers.add_parser(
        "reproduce", help="run every notebook with papermill (numeric order)", description=__doc__.split("\n\n")[0]
    )
    p.add_argument(
        "--profile",
        choices=sorted(PROFILES),
        default="default",
        help="; ".join(f"{k}: {v['description']}" for k, v in PROFILES.items()),
    )
    p.add_argument("--only", default=None, help="run only notebooks matching this glob or substring")
    p.add_argument("--data-dir", default=None, help="data directory (sets FACTERLAB_DATA for the notebooks)")
    p.add_argument(
        "--out", default=None, help="where the executed notebooks go (default: build/notebooks/ of the project root)"
    )
    p.add_argument(
        "--set",
        action="append",
        metavar="KEY=VALUE",
        help="parameter for every notebook that declares KEY, repeatable; checked and coerced by each "
        "notebook's declared type (a list as [a, b]); an undeclared KEY is an error",
    )
    p.add_argument(
        "--report",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="write the committed report figures in figures/ (default: only --profile default without --set "
        f"on the report's dataset, {REPORT_DATASET}); otherwise figures go beside the results (results/figures/)",
    )
    p.add_argument(
        "--download",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="default profile without ML-1M/ML-100K in the data directory: fetch MovieLens-100K (pinned "
        "checksum) before falling back to the synthetic set (default: on; offline it fails within seconds)",
    )
    p.add_argument(
        "--jobs",
        type=parse_jobs,
        default="auto",
        metavar="N",
        help="auto (default: 2 where this process may use 2 or more cores, else 1), 1, or 2: with 2 the "
        f"notebooks that touch no FACTER run ({', '.join(SIDE_LANE)}) run in a side lane, another process "
        f"at nice {SIDE_NICE}, beside the others (their seconds can be inflated); 1: one notebook at a "
        "time, per-notebook times comparable with earlier runs; more than 2 is 2",
    )
    p.set_defaults(func=_cmd)


if __name__ == "__main__":  # the side lane's process (SideLane.command), never started by hand
    sys.exit(run_lane(json.loads(sys.argv[1])))
