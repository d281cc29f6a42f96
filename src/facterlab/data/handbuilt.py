"""A small hand-built world: clean genre tastes, Romance only as a stereotype (the tests' FACTER world,
and notebook 09's positive control, where FACTER's score sees the bias).

Users have one taste genre (Action, Comedy, Sci-Fi, Thriller) and rate 25 items of it 5 stars in
sequence; Romance items exist but nobody likes them, so a recommender that pushes Romance to women
produces large nonconformity scores that repair rules can remove.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from facterlab.data import AGE_ORDER, GENDERS, Dataset

TASTES = ("Action", "Comedy", "Sci-Fi", "Thriller")
OCCS = ("writer", "programmer", "artist", "scientist")


def make_world(n_users: int = 160, per_genre: int = 30, n_pos: int = 25, seed: int = 0) -> Dataset:
    """The hand-built world of the module docstring: ``n_users`` users, ``per_genre`` items per genre, ``n_pos`` liked items each."""
    rng = np.random.default_rng(seed)
    genres = TASTES + ("Romance",)
    items = []
    for g_i, g in enumerate(genres):
        for j in range(per_genre):
            iid = g_i * per_genre + j + 1
            title = f"{g} Tale {j} ({1980 + j})"
            items.append({"item_id": iid, "title": title, "features": [g], "text": f"{title} :: {g}"})
    items = pd.DataFrame(items)
    users, ratings = [], []
    for u in range(1, n_users + 1):
        g_i = int(rng.integers(len(TASTES)))
        users.append(
            {
                "user_id": u,
                "gender": GENDERS[u % 2],
                "age": AGE_ORDER[int(rng.integers(1, 5))],
                "occupation": OCCS[int(rng.integers(len(OCCS)))],
            }
        )
        chosen = rng.choice(per_genre, size=n_pos, replace=False) + g_i * per_genre + 1
        for t, iid in enumerate(chosen):
            ratings.append((u, int(iid), 5.0, 1000 * u + t))
    ratings = pd.DataFrame(ratings, columns=["user_id", "item_id", "rating", "timestamp"]).astype(
        {"user_id": "int64", "item_id": "int64", "rating": "float32", "timestamp": "int64"}
    )
    users = pd.DataFrame(users)
    attr_values = {"gender": list(GENDERS), "age": list(AGE_ORDER), "occupation": list(OCCS)}
    return Dataset(
        name="synthetic",
        domain="movie",
        is_synthetic=True,
        ratings=ratings,
        users=users,
        items=items,
        attribute_values=attr_values,
    )
