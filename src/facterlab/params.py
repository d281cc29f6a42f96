"""Notebook parameters: declared in a notebook's ``parameters`` cell, validated strictly, sized by PROFILE.

One helper serves the notebooks (:func:`facterlab.notebook.parameters`, called in the cell right after
the parameters cell) and ``facterlab reproduce --set KEY=VALUE`` (docs/PATHS.md, "Parameters"):

- a name the notebook does not declare is an error that names the close matches;
- a value is coerced by the type of the declared default, strictly: ``"false"`` -> ``False`` (bool from
  true/false/1/0/yes/no only), ``"3"`` -> ``3`` (int from int-like text, never from ``2.5``), float,
  str; a list from a list or from text holding a Python/JSON list (``-p SEEDS "[0, 1]"``); ``None``
  only where the default is None or the parameter's comment mentions None; every error names the
  parameter and the expected type;
- a numeric value is checked against its bound (:func:`parameter_bound`: the config field's bound for
  the parameters that set one, :data:`PARAMETER_FIELDS`);
- ``PROFILE`` applies the profile's values (:data:`PROFILES`), and with ``SMOKE`` true the notebook's
  smoke sizes, to every parameter that was not passed explicitly.

>>> declared = parse_parameters_cell('SMOKE = False\\nSEEDS = [0]\\nN = 40  # rows; None: all rows')
>>> validate({"SMOKE": "false", "SEEDS": "[0, 1]", "N": "None"}, declared)
{'SMOKE': False, 'SEEDS': [0, 1], 'N': None}
>>> validate({"SMOKe": True}, declared)
Traceback (most recent call last):
...
facterlab.params.ParameterError: unknown parameter SMOKe (did you mean SMOKE?); declared: N, SEEDS, SMOKE
"""

from __future__ import annotations

import ast
import difflib
import io
import json
import math
import re
import tokenize
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from facterlab.config import BOUNDS, THREADS, Bound
from facterlab.config_bounds import short_repr
from facterlab.safeio import read_json

PAPER_MODELS = ["llama3-8b", "llama2-7b", "mistral-7b"]

#: What each profile sets (PROFILE, SMOKE and overrides), each only in notebooks that declare the name and
#: only where the name was not passed explicitly.  ``facterlab reproduce --profile P`` passes PROFILE
#: and SMOKE; the notebook's parameter helper applies the rest (so ``papermill -p PROFILE smoke`` does
#: the same as the runner).
PROFILES: dict = {
    "default": {
        "description": "bundled SmolLM2-135M + MiniLM on CPU, dataset auto (measured times: docs/BENCHMARKS.md)",
        "smoke": False,
        "overrides": {},
    },
    "paper": {
        "description": "REPRO sizes (ML-1M n=2,500, 3 seeds, T=3) with the 7-8B backbones and preset repro; needs a GPU",
        "smoke": False,
        "overrides": {
            "PRESET": "repro",  # the method's settings: REPRO's alpha 0.10 (preset icml has the paper's 0.20)
            "DATASET": "ml-1m",
            "DATASETS": ["ml-1m", "amazon"],  # Table 1 (notebook 03): REPRO's two datasets
            "MODEL": "llama3-8b",
            "MODELS": PAPER_MODELS,
            "SEEDS": [0, 1, 2],
            "N_INTERACTIONS": None,  # the dataset's REPRO size: ML-1M 2,500, Amazon 3,750
            "PASSES": 3,
            "CFR_ROWS": 200,
            "MAX_NEW_TOKENS": 250,
            "RANKER": "generate",
            "BATCH_SIZE": 16,
            "FAST_DECODING": False,  # REPRO's decoding: full-length generation, the default kernel
            "DEVICE": "auto",
            "SIM_ENCODER": "all-MiniLM-L6-v2",  # notebook 00's part 1: the paper's encoder (default: hash-encoder)
        },
    },
    "smoke": {
        "description": "SMOKE=True on synthetic data: tiny sizes, checks that every notebook runs",
        "smoke": True,
        "overrides": {"DATASET": "synthetic"},
    },
}

