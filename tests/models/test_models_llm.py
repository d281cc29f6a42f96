"""Tests with the real bundled models (SmolLM2-135M GGUF, all-MiniLM-L6-v2); marked ``llm``.

Batch independence (what is exactly equal): for SmolLM2 on CPU float32, the generated token ids of a
request are identical alone (batch of 1, padded to ``min_decode_rows``) and inside batches of 3 and 8
in shuffled orders, greedy and sampled, when prompts are left-padded to their own bucket length and
only same-bucket prompts share a batch (see ``facterlab.models.llm``).
"""

from __future__ import annotations

import math
import random

import numpy as np
import pytest

pytestmark = pytest.mark.llm

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

TITLES = [
    "Toy Story (1995)",
    "Heat (1995)",
    "Fargo (1996)",
    "Casablanca (1942)",
    "Alien (1979)",
    "Vertigo (1958)",
    "Se7en (1995)",
    "Babe (1995)",
    "Clerks (1994)",
    "Ed Wood (1994)",
    "Jumanji (1995)",
    "GoldenEye (1995)",
    "Psycho (1960)",
    "Rocky (1976)",
]


@pytest.fixture(scope="module", autouse=True)
def _one_thread():
    """One intra-op thread: OpenMP spinning on a shared 2-core box makes 2 threads far slower."""
    old = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(old)


@pytest.fixture(scope="module")
def lm():
    from facterlab.models.llm import load_lm

    return load_lm("smollm2-135m", device="cpu")


def _messages(history, candidates=None):
    user = "User demographics: gender F, age 25-34.\nWatch history (most recent last):\n"
    user += "\n".join(f"{i + 1}. {t}" for i, t in enumerate(history))
    if candidates:
        user += "\nCandidates:\n" + "\n".join(f"{i + 1}. {t}" for i, t in enumerate(candidates))
        user += "\nRank the candidates. Return ONLY a JSON array of titles from the list."
    else:
        user += "\nRecommend the next 10 movies as ONLY a JSON array of titles."
    return [
        {"role": "system", "content": "You are a helpful movie recommendation assistant."},
        {"role": "user", "content": user},
    ]


def _prompts(lm, n=8, seed=0):
    rng = random.Random(seed)
    return [lm.encode_messages(_messages(rng.sample(TITLES, rng.randint(2, 12)))) for _ in range(n)]


@pytest.mark.parametrize("temperature", [0.0, 0.7])
def test_batch_independence(lm, temperature):
    from facterlab.models.llm import DecodingParams, bucket_length

    n = 5
    prompts = _prompts(lm, n, seed=1)
    assert len({bucket_length(len(p), lm.bucket) for p in prompts}) >= 2  # mixed buckets exercised
    params = DecodingParams(temperature=temperature, top_p=0.95, max_new_tokens=12, repetition_penalty=1.2)
    seeds = [11 * i + 1 for i in range(n)]
    alone = [lm.generate([p], [s], params, batch_size=1)[0] for p, s in zip(prompts, seeds)]
    assert len(set(alone)) > 1
    for bs, shuffle_seed in ((3, 1), (8, 2)):
        order = list(range(n))
        random.Random(shuffle_seed).shuffle(order)
        out = lm.generate([prompts[i] for i in order], [seeds[i] for i in order], params, batch_size=bs)
        got = [None] * n
        for j, i in enumerate(order):
            got[i] = out[j]
        assert got == alone, f"batch size {bs}"


def test_sampling_depends_on_seed_not_batch(lm):
    from facterlab.models.llm import DecodingParams

    p = _prompts(lm, 1, seed=3)[0]
    params = DecodingParams(temperature=1.0, top_p=1.0, max_new_tokens=16, repetition_penalty=1.0)
    a = lm.generate([p, p, p], [1, 2, 1], params, batch_size=3)
    assert a[0] == a[2]
    assert a[0] != a[1]
    assert lm.pad_full_batches  # default: a lone request is padded with dummy rows to a full batch
    assert lm.generate([p], [2], params, batch_size=3) == [a[1]]
    old = lm.pad_full_batches
    try:  # the faster option: a lone request runs in min_decode_rows rows
        lm.pad_full_batches = False
        assert lm.generate([p], [2], params, batch_size=3) == [a[1]]
    finally:
        lm.pad_full_batches = old


