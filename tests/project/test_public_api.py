"""The public API has a clear line (issue 32).

- A module's public names are its ``__all__`` where it has one, else the functions and classes it defines
  whose names have no leading underscore: exactly what the module pages (docs/api-modules.rst, autodoc) list.
- Every public function and class has a docstring (this test fails on one without).
- The names the notebooks import from facterlab are public, and those that notebooks call carry numpydoc
  ``Parameters`` (when they take any) and ``Returns`` sections (functions); the names that do not yet are
  listed in :data:`WITHOUT_SECTIONS`, which may only shrink: a new name without sections fails, and so does
  a listed name that has gained them (remove it from the list).
- Examples in docstrings run as doctests (``--doctest-modules`` over ``src/facterlab`` in pyproject.toml).
"""

from __future__ import annotations

import ast
import importlib
import inspect
import pkgutil
import re
from pathlib import Path

import pytest

import facterlab

ROOT = Path(__file__).resolve().parents[2]
NOTEBOOKS = ROOT / "notebooks"

#: notebook-called names without numpydoc sections yet (module, name): may only shrink
WITHOUT_SECTIONS = {
    ("facterlab.config", "DataConfig"),
    ("facterlab.data", "load_dataset"),
    ("facterlab.data", "resolve_dataset"),
    ("facterlab.data.protocol", "default_n_rows"),
    ("facterlab.data.protocol", "group_sizes"),
    ("facterlab.data.protocol", "load_or_build_interactions"),
    ("facterlab.data.protocol", "summarize"),
    ("facterlab.datatypes", "Rule"),
    ("facterlab.reporting.figures", "apply_style"),
    ("facterlab.reporting.figures", "save_figure"),
    ("facterlab.reporting.figures", "title_with_provenance"),
    ("facterlab.reporting.published", "published_value"),
    ("facterlab.reporting.results", "write_metrics"),
    ("facterlab.simpson", "SimpsonConfig"),
    ("facterlab.simpson", "summarise"),
    ("facterlab.simpson", "sweep"),
    ("facterlab.simpson.explorer", "build_explorer"),
    ("facterlab.simpson.explorer", "numbers_html"),
    ("facterlab.simpson.explorer", "static_figure"),
}


def modules() -> list:
    """Every module of the package, imported (cheap: torch loads only inside model-building functions)."""
    names = ["facterlab"] + [m.name for m in pkgutil.walk_packages(facterlab.__path__, "facterlab.")]
    return [importlib.import_module(n) for n in names]


def public_names(mod) -> list:
    """The public names of a module: ``__all__``, else its own functions and classes without a leading ``_``.

    >>> import facterlab.facter.conformal as m
    >>> "ConformalThreshold" in public_names(m) and not any(n.startswith("_") for n in public_names(m))
    True
    """
    if hasattr(mod, "__all__"):
        return list(mod.__all__)
    return [
        n
        for n, o in vars(mod).items()
        if not n.startswith("_")
        and (inspect.isfunction(o) or inspect.isclass(o))
        and getattr(o, "__module__", None) == mod.__name__
    ]


MODULES = modules()


def test_all_lists_only_defined_public_names():
    bad = []
    for mod in MODULES:
        for n in getattr(mod, "__all__", []):
            if n.startswith("_"):
                bad.append(f"{mod.__name__}.__all__ lists the private name {n}")
            elif not hasattr(mod, n):
                bad.append(f"{mod.__name__}.__all__ lists {n}, which the module does not define")
    assert not bad, "\n".join(bad)


def undocumented(mods) -> list:
    out = []
    for mod in mods:
        for n in public_names(mod):
            o = getattr(mod, n, None)
            if (inspect.isfunction(o) or inspect.isclass(o)) and not (inspect.getdoc(o) or "").strip():
                out.append(f"{mod.__name__}.{n}")
    return out


def test_public_names_have_docstrings():
    missing = undocumented(MODULES)
    assert not missing, "public functions and classes without a docstring (document them, or make them private):\n" + (
        "\n".join(missing)
    )


def test_the_docstring_check_can_fail(tmp_path, monkeypatch):
    """A module with an undocumented public function is caught; a private one is not a public name."""
    (tmp_path / "fl_probe_mod.py").write_text(
        'def shown():\n    pass\n\n\ndef _hidden():\n    pass\n\n\ndef ok():\n    """Yes."""\n'
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    probe = importlib.import_module("fl_probe_mod")
    assert public_names(probe) == ["shown", "ok"]
    assert undocumented([probe]) == ["fl_probe_mod.shown"]


def notebook_imports() -> dict:
    """``{(module, name): {notebook, ...}}`` for every ``from facterlab... import name`` in notebooks/*.py."""
    out: dict = {}
    for nb in sorted(NOTEBOOKS.glob("*.py")):
        for node in ast.walk(ast.parse(nb.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("facterlab"):
                for alias in node.names:
                    out.setdefault((node.module, alias.name), set()).add(nb.name)
    return out


IMPORTS = notebook_imports()


def test_notebooks_import_only_public_names():
    assert len(IMPORTS) > 20, "the notebooks' imports were not found"
    private = [f"{m}.{n} ({', '.join(sorted(nbs))})" for (m, n), nbs in IMPORTS.items() if n.startswith("_")]
    assert not private, "notebooks import private names:\n" + "\n".join(private)


def missing_sections(obj) -> list:
    """The numpydoc sections a notebook-called function or class lacks."""
    doc = inspect.getdoc(obj) or ""
    try:
        params = [p for p in inspect.signature(obj).parameters if p != "self"]
    except (TypeError, ValueError):
        params = []
    miss = []
    if params and not re.search(r"^Parameters\n-{3,}$", doc, re.M):
        miss.append("Parameters")
    if inspect.isfunction(obj) and not re.search(r"^(Returns|Yields)\n-{3,}$", doc, re.M):
        miss.append("Returns")
    return miss


def test_names_notebooks_call_have_numpydoc_sections():
    new, fixed = [], []
    for (m, n), nbs in sorted(IMPORTS.items()):
        obj = getattr(importlib.import_module(m), n)
        if inspect.ismodule(obj) or not callable(obj):
            continue
        miss = missing_sections(obj)
        if miss and (m, n) not in WITHOUT_SECTIONS:
            new.append(f"{m}.{n} ({', '.join(sorted(nbs))}): no {' / '.join(miss)} section")
        if not miss and (m, n) in WITHOUT_SECTIONS:
            fixed.append(f"{m}.{n}")
    assert not new, "names the notebooks call without numpydoc sections:\n" + "\n".join(new)
    assert not fixed, "documented now: remove from WITHOUT_SECTIONS:\n" + "\n".join(fixed)


@pytest.mark.parametrize("name", ["run_experiment", "preset"])
def test_the_readme_api_is_documented_with_sections(name):
    """The two calls of the README's Python example carry their numpydoc sections."""
    from facterlab import preset
    from facterlab.facter import run_experiment

    obj = {"run_experiment": run_experiment, "preset": preset}[name]
    assert missing_sections(obj) == [], f"{name}: {missing_sections(obj)}"
