"""A seeded synthetic dataset in MovieLens-1M format (for machines without the real data).

SYNTHETIC DATA: never a stand-in for published numbers.  Every output made from it says so
(``Dataset.is_synthetic``).  The structure is made so that the pipeline's effects have something to
find:

- item popularity is Zipf-like: weight ``w_i = (rank_i)^(-zipf_a)`` over a random ranking;
- each movie has 1-3 of the 18 ML-1M genres (genre frequencies roughly as in ML-1M), a unique title
  built from word lists and a release year;
- a user's taste for genre g is ``b_g + gender shift + age shift + occupation shift + N(0, 0.5)``
  (e.g. women and older users lean to Drama/Romance, men to Action/Sci-Fi/War, children to
  Animation/Children's), so recommendations can differ by protected group;
- users pick movies with probability proportional to ``w_i * exp(affinity)`` (Gumbel top-k, without
  replacement); the rating is ``round(3.3 + 0.9 * affinity + N(0, 0.8))`` clipped to 1..5, so liked
  genres get high ratings; per-user activity is log-normal with at least 20 ratings (as ML-1M);
- each user's timestamps increase (exponential gaps, some ties within a session).

:func:`write_ml1m_format` writes ``users.dat``, ``movies.dat``, ``ratings.dat`` (``::``, latin-1);
:func:`load_synthetic` caches them under ``cache_dir()/synthetic/<params-hash>/`` and loads them with
the ML-1M loader.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import tempfile
from pathlib import Path

import numpy as np

from facterlab.config import cache_dir as _cache_dir
from facterlab.data.dataset import GENRES, Dataset
from facterlab.data.movielens import load_ml1m

GENERATOR_VERSION = 3
DEFAULTS = {"n_users": 1000, "n_items": 1200, "n_ratings": 100_000, "seed": 0}

# roughly ML-1M's genre frequencies (share of movies carrying the genre)
_GENRE_FREQ = {
    "Action": 0.13,
    "Adventure": 0.07,
    "Animation": 0.03,
    "Children's": 0.07,
    "Comedy": 0.30,
    "Crime": 0.06,
    "Documentary": 0.03,
    "Drama": 0.40,
    "Fantasy": 0.02,
    "Film-Noir": 0.01,
    "Horror": 0.09,
    "Musical": 0.03,
    "Mystery": 0.03,
    "Romance": 0.12,
    "Sci-Fi": 0.07,
    "Thriller": 0.13,
    "War": 0.04,
    "Western": 0.02,
}
_GENDER_SHIFT = {
    "F": {
        "Romance": 0.8,
        "Drama": 0.4,
        "Musical": 0.5,
        "Children's": 0.3,
        "Action": -0.5,
        "War": -0.5,
        "Horror": -0.3,
        "Sci-Fi": -0.4,
        "Western": -0.3,
    },
    "M": {"Action": 0.4, "Sci-Fi": 0.4, "War": 0.3, "Thriller": 0.2, "Western": 0.2, "Romance": -0.3, "Musical": -0.3},
}
_AGE_SHIFT = {
    1: {"Animation": 0.9, "Children's": 1.0, "Comedy": 0.4, "Drama": -0.5, "Film-Noir": -0.6, "War": -0.4},
    18: {"Comedy": 0.4, "Horror": 0.5, "Action": 0.3, "Sci-Fi": 0.2, "Film-Noir": -0.3},
    25: {"Action": 0.2, "Thriller": 0.2, "Comedy": 0.2},
    35: {"Drama": 0.2, "Thriller": 0.1},
    45: {"Drama": 0.4, "War": 0.2, "Horror": -0.3},
    50: {"Drama": 0.5, "War": 0.4, "Western": 0.3, "Film-Noir": 0.3, "Horror": -0.5},
    56: {"Drama": 0.6, "War": 0.6, "Western": 0.5, "Film-Noir": 0.5, "Musical": 0.3, "Horror": -0.7, "Animation": -0.4},
}
_OCC_SHIFT = {
    10: {"Children's": 0.6, "Animation": 0.6},  # K-12 student
    4: {"Comedy": 0.3, "Horror": 0.2},  # college/grad student
    12: {"Sci-Fi": 0.6, "Fantasy": 0.4},  # programmer
    15: {"Sci-Fi": 0.5, "Documentary": 0.4},  # scientist
    20: {"Drama": 0.4, "Film-Noir": 0.5},  # writer
    2: {"Drama": 0.3, "Film-Noir": 0.4, "Documentary": 0.3},  # artist
    13: {"War": 0.4, "Western": 0.4, "Musical": 0.2},  # retired
    9: {"Romance": 0.4, "Children's": 0.4},  # homemaker
    1: {"Documentary": 0.4, "Drama": 0.2},  # academic/educator
}
# marginal user distributions, roughly ML-1M's
_AGE_P = {1: 0.03, 18: 0.18, 25: 0.40, 35: 0.18, 45: 0.08, 50: 0.07, 56: 0.06}
# occupations: ML-1M's order of sizes, but more concentrated, so that a few joint
# (gender, age, occupation) groups reach 30 rows in a 750-row test split
_OCC_W = np.array(
    [900, 400, 150, 100, 1300, 60, 150, 1000, 10, 50, 120, 80, 300, 90, 200, 90, 150, 350, 40, 40, 150], dtype=float
)

_ADJ = (
    "Silent",
    "Crimson",
    "Last",
    "Broken",
    "Hidden",
    "Golden",
    "Lonely",
    "Midnight",
    "Wild",
    "Burning",
    "Frozen",
    "Secret",
    "Dark",
    "Bright",
    "Forgotten",
    "Endless",
    "Savage",
    "Gentle",
    "Electric",
    "Hollow",
    "Iron",
    "Velvet",
    "Distant",
    "Lucky",
    "Final",
    "Restless",
    "Sweet",
    "Bitter",
    "Painted",
    "Northern",
    "Little",
    "Wicked",
    "Brave",
    "Quiet",
    "Shattered",
    "Falling",
    "Eternal",
    "Lost",
)
_NOUN = (
    "River",
    "Night",
    "Summer",
    "Heart",
    "City",
    "Dream",
    "Kingdom",
    "Shadow",
    "Road",
    "Storm",
    "Promise",
    "Garden",
    "Horizon",
    "Stranger",
    "Empire",
    "Island",
    "Letter",
    "Mirror",
    "Voyage",
    "Winter",
    "Fortune",
    "Harbor",
    "Journey",
    "Secret",
    "Station",
    "Frontier",
    "Legacy",
    "Circus",
    "Detective",
    "Planet",
    "Melody",
    "Ghost",
    "Soldier",
    "Witness",
    "Valley",
    "Game",
    "Machine",
)
_PATTERNS = (
    "The {a} {n}",
    "{a} {n}",
    "{n} of the {a} {m}",
    "A {a} {n}",
    "{n} and {m}",
    "Return to {a} {n}",
    "The {n}'s {m}",
    "{n} in the {a} {m}",
)
_ROMAN = ("II", "III", "IV", "V", "VI", "VII", "VIII", "IX", "X")


def params_hash(n_users: int, n_items: int, n_ratings: int, seed: int) -> str:
    """Short hash of the generator parameters and version (the cache folder name)."""
    blob = json.dumps(
        {"n_users": n_users, "n_items": n_items, "n_ratings": n_ratings, "seed": seed, "version": GENERATOR_VERSION},
        sort_keys=True,
    )
    return hashlib.sha256(blob.encode()).hexdigest()[:12]


def _titles(rng: np.random.Generator, n: int) -> list:
    seen: set = set()
    out: list[str] = []
    while len(out) < n:
        pat = _PATTERNS[rng.integers(len(_PATTERNS))]
        base = pat.format(
            a=_ADJ[rng.integers(len(_ADJ))], n=_NOUN[rng.integers(len(_NOUN))], m=_NOUN[rng.integers(len(_NOUN))]
        )
        if base.startswith("A ") and base[2] in "AEIOU":
            base = "An" + base[1:]
        if base in seen:  # sequels make the rest unique
            for r in _ROMAN:
                if f"{base} {r}" not in seen:
                    base = f"{base} {r}"
                    break
            else:
                continue
        seen.add(base)
        out.append(base)
    return out


def generate(
    n_users: int = DEFAULTS["n_users"],
    n_items: int = DEFAULTS["n_items"],
    n_ratings: int = DEFAULTS["n_ratings"],
    seed: int = DEFAULTS["seed"],
) -> dict:
    """Generate the three ML-1M tables as numpy arrays / lists (see the module docstring).

    Returns ``{"users": (uid, gender, age_code, occ_code, zip), "movies": (mid, title, genres),
    "ratings": (uid, mid, rating, ts)}``.

    >>> g = generate(50, 80, 2000, seed=1)
    >>> len(g["ratings"][0]), len(set(g["movies"][1])) == 80
    (2000, True)
    """
    if n_ratings < 20 * n_users:
        raise ValueError(
            f"n_ratings = {n_ratings} is below 20 per user (n_users = {n_users}); use at least {20 * n_users}"
        )
    if n_ratings > n_users * n_items // 2:
        raise ValueError(
            f"n_ratings = {n_ratings} is more than half of n_users * n_items = {n_users * n_items}; add users or items"
        )
    rng = np.random.default_rng([GENERATOR_VERSION, seed])
    G = len(GENRES)
    # items: genres, years, titles, popularity
    freq = np.array([_GENRE_FREQ[g] for g in GENRES])
    n_gen = rng.choice([1, 2, 3], size=n_items, p=[0.5, 0.35, 0.15])
    item_genres = np.zeros((n_items, G), dtype=bool)
    for i in range(n_items):
        item_genres[i, rng.choice(G, size=n_gen[i], replace=False, p=freq / freq.sum())] = True
    years = np.clip(np.round(2000 - rng.gamma(1.5, 9.0, size=n_items)), 1919, 2000).astype(int)
    titles = [f"{t} ({y})" for t, y in zip(_titles(rng, n_items), years)]
    rank = rng.permutation(n_items) + 1
    log_pop = -1.0 * np.log(rank)  # Zipf exponent 1
    # users: attributes and genre tastes
    gender = np.where(rng.random(n_users) < 0.28, "F", "M")
    age_codes = np.array(list(_AGE_P))
    age = rng.choice(age_codes, size=n_users, p=np.array(list(_AGE_P.values())))
    occ = rng.choice(21, size=n_users, p=_OCC_W / _OCC_W.sum())
    gi = {g: j for j, g in enumerate(GENRES)}
    taste = rng.normal(0.0, 0.5, size=(n_users, G))
    for table, keys in ((_GENDER_SHIFT, gender), (_AGE_SHIFT, age), (_OCC_SHIFT, occ)):
        for key, shifts in table.items():
            rows = keys == key
            for g, s in shifts.items():
                taste[rows, gi[g]] += s
    # activity: log-normal, at least 20, summing to n_ratings
    act = rng.lognormal(0.0, 0.9, size=n_users)
    extra = n_ratings - 20 * n_users
    counts = 20 + np.floor(act / act.sum() * extra).astype(int)
    counts = np.minimum(counts, n_items // 2)
    short = n_ratings - counts.sum()
    while short > 0:  # hand out the remainder one at a time to users below the cap
        room = np.flatnonzero(counts < n_items // 2)
        add = rng.choice(room, size=min(short, len(room)), replace=False)
        counts[add] += 1
        short = n_ratings - counts.sum()
    ig = item_genres.astype(np.float64)
    ig /= ig.sum(axis=1, keepdims=True)
    uid_out, mid_out, r_out, ts_out = [], [], [], []
    t0, t1 = 956_703_932, 1_046_454_590  # ML-1M's time span
    for u in range(n_users):
        aff = ig @ taste[u]  # mean taste over the item's genres
        keys = log_pop + 1.5 * aff + rng.gumbel(size=n_items)
        c = counts[u]
        chosen = np.argpartition(-keys, c - 1)[:c]
        chosen = chosen[rng.permutation(c)]
        a = aff[chosen]
        rating = np.clip(np.round(3.3 + 0.9 * a + rng.normal(0.0, 0.8, size=c)), 1, 5).astype(int)
        start = rng.integers(t0, t1 - 86_400 * 30)
        gaps = rng.exponential(3_600.0, size=c) * (rng.random(c) < 0.8)  # 20% ties within a session
        ts = start + np.cumsum(np.round(gaps)).astype(np.int64)
        uid_out.append(np.full(c, u + 1))
        mid_out.append(chosen + 1)
        r_out.append(rating)
        ts_out.append(ts)
    zips = [f"{z:05d}" for z in rng.integers(0, 100_000, size=n_users)]
    genres_str = ["|".join(GENRES[j] for j in np.flatnonzero(row)) for row in item_genres]
    return {
        "users": (np.arange(1, n_users + 1), gender, age, occ, zips),
        "movies": (np.arange(1, n_items + 1), titles, genres_str),
        "ratings": (np.concatenate(uid_out), np.concatenate(mid_out), np.concatenate(r_out), np.concatenate(ts_out)),
    }


def write_ml1m_format(
    directory: os.PathLike | str,
    n_users: int = DEFAULTS["n_users"],
    n_items: int = DEFAULTS["n_items"],
    n_ratings: int = DEFAULTS["n_ratings"],
    seed: int = DEFAULTS["seed"],
) -> Path:
    """Generate and write ``users.dat``, ``movies.dat``, ``ratings.dat`` (ML-1M format) into ``directory``."""
    g = generate(n_users, n_items, n_ratings, seed)
    d = Path(directory)
    d.mkdir(parents=True, exist_ok=True)
    uid, gender, age, occ, zips = g["users"]
    (d / "users.dat").write_text(
        "".join(
            f"{a}::{b}::{c}::{e}::{z}\n"
            for a, b, c, e, z in zip(uid.tolist(), gender, age.tolist(), occ.tolist(), zips)
        ),
        encoding="latin-1",
    )
    mid, titles, genres = g["movies"]
    (d / "movies.dat").write_text(
        "".join(f"{a}::{t}::{s}\n" for a, t, s in zip(mid.tolist(), titles, genres)), encoding="latin-1"
    )
    ru, ri, rr, rt = g["ratings"]
    (d / "ratings.dat").write_text(
        "".join(f"{a}::{b}::{c}::{t}\n" for a, b, c, t in zip(ru.tolist(), ri.tolist(), rr.tolist(), rt.tolist())),
        encoding="latin-1",
    )
    return d


def synthetic_dir(
    n_users: int = DEFAULTS["n_users"],
    n_items: int = DEFAULTS["n_items"],
    n_ratings: int = DEFAULTS["n_ratings"],
    seed: int = DEFAULTS["seed"],
    cache: os.PathLike | str | None = None,
) -> Path:
    """``cache_dir()/synthetic/<params-hash>/``, written (atomically) if missing."""
    d = _cache_dir(cache) / "synthetic" / params_hash(n_users, n_items, n_ratings, seed)
    if all((d / f).is_file() for f in ("users.dat", "movies.dat", "ratings.dat")):
        return d
    d.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(dir=d.parent, prefix=".tmp-"))
    try:
        write_ml1m_format(tmp, n_users, n_items, n_ratings, seed)
        (tmp / "params.json").write_text(
            json.dumps(
                {
                    "n_users": n_users,
                    "n_items": n_items,
                    "n_ratings": n_ratings,
                    "seed": seed,
                    "version": GENERATOR_VERSION,
                    "note": "SYNTHETIC DATA generated by facterlab",
                },
                indent=2,
            )
        )
        try:
            os.replace(tmp, d)
        except OSError:  # another process won the race
            if not d.is_dir():
                raise
    finally:
        if tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)
    return d


def load_synthetic(
    n_users: int = DEFAULTS["n_users"],
    n_items: int = DEFAULTS["n_items"],
    n_ratings: int = DEFAULTS["n_ratings"],
    seed: int = DEFAULTS["seed"],
    cache: os.PathLike | str | None = None,
) -> Dataset:
    """Load (generating once) the synthetic dataset; ``name="synthetic"``, ``is_synthetic=True``."""
    d = synthetic_dir(n_users, n_items, n_ratings, seed, cache)
    ds = load_ml1m(d, name="synthetic", is_synthetic=True)
    ds.info.update(
        {
            "format": "ml-1m (synthetic)",
            "generator": {
                "n_users": n_users,
                "n_items": n_items,
                "n_ratings": n_ratings,
                "seed": seed,
                "version": GENERATOR_VERSION,
            },
        }
    )
    return ds
