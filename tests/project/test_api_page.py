"""The curated API page (docs/api.rst, issue 42): public names only, each one that imports and has an anchor,
and no module page in the sidebar.

- Every name in an ``autosummary`` table of docs/api.rst imports, and is documented where the page links it:
  a package's or module's ``__all__``, a name the module itself defines, or a name that a package without
  ``__all__`` re-exports (``facterlab.preset``: docs/conf.py ``_reexports``, documented on the package's page).
- Every name has a docstring whose first line describes it (not a pointer such as "(module docstring)").
- No name comes from an internal module (:data:`INTERNAL`), and a package's re-exported name is listed under
  the package, not under the module that defines it.
- The sidebar: the toctrees reachable from docs/index.md name no ``api/`` page, docs/api.rst holds no toctree,
  and the module pages are generated from docs/api-modules.rst, an orphan page.

The built site's links (every row of the page links to an anchor that exists) are checked by
tests/project/test_docs_site.py.
"""

from __future__ import annotations

import functools
import importlib
import importlib.util
import inspect
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"
API = DOCS / "api.rst"

#: modules whose names stay off the curated page (thread and BLAS limits, safe file reading, file hashes, the
#: test server, the served backend's hints; the notebooks' table and figure helpers are simply not listed)
INTERNAL = (
    "facterlab.blas",
    "facterlab.safeio",
    "facterlab.filehash",
    "facterlab.threads",
    "facterlab.corrupt",
    "facterlab.testing",
    "facterlab.models.served_hints",
    "facterlab.models.served_http",
    "facterlab.models.shards",
    "facterlab.models.gguf_cache",
    "facterlab.facter.codec",
    "facterlab.reporting.papermill_engine",
    "facterlab.reporting.jupyter_status",
)

GROUPS = (
    "Configure a run",
    "Run an audit",
    "Read a run",
    "FACTER, step by step",
    "The twin monitor",
    "Metrics",
    "Simpson's paradox",
    "Models",
    "Served models and sweeps",
    "Data: built-in and your own",
)


def page_names(text: str | None = None) -> list:
    """The dotted names of the autosummary tables of docs/api.rst, in page order."""
    text = API.read_text(encoding="utf-8") if text is None else text
    names: list = []
    for block in re.split(r"^\.\. ", text, flags=re.M)[1:]:
        if not block.startswith("autosummary::"):
            continue
        for line in block.splitlines()[1:]:
            entry = line.strip()
            if entry and not entry.startswith(":") and line.startswith("   "):
                names.append(entry)
    return names


def resolve(dotted: str) -> tuple:
    """``(module, name, object)`` of a dotted name: the longest importable module prefix, then attributes."""
    parts = dotted.split(".")
    for i in range(len(parts) - 1, 0, -1):
        try:
            mod = importlib.import_module(".".join(parts[:i]))
        except ImportError:
            continue
        obj = mod
        for p in parts[i:]:
            obj = getattr(obj, p)
        return mod, ".".join(parts[i:]), obj
    raise ImportError(dotted)


@functools.cache
def docs_conf():
    """docs/conf.py as a module (it imports nothing but the standard library)."""
    spec = importlib.util.spec_from_file_location("facterlab_docs_conf", DOCS / "conf.py")
    conf = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(conf)
    return conf


def conf_reexports() -> dict:
    return docs_conf()._reexports()


def test_a_module_named_like_its_function_has_a_page_of_its_own():
    # facterlab.simpson.simulate is the function (the package's re-export) and the module: the module's page
    # is docs/modules/<module>.rst, since autosummary takes the name for the function
    clashes = docs_conf()._clashes()
    assert clashes.get("facterlab.simpson") == ["simulate"], clashes
    for pkg, names in clashes.items():
        for name in names:
            page = DOCS / "modules" / f"{pkg}.{name}.rst"
            assert page.is_file(), f"no page for the module {pkg}.{name}: write {page.relative_to(ROOT)}"
            text = page.read_text(encoding="utf-8")
            assert text.startswith(":orphan:") and f".. automodule:: {pkg}.{name}\n" in text
    assert sorted(p.stem for p in (DOCS / "modules").glob("*.rst")) == sorted(
        f"{pkg}.{n}" for pkg, names in clashes.items() for n in names
    ), "docs/modules/ holds only the pages of modules named like a re-exported function"


def test_page_groups_and_names():
    text = API.read_text(encoding="utf-8")
    headings = re.findall(r"^(.+)\n-{3,}$", text, flags=re.M)
    assert list(headings) == list(GROUPS), headings
    names = page_names(text)
    assert len(names) > 100, len(names)
    dupes = sorted({n for n in names if names.count(n) > 1})
    assert not dupes, f"listed twice on docs/api.rst: {dupes}"


