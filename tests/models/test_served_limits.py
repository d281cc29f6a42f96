"""The served backend's settings and limits (issues 31 and 33), against misbehaving servers on 127.0.0.1
(:mod:`facterlab.testing.server` with ``misbehave=``): a hung, dripping or endless server ends a
request within its ``model.timeout`` with one line, progress lines come while requests wait, a
non-HTTP or truncated answer is named, bad server URLs are refused before any request, the API key
comes from the environment and is never stored, refusals are known before work (``run`` and
``sweep``) and never retried, and every hint names the flag of the command typed."""

from __future__ import annotations

import contextvars
import json
import logging
import os
import shutil
import ssl
import subprocess
import threading
import time

import pytest

from facterlab.config import ModelConfig, config_hash, config_to_dict, preset
from facterlab.datatypes import PromptRequest
from facterlab.executors import SerialExecutor, permanent
from facterlab.models import served, served_http
from facterlab.models.served import (
    ServedRecommender,
    ServerError,
    ServerUnavailable,
    probe_server,
    setting_hint,
    supports_prompt_logprobs,
    supports_sampling,
    supports_token_prompts,
)
from facterlab.testing.server import MODEL, OpenAIServer


@pytest.fixture(autouse=True)
def _fresh(monkeypatch):
    probes = (probe_server, supports_prompt_logprobs, supports_token_prompts, supports_sampling)
    for probe in probes:
        probe.cache_clear()
    with served.command(None):  # hints name ModelConfig's fields unless a test says otherwise
        yield
    for probe in probes:
        probe.cache_clear()


def _request(seed: int) -> PromptRequest:
    user = "Watch history:\n1. Heat (1995)\n2. Fargo (1996)\nRecommend 3 movies."
    return PromptRequest.from_messages([{"role": "user", "content": user}], seed=seed, k=3)


def _cfg(url: str, **kw) -> ModelConfig:
    return ModelConfig(llm=f"openai:{MODEL}", server_url=url, temperature=0.0, repetition_penalty=1.0, **kw)


def _built(srv: OpenAIServer, misbehave: str, **kw) -> ServedRecommender:
    """A recommender built against a well-behaved server that then misbehaves on every POST."""
    rec = ServedRecommender(_cfg(srv.url, **kw), "open", backoff=0.05)
    srv.misbehave = misbehave
    return rec


# ------------------------------------------------------------------------------------------ URLs


@pytest.mark.parametrize(
    ("url", "says"),
    [
        ("http://127.0.0.1:8000/v1/completions", "names the endpoint '/v1/completions': give the server root"),
        ("http://h:8000/v1/chat/completions/", "names the endpoint '/v1/chat/completions': give the server root"),
        ("http://127.0.0.1:8000 /v1", "whitespace or a control character (' ') at position 21"),
        ("http://127.0.0.1:8000\r\nX-Injected: 1", "whitespace or a control character ('\\r') at position 21"),
        ("http://127.0.0.1:99999", "is not a valid URL (Port out of range"),
        ("http://:8000", "has no host"),
        ("ftp://h:8000", "must be an http:// or https:// URL"),
        ("http://user:pw@h:8000", "holds credentials; give the API key through api_key_env"),
        ("http://h:8000/?x=1", "has a query or fragment"),
    ],
)
def test_a_bad_server_url_is_one_line_before_any_request(url, says):
    with pytest.raises(ValueError) as info:
        _cfg(url)
    text = str(info.value)
    assert says in text and "\n" not in text and "\r" not in text


def test_cli_refuses_a_url_with_crlf_in_one_line(tmp_path, monkeypatch, capsys):
    from facterlab.cli import main

    monkeypatch.setenv("FACTERLAB_LOG", "WARNING")  # -q exports it: restored after the test

    monkeypatch.setenv("FACTERLAB_RESULTS", str(tmp_path / "results"))
    args = ["-q", "run", "--model", f"openai:{MODEL}", "--server-url", "http://127.0.0.1:1/\r\nHost: x"]
    assert main([*args, "--dataset", "synthetic", "--encoder", "hash-encoder"]) != 0
    err = [ln for ln in capsys.readouterr().err.splitlines() if "thread" not in ln]
    assert len(err) == 1 and "whitespace or a control character" in err[0], err
    assert not (tmp_path / "results").exists()