#: The type of parameters whose declared default is None (an example value of that type).
NONE_DEFAULT_TYPES: dict = {
    "DATASETS": ["ml-1m"],
    "MODELS": ["smollm2-135m"],
    "N_ROWS": 0,
    "DATA_DIR": "",
}


class ParameterError(ValueError):
    """A notebook parameter that is unknown or has a value of the wrong type."""


#: Notebook parameters that set a config field (each element, for a list): their bound is the field's,
#: read from :data:`facterlab.config.BOUNDS` (the one owner of bounds).
PARAMETER_FIELDS: dict = {
    "PASSES": ("facter", "passes"),
    "N_INTERACTIONS": ("data", "n_rows"),
    "SIM_N_INTERACTIONS": ("data", "n_rows"),
    "N_ROWS": ("data", "n_rows"),
    "CFR_ROWS": ("metrics", "cfr_rows"),
    "MAX_NEW_TOKENS": ("model", "max_new_tokens"),
    "BATCH_SIZE": ("model", "batch_size"),
    "SNSR_MIN_GROUP": ("metrics", "snsr_min_group"),
    "MIN_GROUP": ("metrics", "snsr_min_group"),
    "SEED": ("", "seed"),
    "SEEDS": ("", "seed"),
    "SHOWN_SEED": ("", "seed"),
    "SIM_BETA": ("sim", "beta"),
    "BETAS": ("sim", "beta"),
    "RHOS": ("sim", "rho"),
    "SIGMA": ("sim", "sigma"),
    "H": ("sim", "h"),
    "PHI": ("sim", "phi"),
    "DEMOTE": ("sim", "demote"),
    "ALPHAS": ("facter", "alpha"),
    "LAMBDAS": ("facter", "lam"),
    "TAU_RHOS": ("facter", "tau_rho"),
    "TESTBED_N": ("data", "n_rows"),
    "POWER_N": ("data", "n_rows"),
    "NEGATIVE_CONTROL_STAGES": ("data", "n_rows"),
    "POWER_DRAWS": ("facter", "draws"),
    "POWER_TEMPERATURES": ("sim", "temperature"),
    # a served model's settings (docs/SCALING.md), for a notebook that declares them
    "TEMPERATURE": ("model", "temperature"),
    "REPETITION_PENALTY": ("model", "repetition_penalty"),
    "TIMEOUT": ("model", "timeout"),
    "MAX_RETRIES": ("model", "max_retries"),
    "CONCURRENCY": ("model", "concurrency"),
}
_USERS = Bound(1, 10_000_000, integer=True, why="ten million simulated users take hours")
_REPEATS = Bound(1, 1000, integer=True)
_POINTS = Bound(2, 1000, integer=True)
#: Bounds of the numeric notebook parameters that set no config field (the Simpson studies' sizes).
PARAMETER_BOUNDS: dict = {
    "N_USERS": _USERS,
    "N_READING_USERS": _USERS,
    "STUDY_USERS": _USERS,
    "HELD_USERS": _USERS,
    "N_SEEDS": _REPEATS,
    "POWER_SEEDS": _REPEATS,
    "STUDY_SEEDS": _REPEATS,
    "HELD_SEEDS": _REPEATS,
    "N_POINTS": _POINTS,
    "STUDY_POINTS": _POINTS,
    "HELD_POINTS": _POINTS,
    "N_SIGMA1": _POINTS,
    "N_D1": _POINTS,
    "BIAS": Bound(-10, 10, why="a score shift in noise standard deviations"),
    "HEAD_SHARE": Bound(0, 1, lo_open=True, hi_open=True),
    "N_JOBS": THREADS,
}


