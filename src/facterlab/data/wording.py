"""The same demographic value in other words (docs/FACTER.md §7, docs/SIMULATED.md).

Two users of one vocabulary:

- the twin monitor's **reword placebo** (:func:`facterlab.facter.twins.placebo_request`) writes each
  value of the prompt's "User demographics" block in other words (:func:`reword`): the same meaning on
  another prompt surface, an edit of the same size as the twin's (every line's value text changes);
- the **text-reading simulator** (``sim.reads = "text"``) reads the values back from the prompt text;
  with ``sim.trigger = "semantic"`` it understands every wording (:func:`canonical`), with
  ``"literal"`` only the spelling facterlab writes by default (:func:`is_default_spelling`).

``canonical(attr, reword(attr, v)) == canonical(attr, v)`` for every value of the vocabularies
(tested), and ``reword(attr, v) != v``.

Every value of the built-in vocabularies (ML-1M's and ML-100K's genders, age bands and occupations, the
synthetic and Amazon datasets' copies of them) has a real rewording, a synonym or paraphrase, never a
change of letter case (:data:`OCCUPATION_SYNONYMS`): a reader that lowercases the prompt still sees
every reworded line change.  A value with no known rewording (an imported dataset's attribute without a
wording map, an occupation outside the vocabularies) is reported with its reason by
:func:`missing_rewordings`, and the run says so (:mod:`facterlab.facter.calibration`).

>>> reword("gender", "F"), reword("age", "25-34"), reword("age", "56+"), reword("occupation", "college/grad student")
('woman', '25 to 34', '56 or older', 'university student')
>>> canonical("gender", "woman"), canonical("age", "25 to 34"), canonical("occupation", "University student")
('F', '25-34', 'college/grad student')
"""

from __future__ import annotations

import re

__all__ = [
    "reword",
    "canonical",
    "is_default_spelling",
    "attribute_label",
    "attribute_of_label",
    "has_rewording",
    "missing_rewordings",
    "OCCUPATION_SYNONYMS",
    "REWORD_VOCABULARY",
    "BUILTIN_REWORDED",
    "GENDER_FORMS",
    "ATTRIBUTE_LABELS",
]

#: every spelling of a gender code, the code first, then facterlab's word (``gender_in_prompt = "word"``), then the reword
GENDER_FORMS = {"F": ("F", "female", "woman"), "M": ("M", "male", "man")}
#: line label of the demographics block -> protected attribute (other labels are irrelevant fields)
ATTRIBUTE_LABELS = {"gender": "gender", "sex": "gender", "age": "age", "occupation": "occupation", "job": "occupation"}

_GENDER_OF = {form.lower(): code for code, forms in GENDER_FORMS.items() for form in forms}
#: the attributes whose values facterlab can write in other words without a user-supplied wording map
BUILTIN_REWORDED = ("gender", "age", "occupation")
#: the version of the reword placebo's built-in vocabulary, part of the run id of every run whose answers
#: it can change (:func:`facterlab.facter.pipeline.run_id_for`): "synonyms-1", a synonym for every
#: occupation (before: a case flip, runs saved without this key)
REWORD_VOCABULARY = "synonyms-1"

#: the reword placebo's occupation in other words: a synonym or paraphrase of every ML-1M label (the
#: synthetic and Amazon datasets use them too) and every ML-100K occupation, never a case change; one
#: wording per value, no two values sharing one (so :func:`canonical` reads each back)
OCCUPATION_SYNONYMS: dict = {
    # ML-1M (README labels)
    "other or not specified": "occupation not given",
    "academic/educator": "teacher or lecturer",
    "artist": "creative professional",
    "clerical/admin": "office clerk",
    "college/grad student": "university student",
    "customer service": "customer support agent",
    "doctor/health care": "physician or medical worker",
    "executive/managerial": "manager",
    "farmer": "agricultural worker",
    "homemaker": "stay-at-home parent",
    "K-12 student": "school pupil",
    "lawyer": "attorney",
    "programmer": "software developer",
    "retired": "pensioner",
    "sales/marketing": "salesperson or marketer",
    "scientist": "researcher",
    "self-employed": "freelancer",
    "technician/engineer": "technical specialist",
    "tradesman/craftsman": "skilled tradesperson",
    "unemployed": "out of work",
    "writer": "author",
    # ML-100K (u.occupation; the values shared with ML-1M above keep their wording)
    "administrator": "administrative officer",
    "doctor": "physician",
    "educator": "teacher",
    "engineer": "engineering professional",
    "entertainment": "entertainer",
    "executive": "senior manager",
    "healthcare": "health care worker",
    "librarian": "library worker",
    "marketing": "marketer",
    "none": "no occupation",
    "other": "another occupation",
    "salesman": "salesperson",
    "student": "full-time student",
    "technician": "technical worker",
}
_OCC_SYN = {k.lower(): v for k, v in OCCUPATION_SYNONYMS.items()}
_OCC_OF = {v.lower(): k.lower() for k, v in OCCUPATION_SYNONYMS.items()}


