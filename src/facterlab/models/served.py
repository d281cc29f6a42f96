"""A recommender answered by an OpenAI-compatible server: ``--model openai:<model id> --server-url URL``
(vLLM, SGLang, llama.cpp, Ollama, ``transformers serve``, an API; docs/SCALING.md).

It is a :class:`~facterlab.datatypes.Recommender` like :class:`~facterlab.models.rankers.LLMRecommender`
and goes through the same kill-safe prediction cache (:class:`~facterlab.models.cache.CachedRecommender`).

The server is asked once per process (:func:`probe_server`) before any other work: ``GET /v1/models``
must answer and list the model; otherwise one line says which (unreachable, or the models it serves).

Prompts: with ``model.tokenizer`` set (a registry name such as ``smollm2-135m``, a local path or a
hub id naming the served model's tokenizer), the chat template is rendered here, exactly as the
in-process backend renders it (:meth:`facterlab.models.llm.CausalLM.encode_messages`), and the token
ids go to ``POST /v1/completions`` (as lm-evaluation-harness does); the oldest history titles are
dropped until ``prompt + max_tokens`` fits the server's ``max_model_len`` (and ``max_prompt_tokens``),
by the in-process backend's own code (:meth:`facterlab.models.rankers.LLMRecommender.fit_prompt`).  The
server is asked once whether it takes token-id prompts (``transformers serve`` does not: one line says
so).  Without a tokenizer the messages go to ``POST /v1/chat/completions`` and the server applies its
own template; a prompt longer than its context is the server's HTTP 400, reported in one line.

Generation: the prompt, the config's decoding
(``temperature``, ``top_p``, ``max_tokens``; ``temperature = 0`` is greedy, the reproducible choice
on a server) and the request's ``seed``.  Titles are parsed, and for the rank protocol matched to the
candidates, exactly as for the in-process model.

Transport (``ModelConfig.timeout``, ``max_retries``, ``concurrency``, ``api_key_env``; ``run``'s
``--timeout``, ``--retries``, ``--concurrency``, ``--api-key-env``): requests run ``concurrency`` at a
time; each has one total deadline of ``timeout`` seconds, its retries (connection errors, HTTP
408/425/429/5xx, exponential backoff, at most ``max_retries``) and every read included, enforced by a
watchdog that closes the socket (a server that drips its answer cannot hold it); a body over
:data:`MAX_RESPONSE_BYTES` is refused; a non-HTTP or truncated answer is one line naming what the
server sent.  While requests wait a progress line comes every :data:`PROGRESS_EVERY` seconds; the
first error ends the batch.  With ``api_key_env`` the key is read from that environment variable for
each request and sent as ``Authorization: Bearer``; it is in no config, run id, record or message.
Refusals, asked before any prompt (:func:`check_served`), are :class:`ServerError` (no
executor retries them); a server that does not answer is a :class:`ServerUnavailable`.

Likelihood ranker (rank protocol): ``POST /v1/completions`` with ``echo`` and ``logprobs``, one prompt
per candidate (``prompt + candidate``).  With a tokenizer the prompt is the chat-templated token ids
followed by the candidate's ids (``tokenizer(title)``, as in-process), and ``log p(c | x)`` is the sum
of the echoed log-probabilities at the candidate's positions: the in-process scorer's definition, so
the scores equal its scores up to the server's numerics.  Without one the prompt text is a plain
transcript of the messages (``System: ...``, ``User: ...``, ``Assistant:``) and the candidate after a
space; the score sums the echoed tokens that start at or after that space (a token that straddles the
boundary counts with the prompt), so scores differ from the in-process scorer's.  Servers differ here: vLLM returns
prompt logprobs; llama.cpp rejects ``echo``; Ollama and ``transformers serve`` answer without logprobs.
So the server is probed once (:func:`supports_prompt_logprobs`) and one that drops them is refused with
a line that points to ``--ranker generate``.

Fingerprint: the served model's id, the server's kind and version (``GET /version``, else the HTTP
``Server`` header), the model's ``root``/``owned_by``/``max_model_len`` and any quantisation the
server reports in ``/v1/models``, plus the decoding parameters and the parser version; hashed, with
the server's kind/version (and quantisation, revision) also written out at its end; with a
tokenizer, its files' fingerprint (:func:`facterlab.models.registry.resolve_llm`) and ``max_prompt_tokens`` too, e.g.
``openai:my-model:open:generate:f98bdedd61cc[server=vllm/0.11.0]``.  The server's
URL is not part of it (the same model served elsewhere shares the cache).
"""

from __future__ import annotations

import contextlib
import contextvars
import functools
import hashlib
import http.client
import json
import logging
import os
import re
import socket
import ssl
import sys
import threading
import time
import types
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import FIRST_EXCEPTION, ThreadPoolExecutor, wait
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from facterlab.config import ModelConfig
from facterlab.datatypes import Prediction, PromptRequest, Recommender
from facterlab.models.llm import CausalLM
from facterlab.models.parsing import PARSER_VERSION, parse_titles, ranked_by_scores
from facterlab.models.registry import SERVED_PREFIX, resolve_llm, served_model_id
from facterlab.progress import format_seconds

__all__ = [
    "ServerError",
    "ServerUnavailable",
    "ServerInfo",
    "NoAnswer",
    "check_served",
    "supports_sampling",
    "sampling_fields",
    "setting_hint",
    "command",
    "current_command",
    "MAX_RESPONSE_BYTES",
    "ServedRecommender",
    "probe_server",
    "supports_prompt_logprobs",
    "served_fingerprint",
    "transcript",
    "NO_LOGPROBS_MSG",
    "server_of",
    "load_tokenizer",
    "supports_token_prompts",
    "TOO_LONG_HINT",
    "check_tokenizer",
    "server_token_ids",
]

log = logging.getLogger(__name__)

