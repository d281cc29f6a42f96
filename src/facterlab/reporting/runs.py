"""``facterlab runs list`` and ``facterlab runs compare A B``: the saved FACTER runs of a results folder.

``facterlab runs list [--results DIR] [--model M] [--dataset D] [--notebook NB]`` prints one line per
run folder under ``DIR/runs`` (default: the results folder, :func:`facterlab.config.results_dir`): id,
start time, dataset, model, the simulator's settings that differ from its defaults (``-`` for other
models), protocol, calibration/test rows, seed, code version, the notebooks that used the run and
status (``ok``, or why the folder does not load); the options keep the runs whose column contains the
text.  Runs made before ``run.json`` existed show ``n/a`` for start time and code version.

``facterlab runs compare A B [--results DIR] [--full | --all]`` prints the two runs side by side: the
run fields that differ, the config settings that differ, then the headline metrics that differ, per
method (``--full``: every flat metric (:meth:`RunMetrics.flat`) that differs, and every run field;
``--all``: every setting and metric).  ``A`` and ``B`` may be unique prefixes of run ids.

Formatting only: the record is read by :mod:`facterlab.facter.record`.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from facterlab import paths as _paths
from facterlab.config import SimulatorConfig, config_to_dict, results_dir
from facterlab.datatypes import MissingValue
from facterlab.facter.record import RecordError, RunRecord
from facterlab.facter.runfolder import resolve_prefix, run_folder_problem, run_folders
from facterlab.safeio import read_json

LIST_COLUMNS = ("run_id", "started", "dataset", "model", "sim", "protocol", "n", "seed", "code", "notebooks", "status")
#: what ``--model``, ``--dataset`` and ``--notebook`` match (a case-insensitive substring)
FILTERS = ("model", "dataset", "notebooks")
#: the headline metrics ``runs compare`` shows per method by default (``--full``: every metric that differs)
COMPACT_METRICS = (
    "ndcg@10_multi",
    "recall@10_multi",
    "valid@10",
    "snsr_joint",
    "cfr_multi",
    "violations_fixed_q0",
    "violations_adaptive",
    "violations_q_star",
    "violations_repro_count",
    "q0",
    "q_final",
    "n_degenerate",
)


def sim_text(config: dict) -> str:
    """The simulated recommender's settings that differ from their defaults, ``"beta=2 seed=3"``;
    ``"defaults"`` when none does; ``"-"`` for a run of another model (no ``sim`` section).

    >>> sim_text({"sim": {"beta": 2.0, "rho": 1.0}}), sim_text({"model": {"llm": "x"}})
    ('beta=2', '-')
    """
    sim = config.get("sim")
    if not isinstance(sim, dict):
        return "-"
    defaults = config_to_dict(SimulatorConfig())
    bits = [
        f"{k}={v:g}" if isinstance(v, float) else f"{k}={v}"
        for k, v in sorted(sim.items())
        if k in defaults and v != defaults[k]
    ]
    return " ".join(bits) if bits else "defaults"


def notebooks_of(results: os.PathLike | str) -> dict:
    """``run_id -> [notebook, ...]``: the notebooks whose ``<results>/<notebook>/metrics.json`` lists the
    run among its ``run_ids`` (a run reused by several notebooks is listed under each)."""
    out: dict = {}
    base = Path(results)
    if not base.is_dir():
        return out
    for mj in sorted(base.glob("*/metrics.json")):
        try:
            ids = read_json(mj, what="notebook metrics").get("run_ids") or []
        except (OSError, ValueError, AttributeError):
            continue
        for rid in ids if isinstance(ids, list) else []:
            out.setdefault(str(rid), []).append(mj.parent.name)
    return out


def _short_notebook(name: str) -> str:
    return name.split("_", 1)[0] if name[:2].isdigit() else name


def runs_dir(results: os.PathLike | str | None = None) -> Path:
    """``<results>/runs`` (``results`` defaults to the results folder); a folder that itself holds run
    folders (no ``runs`` inside) is taken as is."""
    base = results_dir(results)
    if any((p / "metrics.json").is_file() for p in base.iterdir() if p.is_dir()) if base.is_dir() else False:
        if not (base / "runs").is_dir():
            return base
    return _paths.runs_dir(results)


def list_rows(runs: os.PathLike | str, **filters: str | None) -> list:
    """One dict per run folder under ``runs`` (the columns of ``facterlab runs list``), oldest first;
    folders that do not load are listed with their problem as status.  ``sim``: the simulator's settings
    that differ from its defaults (:func:`sim_text`); ``notebooks``: the notebooks that used the run (their
    number, from ``<results>/<notebook>/metrics.json``; else the notebook named in ``run.json``'s command).
    ``filters``: ``model=``, ``dataset=``, ``notebooks=`` keep the rows whose column holds the text
    (case-insensitive; the full notebook names are matched)."""
    used = notebooks_of(Path(runs).parent)
    rows = []
    for folder in run_folders(runs):
        problem = run_folder_problem(folder)
        names: list = list(used.get(folder.name, []))
        try:
            rec = RunRecord.load(folder)
            cmd = rec.meta.command if rec.meta else ""
            if not names and cmd.startswith("notebook "):
                names = [Path(cmd.split(" ", 1)[1]).stem]
            row = {**rec.describe(), "sim": sim_text(rec.config.config), "status": problem or "ok"}
        except RecordError as exc:
            row = {c: "?" for c in LIST_COLUMNS}
            row.update(run_id=folder.name, status=f"does not load: {problem or exc}")
        row["notebooks"] = ",".join(_short_notebook(n) for n in names) or "-"
        full = {**row, "notebooks": " ".join(names)}
        if any(v and str(v).lower() not in str(full.get(k, "")).lower() for k, v in filters.items()):
            continue
        rows.append({c: "n/a" if row.get(c) is None else str(row.get(c)) for c in LIST_COLUMNS})
    return sorted(rows, key=lambda r: (r["started"].startswith(("n/a", "?")), r["started"], r["run_id"]))


def text_table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    """A plain-text table: columns padded to their widest cell, a dashed rule under the header."""
    widths = [max(len(str(x)) for x in col) for col in zip(header, *rows)]
    lines = ["  ".join(str(x).ljust(w) for x, w in zip(r, widths)).rstrip() for r in [header, *rows]]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(lines)


def format_list(runs: os.PathLike | str, **filters: str | None) -> str:
    """The text of ``facterlab runs list``: one line per run folder under ``runs`` that matches ``filters``."""
    rows = list_rows(runs, **filters)
    active = ", ".join(f"{k} ~ {v!r}" for k, v in filters.items() if v)
    where = f"under {runs}" + (f" matching {active}" if active else "")
    if not rows:
        return f"no runs {where}"
    return text_table(LIST_COLUMNS, [[r[c] for c in LIST_COLUMNS] for r in rows]) + f"\n{len(rows)} run(s) {where}"


def _fmt(v: Any) -> str:
    if isinstance(v, MissingValue):
        return f"n/a ({v.reason[:60]})"
    if isinstance(v, float):
        return f"{v:.4g}"
    return "n/a" if v is None else str(v)


def compare_rows(a: RunRecord, b: RunRecord, every: bool = False, full: bool = True) -> dict:
    """The sections of ``facterlab runs compare``: ``{"run": [...], "config": [...], "<method>": [...]}``,
    each a list of ``(key, value A, value B, B - A)`` strings; config and metrics keep only differences
    unless ``every``; ``full=False`` (the command's default) keeps only the run fields that differ (ids
    always) and the headline metrics (:data:`COMPACT_METRICS`)."""
    out: dict = {}
    ma, mb = a.metrics, b.metrics
    run: list[tuple[str, Any, Any]] = [("run_id", a.run_id, b.run_id)]
    for label, get in (
        ("started", lambda r: r.meta.started_at if r.meta else None),
        ("finished", lambda r: r.meta.finished_at if r.meta else None),
        ("code", lambda r: r.meta.code_version if r.meta else None),
        ("command", lambda r: r.meta.command if r.meta else None),
        ("host", lambda r: r.meta.host if r.meta else None),
    ):
        run.append((label, get(a), get(b)))
    for key in ("dataset", "model", "encoder", "protocol", "preset", "is_synthetic", "n_calib", "n_test"):
        run.append((key, ma.field_value(key), mb.field_value(key)))
    out["run"] = [(k, _fmt(x), _fmt(y), "") for k, x, y in run if every or full or k == "run_id" or x != y]
    sa, sb = a.config.settings(), b.config.settings()
    sa.update(
        {
            f"fingerprint.{k}": v
            for k, v in (("llm", a.config.fingerprints.llm), ("encoder", a.config.fingerprints.encoder))
        }
    )
    sb.update(
        {
            f"fingerprint.{k}": v
            for k, v in (("llm", b.config.fingerprints.llm), ("encoder", b.config.fingerprints.encoder))
        }
    )
    sa["content_hash"], sb["content_hash"] = a.config.content_hash, b.config.content_hash
    out["config"] = [
        (k, _fmt(sa.get(k)), _fmt(sb.get(k)), "") for k in sorted(set(sa) | set(sb)) if every or sa.get(k) != sb.get(k)
    ]
    for method in dict.fromkeys([*ma.methods, *mb.methods, "random_floor"]):
        fa, fb = ma.flat(method) or {}, mb.flat(method) or {}
        if not fa and not fb:
            continue
        rows = []
        for k in dict.fromkeys([*fa, *fb]):
            if not (every or full) and k not in COMPACT_METRICS:
                continue
            x, y = fa.get(k), fb.get(k)
            if not every and x == y:
                continue
            delta = f"{y - x:+.4g}" if isinstance(x, float) and isinstance(y, float) else ""
            rows.append((k, _fmt(x), _fmt(y), delta))
        out[method] = rows
    return out


def format_compare(a: RunRecord, b: RunRecord, every: bool = False, full: bool = True) -> str:
    """The text of ``facterlab runs compare``: the fields of runs ``a`` and ``b`` that differ, side by side."""
    parts = []
    for section, rows in compare_rows(a, b, every, full).items():
        title = {"run": "run", "config": "config (settings that differ)"}.get(section, f"metrics: {section}")
        if section == "run" and not (every or full):
            title += " (fields that differ)"
        if section not in ("run", "config") and not every:
            title += " (values that differ)" if full else " (headline values that differ)"
        parts.append(f"== {title}")
        parts.append(text_table(("key", "A", "B", "B - A"), rows) if rows else "(no differences)")
    if not (every or full):
        parts.append("(compact: --full shows every metric that differs, --all every setting and metric)")
    return "\n".join(parts)


def register(subparsers) -> None:
    """Add the ``runs`` command (``list``, ``compare``) to the ``facterlab`` parser."""
    p = subparsers.add_parser("runs", help="list the saved runs, or compare two side by side")
    sub = p.add_subparsers(dest="runs_command", metavar="list|compare")
    ls = sub.add_parser("list", help="one line per saved run: id, start, dataset, model, protocol, n, seed, code")
    ls.add_argument("--results", default=None, help="results folder (default: $FACTERLAB_RESULTS or ./results)")
    ls.add_argument("--model", default=None, help="only runs whose model name contains this text")
    ls.add_argument("--dataset", default=None, help="only runs whose dataset contains this text")
    ls.add_argument("--notebook", default=None, help="only runs used by a notebook whose name contains this text")
    ls.set_defaults(func=cmd_list)
    cmp = sub.add_parser("compare", help="config and metric differences of two runs (ids may be prefixes)")
    cmp.add_argument("a", help="run id or a unique prefix")
    cmp.add_argument("b", help="run id or a unique prefix")
    cmp.add_argument("--results", default=None, help="results folder (default: $FACTERLAB_RESULTS or ./results)")
    cmp.add_argument("--full", action="store_true", help="every metric that differs (default: the headline ones)")
    cmp.add_argument("--all", action="store_true", help="show every setting and metric, not only differences")
    cmp.set_defaults(func=cmd_compare)
    p.set_defaults(func=lambda args: p.print_help() or 2)


def cmd_list(args) -> int:
    """``facterlab runs list``: print :func:`format_list` for the results folder."""
    print(format_list(runs_dir(args.results), model=args.model, dataset=args.dataset, notebooks=args.notebook))
    return 0


def cmd_compare(args) -> int:
    """``facterlab runs compare A B``: print :func:`format_compare` of two runs (ids may be prefixes)."""
    base = runs_dir(args.results)
    a, b = (RunRecord.load(resolve_prefix(base, x)) for x in (args.a, args.b))
    print(format_compare(a, b, every=args.all, full=args.full))
    return 0
