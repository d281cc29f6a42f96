"""Prompts (docs/FACTER.md §1.3): content, rules, domain word, demographics switch, requests."""

from __future__ import annotations

import pandas as pd
import pytest

from facterlab.data.movielens import items_frame
from facterlab.datatypes import PromptRequest, Rule
from facterlab.facter import prompts

ITEMS = items_frame(
    list(range(1, 51)),
    [f"Title {i} (19{i + 40})" for i in range(1, 51)],
    [["Drama"] if i % 2 else ["Comedy", "Romance"] for i in range(1, 51)],
).set_index("item_id")
ROW = {
    "row_id": 7,
    "gender": "F",
    "age": "35-44",
    "occupation": "writer",
    "history": list(range(1, 11)),
    "candidates": list(range(11, 51)),
    "target": 11,
}


def test_system_prompts():
    neutral, fair = prompts.system_prompt("neutral"), prompts.system_prompt("fair")
    assert "recommendation assistant" in neutral and "watch history" in neutral
    assert "not from the user's demographics" in fair and "stereotypes" in fair
    assert prompts.system_prompt("facter") == fair  # no rules yet: the fair rules only
    assert prompts.system_prompt("empty") == ""
    with pytest.raises(ValueError, match="unknown system prompt kind 'unfair'"):
        prompts.system_prompt("unfair")
    with pytest.raises(ValueError, match="only used by the 'facter'"):
        prompts.system_prompt("fair", [Rule("gender", "F", "Romance")])


def test_facter_rules_bullets():
    rules = [
        Rule("gender", "F", "Romance"),
        Rule("age", "35-44", "Heat (1995)", kind="title"),
        Rule("gender", "F", "Romance"),
    ]
    text = prompts.system_prompt("facter", rules)
    lines = text.splitlines()
    i = lines.index("Fairness constraints (learned from past violations):")
    assert lines[i + 1 :] == ["- AVOID: (gender=F) -> (Romance-only)", "- AVOID: (age=35-44) -> (Heat (1995))"]
    assert text.startswith(prompts.system_prompt("fair"))
    assert "nonconformity" not in text  # announce is off by default


def test_announce_threshold():
    text = prompts.system_prompt("facter", [Rule("gender", "M", "War")], announce=(1.0044, 2, 3))
    assert text.endswith("Keep nonconformity S <= 1.004. Iteration 2/3.")


@pytest.mark.parametrize("domain", ["movie", "product"])
def test_open_prompt(domain):
    text = prompts.user_prompt(ROW, ITEMS, "open", k=10, domain=domain)
    assert text.startswith("User demographics:\n- Gender: female\n- Age: 35-44\n- Occupation: writer\n")
    hist = text.split("Watch history (oldest first):\n")[1].split("\n\n")[0].splitlines()
    assert hist == [f"{i}. Title {i} (19{i + 40})" for i in range(1, 11)]
    assert f"next 10 {domain}s" in text and "ONLY a JSON array of exactly 10" in text
    other = "product" if domain == "movie" else "movie"
    assert other not in text
    assert "Candidate" not in text


def test_rank_prompt_lists_candidates():
    text = prompts.user_prompt(ROW, ITEMS, "rank", k=10, domain="movie")
    block = text.split("Candidate movies:\n")[1].split("\n\n")[0].splitlines()
    assert len(block) == 40 and block[0] == "1. Title 11 (1951)" and block[-1] == "40. Title 50 (1990)"
    assert "top 10 candidate titles" in text and "only titles from the candidate list" in text


def test_no_demographics_mode():
    text = prompts.user_prompt(ROW, ITEMS, "open", demographics=False)
    assert "demographics" not in text.lower() and "female" not in text and "writer" not in text
    assert text.startswith("Watch history (oldest first):")
    # the row without attributes works too
    bare = {"history": ROW["history"]}
    assert prompts.user_prompt(bare, ITEMS, demographics=False) == text


def test_bad_arguments():
    with pytest.raises(ValueError, match="unknown protocol 'rerank'"):
        prompts.user_prompt(ROW, ITEMS, "rerank")
    with pytest.raises(ValueError, match="domain 'books!' is not a word the prompts can use"):
        prompts.user_prompt(ROW, ITEMS, domain="books!")
    with pytest.raises(ValueError, match="needs the row's candidates"):
        prompts.user_prompt({**ROW, "candidates": []}, ITEMS, "rank")
    with pytest.raises(ValueError, match="not in the items table"):
        prompts.user_prompt({**ROW, "history": [999]}, ITEMS)


def test_context_text():
    assert prompts.context_text(["A", "B"]) == "History (most recent last):\n- A\n- B"


def test_build_request_rank_and_open():
    system = prompts.system_prompt("neutral")
    req = prompts.build_request(pd.Series(ROW), ITEMS, system, "rank", 10, "movie", seed=42)
    assert isinstance(req, PromptRequest) and req.seed == 42 and req.k == 10
    assert req.message_dicts[0] == {"role": "system", "content": system}
    assert req.message_dicts[1]["content"] == prompts.user_prompt(ROW, ITEMS, "rank")
    assert req.candidates == tuple(f"Title {i} (19{i + 40})" for i in range(11, 51))
    meta = req.meta_dict
    assert (meta["gender"], meta["age"], meta["occupation"]) == ("F", "35-44", "writer")
    assert meta["candidate_ids"] == tuple(range(11, 51)) and meta["history_ids"] == tuple(range(1, 11))
    assert meta["history_features"][0] == ("Drama",) and meta["history_features"][1] == ("Comedy", "Romance")
    assert meta["row_id"] == 7 and "target" not in meta
    hash(req)  # usable as a cache key
    req_open = prompts.build_request(ROW, ITEMS, "", "open", 10, "product", seed=1, demographics=False)
    assert req_open.candidates is None and req_open.messages[0] == ("system", "")
    assert "products" in req_open.messages[1][1] and "demographics" not in req_open.messages[1][1]


def test_own_domain_and_attributes():
    """An imported dataset's item noun and protected attributes reach the prompt; the built-in wording is
    unchanged (the built-in tests above pin it)."""
    row = {"country": "BR", "home_language": "pt", "history": ROW["history"]}
    text = prompts.user_prompt(row, ITEMS, domain="book", attrs=("country", "home_language"))
    assert text.splitlines()[:3] == ["User demographics:", "- Country: BR", "- Home language: pt"]
    assert "History (oldest first):" in text and "Watch history" not in text
    assert "next 10 books" in text and "from the history." in text
    req = prompts.PromptSet(attrs=("country", "home_language"), domain="book").build_request(row, ITEMS, "s")
    assert req.meta_dict["protected"] == ("country", "home_language") and req.meta_dict["country"] == "BR"
    assert "watch" not in prompts.PromptSet(domain="book").system_prompt("neutral")
