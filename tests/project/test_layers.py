"""The package's import graph points only down the layers of docs/ARCHITECTURE.md and has no cycle.

Every ``import facterlab...`` / ``from facterlab... import`` is read with :mod:`ast`, at module top and
inside functions alike (a function-local import is still a dependency), plus module names written as
string constants (``importlib.import_module`` in :mod:`facterlab.cli`).  Rules:

1. each module belongs to one component (``base``, or a sub-package such as ``data``); components sit
   in the layers below, lowest first;
2. a module may import its own component, or a component of a lower layer; never a higher layer, and
   never another component of its own layer (``models`` and ``metrics`` do not know each other);
3. no cycle.  Importing ``a.b.c`` also runs the package ``a.b``'s ``__init__`` (unless the importer
   is inside ``a.b``), so that edge counts for cycles too.

A new top-level module or sub-package fails rule 1 until it is placed in :data:`LAYERS` and in
docs/ARCHITECTURE.md.
"""

from __future__ import annotations

import ast
import textwrap
from dataclasses import dataclass
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
SRC = REPO / "src"

#: lowest first; each layer is a tuple of components; a component is a list of module prefixes
LAYERS: tuple = (
    {
        "base": [
            "facterlab.__init__",
            "facterlab.blas",
            "facterlab.config",
            "facterlab.config_bounds",
            "facterlab.config_served",
            "facterlab.corrupt",
            "facterlab.datatypes",
            "facterlab.envvars",
            "facterlab.executors",
            "facterlab.filehash",
            "facterlab.gitstate",
            "facterlab.params",
            "facterlab.paths",
            "facterlab.progress",
            "facterlab.safeio",
            "facterlab.style",
            "facterlab.threads",
        ]
    },
    {"data": ["facterlab.data"]},
    {"models": ["facterlab.models"], "metrics": ["facterlab.metrics"]},
    {"facter": ["facterlab.facter"], "simpson": ["facterlab.simpson"], "testing": ["facterlab.testing"]},
    {"reporting": ["facterlab.reporting"]},
    {"cli": ["facterlab.cli"], "notebook": ["facterlab.notebook"]},
)


@dataclass(frozen=True)
class Edge:
    src: str
    dst: str
    where: str  # "path:line"
    how: str  # "top", "function-local", "string", "parent package"

    def __str__(self) -> str:
        return f"{self.src} -> {self.dst} ({self.how} import at {self.where})"


def module_files(src_root: Path, package: str) -> dict:
    """Module name -> file; a package is named by its ``__init__`` as ``pkg.__init__``."""
    out = {}
    for p in sorted((src_root / package).rglob("*.py")):
        out[".".join(p.relative_to(src_root).with_suffix("").parts)] = p
    return out


def _resolve(name: str, modules: dict) -> str | None:
    if name in modules:
        return name
    if f"{name}.__init__" in modules:
        return f"{name}.__init__"
    return None


def _package_of(mod: str) -> str:
    """The package a module's relative imports start from."""
    parts = mod.split(".")
    return ".".join(parts[:-1])


def import_edges(src_root: Path, package: str) -> list:
    """Every import of ``package``'s own modules, with where it is written and how."""
    modules = module_files(src_root, package)
    edges = []
    for mod, path in modules.items():
        tree = ast.parse(path.read_text(), filename=str(path))
        rel = path.relative_to(src_root.parent) if src_root.parent in path.parents else path

        def add(target: str | None, node: ast.AST, how: str, mod=mod, rel=rel) -> None:
            if target is not None and target != mod:
                edges.append(Edge(mod, target, f"{rel}:{node.lineno}", how))

        def visit(node: ast.AST, in_function: bool, mod=mod, add=add) -> None:
            for child in ast.iter_child_nodes(node):
                how = "function-local" if in_function else "top"
                if isinstance(child, ast.Import):
                    for alias in child.names:
                        if alias.name.split(".")[0] == package:
                            add(_resolve(alias.name, modules), child, how)
                elif isinstance(child, ast.ImportFrom):
                    if child.level:
                        base = _package_of(mod).split(".")
                        base = base[: len(base) - (child.level - 1)]
                        target = ".".join(base + ([child.module] if child.module else []))
                    else:
                        target = child.module or ""
                    if target.split(".")[0] != package:
                        continue
                    for alias in child.names:  # `from pkg import submodule` imports the submodule
                        sub = _resolve(f"{target}.{alias.name}", modules)
                        add(sub if sub is not None else _resolve(target, modules), child, how)
                elif isinstance(child, ast.Constant) and isinstance(child.value, str):
                    if child.value.startswith(package + ".") and _resolve(child.value, modules):
                        add(_resolve(child.value, modules), child, "string")
                inner = in_function or isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda))
                visit(child, inner)

        visit(tree, False)
    return edges