def parameter_bound(name: str) -> Bound | None:
    """The bound of notebook parameter ``name`` (of each element, for a list), or None when it has none.

    >>> parameter_bound("PASSES").span()
    '1..100'
    """
    if name in PARAMETER_FIELDS:
        section, fld = PARAMETER_FIELDS[name]
        return BOUNDS[section][fld]
    return PARAMETER_BOUNDS.get(name)


def bound_problem(name: str, value: Any) -> str | None:
    """Why ``value`` (already coerced) is outside the bound of parameter ``name``, or None.

    >>> bound_problem("PASSES", 10**20)
    'parameter PASSES: 100000000000000000000 is outside its bound: must be an integer in [1, 100] (the paper uses 3; each pass re-asks every test row)'
    >>> bound_problem("SEEDS", [0, 1]) is None
    True
    """
    b = parameter_bound(name)
    if b is None or value is None:
        return None
    values = list(value) if isinstance(value, (list, tuple)) else [value]
    for v in values:
        if v is not None and not b.contains(v):
            why = f" ({b.why})" if b.why else ""
            return f"parameter {name}: {short_repr(v)} is outside its bound: must be {b.describe()}{why}"
    return None


def parse_set_items(items: Iterable[str] | None, flag: str = "--set") -> dict:
    """``["KEY=VALUE", ...]`` -> ``{KEY: "VALUE"}``; a KEY given twice is an error (the second value would
    otherwise win silently).

    >>> parse_set_items(["PASSES=3", "SEEDS=[0, 1]"])
    {'PASSES': '3', 'SEEDS': '[0, 1]'}
    >>> parse_set_items(["PASSES=3", "PASSES=4"])
    Traceback (most recent call last):
    ...
    facterlab.params.ParameterError: --set PASSES is given twice ('3' and '4'); give each parameter once
    """
    out: dict = {}
    for item in items or []:
        if "=" not in item or not item.split("=", 1)[0].strip():
            raise ParameterError(f"{flag} expects KEY=VALUE, got {item!r}")
        key, raw = (x.strip() for x in item.split("=", 1))
        if key in out:
            raise ParameterError(f"{flag} {key} is given twice ({out[key]!r} and {raw!r}); give each parameter once")
        out[key] = raw
    return out


@dataclass(frozen=True)
class Declared:
    """A parameter of a notebook's parameters cell: its default and its comment."""

    name: str
    default: Any
    help: str = ""

    @property
    def nullable(self) -> bool:
        """None is allowed: the default is None or the comment mentions None."""
        return self.default is None or bool(re.search(r"\bNone\b", self.help))


# ---------------------------------------------------------------------------------------------
# Reading the parameters cell


def parse_parameters_cell(source: str) -> dict:
    """``{name: Declared}`` for every ``NAME = literal  # comment`` line of a parameters cell.

    >>> d = parse_parameters_cell('PROFILE = "default"  # default | smoke\\nN_USERS = 10_000')
    >>> d["N_USERS"].default, d["PROFILE"].help
    (10000, 'default | smoke')
    """
    try:
        tree = ast.parse(source)
    except SyntaxError as exc:
        raise ParameterError(f"the parameters cell is not valid Python (line {exc.lineno}: {exc.msg})") from exc
    comments: dict = {}
    try:
        for tok in tokenize.generate_tokens(io.StringIO(source).readline):
            if tok.type == tokenize.COMMENT:
                comments[tok.start[0]] = tok.string.lstrip("#").strip()
    except (tokenize.TokenError, IndentationError):  # pragma: no cover - ast.parse succeeded
        pass
    out: dict = {}
    for node in tree.body:
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            target, value = node.targets[0].id, node.value
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name) and node.value is not None:
            target, value = node.target.id, node.value
        else:
            continue
        try:
            default = ast.literal_eval(value)
        except ValueError:
            default = None  # not a literal: anything sensible is accepted
        out[target] = Declared(target, default, comments.get(node.end_lineno or node.lineno, ""))
    return out


