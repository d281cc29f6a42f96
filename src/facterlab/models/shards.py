"""Cache shards: how the LLM and embedding caches stay safe when a sweep's tasks run on many processes
and nodes (docs/SCALING.md).

The shared caches (:class:`~facterlab.models.cache.PredictionCache`, ``EmbeddingCache``) are SQLite
files in WAL mode.  WAL needs shared memory between every process that opens the file, and SQLite's
documentation says WAL does not work over a network filesystem, which is where a cluster's shared
folder usually lives.  So during a sweep:

- **one writer per file.**  A task writes its new answers only to its own *shard*,
  ``<shards>/<kind>-<run id>-<host>-<pid>.sqlite``, in SQLite's rollback-journal mode (``DELETE``,
  no shared memory), which only that process ever opens for writing.  A batch is committed as soon as
  it is generated, as in the shared cache, so a killed task loses at most the batch it was running.
- **the shared cache is read-only while tasks run.**  Before the tasks start the driver checkpoints
  it (the WAL folded into the main file, :func:`prepare_base`); tasks open it read-only and
  ``immutable`` (no locks, no WAL, no shared memory: plain reads of one file, fine on NFS).
- **the driver merges.**  When the sweep ends, the driver, the one process that writes the shared
  cache, copies every shard into it and deletes the shard (:func:`merge_shards`); shards left by a
  killed sweep are merged by the next one.
- **a retried task resumes.**  A task also reads (read-only) the shards an earlier attempt of the
  same run id left behind (a worker killed mid-run), so its finished batches are not generated again.

Per-task shards rather than "the driver writes everything": a task's answers reach disk as they
are made (kill-safe, as a single run is), and no answers travel through the scheduler.

A facterlab process outside the sweep that writes the same shared cache while the sweep's tasks read
it is not supported (their immutable reads could see a half-written page): give the sweep its own
``FACTERLAB_CACHE`` or run one at a time.
"""

from __future__ import annotations

import logging
import os
import socket
import sqlite3
from collections.abc import Sequence
from pathlib import Path

from facterlab.corrupt import is_corrupt, move_aside
from facterlab.models.cache import EmbeddingCache, PredictionCache, _SqliteKV

__all__ = [
    "ShardedPredictionCache",
    "ShardedEmbeddingCache",
    "shard_path",
    "prepare_base",
    "merge_shards",
    "SHARD_KINDS",
]

log = logging.getLogger(__name__)

#: shard file prefix -> (table, shared cache class)
SHARD_KINDS = {"llm": ("predictions", PredictionCache), "emb": ("embeddings", EmbeddingCache)}


def shard_path(shard_dir: os.PathLike | str, kind: str, run_id: str) -> Path:
    """This process's shard for ``run_id``: unique per host and process, so no two writers share it."""
    if kind not in SHARD_KINDS:
        raise ValueError(f"unknown shard kind {kind!r}; choose one of {', '.join(SHARD_KINDS)}")
    host = "".join(c if c.isalnum() or c == "." else "_" for c in socket.gethostname())[:40]
    return Path(shard_dir) / f"{kind}-{run_id}-{host}-{os.getpid()}.sqlite"


def _read_only(path: Path, immutable: bool) -> sqlite3.Connection:
    uri = f"{path.resolve().as_uri()}?mode=ro" + ("&immutable=1" if immutable else "")
    return sqlite3.connect(uri, uri=True, check_same_thread=False)


def _select(conn: sqlite3.Connection, table: str, keys: Sequence[str]) -> dict:
    out: dict = {}
    for i in range(0, len(keys), 500):
        chunk = list(keys[i : i + 500])
        q = f"SELECT key, value FROM {table} WHERE key IN ({','.join('?' * len(chunk))})"
        out.update(conn.execute(q, chunk).fetchall())
    return out


class _Sharded(_SqliteKV):
    """Writes go to this process's shard; reads look in the shard, then in the shards of earlier
    attempts of the same run, then in the shared cache (both read-only)."""

    kind = "llm"

    def _setup(self) -> None:  # also when a damaged shard was replaced by a new one
        super()._setup()
        self._conn.execute("PRAGMA journal_mode=DELETE")
        self._conn.execute("PRAGMA synchronous=FULL")

    def _open_shard(self, shard: Path, base: Path | None, immutable_base: bool) -> None:
        self._conn.execute("PRAGMA journal_mode=DELETE")  # no WAL, no shared memory: one writer, any FS
        self._conn.execute("PRAGMA synchronous=FULL")
        self._readers: list = []
        prefix = shard.name.rsplit("-", 2)[0]  # <kind>-<run id>
        for other in sorted(shard.parent.glob(f"{prefix}-*.sqlite")):
            if other != shard:
                self._add_reader(other, immutable=False)
        if base is not None and Path(base).is_file():
            self._add_reader(Path(base), immutable=immutable_base)

    def _add_reader(self, path: Path, immutable: bool) -> None:
        try:
            conn = _read_only(path, immutable)
            conn.execute(f"SELECT 1 FROM {self.table} LIMIT 1").fetchall()
        except sqlite3.Error as exc:  # a shard its writer died in the middle of, an empty file
            log.warning("cache file %s not read (%s)", path, exc)
            return
        self._readers.append(conn)

    def get_many(self, keys: Sequence[str]) -> dict:
        keys = list(dict.fromkeys(keys))
        out: dict = {}
        for conn in self._readers:
            missing = [k for k in keys if k not in out]
            if not missing:
                break
            try:
                out.update(_select(conn, self.table, missing))
            except sqlite3.Error as exc:
                log.warning("a read-only cache file could not be read (%s); its answers are recomputed", exc)
        missing = [k for k in keys if k not in out]
        if missing:
            out.update(super().get_many(missing))
        return out

    def close(self) -> None:
        for conn in self._readers:
            conn.close()
        super().close()