def test_fixed_row_count_gives_bitwise_equal_logits(lm):
    """With the same row count, a row's logits do not depend on its position or its companions."""
    ps = [
        lm.encode_messages(
            [{"role": "user", "content": "History:\n" + "\n".join(f"{j}. Movie {7 * j + i}" for j in range(n))}]
        )
        for i, n in enumerate([5, 6, 7, 6])
    ]

    def last_logits(rows, L=96):
        ids = torch.full((len(rows), L), lm.pad_id)
        m = torch.zeros((len(rows), L), dtype=torch.long)
        for i, p in enumerate(rows):
            ids[i, L - len(p) :] = torch.tensor(p)
            m[i, L - len(p) :] = 1
        with torch.inference_mode():
            return lm.model(
                input_ids=ids, attention_mask=m, position_ids=(m.cumsum(-1) - 1).clamp(min=0), logits_to_keep=1
            ).logits[:, -1]

    a = last_logits(ps)
    b = last_logits(ps[1:] + ps[:1])
    c = last_logits([ps[0]] + [ps[2]] * 3)
    assert torch.equal(a[0], b[3]) and torch.equal(a[0], c[0])


def test_likelihood_shared_cache_equals_full_sequence(lm):
    prompt = lm.encode_messages(_messages(TITLES[:5], TITLES[5:]))
    cands = [lm.candidate_ids(t) for t in TITLES[5:]]
    shared = lm.score_candidates(prompt, cands, chunk=4)
    for (s, n), c in zip(shared, cands):
        assert n == len(c)
        assert s < 0
        assert math.isclose(s, lm.score_full(prompt, c), abs_tol=1e-4)


def test_chat_template_system_role_fallback(lm, monkeypatch):
    msgs = [{"role": "system", "content": "SYS-TEXT"}, {"role": "user", "content": "USER-TEXT"}]
    tok = lm.tokenizer
    original = tok.apply_chat_template

    def strict(messages, *a, **kw):
        if any(m["role"] == "system" for m in messages):
            raise ValueError("Conversation roles must alternate user/assistant/user/assistant/...")
        return original(messages, *a, **kw)

    monkeypatch.setattr(tok, "apply_chat_template", strict)
    text = tok.decode(lm.encode_messages(msgs))
    assert "SYS-TEXT\n\nUSER-TEXT" in text
    assert text.rstrip().endswith("assistant")


def test_open_and_rank_generate_recommenders(lm, tmp_path):
    from facterlab.config import ModelConfig
    from facterlab.datatypes import PARSE_EMPTY, PARSE_FALLBACK, PARSE_OK, PromptRequest
    from facterlab.models.cache import CachedRecommender, PredictionCache
    from facterlab.models.rankers import LLMRecommender

    cfg = ModelConfig(max_new_tokens=40, temperature=0.0, batch_size=4)
    open_rec = CachedRecommender(LLMRecommender(lm, cfg, "open"), PredictionCache(tmp_path / "c.sqlite"))
    reqs = [PromptRequest.from_messages(_messages(TITLES[i : i + 6]), seed=i, k=10) for i in range(3)]
    preds = open_rec.predict(reqs)
    for p in preds:
        assert p.parse_status in (PARSE_OK, PARSE_FALLBACK, PARSE_EMPTY) and len(p.titles) <= 10
        assert p.raw and p.n_truncated_history == 0
    assert open_rec.n_generated == 3 and open_rec.predict(reqs) == preds and open_rec.n_generated == 3

    cands = tuple(TITLES)
    rank = LLMRecommender(lm, cfg, "rank")
    r = PromptRequest.from_messages(_messages(TITLES[:4], cands), seed=0, candidates=cands)
    (pred,) = rank.predict([r])
    assert sorted(pred.titles) == sorted(cands)
    assert 0 <= pred.n_model_positions <= len(cands)


