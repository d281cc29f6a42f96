"""Run folders written atomically, read back only when complete, and degenerate outputs made visible.

Writing (:func:`write_run_folder`): every file goes to a hidden temporary folder beside the final
one (``<runs>/.tmp-<run_id>-<pid>-<random>/``), ``metrics.json`` last, each file flushed to disk;
then the folder is renamed into place.  A rerun that replaces an existing folder first renames the
old one aside (``.old-...``), renames the new one in, then deletes the old one.  The swap holds a lock
on the runs folder (:func:`facterlab.paths.locked`), so that two processes writing the same run id
take turns and both succeed, leaving one complete folder.  A process killed at
any moment therefore leaves either the previous complete folder, or no folder plus hidden leftovers
(removed by the next write of the same run id), never a folder with a truncated file.

Checking, finding and reading (:func:`run_folder_problem`, :func:`find`, :func:`run_folders`,
:func:`resolve_prefix`, :func:`read_run_folder`): a folder counts as a saved run only if every file is
there and loads (JSON parses, each parquet file reads); otherwise the reason is returned and
:func:`find` treats the run as missing and says why.  :func:`read_run_folder` reads a complete folder
back as a :class:`RunResult` (its record: :meth:`facterlab.facter.record.RunRecord.load`).  Every job on
run folders (check, find, list, read, write) lives in this module; what the files say is
:mod:`facterlab.facter.record`.

Read once (issue 45): a folder that :func:`find` has checked is remembered in this process with the
``(name, inode, mtime, size)`` of each of its files, and the record it loaded; :func:`read_run_folder`
of that folder, while no file changed, takes the record from that check instead of reading it again.
The check reads each parquet file's footer (a truncated or foreign file fails it) but not its rows;
the rows and the calibration table are read when first used (:class:`LazyFrames`), once, and a file
that fails then is named in one line.  So a notebook that looks its runs up section after section
reads each folder's JSON once and each parquet file at most once.

Degenerate outputs (:func:`degenerate_summary`, :func:`mark_degenerate`): per method, the rows whose
answer gave no usable title (empty or unparseable output) and whether every row got the same list.
When every row of a method is degenerate, its fairness metrics (CFR, SNSR, violations) would only
measure the absence of output (CFR 0, SNSR 0, Q0 = max distance so no violation): they become
missing values with the reason instead.  Recall and NDCG stay numbers (an empty list has no hit).
"""

from __future__ import annotations

import copy
import logging
import os
import shutil
import tempfile
import threading
from collections import OrderedDict
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

from facterlab.datatypes import MissingValue
from facterlab.facter.record import (
    METHODS,
    Degenerate,
    MethodMetrics,
    RecordError,
    RunMetrics,
    RunRecord,
)
from facterlab.paths import locked, remove_dead_temps
from facterlab.safeio import FileLimitError, read_json

log = logging.getLogger(__name__)

__all__ = [
    "METHODS",
    "RUN_FILES",
    "RunResult",
    "run_folder_problem",
    "find",
    "run_folders",
    "resolve_prefix",
    "read_run_folder",
    "write_run_folder",
    "degenerate_summary",
    "mark_degenerate",
]


# ---------------------------------------------------------------------------------------------
# writing


def _fsync_file(path: Path) -> None:
    with open(path, "rb") as fh:
        os.fsync(fh.fileno())


