"""What the text-reading simulator reads (``sim.reads = "text"``; docs/SIMULATED.md): the demographic
lines of a prompt's text, the part of the prompt each surface sensitivity is seeded by, and the named
cases of the text-reading simulator (:data:`TEXT_CASES`, notebook 09 section 7).

Functions of a request's text alone, and config data: the recommender
(:mod:`facterlab.models.simulated`, which re-exports every public name) turns them into the shown
attributes and the surface noise.
"""

from __future__ import annotations

import re

from facterlab.data.wording import ATTRIBUTE_LABELS, canonical
from facterlab.datatypes import PromptRequest

__all__ = ["TEXT_CASES", "demographic_lines"]

#: the named cases of the text-reading simulator (``sim.reads = "text"``; docs/SIMULATED.md): sim section
#: overrides.  Beta = 0 everywhere but the last two: no push.  The surface cases have no demographic logic at
#: all (every flag on them is false); ``semantic`` depends on the values' meaning without a direction (its
#: flags are true for row-level counterfactual dependence, and no group is pushed: docs/FACTER.md §7).
TEXT_CASES: dict = {
    # reads the demographics as a set of lines: order-invariant, but any change of a line's text moves it
    "lines-set": {"reads": "text", "beta": 0.0, "wording_sd": 1.0},
    # the whole prompt text seeds its answer (order, wording, fields, rules)
    "prompt-hash": {"reads": "text", "beta": 0.0, "prompt_sd": 1.0},
    # sampling noise: a fresh draw per request (temperature), nothing else
    "per-call": {"reads": "text", "beta": 0.0, "temperature": 1.0},
    # moved by the order of the lines only
    "line-order": {"reads": "text", "beta": 0.0, "order_sd": 1.0},
    # moved by irrelevant fields only
    "irrelevant-field": {"reads": "text", "beta": 0.0, "field_sd": 1.0},
    # every surface sensitivity at once, and sampling
    "all-surfaces": {
        "reads": "text",
        "beta": 0.0,
        "order_sd": 0.5,
        "wording_sd": 0.5,
        "field_sd": 0.5,
        "temperature": 0.5,
    },
    # biased: the push fires on the literal spelling ("female", "F", "25-34"), not on "woman" / "25 to 34"
    "word-triggered": {"reads": "text", "trigger": "literal", "beta": 2.0},
    # reads the values' meaning and answers as a random function of who the user is, with no direction: a
    # positive of row-level counterfactual dependence, a negative of group-level directional bias
    "semantic": {"reads": "text", "beta": 0.0, "meaning_sd": 1.0},
    # biased on the meaning, read from the text, with sampling noise (the power-under-sampling study)
    "sampled-bias": {"reads": "text", "beta": 2.0, "temperature": 1.0},
}


_BLOCK = re.compile(r"User demographics:\n((?:- [^\n]*\n?)+)")


def demographic_lines(req: PromptRequest) -> list:
    """``(label, value)`` of each line of the first "User demographics" block of the request's user
    messages, in prompt order (empty when there is none): what a model that reads the text sees.

    >>> r = PromptRequest(messages=(("user", "User demographics:\\n- Gender: female\\n- Age: 25-34\\n\\nHistory"),))
    >>> demographic_lines(r)
    [('Gender', 'female'), ('Age', '25-34')]
    """
    for role, content in req.messages:
        if role != "user":
            continue
        m = _BLOCK.search(content)
        if m is None:
            continue
        out = []
        for line in m.group(1).rstrip("\n").split("\n"):
            label, _, value = line[2:].partition(":")
            out.append((label.strip(), value.strip()))
        return out
    return []


def _aspect(name: str, req: PromptRequest, lines: list) -> tuple:
    """The part of the prompt that seeds surface sensitivity ``name`` (order, wording, field, prompt)."""
    if name == "order":
        return tuple(lab for lab, _ in lines)
    if name == "wording":
        return tuple(sorted(f"{lab}: {v}" for lab, v in lines if lab.lower() in ATTRIBUTE_LABELS))
    if name == "meaning":  # the values as a reader who understands every wording takes them
        return tuple(
            sorted(
                f"{ATTRIBUTE_LABELS[lab.lower()]}={canonical(ATTRIBUTE_LABELS[lab.lower()], v)}"
                for lab, v in lines
                if lab.lower() in ATTRIBUTE_LABELS
            )
        )
    if name == "field":
        return tuple(sorted(f"{lab}: {v}" for lab, v in lines if lab.lower() not in ATTRIBUTE_LABELS))
    return tuple(req.messages)
