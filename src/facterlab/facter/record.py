"""The typed run record: one owner for what a FACTER run folder says about the run.

A run folder ``<results>/runs/<run_id>/`` (written, checked, found, listed and read by
:mod:`facterlab.facter.runfolder`) holds four JSON files that together make a :class:`RunRecord`:

- ``config.json``  -> :class:`RunConfigRecord` (resolved config, its hash, data and model fingerprints)
- ``metrics.json`` -> :class:`~facterlab.facter.record_metrics.RunMetrics` (run-level fields, calibration,
  one :class:`~facterlab.facter.record_metrics.MethodMetrics` per method; these classes live in
  :mod:`facterlab.facter.record_metrics` and are re-exported here)
- ``timings.json`` -> ``dict`` phase -> seconds (optional: wall times, the one file allowed to differ)
- ``run.json``     -> :class:`RunMeta` (start/finish time, code version, command, host; optional:
  folders written before it existed have none).  It is not part of the run id: reruns still reuse.

The JSON on disk is what :func:`facterlab.facter.runfolder.write_run_folder` has always written:
:meth:`RunRecord.load` of an existing folder followed by :meth:`RunRecord.save` gives byte-identical
files (unknown keys are kept in each part's ``extra``).  A malformed record raises
:class:`RecordError` naming the file and the key.  A missing value is one type everywhere:
:class:`facterlab.datatypes.MissingValue` (on disk ``{"value": null, "missing_reason": ...}``).

Reporting reads attributes (``record.metrics.methods["facter"].cfr_multi``) or the flat view
(:meth:`~facterlab.facter.record_metrics.RunMetrics.flat`: ``key -> float | MissingValue``), never dict
paths.  The schema section of docs/CONTRACTS.md is generated from these dataclasses (:func:`schema_markdown`).
"""

from __future__ import annotations

import dataclasses
import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, get_args, get_origin

from facterlab.config import ADDED_FIELDS, saved_setting
from facterlab.datatypes import MissingValue
from facterlab.facter.codec import UNIONS as _UNIONS
from facterlab.facter.codec import RecordError
from facterlab.facter.codec import absent_field as _absent
from facterlab.facter.codec import decode_dataclass as _decode_dataclass
from facterlab.facter.codec import encode_dataclass as _encode_dataclass
from facterlab.facter.codec import extra_field as _extra
from facterlab.facter.codec import is_value_type as _is_value_type
from facterlab.facter.codec import record_field as _f
from facterlab.facter.codec import type_hints as _hints

# re-exported: these lived here before the record was split along its seams (issue 32); old imports work
from facterlab.facter.provenance import code_version, host_line, run_command, utc_now  # noqa: F401
from facterlab.facter.record_metrics import (  # noqa: F401
    Calibration,
    Degenerate,
    MethodMetrics,
    RandomFloor,
    RunMetrics,
    SnsrGroup,
)
from facterlab.facter.values import Value, as_value, missing_json, to_json, value_or_nan  # noqa: F401
from facterlab.safeio import FileLimitError, read_json

METHODS = ("neutral", "fair", "facter")
ATTRIBUTES = ("gender", "age", "occupation")
#: the JSON files of a record: (attribute of RunRecord, file name, required)
RECORD_FILES = (
    ("config", "config.json", True),
    ("timings", "timings.json", False),
    ("meta", "run.json", False),
    ("metrics", "metrics.json", True),  # last: its presence marks a complete record
)


# ---------------------------------------------------------------------------------------------
# the record's parts (those of metrics.json: facterlab.facter.record_metrics)


@dataclass
class Fingerprints:
    """Model fingerprints (model files, dtype, decoding, parser version): part of the run id."""

    llm: str = _f("recommender fingerprint")
    encoder: str = _f("encoder fingerprint")
    extra: dict = _extra()
    absent: frozenset = _absent()


