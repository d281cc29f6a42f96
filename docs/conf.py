"""Sphinx configuration of facterlab's documentation site (``make docs``; docs/index.md says what it holds).

Built with Sphinx + MyST-NB (Markdown pages and notebooks as pages), autodoc + autosummary (the API
reference: importing facterlab is cheap, torch loads only inside model-building functions), napoleon
(numpydoc sections),
sphinxcontrib-bibtex (docs/references.bib) and MathJax 3 served from the site itself
(sphinx-mathjax-offline), so that the build and the site work offline.

Notebook pages are never executed here (``nb_execution_mode = "off"``). For each stored notebook
``notebooks/NN_name.ipynb`` the site takes, in this order:

1. ``$FACTERLAB_DOCS_NOTEBOOKS/*.ipynb`` when that variable names a folder (then only those notebooks:
   tests/project/test_docs_site.py builds a site from a small notebook it executes);
2. the report run's executed copy ``build/notebooks/NN_name.ipynb`` (written by ``make reproduce``);
3. else the stored source without outputs, with a note at the top saying so.

The chosen copies are staged under ``<source dir>/_notebooks/`` when the build starts (ignored by git).
"""

from __future__ import annotations

import ast
import json
import os
import re
import shutil
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

project = "facterlab"
author = "facterlab contributors"
copyright = "facterlab contributors (MIT licence)"
release = "0.1.0"

extensions = [
    "myst_nb",  # MyST Markdown + notebooks (brings myst_parser)
    "sphinx.ext.autodoc",
    "sphinx.ext.autosummary",
    "sphinx.ext.napoleon",
    "sphinx.ext.mathjax",
    "sphinxcontrib.bibtex",
    "sphinx-mathjax-offline",  # MathJax 3.2 copied into _static/mathjax: no CDN
]

exclude_patterns = ["_build", "_templates", ".ipynb_checkpoints", "**/.ipynb_checkpoints"]
source_suffix = {
    ".rst": "restructuredtext",
    ".md": "myst-nb",
    ".ipynb": "myst-nb",
}  # .rst first: autosummary writes its pages in it
root_doc = "index"

# --- MyST: formulas as $...$ / $$...$$ (GitHub renders the same syntax), heading anchors for #links
myst_enable_extensions = ["dollarmath", "amsmath", "colon_fence", "deflist"]
myst_dmath_double_inline = True
myst_heading_anchors = 4

# --- notebooks: shown with the outputs they were saved with, never run while the site builds
nb_execution_mode = "off"
nb_merge_streams = True
# Widget state is not loaded from a CDN (the site works offline); notebook 15 prints a static figure too.
nb_ipywidgets_js: dict = {}
# Markdown that a notebook cell displays (the method tables) rendered with GitHub's flavour, which has tables;
# MyST-NB's default, commonmark, has none and gave one wrapped paragraph of pipes (issue 42)
nb_render_markdown_format = "gfm"
# A widget's view needs a kernel or saved widget state and a CDN, neither of which a static site has: the
# widget output falls back to the next format of its bundle, the text form the explorer writes (issue 42)
nb_mime_priority_overrides = [("html", "application/vnd.jupyter.widget-view+json", None)]

# --- API reference from the docstrings: one page per module (docs/_templates/autosummary/module.rst),
# public names only: a module's __all__ where it has one, else its own names without a leading underscore
autosummary_generate = True
autosummary_ignore_module_all = False
autosummary_imported_members = False
autodoc_default_options = {"members": True, "show-inheritance": True}
autodoc_member_order = "bysource"
autodoc_typehints = "description"
autodoc_class_signature = "separated"
templates_path = ["_templates"]


def _submodules(src: Path = ROOT / "src") -> dict:
    """``{package: [its public modules and subpackages]}`` from the source tree (no import)."""
    out = {}
    for init in sorted((src / "facterlab").rglob("__init__.py")):
        pkg = ".".join(init.parent.relative_to(src).parts)
        kids = [p for p in init.parent.iterdir() if not p.name.startswith("_")]
        out[pkg] = sorted(
            f"{pkg}.{p.stem}" for p in kids if (p.suffix == ".py") or (p.is_dir() and (p / "__init__.py").is_file())
        )
    return out


