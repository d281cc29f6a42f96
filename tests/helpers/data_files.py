"""Tiny dataset files in each format (ML-1M, ML-100K, Amazon), written by hand: the loaders' tests
(tests/data/test_data_loaders.py), the data CLI's and the fault-injection tests use them."""

from __future__ import annotations

import gzip
import json
from pathlib import Path


def write_ml1m(d: Path, ratings: str | None = None, users: str | None = None) -> Path:
    d.mkdir(parents=True, exist_ok=True)
    (d / "ratings.dat").write_bytes(
        (ratings or "1::10::5::978300760\n1::20::3::978300761\n2::30::4::978300762\n3::10::1::978300763\n").encode(
            "latin-1"
        )
    )
    (d / "users.dat").write_bytes(
        (users or "1::F::1::10::48067\n2::M::56::16::70072\n3::M::25::0::55117\n").encode("latin-1")
    )
    (d / "movies.dat").write_bytes(
        (
            "10::Toy Story (1995)::Animation|Children's|Comedy\n"
            "20::Amélie (2001)::Comedy|Romance\n"
            "30::Star Wars: Episode IV - A New Hope (1977)::Action|Sci-Fi\n"
        ).encode("latin-1")
    )
    return d


def write_ml100k(d: Path) -> Path:
    d.mkdir(parents=True, exist_ok=True)
    (d / "u.data").write_text("1\t1\t5\t874965758\n1\t2\t3\t876893171\n2\t1\t4\t878542960\n")
    (d / "u.user").write_text("1|24|M|technician|85711\n2|17|F|student|94043\n3|56|M|writer|32067\n")
    flags1 = "|".join(["0"] * 3 + ["1", "1"] + ["0"] * 14)  # Animation, Children's
    flags2 = "|".join(["1"] + ["0"] * 18)  # unknown only
    (d / "u.item").write_bytes(
        (
            f"1|Toy Story (1995)|01-Jan-1995||http://x|{flags1}\n2|Café Society (1995)|01-Jan-1995||http://y|{flags2}\n"
        ).encode("latin-1")
    )
    (d / "u.occupation").write_text("student\ntechnician\nwriter\n")
    return d


def write_amazon(d: Path, extra_review: str | None = None) -> Path:
    d.mkdir(parents=True, exist_ok=True)
    reviews = [
        {"reviewerID": "UB", "asin": "A2", "overall": 5.0, "unixReviewTime": 300, "reviewText": "long text"},
        {"reviewerID": "UA", "asin": "A1", "overall": 4.0, "unixReviewTime": 100},
        {"reviewerID": "UA", "asin": "A3", "overall": 2.0, "unixReviewTime": 200},  # A3 has no title
        {"reviewerID": "UC", "asin": "A3", "overall": 5.0, "unixReviewTime": 250},  # UC only reviews A3
    ]
    lines = [json.dumps(r) for r in reviews]
    if extra_review is not None:
        lines.append(extra_review)
    with gzip.open(d / "Movies_and_TV_5.json.gz", "wt", encoding="utf-8") as fh:
        fh.write("\n".join(lines) + "\n")
    meta = [
        {"asin": "A1", "title": "Heat &amp; Dust", "category": ["Movies & TV", "Drama", "Independent"]},
        {"asin": "A2", "title": "Alien", "category": ["Movies & TV", "Sci-Fi"]},
        {"asin": "A2", "title": "Alien (duplicate record)", "category": []},
        {"asin": "A3", "title": "", "category": ["Movies & TV"]},
        {"asin": "A9", "title": "Not reviewed", "category": []},
    ]
    with gzip.open(d / "meta_Movies_and_TV.json.gz", "wt", encoding="utf-8") as fh:
        fh.write("\n".join(json.dumps(m) for m in meta) + "\n")
    return d
