"""The :class:`Dataset` every loader returns, and the vocabularies of the protected attributes.

The loaders (:mod:`facterlab.data.movielens`, :mod:`facterlab.data.amazon`, :mod:`facterlab.data.synthetic`)
import from here; :mod:`facterlab.data` re-exports everything (docs/ARCHITECTURE.md).

>>> AGE_LABELS[25], OCCUPATION_LABELS[0], OCCUPATION_LABELS[20], len(GENRES)
('25-34', 'other or not specified', 'writer', 18)
>>> age_bucket(17), age_bucket(18), age_bucket(49), age_bucket(56)
('Under 18', '18-24', '45-49', '56+')
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

__all__ = [
    "Dataset",
    "PROTECTED",
    "AGE_LABELS",
    "AGE_ORDER",
    "OCCUPATION_LABELS",
    "GENRES",
    "GENDERS",
    "age_bucket",
]

#: The protected user attributes, in canonical order (the one definition in the package).
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
    ``users``: user_id and one column per protected attribute, as display labels (strings): ``gender``,
    ``age``, ``occupation`` for the built-in datasets, any names for an imported one
    (:func:`facterlab.data.from_tables`).  ``items``: item_id, title, features (list of genres/categories), text (what
    the encoder embeds: ``"{title} :: {genre|genre}"`` for MovieLens, ``"{title}"`` for Amazon).
    ``attribute_values``: every value of each protected attribute in canonical order; its keys, in
    order, are the dataset's protected attributes (:attr:`protected`).
    ``info``: provenance (files read, rows dropped and why).
    ``wordings``: for the twin monitor's reword placebo, ``{attr: {value: the same value in other
    words}}`` supplied by the user; the built-in vocabularies have theirs in
    :mod:`facterlab.data.wording`.
    ``item_noun``: what the prompts call the history ("Watch history" for movies and products,
    "History" otherwise) is derived from ``domain``; see :func:`facterlab.facter.prompts.history_label`.
    """

    name: str
    domain: str
    is_synthetic: bool
    ratings: pd.DataFrame
    users: pd.DataFrame
    items: pd.DataFrame
    attribute_values: dict
    info: dict = field(default_factory=dict)
    wordings: dict = field(default_factory=dict)

    _fingerprint: str | None = field(default=None, repr=False, compare=False)

    @property
    def protected(self) -> tuple:
        """The protected attributes, in canonical order: the keys of :attr:`attribute_values`.

        >>> from facterlab.data.handbuilt import make_world
        >>> make_world(n_users=8).protected
        ('gender', 'age', 'occupation')
        """
        return tuple(self.attribute_values)

    def fingerprint(self) -> str:
        """SHA-256 of the dataset's content (ratings, users, item titles/features), 16 hex digits."""
        if self._fingerprint is None:
            h = hashlib.sha256(self.name.encode())
            r = self.ratings
            for col in ("user_id", "item_id", "rating", "timestamp"):
                h.update(np.ascontiguousarray(r[col].to_numpy()).tobytes())
            u = self.users
            for col in ("user_id",) + self.protected:
                h.update("\x1f".join(map(str, u[col].tolist())).encode("utf-8"))
            if self.protected != PROTECTED or self.wordings or self.domain not in ("movie", "product"):
                # an imported dataset: its attribute names, vocabularies, wordings and domain are content too
                # (never reached by the built-in datasets, whose fingerprints are unchanged by this)
                extra = [list(self.protected), self.attribute_values, self.wordings, self.domain]
                h.update(json.dumps(extra, sort_keys=True, default=str).encode("utf-8"))
            it = self.items
            h.update(np.ascontiguousarray(it["item_id"].to_numpy()).tobytes())
            h.update("\x1f".join(it["title"].tolist()).encode("utf-8"))
            h.update("\x1f".join("|".join(f) for f in it["features"]).encode("utf-8"))
            self._fingerprint = h.hexdigest()[:16]
        return self._fingerprint

    def summary(self) -> dict:
        """Sizes and attribute distributions (counts of users per value, canonical order)."""
        dist = {}
        for attr in self.protected:
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
