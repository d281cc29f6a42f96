"""Notebook outputs: ``results/<notebook>/metrics.json``."""

from __future__ import annotations

import dataclasses
import json
import math
import os
from pathlib import Path
from typing import Any

from facterlab.config import results_dir
from facterlab.datatypes import MissingValue
from facterlab.facter.record import to_json


def _clean(obj: Any) -> Any:
    """JSON-safe copy: numpy scalars to Python, NaN/inf to None, MissingValue and run-record parts to
    their JSON form."""
    np: Any
    try:
        import numpy as np
    except ImportError:  # pragma: no cover
        np = None
    if isinstance(obj, MissingValue):
        return obj.to_json()
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):  # a part of a run record
        return _clean(to_json(obj))
    if isinstance(obj, dict):
        return {str(k): _clean(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_clean(v) for v in obj]
    if np is not None and isinstance(obj, np.generic):
        obj = obj.item()
    if np is not None and isinstance(obj, np.ndarray):
        return [_clean(v) for v in obj.tolist()]
    if isinstance(obj, float) and not math.isfinite(obj):
        return None
    if isinstance(obj, Path):
        return str(obj)
    return obj


def write_metrics(notebook: str, metrics: dict, directory: os.PathLike | str | None = None) -> Path:
    """Write ``metrics`` to ``<results>/<notebook>/metrics.json`` and return the path.

    >>> import tempfile, json
    >>> d = tempfile.mkdtemp()
    >>> p = write_metrics("00_quickstart", {"x": float("nan"), "n": 3}, d)
    >>> json.loads(p.read_text())
    {'n': 3, 'x': None}
    """
    out = results_dir(directory) / notebook
    out.mkdir(parents=True, exist_ok=True)
    path = out / "metrics.json"
    path.write_text(json.dumps(_clean(metrics), indent=2, sort_keys=True))
    return path