def test_likelihood_ranker_orders_by_summed_logprob(lm):
    import json

    from facterlab.config import ModelConfig
    from facterlab.datatypes import PromptRequest
    from facterlab.models.rankers import LLMRecommender

    cands = tuple(TITLES[4:12])
    rec = LLMRecommender(lm, ModelConfig(ranker="likelihood"), "rank")
    r = PromptRequest.from_messages(_messages(TITLES[:4], cands), candidates=cands)
    (pred,) = rec.predict([r])
    sums = json.loads(pred.raw)["sum_logprob"]
    expected = [cands[i] for i in np.argsort(-np.array(sums), kind="stable")]
    assert list(pred.titles) == expected and pred.n_model_positions == len(cands)
    prompt = lm.encode_messages(r.message_dicts)
    best = cands.index(pred.titles[0])
    assert math.isclose(sums[best], lm.score_full(prompt, lm.candidate_ids(cands[best])), abs_tol=1e-4)


def test_prompt_truncation_drops_oldest_history(lm):
    from facterlab.config import ModelConfig
    from facterlab.datatypes import PromptRequest
    from facterlab.models.rankers import PROMPT_TOO_LONG_MSG, LLMRecommender

    hist = TITLES[:10]
    full = len(lm.encode_messages(_messages(hist)))
    short = len(lm.encode_messages(_messages(hist[3:])))
    cfg = ModelConfig(max_new_tokens=4, temperature=0.0, max_prompt_tokens=short)
    rec = LLMRecommender(lm, cfg, "open")
    req = PromptRequest.from_messages(_messages(hist), meta=(("history_titles", tuple(hist)),))
    ids, n_drop = rec.fit_prompt(req)
    assert full > short and n_drop == 3 and len(ids) == short
    (pred,) = rec.predict([req])
    assert pred.n_truncated_history == 3
    # without meta: history lines are found in the text
    ids2, n2 = rec.fit_prompt(PromptRequest.from_messages(_messages(hist)))
    assert (ids2, n2) == (ids, 3)
    tiny = LLMRecommender(lm, ModelConfig(max_new_tokens=4, max_prompt_tokens=10), "open")
    with pytest.raises(ValueError, match="even after dropping all 10 history titles"):
        tiny.fit_prompt(req)
    assert "{limit}" in PROMPT_TOO_LONG_MSG


def test_encoder_normalised_and_cached(tmp_path):
    from facterlab.models.cache import EmbeddingCache
    from facterlab.models.encoder import load_encoder

    store = tmp_path / "emb.sqlite"
    enc = load_encoder(cache=EmbeddingCache(store), batch_size=4)
    texts = ["Toy Story (1995) :: Animation|Children's", "Heat (1995) :: Action|Crime", "Heat (1995) :: Action|Crime"]
    e = enc.encode(texts)
    assert e.dtype == np.float32 and e.shape == (3, 384) and enc.dim == 384
    assert np.allclose(np.linalg.norm(e, axis=1), 1.0, atol=1e-5)
    assert np.array_equal(e[1], e[2]) and enc.n_model_calls == 2
    # cross-check against sentence-transformers' own normalised output
    ref = enc._load().encode(texts[:2], normalize_embeddings=True)
    assert np.allclose(e[:2], ref, atol=1e-5)
    assert float(e[0] @ e[1]) < 0.99
    fresh = load_encoder(cache=EmbeddingCache(store))  # a new process-equivalent: disk hits only
    assert np.array_equal(fresh.encode(texts), e) and fresh.n_model_calls == 0 and fresh._model is None
    assert enc.encode([]).shape == (0, 384)
    with pytest.raises(TypeError, match="list of strings"):
        enc.encode("one string")


