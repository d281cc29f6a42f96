"""Every file or folder that tests/conftest.py's TIERS table names exists: a renamed test file would
otherwise lose its tier's markers silently (and run in the unit tier, or not at all)."""

from __future__ import annotations

import conftest


def test_every_tier_entry_names_an_existing_test_file_or_folder():
    missing = [key for key in conftest.TIERS if not (conftest.HERE / key.rstrip("/")).exists()]
    assert not missing, f"tests/conftest.py TIERS names paths that do not exist: {missing}"
    assert all(key.endswith("/") == (conftest.HERE / key.rstrip("/")).is_dir() for key in conftest.TIERS)