@dataclass
class RunConfigRecord:
    """``config.json``: what the run id hashes."""

    run_id: str = _f("the run id")
    config: dict = _f("the resolved RunConfig (config.config_to_dict)", factory=dict)
    config_hash: str = _f("hash of the config (first part of the run id)")
    dataset_requested: str = _f("data.dataset as requested (auto, ml-100k...)")
    dataset: str = _f("dataset actually used")
    is_synthetic: bool = _f("synthetic data")
    domain: str = _f("movies | products")
    data_config: dict = _f("the data config of the interactions", factory=dict)
    content_hash: str = _f("hash of the interactions' content")
    fingerprints: Fingerprints = _f("model fingerprints", factory=Fingerprints)
    extra: dict = _extra()
    absent: frozenset = _absent()

    def to_json(self) -> dict:
        """The JSON object of ``config.json`` (keys in schema order, then the extra keys)."""
        return _encode_dataclass(self)

    def setting(self, name: str) -> Any:
        """A setting of the resolved run config by its dotted name (``"seed"``, ``"model.llm"``,
        ``"sim"``); None when the run's config has no such setting (older runs).

        >>> RunConfigRecord(config={"seed": 3, "model": {"llm": "fake"}}).setting("model.llm")
        'fake'
        """
        node: Any = self.config
        parts = name.split(".")
        if len(parts) == 2 and tuple(parts) in ADDED_FIELDS:  # left out at its earlier value
            return saved_setting(self.config, parts[0], parts[1])
        for part in parts:
            if not isinstance(node, dict) or part not in node:
                return None
            node = node[part]
        return node

    def settings(self) -> dict:
        """Every setting of the resolved run config, flat by its dotted name (the names of :meth:`setting`).

        >>> RunConfigRecord(config={"seed": 3, "data": {"n_rows": 60}}).settings()
        {'seed': 3, 'data.n_rows': 60}
        >>> RunConfigRecord(config={"metrics": {"k": 10}}).settings()  # a switch added later: its earlier value
        {'metrics.k': 10, 'metrics.snsr_empty_rows': 'drop'}
        """

        def flat(node: Any, prefix: str) -> dict:
            if not isinstance(node, dict):
                return {prefix[:-1]: node}
            out: dict = {}
            for k, v in node.items():
                out.update(flat(v, f"{prefix}{k}."))
            return out

        out = flat(self.config, "") if self.config else {}
        for section, name in ADDED_FIELDS:  # a field left out at its earlier value is still a setting
            if isinstance(self.config.get(section), dict):
                out.setdefault(f"{section}.{name}", saved_setting(self.config, section, name))
        return out


@dataclass
class RunMeta:
    """``run.json``: when, by what code and command, on which host a run was made (not hashed)."""

    started_at: str = _f("UTC ISO time the run started")
    finished_at: str | None = _f("UTC ISO time the run folder was written")
    code_version: str = _f("git describe --always --dirty of the package's work tree, else the package version")
    command: str = _f("sys.argv (or the notebook) that made the run")
    host: str = _f("CPU / GPU in one line")
    extra: dict = _extra()
    absent: frozenset = _absent()

    @classmethod
    def start(cls, command: str | None = None) -> RunMeta:
        """The meta of a run starting now (``finished_at`` set by :meth:`finish`)."""
        return cls(
            started_at=utc_now(),
            finished_at=None,
            code_version=code_version(),
            command=command or run_command(),
            host=host_line(),
        )

    def finish(self) -> RunMeta:
        """The meta of the run finishing now (the host line again: a GPU is seen once torch is loaded)."""
        return dataclasses.replace(self, finished_at=utc_now(), host=host_line())


