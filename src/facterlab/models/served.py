"""A recommender answered by an OpenAI-compatible server: ``--model openai:<model id> --server-url URL``
(vLLM, SGLang, llama.cpp, Ollama, ``transformers serve``, an API; docs/SCALING.md).

It is a :class:`~facterlab.datatypes.Recommender` like :class:`~facterlab.models.rankers.LLMRecommender`
and goes through the same kill-safe prediction cache (:class:`~facterlab.models.cache.CachedRecommender`).

The server is asked once per process (:func:`probe_server`) before any other work: ``GET /v1/models``
must answer and list the model; otherwise one line says which (unreachable, or the models it serves).

Generation: ``POST /v1/chat/completions`` with the request's messages, the config's decoding
(``temperature``, ``top_p``, ``max_tokens``; ``temperature = 0`` is greedy, the reproducible choice
on a server) and the request's ``seed``.  Titles are parsed, and for the rank protocol matched to the
candidates, exactly as for the in-process model.  Requests run ``concurrency`` at a time; each has a
``timeout`` and is retried with exponential backoff (connection errors, HTTP 429 and 5xx), at most
``retries`` times.

Likelihood ranker (rank protocol): ``POST /v1/completions`` with ``echo`` and ``logprobs``, one prompt
per candidate (``prompt + candidate``): ``log p(c | x)`` is the sum of the log-probabilities of the
echoed tokens that start at or after the space before the candidate.  The prompt text is a plain
transcript of the messages (``System: ...``, ``User: ...``, ``Assistant:``), not the model's chat
template (the tokenizer is not needed), so scores differ from the in-process scorer's.  A token that
straddles the prompt/candidate boundary is counted with the prompt.  Servers differ here: vLLM returns
prompt logprobs; llama.cpp rejects ``echo``; Ollama and ``transformers serve`` answer without logprobs.
So the server is probed once (:func:`supports_prompt_logprobs`) and one that drops them is refused with
a line that points to ``--ranker generate``.

Fingerprint: the served model's id, the server's kind and version (``GET /version``, else the HTTP
``Server`` header), the model's ``root``/``owned_by``/``max_model_len`` and any quantisation the
server reports in ``/v1/models``, plus the decoding parameters and the parser version; hashed, with
the server's kind/version (and quantisation, revision) also written out at its end, e.g.
``openai:my-model:open:generate:f98bdedd61cc[server=vllm/0.11.0]``.  The server's
URL is not part of it (the same model served elsewhere shares the cache).
"""

from __future__ import annotations

import functools
import hashlib
import json
import logging
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

from facterlab.config import ModelConfig
from facterlab.datatypes import PARSE_NA, Prediction, PromptRequest, Recommender
from facterlab.models.parsing import PARSER_VERSION, parse_titles
from facterlab.models.registry import SERVED_PREFIX, served_model_id

__all__ = [
    "ServerError",
    "ServerInfo",
    "ServedRecommender",
    "probe_server",
    "supports_prompt_logprobs",
    "served_fingerprint",
    "transcript",
    "NO_LOGPROBS_MSG",
    "server_of",
]

log = logging.getLogger(__name__)

NO_LOGPROBS_MSG = (
    "the server at {url} ({kind} {version}) returned no prompt log-probabilities for model {model!r} "
    "(POST /v1/completions with echo and logprobs), which the likelihood ranker needs; use --ranker generate, "
    "or serve the model with vLLM (docs/SCALING.md)"
)
#: HTTP statuses worth another try
_RETRY_STATUS = (408, 425, 429, 500, 502, 503, 504)


class ServerError(ValueError):
    """The server cannot be used: unreachable, model unknown, an answer without what we need."""


@dataclass(frozen=True)
class ServerInfo:
    """What the server says about itself and the model (:func:`probe_server`)."""

    url: str
    model: str
    kind: str
    version: str
    details: tuple  # (key, value) pairs of the model's /v1/models entry that identify it

    @property
    def fingerprint(self) -> str:
        extra = ",".join(f"{k}={v}" for k, v in self.details)
        return f"{SERVED_PREFIX}{self.model}@{self.kind}-{self.version}" + (f"[{extra}]" if extra else "")