def parameters_cell_of(path: Path | str) -> str:
    """The source of the ``parameters``-tagged cell of a notebook (``.ipynb``) or of its py:percent
    text source (``.py``); ParameterError when there is none."""
    path = Path(path)
    if path.suffix == ".ipynb":
        for cell in read_json(path, what="notebook").get("cells", []):
            if cell.get("cell_type") == "code" and "parameters" in cell.get("metadata", {}).get("tags", []):
                src = cell.get("source", "")
                return "".join(src) if isinstance(src, list) else src
    else:
        lines, inside = [], False
        for line in path.read_text(encoding="utf-8").splitlines():
            if line.startswith("# %%"):
                if inside:
                    break
                inside = "parameters" in line and "tags" in line
                continue
            if inside:
                lines.append(line)
        if inside or lines:
            return "\n".join(lines)
    raise ParameterError(f"{path}: no cell tagged 'parameters'")


def declared_in_notebook(path: Path | str, missing_ok: bool = False) -> dict:
    """``{name: Declared}`` of a notebook file's parameters cell; with ``missing_ok``, ``{}`` for a
    notebook without one (it takes no parameters), else :class:`ParameterError`."""
    try:
        source = parameters_cell_of(path)
    except ParameterError:
        if missing_ok:
            return {}
        raise
    try:
        return parse_parameters_cell(source)
    except ParameterError as exc:
        raise ParameterError(f"{path}: {exc}") from exc


# ---------------------------------------------------------------------------------------------
# Strict coercion


def type_name(example: Any) -> str:
    """Human name of the type of ``example``: ``bool``, ``int``, ``list of int``, ...

    >>> type_name([0]), type_name(2.0), type_name(None)
    ('list of int', 'float', 'any value')
    """
    if example is None:
        return "any value"
    if isinstance(example, (list, tuple)):
        elem = _element_example(example)
        return "list" + (f" of {type(elem).__name__}" if elem is not None else "")
    return type(example).__name__


def _element_example(seq: Iterable) -> Any:
    items = list(seq)
    if items and len({type(x) for x in items}) == 1 and isinstance(items[0], (bool, int, float, str)):
        return items[0]
    if items and all(isinstance(x, (int, float)) and not isinstance(x, bool) for x in items):
        return 0.0
    return None


def _fail(name: str, expected: str, value: Any, hint: str = "") -> ParameterError:
    return ParameterError(f"parameter {name}: expected {expected}, got {value!r}" + (f" ({hint})" if hint else ""))


_NULL_TEXT = ("None", "none", "null")
_TRUE = ("true", "1", "yes")
_FALSE = ("false", "0", "no")


