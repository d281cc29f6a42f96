"""Confirmed mining with the whole top-k lists as a pair's evidence (``facter.rule_evidence = "list"``; issue 43
item 2, docs/FACTER.md §7.3).

- Positive control: a push that moves Romance into the lists but rarely to the top-1 is found from the lists
  and missed by the top-1 features of the same pairs.
- Co-tags: a push of Comedy that drags co-tagged Animation films into the lists makes ``Comedy`` and not
  ``Animation`` (whose unconditional test does pass: the filter is what drops it).
- Family-wise error under a null (row and twin lists exchangeable): the share of replicates with any rule is
  consistent with <= ``rule_level`` by an exact one-sided binomial test.
- Config: the default keeps run ids; ``"list"`` needs confirmed mining; unknown values are refused.
"""

from __future__ import annotations

import numpy as np
import pytest
from scipy.stats import binomtest

from facterlab.config import config_to_dict, preset
from facterlab.facter.repair import ConfirmedRules, feature_counts, mcnemar_exact
from facterlab.reporting import twin_acceptance as ta

NULL = {"facter__delta": "twin", "facter__threshold": "null", "facter__rule_mining": "confirmed"}
GENRES = ("Drama", "Action", "Thriller", "Comedy", "Romance", "War", "Sci-Fi", "Crime")
LEVEL = 0.05


def _rules(evidence):
    return ConfirmedRules(level=LEVEL, min_effect=0.2, min_count=3, max_rules=10, max_per_attr=5, evidence=evidence)


def _attrs(i):
    return {"gender": "F" if i % 2 else "M", "age": "25-34", "occupation": "writer"}


def _random_list(rng, k=10, pool=GENRES):
    """k items of one or two distinct genres of ``pool`` each (drawn at once: the null test draws many)."""
    first = rng.integers(len(pool), size=k)
    second = (first + rng.integers(1, len(pool), size=k)) % len(pool)
    two = rng.random(k) < 0.5
    return [(pool[f], pool[s]) if t else (pool[f],) for f, s, t in zip(first, second, two)]


def test_a_list_level_push_the_top1_misses_is_found():
    """Every row of age 25-34 gets one Romance film more than its twin low in its list (positions 5-10); the
    top-1 items are the same for row and twin.  The lists find ``age=25-34 -> Romance``; the top-1 cannot."""
    rng = np.random.default_rng(7)
    top1, lists = _rules("top1"), _rules("list")
    for i in range(60):
        base = _random_list(rng, pool=("Drama", "Action", "Thriller", "War"))
        row = list(base)
        row[5 + rng.integers(5)] = ("Romance",)
        attrs = _attrs(i)
        top1.observe(attrs, True, base[0], base[0])  # the same top-1 for the row and its twin
        lists.observe(attrs, True, row, base)
    assert top1.end_pass(1) == ()
    made = {r.text() for r in lists.end_pass(1)}
    assert "AVOID: (age=25-34) -> (Romance-only)" in made, made
    assert all("Romance" in r for r in made), made  # nothing else moved


def test_co_tagged_features_are_retested_without_the_stronger_rules_items():
    """Comedy is pushed into the rows' lists; half the pushed films are also Animation.  ``Animation`` passes
    its unconditional test (so only the re-test can drop it) and yet no Animation rule is made; a push of
    Animation itself (the positive control) is still found."""
    rng = np.random.default_rng(3)

    def run(pushed):
        cr = _rules("list")
        b = c = 0
        for i in range(80):
            base = _random_list(rng, pool=("Drama", "Action", "Thriller", "War"))
            row = list(base)
            for j in (3, 6):
                row[j] = pushed[rng.integers(len(pushed))]
            x = feature_counts([frozenset(t) for t in row]).get("Animation", 0)
            y = feature_counts([frozenset(t) for t in base]).get("Animation", 0)
            b, c = b + (x > y), c + (x < y)
            cr.observe(_attrs(i), True, row, base)
        return {r.feature for r in cr.end_pass(1)}, (b, c)

    made, (b, c) = run([("Comedy",), ("Comedy", "Animation")])
    assert "Comedy" in made and "Animation" not in made, made
    assert b - c >= 3 and mcnemar_exact(b, c) <= LEVEL / 4, (b, c)  # unconditionally it would pass
    made, _ = run([("Animation",), ("Comedy", "Animation")])
    assert "Animation" in made, made


@pytest.mark.slow  # statistical: 200 replicates (about 40 s at load 10)
def test_family_wise_error_of_list_evidence_under_a_null():
    """Row and twin lists drawn from the same law (unbiased model), every row flagged, 3 attributes of several
    values: the share of replicates (one pass each) that make any rule is consistent with <= rule_level, by an
    exact one-sided binomial test at the 0.1% level."""
    rng = np.random.default_rng(11)
    reps, hits = 200, 0
    for _ in range(reps):
        cr = _rules("list")
        for _i in range(80):
            attrs = {
                "gender": ("F", "M")[rng.integers(2)],
                "age": ("18-24", "25-34", "35-44")[rng.integers(3)],
                "occupation": ("writer", "student")[rng.integers(2)],
            }
            cr.observe(attrs, True, _random_list(rng), _random_list(rng))
        hits += bool(cr.end_pass(1))
    p = binomtest(hits, reps, LEVEL, alternative="greater").pvalue
    assert p > 1e-3, f"{hits}/{reps} null replicates made a rule (FWER bound {LEVEL}), p = {p:.2g}"


def test_rule_evidence_setting_keeps_run_ids_and_is_validated():
    cfg = preset("repro", **NULL)
    assert cfg.facter.rule_evidence == "top1" and "rule_evidence" not in config_to_dict(cfg)["facter"]
    lst = preset("repro", facter__rule_evidence="list", **NULL)
    assert config_to_dict(lst)["facter"]["rule_evidence"] == "list"
    with pytest.raises(ValueError, match="needs facter.rule_mining 'confirmed'"):
        preset("repro", facter__rule_evidence="list")
    with pytest.raises(ValueError, match="rule_evidence"):
        preset("repro", facter__rule_evidence="top10", **NULL)
    with pytest.raises(ValueError, match="unknown rule evidence"):
        ConfirmedRules(level=LEVEL, min_effect=0.2, min_count=3, max_rules=10, max_per_attr=5, evidence="top10")
    assert ta.case_config("lines-set", 0, "attributed-list", dataset="synthetic").facter.rule_evidence == "list"
    assert ta.case_config("lines-set", 0, "family", dataset="synthetic").facter.rule_evidence == "top1"


def test_rule_evidence_on_the_command_line():
    import argparse

    from facterlab.facter.commands import config_from_args, register

    parser = argparse.ArgumentParser()
    register(parser.add_subparsers(dest="command"))
    twin = ["run", "--delta", "twin", "--threshold", "null", "--rule-mining", "confirmed"]
    assert config_from_args(parser.parse_args([*twin, "--rule-evidence", "list"])).facter.rule_evidence == "list"
    assert config_from_args(parser.parse_args(twin)).facter.rule_evidence == "top1"
    with pytest.raises(ValueError, match="needs facter.rule_mining 'confirmed'"):
        config_from_args(parser.parse_args(["run", "--rule-evidence", "list"]))
