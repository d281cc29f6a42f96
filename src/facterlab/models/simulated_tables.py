"""The simulated recommender's bias tables (docs/SIMULATED.md): which features (genres) its bias pushes
to users with which attribute values, and with what weight.

It holds the built-in tables (:data:`BIAS_TABLE`, the default; :data:`RARE_BIAS_TABLE`, a positive
control; :data:`NARROW_BIAS_TABLE`, a held-out style; :data:`ROMANCE_BIAS_TABLE`, the hand-built world's),
the names a config may give them (``sim.bias_table``, :data:`NAMED_BIAS_TABLES`), the check and normal
form of any table (:func:`normalise_bias_table`, :func:`load_bias_table`, a JSON file included) and its
Markdown for docs/SIMULATED.md (:func:`bias_table_markdown`).  Data and validation only: nothing here
knows the recommender (:mod:`facterlab.models.simulated`, which re-exports every name).
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Mapping
from pathlib import Path

from facterlab.safeio import read_json

__all__ = [
    "BIAS_TABLE",
    "RARE_BIAS_TABLE",
    "NARROW_BIAS_TABLE",
    "STUDENTS_COMEDY_BIAS_TABLE",
    "load_bias_table",
    "bias_table_markdown",
]

#: attribute -> value -> features (genres) the bias pushes to users with that value.  Values cover the
#: ML-1M labels and the ML-100K occupation names; a value not listed gets no push for that attribute.
BIAS_TABLE: dict = {
    "gender": {
        "F": ("Romance", "Musical", "Children's"),
        "M": ("Action", "War", "Sci-Fi"),
    },
    "age": {
        "Under 18": ("Animation", "Horror"),
        "18-24": ("Animation", "Horror"),
        "50-55": ("Film-Noir", "Mystery"),
        "56+": ("Film-Noir", "Mystery"),
    },
    "occupation": {
        # technical
        "programmer": ("Thriller", "Fantasy"),
        "scientist": ("Thriller", "Fantasy"),
        "technician/engineer": ("Thriller", "Fantasy"),
        "engineer": ("Thriller", "Fantasy"),
        "technician": ("Thriller", "Fantasy"),
        # arts and letters
        "artist": ("Documentary", "Film-Noir"),
        "writer": ("Documentary", "Film-Noir"),
        "entertainment": ("Documentary", "Film-Noir"),
        "academic/educator": ("Documentary", "Film-Noir"),
        "educator": ("Documentary", "Film-Noir"),
        "librarian": ("Documentary", "Film-Noir"),
        # students
        "college/grad student": ("Comedy", "Horror"),
        "K-12 student": ("Comedy", "Horror"),
        "student": ("Comedy", "Horror"),
        # home and retirement
        "homemaker": ("Children's", "Musical"),
        "retired": ("Western", "War"),
    },
}

#: a positive control: the bias pushes genres that users rarely watch (each under 2% of the ML-100K
#: ratings: Documentary 0.8%, Fantasy 1.4%, Film-Noir 1.7%, Western 1.9%) to every user by gender, so a
#: biased top-1 item lies far from the user's own taste and the prediction error d sees it.
RARE_BIAS_TABLE: dict = {
    "gender": {
        "F": ("Documentary", "Western"),
        "M": ("Film-Noir", "Fantasy"),
    },
}

#: a narrow bias: one age group and one occupation, small weights (a held-out style of table: the repair
#: must not do harm where the bias touches few users; notebook 09 section 7)
NARROW_BIAS_TABLE: dict = {
    "age": {"25-34": {"Drama": 0.5, "Romance": 0.5}},
    "occupation": {"student": {"Sci-Fi": 0.7}, "college/grad student": {"Sci-Fi": 0.7}},
}

#: a push on one attribute that is correlated with others (issue 43): Comedy to students only.  Students
#: are young, so an all-attributes twin also sees Comedy move with age (and, where the student share differs
#: by gender, with gender); confirmed rules must name occupation, not age or gender (docs/FACTER.md §7.3)
STUDENTS_COMEDY_BIAS_TABLE: dict = {
    "occupation": {"student": ("Comedy",), "college/grad student": ("Comedy",), "K-12 student": ("Comedy",)},
}

#: the hand-built world's table (facterlab.data.handbuilt; the tests and notebook 09's positive control)
ROMANCE_BIAS_TABLE: dict = {"gender": {"F": ("Romance",)}}

#: the tables a config may name (``sim.bias_table``); anything else is read as a JSON file
NAMED_BIAS_TABLES = {
    "default": BIAS_TABLE,
    "rare": RARE_BIAS_TABLE,
    "romance": ROMANCE_BIAS_TABLE,
    "narrow": NARROW_BIAS_TABLE,
    "students-comedy": STUDENTS_COMEDY_BIAS_TABLE,
}
#: the largest weight a bias table may give a feature (in units of beta)
MAX_BIAS_WEIGHT = 100.0


def _table_error(where: str, what: str) -> ValueError:
    return ValueError(
        f"bias table {where}: {what}; expected {{attribute: {{value: [feature, ...] or {{feature: weight}}}}}} "
        f"with the dataset's protected attributes and weights in [0, {MAX_BIAS_WEIGHT:g}]"
    )


def normalise_bias_table(table: Mapping, where: str = "(dict)") -> dict:
    """``attribute -> value -> {feature: weight}`` from a table whose values are feature lists (weight 1)
    or ``{feature: weight}`` mappings; a clear ``ValueError`` for anything else.

    >>> normalise_bias_table({"gender": {"F": ["Romance"], "M": {"War": 2}}})
    {'gender': {'F': {'Romance': 1.0}, 'M': {'War': 2.0}}}
    """
    import math

    if not isinstance(table, Mapping) or not table:
        raise _table_error(where, "not a non-empty mapping")
    out: dict = {}
    for attr, values in table.items():
        if not isinstance(attr, str) or not attr:
            raise _table_error(where, f"attribute {attr!r} is not a non-empty string")
        if not isinstance(values, Mapping):
            raise _table_error(where, f"{attr}: not a mapping of values")
        out[attr] = {}
        for value, feats in values.items():
            if isinstance(feats, Mapping):
                pairs = list(feats.items())
            elif isinstance(feats, (list, tuple)):
                pairs = [(f, 1.0) for f in feats]
                counts = Counter(f for f in feats if isinstance(f, str))
                repeated = sorted(f for f, c in counts.items() if c > 1)
                if repeated:
                    raise _table_error(
                        where, f"{attr}={value}: the feature(s) {repeated[:3]} appear more than once in one list"
                    )
            else:
                raise _table_error(where, f"{attr}={value}: not a list of features or a feature -> weight mapping")
            w: dict = {}
            for f, x in pairs:
                if not isinstance(f, str) or not f:
                    raise _table_error(where, f"{attr}={value}: feature {f!r} is not a non-empty string")
                if isinstance(x, bool) or not isinstance(x, (int, float)) or not math.isfinite(x):
                    raise _table_error(where, f"{attr}={value}: weight of {f!r} is not a finite number ({x!r})")
                if not 0.0 <= float(x) <= MAX_BIAS_WEIGHT:
                    raise _table_error(where, f"{attr}={value}: weight of {f!r} is {x!r}")
                w[f] = float(x)
            out[attr][str(value)] = w
    return out


def load_bias_table(spec: str | Mapping | None = None) -> dict:
    """The bias table of ``spec``: ``None``/``"default"`` (:data:`BIAS_TABLE`), ``"rare"``
    (:data:`RARE_BIAS_TABLE`), a mapping, or the path of a JSON file with the same shape
    (``--sim-bias-table FILE``); normalised by :func:`normalise_bias_table`.

    >>> load_bias_table("rare")["gender"]["F"]
    {'Documentary': 1.0, 'Western': 1.0}
    """
    if spec is None:
        spec = "default"
    if isinstance(spec, Mapping):
        return normalise_bias_table(spec)
    if spec in NAMED_BIAS_TABLES:
        return normalise_bias_table(NAMED_BIAS_TABLES[spec], repr(spec))
    path = Path(spec).expanduser()
    if not path.is_file():
        raise ValueError(
            f"sim.bias_table {spec!r} is neither {' nor '.join(map(repr, NAMED_BIAS_TABLES))} nor an existing JSON file"
        )
    try:
        read_json(path, what="bias table", kind="bias_table_bytes")  # size and depth checked first
        data = json.loads(path.read_text(encoding="utf-8"), object_pairs_hook=_no_duplicates(str(path)))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as e:
        raise ValueError(f"bias table {path}: cannot be read as JSON ({e})") from None
    return normalise_bias_table(data, str(path))


def _no_duplicates(where: str):
    def hook(pairs: list) -> dict:
        seen: dict = {}
        for k, v in pairs:
            if k in seen:
                raise ValueError(f"bias table {where}: the key {k!r} appears twice in one object (JSON keeps the last)")
            seen[k] = v
        return seen

    return hook


def check_bias_table(table: Mapping, attribute_values: Mapping, features, where: str = "(table)") -> None:
    """Refuse a bias table that names an attribute, value or feature the dataset does not have, naming the
    closest match (a misspelt value would otherwise push nothing, silently).

    Parameters
    ----------
    table : mapping
        A normalised table (:func:`normalise_bias_table`).
    attribute_values : mapping
        The dataset's ``attribute_values`` (its protected attributes and their values).
    features : collection of str
        Every feature of the catalogue.
    where : str
        The table's name in the error.

    Examples
    --------
    >>> vals = {"country": ["BR", "DE"]}
    >>> check_bias_table({"country": {"BR": {"Jazz": 1.0}}}, vals, {"Jazz", "Rock"})
    >>> check_bias_table({"country": {"Brazil": {"Jazz": 1.0}}}, vals, {"Jazz"})
    Traceback (most recent call last):
    ...
    ValueError: bias table (table): country has no value 'Brazil' (values: 'BR', 'DE')
    """
    from facterlab.data.imported import closest_match as near

    feats = set(map(str, features))
    for attr, values in table.items():
        if attr not in attribute_values:
            raise ValueError(
                f"bias table {where}: the dataset has no protected attribute {attr!r}{near(attr, attribute_values)}; "
                f"its attributes are {', '.join(map(repr, attribute_values))}"
            )
        known = [str(v) for v in attribute_values[attr]]
        for value, weights in values.items():
            if str(value) not in known:
                listed = ", ".join(map(repr, known[:8])) + (", ..." if len(known) > 8 else "")
                raise ValueError(
                    f"bias table {where}: {attr} has no value {value!r}{near(value, known)} (values: {listed})"
                )
            for f in weights:
                if f not in feats:
                    raise ValueError(
                        f"bias table {where}: {attr}={value}: no item has the feature {f!r}{near(f, feats)}"
                    )


def bias_table_markdown(table: Mapping | None = None) -> str:
    """The bias table as Markdown (docs/SIMULATED.md embeds this text; a test keeps them equal).

    >>> print(bias_table_markdown({"gender": {"F": ("Romance",)}}))
    | attribute | value | features pushed |
    |---|---|---|
    | gender | F | Romance |
    """
    table = BIAS_TABLE if table is None else table
    lines = ["| attribute | value | features pushed |", "|---|---|---|"]
    for attr, values in table.items():
        for value, feats in values.items():
            if isinstance(feats, Mapping):
                text = ", ".join(f if float(w) == 1.0 else f"{f} (x{float(w):g})" for f, w in feats.items())
            else:
                text = ", ".join(feats)
            lines.append(f"| {attr} | {value} | {text} |")
    return "\n".join(lines)