def _fsync_dir(path: Path) -> None:
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def write_run_folder(out: Path, record: RunRecord, calibration: pd.DataFrame, rows: dict) -> Path:
    """Write a run folder at ``out`` atomically (module docstring): the record's JSON files
    (:meth:`RunRecord.save`, ``metrics.json`` last), the calibration table and the rows; return ``out``.

    Parameters
    ----------
    out : pathlib.Path
        The final folder, ``<results>/runs/<run_id>``.
    record : facterlab.facter.record.RunRecord
        The run's record (config, metrics, timings, meta).
    calibration : pandas.DataFrame
        The calibration table.
    rows : dict of str to pandas.DataFrame
        Each method's rows.

    Returns
    -------
    pathlib.Path
        ``out``, complete.
    """
    out = Path(out)
    runs = out.parent
    runs.mkdir(parents=True, exist_ok=True)
    remove_dead_temps(runs, out.name)
    tmp = Path(tempfile.mkdtemp(prefix=f".tmp-{out.name}-{os.getpid()}-", dir=runs))
    try:
        calibration.to_parquet(tmp / "calibration.parquet", index=False)
        for m, df in rows.items():
            df.to_parquet(tmp / f"rows_{m}.parquet", index=False)
        record.save(tmp)  # config.json, timings.json, run.json, then metrics.json last
        for f in tmp.iterdir():
            _fsync_file(f)
        _fsync_dir(tmp)
        old = None
        with locked(runs):  # two writers of one run id take turns: each swap is whole, none fails
            if out.exists() or out.is_symlink():
                old = Path(tempfile.mkdtemp(prefix=f".old-{out.name}-{os.getpid()}-", dir=runs))
                os.rmdir(old)
                os.replace(out, old)
            os.replace(tmp, out)
            _fsync_dir(runs)
        if old is not None:
            shutil.rmtree(old, ignore_errors=True)
    except OSError as exc:  # a full disk: name the run folder when the writer (pyarrow) did not
        if exc.filename is None:
            raise OSError(exc.errno, f"{exc.strerror or exc}", str(out)) from exc
        raise
    finally:
        if tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)
    return out


# ---------------------------------------------------------------------------------------------
# reading


#: the files of a complete run folder (``timings.json`` and ``run.json`` are informative and optional)
RUN_FILES = ("config.json", "calibration.parquet", *(f"rows_{m}.parquet" for m in METHODS), "metrics.json")


def run_folder_problem(path: Path, full: bool = True) -> str | None:
    """None when ``path`` holds a complete run that loads; else why not (one sentence).

    Parameters
    ----------
    path : pathlib.Path
        A run folder.
    full : bool, default True
        Read every parquet file whole; False reads only each one's footer (its schema and row count:
        a truncated file fails), as :func:`find` does before the rows are read lazily.

    Returns
    -------
    str or None
        None when every file is there and loads, else the reason.
    """
    path = Path(path)
    if not path.is_dir():
        return f"{path} does not exist" if not path.exists() else f"{path} is not a folder"
    missing = [f for f in RUN_FILES if not (path / f).is_file()]
    if missing:
        return f"{path} lacks {', '.join(missing)} (an interrupted or partial run)"
    for f in ("config.json", "metrics.json"):
        try:
            obj = read_json(path / f, what="run record file")
        except FileLimitError as exc:  # names the file and the limit itself
            return str(exc)
        except (OSError, ValueError) as exc:
            return f"{path / f} does not load ({type(exc).__name__}: {str(exc)[:120]})"
        if not isinstance(obj, dict):
            return f"{path / f} is not a JSON object"
    for f in RUN_FILES:
        if f.endswith(".parquet"):
            try:
                import pyarrow.parquet as pq

                pq.read_metadata(path / f)
                if full:
                    pd.read_parquet(path / f)
            except Exception as exc:  # noqa: BLE001 - ArrowInvalid, OSError...: any failure means incomplete
                return f"{path / f} does not load ({type(exc).__name__}: {str(exc)[:120]})"
    return None


def find(runs_dir: os.PathLike | str, run_id: str) -> Path | None:
    """The folder ``<runs_dir>/<run_id>`` when it holds a complete run that loads, else None.

    A folder that does not load completely (a file missing, truncated or unreadable) counts as missing:
    a warning names the file and the reason (the run is then redone and its rename replaces the folder).

    Parameters
    ----------
    runs_dir : path-like
        The folder of run folders.
    run_id : str
        The run's id.

    Returns
    -------
    pathlib.Path or None
        The complete folder, or None (with a warning when an incomplete one is there).
    """
    p = Path(runs_dir) / run_id
    if not p.exists():
        return None
    problem = _check(p)[1]
    if problem is not None:
        log.warning("saved run ignored (counts as missing, will be redone): %s", problem)
        return None
    return p