def test_expected_fingerprint_matches_the_loaded_recommender(lm):
    from facterlab.config import ModelConfig
    from facterlab.models.rankers import LLMRecommender, expected_fingerprint

    for protocol, ranker in (("open", "generate"), ("rank", "likelihood"), ("rank", "generate")):
        mcfg = ModelConfig(ranker=ranker, max_new_tokens=17, device="cpu")
        rec = LLMRecommender(lm, mcfg, protocol)
        assert expected_fingerprint(mcfg, protocol) == rec.fingerprint
        if ranker == "likelihood":  # one prompt per call: nobody should batch (or predict ahead) for it
            assert rec.plan_batches([None] * 3) == [[0], [1], [2]]
    assert expected_fingerprint(ModelConfig(max_new_tokens=17, device="cpu"), "open") != expected_fingerprint(
        ModelConfig(device="cpu"), "open"
    )


def test_weights_are_loaded_once_per_model_whatever_the_wrapper(lm):
    """One copy of a model's weights per process (issue 11 item 6): other bucket / padding arguments
    build another wrapper around the same tokenizer and model."""
    from facterlab.models.llm import load_lm

    other = load_lm("smollm2-135m", device="cpu", bucket=16, pad_full_batches=False)
    assert other is not lm and other.model is lm.model and other.tokenizer is lm.tokenizer
    assert load_lm("SMOLLM2-135M", device="cpu") is lm


def test_hub_model_weights_load_once_across_download(monkeypatch, tmp_path):
    """A hub model resolved before its download (revision asked of the hub) and after it (revision read
    from the cache) has one fingerprint and one weights entry."""
    import transformers

    from facterlab.models import llm, registry

    calls = []

    class FakeAuto:
        @staticmethod
        def from_pretrained(source, **kw):
            calls.append(source)
            return torch.nn.Linear(2, 2)

    monkeypatch.setattr(transformers, "AutoModelForCausalLM", FakeAuto)
    monkeypatch.setattr(transformers, "AutoTokenizer", FakeAuto)
    monkeypatch.setenv("HF_HOME", str(tmp_path))
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    monkeypatch.delenv("TRANSFORMERS_OFFLINE", raising=False)
    monkeypatch.setattr(registry, "_network_ok", lambda *a, **k: True)
    rev = "0123456789abcdef0123456789abcdef01234567"
    monkeypatch.setattr(registry, "_remote_revision", lambda repo: rev)
    before = registry.resolve_llm("acme/tiny-chat")
    llm._load_weights(before, "cpu", "float32", False)
    snap = tmp_path / "hub" / "models--acme--tiny-chat" / "snapshots" / rev
    snap.mkdir(parents=True)
    (tmp_path / "hub" / "models--acme--tiny-chat" / "refs").mkdir()
    (tmp_path / "hub" / "models--acme--tiny-chat" / "refs" / "main").write_text(rev)
    after = registry.resolve_llm("acme/tiny-chat")
    assert before.fingerprint == after.fingerprint == "acme/tiny-chat@0123456789ab"
    assert llm._load_weights(after, "cpu", "float32", False)[1] is llm._load_weights(before, "cpu", "float32", False)[1]
    assert calls == ["acme/tiny-chat", "acme/tiny-chat"]  # one tokenizer, one model
    for k in [k for k in llm._WEIGHTS if k[0] == "hub:acme/tiny-chat"]:
        del llm._WEIGHTS[k]


@pytest.fixture(scope="module")
def lm_onednn(lm):
    from facterlab.models.llm import load_lm

    return load_lm("smollm2-135m", device="cpu", linear_kernel="onednn")