@dataclass
class RunRecord:
    """A run's record: config, metrics, timings and meta (the JSON files of its run folder).

    ``run.record`` of a :class:`~facterlab.facter.runfolder.RunResult`; :meth:`load` reads it from a run
    folder.  Read its attributes (``record.metrics.methods["facter"].cfr_multi``,
    ``record.config.setting("model.llm")``) or the flat view :meth:`RunMetrics.flat`, never dict paths.

    See Also
    --------
    facterlab.facter.RunResult : the record with the rows and the calibration table, and an example.
    facterlab.facter.read_run_folder : a saved run read back (record, rows, calibration table).
    """

    config: RunConfigRecord
    metrics: RunMetrics
    timings: dict[str, float] = field(default_factory=dict)
    meta: RunMeta | None = None
    folder: Path | None = field(default=None, compare=False)

    @property
    def run_id(self) -> str:
        """The run id (``metrics.run_id``)."""
        return self.metrics.run_id

    @classmethod
    def from_parts(
        cls, config: dict, metrics: dict, timings: dict | None = None, meta: RunMeta | None = None
    ) -> RunRecord:
        """A record from the JSON forms (``config.json`` and ``metrics.json`` dicts); raises :class:`RecordError`."""
        return cls(
            config=_decode_dataclass(RunConfigRecord, config, "config.json", True),
            metrics=RunMetrics.from_json(metrics),
            timings=dict(timings or {}),
            meta=meta,
        )

    def parts(self) -> dict:
        """File name -> JSON object of each file of the record (``run.json`` only when there is a meta)."""
        out: dict = {"config.json": self.config.to_json()}
        out["timings.json"] = dict(self.timings)
        if self.meta is not None:
            out["run.json"] = _encode_dataclass(self.meta)
        out["metrics.json"] = self.metrics.to_json()
        return out

    def save(self, folder: os.PathLike | str) -> Path:
        """Write the record's JSON files into ``folder`` (``metrics.json`` last); return the folder.
        The run folder's atomic write (:func:`runfolder.write_run_folder`) calls this on its temporary folder."""
        folder = Path(folder)
        folder.mkdir(parents=True, exist_ok=True)
        for name, obj in self.parts().items():
            (folder / name).write_text(json.dumps(obj, indent=2, sort_keys=True))
        return folder

    @classmethod
    def load(cls, folder: os.PathLike | str) -> RunRecord:
        """The record of a run folder; :class:`RecordError` naming the file (and key) when malformed."""
        folder = Path(folder)
        objs: dict = {}
        for _attr, name, required in RECORD_FILES:
            p = folder / name
            if not p.is_file():
                if required:
                    raise RecordError(f"{p}: missing (not a complete run folder)")
                continue
            try:
                objs[name] = read_json(p, what="run record file")
            except FileLimitError as exc:  # names the file and the limit itself
                raise RecordError(str(exc)) from None
            except (OSError, ValueError) as exc:
                raise RecordError(f"{p}: does not load ({type(exc).__name__}: {str(exc)[:120]})") from exc
            if not isinstance(objs[name], dict):
                raise RecordError(f"{p}: not a JSON object")
        try:
            rec = cls(
                config=_decode_dataclass(RunConfigRecord, objs["config.json"], "config.json", True),
                metrics=RunMetrics.from_json(objs["metrics.json"]),
                timings=dict(objs.get("timings.json") or {}),
                meta=_decode_dataclass(RunMeta, objs["run.json"], "run.json", True) if "run.json" in objs else None,
                folder=folder,
            )
        except RecordError as exc:
            raise RecordError(f"{folder}/{exc}") from None
        if rec.config.run_id != rec.metrics.run_id:
            raise RecordError(
                f"{folder}: config.json run_id {rec.config.run_id!r} differs from metrics.json run_id {rec.metrics.run_id!r}"
            )
        return rec

    def describe(self) -> dict:
        """One line's fields for ``facterlab runs list``."""
        cfg = self.config.config
        meta = self.meta
        return {
            "run_id": self.run_id,
            "started": meta.started_at if meta else "n/a (before run.json)",
            "dataset": self.metrics.dataset,
            "model": self.metrics.field_value("model"),
            "protocol": self.metrics.protocol,
            "n": f"{self.metrics.n_calib}/{self.metrics.n_test}",
            "seed": cfg.get("seed"),
            "code": meta.code_version if meta else "n/a",
        }


def is_one_run(x: Any) -> bool:
    """Whether ``x`` is one run (a record, a run result, its metrics, or a dict that
    :func:`as_metrics` will refuse with its pointer) rather than a collection of runs."""
    return isinstance(x, (RunRecord, RunMetrics, dict)) or isinstance(getattr(x, "record", None), RunRecord)


def as_metrics(x: Any) -> RunMetrics:
    """The :class:`RunMetrics` of a run: every reader of records (tables, figures, the CLI) takes a run
    through this one door.  A ``dict`` is refused with a pointer: read a run folder with
    :meth:`RunRecord.load`, a partial metrics.json object with :meth:`RunMetrics.partial`.

    Parameters
    ----------
    x : RunRecord, RunResult or RunMetrics
        A run's record, a run result (its ``.record``) or the metrics record itself.

    Returns
    -------
    RunMetrics
        The typed metrics.
    """
    if isinstance(x, RunMetrics):
        return x
    if isinstance(x, RunRecord):
        return x.metrics
    rec = getattr(x, "record", None)
    if isinstance(rec, RunRecord):
        return rec.metrics
    if isinstance(x, dict):
        raise TypeError(
            "expected a run (RunRecord, RunResult or RunMetrics), got a dict: read a run folder with "
            "RunRecord.load(folder), or a metrics.json object with RunMetrics.from_json(obj) "
            "(RunMetrics.partial(obj) for a partial one)"
        )
    raise TypeError(f"expected a run (RunRecord, RunResult or RunMetrics), got {type(x).__name__}")


