"""A small OpenAI-compatible HTTP server (stdlib ``http.server``): try the served backend without a GPU,
and the served backend's tests.

``python -m facterlab.testing.server [--port 8000] [--model test-model] [--strict] [--no-logprobs]
[--misbehave hang|drip|huge|garbage|truncated|long]`` serves on ``127.0.0.1`` only (never another
interface) until Ctrl-C, and prints its URL; then ``facterlab run --model openai:test-model
--server-url http://127.0.0.1:8000 --encoder hash --temperature 0 --repetition-penalty 1`` audits it
(docs/SCALING.md).  ``--misbehave`` makes every POST fail as a broken server does (the
model list still answers): ``hang`` never answers, ``drip`` sends its body a byte a second, ``huge``
sends a body without end, ``garbage`` answers a line that is not HTTP (as a Dask scheduler's port
does), ``truncated`` sends HTTP 200 with half a JSON body, ``long`` a valid answer whose text is
:data:`LONG_ANSWER_BYTES` of an unclosed title list (longer than any ``max_tokens`` can produce).

It is a real server on a localhost port, spoken to over HTTP by
:class:`facterlab.models.served.ServedRecommender` exactly as vLLM would be; only its "model" is a
fixed, deterministic function of the prompt (no weights):

- ``POST /v1/chat/completions``: the numbered list lines (``1. Title``) of the last user message,
  in reverse order, as a JSON array (at most ``k_answer`` of them).
- ``POST /v1/completions`` with ``echo`` and ``logprobs``: the prompt split into whitespace-delimited
  tokens (``text_offset`` given), each token's log-probability ``-(1 + (sum of its bytes) % 7) / 4``
  (the first is ``null``, as OpenAI's API gives it), plus one generated token.  With
  ``logprobs=False`` (``no_logprobs=True``) it answers HTTP 200 without logprobs, as Ollama and
  ``transformers serve`` do.  A prompt of token ids (a list of ints, or a list of such lists) is
  taken too (``token_prompts=False`` refuses it with HTTP 400, as ``transformers serve`` does); token
  ``t``'s log-probability is then ``token_logprob(str(t))``, and without ``echo`` the answer is the
  chat answer of the decoded ids (``tokenizer=``) or ``"[]"``.
- ``GET /v1/models`` (with ``max_model_len`` when given), ``GET /version``.

With ``lm=`` (a :class:`facterlab.models.llm.CausalLM`, e.g. the bundled SmolLM2), ``/v1/completions``
is answered by that real model instead: a token-id prompt (or a text prompt, tokenised without
special tokens) is greedily continued with :meth:`~facterlab.models.llm.CausalLM.generate_ids` (one
request at a time, the in-process decode loop) and decoded without special tokens, as vLLM does; with
``echo`` and ``logprobs`` each prompt token's log-probability comes from one full forward pass over
the prompt (:meth:`~facterlab.models.llm.CausalLM.score_full`'s computation, not the packed scorer the
in-process likelihood ranker uses).

``max_model_len``: a prompt whose tokens plus ``max_tokens`` exceed it is refused with vLLM's HTTP 400
message (chat prompts are counted as the whitespace tokens of their messages).

Knobs for the tests: ``strict`` (refuse fields outside OpenAI's API with HTTP 422, as
``transformers serve`` refuses ``repetition_penalty``), ``fail_first`` (answer that many requests with HTTP 503 first), ``delay``
(seconds per request), ``misbehave`` (above) after ``misbehave_after`` good answers, ``api_key`` (answer HTTP 401 to any request without
``Authorization: Bearer <api_key>``), and ``requests``/``max_in_flight``/``auth`` (what the server saw).
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

__all__ = ["OpenAIServer", "MODEL", "MISBEHAVIOURS", "chat_answer", "token_logprob", "tokens_of", "main"]

MODEL = "test-model"
#: the request fields OpenAI's API defines (``strict=True`` refuses any other, as ``transformers serve`` does)
KNOWN_FIELDS = {
    "model",
    "messages",
    "prompt",
    "temperature",
    "top_p",
    "max_tokens",
    "seed",
    "echo",
    "logprobs",
    "n",
    "stop",
}
VERSION = "0.1-test"
#: the ways ``misbehave=`` breaks every POST (module docstring)
MISBEHAVIOURS = ("hang", "drip", "huge", "garbage", "truncated", "long")
#: the length of a ``long`` answer's text
LONG_ANSWER_BYTES = 8 * 2**20
_LINE = re.compile(r"^\s*\d{1,3}[.)]\s+(.*\S)\s*$")


def token_logprob(token: str) -> float:
    """The test server's deterministic log-probability of ``token`` (a function of its bytes)."""
    return -(1 + sum(token.encode()) % 7) / 4