# ------------------------------------------------------------------------------------------ settings


def test_transport_settings_are_bounded_and_out_of_the_run_id():
    base = _cfg("http://127.0.0.1:1")
    other = _cfg("http://127.0.0.1:1", timeout=5, max_retries=0, concurrency=16, api_key_env="MY_KEY")
    assert config_hash(base) == config_hash(other)
    full = preset("repro", model__llm=f"openai:{MODEL}", model__server_url="http://127.0.0.1:1")
    assert config_hash(full) == config_hash(
        preset("repro", model__llm=f"openai:{MODEL}", model__server_url="http://127.0.0.1:1", model__timeout=9.5)
    )
    # at their defaults the fields are not in a saved config: every earlier record stays byte-identical
    assert not {"timeout", "max_retries", "concurrency", "api_key_env"} & set(config_to_dict(preset())["model"])
    assert config_to_dict(other)["api_key_env"] == "MY_KEY"  # the variable's name, never its value
    for bad, says in [
        ({"timeout": 0}, "timeout"),
        ({"timeout": float("inf")}, "timeout"),
        ({"max_retries": 11}, "max_retries"),
        ({"concurrency": 0}, "concurrency"),
        ({"concurrency": 2.5}, "concurrency"),
    ]:
        with pytest.raises(ValueError, match=says):
            _cfg("http://127.0.0.1:1", **bad)
    with pytest.raises(ValueError) as info:
        _cfg("http://127.0.0.1:1", api_key_env="sk-live-abc123")  # the key itself, pasted by mistake
    assert "sk-live" not in str(info.value) and "NAME of an environment variable" in str(info.value)


def test_run_flags_reach_the_model_config():
    from facterlab.cli import build_parser
    from facterlab.facter.commands import config_from_args

    args = ["run", "--model", f"openai:{MODEL}", "--server-url", "http://127.0.0.1:1", "--temperature", "0"]
    args += ["--repetition-penalty", "1", "--timeout", "7.5", "--concurrency", "3", "--retries", "0"]
    cfg = config_from_args(build_parser().parse_args([*args, "--api-key-env", "OPENAI_API_KEY"]))
    m = cfg.model
    assert (m.temperature, m.repetition_penalty, m.timeout, m.concurrency, m.max_retries, m.api_key_env) == (
        0.0,
        1.0,
        7.5,
        3,
        0,
        "OPENAI_API_KEY",
    )
    # every backend takes the decoding flags
    fake = config_from_args(build_parser().parse_args(["run", "--model", "fake", "--temperature", "0.3"]))
    assert fake.model.temperature == 0.3


def test_hints_name_the_flag_of_the_command_typed():
    with served.command("run"):
        assert setting_hint("repetition_penalty", "1") == "--repetition-penalty 1"
        assert setting_hint("max_retries", "N") == "--retries N"
        with served.command("sweep"):  # nested: the inner command, then the outer one again
            assert setting_hint("repetition_penalty", "1") == "--set model__repetition_penalty=1"
        assert setting_hint("timeout", "60") == "--timeout 60"
    assert served.current_command() is None
    assert setting_hint("timeout", "60").startswith("model.timeout=60 (ModelConfig")


def test_the_command_of_a_hint_belongs_to_its_own_thread_and_ends_with_its_block():
    """Two callers at once each get their own command's flags; an error in the block restores the value;
    code that assigns the old module global ``served.COMMAND`` sets the same context variable."""
    barrier = threading.Barrier(2, timeout=10)
    seen: dict = {}

    def caller(name):
        with served.command(name):
            barrier.wait()  # both have set their command before either reads
            seen[name] = setting_hint("timeout", "60")
            barrier.wait()

    threads = [threading.Thread(target=caller, args=(n,)) for n in ("run", "sweep")]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert seen == {"run": "--timeout 60", "sweep": "--set model__timeout=60"}
    assert served.current_command() is None
    with pytest.raises(RuntimeError), served.command("run"):
        raise RuntimeError("a command that fails")
    assert served.current_command() is None

    def legacy():
        served.COMMAND = "sweep"  # what reporting/sweep.py's workers do
        return served.COMMAND, setting_hint("timeout", "60")

    assert contextvars.copy_context().run(legacy) == ("sweep", "--set model__timeout=60")
    assert served.COMMAND is None  # the assignment stayed in the context that made it


