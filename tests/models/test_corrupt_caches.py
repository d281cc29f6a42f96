"""Issue 44, case 2: a damaged cache file is named, moved aside, and rebuilt; nothing raises."""

from __future__ import annotations

import logging
import sqlite3

import numpy as np
import pytest

from facterlab.datatypes import Prediction
from facterlab.models.cache import EmbeddingCache, PredictionCache
from facterlab.models.shards import ShardedPredictionCache, merge_shards, prepare_base, shard_path


def _fill(store, n: int) -> list:
    keys = [f"k{i:05d}" for i in range(n)]
    if isinstance(store, PredictionCache):
        store.put_predictions((k, Prediction(titles=(f"T {k}",), raw=k * 20)) for k in keys)
    else:
        store.put_vectors((k, np.full(64, i, dtype=np.float32)) for i, k in enumerate(keys))
    return keys


def _checkpointed(store) -> None:
    store._conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    store.close()


def _overwrite_head(path) -> None:
    with open(path, "r+b") as f:
        f.write(b"\0" * 64)


def _truncate(path) -> None:
    size = path.stat().st_size
    with open(path, "r+b") as f:
        f.truncate(size // 3)


@pytest.mark.parametrize("cls", [PredictionCache, EmbeddingCache])
@pytest.mark.parametrize("damage", [_overwrite_head, _truncate])
def test_a_damaged_sqlite_cache_is_moved_aside_named_and_rebuilt(tmp_path, caplog, cls, damage):
    path = tmp_path / "c.sqlite"
    store = cls(path)
    keys = _fill(store, 400)
    _checkpointed(store)
    damage(path)
    with caplog.at_level(logging.WARNING):
        store = cls(path)
        found = store.get_many(keys)  # a truncated file opens; the damage shows at the first read
        assert len(found) < len(keys)
        _fill(store, 3)
        assert len(store) == 3  # a new, working file
        store.close()
    aside = sorted(tmp_path.glob("c.sqlite.corrupt-*"))
    assert len(aside) == 1 and aside[0].name.endswith("Z")
    lines = [r.getMessage() for r in caplog.records if "moved aside" in r.getMessage()]
    assert len(lines) == 1 and str(path) in lines[0] and aside[0].name in lines[0] and "\n" not in lines[0]
    assert "lost" in lines[0]


def test_a_busy_cache_is_not_taken_for_a_damaged_one(tmp_path):
    path = tmp_path / "c.sqlite"
    store = PredictionCache(path)
    _fill(store, 2)
    path.chmod(0o444)
    try:
        store.close()
        ro = PredictionCache(path)  # readable: opens, reads
        assert len(ro.get_many(["k00000"])) == 1
        ro.close()
    finally:
        path.chmod(0o644)
    assert not list(tmp_path.glob("*.corrupt-*"))


def test_a_damaged_shard_and_a_damaged_shared_cache_are_moved_aside_before_a_sweep(tmp_path, caplog):
    shards, root = tmp_path / "shards", tmp_path / "cache"
    root.mkdir()
    shard = shard_path(shards, "llm", "run1")
    shards.mkdir()
    store = ShardedPredictionCache(shard)
    _fill(store, 50)
    store.close()
    _overwrite_head(shard)
    base = root / "llm_cache.sqlite"
    store = PredictionCache(base)
    _fill(store, 50)
    _checkpointed(store)
    _overwrite_head(base)
    with caplog.at_level(logging.WARNING):
        assert prepare_base(base) is True
        assert merge_shards(shards, root)["llm"] == 0
    assert len(list(root.glob("llm_cache.sqlite.corrupt-*"))) == 1
    assert len(PredictionCache(base)) == 0  # the sweep goes on with a new, readable file
    assert not shard.exists() and len(list(shards.glob("*.corrupt-*"))) == 1
    assert sum("moved aside" in r.getMessage() for r in caplog.records) == 2


def test_a_damaged_interactions_entry_is_rebuilt_identically(tmp_path, caplog):
    from facterlab.config import DataConfig
    from facterlab.data.protocol import load_or_build_interactions

    cfg = DataConfig(dataset="synthetic", n_rows=60)
    first = load_or_build_interactions(cfg=cfg, cache=tmp_path)
    rows = first.cache_path / "rows.parquet"
    _overwrite_head(rows)
    with caplog.at_level(logging.WARNING):
        again = load_or_build_interactions(cfg=cfg, cache=tmp_path)
    assert again.rows.equals(first.rows)
    assert len(list(first.cache_path.parent.glob("*.corrupt-*"))) == 1
    assert any("moved aside" in r.getMessage() and "interactions" in r.getMessage() for r in caplog.records)


def test_the_cli_error_class_is_untouched_for_other_sqlite_errors():
    from facterlab.corrupt import is_corrupt

    assert not is_corrupt(sqlite3.OperationalError("database or disk is full"))
    assert is_corrupt(sqlite3.DatabaseError("database disk image is malformed"))
