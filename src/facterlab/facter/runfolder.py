"""Run folders written atomically, read back only when complete, and degenerate outputs made visible.

Writing (:func:`write_run_folder`): every file goes to a hidden temporary folder beside the final
one (``<runs>/.tmp-<run_id>-<pid>-<random>/``), ``metrics.json`` last, each file flushed to disk;
then the folder is renamed into place.  A rerun that replaces an existing folder first renames the
old one aside (``.old-...``), renames the new one in, then deletes the old one.  The swap holds a lock
on the runs folder (:func:`facterlab.paths.locked`), so that two processes writing the same run id
take turns and both succeed, leaving one complete folder.  A process killed at
any moment therefore leaves either the previous complete folder, or no folder plus hidden leftovers
(removed by the next write of the same run id), never a folder with a truncated file.

Reading (:func:`facterlab.facter.record.run_folder_problem`): a folder counts as a saved run only if every file is there
and loads (JSON parses, each parquet file reads); otherwise the reason is returned and
:func:`facterlab.facter.record.find` treats the run as missing and says why.  :func:`facterlab.facter.pipeline.read_run_folder`
reads a complete folder back (its record: :meth:`facterlab.facter.record.RunRecord.load`).

Degenerate outputs (:func:`degenerate_summary`, :func:`mark_degenerate`): per method, the rows whose
answer gave no usable title (empty or unparseable output) and whether every row got the same list.
When every row of a method is degenerate, its fairness metrics (CFR, SNSR, violations) would only
measure the absence of output (CFR 0, SNSR 0, Q0 = max distance so no violation): they become
missing values with the reason instead.  Recall and NDCG stay numbers (an empty list has no hit).
"""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

import pandas as pd

from facterlab.datatypes import MissingValue
from facterlab.facter.record import (
    METHODS,
    RUN_FILES,
    Degenerate,
    MethodMetrics,
    RunMetrics,
    RunRecord,
    run_folder_problem,
)
from facterlab.paths import locked, remove_dead_temps

__all__ = ["METHODS", "RUN_FILES", "run_folder_problem", "write_run_folder", "degenerate_summary", "mark_degenerate"]


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
