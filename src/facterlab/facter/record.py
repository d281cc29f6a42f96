"""The typed run record: one owner for what a FACTER run folder says about the run.

A run folder ``<results>/runs/<run_id>/`` (written, checked, found, listed and read by
:mod:`facterlab.facter.runfolder`) holds four JSON files that together make a :class:`RunRecord`:

- ``config.json``  -> :class:`RunConfigRecord` (resolved config, its hash, data and model fingerprints)
- ``metrics.json`` -> :class:`RunMetrics` (run-level fields, calibration, one :class:`MethodMetrics` per method)
- ``timings.json`` -> ``dict`` phase -> seconds (optional: wall times, the one file allowed to differ)
- ``run.json``     -> :class:`RunMeta` (start/finish time, code version, command, host; optional:
  folders written before it existed have none).  It is not part of the run id: reruns still reuse.

The JSON on disk is what :func:`facterlab.facter.runfolder.write_run_folder` has always written:
:meth:`RunRecord.load` of an existing folder followed by :meth:`RunRecord.save` gives byte-identical
files (unknown keys are kept in each part's ``extra``).  A malformed record raises
:class:`RecordError` naming the file and the key.  A missing value is one type everywhere:
:class:`facterlab.datatypes.MissingValue` (on disk ``{"value": null, "missing_reason": ...}``).

Reporting reads attributes (``record.metrics.methods["facter"].cfr_multi``) or the flat view
(:meth:`RunMetrics.flat`: ``key -> float | MissingValue``), never dict paths.  The schema section of
docs/CONTRACTS.md is generated from these dataclasses (:func:`schema_markdown`).
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
# the record's parts


@dataclass
class Degenerate:
    """Degenerate answers of one method (or of the calibration rows); :func:`runfolder.degenerate_summary`."""

    n_rows: int = _f("rows (of the last pass)")
    n_empty: int = _f("rows whose answer gave no usable title")
    n_distinct_lists: int = _f("distinct non-empty lists")
    constant: bool = _f("every row got the same non-empty list")
    n_degenerate: int = _f("n_empty, or every row when the list is constant")
    all_degenerate: bool = _f("every row is degenerate (its fairness metrics are then missing values)")
    reason: str | None = _f("why, when all_degenerate", optional=True)
    extra: dict = _extra()
    absent: frozenset = _absent()


@dataclass
class SnsrGroup:
    """SNSR proxy of one grouping (joint, gender, age, occupation); metrics.fairness.snsr_proxy."""

    snsr: Value = _f("max - min of the mean pairwise similarity across groups", optional=True)
    snsv: Value = _f("sd of the group similarities", optional=True)
    n_groups: Value = _f("groups with at least min_group rows", optional=True)
    extra: dict = _extra()
    absent: frozenset = _absent()

    @classmethod
    def of_block(cls, block: dict) -> SnsrGroup:
        """The record of one grouping's block as :func:`facterlab.metrics.fairness.snsr_proxy` returns it
        (plain Python values): ``snsr``/``snsv``/``n_groups`` as fields, the rest (group sizes, counts,
        and ``value: null`` with its reason when fewer than two groups qualify) in ``extra``; a field the
        block lacks is absent.

        >>> g = SnsrGroup.of_block({"value": None, "missing_reason": "1 group", "n_groups": 1})
        >>> g.missing("snsr_joint").reason, g.n_groups
        ('1 group', 1)
        """
        names = ("snsr", "snsv", "n_groups")
        inst = cls(
            **{k: block[k] for k in names if k in block}, extra={k: v for k, v in block.items() if k not in names}
        )
        inst.absent = frozenset(k for k in names if k not in block)
        return inst

    def missing(self, what: str) -> MissingValue | None:
        """Why SNSR is missing for this grouping (the block then has ``value: null`` and the reason), else None."""
        if "snsr" not in self.absent:
            return None
        if "value" not in self.extra:
            return MissingValue(f"{what} has no snsr/snsv fields")
        miss = as_value({**self.extra, "value": self.extra["value"]}, what)
        return miss if isinstance(miss, MissingValue) else MissingValue(f"{what} has no snsr/snsv fields")


@dataclass
class MethodMetrics:
    """The metrics of one method (its last pass for FACTER)."""

    ndcg_multi: Value = _f("NDCG@10 against the relevance set", key="ndcg@10_multi")
    ndcg_single: Value = _f("NDCG@10 against the held-out target", key="ndcg@10_single")
    recall_multi: Value = _f("Recall@10 against the relevance set", key="recall@10_multi")
    recall_single: Value = _f("Recall@10 against the held-out target", key="recall@10_single")
    valid: Value = _f("share of positions that map to a catalogue item", key="valid@10")
    snsr_proxy: dict[str, SnsrGroup | MissingValue] = _f(
        "grouping -> SNSR block (a missing value when degenerate)", factory=dict
    )
    cfr_multi: Value = _f("counterfactual fairness ratio, all attributes flipped")
    cfr_single: dict[str, Value] = _f("attribute -> CFR with that attribute flipped", factory=dict)
    violations: dict[str, list[Value]] = _f(
        "kind (fixed_q0, adaptive, corrected, q_star, hoeffding, repro_count) -> count per pass", factory=dict
    )
    threshold_path: list[Value] = _f("Q0, then the threshold after each pass", factory=list)
    parse_status: dict[str, int] = _f("parse status -> rows (last pass)", factory=dict)
    cfr_detail: dict | None = _f("CFR summaries with pair counts (multi, per attribute, n_rows)", optional=True)
    mean_S: list[Value] | None = _f("mean nonconformity score per pass", optional=True)
    n_empty_rows: int | None = _f("rows with an empty ranked list", optional=True)
    rules_in_last_pass: list[str] | None = _f("repair rules active in the last pass", optional=True)
    n_repredicted: int | None = _f("rows predicted again after a violation", optional=True)
    n_recommender_calls: int | None = _f("recommender calls", optional=True)
    n_degenerate: int | None = _f("rows with empty/unparseable output (all when one list for all)", optional=True)
    degenerate: Degenerate | None = _f("degenerate-output summary", optional=True)
    snsr_fairllm: dict | None = _f("FaiRLLM-style SNSR variant (run with fairllm=True)", optional=True)
    n_twin_predictions: int | None = _f("twin requests asked (facter.delta = 'twin'; docs/FACTER.md §7)", optional=True)
    ground_truth: dict | None = _f(
        "detector: the flag's precision, recall, base_rate, flag_rate, auc against a known truth "
        "(simulated recommender; facter/truth.py)",
        optional=True,
    )
    extra: dict = _extra()
    absent: frozenset = _absent()

    def flat(self) -> dict:
        """Flat ``key -> float | MissingValue`` view (the keys tables and published numbers use).

        Scalars under their JSON key (``ndcg@10_multi``, ``valid@10``, ``cfr_multi``...);
        ``snsr_<g>``/``snsv_<g>``/``n_groups_<g>``; ``cfr_<attr>``; ``violations_<kind>`` = the count of
        the LAST pass (REPRO's convention), ``violations_<kind>_total``, ``violations_<kind>_pass<i>``
        (1-based); ``q0`` and ``q_final`` from the threshold path; ``parse_<status>`` counts.

        >>> m = MethodMetrics.from_json({"violations": {"adaptive": [5, 3]}, "threshold_path": [1.0, 1.2, 1.3],
        ...                              "snsr_proxy": {"joint": {"snsr": 0.1, "snsv": 0.05, "n_groups": 3}}},
        ...                             strict=False)
        >>> f = m.flat()
        >>> f["violations_adaptive"], f["violations_adaptive_total"], f["violations_adaptive_pass1"], f["q_final"]
        (3.0, 8.0, 5.0, 1.3)
        >>> f["snsr_joint"], f["n_groups_joint"]
        (0.1, 3.0)
        """
        out: dict = {}
        scalar_types = (int, float, MissingValue, type(None))
        for fl in dataclasses.fields(self):
            key = fl.metadata.get("key") or fl.name
            if fl.name in self.absent or fl.metadata.get("extra") or fl.metadata.get("absent"):
                continue
            val = getattr(self, fl.name)
            if fl.name in ("snsr_proxy", "cfr_single", "violations", "threshold_path", "parse_status"):
                continue
            if val is None and fl.metadata.get("optional"):  # not written to metrics.json: absent once read
                continue
            if isinstance(val, scalar_types):
                out[key] = as_value(val, key)
        for key, val in self.extra.items():
            if not isinstance(val, (dict, list)) or (isinstance(val, dict) and "value" in val):
                out[key] = as_value(val, key)
        for g, block in self.snsr_proxy.items():
            miss = block.missing(f"snsr_{g}") if isinstance(block, SnsrGroup) else block
            if miss is None and isinstance(block, SnsrGroup):
                out[f"snsr_{g}"] = as_value(block.snsr, f"snsr_{g}")
                out[f"snsv_{g}"] = as_value(block.snsv, f"snsv_{g}")
                out[f"n_groups_{g}"] = as_value(block.n_groups, f"n_groups_{g}")
            else:
                for pre in ("snsr", "snsv", "n_groups"):
                    out[f"{pre}_{g}"] = miss
        for attr, val in self.cfr_single.items():
            out[f"cfr_{attr}"] = as_value(val, f"cfr_{attr}")
        for kind, series in self.violations.items():
            vals = [as_value(v, f"violations_{kind}") for v in series]
            for i, v in enumerate(vals, start=1):
                out[f"violations_{kind}_pass{i}"] = v
            if not vals:
                out[f"violations_{kind}"] = MissingValue(f"violations_{kind}: no passes recorded")
                continue
            out[f"violations_{kind}"] = vals[-1]
            gaps = [v for v in vals if isinstance(v, MissingValue)]
            out[f"violations_{kind}_total"] = gaps[0] if gaps else float(sum(v for v in vals if isinstance(v, float)))
        if self.threshold_path:
            out["q0"] = as_value(self.threshold_path[0], "q0")
            out["q_final"] = as_value(self.threshold_path[-1], "q_final")
        for k, v in self.parse_status.items():
            out[f"parse_{k}"] = as_value(v, f"parse_{k}")
        return out

    @classmethod
    def from_json(cls, obj: Any, strict: bool = True, where: str = "metrics.json: methods.<method>") -> MethodMetrics:
        """A method's metrics from its JSON object (``metrics.json``'s ``methods.<method>``).

        Parameters
        ----------
        obj : object
            The decoded JSON object.
        strict : bool, default True
            Fail on a missing required key (False: remember it as absent).
        where : str
            Where ``obj`` came from, for error messages.

        Returns
        -------
        MethodMetrics
            Unknown keys kept in ``extra``.

        Raises
        ------
        RecordError
            When ``obj`` is not an object, or (strict) a required key is missing.
        """
        return _decode_dataclass(cls, obj, where, strict)


@dataclass
class Calibration:
    """The calibration of the conformal threshold."""

    alpha: Value = _f("miscoverage level")
    q0: Value = _f("calibrated threshold Q0")
    k_index: Value = _f("rank of Q0 among the calibration scores")
    n: Value = _f("calibration rows scored")
    mean_neighbours: Value = _f("mean counterfactual neighbours of a calibration row")
    share_no_neighbour: Value = _f("share of calibration rows without a counterfactual neighbour")
    test_mean_neighbours: Value = _f("mean counterfactual neighbours of a test row", optional=True)
    test_share_no_neighbour: Value = _f("share of test rows without a counterfactual neighbour", optional=True)
    q_null: Value = _f("null-anchored threshold Q_null (facter.threshold = 'null'; docs/FACTER.md §7)", optional=True)
    share_placebo_nonzero: Value = _f("share of calibration placebos whose answer moved", optional=True)
    n_twin_predictions: int | None = _f("calibration twin requests asked", optional=True)
    n_placebo_predictions: int | None = _f("calibration placebo requests asked", optional=True)
    degenerate: Degenerate | None = _f("degenerate calibration answers", optional=True)
    extra: dict = _extra()
    absent: frozenset = _absent()


@dataclass
class RandomFloor:
    """The rank protocol's random-ranking floor."""

    ndcg_multi: Value = _f("NDCG@10 of a random order of the candidates", key="ndcg@10_multi")
    recall_multi: Value = _f("Recall@10 of a random order of the candidates", key="recall@10_multi")
    extra: dict = _extra()
    absent: frozenset = _absent()

    def flat(self) -> dict:
        """``{key: value}`` of the floor: NDCG@10 and Recall@10 multi, then the extra keys, each a value or :class:`MissingValue`."""
        out = {"ndcg@10_multi": as_value(self.ndcg_multi, "ndcg@10_multi")}
        out["recall@10_multi"] = as_value(self.recall_multi, "recall@10_multi")
        out.update({k: as_value(v, k) for k, v in self.extra.items()})
        return out


