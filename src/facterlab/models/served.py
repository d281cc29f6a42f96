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

This module holds the recommender (:class:`ServedRecommender`: prompts, generation, the likelihood
ranker, the batch's progress lines) and its fingerprint; the rest of the backend has its own rooms,
whose names this module re-exports: :mod:`facterlab.models.served_checks` (the questions asked before
any prompt, :func:`check_served`), :mod:`facterlab.models.served_http` (one request within its
deadline, the :data:`~facterlab.models.served_http.MAX_RESPONSE_BYTES` cap, :class:`ServerError`) and
:mod:`facterlab.models.served_hints` (which command's flags a hint names, :func:`command`).
"""

from __future__ import annotations

import contextvars
import functools
import hashlib
import logging
import re
import sys
import time
import types
from collections.abc import Callable, Sequence
from concurrent.futures import FIRST_EXCEPTION, ThreadPoolExecutor, wait
from typing import TYPE_CHECKING

from facterlab.config import ModelConfig
from facterlab.datatypes import Prediction, PromptRequest, Recommender
from facterlab.models.llm import CausalLM
from facterlab.models.parsing import PARSER_VERSION, parse_answer, ranked_by_scores
from facterlab.models.registry import resolve_llm

# The backend's other rooms (issue 32); every name that lived here is re-exported.  ``check_served`` is
# looked up in this module's namespace by ServedRecommender, so a patch of ``served.check_served`` reaches it.
from facterlab.models.served_checks import (  # noqa: F401
    NO_LOGPROBS_MSG,
    NO_TOKEN_PROMPTS_MSG,
    TOKENIZER_MISMATCH_MSG,
    TOKENIZER_PROBES,
    ServerInfo,
    check_served,
    check_tokenizer,
    probe_server,
    sampling_fields,
    server_of,
    server_token_ids,
    supports_prompt_logprobs,
    supports_sampling,
    supports_token_prompts,
)
from facterlab.models.served_hints import (  # noqa: F401
    _COMMAND,
    RUN_FLAGS,
    command,
    current_command,
    refusal_hint,
    setting_hint,
)
from facterlab.models.served_http import (  # noqa: F401
    _RETRY_STATUS,
    MAX_RESPONSE_BYTES,
    NoAnswer,
    Reply,
    ServerError,
    ServerUnavailable,
    _http,
    _url,
    api_key,
)
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

TOO_LONG_HINT = (
    " (the prompt does not fit the served model's context; set model.tokenizer to the model's tokenizer "
    "(model__tokenizer=NAME in a sweep's --set or in run_config) so that facterlab drops the oldest history titles "
    "until it fits, "
    "as the in-process backend does, or serve the model with a longer context)"
)
_TOO_LONG = re.compile(r"context length|context size|context window|max_model_len|maximum model length|too long", re.I)
#: the context a server that reports none is taken to have (only ``max_prompt_tokens`` truncates then)
_NO_LIMIT = 2**31
#: seconds between the progress lines while requests wait on a server
PROGRESS_EVERY = 15.0
#: seconds of waiting on one batch after which the progress lines are warnings (half the deadline
#: when that is shorter; the lines come every ``min(PROGRESS_EVERY, timeout / 4)`` seconds)
STALL_WARNING = 60.0


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


def transcript(messages: Sequence[dict]) -> str:
    """The plain text prompt of the likelihood ranker (module docstring).

    >>> transcript([{"role": "system", "content": "Be fair."}, {"role": "user", "content": "Hi"}])
    'System: Be fair.\\n\\nUser: Hi\\n\\nAssistant:'
    """
    parts = [f"{m['role'].capitalize()}: {m['content']}" for m in messages]
    return "\n\n".join(parts + ["Assistant:"])


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


class ServedRecommender(Recommender):
    """The recommender of a model behind an OpenAI-compatible server (vLLM, TGI, llama.cpp,
    ``transformers serve``; how it asks and caches: module docstring)."""

    takes_system_prompt = True  # FACTER's prompt repair applies (facterlab.datatypes.takes_system_prompt)

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
        """One prediction per request from the server, ``concurrency`` requests at a time (with a
        tokenizer, each prompt is fitted here first); the first error ends the batch.

        Parameters
        ----------
        requests : sequence of PromptRequest
            The requests (protocol ``"rank"``: each with its candidates).

        Returns
        -------
        list of Prediction
            ``len(requests)`` predictions, in the order of ``requests``.
        """
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
        t0 = time.monotonic()  # the deadline covers the exchange and the parsing (issue 44)
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
        # an answer longer than max_tokens can produce is cut before parsing and before the cache
        k = req.k if self.protocol == "open" else len(req.candidates or ())
        titles, status, text = parse_answer(text, k, self.cfg.max_new_tokens)
        if time.monotonic() - t0 > self.timeout:
            raise ServerUnavailable(
                f"the server at {self.url}: its answer to {path} and its parsing took "
                f"{time.monotonic() - t0:.3g} s, past the {self.timeout:g} s deadline ({setting_hint('timeout', 'SECONDS')})"
            )
        if self.protocol == "open":
            return Prediction(titles=titles, parse_status=status, raw=text, n_truncated_history=n_drop)
        assert req.candidates is not None
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