def component_of(mod: str, layers=LAYERS) -> tuple | None:
    """(layer index, component name) of the longest matching prefix, or None."""
    best = None
    for i, layer in enumerate(layers):
        for comp, prefixes in layer.items():
            for pre in prefixes:
                if mod == pre or mod.startswith(pre + "."):
                    if best is None or len(pre) > best[2]:
                        best = (i, comp, len(pre))
    return None if best is None else best[:2]


def layer_violations(edges: list, modules, layers=LAYERS) -> list:
    """Sentences naming each module without a layer, and each import that goes up or sideways."""
    problems = [
        f"{m} is in no layer: place it in tests/project/test_layers.py LAYERS and docs/ARCHITECTURE.md"
        for m in sorted(modules)
        if component_of(m, layers) is None
    ]
    for e in edges:
        a, b = component_of(e.src, layers), component_of(e.dst, layers)
        if a is None or b is None or a[1] == b[1]:
            continue
        if b[0] > a[0]:
            problems.append(f"upward arrow: {e} goes from layer {a[1]} up to {b[1]}")
        elif b[0] == a[0]:
            problems.append(f"sideways arrow: {e} joins {a[1]} and {b[1]}, which share a layer")
    return problems


def runtime_edges(edges: list, modules) -> list:
    """``edges`` plus, for each, the ``__init__`` of every package above the target that the importer
    is not inside (Python runs those first)."""
    out = list(edges)
    for e in edges:
        parts = e.dst.removesuffix(".__init__").split(".")
        for n in range(1, len(parts)):
            pkg = ".".join(parts[:n])
            init = f"{pkg}.__init__"
            if init in modules and init != e.src and not e.src.startswith(pkg + "."):
                out.append(Edge(e.src, init, e.where, "parent package"))
    return out


def find_cycle(edges: list) -> list | None:
    """One cycle as a list of edges, or None (depth-first search, deterministic order)."""
    graph: dict = {}
    for e in edges:
        graph.setdefault(e.src, []).append(e)
    state: dict = {}  # 1 on the stack, 2 done
    stack: list = []

    def dfs(node: str):
        state[node] = 1
        for e in sorted(graph.get(node, []), key=lambda x: (x.dst, x.where)):
            if state.get(e.dst) == 1:
                start = next(i for i, s in enumerate(stack) if s.src == e.dst) if e.dst != node else len(stack)
                return stack[start:] + [e]
            if state.get(e.dst) is None:
                stack.append(e)
                found = dfs(e.dst)
                if found:
                    return found
                stack.pop()
        state[node] = 2
        return None

    for node in sorted(graph):
        if state.get(node) is None:
            found = dfs(node)
            if found:
                return found
    return None


def check(src_root: Path, package: str, layers=LAYERS) -> list:
    modules = module_files(src_root, package)
    edges = import_edges(src_root, package)
    problems = layer_violations(edges, modules, layers)
    remaining = runtime_edges(edges, modules)
    for _ in range(50):  # every cycle, one at a time: report it, cut its closing edge, look again
        cycle = find_cycle(remaining)
        if not cycle:
            break
        problems.append("import cycle:\n    " + "\n    ".join(str(e) for e in cycle))
        remaining = [e for e in remaining if (e.src, e.dst) != (cycle[-1].src, cycle[-1].dst)]
    return problems


# ---------------------------------------------------------------------------------------------


def test_facterlab_imports_point_down_and_have_no_cycle():
    problems = check(SRC, "facterlab")
    assert not problems, "\n".join(problems)


def test_every_component_is_documented():
    doc = (REPO / "docs" / "ARCHITECTURE.md").read_text()
    for layer in LAYERS:
        for prefixes in layer.values():
            for pre in prefixes:
                name = pre.removesuffix(".__init__")
                assert f"`{name}`" in doc, f"docs/ARCHITECTURE.md does not name `{name}`"


def _write(root: Path, files: dict) -> Path:
    for rel, text in files.items():
        p = root / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(textwrap.dedent(text))
    return root


TOY_LAYERS = (
    {"base": ["toy.__init__", "toy.util"]},
    {"low": ["toy.low"]},
    {"high": ["toy.high"], "side": ["toy.side"]},
)