NO_LOGPROBS_MSG = (
    "the server at {url} ({kind} {version}) returned no prompt log-probabilities for model {model!r} "
    "(POST /v1/completions with echo and logprobs), which the likelihood ranker needs; use {ranker}, "
    "or serve the model with vLLM (docs/SCALING.md)"
)
NO_TOKEN_PROMPTS_MSG = (
    "the server at {url} ({kind} {version}) does not take token-id prompts on POST /v1/completions "
    "({why}), which model.tokenizer={tokenizer!r} needs; leave model.tokenizer unset to use its "
    "chat endpoint, or serve the model with vLLM (docs/SCALING.md)"
)
TOKENIZER_MISMATCH_MSG = (
    "model.tokenizer={tokenizer!r} does not tokenise as the model the server at {url} serves ({model!r}): "
    "{text!r} is {ours} here and {theirs} there (POST /tokenize); name the served model's own tokenizer"
)
#: texts tokenised both here and by the server (``POST /tokenize``) to check that they agree
TOKENIZER_PROBES = ("One two three", "Amélie (2001), Star Wars: Episode IV - A New Hope (1977)")
TOO_LONG_HINT = (
    " (the prompt does not fit the served model's context; set model.tokenizer to the model's tokenizer "
    "(model__tokenizer=NAME in a sweep's --set or in run_config) so that facterlab drops the oldest history titles "
    "until it fits, "
    "as the in-process backend does, or serve the model with a longer context)"
)
_TOO_LONG = re.compile(r"context length|context size|context window|max_model_len|maximum model length|too long", re.I)
#: the context a server that reports none is taken to have (only ``max_prompt_tokens`` truncates then)
_NO_LIMIT = 2**31
#: HTTP statuses worth another try
_RETRY_STATUS = (408, 425, 429, 500, 502, 503, 504)


class ServerError(ValueError):
    """The server cannot be used: model unknown, a refusal, an answer without what we need.  The same
    request gets the same answer, so an executor does not run the task again (``permanent``)."""

    permanent = True


class ServerUnavailable(ServerError):
    """The server did not answer (unreachable, reset, past the deadline): another attempt later may."""

    permanent = False


@dataclass(frozen=True)
class ServerInfo:
    """What the server says about itself and the model (:func:`probe_server`)."""

    url: str
    model: str
    kind: str
    version: str
    details: tuple  # (key, value) pairs of the model's /v1/models entry that identify it

    @property
    def max_model_len(self) -> int | None:
        """The model's context as the server reports it (vLLM: ``max_model_len`` in ``/v1/models``)."""
        value = dict(self.details).get("max_model_len")
        try:
            return int(value) if value is not None and int(value) > 0 else None
        except ValueError:
            return None

    @property
    def fingerprint(self) -> str:
        extra = ",".join(f"{k}={v}" for k, v in self.details)
        return f"{SERVED_PREFIX}{self.model}@{self.kind}-{self.version}" + (f"[{extra}]" if extra else "")


def _url(base: str, path: str) -> str:
    base = base.rstrip("/")
    if base.endswith("/v1") and path.startswith("/v1/"):
        base = base[: -len("/v1")]
    return base + path


#: the largest response body read from a server (an echo answer with log-probabilities for 20
#: candidates of 2,000 tokens each is about 6 MB); a longer one is an error that says so
MAX_RESPONSE_BYTES = 64 * 2**20
#: seconds between the progress lines while requests wait on a server
PROGRESS_EVERY = 15.0
#: seconds of waiting on one batch after which the progress lines are warnings (half the deadline
#: when that is shorter; the lines come every ``min(PROGRESS_EVERY, timeout / 4)`` seconds)
STALL_WARNING = 60.0
#: what a hint names a setting with, by the command typed (:func:`setting_hint`): "run", "sweep", or
#: None (the Python API).  A context variable, so that it belongs to the call that set it: a thread or
#: an asyncio task gets its own, and :func:`command` restores the value it found when it ends.
_COMMAND: contextvars.ContextVar[str | None] = contextvars.ContextVar("facterlab_served_command", default=None)


@contextlib.contextmanager
def command(name: str | None) -> Iterator[None]:
    """``with command("run"):`` hints in this block (and in the request threads it starts) name
    ``facterlab run``'s flags; the value before it is restored at its end, even on an error.

    >>> with command("sweep"):
    ...     setting_hint("timeout", "60")
    '--set model__timeout=60'
    >>> current_command() is None
    True
    """
    token = _COMMAND.set(name)
    try:
        yield
    finally:
        _COMMAND.reset(token)


def current_command() -> str | None:
    """The command whose flags hints name here (:func:`command`); None: the Python API."""
    return _COMMAND.get()


class _Module(types.ModuleType):
    """``served.COMMAND`` reads and sets the context variable (code that assigned the old module global
    keeps working, now without leaking into other threads or past ``facterlab.cli.main``)."""

    @property
    def COMMAND(self) -> str | None:  # noqa: N802 (the old module global's name)
        return _COMMAND.get()

    @COMMAND.setter
    def COMMAND(self, name: str | None) -> None:  # noqa: N802
        _COMMAND.set(name)


sys.modules[__name__].__class__ = _Module
if TYPE_CHECKING:
    COMMAND: str | None  # the property above: prefer ``with command(...)``

#: ``facterlab run``'s flags for the model settings a hint may name
RUN_FLAGS = {
    "temperature": "--temperature",
    "repetition_penalty": "--repetition-penalty",
    "tokenizer": "--tokenizer",
    "ranker": "--ranker",
    "timeout": "--timeout",
    "max_retries": "--retries",
    "concurrency": "--concurrency",
    "api_key_env": "--api-key-env",
    "server_url": "--server-url",
}


def setting_hint(name: str, value: str) -> str:
    """How the user sets model setting ``name`` to ``value`` through the door they used (:func:`command`).

    >>> setting_hint("repetition_penalty", "1")
    'model.repetition_penalty=1 (ModelConfig; REPETITION_PENALTY in a notebook)'
    """
    cmd = _COMMAND.get()
    if cmd == "run" and name in RUN_FLAGS:
        return f"{RUN_FLAGS[name]} {value}"
    if cmd == "sweep":
        return f"--set model__{name}={value}"
    return f"model.{name}={value} (ModelConfig; {name.upper()} in a notebook)"