#: the folders :func:`find` checked in this process: folder -> (its files' stamp, the record it loaded)
_CHECKED: OrderedDict = OrderedDict()
_CHECKED_MAX = 1024
_CHECKED_LOCK = threading.Lock()


def _stamp(path: Path) -> tuple | None:
    """``(name, inode, mtime_ns, size)`` of each file of a folder, by name; None when it cannot be listed."""
    try:
        with os.scandir(path) as it:
            out = []
            for e in it:
                if e.is_file():
                    st = e.stat()
                    out.append((e.name, st.st_ino, st.st_mtime_ns, st.st_size))
    except OSError:
        return None
    return tuple(sorted(out))


def _remembered(path: Path, stamp: tuple | None) -> RunRecord | None:
    if stamp is None:
        return None
    key = str(path.resolve())
    with _CHECKED_LOCK:
        got = _CHECKED.get(key)
        if got is None or got[0] != stamp:
            return None
        _CHECKED.move_to_end(key)
        return got[1]


def _check(path: Path) -> tuple:
    """``(record, None)`` for a complete run folder (from this process's earlier check while no file
    changed), else ``(None, why not)``."""
    stamp = _stamp(path)
    record = _remembered(path, stamp)
    if record is not None:
        return record, None
    problem = run_folder_problem(path, full=False)
    if problem is not None:
        return None, problem
    try:
        record = RunRecord.load(path)
    except RecordError as exc:
        return None, str(exc)
    if stamp is not None and stamp == _stamp(path):  # unchanged while it was read: remembered
        with _CHECKED_LOCK:
            _CHECKED[str(path.resolve())] = (stamp, record, None)
            while len(_CHECKED) > _CHECKED_MAX:
                _CHECKED.popitem(last=False)
    return record, None


def run_folders(runs_dir: os.PathLike | str) -> list:
    """The run folders under ``runs_dir`` (hidden temporary folders excluded), by name.

    Parameters
    ----------
    runs_dir : path-like
        The folder of run folders.

    Returns
    -------
    list of pathlib.Path
        The run folders, by name.
    """
    base = Path(runs_dir)
    if not base.is_dir():
        return []
    return sorted(p for p in base.iterdir() if p.is_dir() and not p.name.startswith("."))


def resolve_prefix(runs_dir: os.PathLike | str, prefix: str) -> Path:
    """The one run folder whose id starts with ``prefix``; ValueError when none or several.

    Parameters
    ----------
    runs_dir : path-like
        The folder of run folders.
    prefix : str
        The start of a run id.

    Returns
    -------
    pathlib.Path
        The one matching folder (ValueError otherwise).
    """
    hits = [p for p in run_folders(runs_dir) if p.name.startswith(prefix)]
    if not hits:
        raise ValueError(f"no run id starts with {prefix!r} under {runs_dir}")
    if len(hits) > 1:
        raise ValueError(f"run id prefix {prefix!r} is ambiguous under {runs_dir}: {', '.join(p.name for p in hits)}")
    return hits[0]


def _read_frame(path: Path) -> pd.DataFrame:
    """A run folder's parquet file, or :class:`RecordError` naming it in one line."""
    try:
        return pd.read_parquet(path)
    except Exception as exc:  # noqa: BLE001 - ArrowInvalid, OSError...: the file is named, the run can be redone
        raise RecordError(
            f"{path} does not load ({type(exc).__name__}: {str(exc)[:120]}); delete {path.parent} to redo the run"
        ) from None