def _url(base: str, path: str) -> str:
    base = base.rstrip("/")
    if base.endswith("/v1") and path.startswith("/v1/"):
        base = base[: -len("/v1")]
    return base + path


def _http(
    method: str, url: str, body: dict | None = None, timeout: float = 60.0, retries: int = 0, backoff: float = 0.5
) -> tuple:
    """``(status, json or None, headers)``; retries connection errors, timeouts and 429/5xx with
    exponential backoff; raises the last ``urllib``/``OSError`` when the attempts run out."""
    data = None if body is None else json.dumps(body).encode()
    headers = {"Content-Type": "application/json", "Accept": "application/json"}
    for attempt in range(retries + 1):
        req = urllib.request.Request(url, data=data, method=method, headers=headers)
        try:
            with urllib.request.urlopen(req, timeout=timeout) as resp:
                raw = resp.read()
                return resp.status, _json(raw), dict(resp.headers)
        except urllib.error.HTTPError as exc:
            raw = exc.read()
            if exc.code not in _RETRY_STATUS or attempt == retries:
                return exc.code, _json(raw), dict(exc.headers or {})
        except (urllib.error.URLError, OSError):
            if attempt == retries:
                raise
        time.sleep(backoff * 2**attempt)
    raise AssertionError("unreachable")


def _json(raw: bytes):
    try:
        return json.loads(raw or b"null")
    except ValueError:
        return None


def _error_text(obj) -> str:
    if isinstance(obj, dict):
        err = obj.get("error", obj.get("detail", obj))
        if isinstance(err, dict):
            err = err.get("message", err)
        return str(err)[:300]
    return str(obj)[:300]


@functools.lru_cache(maxsize=32)
def probe_server(url: str, model: str, timeout: float = 10.0) -> ServerInfo:
    """Ask the server at ``url`` for its models and version (once per process and ``(url, model)``);
    :class:`ServerError` in one line when it cannot be reached or does not serve ``model``."""
    try:
        status, obj, headers = _http("GET", _url(url, "/v1/models"), timeout=timeout, retries=1)
    except (urllib.error.URLError, OSError) as exc:
        reason = getattr(exc, "reason", exc)
        raise ServerError(
            f"cannot reach the OpenAI-compatible server at {url} ({reason}); start it or pass the right --server-url"
        ) from None
    if status != 200 or not isinstance(obj, dict) or not isinstance(obj.get("data"), list):
        raise ServerError(
            f"the server at {url} did not answer GET /v1/models with a model list (HTTP {status}: {_error_text(obj)}); "
            "is it an OpenAI-compatible server?"
        )
    entries = {str(m.get("id")): m for m in obj["data"] if isinstance(m, dict)}
    if model not in entries:
        served = ", ".join(repr(m) for m in sorted(entries)) or "none"
        raise ServerError(f"the server at {url} does not serve model {model!r}; it serves: {served}")
    kind, version = _server_kind(url, headers, timeout)
    entry = entries[model]
    keep = ("root", "owned_by", "max_model_len", "quantization", "revision", "parent")
    details = tuple((k, str(entry[k])) for k in keep if entry.get(k) not in (None, "", model))
    return ServerInfo(url, model, kind, version, details)


def _server_kind(url: str, headers: dict, timeout: float) -> tuple:
    """``(kind, version)``: vLLM answers ``GET /version``; otherwise the ``Server`` header's name/version."""
    server = str(headers.get("Server") or headers.get("server") or "").split()
    try:
        status, obj, _ = _http("GET", _url(url, "/version"), timeout=timeout)
    except (urllib.error.URLError, OSError):
        status, obj = 0, None
    if status == 200 and isinstance(obj, dict) and obj.get("version"):
        name = server[0].split("/")[0] if server and not server[0].lower().startswith("uvicorn") else "vllm"
        return name, str(obj["version"])
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
def supports_prompt_logprobs(url: str, model: str, timeout: float = 30.0) -> bool:
    """Whether ``POST /v1/completions`` with ``echo`` and ``logprobs`` returns the prompt's token
    log-probabilities (asked once per process)."""
    body = {"model": model, "prompt": "One two three", "max_tokens": 1, "temperature": 0, "echo": True, "logprobs": 1}
    try:
        status, obj, _ = _http("POST", _url(url, "/v1/completions"), body, timeout=timeout, retries=1)
    except (urllib.error.URLError, OSError):
        return False
    if status != 200 or not isinstance(obj, dict):
        return False
    try:
        lp = obj["choices"][0]["logprobs"]
        values = [x for x in lp["token_logprobs"] if x is not None]
        return len(values) >= 2 and len(lp["text_offset"]) == len(lp["token_logprobs"])
    except (KeyError, IndexError, TypeError):
        return False