class NoAnswer(OSError):
    """A request that got no usable HTTP answer: ``reason`` names what the server did (or did not do);
    ``transient``: another attempt may fare better (a refused or reset connection, a timeout)."""

    def __init__(self, reason: str, transient: bool = True):
        super().__init__(reason)
        self.reason = reason
        self.transient = transient


@dataclass(frozen=True)
class Reply:
    """An HTTP answer: ``status``, the body as JSON (None when it is not JSON), the headers, the raw body."""

    status: int
    obj: Any
    headers: dict
    raw: bytes = b""

    def what(self) -> str:
        """The server's message, or what the body was when it was not JSON."""
        if self.obj is None and self.raw.strip():
            return f"a body that is not JSON ({len(self.raw)} bytes: {self.raw[:80]!r})"
        if self.obj is None:
            return "an empty body"
        return _error_text(self.obj)


def api_key(env: str | None) -> str | None:
    """The API key in environment variable ``env`` (read at each request, never stored); a
    :class:`ServerError` when the variable is not set."""
    if env is None:
        return None
    key = os.environ.get(env, "").strip()
    if not key:
        raise ServerError(
            f"model.api_key_env names ${env}, which is not set here: export {env}=<your key> "
            f"(or {setting_hint('api_key_env', 'OTHER_VARIABLE')}); the key is never stored"
        )
    return key


def _send_once(
    method: str, url: str, data: bytes | None, headers: dict, deadline: float, total: float | None = None
) -> Reply:
    """One HTTP exchange that ends by ``deadline`` (``time.monotonic()``): a watchdog closes the socket
    then, so that a server that never answers, or drips its answer, cannot hold the request longer
    (a socket timeout alone restarts with every byte); a body longer than :data:`MAX_RESPONSE_BYTES` is
    refused.  Raises :class:`NoAnswer`."""
    parts = urlsplit(url)
    left = deadline - time.monotonic()
    if left <= 0:
        raise NoAnswer("no time left", transient=False)
    cls = http.client.HTTPSConnection if parts.scheme == "https" else http.client.HTTPConnection
    try:
        conn = cls(parts.hostname or "", parts.port, timeout=left)
    except (http.client.HTTPException, ValueError) as exc:  # InvalidURL
        raise NoAnswer(f"an invalid URL ({exc})", transient=False) from None
    fired = threading.Event()
    got: dict[str, Any] = {"bytes": 0, "status": None, "sock": None}

    def expire() -> None:
        fired.set()
        # the socket as connected: an HTTP/1.0 answer detaches it from ``conn`` while its body is read
        sock = got["sock"] or conn.sock
        if sock is not None:
            try:
                sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass

    timer = threading.Timer(left, expire)
    timer.daemon = True
    timer.start()
    try:
        conn.connect()
        got["sock"] = conn.sock
        target = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
        conn.request(method, target, body=data, headers=headers)
        resp = got["resp"] = conn.getresponse()
        got["status"] = resp.status
        length = resp.getheader("Content-Length")
        if length and length.isdigit() and int(length) > MAX_RESPONSE_BYTES:
            raise NoAnswer(
                f"it announced a body of {int(length):,} bytes, over the {MAX_RESPONSE_BYTES:,}-byte cap",
                transient=False,
            )
        chunks = []
        while True:
            chunk = resp.read1(65536)
            if not chunk:
                break
            got["bytes"] += len(chunk)
            if got["bytes"] > MAX_RESPONSE_BYTES:
                raise NoAnswer(f"it sent more than the {MAX_RESPONSE_BYTES:,}-byte cap of a body", transient=False)
            chunks.append(chunk)
        if fired.is_set():  # the watchdog ended the body: an end of file, not the server's
            raise OSError("deadline")
        raw = b"".join(chunks)
        if length and length.isdigit() and len(raw) < int(length):
            raise NoAnswer(f"it closed the connection mid-body ({len(raw):,} of {int(length):,} bytes)")
        return Reply(resp.status, _json(raw), dict(resp.headers), raw)
    except NoAnswer:
        raise
    except (http.client.HTTPException, OSError) as exc:
        if fired.is_set():
            sent = (
                "no status line"
                if got["status"] is None
                else f"HTTP {got['status']} and {got['bytes']:,} bytes of its body, unfinished"
            )
            within = f"the {total:g} s deadline" if total is not None else f"{left:.3g} s"
            raise NoAnswer(f"no complete answer within {within} (it sent {sent})") from None
        raise _no_answer(exc) from None
    finally:
        timer.cancel()
        if got.get("resp") is not None:
            got["resp"].close()
        conn.close()
        if got["sock"] is not None:
            got["sock"].close()


def _no_answer(exc: BaseException) -> NoAnswer:
    """What an ``http.client``/socket error says the server did, in one line."""
    if isinstance(exc, http.client.BadStatusLine) and not isinstance(exc, http.client.RemoteDisconnected):
        line = exc.args[0] if exc.args else ""
        return NoAnswer(f"it did not answer in HTTP (its first line: {str(line)[:80]!r}); is it the right port?", False)
    if isinstance(exc, http.client.LineTooLong):
        return NoAnswer(f"it sent an HTTP header line that is too long ({exc})", False)
    if isinstance(exc, http.client.IncompleteRead):
        return NoAnswer(f"it closed the connection mid-body ({len(exc.partial)} bytes read)")
    if isinstance(exc, http.client.RemoteDisconnected):
        return NoAnswer("it closed the connection without an answer")
    if isinstance(exc, http.client.HTTPException):
        return NoAnswer(f"an HTTP error ({type(exc).__name__}: {str(exc)[:120]})", False)
    if isinstance(exc, ssl.SSLCertVerificationError):  # the same certificate fails again: not retried
        why = exc.verify_message or exc.reason or "verification failed"
        return NoAnswer(
            f"its TLS certificate is not trusted here ({why}); give this machine the CA that signed it "
            "(SSL_CERT_FILE=/path/ca.pem) or use the server's http:// URL",
            False,
        )
    if isinstance(exc, ssl.SSLError):  # e.g. an https:// URL for a plain-HTTP port
        return NoAnswer(f"the TLS handshake failed ({exc.reason or exc}); does the port speak https?", False)
    if isinstance(exc, TimeoutError | socket.timeout):
        return NoAnswer("a read timed out")
    reason = getattr(exc, "strerror", None) or str(exc) or type(exc).__name__
    return NoAnswer(str(reason)[:200])


