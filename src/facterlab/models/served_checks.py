"""What the served backend asks a server before any prompt goes out, each question once per process:
does it serve the model (:func:`probe_server`, which also reads its kind and version into a
:class:`ServerInfo`), does it return prompt log-probabilities (:func:`supports_prompt_logprobs`), take
token-id prompts (:func:`supports_token_prompts`), tokenise as ``model.tokenizer`` does
(:func:`check_tokenizer`), and take the config's decoding fields (:func:`supports_sampling`); and
:func:`check_served`, which asks them all for one config and says in one line what to change.

:mod:`facterlab.models.served` (the recommender) re-exports every name here; the HTTP exchange is
:mod:`facterlab.models.served_http`.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

from facterlab.config import ModelConfig
from facterlab.models.registry import SERVED_PREFIX, served_model_id
from facterlab.models.served_hints import refusal_hint, setting_hint
from facterlab.models.served_http import _RETRY_STATUS, NoAnswer, ServerError, ServerUnavailable, _http, _url, api_key

__all__ = [
    "NO_LOGPROBS_MSG",
    "NO_TOKEN_PROMPTS_MSG",
    "TOKENIZER_MISMATCH_MSG",
    "TOKENIZER_PROBES",
    "ServerInfo",
    "probe_server",
    "supports_prompt_logprobs",
    "supports_token_prompts",
    "sampling_fields",
    "supports_sampling",
    "server_token_ids",
    "check_tokenizer",
    "server_of",
    "check_served",
]

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
        """The served model's identity: ``openai:<model>@<kind>-<version>[<details>]``.

        Returns
        -------
        str
            The model id, the server's kind and version, and the model's identifying details.
        """
        extra = ",".join(f"{k}={v}" for k, v in self.details)
        return f"{SERVED_PREFIX}{self.model}@{self.kind}-{self.version}" + (f"[{extra}]" if extra else "")


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


def server_of(model_cfg: ModelConfig) -> tuple:
    """``(server URL, model id)`` of a served model's config; a clear error when either is missing."""
    model = served_model_id(model_cfg.llm)
    if model is None:
        raise ValueError(f"model {model_cfg.llm!r} is not a served model ('{SERVED_PREFIX}<model id>')")
    if not model_cfg.server_url:
        raise ServerError(f"model {model_cfg.llm!r} needs the server's URL: --server-url http://HOST:PORT")
    return model_cfg.server_url, model


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