def _reexports(src: Path = ROOT / "src") -> dict:
    """``{package: [(directive, name), ...]}``: the public names a package without ``__all__`` imports from
    its modules (``facterlab``: ``preset``, ``RunConfig``, ``enable_logging``), each with the autodoc directive
    of its kind (``autofunction``, ``autoclass``, else ``autodata``), read from the sources (no import).  A
    package with ``__all__`` needs no list: autodoc documents its ``__all__``."""

    def kind(module: str, name: str) -> str:
        path = src / Path(*module.split("."))
        path = path / "__init__.py" if path.is_dir() else path.with_suffix(".py")
        for n in ast.parse(path.read_text(encoding="utf-8")).body if path.is_file() else []:
            if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)) and n.name == name:
                return "autofunction"
            if isinstance(n, ast.ClassDef) and n.name == name:
                return "autoclass"
        return "autodata"

    out = {}
    for init in sorted((src / "facterlab").rglob("__init__.py")):
        tree = ast.parse(init.read_text(encoding="utf-8"))
        if any(
            isinstance(n, ast.Assign) and any(getattr(t, "id", "") == "__all__" for t in n.targets) for n in tree.body
        ):
            continue
        names = [
            (kind(n.module or "", a.name), a.asname or a.name)
            for n in tree.body
            if isinstance(n, ast.ImportFrom)
            for a in n.names
            if not (a.asname or a.name).startswith("_")
        ]
        if names:
            out[".".join(init.parent.relative_to(src).parts)] = names
    return out


def _clashes(src: Path = ROOT / "src") -> dict:
    """``{package: [names]}``: names of a package's ``__all__`` that are also the names of its modules
    (``facterlab.simpson.simulate``, the function and the module): left off the package's page and off its
    list of modules (autosummary would take the name for the function); such a module's page is written by
    hand, ``docs/modules/<module>.rst``, and documents the function (tests/project/test_api_page.py)."""
    out = {}
    for init in sorted((src / "facterlab").rglob("__init__.py")):
        tree = ast.parse(init.read_text(encoding="utf-8"))
        for n in tree.body:
            if isinstance(n, ast.Assign) and any(getattr(t, "id", "") == "__all__" for t in n.targets):
                names = [e.value for e in getattr(n.value, "elts", []) if isinstance(e, ast.Constant)]
                kids = {p.stem for p in init.parent.iterdir() if p.suffix == ".py" or (p / "__init__.py").is_file()}
                if clash := sorted(set(names) & kids):
                    out[".".join(init.parent.relative_to(src).parts)] = clash
    return out


# package pages: the package's public names in full, re-exported ones included (its __all__, else
# _reexports), each with its anchor (``facterlab.facter.run_experiment``), then its modules (module.rst
# template). The pages are generated from docs/api-modules.rst, an orphan page: no module is in the sidebar,
# whose API entry is the curated docs/api.rst (tests/project/test_api_page.py).
autosummary_context = {"submodules": _submodules(), "reexports": _reexports(), "clashes": _clashes()}
napoleon_numpy_docstring = True
napoleon_google_docstring = False
napoleon_use_rtype = False

# --- bibliography
bibtex_bibfiles = ["references.bib"]
bibtex_default_style = "plain"

# --- HTML
html_theme = "furo"
html_title = "facterlab"
html_static_path: list = []
html_favicon = "_static/favicon.svg"
html_show_sourcelink = False

# Warnings that are not faults of the pages (each one named, nothing broader):
suppress_warnings = [
    "myst.header",  # a notebook's first markdown cell may start below H1
    # "more than one target found" (the python domain's only warning without nitpicky): Sphinx turns every
    # word of a numpydoc type into a cross-reference, shape words too ("array, shape (n, dim)"), and `dim`
    # names two documented properties (ItemRepresenter.dim, SentenceEncoder.dim); a shape is no link
    "ref.python",
]

# ----------------------------------------------------------------------------------------------------

NOTE_EXECUTED = (
    "```{{note}}\nThis page is the notebook as executed by the report run "
    "(`build/notebooks/{name}`, written {when} UTC by `make reproduce`); the site shows its saved outputs "
    "and does not run it. Source: `notebooks/{name}`.\n```\n"
)
NOTE_SOURCE = (
    "```{{note}}\nNo executed copy of this notebook was found (`build/notebooks/{name}` is written by "
    "`make reproduce`), so this page shows the stored source **without outputs**. Run `make reproduce`, "
    "then `make docs`, to see its figures and tables here.\n```\n"
)
NOTE_GIVEN = "```{{note}}\nExecuted notebook taken from `$FACTERLAB_DOCS_NOTEBOOKS` (`{name}`).\n```\n"