def coerce(name: str, value: Any, default: Any, nullable: bool = False) -> Any:
    """``value`` as the type of ``default`` (strict); ParameterError naming ``name`` otherwise.

    >>> coerce("SMOKE", "false", False), coerce("N", "10_000", 1), coerce("B", 2, 1.0)
    (False, 10000, 2.0)
    >>> coerce("N", "2.5", 1)
    Traceback (most recent call last):
    ...
    facterlab.params.ParameterError: parameter N: expected int, got '2.5'
    """
    if value is None or (isinstance(value, str) and value.strip() in _NULL_TEXT and (nullable or default is None)):
        if nullable or default is None:
            return None
        raise _fail(name, f"{type_name(default)} (None is not allowed here)", value)
    if default is None:
        example = NONE_DEFAULT_TYPES.get(name)
        if example is not None:
            return coerce(name, value, example)
        if isinstance(value, str):  # anything sensible: a Python literal, else the text itself
            try:
                parsed = ast.literal_eval(value.strip())
            except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
                return value
            return parsed if isinstance(parsed, (bool, int, float, list, tuple)) else value
        return value
    if isinstance(default, bool):
        if isinstance(value, bool):
            return value
        if isinstance(value, int) and value in (0, 1):
            return bool(value)
        if isinstance(value, str) and value.strip().lower() in _TRUE + _FALSE:
            return value.strip().lower() in _TRUE
        raise _fail(name, "bool (true/false, 1/0, yes/no)", value)
    if isinstance(default, int):
        if isinstance(value, bool):
            raise _fail(name, "int", value)
        if isinstance(value, int):
            return value
        if isinstance(value, float) and math.isfinite(value) and value.is_integer():
            return int(value)
        if isinstance(value, str):
            text = value.strip()
            try:
                return int(text)
            except ValueError:
                try:
                    f = float(text)
                except ValueError:
                    f = math.nan
                if math.isfinite(f) and f.is_integer():
                    return int(f)
        raise _fail(name, "int", value)
    if isinstance(default, float):
        if isinstance(value, bool):
            raise _fail(name, "float", value)
        f = value
        if isinstance(value, str):
            try:
                f = float(value.strip())
            except ValueError:
                raise _fail(name, "float", value) from None
        if isinstance(f, (int, float)) and math.isfinite(f):
            return float(f)
        raise _fail(name, "a finite float", value)
    if isinstance(default, str):
        if isinstance(value, str):
            return value
        raise _fail(name, "str", value)
    if isinstance(default, (list, tuple)):
        want = type_name(default)
        seq = value
        if isinstance(value, str):
            try:
                seq = ast.literal_eval(value.strip())
            except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
                raise _fail(
                    name,
                    want,
                    value,
                    f"pass a list: -p {name} '{list(default)!r}' or -y '{name}: {json.dumps(list(default))}'",
                ) from None
        if not isinstance(seq, (list, tuple)):
            raise _fail(name, want, value, f"pass a list, e.g. {list(default)!r}")
        elem = _element_example(default)
        items = [coerce(f"{name}[{i}]", x, elem) if elem is not None else x for i, x in enumerate(seq)]
        return type(default)(items)
    if isinstance(value, type(default)):
        return value
    raise _fail(name, type_name(default), value)


def _as_declared(declared: Mapping) -> dict:
    return {k: (v if isinstance(v, Declared) else Declared(k, v)) for k, v in declared.items()}


def close_matches(name: str, names: Iterable[str]) -> list:
    """Declared names close to ``name`` (case-insensitive), best first."""
    names = list(names)
    upper = {n.upper(): n for n in names}
    return [upper[m] for m in difflib.get_close_matches(name.upper(), list(upper), n=3, cutoff=0.7)]


def unknown_message(unknown: Iterable[str], names: Iterable[str], where: str = "") -> str:
    """One line naming the ``unknown`` parameters, the close matches among ``names`` and every declared name."""
    names = sorted(names)
    parts = []
    for u in unknown:
        near = close_matches(u, names)
        parts.append(f"{u} (did you mean {' or '.join(near)}?)" if near else f"{u} (no close match)")
    label = "unknown parameter" + ("s" if len(parts) > 1 else "")
    return f"{label} {', '.join(parts)}" + (f" for {where}" if where else "") + f"; declared: {', '.join(names)}"


def validate(values: Mapping, declared: Mapping, where: str = "") -> dict:
    """``values`` checked against ``declared`` (name -> default value, or name -> :class:`Declared`):
    unknown names are an error naming the close matches; values are coerced by :func:`coerce`.
    All problems are reported together in one :class:`ParameterError`."""
    decl = _as_declared(declared)
    unknown = [k for k in values if k not in decl]
    problems = [unknown_message(unknown, decl, where)] if unknown else []
    out = {}
    for k, v in values.items():
        if k in decl:
            try:
                out[k] = coerce(k, v, decl[k].default, decl[k].nullable)
            except ParameterError as exc:
                problems.append(str(exc))
                continue
            bad = bound_problem(k, out[k])
            if bad:
                problems.append(bad)
    if problems:
        raise ParameterError("; ".join(problems))
    return out


