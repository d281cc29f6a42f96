"""Every facterlab name a benchmark imports exists (benchmarks are not run by the test suite, so a
renamed function would otherwise break them silently: ``bench_facter.py`` imported a private name that
had been made public, and nothing failed)."""

from __future__ import annotations

import ast
import importlib
from pathlib import Path

import pytest

BENCHMARKS = sorted((Path(__file__).resolve().parents[2] / "benchmarks").glob("*.py"))


def _facterlab_imports(path: Path) -> list:
    out = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.split(".")[0] == "facterlab":
            out += [(node.module, a.name, node.lineno) for a in node.names]
        elif isinstance(node, ast.Import):
            out += [(a.name, None, node.lineno) for a in node.names if a.name.split(".")[0] == "facterlab"]
    return out


def test_there_are_benchmarks():
    assert len(BENCHMARKS) >= 5


@pytest.mark.parametrize("path", BENCHMARKS, ids=lambda p: p.name)
def test_benchmark_imports_resolve(path):
    missing = []
    for module, name, line in _facterlab_imports(path):
        try:
            mod = importlib.import_module(module)
        except ImportError as exc:
            if "facterlab" in str(exc) or module.startswith("facterlab"):
                missing.append(f"{path.name}:{line}: {module} ({exc})")
            continue
        if name is not None and not hasattr(mod, name):
            try:
                importlib.import_module(f"{module}.{name}")
            except ImportError:
                missing.append(f"{path.name}:{line}: {module}.{name} does not exist")
    assert not missing, "\n".join(missing)