def test_a_hint_raised_in_a_request_thread_names_the_flag_of_the_command_that_asked():
    """Requests run in a thread pool; an error there is built in the caller's context, so under ``run``
    it names ``--timeout``/``--retries``, not ModelConfig's fields."""
    with OpenAIServer() as srv:
        rec = _built(srv, "garbage", max_retries=0, concurrency=2)
        with served.command("run"), pytest.raises(ServerError) as info:
            rec.predict([_request(s) for s in range(3)])
    assert "did not answer in HTTP" in str(info.value)
    assert "--timeout SECONDS, --retries N)" in str(info.value), str(info.value)


def test_the_api_key_comes_from_the_environment_and_is_never_stored(monkeypatch, tmp_path):
    with OpenAIServer(api_key="s3cret-key") as srv:
        with pytest.raises(ServerError, match=r"did not answer GET /v1/models .*HTTP 401.*It wants an API key"):
            ServedRecommender(_cfg(srv.url), "open")
        probe_server.cache_clear()
        with pytest.raises(ServerError, match=r"names \$FACTERLAB_TEST_KEY, which is not set here") as info:
            ServedRecommender(_cfg(srv.url, api_key_env="FACTERLAB_TEST_KEY"), "open")
        assert "\n" not in str(info.value)
        monkeypatch.setenv("FACTERLAB_TEST_KEY", "s3cret-key")
        rec = ServedRecommender(_cfg(srv.url, api_key_env="FACTERLAB_TEST_KEY"), "open")
        assert rec.predict([_request(0)])[0].parse_status == "ok"
        assert srv.auth[-1] == "Bearer s3cret-key"
    assert "s3cret" not in json.dumps(config_to_dict(rec.cfg)) and "s3cret" not in rec.fingerprint


# ------------------------------------------------------------------------------------------ limits


@pytest.mark.integration
def test_a_hung_server_ends_the_batch_within_one_timeout_with_progress_lines(monkeypatch, caplog):
    monkeypatch.setattr(served, "PROGRESS_EVERY", 0.5)
    with OpenAIServer() as srv:
        rec = _built(srv, "hang", timeout=4.0, max_retries=3, concurrency=2)
        caplog.set_level(logging.INFO, logger="facterlab.models.served")
        t0 = time.monotonic()
        with pytest.raises(ServerUnavailable) as info:
            rec.predict([_request(s) for s in range(6)])
        took = time.monotonic() - t0
    # one deadline covers every attempt of a request; the 4 queued requests are cancelled, not waited for
    assert took < 4.0 + 6.0, took  # one deadline (4 s), not 4 x 4 s; the margin is for a loaded machine
    assert "no complete answer within the 4 s deadline (it sent no status line)" in str(info.value)
    assert "model.timeout=SECONDS" in str(info.value)
    waiting = [r.getMessage() for r in caplog.records if "waiting for" in r.getMessage()]
    assert waiting and "0 of 6 requests answered, 2 waiting" in waiting[0]


@pytest.mark.integration
def test_a_hung_server_is_found_before_any_prompt_in_one_timeout():
    with OpenAIServer(misbehave="hang") as srv:
        t0 = time.monotonic()
        with pytest.raises(ServerUnavailable, match=r"lists model 'test-model' but gave no answer to a one-token"):
            ServedRecommender(_cfg(srv.url, timeout=1.5), "open")
        assert time.monotonic() - t0 < 1.5 + 1.5


@pytest.mark.integration
def test_a_dripping_server_ends_within_the_deadline_and_says_what_it_sent():
    with OpenAIServer() as srv:
        rec = _built(srv, "drip", timeout=2.5, max_retries=0)
        t0 = time.monotonic()
        with pytest.raises(ServerError, match=r"within the 2.5 s deadline \(it sent HTTP 200 and \d+ bytes of its"):
            rec.predict([_request(0)])
        assert time.monotonic() - t0 < 2.5 + 1.5