@pytest.mark.parametrize("dotted", page_names())
def test_every_name_imports_and_has_an_anchor(dotted):
    mod, name, obj = resolve(dotted)
    assert "." not in name or inspect.isclass(resolve(dotted.rsplit(".", 1)[0])[2]), dotted
    modname = mod.__name__
    assert not any(modname == m or modname.startswith(m + ".") for m in INTERNAL), f"{dotted}: an internal module"
    exported = list(getattr(mod, "__all__", None) or [])
    reexported = [n for _, n in conf_reexports().get(modname, [])]
    own = getattr(obj, "__module__", None) == modname
    assert name in exported or name in reexported or (own and "__all__" not in vars(mod)), (
        f"{dotted}: not a public name of {modname} (its __all__, its own definitions, or a package's re-exports): "
        "the page's link would have no anchor"
    )
    defined_in = getattr(obj, "__module__", None)
    if inspect.isfunction(obj) or inspect.isclass(obj):
        parent = defined_in.rsplit(".", 1)[0] if defined_in and "." in defined_in else None
        clash = importlib.util.find_spec(f"{parent}.{name}") is not None if parent else False  # a module's name too
        if (
            modname == defined_in
            and parent
            and not clash
            and name in (getattr(importlib.import_module(parent), "__all__", None) or [])
        ):
            pytest.fail(f"{dotted}: {parent} re-exports it; list it as {parent}.{name}")


#: first lines that still end in a bare pointer, in files other work is changing (may only shrink)
POINTER_SUMMARIES = {"facterlab.models.simulated.SimulatedRecommender"}


def summary(doc: str) -> str:
    """The first sentence of a docstring, as the page's table shows it (autosummary's cut, roughly)."""
    para = " ".join(doc.strip().split("\n\n")[0].split())
    m = re.match(r"(.+?\.)(\s+[A-Z`(:]|$)", para)
    return m.group(1) if m else para


@pytest.mark.parametrize("dotted", page_names())
def test_every_name_has_a_summary_line(dotted):
    _, _, obj = resolve(dotted)
    if not (inspect.isfunction(obj) or inspect.isclass(obj)):
        return  # a constant: its summary is the ``#:`` comment autodoc reads, or its value
    first = summary(inspect.getdoc(obj) or "")
    assert first, f"{dotted}: no docstring"
    if dotted in POINTER_SUMMARIES:
        assert first.endswith("(module docstring)."), f"{dotted} has a summary now: remove it from POINTER_SUMMARIES"
        return
    bare = re.sub(r"\([^()]*\)", "", first)
    assert "(module docstring)" not in first and len(bare.split()) >= 3, (
        f"{dotted}: the summary points elsewhere: {first}"
    )


#: the names issue 42 asks Examples (run as doctests) and See Also sections of
WITH_EXAMPLES = (
    "facterlab.facter.run_experiment",
    "facterlab.preset",
    "facterlab.reporting.batch.run_many",
    "facterlab.simpson.gaps_from_table",
    "facterlab.simpson.ips_estimate",
    "facterlab.facter.RunResult",
)


def test_run_experiment_describes_itself():
    from facterlab.facter import run_experiment

    first = inspect.getdoc(run_experiment).split("\n\n")[0]
    assert "module docstring" not in first and "Neutral, Fair and FACTER" in first, first


@pytest.mark.parametrize("dotted", WITH_EXAMPLES)
def test_examples_and_see_also(dotted):
    doc = inspect.getdoc(resolve(dotted)[2])
    assert "Examples\n--------" in doc and "\n>>> " in doc, f"{dotted}: no Examples section that runs as a doctest"
    assert "See Also\n--------" in doc, f"{dotted}: no See Also section"
    assert dotted in page_names(), f"{dotted} is not on docs/api.rst"


def toctree_entries(path: Path) -> list:
    """The entries of the toctrees of a page (MyST ``{toctree}`` fences and rST directives)."""
    text = path.read_text(encoding="utf-8")
    out: list = []
    for body in re.findall(r"```\{toctree\}\n(.*?)```", text, flags=re.S):
        out += [ln.strip() for ln in body.splitlines() if ln.strip() and not ln.strip().startswith(":")]
    for body in re.findall(r"^\.\. toctree::\n((?:[ \t]+.*\n|\n)*)", text, flags=re.M):
        out += [ln.strip() for ln in body.splitlines() if ln.strip() and not ln.strip().startswith(":")]
    return out


def test_no_module_page_in_the_sidebar():
    # the sidebar is the toctree tree from docs/index.md: its pages, and theirs
    seen: set = set()
    todo = ["index"]
    while todo:
        doc = todo.pop()
        if doc in seen:
            continue
        seen.add(doc)
        path = next((DOCS / f"{doc}{s}" for s in (".md", ".rst") if (DOCS / f"{doc}{s}").is_file()), None)
        if path is None:
            continue  # a notebook page or a generated one
        text = path.read_text(encoding="utf-8")
        assert not re.search(r"^\s+:toctree:", text, flags=re.M), (
            f"docs/{path.name}: an autosummary toctree in the sidebar"
        )
        todo += toctree_entries(path)
    in_sidebar = sorted(d for d in seen if d.startswith("api/") or d == "api-modules")
    assert not in_sidebar, f"module pages in the sidebar: {in_sidebar}"
    assert "api" in seen, "docs/api.rst (the curated API page) is not in the sidebar"
    modules_page = (DOCS / "api-modules.rst").read_text(encoding="utf-8")
    assert modules_page.startswith(":orphan:"), "docs/api-modules.rst must be an orphan page (not in the sidebar)"
    assert re.search(r":toctree: api\n\s+:recursive:\n\n\s+facterlab\n", modules_page), (
        "the module pages are generated there"
    )