class ShardedPredictionCache(_Sharded, PredictionCache):
    """A :class:`PredictionCache` for one sweep task (module docstring)."""

    kind = "llm"

    def __init__(self, shard: os.PathLike | str, base: os.PathLike | str | None = None, immutable_base: bool = True):
        PredictionCache.__init__(self, Path(shard))
        self._open_shard(Path(shard), None if base is None else Path(base), immutable_base)


class ShardedEmbeddingCache(_Sharded, EmbeddingCache):
    """An :class:`EmbeddingCache` for one sweep task (module docstring)."""

    kind = "emb"

    def __init__(self, shard: os.PathLike | str, base: os.PathLike | str | None = None, immutable_base: bool = True):
        EmbeddingCache.__init__(self, Path(shard))
        self._open_shard(Path(shard), None if base is None else Path(base), immutable_base)


def prepare_base(base: os.PathLike | str) -> bool:
    """Fold the shared cache's WAL into its main file (driver, before the tasks start).  True when the
    file is complete without its WAL (tasks may read it ``immutable``); False when another process
    kept part of the WAL (tasks then read it read-only through SQLite's locks, which needs a local
    filesystem).  A missing file is True (nothing to read).  The file is checked first (SQLite's
    ``PRAGMA quick_check``, once per sweep): a damaged one is moved aside (:func:`facterlab.corrupt.move_aside`)
    and the sweep starts without it (True)."""
    base = Path(base)
    if not base.is_file():
        return True
    conn = sqlite3.connect(str(base), timeout=60)
    try:
        check = conn.execute("PRAGMA quick_check(1)").fetchone()[0]
        if check != "ok":
            raise sqlite3.DatabaseError(f"database disk image is malformed (quick_check: {check})")
        busy, n_log, n_done = conn.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()
    except sqlite3.DatabaseError as exc:
        if not is_corrupt(exc):
            raise
        conn.close()
        move_aside(base, "cache", exc, "its entries are lost and will be computed again")
        return True
    finally:
        conn.close()
    ok = busy == 0 and n_log == n_done
    if not ok:
        log.warning("the cache %s is in use by another process: tasks read it through SQLite's locks", base)
    return ok


def merge_shards(
    shard_dir: os.PathLike | str, cache_root: os.PathLike | str | None = None, run_ids: Sequence[str] | None = None
) -> dict:
    """Copy every shard of ``shard_dir`` (of ``run_ids`` only, when given: another sweep's shards may
    still be written) into the shared caches and delete it (driver only).  Returns
    ``kind -> rows copied``.  A shard that cannot be read (its writer died mid-commit and left a hot
    journal) is opened for writing first, which rolls the unfinished batch back, then copied."""
    shard_dir = Path(shard_dir)
    copied = dict.fromkeys(SHARD_KINDS, 0)
    if not shard_dir.is_dir():
        return copied
    stores: dict = {}
    try:
        for path in sorted(shard_dir.glob("*.sqlite")):
            kind = path.name.split("-", 1)[0]
            if kind not in SHARD_KINDS:
                continue
            if run_ids is not None and path.name[len(kind) + 1 :].rsplit("-", 2)[0] not in run_ids:
                continue
            table, cls = SHARD_KINDS[kind]
            if kind not in stores:
                stores[kind] = cls(None if cache_root is None else Path(cache_root) / _default_name(cls))
            conn = sqlite3.connect(str(path), timeout=60)  # read-write: recovers a hot journal
            try:
                rows = conn.execute(f"SELECT key, value FROM {table}").fetchall()
            except sqlite3.Error as exc:
                conn.close()
                if is_corrupt(exc):  # never readable: out of the way of every later merge
                    move_aside(path, "cache shard", exc, "its entries are lost and will be computed again")
                else:
                    log.warning("cache shard %s not merged (%s)", path, exc)
                continue
            conn.close()
            for i in range(0, len(rows), 1000):
                stores[kind].put_many(rows[i : i + 1000])
            copied[kind] += len(rows)
            for suffix in ("", "-journal"):
                Path(str(path) + suffix).unlink(missing_ok=True)
    finally:
        for store in stores.values():
            store.close()
    return copied


def _default_name(cls) -> str:
    return "llm_cache.sqlite" if cls is PredictionCache else "embeddings.sqlite"
