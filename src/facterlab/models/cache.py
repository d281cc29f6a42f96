"""Disk caches for LLM predictions and text embeddings (SQLite, WAL mode, JSON/float32 values).

A run killed midway and restarted redoes no cached prompt: :class:`CachedRecommender` looks every
request up first, generates only the misses, and writes each generated batch's rows right away.

Key of a prediction (:func:`request_key`)::

    sha256(json([recommender fingerprint (model + decoding parameters), seed, messages, candidates, k]))

Values are JSON (never pickle).  Two processes may write at once: WAL journal, a busy timeout and a
retry loop on ``database is locked``.
"""

from __future__ import annotations

import errno
import hashlib
import json
import logging
import sqlite3
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import asdict
from pathlib import Path

import numpy as np

from facterlab.config import cache_dir
from facterlab.corrupt import is_corrupt, move_aside
from facterlab.datatypes import Prediction, PromptRequest, Recommender
from facterlab.progress import record_predictions, tqdm

__all__ = ["request_key", "PredictionCache", "EmbeddingCache", "CachedRecommender", "text_key"]

log = logging.getLogger(__name__)

_BUSY_MS = 60_000
_RETRIES = 20


def request_key(fingerprint: str, req: PromptRequest) -> str:
    """SHA-256 hex key of (fingerprint, seed, messages, candidates, k) for a request.

    >>> r = PromptRequest.from_messages([{"role": "user", "content": "hi"}], seed=3)
    >>> request_key("m", r) == request_key("m", r), request_key("m", r) == request_key("n", r)
    (True, False)
    """
    blob = json.dumps(
        [
            fingerprint,
            int(req.seed),
            [list(m) for m in req.messages],
            None if req.candidates is None else list(req.candidates),
            int(req.k),
        ],
        ensure_ascii=False,
        separators=(",", ":"),
    )
    return hashlib.sha256(blob.encode("utf-8")).hexdigest()


def text_key(fingerprint: str, text: str) -> str:
    """SHA-256 hex key of (encoder fingerprint, text)."""
    return hashlib.sha256(json.dumps([fingerprint, text], ensure_ascii=False).encode("utf-8")).hexdigest()


def _retry(fn: Callable):
    delay = 0.05
    for attempt in range(_RETRIES):
        try:
            return fn()
        except sqlite3.OperationalError as exc:  # busy/locked beyond the busy timeout
            msg = str(exc).lower()
            if ("locked" not in msg and "busy" not in msg) or attempt == _RETRIES - 1:
                raise
            time.sleep(delay)
            delay = min(delay * 2, 2.0)


def _inode(path: Path) -> tuple | None:
    try:
        st = path.stat()
    except OSError:
        return None
    return (st.st_dev, st.st_ino)


