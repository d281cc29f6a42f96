"""The record of ``metrics.json``: :class:`RunMetrics`, its :class:`Calibration`, one :class:`MethodMetrics`
per method (with its :class:`SnsrGroup` blocks and :class:`Degenerate` summary) and the rank protocol's
:class:`RandomFloor`.

These are the metrics half of the run record (:mod:`facterlab.facter.record`, which owns the whole run
folder: ``config.json``, ``run.json``, loading, saving and the generated schema, and still re-exports every
name here).  Each class reads and writes its JSON through :mod:`facterlab.facter.codec`; readers use the
attributes or the flat views (:meth:`MethodMetrics.flat`, :meth:`RunMetrics.flat`), never dict paths.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

from facterlab.config import ADDED_FIELDS
from facterlab.datatypes import MissingValue
from facterlab.facter.codec import absent_field as _absent
from facterlab.facter.codec import decode_dataclass as _decode_dataclass
from facterlab.facter.codec import encode_dataclass as _encode_dataclass
from facterlab.facter.codec import extra_field as _extra
from facterlab.facter.codec import record_field as _f
from facterlab.facter.values import Value, as_value

__all__ = ["Degenerate", "SnsrGroup", "MethodMetrics", "Calibration", "RandomFloor", "RunMetrics"]


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