@pytest.mark.parametrize("temperature", [0.0, 0.7])
def test_onednn_rows_do_not_depend_on_their_batch(lm_onednn, temperature):
    """linear_kernel="onednn": no dummy rows, finished rows leave the batch, and a request's tokens are
    still those it gets alone (batches of 1, 3 and 8, shuffled; mixed buckets)."""
    from facterlab.models.llm import DecodingParams, bucket_length

    lo = lm_onednn
    assert lo.row_invariant and lo.kernel == "onednn"
    n = 5
    prompts = _prompts(lo, n, seed=1)
    assert len({bucket_length(len(p), lo.bucket) for p in prompts}) >= 2
    params = DecodingParams(temperature=temperature, top_p=0.95, max_new_tokens=12, repetition_penalty=1.2)
    seeds = [11 * i + 1 for i in range(n)]
    alone = [lo.generate([p], [s], params, batch_size=1)[0] for p, s in zip(prompts, seeds)]
    assert len(set(alone)) > 1
    for bs, shuffle_seed in ((3, 1), (8, 2)):
        order = list(range(n))
        random.Random(shuffle_seed).shuffle(order)
        out = lo.generate([prompts[i] for i in order], [seeds[i] for i in order], params, batch_size=bs)
        assert [out[order.index(i)] for i in range(n)] == alone, f"batch size {bs}"


def _answer_prompts(m, n=4):
    """Prompts asking for 5 titles as a JSON array (SmolLM2 often writes one, then stops there)."""
    return [
        m.encode_messages(
            [
                {"role": "system", "content": "You are a helpful movie recommendation assistant."},
                {
                    "role": "user",
                    "content": "Watch history: "
                    + "; ".join(TITLES[(i + j) % len(TITLES)] for j in range(5))
                    + ". Recommend the next 5 movies as a JSON array of titles.",
                },
            ]
        )
        for i in range(n)
    ]


def test_onednn_rows_leaving_the_batch_do_not_change_the_others(lm_onednn):
    """With stop_k, rows of one batch end at different steps and leave it (the batch shrinks mid-decode);
    every row's text is still the one it gets alone."""
    from facterlab.models.llm import DecodingParams, bucket_length

    lo = lm_onednn
    prompts = _answer_prompts(lo)
    params = DecodingParams(temperature=0.0, max_new_tokens=60, repetition_penalty=1.2)
    together = lo.generate(prompts, [0] * 4, params, batch_size=4, stop_k=[5] * 4)
    alone = [lo.generate([p], [0], params, batch_size=1, stop_k=[5])[0] for p in prompts]
    assert together == alone
    by_bucket: dict = {}
    for p, t in zip(prompts, together):
        by_bucket.setdefault(bucket_length(len(p), lo.bucket), set()).add(len(lo.candidate_ids(t)))
    assert any(len(v) > 1 for v in by_bucket.values())  # some batch shrank before its last row ended


def test_stop_at_answer_parses_like_full_length(lm_onednn, lm):
    """stop_k: each row's text is a prefix of its full-length text with the same parse (titles and
    status), greedy and sampled, with both kernels; at least one row stops early."""
    from facterlab.models.llm import DecodingParams
    from facterlab.models.parsing import parse_titles

    n_short = 0
    for m, temperature in ((lm_onednn, 0.0), (lm_onednn, 0.7), (lm, 0.0)):
        prompts = _answer_prompts(m)
        params = DecodingParams(temperature=temperature, max_new_tokens=60, repetition_penalty=1.2)
        full = m.generate(prompts, [1, 2, 3, 4], params, batch_size=4)
        stop = m.generate(prompts, [1, 2, 3, 4], params, batch_size=4, stop_k=[5] * 4)
        for f, s in zip(full, stop):
            assert f.startswith(s) and parse_titles(s, 5) == parse_titles(f, 5)
            n_short += len(s) < len(f)
    assert n_short > 0