class _SqliteKV:
    """A tiny key -> blob store in one SQLite table, WAL mode, safe for concurrent writers.

    A file that SQLite finds damaged or foreign (``file is not a database``, ``database disk image is
    malformed``), when it is opened or at any later read or write, is moved aside to
    ``<file>.corrupt-<UTC time>`` with one warning line (:func:`facterlab.corrupt.move_aside`), and the
    store goes on with a new, empty file: its entries are computed again."""

    #: the store's name in messages
    what = "cache"

    def __init__(self, path: Path, table: str):
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.table = table
        try:
            self._open()
        except sqlite3.DatabaseError as exc:
            if not is_corrupt(exc):
                raise
            self._recover(exc)

    def _open(self) -> None:
        self._conn = sqlite3.connect(
            str(self.path), timeout=_BUSY_MS / 1000, isolation_level=None, check_same_thread=False
        )
        try:
            self._conn.execute(f"PRAGMA busy_timeout={_BUSY_MS}")
            self._setup()
            # the header and the table's root page read now: a damaged file is found before any work
            _retry(lambda: self._conn.execute(f"SELECT 1 FROM {self.table} LIMIT 1").fetchall())
            self._inode = _inode(self.path)
        except BaseException:
            self._conn.close()
            raise

    def _setup(self) -> None:
        _retry(lambda: self._conn.execute("PRAGMA journal_mode=WAL"))
        self._conn.execute("PRAGMA synchronous=NORMAL")
        _retry(
            lambda: self._conn.execute(
                f"CREATE TABLE IF NOT EXISTS {self.table} (key TEXT PRIMARY KEY, value BLOB NOT NULL)"
            )
        )

    def _recover(self, exc: BaseException) -> None:
        """The file is unreadable: move it aside (unless another process already did) and open a new one."""
        conn = getattr(self, "_conn", None)
        if conn is not None:
            try:
                conn.close()
            except sqlite3.Error:
                pass
        if getattr(self, "_inode", None) in (None, _inode(self.path)):  # still the file that failed
            move_aside(self.path, self.what, exc, "its entries are lost and will be computed again")
        self._open()

    def _guarded(self, fn: Callable):
        """``fn()``; a damaged file found meanwhile is moved aside (:meth:`_recover`) and ``fn`` runs again
        on the new one."""
        try:
            return fn()
        except sqlite3.DatabaseError as exc:
            if not is_corrupt(exc):
                raise
            self._recover(exc)
            return fn()

    def get_many(self, keys: Sequence[str]) -> dict:
        out = {}
        keys = list(dict.fromkeys(keys))
        for i in range(0, len(keys), 500):
            chunk = keys[i : i + 500]
            q = f"SELECT key, value FROM {self.table} WHERE key IN ({','.join('?' * len(chunk))})"
            out.update(self._guarded(lambda q=q, chunk=chunk: _retry(lambda: self._conn.execute(q, chunk).fetchall())))
        return out

    def put_many(self, items: Iterable[tuple]) -> None:
        items = list(items)
        if not items:
            return

        def _tx():
            self._conn.execute("BEGIN IMMEDIATE")
            try:
                self._conn.executemany(f"INSERT OR REPLACE INTO {self.table} (key, value) VALUES (?, ?)", items)
                self._conn.execute("COMMIT")
            except BaseException:
                # SQLite may have rolled back already (a full disk does): a second ROLLBACK would raise
                # "cannot rollback - no transaction is active" and hide the real error
                if self._conn.in_transaction:
                    try:
                        self._conn.execute("ROLLBACK")
                    except sqlite3.Error:
                        pass
                raise

        try:
            self._guarded(lambda: _retry(_tx))
        except sqlite3.OperationalError as exc:
            if "full" in str(exc).lower():  # "database or disk is full": the OSError the CLI reports
                raise OSError(errno.ENOSPC, f"{exc} (SQLite cache)", str(self.path)) from exc
            raise

    def __len__(self) -> int:
        return self._guarded(
            lambda: _retry(lambda: self._conn.execute(f"SELECT COUNT(*) FROM {self.table}").fetchone()[0])
        )

    def close(self) -> None:
        self._conn.close()


class PredictionCache(_SqliteKV):
    """Predictions keyed by :func:`request_key`; default file ``cache_dir()/llm_cache.sqlite``."""

    what = "LLM answer cache"

    def __init__(self, path: Path | None = None):
        super().__init__(Path(path) if path is not None else cache_dir() / "llm_cache.sqlite", "predictions")

    def get_predictions(self, keys: Sequence[str]) -> dict:
        """The cached predictions of ``keys``.

        Parameters
        ----------
        keys : sequence of str
            Request keys (:func:`request_key`).

        Returns
        -------
        dict
            ``key -> Prediction`` for the keys found; keys not in the cache are left out.
        """
        return {
            k: Prediction(**{**json.loads(v), "titles": tuple(json.loads(v)["titles"])})
            for k, v in self.get_many(keys).items()
        }

    def put_predictions(self, pairs: Iterable[tuple]) -> None:
        """Store predictions, each as its JSON (a key already stored is overwritten).

        Parameters
        ----------
        pairs : iterable of (str, Prediction)
            Request key (:func:`request_key`) and its prediction.

        Returns
        -------
        None
        """
        self.put_many((k, json.dumps(asdict(p), ensure_ascii=False)) for k, p in pairs)