def _http(
    method: str,
    url: str,
    body: dict | None = None,
    timeout: float = 60.0,
    retries: int = 0,
    backoff: float = 0.5,
    key_env: str | None = None,
) -> Reply:
    """The server's :class:`Reply` within ``timeout`` seconds in all (every attempt, read and backoff
    included); retries connection errors, timeouts and HTTP 408/425/429/5xx with exponential backoff,
    at most ``retries`` times while time is left; raises :class:`NoAnswer` when no attempt got an answer."""
    data = None if body is None else json.dumps(body).encode()
    headers = {"Content-Type": "application/json", "Accept": "application/json"}
    key = api_key(key_env)
    if key:
        headers["Authorization"] = f"Bearer {key}"
    deadline = time.monotonic() + float(timeout)
    for attempt in range(retries + 1):
        try:
            reply = _send_once(method, url, data, headers, deadline, float(timeout))
        except NoAnswer as exc:
            if not exc.transient or attempt == retries or time.monotonic() >= deadline:
                raise
        else:
            if key and key.encode() in reply.raw:  # a server that echoes the key: never in a message
                reply = Reply(reply.status, None, reply.headers, reply.raw.replace(key.encode(), b"***"))
            if reply.status not in _RETRY_STATUS or attempt == retries:
                return reply
        pause = min(backoff * 2**attempt, max(0.0, deadline - time.monotonic()))
        time.sleep(pause)
        if time.monotonic() >= deadline:
            raise NoAnswer(f"no answer within the {timeout:g} s deadline after {attempt + 1} attempts")
    raise AssertionError("unreachable")


def _json(raw: bytes):
    try:
        return json.loads(raw or b"null")
    except (ValueError, RecursionError):
        return None


def _error_text(obj) -> str:
    if isinstance(obj, dict):
        err = obj.get("error", obj.get("detail", obj))
        if isinstance(err, dict):
            err = err.get("message", err)
        return str(err)[:300]
    return str(obj)[:300]


@functools.lru_cache(maxsize=32)
def probe_server(url: str, model: str, timeout: float = 10.0, key_env: str | None = None) -> ServerInfo:
    """Ask the server at ``url`` for its models and version (once per process and ``(url, model)``);
    :class:`ServerError` in one line when it cannot be reached or does not serve ``model``."""
    try:
        reply = _http("GET", _url(url, "/v1/models"), timeout=timeout, retries=1, key_env=key_env)
    except NoAnswer as exc:
        raise (ServerUnavailable if exc.transient else ServerError)(
            f"cannot reach the OpenAI-compatible server at {url} ({exc.reason}); "
            f"{'start it or pass' if exc.transient else 'pass'} the right server URL ({setting_hint('server_url', 'URL')})"
        ) from None
    obj = reply.obj
    if reply.status != 200 or not isinstance(obj, dict) or not isinstance(obj.get("data"), list):
        raise ServerError(
            f"the server at {url} did not answer GET /v1/models with a model list (HTTP {reply.status}: "
            f"{reply.what()}); is it an OpenAI-compatible server?"
            + (f" It wants an API key: {setting_hint('api_key_env', 'NAME')}" if reply.status == 401 else "")
        )
    entries = {str(m.get("id")): m for m in obj["data"] if isinstance(m, dict)}
    if model not in entries:
        served = ", ".join(repr(m) for m in sorted(entries)[:20]) or "none"
        raise ServerError(f"the server at {url} does not serve model {model!r}; it serves: {served}")
    kind, version = _server_kind(url, reply.headers, timeout, key_env)
    entry = entries[model]
    keep = ("root", "owned_by", "max_model_len", "quantization", "revision", "parent")
    details = tuple((k, str(entry[k])[:200]) for k in keep if entry.get(k) not in (None, "", model))
    return ServerInfo(url, model, kind, version, details)


def _server_kind(url: str, headers: dict, timeout: float, key_env: str | None = None) -> tuple:
    """``(kind, version)``: vLLM answers ``GET /version``; otherwise the ``Server`` header's name/version."""
    server = str(headers.get("Server") or headers.get("server") or "").split()
    try:
        reply = _http("GET", _url(url, "/version"), timeout=timeout, key_env=key_env)
        status, obj = reply.status, reply.obj
    except NoAnswer:
        status, obj = 0, None
    if status == 200 and isinstance(obj, dict) and obj.get("version"):
        name = server[0].split("/")[0] if server and not server[0].lower().startswith("uvicorn") else "vllm"
        return name, str(obj["version"])[:80]
    if server:
        name, _, ver = server[0].partition("/")
        return name or "unknown", ver or "unknown"
    return "unknown", "unknown"


def transcript(messages: Sequence[dict]) -> str:
    """The plain text prompt of the likelihood ranker (module docstring).

    >>> transcript([{"role": "system", "content": "Be fair."}, {"role": "user", "content": "Hi"}])
    'System: Be fair.\\n\\nUser: Hi\\n\\nAssistant:'
    """
    parts = [f"{m['role'].capitalize()}: {m['content']}" for m in messages]
    return "\n\n".join(parts + ["Assistant:"])


