"""A real rewording for every vocabulary (issue 43 item 5; docs/FACTER.md §7): the reword placebo writes
every value of every built-in attribute in other words (a synonym or paraphrase, never a change of letter
case), says which values have none, and so catches a model that reads the demographics case-insensitively
(the positive control: the same model slips past the old case-flip rewording)."""

from __future__ import annotations

import logging

import pytest

from facterlab.data import AGE_ORDER, GENDERS, OCCUPATION_LABELS
from facterlab.data.handbuilt import OCCS
from facterlab.data.wording import OCCUPATION_SYNONYMS, canonical, missing_rewordings, reword
from facterlab.datatypes import PromptRequest
from facterlab.facter.calibration import _announce_rewording
from facterlab.facter.twins import placebo_request
from facterlab.models.simulated import demographic_lines
from facterlab.reporting import twin_acceptance as ta

#: ML-100K's u.occupation (the data are not in the test tree)
ML100K_OCCUPATIONS = (
    "administrator artist doctor educator engineer entertainment executive healthcare homemaker lawyer librarian "
    "marketing none other programmer retired salesman scientist student technician writer"
).split()
#: each built-in dataset's vocabularies: ML-1M (and the synthetic and Amazon datasets, which use its labels),
#: ML-100K, the tests' hand-built world
VOCABULARIES = {
    "ml-1m/synthetic/amazon": {"gender": GENDERS, "age": AGE_ORDER, "occupation": tuple(OCCUPATION_LABELS.values())},
    "ml-100k": {"gender": GENDERS, "age": AGE_ORDER, "occupation": tuple(ML100K_OCCUPATIONS)},
    "handbuilt": {"gender": GENDERS, "age": AGE_ORDER, "occupation": OCCS},
}
USER = "Recommend.\n\nUser demographics:\n- Gender: {g}\n- Age: {a}\n- Occupation: {o}\n\nWatch history:\n1. A (1990)"


@pytest.mark.parametrize("name", sorted(VOCABULARIES))
def test_every_attribute_line_changes_under_the_reword_placebo_and_not_by_case(name):
    vocab = VOCABULARIES[name]
    assert missing_rewordings(vocab) == {}, name
    for attr, values in vocab.items():
        for v in values:
            g, a, o = (v if attr == x else vocab[x][0] for x in ("gender", "age", "occupation"))
            req = PromptRequest(messages=(("user", USER.format(g=g, a=a, o=o)),))
            before = dict(demographic_lines(req))
            after = dict(demographic_lines(placebo_request(req, "reword")))
            for label in ("Gender", "Age", "Occupation"):
                assert after[label].lower() != before[label].lower(), (name, label, before[label], after[label])
            w = reword(attr, v)
            assert w.lower() != str(v).lower() and canonical(attr, w) == canonical(attr, v), (attr, v, w)


def test_synonyms_are_distinct_and_read_back():
    words = [w.lower() for w in OCCUPATION_SYNONYMS.values()]
    assert len(set(words)) == len(words)
    assert not set(words) & {k.lower() for k in OCCUPATION_SYNONYMS}  # no synonym is another value
    assert reword("occupation", "writer") == "author" and reword("occupation", "programmer") == "software developer"


def test_a_value_without_a_rewording_is_named_with_its_reason(caplog):
    vals = {"occupation": ["writer", "astronaut"], "country": ["BR", "DE"], "language": ["en", "pt"]}
    wordings = {"language": {"en": "English"}}
    miss = missing_rewordings(vals, wordings)
    assert set(miss) == {"occupation", "country", "language"}
    assert "recased" in miss["occupation"]["astronaut"] and "unchanged" in miss["country"]["BR"]
    assert list(miss["language"]) == ["pt"]
    with caplog.at_level(logging.WARNING, logger="facterlab.facter.calibration"):
        _announce_rewording(("reword", "field"), ("occupation", "country", "language"), wordings, vals)
    text = caplog.text
    assert "no wording for country" in text and "'astronaut'" in text and "'pt'" in text


def test_case_flip_wordings_reproduce_the_old_rewording():
    flips = ta.case_flip_wordings({"occupation": ["writer"]})
    assert reword("occupation", "writer", wordings=flips) == "Writer"


@pytest.mark.slow
def test_a_case_insensitive_reader_is_caught_by_the_reword_placebo_alone(tmp_path):
    """Positive control: the stand-in reads the occupation line lower-cased; under the reword placebo alone
    it is flagged far above alpha when occupations are reworded by a case flip (the placebo distance is 0),
    and near alpha with the synonyms."""
    rates = {}
    for before in (True, False):
        r = ta.case_insensitive_run(
            0, before=before, out_dir=tmp_path, dataset="synthetic", n_rows=600, encoder="hash-encoder",
            protocol="open", preset_name="repro", cfr_rows=50,
        )  # fmt: skip
        flags = r.rows["neutral"]["viol_fixed"].astype(bool)
        rates[before] = (float(flags.mean()), r.record.metrics.calibration)
    old, cal_old = rates[True]
    new, cal_new = rates[False]
    assert cal_old.share_placebo_nonzero == 0 and old > 0.3, rates
    assert cal_new.share_placebo_nonzero > 0.2 and new < old / 2, rates


def test_the_reword_vocabulary_is_in_the_run_id_only_where_it_can_change_an_answer():
    from facterlab.config import preset
    from facterlab.facter import pipeline

    def rid(cfg):
        return pipeline.run_id_for(cfg, "abc", {"llm": "x", "encoder": "y"})

    def old(cfg):  # the run id before the vocabulary was hashed
        import hashlib
        import json

        from facterlab.config import config_hash

        blob = json.dumps({"content": "abc", "models": {"llm": "x", "encoder": "y"}}, sort_keys=True)
        return f"{config_hash(cfg)}-{hashlib.sha256(blob.encode()).hexdigest()[:8]}"

    null = {"facter__delta": "twin", "facter__threshold": "null"}
    unchanged = [
        preset("repro"),
        preset("repro", model__llm="simulated"),
        preset("repro", model__llm="simulated", **null),  # the fields reader never reads a placebo's text
        preset("repro", facter__placebo="order", **null),
    ]
    for cfg in unchanged:
        assert rid(cfg) == old(cfg)
    for cfg in (preset("repro", **null), preset("repro", model__llm="simulated", sim__reads="text", **null)):
        assert rid(cfg) != old(cfg)
