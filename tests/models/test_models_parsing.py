"""Unit tests for models/parsing.py and the candidate matcher (no models needed)."""

from __future__ import annotations

import pytest

from facterlab.datatypes import PARSE_EMPTY, PARSE_FALLBACK, PARSE_OK
from facterlab.models.parsing import clean_title, parse_titles
from facterlab.models.rankers import match_to_candidates, truncate_history


@pytest.mark.parametrize(
    "text, k, titles, status",
    [
        ('["A", "B", "C"]', 10, ("A", "B", "C"), PARSE_OK),
        ('["A", "B", "C"]', 2, ("A", "B"), PARSE_OK),
        ('Here you go: ["Heat (1995)", "Fargo (1996)"] Enjoy!', 10, ("Heat (1995)", "Fargo (1996)"), PARSE_OK),
        ('```json\n["Alien", "Aliens"]\n```', 10, ("Alien", "Aliens"), PARSE_OK),
        ("[\u201cAlien\u201d, \u201cAliens\u201d]", 10, ("Alien", "Aliens"), PARSE_OK),  # smart quotes
        ('["Alien", "alien", "ALIEN ", "Heat"]', 10, ("Alien", "Heat"), PARSE_OK),  # case-insensitive dedup
        ('[["A", "B"]]', 10, ("A", "B"), PARSE_OK),  # nested once
        ('[{"title": "A"}, {"title": "B"}]', 10, ("A", "B"), PARSE_OK),
        ('[1, 2] and then ["X"]', 10, ("1", "2"), PARSE_OK),
        ("1. Heat (1995)\n2. Fargo (1996)\n3) Babe", 10, ("Heat (1995)", "Fargo (1996)", "Babe"), PARSE_FALLBACK),
        ("- Heat\n* Fargo\n\u2022 Babe", 10, ("Heat", "Fargo", "Babe"), PARSE_FALLBACK),
        ('1. "Heat",\n2. "Fargo",', 10, ("Heat", "Fargo"), PARSE_FALLBACK),
        ("1. **Heat**\n2. **Fargo**", 10, ("Heat", "Fargo"), PARSE_FALLBACK),
        ("```\nHeat\nFargo\n```", 10, ("Heat", "Fargo"), PARSE_FALLBACK),
        ('["Heat", "Fargo", "Ba', 10, ("Heat", "Fargo"), PARSE_FALLBACK),  # truncated JSON
        ("", 10, (), PARSE_EMPTY),
        ("[]", 10, (), PARSE_EMPTY),
        ("I am sorry, I cannot recommend movies.", 10, (), PARSE_EMPTY),
    ],
)
def test_parse_titles_cases(text, k, titles, status):
    assert parse_titles(text, k) == (titles, status)


def test_parse_keeps_years_as_written_and_caps():
    text = "\n".join(f"{i}. Movie {i} ({1990 + i})" for i in range(1, 15))
    titles, status = parse_titles(text, 10)
    assert status == PARSE_FALLBACK and len(titles) == 10
    assert titles[0] == "Movie 1 (1991)" and titles[-1] == "Movie 10 (2000)"


def test_parse_prefers_json_over_lines():
    text = 'Some picks:\n1. Not this\n["Heat", "Fargo"]'
    assert parse_titles(text, 10) == (("Heat", "Fargo"), PARSE_OK)


def test_parse_bad_k():
    with pytest.raises(ValueError, match="k must be positive"):
        parse_titles("[]", 0)


def test_parse_none_is_empty():
    assert parse_titles(None, 5) == ((), PARSE_EMPTY)


def test_clean_title():
    assert clean_title("  3. \u2018Heat\u2019 ,") == "Heat"


def test_one_movie_is_listed_once_whatever_its_spelling():
    text = "1. The Matrix (1999)\n2. Heat\n3. Matrix, The\n4. HEAT (1995)\n5. Fargo"
    titles, _ = parse_titles(text, 10)
    assert titles == ("The Matrix (1999)", "Heat", "Fargo")


def test_match_exact_fuzzy_and_permutation():
    cands = ["Heat (1995)", "Matrix, The (1999)", "Fargo (1996)", "Toy Story (1995)", "Babe (1995)"]
    perm, n = match_to_candidates(["Toy Story", "The Matrix (1999)", "Fargo", "Unknown Film", "fargo"], cands)
    assert n == 3
    assert perm[:3] == ("Toy Story (1995)", "Matrix, The (1999)", "Fargo (1996)")
    assert perm[3:] == ("Heat (1995)", "Babe (1995)")  # unmatched in list order
    assert sorted(perm) == sorted(cands)


def test_match_fuzzy_typo_and_cutoff():
    cands = ["Shawshank Redemption, The (1994)", "Heat (1995)"]
    perm, n = match_to_candidates(["The Shawshank Redemtion"], cands)
    assert (perm, n) == (("Shawshank Redemption, The (1994)", "Heat (1995)"), 1)
    perm, n = match_to_candidates(["Completely different"], cands)
    assert (perm, n) == (tuple(cands), 0)


def test_match_nothing_parsed():
    assert match_to_candidates([], ["A", "B"]) == (("A", "B"), 0)


def test_truncate_history_renumbers_and_errors():
    msgs = [
        {"role": "system", "content": "S"},
        {"role": "user", "content": "Watch history:\n1. A\n2. B\n3. C\n\nCandidates:\n1. X\n2. Y"},
    ]
    out = truncate_history(msgs, ["A", "B", "C"], 1)
    assert out[1]["content"] == "Watch history:\n1. B\n2. C\n\nCandidates:\n1. X\n2. Y"
    assert msgs[1]["content"].startswith("Watch history:\n1. A")  # input untouched
    with pytest.raises(ValueError, match="not found"):
        truncate_history(msgs, ["Z"], 1)