@functools.lru_cache(maxsize=32)
def supports_prompt_logprobs(url: str, model: str, timeout: float = 30.0, key_env: str | None = None) -> bool:
    """Whether ``POST /v1/completions`` with ``echo`` and ``logprobs`` returns the prompt's token
    log-probabilities (asked once per process)."""
    body = {"model": model, "prompt": "One two three", "max_tokens": 1, "temperature": 0, "echo": True, "logprobs": 1}
    try:
        reply = _http("POST", _url(url, "/v1/completions"), body, timeout=timeout, retries=1, key_env=key_env)
    except NoAnswer:
        return False
    obj = reply.obj
    if reply.status != 200 or not isinstance(obj, dict):
        return False
    try:
        lp = obj["choices"][0]["logprobs"]
        values = [x for x in lp["token_logprobs"] if x is not None]
        return len(values) >= 2 and len(lp["text_offset"]) == len(lp["token_logprobs"])
    except (KeyError, IndexError, TypeError):
        return False


@functools.lru_cache(maxsize=32)
def supports_token_prompts(
    url: str, model: str, ids: tuple, timeout: float = 60.0, key_env: str | None = None
) -> tuple:
    """``(True, "")`` when ``POST /v1/completions`` takes a prompt of token ids (asked once per process),
    else ``(False, "HTTP <status>: <the server's message>")``."""
    body = {"model": model, "prompt": list(ids), "max_tokens": 1, "temperature": 0}
    try:
        reply = _http("POST", _url(url, "/v1/completions"), body, timeout=timeout, retries=1, key_env=key_env)
    except NoAnswer as exc:
        return False, f"no answer: {exc.reason}"
    if reply.status == 200 and isinstance(reply.obj, dict) and reply.obj.get("choices"):
        return True, ""
    return False, f"HTTP {reply.status}: {reply.what()}"


def sampling_fields(model_cfg: ModelConfig) -> dict:
    """The decoding fields a generation request carries beyond OpenAI's ``model``/``messages``/``max_tokens``
    (the same as :meth:`ServedRecommender._generate` sends)."""
    out: dict = {"temperature": float(model_cfg.temperature)}
    if model_cfg.temperature > 0:
        out["top_p"] = float(model_cfg.top_p)
    if model_cfg.repetition_penalty != 1.0:
        out["repetition_penalty"] = float(model_cfg.repetition_penalty)  # vLLM, SGLang, TGI accept it
    return out


@functools.lru_cache(maxsize=32)
def supports_sampling(
    url: str, model: str, fields: tuple, chat: bool = True, timeout: float = 60.0, key_env: str | None = None
) -> tuple:
    """``(ok, why, kind)`` of a one-token generation request with the decoding ``fields`` (``(name,
    value)`` pairs, :func:`sampling_fields`), asked once per process: ``(True, "", "ok")`` when answered
    (a 5xx included: not this probe's to judge); ``(False, "HTTP <status>: <message>", "refused")`` for a
    deterministic refusal (HTTP 4xx other than 408/425/429); ``(False, "no answer ...", "silent")`` when
    the server listed the model but did not answer within ``timeout``; ``(False, "no usable answer ...",
    "broken")`` when it answered in something other than HTTP, or past the size cap."""
    body: dict = {"model": model, "max_tokens": 1, "seed": 0, **dict(fields)}
    if chat:
        body["messages"] = [{"role": "user", "content": "Say one word."}]
    else:
        body["prompt"] = "Say one word."
    path = "/v1/chat/completions" if chat else "/v1/completions"
    try:
        reply = _http("POST", _url(url, path), body, timeout=timeout, retries=1, key_env=key_env)
    except NoAnswer as exc:
        if exc.transient or "deadline" in exc.reason:
            return False, f"no answer to a one-token request {path} within {timeout:g} s: {exc.reason}", "silent"
        return False, f"no usable answer to a one-token request {path}: {exc.reason}", "broken"
    if 400 <= reply.status < 500 and reply.status not in _RETRY_STATUS:
        return False, f"HTTP {reply.status}: {reply.what()}", "refused"
    return True, "", "ok"


@functools.lru_cache(maxsize=32)
def server_token_ids(
    url: str, model: str, text: str, timeout: float = 60.0, key_env: str | None = None
) -> tuple | None:
    """The server's token ids of ``text`` (``POST /tokenize``, as vLLM and SGLang offer, without special
    tokens), asked once per process; None when the server has no such endpoint or gives no ids."""
    body = {"model": model, "prompt": text, "add_special_tokens": False}
    try:
        reply = _http("POST", _url(url, "/tokenize"), body, timeout=timeout, retries=1, key_env=key_env)
    except NoAnswer:
        return None
    obj = reply.obj
    tokens = obj.get("tokens") if reply.status == 200 and isinstance(obj, dict) else None
    if not isinstance(tokens, list) or not all(isinstance(t, int) for t in tokens):
        return None
    return tuple(tokens)


def check_tokenizer(tok, name: str, url: str, model: str, key_env: str | None = None) -> bool:
    """Raise a :class:`ServerError` when the tokenizer ``tok`` (``model.tokenizer = name``) gives other ids
    than the server for any of :data:`TOKENIZER_PROBES`; True when they agree, False when the server
    cannot say (no ``POST /tokenize``)."""
    for text in TOKENIZER_PROBES:
        theirs = server_token_ids(url, model, text, key_env=key_env)
        if theirs is None:
            return False
        ours = tuple(tok(text, add_special_tokens=False)["input_ids"])
        if ours != theirs:
            raise ServerError(
                TOKENIZER_MISMATCH_MSG.format(
                    tokenizer=name, url=url, model=model, text=text, ours=list(ours), theirs=list(theirs)
                )
            )
    return True


@functools.lru_cache(maxsize=8)
def load_tokenizer(name: str):
    """The tokenizer of ``name`` (a registry name, e.g. the bundled ``smollm2-135m`` whose GGUF carries
    it, a local folder or ``.gguf``, a hub id), loaded once per process; the model's weights are not."""
    r = resolve_llm(name)
    from transformers import AutoTokenizer

    kw: dict = {}
    if r.gguf_file:
        kw["gguf_file"] = r.gguf_file
    if r.is_local:
        kw["local_files_only"] = True
    return AutoTokenizer.from_pretrained(r.source, **kw)