@dataclass
class RunMetrics:
    """``metrics.json``: run-level fields, the calibration and the metrics of each method."""

    run_id: str = _f("config hash - data and model fingerprint hash")
    dataset: str = _f("dataset name (synthetic when the requested data was absent)")
    is_synthetic: bool = _f("synthetic data (never MovieLens/Amazon results)")
    protocol: str = _f("open | rank")
    preset: str = _f("config preset (repro, paper...)")
    model: str = _f("recommender fingerprint")
    encoder: str = _f("encoder fingerprint")
    n_calib: int = _f("calibration rows")
    n_test: int = _f("test rows")
    variants: dict[str, Any] = _f(
        "variant name -> value: threshold_rule, correction, rule_keying, mapping, flip_strategy, snsr, "
        "calibration_prompt, ranker, announce_threshold, snsr_fairllm and the protocol switches "
        "(config.PROTOCOL_SWITCHES)",
        factory=dict,
    )
    calibration: Calibration = _f("conformal calibration", factory=Calibration)
    methods: dict[str, MethodMetrics] = _f("neutral | fair | facter -> metrics", factory=dict)
    model_name: str | None = _f("registry name of the recommender", optional=True)
    encoder_name: str | None = _f("registry name of the encoder", optional=True)
    n_distinct_users: dict[str, int] | None = _f("calib | test -> distinct users", optional=True)
    random_floor: RandomFloor | None = _f("rank protocol only", optional=True)
    extra: dict = _extra()
    absent: frozenset = _absent()

    def field_value(self, key: str) -> Any:
        """A run-level field (``dataset``, ``model``...) or a variant (``threshold_rule``...); ``model``
        and ``encoder`` are the registry names when recorded (else the fingerprints); None when absent.

        >>> RunMetrics.from_json({"model": "m@ab12", "model_name": "m", "variants": {"top1": True}}, strict=False)\\
        ...     .field_value("model")
        'm'
        """
        if key in ("model", "encoder"):
            name = getattr(self, f"{key}_name")
            if name:
                return name
        if key in _RUN_FIELDS and key not in self.absent:
            return getattr(self, key)
        if key in self.extra:
            return self.extra[key]
        if key not in self.variants:  # a switch added after the run was saved: the run had its earlier value
            return next((before for (_, name), before in ADDED_FIELDS.items() if name == key), None)
        return self.variants[key]

    def run_level(self) -> dict:
        """Run-level cells shown beside each method's: shares of test and calibration rows without a
        counterfactual neighbour (Delta = 0 there)."""
        what = "share of rows without a counterfactual neighbour"
        c = self.calibration
        return {
            "no_neighbour_test": as_value(c.test_share_no_neighbour, what),
            "no_neighbour_calib": as_value(c.share_no_neighbour, what),
        }

    def flat(self, method: str) -> dict | None:
        """The flat view of one method plus the run-level cells; ``random_floor`` for the floor row;
        None when the run has no such method (or no floor)."""
        if method == "random_floor":
            return self.random_floor.flat() if self.random_floor is not None else None
        block = self.methods.get(method)
        if block is None:
            return None
        return {**self.run_level(), **block.flat()}

    def to_json(self) -> dict:
        """The JSON object of ``metrics.json`` (keys in schema order, then the extra keys)."""
        return _encode_dataclass(self)

    @classmethod
    def from_json(cls, obj: Any, strict: bool = True, where: str = "metrics.json") -> RunMetrics:
        """The run's metrics from ``metrics.json``'s object.

        Parameters
        ----------
        obj : object
            The decoded JSON object.
        strict : bool, default True
            Fail on a missing required key (False: remember it as absent).
        where : str, default "metrics.json"
            Where ``obj`` came from, for error messages.

        Returns
        -------
        RunMetrics
            Unknown keys kept in ``extra``.

        Raises
        ------
        RecordError
            When ``obj`` is not an object, or (strict) a required key is missing.
        """
        return _decode_dataclass(cls, obj, where, strict)

    @classmethod
    def partial(cls, obj: dict) -> RunMetrics:
        """The record of a partial ``metrics.json`` object (hand-made, or from an older version): keys it
        lacks are absent and read as missing values with their reason; types are not enforced.

        >>> RunMetrics.partial({"n_test": 12}).run_level()["no_neighbour_test"].reason
        'share of rows without a counterfactual neighbour not recorded in metrics.json'
        """
        return cls.from_json(obj, strict=False)


_RUN_FIELDS = {f.name for f in dataclasses.fields(RunMetrics)} - {"extra", "absent"}


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
    """A run's record: config, metrics, timings and meta (the JSON files of its run folder)."""

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