def tokens_of(text: str) -> list:
    """``(offset, token)`` pairs: whitespace-delimited words, each with its leading whitespace."""
    return [(m.start(), m.group(0)) for m in re.finditer(r"\s*\S+", text)]


def chat_answer(messages: list, k_answer: int = 10) -> str:
    """The test server's answer: the numbered lines of the last user message, reversed, as a JSON list."""
    users = [m["content"] for m in messages if m.get("role") == "user"]
    lines = [m.group(1) for ln in (users[-1] if users else "").splitlines() if (m := _LINE.match(ln))]
    return json.dumps(list(reversed(lines))[:k_answer])


class OpenAIServer:
    """``with OpenAIServer() as srv: srv.url``: serves on ``127.0.0.1:<free port>`` in a thread."""

    def __init__(
        self,
        model: str = MODEL,
        no_logprobs: bool = False,
        fail_first: int = 0,
        delay: float = 0.0,
        strict: bool = False,
        max_model_len: int | None = None,
        token_prompts: bool = True,
        lm=None,
        tokenizer=None,
        misbehave: str | None = None,
        misbehave_after: int = 0,
        api_key: str | None = None,
        port: int = 0,
    ):
        if misbehave is not None and misbehave not in MISBEHAVIOURS:
            raise ValueError(f"unknown misbehaviour {misbehave!r}; choose one of {', '.join(MISBEHAVIOURS)}")
        self.misbehave = misbehave
        self.misbehave_after = int(misbehave_after)  # POSTs answered well before misbehaving
        self.api_key = api_key
        self.auth: list = []  # the Authorization header of every request (None when absent)
        self._stop = threading.Event()
        self.model = model
        self.max_model_len = max_model_len
        self.token_prompts = token_prompts
        self.lm = lm
        self.tokenizer = tokenizer if tokenizer is not None else getattr(lm, "tokenizer", None)
        self._lm_lock = threading.Lock()
        self.strict = strict
        self.no_logprobs = no_logprobs
        self.fail_first = fail_first
        self.delay = delay
        self.requests: list = []
        self.in_flight = 0
        self.max_in_flight = 0
        self._lock = threading.Lock()
        self.httpd = ThreadingHTTPServer(("127.0.0.1", int(port)), self._handler())  # this machine only
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        self._thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    def __enter__(self):
        self._thread.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        self.httpd.shutdown()
        self.httpd.server_close()

    def ids_of(self, text: str) -> list:
        """The stand-in model's token ids of ``text``, without special tokens."""
        return list(self.lm.tokenizer(text, add_special_tokens=False)["input_ids"])

    def prompt_logprobs(self, ids: list) -> list:
        """``log p(ids[j] | ids[:j])`` for ``j >= 1``, from one full forward pass of :attr:`lm`."""
        import torch

        x = torch.tensor([list(ids)])
        with torch.inference_mode():
            logits = self.lm.model(input_ids=x, use_cache=False).logits[0, :-1].float()
            lp = torch.log_softmax(logits, dim=-1).gather(1, x[0, 1:].view(-1, 1))[:, 0]
        return [float(v) for v in lp]

    def too_long(self, n_prompt: int, body: dict) -> dict | None:
        """vLLM's HTTP 400 body when ``n_prompt + max_tokens`` exceeds :attr:`max_model_len`."""
        n_new = int(body.get("max_tokens") or 16)
        if self.max_model_len is None or n_prompt + n_new <= self.max_model_len:
            return None
        message = (
            f"This model's maximum context length is {self.max_model_len} tokens. However, you requested "
            f"{n_prompt + n_new} tokens ({n_prompt} in the messages, {n_new} in the completion). "
            "Please reduce the length of the messages or completion."
        )
        return {"object": "error", "message": message, "type": "BadRequestError", "param": None, "code": 400}

    def _handler(self):
        srv = self

        class Handler(BaseHTTPRequestHandler):
            server_version = f"facterlab-openai-test/{VERSION}"

            def log_message(self, *args):  # quiet
                return

            def _send(self, code: int, obj: dict) -> None:
                body = json.dumps(obj).encode()
                self.send_response(code)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def _authorised(self) -> bool:
                got = self.headers.get("Authorization")
                with srv._lock:
                    srv.auth.append(got)
                if srv.api_key is None or got == f"Bearer {srv.api_key}":
                    return True
                self._send(401, {"error": {"message": "Incorrect API key provided", "code": "invalid_api_key"}})
                return False

            def _misbehave(self) -> None:
                """Break this answer as :attr:`misbehave` says (module docstring)."""
                how = srv.misbehave
                try:
                    if how == "hang":
                        srv._stop.wait()
                    elif how == "garbage":
                        self.wfile.write(b"\x00\x01 this is not HTTP\r\n")
                    elif how == "long":
                        text = '["Toy Story (1995)", ' * (LONG_ANSWER_BYTES // 21)
                        choice = {"index": 0, "text": text, "message": {"role": "assistant", "content": text}}
                        self._send(200, {"object": "chat.completion", "choices": [choice]})
                    elif how == "truncated":
                        body = json.dumps({"choices": [{"index": 0, "text": "[]"}]}).encode()
                        self.send_response(200)
                        self.send_header("Content-Type", "application/json")
                        self.send_header("Content-Length", str(len(body) // 2))
                        self.end_headers()
                        self.wfile.write(body[: len(body) // 2])
                    elif how == "drip":
                        self.send_response(200)
                        self.send_header("Content-Type", "application/json")
                        self.send_header("Content-Length", "1000000")
                        self.end_headers()
                        while not srv._stop.wait(1.0):
                            self.wfile.write(b" ")
                            self.wfile.flush()
                    elif how == "huge":
                        self.send_response(200)
                        self.send_header("Content-Type", "application/json")
                        self.end_headers()
                        block = b" " * 65536
                        while not srv._stop.is_set():
                            self.wfile.write(block)
                except OSError:  # the client gave up
                    pass
                self.close_connection = True

            def do_GET(self):
                if not self._authorised():
                    return None
                if self.path == "/v1/models":
                    data: list[dict] = [
                        {"id": srv.model, "object": "model", "owned_by": "facterlab-test", "root": srv.model}
                    ]
                    if srv.max_model_len:
                        data[0]["max_model_len"] = srv.max_model_len
                    return self._send(200, {"object": "list", "data": data})
                if self.path == "/version":
                    return self._send(200, {"version": VERSION})
                return self._send(404, {"error": {"message": f"no route {self.path}"}})

            def do_POST(self):
                body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))) or b"{}")
                if not self._authorised():
                    return None
                with srv._lock:
                    broken = srv.misbehave is not None and srv.misbehave_after <= 0
                    srv.misbehave_after -= 1
                if broken:
                    with srv._lock:
                        srv.requests.append((self.path, body))
                    return self._misbehave()
                with srv._lock:
                    srv.requests.append((self.path, body))
                    srv.in_flight += 1
                    srv.max_in_flight = max(srv.max_in_flight, srv.in_flight)
                    fail = srv.fail_first > 0
                    srv.fail_first -= int(fail)
                try:
                    time.sleep(srv.delay)
                    if fail:
                        return self._send(503, {"error": {"message": "overloaded, try again"}})
                    if srv.strict and set(body) - KNOWN_FIELDS:  # as transformers serve: HTTP 422
                        return self._send(
                            422, {"detail": f"Unexpected fields in the request: {set(body) - KNOWN_FIELDS}"}
                        )
                    if body.get("model") != srv.model:
                        return self._send(
                            404, {"error": {"message": f"The model `{body.get('model')}` does not exist."}}
                        )
                    if self.path == "/v1/chat/completions":
                        n = sum(len(tokens_of(m["content"])) for m in body["messages"])
                        if (too_long := srv.too_long(n, body)) is not None:
                            return self._send(400, too_long)
                        text = chat_answer(body["messages"])
                        return self._send(
                            200, {"object": "chat.completion", "choices": [{"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "stop"}]}
                        )  # fmt: skip
                    if self.path == "/tokenize" and srv.tokenizer is not None:  # vLLM's endpoint
                        ids = srv.tokenizer(body["prompt"], add_special_tokens=bool(body.get("add_special_tokens")))
                        tokens = list(ids["input_ids"])
                        return self._send(
                            200, {"tokens": tokens, "count": len(tokens), "max_model_len": srv.max_model_len}
                        )
                    if self.path == "/v1/completions":
                        prompt = body["prompt"]
                        if isinstance(prompt, list) and prompt and all(isinstance(t, int) for t in prompt):
                            prompts = [prompt]
                        else:
                            prompts = prompt if isinstance(prompt, list) else [prompt]
                        if any(not isinstance(p, str) for p in prompts) and not srv.token_prompts:
                            return self._send(400, {"detail": "prompt must be a string."})  # transformers serve
                        for p in prompts:
                            n = len(p) if isinstance(p, list) else len(srv.ids_of(p) if srv.lm else tokens_of(p))
                            if (too_long := srv.too_long(n, body)) is not None:
                                return self._send(400, too_long)
                        make = self._lm_completion if srv.lm is not None else self._completion
                        return self._send(
                            200,
                            {"object": "text_completion", "choices": [make(i, p, body) for i, p in enumerate(prompts)]},
                        )
                    return self._send(404, {"error": {"message": f"no route {self.path}"}})
                finally:
                    with srv._lock:
                        srv.in_flight -= 1

            def _lm_completion(self, i: int, prompt, body: dict) -> dict:
                ids = prompt if isinstance(prompt, list) else srv.ids_of(prompt)
                with srv._lm_lock:
                    if body.get("echo") and body.get("logprobs") and not srv.no_logprobs:
                        lps = [None] + srv.prompt_logprobs(ids)
                        tokens = [srv.lm.tokenizer.decode([t]) for t in ids]
                        offsets = [sum(len(t) for t in tokens[:j]) for j in range(len(tokens))]
                        logprobs = {"tokens": tokens, "token_logprobs": lps, "text_offset": offsets}
                        return {"index": i, "text": "", "finish_reason": "length", "logprobs": logprobs}
                    from facterlab.models.llm import DecodingParams

                    params = DecodingParams(
                        temperature=0.0,
                        max_new_tokens=int(body.get("max_tokens", 16)),
                        repetition_penalty=float(body.get("repetition_penalty", 1.0)),
                    )
                    [new] = srv.lm.generate_ids([ids], [int(body.get("seed", 0))], params)
                text = srv.lm.tokenizer.decode(new, skip_special_tokens=True)
                return {"index": i, "text": text, "finish_reason": "stop", "logprobs": None}

            def _completion(self, i: int, prompt, body: dict) -> dict:
                choice = {"index": i, "text": " x", "finish_reason": "length"}
                if isinstance(prompt, list):  # token ids
                    if not body.get("echo"):
                        text = srv.tokenizer.decode(prompt) if srv.tokenizer is not None else ""
                        return {**choice, "text": chat_answer([{"role": "user", "content": text}]), "logprobs": None}
                    if srv.no_logprobs or not body.get("logprobs"):
                        return {**choice, "logprobs": None}
                    lps = [None] + [token_logprob(str(t)) for t in prompt[1:]] + [token_logprob(" x")]
                    logprobs = {"tokens": [str(t) for t in prompt] + [" x"], "token_logprobs": lps}
                    return {**choice, "logprobs": logprobs}
                if srv.no_logprobs or not body.get("logprobs"):
                    return {**choice, "logprobs": None}
                toks = tokens_of(prompt) if body.get("echo") else []
                toks.append((len(prompt), " x"))
                lps = [token_logprob(t) for _, t in toks]
                if body.get("echo"):
                    lps[0] = None
                return {
                    **choice,
                    "text": (prompt if body.get("echo") else "") + " x",
                    "logprobs": {
                        "tokens": [t for _, t in toks],
                        "token_logprobs": lps,
                        "text_offset": [o for o, _ in toks],
                    },
                }

        return Handler


def main(argv: list | None = None) -> int:
    """``python -m facterlab.testing.server``: serve on 127.0.0.1 until interrupted (module docstring)."""
    p = argparse.ArgumentParser(
        prog="python -m facterlab.testing.server",
        description="A small OpenAI-compatible server on 127.0.0.1 with a deterministic stand-in model (no weights)",
    )
    p.add_argument("--port", type=int, default=8000, help="port on 127.0.0.1 (0: a free one; default 8000)")
    p.add_argument("--model", default=MODEL, help=f"the model id it lists (default {MODEL})")
    p.add_argument(
        "--strict", action="store_true", help="refuse fields outside OpenAI's API (HTTP 422), as transformers serve"
    )
    p.add_argument("--no-logprobs", action="store_true", help="answer without prompt log-probabilities, as Ollama")
    p.add_argument("--max-model-len", type=int, default=None, help="the context it reports and enforces")
    p.add_argument("--misbehave", default=None, choices=MISBEHAVIOURS, help="break every POST this way")
    p.add_argument("--api-key-env", default=None, metavar="NAME", help="require the key in this environment variable")
    args = p.parse_args(argv)
    if not 0 <= args.port <= 65535:
        p.error(f"--port {args.port}: must be in 0..65535")
    key = None
    if args.api_key_env:
        import os

        key = os.environ.get(args.api_key_env) or p.error(f"--api-key-env: ${args.api_key_env} is not set")
    try:
        srv = OpenAIServer(
            model=args.model,
            no_logprobs=args.no_logprobs,
            strict=args.strict,
            max_model_len=args.max_model_len,
            misbehave=args.misbehave,
            api_key=key,
            port=args.port,
        )
    except OSError as exc:
        print(f"error: cannot listen on 127.0.0.1:{args.port} ({exc.strerror or exc}); try --port 0", file=sys.stderr)
        return 2
    with srv:
        print(f"serving model {args.model!r} at {srv.url} (Ctrl-C stops)", flush=True)
        try:
            srv._thread.join()
        except KeyboardInterrupt:
            pass
    return 0


if __name__ == "__main__":
    sys.exit(main())