def test_answer_complete_is_final_under_any_continuation():
    """answer_complete(prefix) implies parse(prefix + anything) == parse(prefix), on every prefix of
    tricky texts and several continuations (a nested array, a closing of an earlier bracket, prose)."""
    from facterlab.models.parsing import answer_complete, parse_titles

    texts = [
        'Sure! ["Heat (1995)", "Fargo (1996)", "Alien (1979)"] Enjoy ["Babe"]',
        '["A", ["B"], "C"] and more',
        '[[], ["Heat"]] ["X"]',
        '{"GoldenEye": [7], "x": ["Heat"]}',
        "[\u201cHeat\u201d, \u201cFargo\u201d]",
        '```json\n[\n  "Toy Story",\n  "Heat"\n]\n```',
        "1. Heat\n2. Fargo\n[",
        '[], ["Heat"]',
        '["", " ", "Heat"]',
    ]
    tails = ["", "]", '"]', ', "Zz"]', '] ["Other"]', "\n1. Other\n", "[[[[", '"}]']
    n_complete = 0
    for text in texts:
        for cut in range(len(text) + 1):
            prefix = text[:cut]
            if not answer_complete(prefix, 3):
                continue
            n_complete += 1
            for tail in [text[cut:], *tails]:
                assert parse_titles(prefix + tail, 3) == parse_titles(prefix, 3), (prefix, tail)
    assert n_complete > 10
    assert not answer_complete("", 3) and not answer_complete('["Heat"', 3) and not answer_complete("[]", 3)


def test_kernel_and_stop_switches_have_their_own_fingerprints(lm, lm_onednn):
    from facterlab.config import ModelConfig, config_hash, preset
    from facterlab.models.rankers import LLMRecommender, expected_fingerprint

    base = ModelConfig(device="cpu")
    fps = set()
    for mcfg, m in (
        (base, lm),
        (ModelConfig(device="cpu", linear_kernel="onednn"), lm_onednn),
        (ModelConfig(device="cpu", stop_at_answer=True), lm),
        (ModelConfig(device="cpu", linear_kernel="onednn", stop_at_answer=True), lm_onednn),
    ):
        rec = LLMRecommender(m, mcfg, "open")
        assert expected_fingerprint(mcfg, "open") == rec.fingerprint
        fps.add(rec.fingerprint)
    assert len(fps) == 4
    assert lm.fingerprint == lm_onednn.fingerprint.removesuffix("|onednn") != lm_onednn.fingerprint
    # at their defaults the switches are out of the run id (saved runs keep theirs)
    assert config_hash(preset("repro", model__linear_kernel="blas", model__stop_at_answer=False)) == config_hash(
        preset("repro")
    )
    assert config_hash(preset("repro", model__stop_at_answer=True)) != config_hash(preset("repro"))
    with pytest.raises(ValueError, match="linear_kernel"):
        ModelConfig(linear_kernel="mkl")
    with pytest.raises(ValueError, match="stop_at_answer"):
        ModelConfig(stop_at_answer="yes")


def test_converted_gguf_folder_loads_the_same_model(tmp_path, monkeypatch):
    """facterlab.models.gguf_cache: the first load of the GGUF saves a converted folder; a load from that
    folder gives bit-identical parameters, the same end and pad tokens, context window and chat-template
    token ids, and the same greedy tokens; the fingerprint is the GGUF's."""
    from facterlab.models import llm
    from facterlab.models.gguf_cache import converted_dir, is_complete
    from facterlab.models.registry import resolve_llm

    monkeypatch.setenv("FACTERLAB_GGUF_CACHE", "1")
    monkeypatch.setenv("FACTERLAB_CACHE", str(tmp_path))
    resolved = resolve_llm("smollm2-135m")
    folder = converted_dir(resolved.name, resolved.fingerprint, "float32")
    assert not is_complete(folder)
    monkeypatch.setattr(llm, "_WEIGHTS", {})  # a fresh load, not the module fixture's weights
    from_gguf = llm.CausalLM(resolved, "cpu", "float32")
    assert is_complete(folder) and (folder / "model.safetensors").is_file() and (folder / "tokenizer.json").is_file()
    monkeypatch.setattr(llm, "_WEIGHTS", {})
    from_folder = llm.CausalLM(resolved, "cpu", "float32")
    assert from_folder.model is not from_gguf.model
    a, b = dict(from_gguf.model.named_parameters()), dict(from_folder.model.named_parameters())
    assert a.keys() == b.keys()
    assert all(torch.equal(a[k], b[k]) and a[k].dtype == b[k].dtype for k in a)
    for attr in ("eos_ids", "pad_id", "context_window", "fingerprint"):
        assert getattr(from_gguf, attr) == getattr(from_folder, attr), attr
    prompts = [from_gguf.encode_messages(_messages(TITLES[i : i + 4])) for i in range(0, 12, 4)]
    assert prompts == [from_folder.encode_messages(_messages(TITLES[i : i + 4])) for i in range(0, 12, 4)]
    assert from_gguf.tokenizer.decode(prompts[0]) == from_folder.tokenizer.decode(prompts[0])
    params = llm.DecodingParams(temperature=0.0, max_new_tokens=12, repetition_penalty=1.0)
    for p in prompts:  # one prompt per call: a bucket of its own
        assert from_gguf.generate_ids([p], [0], params) == from_folder.generate_ids([p], [0], params)