class EmbeddingCache(_SqliteKV):
    """float32 vectors keyed by :func:`text_key`; default file ``cache_dir()/embeddings.sqlite``."""

    what = "embedding cache"

    def __init__(self, path: Path | None = None):
        super().__init__(Path(path) if path is not None else cache_dir() / "embeddings.sqlite", "embeddings")

    def get_vectors(self, keys: Sequence[str]) -> dict:
        """The cached vectors of ``keys``.

        Parameters
        ----------
        keys : sequence of str
            Text keys (:func:`text_key`).

        Returns
        -------
        dict
            ``key -> float32 vector`` for the keys found; keys not in the cache are left out.
        """
        return {k: np.frombuffer(v, dtype=np.float32) for k, v in self.get_many(keys).items()}

    def put_vectors(self, pairs: Iterable[tuple]) -> None:
        """Store vectors as float32 bytes (a key already stored is overwritten).

        Parameters
        ----------
        pairs : iterable of (str, array-like)
            Text key (:func:`text_key`) and its vector.

        Returns
        -------
        None
        """
        self.put_many((k, np.ascontiguousarray(v, dtype=np.float32).tobytes()) for k, v in pairs)


class CachedRecommender(Recommender):
    """Wrap any :class:`~facterlab.datatypes.Recommender`: answer cached requests from disk, predict misses.

    Misses are grouped by ``inner.plan_batches(requests)`` when it gives a plan (the LLM groups prompts
    of one length bucket), else (``None``, the protocol's default) in chunks of ``batch_size``; each batch's predictions
    are written to the cache right after it is generated.  Same fingerprint as ``inner``.
    """

    def __init__(self, inner, cache: PredictionCache | None = None, batch_size: int = 8, progress: bool = False):
        if not isinstance(inner, Recommender):
            raise TypeError(
                f"inner must implement facterlab.datatypes.Recommender (fingerprint, predict, plan_batches); "
                f"{type(inner).__name__} does not: subclass Recommender to inherit plan_batches' default"
            )
        self.inner = inner
        self.fingerprint = inner.fingerprint
        self.cache = cache if cache is not None else PredictionCache()
        self.batch_size = int(batch_size)
        self.progress = progress
        self.n_generated = 0  # requests sent to the inner model (for tests and logs)
        self.n_cached = 0  # requests answered from the cache

    def __getattr__(self, name):  # expose the inner recommender's helpers (tokenizer, lm, ...)
        if name == "inner":
            raise AttributeError(name)
        return getattr(self.inner, name)

    def plan_batches(self, requests: Sequence[PromptRequest]) -> list | None:
        """The inner recommender's plan: a cached wrapper batches its misses as the model would."""
        return self.inner.plan_batches(requests)

    def predict(self, requests: Sequence[PromptRequest]) -> list:
        """One prediction per request: cached ones from disk, the misses from the inner recommender
        (each distinct request once, in the batches of its plan), written to the cache batch by batch.

        Parameters
        ----------
        requests : sequence of PromptRequest
            The requests.

        Returns
        -------
        list of Prediction
            ``len(requests)`` predictions, in the order of ``requests``.
        """
        requests = list(requests)
        keys = [request_key(self.fingerprint, r) for r in requests]
        found = self.cache.get_predictions(keys)
        missing: dict = {}
        for i, k in enumerate(keys):
            if k not in found:
                missing.setdefault(k, i)  # duplicate requests are generated once
        todo = list(missing.values())
        n_hits = sum(1 for k in keys if k in found)
        self.n_cached += n_hits
        log.debug("%d requests: %d answered from the cache, %d to generate", len(keys), n_hits, len(todo))
        record_predictions(cached=n_hits)  # every open facterlab.progress.Progress counts them
        if todo:
            sub = [requests[i] for i in todo]
            plan = self.inner.plan_batches(sub)
            if plan is not None:
                batches = [[todo[j] for j in b] for b in plan]
            else:
                batches = [todo[i : i + self.batch_size] for i in range(0, len(todo), self.batch_size)]
            it = batches
            if self.progress:
                it = tqdm(batches, desc="generate", unit="batch")
            for b in it:
                t0 = time.perf_counter()
                preds = self.inner.predict([requests[i] for i in b])
                self.n_generated += len(b)
                record_predictions(new=len(b), seconds=time.perf_counter() - t0)
                pairs = [(keys[i], p) for i, p in zip(b, preds)]
                self.cache.put_predictions(pairs)
                found.update(pairs)
        return [found[k] for k in keys]