def effective_ranker(model_cfg: ModelConfig, protocol: str) -> str:
    """As :func:`facterlab.models.rankers.effective_ranker` (which imports this module)."""
    return model_cfg.ranker if protocol == "rank" else "generate"


def served_fingerprint(model_cfg: ModelConfig, protocol: str, info: ServerInfo) -> str:
    """What the served recommender's answers depend on (as :func:`facterlab.models.rankers.recommender_fingerprint`)."""
    ranker = effective_ranker(model_cfg, protocol)
    dec = (
        f"T={model_cfg.temperature},p={model_cfg.top_p},n={model_cfg.max_new_tokens},r={model_cfg.repetition_penalty}"
        if ranker == "generate"
        else "echo-logprobs-transcript"
    )
    ident = f"{info.fingerprint}|{protocol}|{ranker}|{dec}|parser={PARSER_VERSION}"
    named = "".join(f",{k}={v}" for k, v in info.details if k in ("quantization", "revision"))
    digest = hashlib.sha256(ident.encode()).hexdigest()[:12]
    return f"{model_cfg.llm}:{protocol}:{ranker}:{digest}[server={info.kind}/{info.version}{named}]"


def server_of(model_cfg: ModelConfig) -> tuple:
    model = served_model_id(model_cfg.llm)
    if model is None:
        raise ValueError(f"model {model_cfg.llm!r} is not a served model ('{SERVED_PREFIX}<model id>')")
    if not model_cfg.server_url:
        raise ServerError(f"model {model_cfg.llm!r} needs the server's URL: --server-url http://HOST:PORT")
    return model_cfg.server_url, model