def test_checker_names_an_upward_function_local_import(tmp_path):
    root = _write(
        tmp_path,
        {
            "toy/__init__.py": "",
            "toy/util.py": "X = 1\n",
            "toy/low/__init__.py": "",
            "toy/low/a.py": "from toy.util import X\n\ndef f():\n    from toy.high.b import Y\n    return Y\n",
            "toy/high/__init__.py": "",
            "toy/high/b.py": "from toy.low.a import f\nY = 2\n",
            "toy/side/__init__.py": "from toy.high import b\n",
        },
    )
    problems = check(root, "toy", TOY_LAYERS)
    up = [p for p in problems if p.startswith("upward arrow")]
    assert len(up) == 1 and "toy.low.a -> toy.high.b (function-local import at" in up[0] and "a.py:4" in up[0]
    assert any(p.startswith("sideways arrow: toy.side.__init__ -> toy.high.b") for p in problems)
    cycle = [p for p in problems if p.startswith("import cycle")]
    assert cycle and "toy.low.a -> toy.high.b" in cycle[0] and "toy.high.b -> toy.low.a" in cycle[0]


def test_checker_sees_a_cycle_through_a_package_init_and_unplaced_modules(tmp_path):
    root = _write(
        tmp_path,
        {
            "toy/__init__.py": "",
            "toy/util.py": "",
            "toy/extra.py": "import toy.util\n",
            "toy/low/__init__.py": "from toy.low.loaders import load\n",
            "toy/low/loaders.py": "from .dataset import D\n\ndef load():\n    return D\n",
            # imports the package's re-export: runs low/__init__ -> loaders -> dataset? no: dataset -> low
            "toy/low/dataset.py": "D = 1\n",
            "toy/high/__init__.py": "",
            "toy/high/b.py": "import toy.low.dataset\n",
            "toy/high/c.py": "from toy.high import b\n",
        },
    )
    assert check(root, "toy", TOY_LAYERS) == [
        "toy.extra is in no layer: place it in tests/project/test_layers.py LAYERS and docs/ARCHITECTURE.md"
    ]
    # now the hidden cycle of the old data package: a loader importing the package that imports it
    (root / "toy/low/dataset.py").write_text("def make():\n    from toy.low import load\n    return load\n")
    problems = check(root, "toy", TOY_LAYERS)
    cycle = [p for p in problems if p.startswith("import cycle")]
    assert cycle, problems
    assert "toy.low.dataset -> toy.low.__init__" in cycle[0] and "toy.low.loaders -> toy.low.dataset" in cycle[0]


def test_parent_package_edges_only_from_outside(tmp_path):
    root = _write(
        tmp_path,
        {
            "toy/__init__.py": "",
            "toy/util.py": "",
            "toy/low/__init__.py": "from toy.low.a import f\n",
            "toy/low/a.py": "def f():\n    return 1\n",
            "toy/high/__init__.py": "",
            "toy/high/b.py": "from toy.low.a import f\n",
        },
    )
    modules = module_files(root, "toy")
    edges = runtime_edges(import_edges(root, "toy"), modules)
    assert {(e.src, e.dst) for e in edges} == {
        ("toy.low.__init__", "toy.low.a"),
        ("toy.high.b", "toy.low.a"),
        ("toy.high.b", "toy.low.__init__"),
    }


@pytest.mark.parametrize("module", ["facterlab.data", "facterlab.metrics", "facterlab.simpson", "facterlab.facter"])
def test_numerical_layers_import_no_heavy_library(module):
    import subprocess
    import sys

    code = (
        f"import sys, {module}; "
        "print(sorted(m for m in ('torch', 'matplotlib', 'sklearn', 'transformers', 'sentence_transformers') "
        "if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.strip()
    assert out == "[]", f"importing {module} loads {out}"


def _component_of(mod: str) -> str | None:
    for layer in LAYERS:
        for comp, prefixes in layer.items():
            if any(mod == p or mod.startswith(p + ".") for p in prefixes):
                return comp
    return None


def private_imports(src_root: Path, package: str = "facterlab") -> list:
    """``from <module of another component> import _name``: a private name crossing components."""
    out = []
    for mod, path in module_files(src_root, package).items():
        tree = ast.parse(path.read_text(), filename=str(path))
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and not node.level and (node.module or "").startswith(package + "."):
                src_c, dst_c = _component_of(mod), _component_of(node.module or "")
                for alias in node.names:
                    if alias.name.startswith("_") and src_c != dst_c:
                        out.append(
                            f"{path.relative_to(src_root.parent)}:{node.lineno} imports {node.module}.{alias.name}"
                        )
    return out


def test_no_private_name_crosses_components():
    assert private_imports(SRC) == []


def test_private_name_checker_sees_one(tmp_path):
    root = _write(
        tmp_path,
        {
            "facterlab/__init__.py": "",
            "facterlab/facter/__init__.py": "",
            "facterlab/facter/pipeline.py": "def _hidden():\n    return 1\n",
            "facterlab/reporting/__init__.py": "",
            "facterlab/reporting/gt.py": "from facterlab.facter.pipeline import _hidden\n",
        },
    )
    found = private_imports(root)
    assert len(found) == 1 and "facterlab.facter.pipeline._hidden" in found[0]