def test_an_endless_body_stops_at_the_size_cap(monkeypatch):
    # the cap lives with the HTTP exchange that reads it (served_http; served re-exports its value)
    monkeypatch.setattr(served_http, "MAX_RESPONSE_BYTES", 2**20)
    with OpenAIServer() as srv:
        rec = _built(srv, "huge", timeout=30, max_retries=2)
        t0 = time.monotonic()
        with pytest.raises(ServerError, match=r"sent more than the 1,048,576-byte cap of a body") as info:
            rec.predict([_request(0)])
        assert time.monotonic() - t0 < 10
        assert not isinstance(info.value, ServerUnavailable)  # the same request gets the same: not retried
        assert len(srv.requests) == 2  # the probe of the decoding settings, then one attempt


def test_a_non_http_answer_and_a_truncated_body_are_named_in_one_line():
    with OpenAIServer() as srv:
        rec = _built(srv, "garbage", max_retries=2)
        with pytest.raises(ServerError, match=r"did not answer in HTTP \(its first line: .*this is not HTTP"):
            rec.predict([_request(0)])
        srv.misbehave = "truncated"
        with pytest.raises(ServerError, match=r"HTTP 200: a body that is not JSON \(\d+ bytes: b'\{\"choices"):
            rec.predict([_request(0)])


def test_a_refusal_is_permanent_and_the_executor_does_not_retry_it():
    assert permanent(ServerError("refused")) and not permanent(ServerUnavailable("down")) and not permanent(None)
    out = SerialExecutor().run(_refuse, {"a": 1}, retries=3)
    assert out["a"].attempts == 1 and "ServerError: HTTP 422" in out["a"].error
    out = SerialExecutor().run(_down, {"a": 1}, retries=2)
    assert out["a"].attempts == 3


def _refuse(_):
    raise ServerError("HTTP 422")


def _down(_):
    raise ServerUnavailable("no answer")


# ------------------------------------------------------------------------------------------ commands


def _run_args(url: str) -> list:
    args = ["-q", "run", "--model", f"openai:{MODEL}", "--server-url", url, "--encoder", "hash-encoder"]
    return args + ["--dataset", "synthetic", "--n-rows", "40", "--passes", "1", "--cfr-rows", "4", "--json"]


@pytest.mark.integration
def test_run_audits_a_strict_server_greedily_and_names_its_flag_when_refused(tmp_path, monkeypatch, capsys):
    from facterlab.cli import main

    monkeypatch.setenv("FACTERLAB_LOG", "WARNING")  # -q exports it: restored after the test

    monkeypatch.setenv("FACTERLAB_RESULTS", str(tmp_path / "results"))
    monkeypatch.setenv("FACTERLAB_CACHE", str(tmp_path / "cache"))
    with OpenAIServer(strict=True) as srv:  # refuses repetition_penalty with HTTP 422, as transformers serve
        assert main([*_run_args(srv.url), "--max-new-tokens", "32"]) == 1
        assert served.current_command() is None  # the command's hints ended with it
        err = [ln for ln in capsys.readouterr().err.splitlines() if "thread" not in ln]
        assert len(err) == 1 and "HTTP 422" in err[0] and "--repetition-penalty 1," in err[0], err
        assert not (tmp_path / "results" / "runs").exists()  # refused before any work
        n_refused = len(srv.requests)
        flags = ["--temperature", "0", "--repetition-penalty", "1", "--timeout", "30", "--concurrency", "2"]
        assert main([*_run_args(srv.url), *flags, "--max-new-tokens", "32"]) == 0
        metrics = json.loads(capsys.readouterr().out)
        bodies = [b for p, b in srv.requests[n_refused:] if p == "/v1/chat/completions"]
    assert n_refused == 1 and metrics["model"].startswith(f"openai:{MODEL}:open:generate:")
    assert bodies and all(b["temperature"] == 0.0 and "repetition_penalty" not in b for b in bodies)


