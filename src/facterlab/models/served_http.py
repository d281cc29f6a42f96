"""The HTTP exchange with an OpenAI-compatible server: one request within one total deadline, its
retries included (:func:`_http`), a watchdog that closes the socket at the deadline, the
:data:`MAX_RESPONSE_BYTES` cap on a body, what a server that did not answer did, in one line
(:class:`NoAnswer`), and the errors the served backend raises (:class:`ServerError`,
:class:`ServerUnavailable`).

Only transport: what is asked and why is :mod:`facterlab.models.served_checks` (before any prompt)
and :mod:`facterlab.models.served` (the recommender, which re-exports the public names here).
"""

from __future__ import annotations

import http.client
import json
import os
import socket
import ssl
import threading
import time
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from facterlab.models.served_hints import setting_hint

__all__ = ["ServerError", "ServerUnavailable", "NoAnswer", "Reply", "api_key", "MAX_RESPONSE_BYTES"]

#: HTTP statuses worth another try
_RETRY_STATUS = (408, 425, 429, 500, 502, 503, 504)


class ServerError(ValueError):
    """The server cannot be used: model unknown, a refusal, an answer without what we need.  The same
    request gets the same answer, so an executor does not run the task again (``permanent``)."""

    permanent = True


class ServerUnavailable(ServerError):
    """The server did not answer (unreachable, reset, past the deadline): another attempt later may."""

    permanent = False


def _url(base: str, path: str) -> str:
    base = base.rstrip("/")
    if base.endswith("/v1") and path.startswith("/v1/"):
        base = base[: -len("/v1")]
    return base + path


#: the largest response body read from a server (an echo answer with log-probabilities for 20
#: candidates of 2,000 tokens each is about 6 MB); a longer one is an error that says so
MAX_RESPONSE_BYTES = 64 * 2**20


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
    bad = next((i for i, c in enumerate(key) if not ("!" <= c <= "~")), None)
    if bad is not None:  # an HTTP header carries printable ASCII only; the key itself is never shown
        c = key[bad]
        what = (
            "a line break" if c in "\r\n"
            else "whitespace" if c.isspace()
            else "a control character" if not c.isprintable()
            else "a character outside ASCII"
        )  # fmt: skip
        raise ServerError(
            f"the API key in ${env} has {what} at character {bad + 1} of {len(key)}, which an HTTP "
            f"Authorization header cannot carry: export {env} again with the key alone (the key is never shown)"
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
        try:
            conn.request(method, target, body=data, headers=headers)
        except (ValueError, UnicodeError) as exc:  # a header http.client refuses: its text would echo it
            raise NoAnswer(f"the request could not be sent ({type(exc).__name__} in its headers)", False) from None
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