class LazyFrames(Mapping):
    """Name -> DataFrame, each read from its parquet file when first asked for, then kept.

    The frames are shared by every :class:`RunResult` read from the same unchanged folder in this
    process (:func:`read_run_folder`): treat them as read-only (``.copy()`` one before changing it).

    Parameters
    ----------
    files : Mapping of str to pathlib.Path
        Name -> parquet file.
    """

    def __init__(self, files: Mapping) -> None:
        self._files = {k: Path(v) for k, v in files.items()}
        self._frames: dict = {}
        self._lock = threading.Lock()

    def __getitem__(self, key: str) -> pd.DataFrame:
        got = self._frames.get(key)
        if got is None:
            path = self._files[key]  # KeyError for an unknown name, as a dict
            with self._lock:
                got = self._frames.get(key)
                if got is None:
                    got = self._frames[key] = _read_frame(path)
        return got

    def __iter__(self) -> Iterator[str]:
        return iter(self._files)

    def __len__(self) -> int:
        return len(self._files)

    def view(self, names) -> LazyFrames:
        """The same frames (read once for both) under ``names`` only."""
        out = LazyFrames({k: self._files[k] for k in names})
        out._frames, out._lock = self._frames, self._lock
        return out

    def loaded(self) -> list:
        """The names read so far."""
        return [k for k in self._files if k in self._frames]

    def __repr__(self) -> str:
        return f"LazyFrames({list(self._files)}, loaded={self.loaded()})"


@dataclass
class RunResult:
    """What :func:`run_experiment` returns (docs/CONTRACTS.md): the typed ``record``
    (:class:`facterlab.facter.record.RunRecord`; read this), the rows and calibration table, and
    ``config``/``metrics``/``timings`` as the JSON dicts of the run folder (for JSON output only).

    Parameters
    ----------
    run_id : str
        ``<config_hash>-<8 hex>`` (:func:`run_id_for`).
    config : dict
        ``config.json`` as a dict.
    metrics : dict
        ``metrics.json`` as a dict.
    rows : Mapping of str to pandas.DataFrame
        Method name -> its monitor records (``rows_<method>.parquet``; read back from a folder: a
        :class:`LazyFrames`, each read when first used).
    calibration : pandas.DataFrame
        The calibration table (``calibration.parquet``), one row per calibration row (read back from a
        folder: read when first used).
    out_dir : pathlib.Path
        The run folder.
    timings : dict, default {}
        Seconds per phase (``timings.json``).
    record : RunRecord or None, default None
        The typed run record.

    See Also
    --------
    facterlab.facter.run_experiment : makes a run and returns its RunResult.
    facterlab.facter.read_run_folder : a saved run read back.
    facterlab.facter.record.RunRecord : the typed record (config, metrics, timings, meta).
    facterlab.facter.commands.headline_table : the table ``facterlab run`` prints.

    Examples
    --------
    A tiny simulated run (as in :func:`~facterlab.facter.run_experiment`'s example), its record, its rows,
    and the same run read back from its folder:

    >>> import os, tempfile
    >>> from unittest import mock
    >>> from facterlab import preset
    >>> from facterlab.facter import read_run_folder, run_experiment
    >>> cfg = preset("repro", data__dataset="synthetic", data__n_rows=40, model__llm="simulated",
    ...              model__encoder="hash-encoder", sim__beta=2.0, facter__passes=2)
    >>> scratch = tempfile.mkdtemp()
    >>> with mock.patch.dict(os.environ, FACTERLAB_CACHE=scratch):
    ...     run = run_experiment(cfg, out_dir=scratch, progress=False)
    >>> sorted(p.name for p in run.out_dir.iterdir())  # doctest: +NORMALIZE_WHITESPACE
    ['calibration.parquet', 'config.json', 'metrics.json', 'rows_facter.parquet', 'rows_fair.parquet',
     'rows_neutral.parquet', 'run.json', 'timings.json']
    >>> rec = run.record  # the typed record: read its attributes, not the JSON dicts
    >>> rec.config.setting("model.llm"), rec.config.setting("sim.beta"), rec.metrics.calibration.n
    ('simulated', 2.0, 28)
    >>> cal = rec.metrics.calibration
    >>> round(cal.q0, 2), round(cal.alpha, 2)
    (1.05, 0.1)
    >>> flat = rec.metrics.methods["facter"].flat()  # the keys tables use
    >>> round(flat["cfr_multi"], 2), flat["violations_adaptive_pass1"]
    (0.54, 1.0)
    >>> len(run.rows["facter"]), len(run.calibration)  # FACTER: one row per test row and pass
    (24, 28)
    >>> again = read_run_folder(run.out_dir)
    >>> again.run_id == run.run_id, again.record == run.record
    (True, True)
    """

    run_id: str
    config: dict
    metrics: dict
    rows: Mapping
    calibration: pd.DataFrame
    out_dir: Path
    timings: dict = field(default_factory=dict)
    record: RunRecord | None = None

    @classmethod
    def of_record(
        cls,
        record: RunRecord,
        rows: Mapping,
        calibration: pd.DataFrame | Callable[[], pd.DataFrame],
        out_dir: Path,
    ) -> RunResult:
        """A RunResult whose JSON dicts are derived from ``record``.

        Parameters
        ----------
        record : RunRecord
            The typed run record.
        rows : Mapping of str to pandas.DataFrame
            Method name -> its records.
        calibration : pandas.DataFrame or callable
            The calibration table, or a function that reads it (called when first used).
        out_dir : path-like
            The run folder.

        Returns
        -------
        RunResult
        """
        parts = record.parts()
        return cls(
            run_id=record.run_id,
            config=parts["config.json"],
            metrics=parts["metrics.json"],
            rows=rows,
            calibration=calibration,  # a reader: the property reads it when used
            out_dir=Path(out_dir),
            timings=dict(record.timings),
            record=record,
        )