# ---------------------------------------------------------------------------------------------
# PROFILE and SMOKE sizes


def smoke_size(spec: Any, current: Any) -> Any:
    """A smoke size: ``spec(current)`` for a callable; for a number, at most ``spec`` (``spec`` when
    the current value is None); else ``spec`` itself.

    >>> smoke_size(24, 40), smoke_size(24, 14), smoke_size(24, None), smoke_size(lambda s: s[:1], [0, 1])
    (24, 14, 24, [0])
    """
    if callable(spec):
        return spec(current)
    if isinstance(spec, (int, float)) and not isinstance(spec, bool):
        if current is None:
            return spec
        if isinstance(current, (int, float)) and not isinstance(current, bool):
            return min(current, spec)
    return spec


@dataclass
class Resolved:
    """The parameter values of one run and where each came from."""

    values: dict
    explicit: dict = field(default_factory=dict)  # passed (papermill, --set, an edited parameters cell)
    from_profile: dict = field(default_factory=dict)  # set by PROFILE (not passed)
    smoke_sizes: dict = field(default_factory=dict)  # shrunk by SMOKE (not passed)

    @property
    def profile(self) -> str:
        """The profile of the run (``PROFILE``, default ``"default"``)."""
        return str(self.values.get("PROFILE", "default"))

    @property
    def smoke(self) -> bool:
        """Whether ``SMOKE`` shrinks the sizes (default False)."""
        return bool(self.values.get("SMOKE", False))

    def describe(self) -> str:
        """One line: the profile, SMOKE, and which values were passed, set by the profile and shrunk by SMOKE."""

        def fmt(d: dict) -> str:
            return ", ".join(f"{k}={v!r}" for k, v in d.items()) or "none"

        return (
            f"profile {self.profile}, SMOKE {self.smoke}; passed: {fmt(self.explicit)}; "
            f"from the profile: {fmt(self.from_profile)}; smoke sizes: {fmt(self.smoke_sizes)}"
        )


def resolve(
    declared: Mapping, passed: Mapping, smoke: Mapping[str, Any | Callable] | None = None, where: str = ""
) -> Resolved:
    """The values of a run: the declared defaults, then PROFILE's values (:data:`PROFILES`), then the
    ``passed`` values (validated), then, when SMOKE is true, the ``smoke`` sizes (:func:`smoke_size`)
    of every declared name that was not passed.

    >>> d = {"PROFILE": "default", "SMOKE": False, "DATASET": "auto", "N": 40}
    >>> r = resolve(d, {"PROFILE": "smoke"}, smoke={"N": 24})
    >>> r.values["SMOKE"], r.values["DATASET"], r.values["N"]
    (True, 'synthetic', 24)
    >>> resolve(d, {"PROFILE": "smoke", "N": "30"}, smoke={"N": 24}).values["N"]
    30
    """
    decl = _as_declared(declared)
    explicit = validate(passed, decl, where)
    values = {k: d.default for k, d in decl.items()}
    profile = explicit.get("PROFILE", values.get("PROFILE", "default"))
    if profile not in PROFILES:
        raise ParameterError(f"parameter PROFILE: expected one of {', '.join(PROFILES)}, got {profile!r}")
    spec = PROFILES[profile]
    from_profile = {}
    for k, v in {"SMOKE": spec["smoke"], **spec["overrides"]}.items():
        if k in decl and k not in explicit:
            value = coerce(k, v, decl[k].default, decl[k].nullable)
            if value != decl[k].default:
                from_profile[k] = value
    values.update(from_profile)
    values.update(explicit)
    sizes = {}
    if values.get("SMOKE"):
        for k, s in (smoke or {}).items():
            if k in decl and k not in explicit:
                new = coerce(k, smoke_size(s, values[k]), decl[k].default, decl[k].nullable)
                if new != values[k]:
                    sizes[k] = new
    values.update(sizes)
    return Resolved(values, explicit, from_profile, sizes)