def test_converted_gguf_folder_is_off_with_the_switch(tmp_path, monkeypatch):
    """``FACTERLAB_GGUF_CACHE=0``: no folder is named, so nothing is written or read."""
    from facterlab.models.gguf_cache import converted_dir, is_complete

    monkeypatch.setenv("FACTERLAB_GGUF_CACHE", "0")
    assert converted_dir("smollm2-135m", "x", "float32", cache=tmp_path) is None
    assert not is_complete(None)


def test_converted_gguf_folder_that_cannot_be_written_is_skipped(tmp_path, caplog):
    """A save that fails (here the tokenizer's) leaves no folder, no temporary folder, and says why."""
    from facterlab.models.gguf_cache import is_complete, save_converted

    class Broken:
        def save_pretrained(self, folder):
            raise OSError("No space left on device")

    folder = tmp_path / "converted-gguf" / "m-0"
    assert save_converted(folder, Broken(), object()) is False
    assert not is_complete(folder) and not folder.exists()
    assert list(folder.parent.iterdir()) == []
    assert "No space left on device" in caplog.text


def test_a_gguf_load_parses_the_file_once_and_loads_the_same_model(monkeypatch):
    """facterlab.models.gguf_cache.one_parse: the config, tokenizer and weights of one GGUF load share one
    ``gguf.GGUFReader`` (transformers made three), and the model is the one three parses give, bit for bit."""
    import contextlib

    import gguf

    from facterlab.models import llm
    from facterlab.models.registry import resolve_llm

    monkeypatch.setenv("FACTERLAB_GGUF_CACHE", "0")  # no converted folder: both loads read the GGUF
    resolved = resolve_llm("smollm2-135m")
    made = []
    original = gguf.GGUFReader

    def counting(*args, **kwargs):
        made.append(args[0])
        return original(*args, **kwargs)

    monkeypatch.setattr(gguf, "GGUFReader", counting)
    monkeypatch.setattr(llm, "_WEIGHTS", {})
    once = llm.CausalLM(resolved, "cpu", "float32")
    assert len(made) == 1
    made.clear()
    monkeypatch.setattr(llm, "_WEIGHTS", {})
    monkeypatch.setattr(llm, "one_parse", contextlib.nullcontext)  # transformers' own three parses
    thrice = llm.CausalLM(resolved, "cpu", "float32")
    assert len(made) == 3
    a, b = dict(once.model.named_parameters()), dict(thrice.model.named_parameters())
    assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) and a[k].dtype == b[k].dtype for k in a)
    prompt = once.encode_messages(_messages(TITLES[:4]))
    assert prompt == thrice.encode_messages(_messages(TITLES[:4]))
    params = llm.DecodingParams(temperature=0.0, max_new_tokens=12, repetition_penalty=1.0)
    assert once.generate_ids([prompt], [0], params) == thrice.generate_ids([prompt], [0], params)
