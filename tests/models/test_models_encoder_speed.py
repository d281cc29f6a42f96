"""The encoder's batching (issue 21, "Speed"): what made a cold MiniLM encoding cost more CPU than its arithmetic.

The cause measured in ``benchmarks/bench_simulated.py --encoder-ab``: history contexts (about 87 tokens)
went to the model in batches of 64 texts, padded to the longest of the batch, so that every
activation (64 x ~100 tokens x 1536 floats, about 40 MB) was above glibc's largest mmap threshold
and was mapped and page-faulted afresh for every tensor.  The fix sorts the texts by token count and
bounds every forward batch by padded tokens (``MAX_BATCH_TOKENS``).  These tests check the plan the
model receives (no timing): they fail if the encoder goes back to count-only batches, to one text
per call, or to unsorted batches; and, with the bundled MiniLM, that the batching leaves the
embeddings unchanged up to float32 rounding.
"""

from __future__ import annotations

import hashlib
import inspect

import numpy as np
import pytest

from facterlab.models.encoder import MAX_BATCH_TOKENS, SentenceEncoder, load_encoder, plan_batches, token_lengths
from facterlab.models.registry import ResolvedModel


class FakeST:
    """Stands in for a SentenceTransformer: a whitespace tokenizer and deterministic vectors; records each call."""

    max_seq_length = 256

    def __init__(self):
        self.calls: list = []

    def tokenizer(self, texts, add_special_tokens=True, truncation=False, max_length=None):
        ids = []
        for t in texts:
            n = len(t.split()) + (2 if add_special_tokens else 0)
            ids.append(list(range(min(n, max_length) if truncation and max_length else n)))
        return {"input_ids": ids}

    def encode(self, chunk, batch_size, **kw):
        self.calls.append((list(chunk), batch_size))
        return np.stack([vec(t) for t in chunk])


def vec(text: str) -> np.ndarray:
    h = hashlib.sha256(text.encode()).digest()
    return np.frombuffer(h, dtype=np.uint8)[:8].astype(np.float32) + 1.0


def fake_encoder(**kw) -> tuple:
    enc = SentenceEncoder(ResolvedModel("fake", "/nonexistent/fake", None, "fake@0", False), cache=False, **kw)
    model = FakeST()
    enc._model, enc._dim = model, 8
    return enc, model


def contexts(n: int, seed: int = 0) -> list:
    """History-like texts of 60..140 whitespace tokens, in random length order."""
    rng = np.random.default_rng(seed)
    return [" ".join(f"w{i}_{j}" for j in range(int(k))) for i, k in enumerate(rng.integers(60, 140, size=n))]


def test_defaults_bound_batches_by_tokens():
    for fn in (load_encoder, SentenceEncoder.__init__):
        params = inspect.signature(fn).parameters
        assert params["max_batch_tokens"].default == MAX_BATCH_TOKENS is not None
        assert params["batch_size"].default > 1
    # a batch of the default budget keeps the widest activation (tokens x 1536 float32) under glibc's
    # largest mmap threshold (32 MiB), the memory churn the change removed
    assert MAX_BATCH_TOKENS * 1536 * 4 < 32 * 2**20


def test_model_gets_length_sorted_token_bounded_batches():
    texts = contexts(300)
    enc, model = fake_encoder()
    out = enc.encode(texts + texts[:5])  # repeats are encoded once
    lens = dict(zip(texts, token_lengths(model, texts) or []))
    assert sum(len(c) for c, _ in model.calls) == len(texts) == enc.n_model_calls
    assert enc.n_batches == len(model.calls)
    seen = [lens[t] for c, _ in model.calls for t in c]
    assert seen == sorted(seen, reverse=True), "batches must go longest first, sorted by token count"
    padded = 0
    for chunk, bs in model.calls:
        width = max(lens[t] for t in chunk)
        assert len(chunk) <= bs == enc.batch_size
        assert len(chunk) * width <= MAX_BATCH_TOKENS, "a forward batch above the padded-token budget"
        padded += len(chunk) * width
    assert len(model.calls) < len(texts) / 10, "texts went to the model (nearly) one at a time"
    assert padded <= 1.05 * sum(lens.values()), "padding waste: batches are not of similar lengths"
    np.testing.assert_array_equal(out[:300], np.stack([vec(t) / np.linalg.norm(vec(t)) for t in texts]))
    np.testing.assert_array_equal(out[300:], out[:5])


def test_count_only_batching_would_fail_the_budget():
    """The former batching (sentence-transformers' batches of 64) breaks the bound the test above checks."""
    texts = contexts(300)
    enc, model = fake_encoder(max_batch_tokens=None)
    enc.encode(texts)
    lens = dict(zip(texts, token_lengths(model, texts) or []))
    assert max(len(c) for c, _ in model.calls) > 64  # chunks that sentence-transformers cuts itself
    assert any(min(len(c), 64) * max(lens[t] for t in c) > MAX_BATCH_TOKENS for c, _ in model.calls)


@pytest.mark.parametrize("budget", [1, 50, 2048])
def test_plan_batches_partitions_and_bounds(budget):
    rng = np.random.default_rng(budget)
    lengths = [int(x) for x in rng.integers(1, 200, size=500)]
    batches = plan_batches(lengths, batch_size=64, max_tokens=budget)
    flat = [i for b in batches for i in b]
    assert sorted(flat) == list(range(len(lengths)))
    for b in batches:
        assert 1 <= len(b) <= 64
        assert len(b) == 1 or len(b) * lengths[b[0]] <= budget
        assert lengths[b[0]] == max(lengths[i] for i in b)
    with pytest.raises(ValueError, match="batch_size"):
        plan_batches([1], batch_size=0, max_tokens=None)
    with pytest.raises(ValueError, match="max_batch_tokens"):
        fake_encoder(max_batch_tokens=0)


@pytest.mark.llm
def test_minilm_batching_changes_embeddings_only_by_rounding():
    pytest.importorskip("sentence_transformers")
    texts = [
        "History (most recent last):\n" + "\n".join(f"- Film number {i * 7 + j} ({1950 + j})" for j in range(k))
        for i, k in enumerate([10, 3, 10, 7, 1, 10, 5, 9, 2, 10, 8, 4])
    ] + ["Toy Story (1995)", "GoldenEye (1995)", "Heat (1995) :: Action|Crime|Thriller"]
    enc = load_encoder(cache=False)
    batched = enc.encode(texts)
    model = enc._model
    # the lengths the plan sorts by are the model's own (not a character count)
    assert token_lengths(model, texts) == model.preprocess(texts)["attention_mask"].sum(dim=1).tolist()
    assert enc.n_batches < len(texts)
    alone = load_encoder(cache=False, batch_size=1)
    alone._model, alone._dim = model, enc.dim  # the same weights, one text per forward pass
    one_by_one = np.stack([alone.encode([t])[0] for t in texts])
    assert float(np.max(np.abs(batched - one_by_one))) < 1e-5
