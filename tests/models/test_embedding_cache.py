"""Encode each text once (issue 30): the shared embedding cache is exact and survives kill -9.

- exact batching (``exact=True``) sends the model only batches of texts of one token count, so no row
  is padded; with the bundled MiniLM each embedding is then bit-identical to the text encoded alone,
  whatever the other texts of the call, and a vector read back from the disk cache equals a fresh one;
- the cache key names the recipe (model files, L2, float32, batching): the two batchings never share
  vectors;
- a process killed with SIGKILL while encoding leaves a cache the next process reads: it encodes only
  what is missing and returns the same vectors as a fresh encoding.
"""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
import time

import numpy as np
import pytest
from test_models_encoder_speed import FakeST, contexts, vec

from facterlab.models.cache import EmbeddingCache
from facterlab.models.encoder import SentenceEncoder, plan_exact_batches, token_lengths
from facterlab.models.registry import ResolvedModel


def fake_encoder(cache=False, **kw) -> tuple:
    enc = SentenceEncoder(ResolvedModel("fake", "/nonexistent/fake", None, "fake@0", False), cache=cache, **kw)
    model = FakeST()
    enc._model, enc._dim = model, 8
    return enc, model


@pytest.mark.parametrize("budget", [None, 1, 300, 2048])
def test_plan_exact_batches_one_length_per_batch(budget):
    rng = np.random.default_rng(7)
    lengths = [int(x) for x in rng.integers(1, 60, size=400)]
    batches = plan_exact_batches(lengths, batch_size=16, max_tokens=budget)
    flat = [i for b in batches for i in b]
    assert sorted(flat) == list(range(len(lengths)))
    firsts = [lengths[b[0]] for b in batches]
    assert firsts == sorted(firsts, reverse=True), "longest first"
    for b in batches:
        assert len({lengths[i] for i in b}) == 1, "a batch mixes token counts: its rows would be padded"
        assert 1 <= len(b) <= 16
        assert budget is None or len(b) == 1 or len(b) * lengths[b[0]] <= budget
        assert b == sorted(b), "stable within a token count"
    with pytest.raises(ValueError, match="batch_size"):
        plan_exact_batches([3], batch_size=0, max_tokens=None)


def test_exact_encoder_never_pads_and_keeps_vectors():
    texts = contexts(200, seed=3)
    enc, model = fake_encoder(exact=True)
    out = enc.encode(texts)
    lens = dict(zip(texts, token_lengths(model, texts) or []))
    assert sum(len(c) for c, _ in model.calls) == len(texts)
    for chunk, _ in model.calls:
        assert len({lens[t] for t in chunk}) == 1
    np.testing.assert_array_equal(out, np.stack([vec(t) / np.linalg.norm(vec(t)) for t in texts]))


def test_cache_key_names_the_recipe(tmp_path):
    store = EmbeddingCache(tmp_path / "e.sqlite")
    a, _ = fake_encoder(cache=store)
    b, model_b = fake_encoder(cache=store, exact=True)
    assert a.cache_fingerprint != b.cache_fingerprint
    assert a.cache_fingerprint == a.fingerprint == "fake@0", "the default's key changed: every cache goes cold"
    assert b.fingerprint == "fake@0+exact", "exact batching changes the vectors: its runs need their own id"
    a.encode(["one two three"])
    b.encode(["one two three"])
    assert len(model_b.calls) == 1, "the exact encoder was served a vector of the other batching"
    c, model_c = fake_encoder(cache=store, exact=True)
    c.encode(["one two three"])
    assert model_c.calls == [] and c.n_model_calls == 0


CHILD = r"""
import sys, time
import numpy as np
sys.path.insert(0, sys.argv[2])
from test_embedding_cache import fake_encoder
from test_models_encoder_speed import contexts
from facterlab.models.cache import EmbeddingCache

enc, model = fake_encoder(cache=EmbeddingCache(sys.argv[1]), exact=True, batch_size=8)
slow = model.encode
def encode(chunk, batch_size, **kw):
    time.sleep(0.02)
    return slow(chunk, batch_size, **kw)
model.encode = encode
enc.encode(contexts(int(sys.argv[3])))
"""


def _rows(path) -> int:
    try:
        con = sqlite3.connect(str(path))
        try:
            return con.execute("SELECT COUNT(*) FROM embeddings").fetchone()[0]
        finally:
            con.close()
    except sqlite3.Error:
        return 0


def test_kill_9_while_encoding_then_resume(tmp_path):
    store = tmp_path / "emb.sqlite"
    n = 1500
    here = os.path.dirname(__file__)
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([here, os.environ.get("PYTHONPATH", "")]))
    child = subprocess.Popen([sys.executable, "-c", CHILD, str(store), here, str(n)], env=env)
    deadline = time.monotonic() + 120
    try:
        while _rows(store) < 256 and child.poll() is None and time.monotonic() < deadline:
            time.sleep(0.05)
        assert child.poll() is None, "the child finished before it could be killed: make it slower"
        os.kill(child.pid, signal.SIGKILL)
    finally:
        child.wait()
    assert child.returncode == -signal.SIGKILL
    kept = _rows(store)
    assert 256 <= kept < n
    texts = contexts(n)
    enc, model = fake_encoder(cache=EmbeddingCache(store), exact=True, batch_size=8)
    out = enc.encode(texts)
    assert enc.n_model_calls == n - kept, "the resumed run re-encoded cached texts or skipped missing ones"
    fresh, _ = fake_encoder(exact=True, batch_size=8)
    np.testing.assert_array_equal(out, fresh.encode(texts))
    assert _rows(store) == n


@pytest.mark.llm
def test_minilm_exact_batching_is_bit_identical_to_alone_and_cached(tmp_path):
    pytest.importorskip("sentence_transformers")
    from facterlab.models.encoder import load_encoder

    titles = [f"Film number {i} ({1950 + i % 50})" for i in range(200)]
    texts = [
        "History (most recent last):\n" + "\n".join(f"- {t}" for t in titles[i : i + k])
        for i, k in enumerate([8, 3, 8, 5, 1, 8, 5, 9, 2, 8, 8, 4, 3, 5, 9, 9])
    ] + ["Toy Story (1995)", "GoldenEye (1995)", "Heat (1995)", "Sabrina (1995)"]
    store = EmbeddingCache(tmp_path / "emb.sqlite")
    enc = load_encoder(cache=store, exact=True)
    batched = enc.encode(texts)
    model = enc._model
    assert enc.n_batches < len(texts), "no two texts shared a batch: the check below would prove nothing"
    alone = load_encoder(cache=False, exact=True, batch_size=1)
    alone._model, alone._dim = model, enc.dim
    one_by_one = np.stack([alone.encode([t])[0] for t in texts])
    np.testing.assert_array_equal(batched, one_by_one)
    # other companions: the texts in reverse order with unrelated ones between them
    other = load_encoder(cache=False, exact=True)
    other._model, other._dim = model, enc.dim
    mixed = other.encode([f"Unrelated title {i} ({1990 + i})" for i in range(30)] + texts[::-1])
    np.testing.assert_array_equal(mixed[30:][::-1], batched)
    # read back from the disk cache in a new encoder: the same bits, no model
    fresh = load_encoder(cache=EmbeddingCache(tmp_path / "emb.sqlite"), exact=True)
    np.testing.assert_array_equal(fresh.encode(texts), batched)
    assert fresh._model is None and fresh.n_model_calls == 0