def attribute_label(attr: str) -> str:
    """The line label of an attribute in the prompt's "User demographics" block.

    >>> attribute_label("gender"), attribute_label("home_country")
    ('Gender', 'Home country')
    """
    return str(attr).replace("_", " ").strip().capitalize()


def attribute_of_label(label: str, attrs=()) -> str | None:
    """The protected attribute a demographics line's label names: the built-in labels
    (:data:`ATTRIBUTE_LABELS`), else one of ``attrs`` whose :func:`attribute_label` it is; None for any
    other line.

    >>> attribute_of_label("Sex"), attribute_of_label("Home country", ["home_country"]), attribute_of_label("Member number")
    ('gender', 'home_country', None)
    """
    key = str(label).strip().lower()
    for a in attrs:
        if attribute_label(a).lower() == key:
            return str(a)
    return ATTRIBUTE_LABELS.get(key)


def has_rewording(attr: str, wordings=None) -> bool:
    """Whether the reword placebo can write ``attr``'s values in other words: a built-in vocabulary
    (:data:`BUILTIN_REWORDED`) or an entry in the user's ``wordings`` map.

    >>> has_rewording("age"), has_rewording("country"), has_rewording("country", {"country": {"BR": "Brazil"}})
    (True, False, True)
    """
    return attr in BUILTIN_REWORDED or bool((wordings or {}).get(attr))


def missing_rewordings(attribute_values, wordings=None) -> dict:
    """The values the reword placebo cannot write in other words, each with its reason: ``{attr: {value:
    reason}}`` (empty when every value has a real rewording).  An attribute with neither a built-in
    vocabulary nor a wording map keeps its line unchanged; an occupation outside
    :data:`OCCUPATION_SYNONYMS` (and without a user wording) only has its first letter's case changed, or
    its "/" written "or", which a reader that ignores case may not see.

    Parameters
    ----------
    attribute_values : mapping of str to sequence of str
        Every value of each protected attribute (``Dataset.attribute_values``).
    wordings : mapping or None, default None
        The user's map ``{attr: {value: other wording}}`` (``Dataset.wordings``).

    Returns
    -------
    dict
        ``{attr: {value: reason}}`` for the values without a real rewording.

    Examples
    --------
    >>> missing_rewordings({"occupation": ["writer", "astronaut"], "country": ["BR"]})
    {'occupation': {'astronaut': 'no synonym known: only its first letter is recased'}, 'country': {'BR': 'no wording for the attribute: its line is left unchanged'}}
    >>> missing_rewordings({"country": ["BR"]}, {"country": {"BR": "Brazil"}})
    {}
    """
    out: dict = {}
    for attr, values in attribute_values.items():
        user = (wordings or {}).get(attr) or {}
        for v in map(str, values):
            alt = user.get(v)
            if alt is not None and str(alt) != v:
                continue
            if attr not in BUILTIN_REWORDED:
                reason = "no wording for the attribute: its line is left unchanged"
            elif attr == "occupation" and v.strip().lower() not in _OCC_SYN:
                w = reword(attr, v)
                reason = (
                    "no synonym known: only its first letter is recased"
                    if w.lower() == v.lower()
                    else f"no synonym known: written {w!r}"
                )
                if w.lower() != v.lower() and "/" in v:
                    continue  # "a/b" -> "a or b": a real change of the text
            else:
                continue
            out.setdefault(str(attr), {})[v] = reason
    return out


