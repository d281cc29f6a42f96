"""Dataset resolution and loading by name (docs/FACTER.md §1.1).

``"auto"`` is ``"ml-1m"`` when its files lie in the data directory, else ``"ml-100k"`` when present,
else ``"synthetic"``; explicit names never fall back.

Every load of a real dataset checks its files against the pinned (or recorded at download) SHA-256:
a file that differs is a WARNING logged and kept in ``Dataset.info["warnings"]``, so every command and
notebook that reads the data says so; with ``strict_data=True`` or ``FACTERLAB_STRICT_DATA=1``
(``facterlab --strict-data``) it is a :class:`DataIntegrityError` instead, before the file is parsed.
"""

from __future__ import annotations

import logging
import os
from pathlib import Path
from typing import Any

from facterlab import envvars
from facterlab.config import DATASETS, is_dataset_name
from facterlab.config import data_dir as _data_dir
from facterlab.data.amazon import load_amazon
from facterlab.data.dataset import Dataset
from facterlab.data.download import SOURCES, ensure_dataset, integrity_warnings
from facterlab.data.imported import is_imported, load_imported, not_imported
from facterlab.data.movielens import load_ml1m, load_ml100k
from facterlab.data.synthetic import load_synthetic
from facterlab.paths import ENV_STRICT_DATA

__all__ = ["DATASET_DIRS", "ENV_STRICT_DATA", "DataIntegrityError", "resolve_dataset", "load_dataset", "strict_data"]

log = logging.getLogger(__name__)


class DataIntegrityError(ValueError):
    """A data file differs from its pinned (or recorded) SHA-256 and strict data checking is on."""


def strict_data() -> bool:
    """``$FACTERLAB_STRICT_DATA`` is set to 1/true/yes/on."""
    return bool(envvars.get(ENV_STRICT_DATA))


# Sub-directory of the data directory for each real dataset
DATASET_DIRS = {"ml-1m": "ml-1m", "ml-100k": "ml-100k", "amazon": "amazon-movies-tv"}


def _has_files(directory: Path, files) -> bool:
    return all((directory / f).is_file() for f in files)


def resolve_dataset(name: str = "auto", data_dir: os.PathLike | str | None = None) -> str:
    """Resolve a dataset name: "auto" -> "ml-1m" if present, else "ml-100k" if present, else "synthetic".

    Explicit names are returned unchanged (never a fallback): a built-in name, or the name of a dataset
    imported into the data directory (:func:`facterlab.data.import_dataset`, checked when it is loaded).
    A name neither built in nor a valid dataset name is a ValueError.

    >>> import tempfile
    >>> resolve_dataset("auto", tempfile.mkdtemp())
    'synthetic'
    >>> resolve_dataset("ml-1m", tempfile.mkdtemp())
    'ml-1m'
    """
    if name not in DATASETS and not is_dataset_name(name):
        raise ValueError(
            f"unknown dataset {name!r}; choose one of {', '.join(map(repr, DATASETS))} or an imported dataset's name"
        )
    if name not in DATASETS and not is_imported(name, data_dir):
        raise not_imported(name, data_dir)
    if name != "auto":
        return name
    root = _data_dir(data_dir)
    for candidate in ("ml-1m", "ml-100k"):
        if _has_files(root / DATASET_DIRS[candidate], SOURCES[candidate].files):
            return candidate
    return "synthetic"


def load_dataset(name: str = "auto", data_dir: os.PathLike | str | None = None, **kw: Any) -> Dataset:
    """Load a dataset by name (after :func:`resolve_dataset`).

    Keywords: ``download`` (bool, fetch missing real files), ``demographics_seed`` and
    ``max_reviews`` (Amazon), and the generator parameters of :mod:`facterlab.data.synthetic`
    (``n_users``, ``n_items``, ``n_ratings``, ``seed``).
    """
    resolved = resolve_dataset(name, data_dir)
    root = _data_dir(data_dir)
    download = bool(kw.pop("download", False))
    strict = kw.pop("strict_data", None)
    if resolved == "synthetic":
        return load_synthetic(**kw)
    if resolved not in DATASETS:  # an imported dataset (docs/OWN_DATA.md)
        return load_imported(resolved, root)
    directory = ensure_dataset(resolved, root, download=download)
    warnings = integrity_warnings(resolved, root)
    if warnings and (strict if strict is not None else strict_data()):
        raise DataIntegrityError(
            f"{warnings[0]}"
            + (f" (and {len(warnings) - 1} more file(s))" if len(warnings) > 1 else "")
            + f"; strict data checking is on ({ENV_STRICT_DATA} / --strict-data)"
        )
    for w in warnings:
        log.warning("%s", w)
    if resolved == "ml-1m":
        ds = load_ml1m(directory, **kw)
    elif resolved == "ml-100k":
        ds = load_ml100k(directory, **kw)
    else:
        ds = load_amazon(directory, **kw)
    if warnings:
        ds.info["warnings"] = warnings + [w for w in ds.info.get("warnings") or [] if w not in warnings]
    return ds