class TokenizerOnly(CausalLM):
    """The tokenizer half of :class:`~facterlab.models.llm.CausalLM` (its chat template,
    :meth:`~facterlab.models.llm.CausalLM.encode_messages`, and
    :meth:`~facterlab.models.llm.CausalLM.candidate_ids`) with the served model's context, so that
    :class:`~facterlab.models.rankers.LLMRecommender` fits served prompts exactly as in-process ones.
    It has no weights: generating or scoring with it fails."""

    def __init__(self, tokenizer, context_window: int, fingerprint: str, bucket: int = 32):  # no super(): no weights
        self.tokenizer = tokenizer
        self.context_window = int(context_window)
        self.fingerprint = fingerprint
        self.bucket = int(bucket)


def served_fingerprint(model_cfg: ModelConfig, protocol: str, info: ServerInfo) -> str:
    """What the served recommender's answers depend on (as :func:`facterlab.models.rankers.recommender_fingerprint`)."""
    ranker = model_cfg.ranker_for(protocol)
    dec = (
        f"T={model_cfg.temperature},p={model_cfg.top_p},n={model_cfg.max_new_tokens},r={model_cfg.repetition_penalty}"
        if ranker == "generate"
        else "echo-logprobs-token-ids"
        if model_cfg.tokenizer
        else "echo-logprobs-transcript"
    )
    ident = f"{info.fingerprint}|{protocol}|{ranker}|{dec}|parser={PARSER_VERSION}"
    if model_cfg.tokenizer:  # chat template rendered here, prompts truncated here
        tok = resolve_llm(model_cfg.tokenizer).fingerprint
        ident += f"|tokenizer={tok}|mpt={model_cfg.max_prompt_tokens}"
    named = "".join(f",{k}={v}" for k, v in info.details if k in ("quantization", "revision"))
    digest = hashlib.sha256(ident.encode()).hexdigest()[:12]
    return f"{model_cfg.llm}:{protocol}:{ranker}:{digest}[server={info.kind}/{info.version}{named}]"


def server_of(model_cfg: ModelConfig) -> tuple:
    """``(server URL, model id)`` of a served model's config; a clear error when either is missing."""
    model = served_model_id(model_cfg.llm)
    if model is None:
        raise ValueError(f"model {model_cfg.llm!r} is not a served model ('{SERVED_PREFIX}<model id>')")
    if not model_cfg.server_url:
        raise ServerError(f"model {model_cfg.llm!r} needs the server's URL: --server-url http://HOST:PORT")
    return model_cfg.server_url, model


def refusal_hint(name: str, value: Any) -> str:
    """The hint after a server's refusal of decoding field ``name`` (its default in OpenAI's API is 1)."""
    return (
        f" (this server does not take {name}, which the config sets to {value:g}: "
        f"{setting_hint(name, '1')}, or serve the model with vLLM)"
    )


def check_served(model_cfg: ModelConfig, protocol: str) -> ServerInfo:
    """Ask the server of ``model_cfg`` (once per process for each question) whether it can answer this
    config's requests, before any prompt goes out: it serves the model (``GET /v1/models``); it returns
    prompt log-probabilities, for the likelihood ranker; it takes token-id prompts, with
    ``model.tokenizer``; it answers a one-token request with the config's decoding fields (``transformers
    serve`` refuses ``repetition_penalty``), for the generate ranker.  A refusal is a :class:`ServerError`
    in one line naming the setting to change; a server that lists the model but does not answer is a
    :class:`ServerUnavailable`.  ``facterlab sweep`` calls it while it plans, once per distinct server
    and settings; :class:`ServedRecommender` when it is built."""
    url, model = server_of(model_cfg)
    key_env = model_cfg.api_key_env
    api_key(key_env)  # the variable is set, before any request
    probe_timeout = min(float(model_cfg.timeout), 60.0)
    info = probe_server(url, model, min(probe_timeout, 10.0), key_env)
    ranker = model_cfg.ranker_for(protocol)
    if ranker == "likelihood":
        if not supports_prompt_logprobs(url, model, probe_timeout, key_env):
            raise ServerError(
                NO_LOGPROBS_MSG.format(
                    url=url,
                    kind=info.kind,
                    version=info.version,
                    model=model,
                    ranker=setting_hint("ranker", "generate"),
                )
            )
        return info
    if model_cfg.tokenizer:  # token ids 1, 2, 3 are in every vocabulary; the tokenizer is not loaded here
        ok, why = supports_token_prompts(url, model, (1, 2, 3), probe_timeout, key_env)
        if not ok:
            raise ServerError(
                NO_TOKEN_PROMPTS_MSG.format(
                    url=url, kind=info.kind, version=info.version, why=why, tokenizer=model_cfg.tokenizer
                )
            )
        return info
    fields = sampling_fields(model_cfg)
    ok, why, kind = supports_sampling(url, model, tuple(sorted(fields.items())), True, probe_timeout, key_env)
    if ok:
        return info
    if kind == "silent":
        raise ServerUnavailable(
            f"the server at {url} lists model {model!r} but gave {why} ({setting_hint('timeout', 'SECONDS')})"
        )
    if kind == "broken":
        raise ServerError(f"the server at {url} lists model {model!r} but gave {why}")
    hint = next((refusal_hint(k, v) for k, v in fields.items() if k != "temperature" and k in why), "")
    raise ServerError(f"the server at {url} refuses this config's decoding settings {fields}: {why}{hint}")


