"""Shared pytest fixtures and markers."""

from __future__ import annotations

import itertools
import os
import re
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]


@pytest.fixture(autouse=True)
def _isolated_cache(tmp_path_factory, monkeypatch):
    """Every test gets its own cache and results directories unless it sets its own."""
    base = tmp_path_factory.mktemp("facterlab")
    monkeypatch.setenv("FACTERLAB_CACHE", str(base / "cache"))
    monkeypatch.setenv("FACTERLAB_RESULTS", str(base / "results"))
    # no converted GGUF folder (540 MB) in every test's cache; tests/models/test_models_llm.py turns it on
    monkeypatch.setenv("FACTERLAB_GGUF_CACHE", "0")
    yield


def real_data_dir() -> Path | None:
    """The real data directory from FACTERLAB_DATA, if it is set and exists."""
    env = os.environ.get("FACTERLAB_DATA")
    if env and Path(env).is_dir():
        return Path(env)
    return None


@pytest.fixture(autouse=True)
def _isolated_figures(tmp_path_factory, monkeypatch):
    """Tests never overwrite the committed figures/ folder."""
    monkeypatch.setenv("FACTERLAB_FIGURES", str(tmp_path_factory.mktemp("figures")))
    yield


# --- layout and test tiers (issue 32) ---------------------------------------------------------------------
# tests/<component>/ mirrors src/facterlab/<component>/ (docs/ARCHITECTURE.md's components): base (the package's
# top-level modules), data, models, metrics, facter, simpson, reporting; notebooks (notebooks run through
# papermill and the CLI, their text sources), browser (JupyterLab in headless Chromium), project (the README,
# docs, packaging, import layers and public API). tests/helpers/ holds the shared modules, importable by name
# (`from facter_world import make_world`) through pytest's `pythonpath` (pyproject.toml).
#
# The unit tier is `pytest -m "not slow and not browser and not integration"` (`make test-unit`). Tests that
# start JupyterLab or Chromium are `browser`; tests that run notebooks, the CLI in subprocesses, model servers,
# killed processes or the bundled models are `integration`. A test's own markers are kept; these are added by
# path (relative to tests/; a folder ends in "/"), so a new test in one of these files or folders lands in the
# right tier. A file or folder whose markers the -m expression excludes whatever else its tests carry is not
# even imported (pytest_ignore_collect below): the unit tier skips their imports of torch, transformers,
# papermill and playwright. `pytest` without -m (`make test`) collects and runs everything.
TIERS: dict[str, tuple[str, ...]] = {
    "browser/": ("browser",),
    "notebooks/test_notebook_sources.py": ("browser",),
    "notebooks/test_notebooks_smoke.py": ("integration",),
    "notebooks/test_notebook_cli_errors.py": ("integration",),
    "project/test_readme_examples.py": ("integration",),
    "project/test_packaging.py": ("integration",),
    "project/test_docs_site.py": ("integration",),
    "reporting/test_reporting_reproduce.py": ("integration",),
    "reporting/test_sweep.py": ("integration",),
    "facter/test_faults.py": ("integration",),
    "facter/test_facter_llm.py": ("integration",),
    "models/test_models_cache.py": ("integration",),
    "models/test_served.py": ("integration",),
    "models/test_models_llm.py": ("integration",),
    "models/test_models_encoder_speed.py": ("integration",),
    "models/test_paper_path.py": ("integration",),
    "models/test_embedding_cache.py": ("integration",),
    "base/test_threads.py": ("integration",),
}
INTEGRATION_MARKERS = {"llm", "realdata"}
#: test names that start executors, clusters, worker pools or killed processes, or compile ranx's numba code
#: (201 s under load): integration wherever they are (the unit tier measured with them: docs/BENCHMARKS.md)
INTEGRATION_NAMES = ("dask", "executor", "pool", "kill", "jobqueue", "slurm", "ranx", "another_environment")
HERE = Path(__file__).resolve().parent


def tier_markers(path: Path) -> set:
    """The markers TIERS gives a test file or folder: its own entry and those of the folders above it."""
    try:
        rel = path.resolve().relative_to(HERE)
    except ValueError:  # outside tests/ (the doctests of src/facterlab)
        return set()
    keys = [f"{'/'.join(rel.parts[:i])}/" for i in range(1, len(rel.parts))] + [rel.as_posix()]
    if path.is_dir():
        keys.append(rel.as_posix() + "/")
    return {m for k in keys for m in TIERS.get(k, ())}


class _Unknown(Exception):
    """A -m expression this conftest does not evaluate ahead of collection (a marker with arguments)."""


def excluded_by_markexpr(markexpr: str, markers: set) -> bool:
    """True when no test carrying ``markers`` can match ``markexpr``, whatever other markers it has.

    Every other marker the expression names is tried both ways (the expression names a few).

    >>> excluded_by_markexpr("not slow and not browser and not integration", {"integration"})
    True
    >>> excluded_by_markexpr("not slow", {"integration"}), excluded_by_markexpr("integration or llm", {"browser"})
    (False, False)
    >>> excluded_by_markexpr("", {"browser"}), excluded_by_markexpr("not browser", set())
    (False, False)
    """
    if not markexpr or not markers:
        return False
    from _pytest.mark.expression import Expression

    try:
        expr = Expression.compile(markexpr)
    except Exception:  # noqa: BLE001 - a malformed expression (SyntaxError; ParseError before pytest 8): pytest reports it
        return False
    names = getattr(expr, "idents", None)
    free = sorted(
        (names() if names else set(re.findall(r"(?:\w|:|\+|-|\.|\[|\]|\\|/)+", markexpr)) - {"and", "or", "not"})
        - markers
    )
    for bits in itertools.product((False, True), repeat=len(free)):
        try:
            if expr.evaluate(_matcher(markers | {n for n, b in zip(free, bits) if b})):
                return False
        except _Unknown:
            return False
    return True


def _matcher(present: set):
    def matcher(name: str, /, **kwargs) -> bool:
        if kwargs:
            raise _Unknown(name)
        return name in present

    return matcher


def pytest_ignore_collect(collection_path, config):
    """Skip importing a file or folder whose TIERS markers the -m expression excludes (None: pytest decides)."""
    if excluded_by_markexpr(config.getoption("markexpr", ""), tier_markers(Path(collection_path))):
        return True
    return None


def pytest_collection_modifyitems(config, items):
    for item in items:
        markers = tier_markers(item.path)
        if "browser" in markers:
            item.add_marker(pytest.mark.browser)
        if (
            "integration" in markers
            or INTEGRATION_MARKERS & {m.name for m in item.iter_markers()}
            or any(k in item.name for k in INTEGRATION_NAMES)
        ):
            item.add_marker(pytest.mark.integration)
