"""File content hashes remembered by (real path, size, mtime): a multi-GB weight file or a dataset
file is read once, in this process and across processes (``<cache>/file_sha256.json``).

Used by the model registry (weight fingerprints) and by the dataset integrity check
(:func:`facterlab.data.download.file_integrity`), so it sits in the base layer (docs/ARCHITECTURE.md).
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

from facterlab.config import cache_dir
from facterlab.safeio import read_json

__all__ = ["file_sha256"]

#: file content hashes remembered in this process: (real path, size, mtime_ns) -> sha256 hex
_HASH_MEMO: dict = {}
_HASH_STORE = "file_sha256.json"


def _hash_store_path() -> Path:
    return cache_dir() / _HASH_STORE


def _load_hash_store() -> dict:
    try:
        data = read_json(_hash_store_path(), what="hash store")
        return data if isinstance(data, dict) else {}
    except (OSError, ValueError):
        return {}


def _save_hash_store(store: dict) -> None:
    path = _hash_store_path()
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
        tmp.write_text(json.dumps(store, sort_keys=True))
        os.replace(tmp, path)
    except OSError:  # a read-only cache only costs a re-hash next time
        pass


def file_sha256(path: Path) -> str:
    """SHA-256 of a file's full content, hashed once and remembered by (real path, size, mtime):
    in this process and in ``<cache>/file_sha256.json``, so that a multi-GB weight file is read once."""
    real = os.path.realpath(path)
    st = os.stat(real)
    key = (real, st.st_size, st.st_mtime_ns)
    got = _HASH_MEMO.get(key)
    if got:
        return got
    store = _load_hash_store()
    rec = store.get(real)
    if (
        isinstance(rec, dict)
        and rec.get("size") == st.st_size
        and rec.get("mtime_ns") == st.st_mtime_ns
        and isinstance(rec.get("sha256"), str)
    ):
        _HASH_MEMO[key] = rec["sha256"]
        return rec["sha256"]
    h = hashlib.sha256()
    with open(real, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 22), b""):
            h.update(block)
    digest = h.hexdigest()
    _HASH_MEMO[key] = digest
    store = _load_hash_store()  # re-read: another process may have added entries meanwhile
    store[real] = {"size": st.st_size, "mtime_ns": st.st_mtime_ns, "sha256": digest}
    _save_hash_store(store)
    return digest
