"""Shared pytest fixtures and markers."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]


@pytest.fixture(autouse=True)
def _isolated_cache(tmp_path_factory, monkeypatch):
    """Every test gets its own cache and results directories unless it sets its own."""
    base = tmp_path_factory.mktemp("facterlab")
    monkeypatch.setenv("FACTERLAB_CACHE", str(base / "cache"))
    monkeypatch.setenv("FACTERLAB_RESULTS", str(base / "results"))
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


# --- test tiers (issue 32) -------------------------------------------------------------------------------
# The unit tier is `pytest -m "not slow and not browser and not integration"` (`make test-unit`). Tests that
# start JupyterLab or Chromium are `browser`; tests that run notebooks, the CLI in subprocesses, model servers,
# killed processes or the bundled models are `integration`. A test's own markers are kept; these are added by
# file, so a new test in one of these files lands in the right tier. tests/<component>/ mirrors src/facterlab/
# (docs/USAGE.md, Tests); the file names are unique across the folders.
BROWSER_FILES = {"test_browser_explorer.py", "test_browser_facter_reuse.py", "test_notebook_sources.py"}
INTEGRATION_FILES = {
    "test_notebooks_smoke.py",
    "test_notebook_cli_errors.py",
    "test_readme_examples.py",
    "test_reporting_reproduce.py",
    "test_faults.py",
    "test_models_cache.py",
    "test_served.py",
    "test_packaging.py",
    "test_docs_site.py",
    "test_facter_llm.py",
    "test_models_llm.py",
    "test_models_encoder_speed.py",
}
INTEGRATION_MARKERS = {"llm", "realdata"}
INTEGRATION_FILES |= {"test_sweep.py", "test_paper_path.py", "test_embedding_cache.py", "test_threads.py"}
#: test names that start executors, clusters, worker pools or killed processes, or compile ranx's numba code
#: (201 s under load): integration wherever they are (the unit tier measured with them: docs/BENCHMARKS.md)
INTEGRATION_NAMES = ("dask", "executor", "pool", "kill", "jobqueue", "slurm", "ranx", "another_environment")


def pytest_collection_modifyitems(config, items):
    for item in items:
        name = item.path.name
        if name in BROWSER_FILES:
            item.add_marker(pytest.mark.browser)
        if (
            name in INTEGRATION_FILES
            or INTEGRATION_MARKERS & {m.name for m in item.iter_markers()}
            or any(k in item.name for k in INTEGRATION_NAMES)
        ):
            item.add_marker(pytest.mark.integration)