def reword(attr: str, value: str, style: int = 1, wordings=None) -> str:
    """``value`` of ``attr`` written in other words (the same meaning, different text).

    Style 1 (the reword placebo): gender: the code or word becomes "woman" / "man"; age: "25-34" ->
    "25 to 34", "56+" -> "56 or older", "Under 18" -> "younger than 18", anything else gets " years";
    occupation: its synonym (:data:`OCCUPATION_SYNONYMS`: "writer" -> "author", "programmer" ->
    "software developer"), else "a/b" -> "a or b", else (no synonym known, reported by
    :func:`missing_rewordings`) the first letter's case is flipped.  Style 2 (the negative
    control's twin, ``facter.twin = "reword"``): "a woman" / "a man"; "between 25 and 34", "56 and over",
    "below 18", "aged X"; "a " before the occupation.

    Parameters
    ----------
    attr : {"gender", "age", "occupation"}
        The protected attribute.
    value : str
        The value as the prompt shows it.
    style : {1, 2}, default 1
        Which rewording.
    wordings : mapping or None, default None
        The user's map ``{attr: {value: other wording}}`` (``Dataset.wordings``); a value it lists is
        written as it says (both styles; style 2 adds nothing), before any built-in rule.

    Returns
    -------
    str
        The reworded value; never equal to ``value``.

    Examples
    --------
    >>> reword("occupation", "writer"), reword("age", "Under 18"), reword("gender", "male")
    ('author', 'younger than 18', 'man')
    """
    v = str(value)
    alt = (wordings or {}).get(attr, {}).get(v)
    if alt is not None and str(alt) != v:
        return str(alt)
    if style == 2:
        return _reword2(attr, v)
    if attr == "gender":
        code = _GENDER_OF.get(v.strip().lower())
        if code is not None:
            word = GENDER_FORMS[code][2]
            return word if word != v else GENDER_FORMS[code][1]
        return v + " (gender)"
    if attr == "age":
        if re.fullmatch(r"\d+-\d+", v):
            a, b = v.split("-")
            return f"{a} to {b}"
        if re.fullmatch(r"\d+\+", v):
            return f"{v[:-1]} or older"
        if v.lower().startswith("under "):
            return "younger than " + v[len("under ") :]
        return v + " years"
    syn = _OCC_SYN.get(v.strip().lower())
    if syn is not None:
        return syn
    if "/" in v:
        return v.replace("/", " or ")
    if v[:1].isalpha():
        first = v[0].lower() if v[0].isupper() else v[0].upper()
        return first + v[1:]
    return v + " (occupation)"


def _reword2(attr: str, v: str) -> str:
    if attr == "gender":
        code = _GENDER_OF.get(v.strip().lower())
        return f"a {GENDER_FORMS[code][2]}" if code is not None else f"gender {v}"
    if attr == "age":
        if re.fullmatch(r"\d+-\d+", v):
            a, b = v.split("-")
            return f"between {a} and {b}"
        if re.fullmatch(r"\d+\+", v):
            return f"{v[:-1]} and over"
        if v.lower().startswith("under "):
            return "below " + v[len("under ") :]
        return "aged " + v
    return "a " + v


def canonical(attr: str, text: str) -> str:
    """The value that ``text`` writes, in one spelling: what a reader who understands every wording of
    :func:`reword` takes from the prompt (gender as its code; age and occupation as facterlab's labels,
    occupation in lower case).

    Parameters
    ----------
    attr : {"gender", "age", "occupation"}
        The protected attribute.
    text : str
        The value's text in the prompt.

    Returns
    -------
    str
        The canonical value.

    Examples
    --------
    >>> canonical("gender", "Female"), canonical("age", "younger than 18"), canonical("age", "40 years")
    ('F', 'Under 18', '40')
    """
    t = re.sub(r"\s+", " ", str(text).strip())
    if attr == "gender":
        t = t[2:] if t.lower().startswith("a ") else t[len("gender ") :] if t.startswith("gender ") else t
        return _GENDER_OF.get(t.lower(), t)
    if attr == "age":
        m = re.fullmatch(r"between (\d+) and (\d+)", t)
        if m:
            return f"{m.group(1)}-{m.group(2)}"
        m = re.fullmatch(r"(\d+) and over", t)
        if m:
            return f"{m.group(1)}+"
        if t.lower().startswith("below "):
            return "Under " + t[len("below ") :]
        if t.startswith("aged "):
            t = t[len("aged ") :]
        m = re.fullmatch(r"(\d+) to (\d+)", t)
        if m:
            return f"{m.group(1)}-{m.group(2)}"
        m = re.fullmatch(r"(\d+) or older", t)
        if m:
            return f"{m.group(1)}+"
        if t.lower().startswith("younger than "):
            return "Under " + t[len("younger than ") :]
        if t.lower().startswith("under "):
            return "Under " + t[len("under ") :]
        return t[: -len(" years")] if t.endswith(" years") else t
    t = t[: -len(" (occupation)")] if t.endswith(" (occupation)") else t
    known = _OCC_OF.get(t.lower()) or (_OCC_OF.get(t[2:].lower()) if t.startswith("a ") else None)
    if known is not None:
        return known
    t = t[2:] if t.startswith("a ") else t
    if t.lower() in _OCC_SYN:
        return t.lower()
    return t.replace(" or ", "/").lower()


def is_default_spelling(attr: str, text: str, value: str) -> bool:
    """Whether ``text`` is the spelling facterlab writes for ``value`` by default (its label, or for
    gender the code or the word): what a ``"literal"`` reader recognises.

    >>> is_default_spelling("gender", "female", "F"), is_default_spelling("gender", "woman", "F")
    (True, False)
    """
    t = str(text).strip()
    if attr == "gender":
        return t in GENDER_FORMS.get(str(value), (str(value),))[:2]
    return t == str(value)