def _get_calibration(self: RunResult) -> pd.DataFrame:
    got = self.__dict__["_calibration"]
    if callable(got):  # read back from a folder: read when first used
        got = got()
    return got


def _set_calibration(self: RunResult, value: pd.DataFrame | Callable[[], pd.DataFrame]) -> None:
    self.__dict__["_calibration"] = value


# the dataclass's __init__, __eq__ and __repr__ go through this property: a folder's table is read when first used
RunResult.calibration = property(_get_calibration, _set_calibration)


def read_run_folder(path: os.PathLike | str) -> RunResult:
    """A :class:`RunResult` read back from a run folder: its record (config,
    metrics, timings, meta), rows and calibration table.  :class:`facterlab.facter.record.RecordError`
    names the file and key of a malformed record.

    Parameters
    ----------
    path : path-like
        The run folder (``<results>/runs/<run_id>``).

    Returns
    -------
    RunResult
        With ``rows`` for every method of ``METHODS`` and ``out_dir = path``.

    See Also
    --------
    RunResult : its example makes a run and reads it back with this function.
    facterlab.facter.record.RunRecord.load : the record alone (the JSON files), no rows.
    facterlab.facter.runfolder.run_folders : the complete run folders under a results folder.
    """
    path = Path(path)
    stamp = _stamp(path)
    key = str(path.resolve())
    with _CHECKED_LOCK:
        got = _CHECKED.get(key)
        if got is not None and got[0] == stamp:
            _CHECKED.move_to_end(key)
    if got is None or got[0] != stamp:  # not checked by find() in this process, or changed since
        got = (stamp, RunRecord.load(path), None)
        if stamp is not None:
            with _CHECKED_LOCK:
                _CHECKED[key] = got
    _, record, frames = got
    if frames is None:  # one set of lazily read frames per unchanged folder
        files = {m: path / f"rows_{m}.parquet" for m in METHODS} | {"calibration": path / "calibration.parquet"}
        frames = LazyFrames(files)
        with _CHECKED_LOCK:
            if _CHECKED.get(key, (None,))[0] == stamp:
                _CHECKED[key] = (stamp, record, frames)
    rows = frames.view(METHODS)
    return RunResult.of_record(
        copy.deepcopy(record), rows=rows, calibration=lambda: frames["calibration"], out_dir=path
    )


# ---------------------------------------------------------------------------------------------
# degenerate outputs


