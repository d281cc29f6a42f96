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