def test_a_sweep_with_an_incapable_server_is_refused_before_any_run_in_one_line(tmp_path, monkeypatch, capsys):
    from facterlab.cli import main

    monkeypatch.setenv("FACTERLAB_LOG", "WARNING")  # -q exports it: restored after the test

    monkeypatch.setenv("FACTERLAB_CACHE", str(tmp_path / "cache"))
    base = ["-q", "sweep", "--executor", "serial", "--out-dir", str(tmp_path / "out"), "--grid", "seed=0,1,2"]
    base += ["--set", "model__encoder=hash-encoder", "--set", "data__dataset=synthetic", "--set", "data__n_rows=40"]
    with OpenAIServer(strict=True, no_logprobs=True) as srv:
        args = [*base, "--set", f"model__llm=openai:{MODEL}", "--server-url", srv.url]
        assert main(args) == 1
        assert served.current_command() is None  # the sweep set it (served.COMMAND); it ended with the sweep
        err = [ln for ln in capsys.readouterr().err.splitlines() if "thread" not in ln]
        assert len(err) == 1 and "the sweep cannot start" in err[0] and "(3 runs)" in err[0], err
        assert "--set model__repetition_penalty=1" in err[0]
        # the likelihood ranker on a server without prompt log-probabilities: refused, pointing to the ranker
        assert main([*args, "--set", "protocol=rank", "--set", "model__ranker=likelihood"]) == 1
        err = [ln for ln in capsys.readouterr().err.splitlines() if "thread" not in ln]
        assert len(err) == 1 and "no prompt log-probabilities" in err[0] and "(3 runs)" in err[0], err
        assert "use --set model__ranker=generate," in err[0]
        assert {p for p, _ in srv.requests} <= {"/v1/chat/completions", "/v1/completions"} and len(srv.requests) == 2
    assert not (tmp_path / "out" / "runs").exists()