def degenerate_summary(records: pd.DataFrame) -> dict:
    """Degenerate answers among the rows of one method (its last pass when ``pass`` is a column).

    ``n_empty``: rows whose answer gave no usable title (empty or unparseable output: parse status
    ``"empty"`` or no titles); ``n_distinct_lists``; ``constant``: every row got the same (non-empty)
    list; ``n_degenerate``: ``n_empty``, or every row when the list is constant; ``all_degenerate``.

    Parameters
    ----------
    records : pandas.DataFrame
        One method's rows, with ``titles`` and ``parse_status`` (and ``pass``) columns.

    Returns
    -------
    dict
        ``n_rows``, ``n_empty``, ``n_distinct_lists``, ``constant``, ``n_degenerate``, ``all_degenerate``
        and, when all are degenerate, ``reason``.

    Examples
    --------
    >>> df = pd.DataFrame({"titles": [["A"], ["A"], ["A"]], "parse_status": ["ok", "ok", "ok"]})
    >>> s = degenerate_summary(df); s["constant"], s["n_degenerate"], s["all_degenerate"]
    (True, 3, True)
    >>> degenerate_summary(df.assign(titles=[["A"], [], ["B"]]))["n_empty"]
    1
    """
    rec = records
    if "pass" in rec.columns and len(rec):
        rec = rec[rec["pass"] == rec["pass"].max()]
    n = int(len(rec))
    titles = [tuple(str(t) for t in ts) for ts in rec["titles"]] if "titles" in rec.columns else [()] * n
    status = rec["parse_status"].astype(str).tolist() if "parse_status" in rec.columns else [""] * n
    empty = [len(t) == 0 or s == "empty" for t, s in zip(titles, status)]
    n_empty = int(sum(empty))
    lists = {t for t, e in zip(titles, empty) if not e}
    constant = n >= 2 and n_empty == 0 and len(lists) == 1
    n_deg = n if constant else n_empty
    out: dict[str, int | bool | str] = {
        "n_rows": n,
        "n_empty": n_empty,
        "n_distinct_lists": len(lists),
        "constant": bool(constant),
        "n_degenerate": int(n_deg),
        "all_degenerate": bool(n > 0 and n_deg == n),
    }
    if out["all_degenerate"]:
        out["reason"] = (
            "every row got the same list"
            if constant
            else "no row's answer gave a usable title (empty or unparseable output)"
        )
    return out


def _mask_method(block: MethodMetrics, reason: str, violations_only: bool = False) -> None:
    miss = MissingValue(reason)
    block.violations = {k: [miss for _ in v] for k, v in block.violations.items()}
    if violations_only:
        return
    block.cfr_multi = miss
    block.cfr_single = {a: miss for a in block.cfr_single}
    block.snsr_proxy = {g: miss for g in block.snsr_proxy}


def mark_degenerate(metrics: RunMetrics, rows: dict, calibration: pd.DataFrame | None = None) -> RunMetrics:
    """Add degenerate-output counts to ``metrics`` (in place, and returned): per method
    ``degenerate`` (:func:`degenerate_summary`) and ``n_degenerate``; ``calibration.degenerate``.

    A method whose every row is degenerate gets its CFR, SNSR and violations replaced by missing values
    with the reason; when every calibration answer is degenerate, Q0 measures nothing and every method's
    violation counts become missing too.

    Parameters
    ----------
    metrics : RunMetrics
        The run's metrics record (changed in place).
    rows : dict of str to pandas.DataFrame
        Each method's rows.
    calibration : pandas.DataFrame, optional
        The calibration table.

    Returns
    -------
    RunMetrics
        ``metrics``, with the counts added and the masked values missing.
    """
    cal_reason = None
    if calibration is not None:
        cal = degenerate_summary(calibration)
        metrics.calibration.degenerate = Degenerate(**cal)
        if cal["all_degenerate"]:
            cal_reason = (
                f"degenerate calibration: {cal['reason']} ({cal['n_rows']} calibration rows), so Q0 measures nothing"
            )
    for m, block in metrics.methods.items():
        if m not in rows:
            continue
        s = degenerate_summary(rows[m])
        block.degenerate = Degenerate(**s)
        block.n_degenerate = int(s["n_degenerate"])
        if s["all_degenerate"]:
            _mask_method(block, f"degenerate output: {s['reason']} ({s['n_rows']} rows)")
        elif cal_reason:
            _mask_method(block, cal_reason, violations_only=True)
    return metrics
