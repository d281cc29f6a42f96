"""A small OpenAI-compatible HTTP server (stdlib ``http.server``) for the served backend's tests.

It is a real server on a localhost port, spoken to over HTTP by
:class:`facterlab.models.served.ServedRecommender` exactly as vLLM would be; only its "model" is a
fixed, deterministic function of the prompt (no weights):

- ``POST /v1/chat/completions``: the numbered list lines (``1. Title``) of the last user message,
  in reverse order, as a JSON array (at most ``k_answer`` of them).
- ``POST /v1/completions`` with ``echo`` and ``logprobs``: the prompt split into whitespace-delimited
  tokens (``text_offset`` given), each token's log-probability ``-(1 + (sum of its bytes) % 7) / 4``
  (the first is ``null``, as OpenAI's API gives it), plus one generated token.  With
  ``logprobs=False`` (``no_logprobs=True``) it answers HTTP 200 without logprobs, as Ollama and
  ``transformers serve`` do.
- ``GET /v1/models``, ``GET /version``.

Knobs for the tests: ``strict`` (refuse fields outside OpenAI's API with HTTP 422, as
``transformers serve`` refuses ``repetition_penalty``), ``fail_first`` (answer that many requests with HTTP 503 first), ``delay``
(seconds per request), and ``requests``/``max_in_flight`` (what the server saw).
"""

from __future__ import annotations

import json
import re
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

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
_LINE = re.compile(r"^\s*\d{1,3}[.)]\s+(.*\S)\s*$")


def token_logprob(token: str) -> float:
    return -(1 + sum(token.encode()) % 7) / 4


def tokens_of(text: str) -> list:
    """``(offset, token)`` pairs: whitespace-delimited words, each with its leading whitespace."""
    return [(m.start(), m.group(0)) for m in re.finditer(r"\s*\S+", text)]


def chat_answer(messages: list, k_answer: int = 10) -> str:
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
    ):
        self.model = model
        self.strict = strict
        self.no_logprobs = no_logprobs
        self.fail_first = fail_first
        self.delay = delay
        self.requests: list = []
        self.in_flight = 0
        self.max_in_flight = 0
        self._lock = threading.Lock()
        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        self._thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    def __enter__(self):
        self._thread.start()
        return self

    def __exit__(self, *exc):
        self.httpd.shutdown()
        self.httpd.server_close()

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

            def do_GET(self):
                if self.path == "/v1/models":
                    data = [{"id": srv.model, "object": "model", "owned_by": "facterlab-test", "root": srv.model}]
                    return self._send(200, {"object": "list", "data": data})
                if self.path == "/version":
                    return self._send(200, {"version": VERSION})
                return self._send(404, {"error": {"message": f"no route {self.path}"}})

            def do_POST(self):
                body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))) or b"{}")
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
                        text = chat_answer(body["messages"])
                        return self._send(
                            200, {"object": "chat.completion", "choices": [{"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "stop"}]}
                        )  # fmt: skip
                    if self.path == "/v1/completions":
                        prompts = body["prompt"] if isinstance(body["prompt"], list) else [body["prompt"]]
                        return self._send(
                            200,
                            {
                                "object": "text_completion",
                                "choices": [self._completion(i, p, body) for i, p in enumerate(prompts)],
                            },
                        )
                    return self._send(404, {"error": {"message": f"no route {self.path}"}})
                finally:
                    with srv._lock:
                        srv.in_flight -= 1

            def _completion(self, i: int, prompt: str, body: dict) -> dict:
                choice = {"index": i, "text": " x", "finish_reason": "length"}
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
