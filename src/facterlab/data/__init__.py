"""Datasets for FACTER (docs/FACTER.md §1.1): MovieLens-1M, MovieLens-100K, Amazon Movies & TV 2018, synthetic.

Every loader returns a :class:`Dataset` with the same tables, so that the interaction protocol
(:mod:`facterlab.data.protocol`, docs/FACTER.md §1.2) and the prompts (:mod:`facterlab.data.prompts`, §1.3)
never look at the source format.

Dataset resolution: ``"auto"`` is ``"ml-1m"`` when its files lie in the data directory, else
``"ml-100k"`` when present, else ``"synthetic"`` (generated, clearly flagged ``is_synthetic=True``).
Explicit names never fall back: a missing file is a :class:`FileNotFoundError` saying which file, where
to put it, and where it comes from.

>>> AGE_LABELS[25], OCCUPATION_LABELS[0], OCCUPATION_LABELS[20], len(GENRES)
('25-34', 'other or not specified', 'writer', 18)
>>> age_bucket(17), age_bucket(18), age_bucket(49), age_bucket(56)
('Under 18', '18-24', '45-49', '56+')
"""

from __future__ import annotations

import hashlib
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from facterlab.config import DATASETS
from facterlab.config import data_dir as _data_dir

__all__ = [
    "Dataset",
    "load_dataset",
    "resolve_dataset",
    "PROTECTED",
    "AGE_LABELS",
    "AGE_ORDER",
    "OCCUPATION_LABELS",
    "GENRES",
    "GENDERS",
    "age_bucket",
    "DATASET_DIRS",
]

PROTECTED = ("gender", "age", "occupation")

GENDERS = ("M", "F")

# ML-1M README: age codes -> labels
AGE_LABELS = {1: "Under 18", 18: "18-24", 25: "25-34", 35: "35-44", 45: "45-49", 50: "50-55", 56: "56+"}
AGE_ORDER = tuple(AGE_LABELS.values())

# ML-1M README: occupation codes -> labels (code 0 is '"other" or not specified')
OCCUPATION_LABELS = {
    0: "other or not specified",
    1: "academic/educator",
    2: "artist",
    3: "clerical/admin",
    4: "college/grad student",
    5: "customer service",
    6: "doctor/health care",
    7: "executive/managerial",
    8: "farmer",
    9: "homemaker",
    10: "K-12 student",
    11: "lawyer",
    12: "programmer",
    13: "retired",
    14: "sales/marketing",
    15: "scientist",
    16: "self-employed",
    17: "technician/engineer",
    18: "tradesman/craftsman",
    19: "unemployed",
    20: "writer",
}

# The 18 ML-1M genres (ML-100K adds "unknown", which we drop from the features)
GENRES = (
    "Action",
    "Adventure",
    "Animation",
    "Children's",
    "Comedy",
    "Crime",
    "Documentary",
    "Drama",
    "Fantasy",
    "Film-Noir",
    "Horror",
    "Musical",
    "Mystery",
    "Romance",
    "Sci-Fi",
    "Thriller",
    "War",
    "Western",
)

# Sub-directory of the data directory for each real dataset
DATASET_DIRS = {"ml-1m": "ml-1m", "ml-100k": "ml-100k", "amazon": "amazon-movies-tv"}


def age_bucket(age: int) -> str:
    """Map a numeric age (ML-100K) to the ML-1M age label.

    Buckets: <18 "Under 18", 18-24, 25-34, 35-44, 45-49, 50-55, >=56 "56+".
    """
    a = int(age)
    if a < 18:
        return "Under 18"
    for upper, label in ((24, "18-24"), (34, "25-34"), (44, "35-44"), (49, "45-49"), (55, "50-55")):
        if a <= upper:
            return label
    return "56+"


@dataclass
class Dataset:
    """A recommendation dataset with protected user attributes (docs/FACTER.md §1.1).

    ``ratings``: user_id int64, item_id int64, rating float32, timestamp int64.
    ``users``: user_id and the protected attributes ``gender``, ``age``, ``occupation`` as display
    labels (strings).  ``items``: item_id, title, features (list of genres/categories), text (what
    the encoder embeds: ``"{title} :: {genre|genre}"`` for MovieLens, ``"{title}"`` for Amazon).
    ``attribute_values``: every value of each protected attribute in canonical order.
    ``info``: provenance (files read, rows dropped and why).
    """

    name: str
    domain: str
    is_synthetic: bool
    ratings: pd.DataFrame
    users: pd.DataFrame
    items: pd.DataFrame
    attribute_values: dict
    info: dict = field(default_factory=dict)
    PROTECTED = PROTECTED

    _fingerprint: str | None = field(default=None, repr=False, compare=False)

    def fingerprint(self) -> str:
        """SHA-256 of the dataset's content (ratings, users, item titles/features), 16 hex digits."""
        if self._fingerprint is None:
            h = hashlib.sha256(self.name.encode())
            r = self.ratings
            for col in ("user_id", "item_id", "rating", "timestamp"):
                h.update(np.ascontiguousarray(r[col].to_numpy()).tobytes())
            u = self.users
            for col in ("user_id",) + PROTECTED:
                h.update("\x1f".join(map(str, u[col].tolist())).encode("utf-8"))
            it = self.items
            h.update(np.ascontiguousarray(it["item_id"].to_numpy()).tobytes())
            h.update("\x1f".join(it["title"].tolist()).encode("utf-8"))
            h.update("\x1f".join("|".join(f) for f in it["features"]).encode("utf-8"))
            self._fingerprint = h.hexdigest()[:16]
        return self._fingerprint

    def summary(self) -> dict:
        """Sizes and attribute distributions (counts of users per value, canonical order)."""
        dist = {}
        for attr in PROTECTED:
            counts = self.users[attr].value_counts()
            dist[attr] = {v: int(counts.get(v, 0)) for v in self.attribute_values[attr]}
        return {
            "dataset": self.name,
            "domain": self.domain,
            "is_synthetic": self.is_synthetic,
            "n_users": int(len(self.users)),
            "n_items": int(len(self.items)),
            "n_ratings": int(len(self.ratings)),
            "attribute_distribution": dist,
        }


def _has_files(directory: Path, files) -> bool:
    return all((directory / f).is_file() for f in files)


def resolve_dataset(name: str = "auto", data_dir: os.PathLike | str | None = None) -> str:
    """Resolve a dataset name: "auto" -> "ml-1m" if present, else "ml-100k" if present, else "synthetic".

    Explicit names are returned unchanged (never a fallback); unknown names are a ValueError.

    >>> import tempfile
    >>> resolve_dataset("auto", tempfile.mkdtemp())
    'synthetic'
    >>> resolve_dataset("ml-1m", tempfile.mkdtemp())
    'ml-1m'
    """
    from facterlab.data.download import SOURCES

    if name not in DATASETS:
        raise ValueError(f"unknown dataset {name!r}; choose one of {', '.join(map(repr, DATASETS))}")
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
    if resolved == "synthetic":
        from facterlab.data.synthetic import load_synthetic

        return load_synthetic(**kw)
    from facterlab.data.download import ensure_dataset

    directory = ensure_dataset(resolved, root, download=download)
    if resolved == "ml-1m":
        from facterlab.data.movielens import load_ml1m

        return load_ml1m(directory, **kw)
    if resolved == "ml-100k":
        from facterlab.data.movielens import load_ml100k

        return load_ml100k(directory, **kw)
    from facterlab.data.amazon import load_amazon

    return load_amazon(directory, **kw)