def test_the_testing_server_is_a_tool_on_127_0_0_1(tmp_path):
    """``python -m facterlab.testing.server --port 0`` prints its URL, on 127.0.0.1, and serves the model."""
    import subprocess
    import sys

    proc = subprocess.Popen(
        [sys.executable, "-m", "facterlab.testing.server", "--port", "0", "--model", "my-model"],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        line = proc.stdout.readline() if proc.stdout else ""
        assert line.startswith("serving model 'my-model' at http://127.0.0.1:"), line
        url = line.split(" at ")[1].split()[0]
        info = probe_server(url, "my-model")
        assert info.kind == "facterlab-openai-test"
    finally:
        proc.terminate()
        proc.communicate(timeout=30)  # closes its stdout pipe
    bad = subprocess.run(
        [sys.executable, "-m", "facterlab.testing.server", "--misbehave", "sulk"], capture_output=True, text=True
    )
    assert bad.returncode == 2 and "invalid choice: 'sulk'" in bad.stderr


def test_a_sweep_whose_server_takes_no_token_ids_is_refused_while_it_plans(tmp_path, monkeypatch):
    from facterlab.reporting.sweep import expand_grid, plan_sweep

    monkeypatch.setenv("FACTERLAB_CACHE", str(tmp_path / "cache"))
    with OpenAIServer(token_prompts=False) as srv:  # as transformers serve: "prompt must be a string."
        fixed = {"model__llm": f"openai:{MODEL}", "model__server_url": srv.url, "model__tokenizer": "smollm2-135m"}
        cfgs = expand_grid({"seed": [0, 1]}, {**fixed, "model__encoder": "hash-encoder", "data__dataset": "synthetic"})
        with pytest.raises(ServerError) as info:
            plan_sweep(cfgs, out_dir=tmp_path / "out")
        assert [p for p, _ in srv.requests] == ["/v1/completions"]  # one probe for both runs
    text = str(info.value)
    assert text.startswith("the sweep cannot start: ") and "does not take token-id prompts" in text
    assert "HTTP 400: prompt must be a string." in text and "(2 runs)" in text and "\n" not in text


@pytest.mark.integration
def test_a_sweep_worker_waiting_on_a_stalled_server_says_so_and_ends_the_run(tmp_path):
    """A server that stops answering after the probes: the process-pool worker's progress lines become
    warnings past half the deadline (a sweep's workers show warnings), and the run ends within its
    deadline, reported FAILED in the table; the other runs are not held."""
    import subprocess
    import sys

    with OpenAIServer(misbehave="hang", misbehave_after=2) as srv:  # the driver's probe, the worker's probe
        args = [sys.executable, "-m", "facterlab.cli", "sweep", "--executor", "process", "--workers", "1"]
        args += ["--retries", "0", "--grid", "seed=0", "--server-url", srv.url, "--out-dir", str(tmp_path / "out")]
        for key, value in {
            "model__llm": f"openai:{MODEL}",
            "model__encoder": "hash-encoder",
            "model__temperature": 0,
            "model__repetition_penalty": 1,
            "model__timeout": 4,
            "model__max_retries": 0,
            "data__dataset": "synthetic",
            "data__n_rows": 40,
        }.items():
            args += ["--set", f"{key}={value}"]
        env = {k: v for k, v in os.environ.items() if k != "FACTERLAB_LOG"}
        env["FACTERLAB_CACHE"] = str(tmp_path / "cache")
        t0 = time.monotonic()
        out = subprocess.run(args, env=env, capture_output=True, text=True, timeout=300)
        took = time.monotonic() - t0
    assert out.returncode == 1, out.stderr[-2000:]
    warnings = [ln for ln in out.stderr.splitlines() if "requests answered" in ln]
    assert warnings and all("waiting for" in ln for ln in warnings), out.stderr[-2000:]
    assert "FAILED" in out.stdout and "within the 4 s deadline (it sent no status line)" in out.stdout
    assert took < 120, took


# ------------------------------------------------------------------------------------------ https


def _self_signed(tmp_path) -> tuple:
    """A throwaway certificate for 127.0.0.1 and its key (the ``openssl`` command; no Python dependency)."""
    exe = shutil.which("openssl")
    if exe is None:
        pytest.skip("no openssl command to make a self-signed certificate (cryptography is not a dependency)")
    cert, key = tmp_path / "cert.pem", tmp_path / "key.pem"
    args = [exe, "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"]
    args += ["-keyout", str(key), "-out", str(cert), "-days", "1", "-subj", "/CN=127.0.0.1"]
    args += ["-addext", "subjectAltName=IP:127.0.0.1"]
    subprocess.run(args, check=True, capture_output=True, timeout=60)
    return cert, key


def _https(srv: OpenAIServer, cert, key) -> OpenAIServer:
    """``srv`` (not yet started) answering https on its port; the handshake in each request's thread."""
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(cert, key)
    srv.httpd.socket = ctx.wrap_socket(srv.httpd.socket, server_side=True, do_handshake_on_connect=False)
    srv.url = srv.url.replace("http://", "https://")
    return srv


def test_an_https_server_is_served_and_an_untrusted_certificate_is_one_line(tmp_path, monkeypatch):
    """The client speaks TLS to an ``https://`` server, verifying its certificate with the machine's CAs
    (``SSL_CERT_FILE`` here); an untrusted certificate and an https URL for a plain-HTTP port each end in
    one line before any prompt, and are not retried."""
    cert, key = _self_signed(tmp_path)
    with _https(OpenAIServer(), cert, key) as srv:
        assert srv.url.startswith("https://127.0.0.1:")
        with pytest.raises(ServerError, match=r"its TLS certificate is not trusted here \(") as info:
            ServedRecommender(_cfg(srv.url, max_retries=3), "open")
        assert "SSL_CERT_FILE=" in str(info.value) and "\n" not in str(info.value)
        assert not isinstance(info.value, ServerUnavailable) and srv.requests == []
        probe_server.cache_clear()
        monkeypatch.setenv("SSL_CERT_FILE", str(cert))  # this machine now trusts the certificate
        rec = ServedRecommender(_cfg(srv.url), "open")
        got = rec.predict([_request(s) for s in range(3)])
        assert [p for p, _ in srv.requests].count("/v1/chat/completions") >= 3
    assert all(p.titles for p in got)
    with OpenAIServer() as plain:  # an https:// URL for a port that speaks plain HTTP
        with pytest.raises(ServerError, match=r"the TLS handshake failed \(.*\); does the port speak https\?"):
            ServedRecommender(_cfg(plain.url.replace("http://", "https://")), "open")
        assert plain.requests == []


# ------------------------------------------------------------------------------ bounded answers (issue 44)


def test_an_answer_longer_than_max_tokens_can_produce_is_cut_before_parsing_and_the_cache(tmp_path):
    from facterlab.models.cache import CachedRecommender, PredictionCache
    from facterlab.models.parsing import max_answer_chars
    from facterlab.testing.server import LONG_ANSWER_BYTES

    with OpenAIServer() as srv:
        rec = _built(srv, "long", max_new_tokens=50)
        cache = PredictionCache(tmp_path / "llm_cache.sqlite")
        t0 = time.monotonic()
        pred = CachedRecommender(rec, cache).predict([_request(0)])[0]
        took = time.monotonic() - t0
        size = (tmp_path / "llm_cache.sqlite").stat().st_size + sum(
            p.stat().st_size for p in tmp_path.glob("llm_cache.sqlite-*")
        )
    assert pred.parse_status == "cut" and pred.titles == ("Toy Story (1995)",)
    assert len(pred.raw) == max_answer_chars(50) < LONG_ANSWER_BYTES
    assert size < 1_000_000, size  # the cache holds the cut answer, not 8 MiB
    assert took < 20, took


def test_parsing_is_linear_in_hostile_text():
    from facterlab.models.parsing import parse_with_reason

    def cost(text: str) -> float:
        t0 = time.process_time()
        parse_with_reason(text, 10)
        return time.process_time() - t0

    # each was quadratic: 20 s at 32,000 characters (a list marker then spaces; escaped quotes, never closed)
    for make in (lambda n: "1." + " " * n, lambda n: '["' + '\\"' * n, lambda n: "- " + "  x" * n):
        small, large = cost(make(20_000)), cost(make(80_000))
        assert large < 0.5 + 8 * small, (small, large)


# ------------------------------------------------------------------------------ no secret in any output (issue 44)

SECRET = "SECRETVALUE42"


def _all_output(capsys, caplog, *folders) -> str:
    out = capsys.readouterr()
    text = out.out + out.err + "\n".join(r.getMessage() for r in caplog.records)
    for folder in folders:
        for p in folder.rglob("*") if folder.exists() else ():
            if p.is_file():
                text += p.read_bytes().decode("latin-1")
    return text


@pytest.mark.parametrize(
    ("key", "says"),
    [
        (f"sk-{SECRET}\r\nX-Evil: 1", "has a line break at character 17 of 27"),
        (f"sk-{SECRET}\u043a", "has a character outside ASCII at character 17 of 17"),
        (f"sk-{SECRET} tail", "has whitespace at character 17"),
    ],
)
def test_an_api_key_an_http_header_cannot_carry_is_one_line_without_the_key(
    tmp_path, monkeypatch, capsys, caplog, key, says
):
    from facterlab.cli import main

    monkeypatch.setenv("FACTERLAB_LOG", "WARNING")
    monkeypatch.setenv("FACTERLAB_RESULTS", str(tmp_path / "results"))
    monkeypatch.setenv("FACTERLAB_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("FACTERLAB_TEST_KEY", key)
    with OpenAIServer(api_key=key.strip()) as srv:
        assert main([*_run_args(srv.url), "--api-key-env", "FACTERLAB_TEST_KEY"]) == 1
        assert not srv.requests  # refused before any request
    text = _all_output(capsys, caplog, tmp_path)
    assert SECRET not in text
    err = [ln for ln in text.splitlines() if "error" in ln]
    assert len(err) == 1 and "$FACTERLAB_TEST_KEY" in err[0] and says in err[0], err


def test_credentials_in_a_server_url_are_never_echoed(tmp_path, monkeypatch, capsys, caplog):
    from facterlab.cli import main

    monkeypatch.setenv("FACTERLAB_LOG", "WARNING")
    monkeypatch.setenv("FACTERLAB_RESULTS", str(tmp_path / "results"))
    monkeypatch.setenv("FACTERLAB_CACHE", str(tmp_path / "cache"))
    for url in (f"http://user:{SECRET}@127.0.0.1:1", f"http://{SECRET}@127.0.0.1:1/v1/completions"):
        assert main(_run_args(url)) != 0
    text = _all_output(capsys, caplog, tmp_path)
    assert SECRET not in text and text.count("***@") >= 2, text