# ---------------------------------------------------------------------------------------------
# the schema, generated


def _type_name(tp) -> str:
    if _is_value_type(tp):
        return "number | missing | null"
    origin = get_origin(tp)
    if origin in _UNIONS:
        return " | ".join(_type_name(a) for a in get_args(tp))
    if origin is dict:
        _k, v = get_args(tp) or (str, Any)
        return f"{{str: {_type_name(v)}}}"
    if origin is list:
        (v,) = get_args(tp) or (Any,)
        return f"[{_type_name(v)}]"
    if tp is type(None):
        return "null"
    if tp is MissingValue:
        return "missing"
    if tp is Any:
        return "any"
    if dataclasses.is_dataclass(tp):
        return str(getattr(tp, "__name__", tp))
    return getattr(tp, "__name__", str(tp)).replace("dict", "object").replace("str", "string")


SCHEMA_CLASSES = (
    RunConfigRecord,
    Fingerprints,
    RunMetrics,
    Calibration,
    MethodMetrics,
    SnsrGroup,
    Degenerate,
    RandomFloor,
    RunMeta,
)


def schema_markdown() -> str:
    """The record's schema as Markdown (the generated section of docs/CONTRACTS.md).

    Returns
    -------
    str
        Markdown tables, one per record dataclass.
    """
    lines = [
        "Files of a run folder: "
        + ", ".join(f"`{name}` ({'required' if req else 'optional'})" for _a, name, req in RECORD_FILES)
        + "; `config.json` is a RunConfigRecord, `metrics.json` a RunMetrics, `run.json` a RunMeta, "
        "`timings.json` an object phase -> seconds.",
        '`missing` is `{"value": null, "missing_reason": "..."}` (facterlab.datatypes.MissingValue), never 0. '
        "Keys not listed are kept as they are (`extra`).",
        "",
    ]
    for cls in SCHEMA_CLASSES:
        hints = _hints(cls)
        doc = (cls.__doc__ or "").strip().splitlines()[0]
        lines += [f"#### {cls.__name__}", "", doc, "", "| key | type | | meaning |", "|---|---|---|---|"]
        for fl in dataclasses.fields(cls):
            if fl.metadata.get("extra") or fl.metadata.get("absent") or "doc" not in fl.metadata:
                continue
            key = fl.metadata.get("key") or fl.name
            opt = "optional" if fl.metadata.get("optional") else "required"
            typ = _type_name(hints[fl.name]).replace("|", "\\|")
            lines.append(f"| `{key}` | {typ} | {opt} | {fl.metadata['doc'].replace('|', chr(92) + '|')} |")
        lines.append("")
    return "\n".join(lines)


SCHEMA_BEGIN = "<!-- record-schema: generated by facterlab.facter.record.schema_markdown; do not edit -->"
SCHEMA_END = "<!-- record-schema: end -->"


def sync_schema_doc(path: os.PathLike | str, write: bool = False) -> bool:
    """Whether the generated section of ``path`` (docs/CONTRACTS.md, between :data:`SCHEMA_BEGIN` and
    :data:`SCHEMA_END`) equals :func:`schema_markdown`; ``write=True`` rewrites that section first.
    ``python -c "from facterlab.facter.record import sync_schema_doc;
    sync_schema_doc('docs/CONTRACTS.md', write=True)"`` rewrites it.

    Parameters
    ----------
    path : path-like
        The Markdown file holding the generated section.
    write : bool, default False
        Rewrite the section first.

    Returns
    -------
    bool
        True when the section equals :func:`schema_markdown` (after the rewrite, with ``write``).
    """
    path = Path(path)
    text = path.read_text(encoding="utf-8")
    if SCHEMA_BEGIN not in text or SCHEMA_END not in text:
        raise ValueError(f"{path} lacks the markers {SCHEMA_BEGIN!r} ... {SCHEMA_END!r}")
    head, rest = text.split(SCHEMA_BEGIN, 1)
    body, tail = rest.split(SCHEMA_END, 1)
    want = "\n" + schema_markdown() + "\n"
    if write and body != want:
        path.write_text(head + SCHEMA_BEGIN + want + SCHEMA_END + tail, encoding="utf-8")
        return True
    return body == want