class ServedRecommender(Recommender):
    """The recommender of an OpenAI-compatible server (module docstring)."""

    def __init__(
        self,
        model_cfg: ModelConfig,
        protocol: str,
        concurrency: int = 4,
        timeout: float = 300.0,
        retries: int = 3,
        backoff: float = 0.5,
        match: Callable | None = None,
    ):
        if protocol not in ("open", "rank"):
            raise ValueError(f"unknown protocol {protocol!r}; choose 'open' or 'rank'")
        if not 1 <= int(concurrency) <= 256:
            raise ValueError(f"concurrency must be an integer in [1, 256], got {concurrency!r}")
        if not 0 <= int(retries) <= 10:
            raise ValueError(f"retries must be an integer in [0, 10], got {retries!r}")
        self.url, self.model = server_of(model_cfg)
        self.info = probe_server(self.url, self.model)
        self.cfg = model_cfg
        self.protocol = protocol
        self.ranker = effective_ranker(model_cfg, protocol)
        if self.ranker == "likelihood" and not supports_prompt_logprobs(self.url, self.model):
            raise ServerError(
                NO_LOGPROBS_MSG.format(url=self.url, kind=self.info.kind, version=self.info.version, model=self.model)
            )
        self.concurrency, self.timeout, self.retries, self.backoff = (
            int(concurrency),
            float(timeout),
            int(retries),
            backoff,
        )
        self.fingerprint = served_fingerprint(model_cfg, protocol, self.info)
        log.info("served model %s at %s: %s", self.model, self.url, self.info.fingerprint)
        self.match = match  # facterlab.models.rankers.match_to_candidates (given by make_recommender)
        if protocol == "rank" and self.ranker == "generate" and match is None:
            raise ValueError("the rank protocol's generate ranker needs match= (rankers.match_to_candidates)")

    def predict(self, requests: Sequence[PromptRequest]) -> list:
        requests = list(requests)
        for r in requests:
            if self.protocol == "rank" and not r.candidates:
                raise ValueError("protocol 'rank' needs PromptRequest.candidates (candidate titles)")
        one = self._likelihood if self.ranker == "likelihood" else self._generate
        if len(requests) <= 1 or self.concurrency == 1:
            return [one(r) for r in requests]
        with ThreadPoolExecutor(max_workers=min(self.concurrency, len(requests))) as pool:
            return list(pool.map(one, requests))

    def _post(self, path: str, body: dict) -> dict:
        try:
            status, obj, _ = _http(
                "POST", _url(self.url, path), body, timeout=self.timeout, retries=self.retries, backoff=self.backoff
            )
        except (urllib.error.URLError, OSError) as exc:
            reason = getattr(exc, "reason", exc)
            raise ServerError(
                f"the server at {self.url} stopped answering ({reason}) after {self.retries + 1} attempts"
            ) from None
        if status != 200 or not isinstance(obj, dict):
            text = _error_text(obj)
            hint = ""
            if "repetition_penalty" in text and "repetition_penalty" in body:
                hint = (
                    f" (this server does not take repetition_penalty, which the config sets to "
                    f"{body['repetition_penalty']:g}: set model__repetition_penalty=1.0, or serve the model with vLLM)"
                )
            raise ServerError(f"the server at {self.url} answered {path} with HTTP {status}: {text}{hint}")
        return obj

    def _generate(self, req: PromptRequest) -> Prediction:
        body = {
            "model": self.model,
            "messages": req.message_dicts,
            "temperature": float(self.cfg.temperature),
            "max_tokens": int(self.cfg.max_new_tokens),
            "seed": int(req.seed),
        }
        if self.cfg.temperature > 0:
            body["top_p"] = float(self.cfg.top_p)
        if self.cfg.repetition_penalty != 1.0:
            body["repetition_penalty"] = float(self.cfg.repetition_penalty)  # vLLM, SGLang, TGI accept it
        obj = self._post("/v1/chat/completions", body)
        try:
            text = obj["choices"][0]["message"]["content"] or ""
        except (KeyError, IndexError, TypeError):
            raise ServerError(f"the server at {self.url} answered without choices[0].message.content") from None
        if self.protocol == "open":
            titles, status = parse_titles(text, req.k)
            return Prediction(titles=titles, parse_status=status, raw=text)
        assert req.candidates is not None
        titles, status = parse_titles(text, len(req.candidates))
        assert self.match is not None
        perm, n = self.match(titles, req.candidates)
        return Prediction(titles=perm, parse_status=status, raw=text, n_model_positions=n)

    def _likelihood(self, req: PromptRequest) -> Prediction:
        if req.candidates is None:
            raise ValueError("the likelihood ranker needs PromptRequest.candidates (candidate titles)")
        cands = list(req.candidates)
        context = transcript(req.message_dicts)
        prompts = [f"{context} {c}" for c in cands]
        body = {
            "model": self.model,
            "prompt": prompts,
            "max_tokens": 1,
            "temperature": 0,
            "echo": True,
            "logprobs": 1,
            "seed": int(req.seed),
        }
        obj = self._post("/v1/completions", body)
        choices = sorted(obj.get("choices") or [], key=lambda c: c.get("index", 0))
        if len(choices) != len(cands):
            raise ServerError(f"the server at {self.url} answered {len(choices)} choices for {len(cands)} prompts")
        scores = []
        for prompt, ch in zip(prompts, choices):
            lp = ch.get("logprobs") or {}
            offsets, values = lp.get("text_offset"), lp.get("token_logprobs")
            if not offsets or not values:
                raise ServerError(
                    NO_LOGPROBS_MSG.format(
                        url=self.url, kind=self.info.kind, version=self.info.version, model=self.model
                    )
                )
            start = len(context)  # the candidate's first token carries the space before it
            picked = [v for o, v in zip(offsets, values) if start <= o < len(prompt) and v is not None]
            if not picked:
                raise ServerError(
                    f"the server at {self.url} gave no token inside a candidate's text ({prompt[start:]!r})"
                )
            scores.append((float(sum(picked)), len(picked)))
        order = sorted(range(len(cands)), key=lambda i: (-scores[i][0], i))
        raw = json.dumps(
            {"sum_logprob": [round(s, 6) for s, _ in scores], "mean_logprob": [round(s / n, 6) for s, n in scores]}
        )
        return Prediction(
            titles=tuple(cands[i] for i in order), parse_status=PARSE_NA, raw=raw, n_model_positions=len(cands)
        )