def notebook_sources(root: Path = ROOT, given: str | None = None) -> list:
    """``[(path, note), ...]``: the notebook file each notebook page is made from, and the note it starts with.

    Parameters
    ----------
    root : Path
        The repository root (``notebooks/`` and ``build/notebooks/`` are under it).
    given : str, optional
        A folder of executed notebooks that replaces the others (``$FACTERLAB_DOCS_NOTEBOOKS``).

    Returns
    -------
    list of (Path, str)
        One entry per notebook page, in file-name order.
    """
    if given:
        folder = Path(given)
        if not folder.is_dir():
            raise SystemExit(f"docs: FACTERLAB_DOCS_NOTEBOOKS={given} is not a folder")
        found = sorted(folder.glob("*.ipynb"))
        if not found:
            raise SystemExit(f"docs: FACTERLAB_DOCS_NOTEBOOKS={given} holds no .ipynb file")
        return [(p, NOTE_GIVEN.format(name=p.name)) for p in found]
    out = []
    for src in sorted((root / "notebooks").glob("*.ipynb")):
        executed = root / "build" / "notebooks" / src.name
        if executed.is_file():
            when = time.strftime("%Y-%m-%d %H:%M", time.gmtime(executed.stat().st_mtime))
            out.append((executed, NOTE_EXECUTED.format(name=src.name, when=when)))
        else:
            out.append((src, NOTE_SOURCE.format(name=src.name)))
    return out


def stage_notebooks(app) -> None:
    """Copy the chosen notebooks into ``<srcdir>/_notebooks/``, each with its note as a first markdown cell."""
    dest = Path(app.srcdir) / "_notebooks"
    shutil.rmtree(dest, ignore_errors=True)
    dest.mkdir(parents=True)
    for path, note in notebook_sources(ROOT, os.environ.get("FACTERLAB_DOCS_NOTEBOOKS") or None):
        nb = json.loads(path.read_text(encoding="utf-8"))
        cells = nb.get("cells", [])
        # the note goes after the notebook's title cell, so that the page keeps its title
        at = 1 if cells and cells[0].get("cell_type") == "markdown" else 0
        cells.insert(at, {"cell_type": "markdown", "id": "facterlab-docs-note", "metadata": {}, "source": note})
        nb["cells"] = cells
        (dest / path.name).write_text(json.dumps(nb, indent=1), encoding="utf-8")


FIELD_SECTIONS = {"Parameters", "Other Parameters", "Attributes", "Keyword Arguments"}
NAME_ONLY = re.compile(r"^\*{0,2}[A-Za-z_][\w, *]*$")
NAME_DESC = re.compile(r"^(\*{0,2}[A-Za-z_][\w, *]*?) : (.*)$")


def _is_description(text: str) -> bool:
    """A sentence, not a type: it ends with a full stop or comma, or has more than five words."""
    return text.rstrip().endswith((".", ",")) or len(text.split()) > 5


def field_lists_as_numpydoc(lines: list) -> list:
    """Rewrite the ``name : description`` entries some docstrings use into numpydoc's ``name`` + indented
    description, and end a field section at a paragraph that is not an entry (a ``Notes`` heading), so that
    napoleon renders them as parameters instead of reading the description as a type.  The source is
    untouched; entries already in numpydoc form (``name : type``) pass through.

    >>> field_lists_as_numpydoc(["Parameters", "----------", "n : number of rows, at least 2.", "x : int", "",
    ...                          "More text."])
    ['Parameters', '----------', 'n', '    number of rows, at least 2.', 'x : int', '', 'Notes', '-----', 'More text.']
    """
    out: list = []
    in_fields = False
    for i, line in enumerate(lines):
        nxt = lines[i + 1] if i + 1 < len(lines) else ""
        if nxt.strip() and set(nxt.strip()) == {"-"} and line.strip():
            in_fields = line.strip() in FIELD_SECTIONS
            out.append(line)
            continue
        if in_fields and line and not line[0].isspace() and not set(line.strip()) <= {"-"}:
            m = NAME_DESC.match(line)
            if m and _is_description(m.group(2)):
                out += [m.group(1), "    " + m.group(2)]
                continue
            if not m and not NAME_ONLY.match(line.strip()):
                out += ["Notes", "-----"]
                in_fields = False
        out.append(line)
    return out


def _numpydoc_fields(app, what, name, obj, options, lines) -> None:
    lines[:] = field_lists_as_numpydoc(list(lines))


def setup(app):
    app.connect("builder-inited", stage_notebooks)
    # before napoleon (priority 500), which turns the numpydoc sections into fields
    app.connect("autodoc-process-docstring", _numpydoc_fields, priority=400)