class ServedRecommender(Recommender):
    """The recommender of an OpenAI-compatible server (module docstring)."""

    def __init__(
        self,
        model_cfg: ModelConfig,
        protocol: str,
        backoff: float = 0.5,
        match: Callable | None = None,
        llm_recommender: Callable | None = None,
    ):
        if protocol not in ("open", "rank"):
            raise ValueError(f"unknown protocol {protocol!r}; choose 'open' or 'rank'")
        self.url, self.model = server_of(model_cfg)
        self.cfg = model_cfg
        # the model config's transport settings (bounded there: config.BOUNDS)
        self.concurrency, self.timeout, self.retries, self.backoff = (
            int(model_cfg.concurrency),
            float(model_cfg.timeout),
            int(model_cfg.max_retries),
            backoff,
        )
        self.key_env = model_cfg.api_key_env
        self.protocol = protocol
        self.ranker = model_cfg.ranker_for(protocol)
        self.info = check_served(model_cfg, protocol)
        self.fingerprint = served_fingerprint(model_cfg, protocol, self.info)
        self.fitter = None  # with a tokenizer: an LLMRecommender over it alone, whose fit_prompt is used
        if model_cfg.tokenizer:
            if llm_recommender is None:
                raise ValueError("model.tokenizer needs llm_recommender= (rankers.LLMRecommender; make_recommender)")
            self.fitter = self._fitter(model_cfg, protocol, llm_recommender)
        log.info("served model %s at %s: %s", self.model, self.url, self.info.fingerprint)
        self.match = match  # facterlab.models.rankers.match_to_candidates (given by make_recommender)
        if protocol == "rank" and self.ranker == "generate" and match is None:
            raise ValueError("the rank protocol's generate ranker needs match= (rankers.match_to_candidates)")

    def _fitter(self, model_cfg: ModelConfig, protocol: str, recommender: Callable):
        """The in-process recommender (``recommender``: :class:`facterlab.models.rankers.LLMRecommender`,
        which imports this module) over the tokenizer alone (:class:`TokenizerOnly`), for its prompt
        fitting: the context is the server's ``max_model_len`` (less the one token the likelihood
        ranker's echo request generates), else unlimited (then only ``max_prompt_tokens`` truncates)."""
        assert model_cfg.tokenizer is not None
        tok = load_tokenizer(model_cfg.tokenizer)
        window = self.info.max_model_len or _NO_LIMIT
        if self.ranker == "likelihood":
            window -= 1
        ok, why = supports_token_prompts(
            self.url,
            self.model,
            tuple(tok("One two three", add_special_tokens=False)["input_ids"]),
            min(self.timeout, 60.0),
            self.key_env,
        )
        if not ok:
            raise ServerError(
                NO_TOKEN_PROMPTS_MSG.format(
                    url=self.url, kind=self.info.kind, version=self.info.version, why=why, tokenizer=model_cfg.tokenizer
                )
            )
        if not check_tokenizer(tok, model_cfg.tokenizer, self.url, self.model, self.key_env):
            log.info(
                "served model %s: the server has no POST /tokenize, so facterlab cannot check that "
                "model.tokenizer=%r is its tokenizer",
                self.model,
                model_cfg.tokenizer,
            )
        return recommender(TokenizerOnly(tok, window, self.fingerprint), model_cfg, protocol)

    def predict(self, requests: Sequence[PromptRequest]) -> list:
        requests = list(requests)
        for r in requests:
            if self.protocol == "rank" and not r.candidates:
                raise ValueError("protocol 'rank' needs PromptRequest.candidates (candidate titles)")
        if self.fitter is not None:  # the tokenizer runs here, in this thread, never in the pool's
            if len(self.fitter._fit_memo) > 50_000:  # as LLMRecommender.predict bounds it
                self.fitter._fit_memo.clear()
            fitted = [self.fitter.fit_prompt(r) for r in requests]
            if self.ranker == "likelihood":
                cand = {c: self.fitter.lm.candidate_ids(c) for r in requests for c in (r.candidates or ())}
                fitted = [(ids, nd, [cand[c] for c in (r.candidates or ())]) for r, (ids, nd) in zip(requests, fitted)]
            else:
                fitted = [(ids, nd, None) for ids, nd in fitted]
            jobs = [functools.partial(self._one, r, f) for r, f in zip(requests, fitted)]
        else:
            jobs = [functools.partial(self._one, r, None) for r in requests]
        return self._run_jobs(jobs)

    def _run_jobs(self, jobs: list) -> list:
        """The jobs' answers in order, ``concurrency`` at a time.  The first error ends the batch at once
        (the jobs not started are cancelled; those in flight end by their own deadline), and while
        requests wait a progress line comes every :data:`PROGRESS_EVERY` seconds."""
        if not jobs:
            return []
        pool = ThreadPoolExecutor(max_workers=min(self.concurrency, len(jobs)), thread_name_prefix="served")
        # each job in a copy of this context: its hints name the flags of the command that asked
        futures = [pool.submit(contextvars.copy_context().run, job) for job in jobs]
        t0 = time.monotonic()
        # lines before a short deadline ends too; a wait past half of it (or STALL_WARNING) is a warning
        every = min(PROGRESS_EVERY, max(0.5, self.timeout / 4))
        stall = min(STALL_WARNING, self.timeout / 2)
        try:
            pending = set(futures)
            while pending:
                done, pending = wait(pending, timeout=every, return_when=FIRST_EXCEPTION)
                for fut in done:
                    if fut.exception() is not None:
                        raise fut.exception()  # type: ignore[misc]
                if pending:
                    waited = time.monotonic() - t0
                    # a wait of a minute or more is a warning: a sweep's workers show warnings only
                    log.log(
                        logging.WARNING if waited >= stall else logging.INFO,
                        "served model %s at %s: %d of %d requests answered, %d waiting for %s "
                        "(each ends by its %g s deadline; model.timeout)",
                        self.model, self.url, len(futures) - len(pending), len(futures),
                        min(len(pending), self.concurrency), format_seconds(waited), self.timeout,
                    )  # fmt: skip
            return [f.result() for f in futures]
        finally:
            pool.shutdown(wait=False, cancel_futures=True)

    def _one(self, req: PromptRequest, fitted: tuple | None) -> Prediction:
        if self.ranker == "likelihood":
            return self._likelihood(req) if fitted is None else self._likelihood_ids(req, *fitted)
        return self._generate(req, fitted)

    def _post(self, path: str, body: dict) -> dict:
        try:
            reply = _http(
                "POST",
                _url(self.url, path),
                body,
                timeout=self.timeout,
                retries=self.retries,
                backoff=self.backoff,
                key_env=self.key_env,
            )
        except NoAnswer as exc:
            cls = ServerUnavailable if exc.transient else ServerError
            raise cls(
                f"the server at {self.url} gave no answer to {path}: {exc.reason} "
                f"(deadline {self.timeout:g} s, {self.retries} retries: "
                f"{setting_hint('timeout', 'SECONDS')}, {setting_hint('max_retries', 'N')})"
            ) from None
        obj = reply.obj
        if reply.status != 200 or not isinstance(obj, dict):
            text = reply.what()
            hint = ""
            if "repetition_penalty" in text and "repetition_penalty" in body:
                hint = refusal_hint("repetition_penalty", body["repetition_penalty"])
            elif reply.status == 400 and _TOO_LONG.search(text) and self.fitter is None:
                hint = TOO_LONG_HINT.replace(
                    "model__tokenizer=NAME in a sweep's --set or in run_config", setting_hint("tokenizer", "NAME")
                )
            cls = ServerUnavailable if reply.status in _RETRY_STATUS else ServerError
            raise cls(f"the server at {self.url} answered {path} with HTTP {reply.status}: {text}{hint}")
        return obj

    def _generate(self, req: PromptRequest, fitted: tuple | None = None) -> Prediction:
        body: dict = {"model": self.model}
        if fitted is None:
            body["messages"] = req.message_dicts
            n_drop = 0
        else:
            body["prompt"], n_drop = list(fitted[0]), fitted[1]
        body |= {"max_tokens": int(self.cfg.max_new_tokens), "seed": int(req.seed), **sampling_fields(self.cfg)}
        path, field = ("/v1/chat/completions", "message.content") if fitted is None else ("/v1/completions", "text")
        obj = self._post(path, body)
        try:
            choice = obj["choices"][0]
            text = (choice["message"]["content"] if fitted is None else choice["text"]) or ""
        except (KeyError, IndexError, TypeError):
            raise ServerError(f"the server at {self.url} answered without choices[0].{field}") from None
        if self.protocol == "open":
            titles, status = parse_titles(text, req.k)
            return Prediction(titles=titles, parse_status=status, raw=text, n_truncated_history=n_drop)
        assert req.candidates is not None
        titles, status = parse_titles(text, len(req.candidates))
        assert self.match is not None
        perm, n = self.match(titles, req.candidates)
        return Prediction(titles=perm, parse_status=status, raw=text, n_model_positions=n, n_truncated_history=n_drop)

    def _no_logprobs(self) -> ServerError:
        return ServerError(
            NO_LOGPROBS_MSG.format(
                url=self.url,
                kind=self.info.kind,
                version=self.info.version,
                model=self.model,
                ranker=setting_hint("ranker", "generate"),
            )
        )

    def _echo(self, prompts: list, seed: int) -> list:
        """``POST /v1/completions`` with ``echo`` and ``logprobs`` for the prompts (texts or token ids): the
        choices in prompt order, one per prompt (else a :class:`ServerError`)."""
        body = {
            "model": self.model,
            "prompt": prompts,
            "max_tokens": 1,
            "temperature": 0,
            "echo": True,
            "logprobs": 1,
            "seed": int(seed),
        }
        obj = self._post("/v1/completions", body)
        choices = sorted(obj.get("choices") or [], key=lambda c: c.get("index", 0))
        if len(choices) != len(prompts):
            raise ServerError(f"the server at {self.url} answered {len(choices)} choices for {len(prompts)} prompts")
        return choices

    def _likelihood_ids(self, req: PromptRequest, ids: list, n_drop: int, cand_ids: list) -> Prediction:
        """The likelihood ranker over token ids: the in-process scorer's ``log p(c | x)``, summed over
        the echoed log-probabilities at the candidate's positions ``P .. P + m - 1``."""
        cands = list(req.candidates or ())
        if any(len(c) == 0 for c in cand_ids):
            raise ValueError("a candidate tokenised to zero tokens; cannot score an empty title")
        prompts = [list(ids) + list(c) for c in cand_ids]
        choices = self._echo(prompts, req.seed)
        P = len(ids)
        scores = []
        for prompt, ch in zip(prompts, choices):
            values = (ch.get("logprobs") or {}).get("token_logprobs")
            if not values:
                raise self._no_logprobs()
            picked = values[P : len(prompt)]
            if len(values) < len(prompt) or any(v is None for v in picked):
                raise ServerError(
                    f"the server at {self.url} echoed {len(values)} log-probabilities for a prompt of "
                    f"{len(prompt)} tokens; the candidate's are missing"
                )
            scores.append((float(sum(picked)), len(picked)))
        return ranked_by_scores(cands, scores, n_drop)

    def _likelihood(self, req: PromptRequest) -> Prediction:
        if req.candidates is None:
            raise ValueError("the likelihood ranker needs PromptRequest.candidates (candidate titles)")
        cands = list(req.candidates)
        context = transcript(req.message_dicts)
        prompts = [f"{context} {c}" for c in cands]
        choices = self._echo(prompts, req.seed)
        scores = []
        for prompt, ch in zip(prompts, choices):
            lp = ch.get("logprobs") or {}
            offsets, values = lp.get("text_offset"), lp.get("token_logprobs")
            if not offsets or not values:
                raise self._no_logprobs()
            start = len(context)  # the candidate's first token carries the space before it
            picked = [v for o, v in zip(offsets, values) if start <= o < len(prompt) and v is not None]
            if not picked:
                raise ServerError(
                    f"the server at {self.url} gave no token inside a candidate's text ({prompt[start:]!r})"
                )
            scores.append((float(sum(picked)), len(picked)))
        return ranked_by_scores(cands, scores)
