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
import sys
import time
from collections.abc import Iterable
from dataclasses import asdict, dataclass, field
from pathlib import Path

from facterlab import paths, threads
from facterlab.config import results_dir
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
) -> list:
    """Execute the notebooks with papermill; return one :class:`NotebookRun` each (never raises on
    a notebook's failure: the caller decides).  Writes ``results/reproduce_timings.json``.

    ``extra``: ``--set`` values (text or Python values), validated against the selected notebooks'
    declared parameters before anything runs (:class:`ParameterError`).  ``report``: whether this is
    the report run that writes the committed ``figures/`` (default: ``profile == "default"``, no
    ``extra`` and dataset ``auto`` resolving to the report's own dataset, :data:`REPORT_DATASET`);
    ``download``: under the default profile without data, fetch MovieLens-100K first
    (:func:`choose_dataset`); ``cwd`` default: the project root.

    ``log(line)`` (default: print and flush) gets a line when each notebook starts and ends (with its
    wall time) and, as they come, the kernel's output lines (facterlab's log lines: phases, cached vs
    new predictions, time left) prefixed with ``[<notebook>]``."""
    import papermill

    if log is None:
        log = _say

    params = kernel_parameters(profile, extra)
    if data_dir is not None:
        os.environ["FACTERLAB_DATA"] = str(Path(data_dir).expanduser().resolve())
    choice = choose_dataset(profile, extra, download=download, log=log)
    if report is None:
        report = profile == "default" and not extra and choice.dataset == REPORT_DATASET
    cwd = Path(cwd) if cwd is not None else paths.project_root()
    nb_dir = Path(notebooks_dir)
    if not nb_dir.is_absolute():
        nb_dir = cwd / nb_dir
    out = Path(out)
    if not out.is_absolute():
        out = cwd / out
    out.mkdir(parents=True, exist_ok=True)
    notebooks = discover_notebooks(nb_dir, only)
    if not notebooks:
        raise FileNotFoundError(f"no notebooks matched in {nb_dir}" + (f" for --only {only!r}" if only else ""))
    # a notebook without a tagged parameters cell (one a user added) takes no parameters: it runs as it is
    declared_by = {nb.stem: declared_in_notebook(nb, missing_ok=True) for nb in notebooks}
    typed_extra = check_extra(dict(extra or {}), declared_by)  # before any notebook runs
    for nb in notebooks:  # the profile's values fit every notebook's declared types
        passed, _ = filter_parameters({**params, **typed_extra[nb.stem]}, declared_by[nb.stem])
        resolve(declared_by[nb.stem], passed, where=nb.stem)
    runs = []
    t_all = time.perf_counter()
    saved_env = {k: os.environ.get(k) for k in (*threads.MANAGED_VARS, paths.ENV_REPORT, "FACTERLAB_NOTEBOOK")}
    _set_env({paths.ENV_REPORT: "1" if report else None})  # the kernels inherit it
    where, fig_dir = report_line(report, choice.dataset, profile, extra), paths.figures_dir()
    log(f"[reproduce] dataset: {choice.describe()}")
    log(f"[reproduce] {where}")
    try:
        for nb in notebooks:
            passed, skipped = filter_parameters({**params, **typed_extra[nb.stem]}, declared_by[nb.stem])
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
            runs.append(
                NotebookRun(
                    nb.stem, time.perf_counter() - t0, status, str(target), passed, skipped, error, plan.describe()
                )
            )
            log(
                f"[reproduce] {nb.name}: {status} in {runs[-1].seconds:.1f} s "
                f"(total {time.perf_counter() - t_all:.1f} s)"
            )
        log(f"[reproduce] dataset: {choice.describe()}")
        log(f"[reproduce] {where}")
    finally:
        _set_env(saved_env)
    total = time.perf_counter() - t_all  # unrounded: the total is never below the sum of its parts
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
                "total_seconds": total,
                "notebooks": [asdict(r) for r in runs],
            },
            indent=2,
            default=str,
        )
    )
    return runs


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


def report_line(report: bool, dataset: str, profile: str, extra: dict | None = None) -> str:
    """Where this run's figures and tables go, and why (one line)."""
    if report:
        return f"report run: figures and tables -> {paths.report_figures_dir()} (the committed report)"
    if profile != "default" or extra:
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


def timings_table(runs: list, profile: str = "") -> str:
    """A plain-text table: notebook, status, wall time, and the total."""
    width = max([len(r.notebook) for r in runs] + [8])
    lines = [f"{'notebook':<{width}}  {'status':<6}  {'seconds':>8}", "-" * (width + 18)]
    for r in runs:
        lines.append(f"{r.notebook:<{width}}  {r.status:<6}  {r.seconds:>8.1f}")
    total = sum(r.seconds for r in runs)
    lines.append("-" * (width + 18))
    lines.append(f"{'total' + (f' (profile {profile})' if profile else ''):<{width}}  {'':<6}  {total:>8.1f}")
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
    try:
        runs = run_notebooks(
            profile=args.profile,
            only=args.only,
            data_dir=args.data_dir,
            out=Path(args.out).resolve() if args.out else "build/notebooks",  # default: under the project root
            extra=_parse_set(args.set),
            report=args.report,
            download=args.download,
        )
    except ParameterError as exc:
        print(f"facterlab reproduce: {exc}", file=sys.stderr)
        return 2
    print(timings_table(runs, args.profile))
    failed = [r for r in runs if r.status != "ok"]
    if failed:
        print(f"\nfacterlab reproduce: {len(failed)} of {len(runs)} notebook(s) failed:", file=sys.stderr)
        for r in failed:
            print(f"  {r.notebook}: {r.error}  (executed copy: {r.output})", file=sys.stderr)
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
    p.set_defaults(func=_cmd)
