"""The typed JSON codec of the run record (:mod:`facterlab.facter.record`): dataclass <-> JSON.

Type-driven: each field's annotation says what the JSON holds.  Unknown keys are kept in a part's
``extra`` (so that load + save gives byte-identical files), absent optional keys stay absent, and a
value that does not fit its annotation raises :class:`RecordError` naming the key.  A missing value is
:class:`facterlab.datatypes.MissingValue` (on disk ``{"value": null, "missing_reason": ...}``).

Field metadata: :func:`record_field` (doc, JSON key, optional), :func:`extra_field`, :func:`absent_field`.
"""

from __future__ import annotations

import dataclasses
import types
from dataclasses import field
from typing import Any, Union, get_args, get_origin, get_type_hints

from facterlab.datatypes import MissingValue

__all__ = [
    "RecordError",
    "record_field",
    "extra_field",
    "absent_field",
    "decode",
    "decode_dataclass",
    "encode",
    "encode_dataclass",
    "is_missing_json",
    "is_value_type",
    "type_hints",
]


class RecordError(ValueError):
    """A run record that does not load: the message names the file and the key."""


def record_field(
    doc: str, key: str | None = None, optional: bool = False, default: Any = None, factory: Any = None
) -> Any:
    """A dataclass field of a record part: ``doc`` for the schema, its JSON ``key`` (default: the name), ``optional``."""
    meta = {"doc": doc, "key": key, "optional": optional}
    if factory is not None:
        return field(default_factory=factory, metadata=meta)
    return field(default=default, metadata=meta)


def extra_field() -> Any:
    """The field that keeps a part's unknown JSON keys (written back as they were)."""
    return field(default_factory=dict, metadata={"extra": True}, repr=False, compare=True)


def absent_field() -> Any:
    """The field that remembers which optional keys were absent on disk (so they stay absent)."""
    return field(default_factory=frozenset, metadata={"absent": True}, repr=False, compare=False)


UNIONS = (Union, types.UnionType)


def type_hints(cls) -> dict:
    """The resolved annotations of a record dataclass."""
    return get_type_hints(cls)


def is_value_type(tp) -> bool:
    """Whether ``tp`` is a metric value annotation (a number, a :class:`MissingValue` or None)."""
    return get_origin(tp) in UNIONS and MissingValue in get_args(tp) and float in get_args(tp)


def decode(tp, obj, where: str, strict: bool):
    """The Python value of JSON ``obj`` for annotation ``tp`` (``where`` names the key in errors)."""
    origin = get_origin(tp)
    if is_value_type(tp):
        if is_missing_json(obj):
            return MissingValue(str(obj["missing_reason"]))
        if obj is None or isinstance(obj, (int, float)) and not isinstance(obj, bool) or not strict:
            return obj
        if isinstance(obj, bool):
            return obj
        raise RecordError(f"{where}: expected a number, null or a missing value, got {type(obj).__name__} {obj!r:.60}")
    if origin in UNIONS:
        args = [a for a in get_args(tp) if a is not type(None)]
        if obj is None:
            return None
        if MissingValue in args and is_missing_json(obj):
            return MissingValue(str(obj["missing_reason"]))
        dcs = [a for a in args if dataclasses.is_dataclass(a)]
        if dcs:
            return decode_dataclass(dcs[0], obj, where, strict)
        return decode(args[0], obj, where, strict)
    if dataclasses.is_dataclass(tp):
        return decode_dataclass(tp, obj, where, strict)
    if origin is dict:
        if not isinstance(obj, dict):
            raise RecordError(f"{where}: expected a JSON object, got {type(obj).__name__}")
        _k, vt = get_args(tp) or (str, Any)
        return {str(k): decode(vt, v, f"{where}.{k}", strict) for k, v in obj.items()}
    if origin is list:
        if not isinstance(obj, list):
            raise RecordError(f"{where}: expected a list, got {type(obj).__name__}")
        (vt,) = get_args(tp) or (Any,)
        return [decode(vt, v, f"{where}[{i}]", strict) for i, v in enumerate(obj)]
    if tp is dict and not isinstance(obj, dict) and strict:
        raise RecordError(f"{where}: expected a JSON object, got {type(obj).__name__}")
    if tp is str and not isinstance(obj, str) and strict:
        raise RecordError(f"{where}: expected a string, got {type(obj).__name__} {obj!r:.60}")
    if tp is bool and not isinstance(obj, bool) and strict:
        raise RecordError(f"{where}: expected true/false, got {obj!r:.60}")
    if tp is int and (isinstance(obj, bool) or not isinstance(obj, int)) and strict:
        raise RecordError(f"{where}: expected an integer, got {obj!r:.60}")
    return obj


def decode_dataclass(cls, obj, where: str, strict: bool):
    """A record dataclass ``cls`` from JSON object ``obj``: unknown keys to ``extra``, absent ones remembered."""
    if not isinstance(obj, dict):
        raise RecordError(f"{where}: expected a JSON object, got {type(obj).__name__}")
    hints = type_hints(cls)
    kw: dict = {}
    absent = set()
    known = set()
    for fl in dataclasses.fields(cls):
        if fl.metadata.get("extra") or fl.metadata.get("absent"):
            continue
        key = fl.metadata.get("key") or fl.name
        known.add(key)
        if key not in obj:
            if strict and not fl.metadata.get("optional"):
                raise RecordError(f"{where}: key {key!r} missing (an old-format or hand-edited record?)")
            absent.add(fl.name)
            continue
        kw[fl.name] = decode(hints[fl.name], obj[key], f"{where}.{key}", strict)
    inst = cls(**kw, extra={k: v for k, v in obj.items() if k not in known})
    inst.absent = frozenset(absent)
    return inst


def encode(x):
    """The JSON form of a record value (dataclasses, missing values, dicts and lists inside)."""
    if dataclasses.is_dataclass(x) and not isinstance(x, type):
        return encode_dataclass(x)
    if isinstance(x, MissingValue):
        return x.to_json()
    if isinstance(x, dict):
        return {k: encode(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [encode(v) for v in x]
    return x


def encode_dataclass(inst) -> dict:
    """The JSON object of a record dataclass: its keys, then its ``extra`` keys."""
    if isinstance(inst, MissingValue):
        return inst.to_json()
    out: dict = {}
    absent: frozenset = getattr(inst, "absent", frozenset())
    for fl in dataclasses.fields(inst):
        if fl.metadata.get("extra") or fl.metadata.get("absent") or fl.name in absent:
            continue
        val = getattr(inst, fl.name)
        if val is None and fl.metadata.get("optional"):
            continue
        out[fl.metadata.get("key") or fl.name] = encode(val)
    out.update(encode(getattr(inst, "extra", {})))
    return out


def is_missing_json(x: Any) -> bool:
    """Whether ``x`` is a missing value on disk: ``{"value": null, "missing_reason": ...}``."""
    return isinstance(x, dict) and set(x) == {"value", "missing_reason"} and x["value"] is None
