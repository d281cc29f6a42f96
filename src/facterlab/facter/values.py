"""Metric values of the run record: a number, or an explicit missing value with its reason.

One type everywhere for a value that could not be computed: :class:`facterlab.datatypes.MissingValue`
(on disk ``{"value": null, "missing_reason": ...}``); these helpers read and write it (they were part
of :mod:`facterlab.facter.record`, which still re-exports them).
"""

from __future__ import annotations

import math
from typing import Any

from facterlab.datatypes import MissingValue
from facterlab.facter.codec import encode

__all__ = ["Value", "as_value", "value_or_nan", "missing_json", "to_json"]

#: a metric value: a number, an explicit missing value, or None (NaN/inf written as null, or not recorded)
Value = float | int | MissingValue | None


def as_value(x: Any, what: str = "value") -> float | MissingValue:
    """A record value as a float, or a :class:`MissingValue` with its reason (never a silent 0).

    Numbers pass through; ``{"value": null, "missing_reason": r}``, a MissingValue and ``None`` are
    missing; NaN/inf are missing (never printed as numbers).

    Parameters
    ----------
    x : object
        A number, a MissingValue, its JSON form or None.
    what : str, default "value"
        Name of the value in error messages.

    Returns
    -------
    float or MissingValue
        The number, or the missing value with its reason.

    Examples
    --------
    >>> as_value(0.5), as_value({"value": 2}), as_value(True)
    (0.5, 2.0, 1.0)
    >>> as_value({"value": None, "missing_reason": "too few groups"}).reason
    'too few groups'
    >>> as_value(None, "ndcg").reason
    'ndcg not recorded in metrics.json'
    """
    if isinstance(x, MissingValue):
        return x
    if x is None:
        return MissingValue(f"{what} not recorded in metrics.json")
    if isinstance(x, dict):
        if "value" in x:
            if x["value"] is None:
                return MissingValue(str(x.get("missing_reason") or f"{what} missing (no reason given)"))
            return as_value(x["value"], what)
        return MissingValue(f"{what} is a mapping without a value")
    if isinstance(x, bool):
        return float(x)
    try:
        v = float(x)
    except (TypeError, ValueError):
        return MissingValue(f"{what} is not a number: {x!r}")
    if not math.isfinite(v):
        return MissingValue(f"{what} is not finite ({v})")
    return v


def value_or_nan(x: Any) -> float:
    """A record value as a float for plotting and frames: :func:`as_value`, with NaN where it is missing.

    >>> value_or_nan(0.5), value_or_nan({"value": None, "missing_reason": "no rows"}), value_or_nan(None)
    (0.5, nan, nan)
    """
    v = as_value(x)
    return v if isinstance(v, float) else float("nan")


def missing_json(x: Any) -> Any:
    """``x`` with every :class:`MissingValue` (nested in dicts/lists) as its JSON form.

    Parameters
    ----------
    x : object
        Any value, possibly holding MissingValue objects in dicts or lists.

    Returns
    -------
    object
        ``x`` with each MissingValue replaced by its JSON dict.
    """
    if isinstance(x, MissingValue):
        return x.to_json()
    if isinstance(x, dict):
        return {k: missing_json(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [missing_json(v) for v in x]
    return x


def to_json(part: Any) -> Any:
    """The JSON form of any part of a record (a dataclass, MissingValue, or containers of them).

    Parameters
    ----------
    part : object
        A record dataclass, a MissingValue, or containers of them.

    Returns
    -------
    object
        Plain JSON-serialisable data.
    """
    return encode(part)
