"""A served model's name and its server: ``openai:<model id>`` (:data:`SERVED_PREFIX`,
:func:`is_served_name`), the checks of a server URL (:func:`server_url_problem`) and of an API key's
variable name, and the transport settings that stay out of every run id (:data:`TRANSPORT_FIELDS`).

:class:`facterlab.config.ModelConfig` checks its served-model fields with these (and
:mod:`facterlab.config` re-exports every name here); the served backend itself is
:mod:`facterlab.models.served`.
"""

from __future__ import annotations

import re
from typing import Any

__all__ = ["SERVED_PREFIX", "is_served_name", "TRANSPORT_FIELDS", "ENV_NAME", "server_url_problem", "redact_url"]

#: the prefix of a served model's name, ``openai:<model id>`` (docs/SCALING.md)
SERVED_PREFIX = "openai:"


def is_served_name(name: Any) -> bool:
    """Whether ``name`` names a model an OpenAI-compatible server serves (``openai:<model id>``).

    >>> is_served_name(" OpenAI:llama"), is_served_name("smollm2-135m")
    (True, False)
    """
    return isinstance(name, str) and name.strip().lower().startswith(SERVED_PREFIX)


#: the served backend's transport settings: out of every run id (:func:`facterlab.config.config_hash`)
TRANSPORT_FIELDS = ("timeout", "max_retries", "concurrency", "api_key_env")
#: the name of an environment variable (``model.api_key_env``)
ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,127}")
#: the paths of OpenAI endpoints that a server URL must not end with (the URL is the server's root)
_ENDPOINTS = ("/completions", "/chat/completions", "/models", "/embeddings", "/tokenize", "/version")


_USERINFO = re.compile(r"(?<=://)[^/?#]*@")


def redact_url(url: Any) -> str:
    """``url`` as text with any credentials (``user:password@``) masked, for every message and log.

    >>> redact_url("http://user:s3cret@host:8000/v1"), redact_url("http://a:b@c@h"), redact_url("http://h:8000")
    ('http://***@host:8000/v1', 'http://***@h', 'http://h:8000')
    """
    return _USERINFO.sub("***@", str(url))


def server_url_problem(url: Any) -> str:
    """Why ``url`` cannot be an OpenAI-compatible server's root URL ("" when it can), read with
    :func:`urllib.parse.urlsplit`: http or https, a host, a valid port, no whitespace or control
    character, no credentials, query or fragment, and no endpoint path.

    >>> server_url_problem("http://localhost:8000"), server_url_problem("http://h:8000/v1")
    ('', '')
    >>> server_url_problem("http://h:8000/v1/completions")
    "names the endpoint '/v1/completions': give the server root, e.g. 'http://h:8000' (or 'http://h:8000/v1')"
    """
    from urllib.parse import urlsplit

    if not isinstance(url, str) or not url:
        return "must be an http:// or https:// URL, e.g. 'http://localhost:8000'"
    if len(url) > 2048:
        return "is longer than 2048 characters"
    bad = next((i for i, ch in enumerate(url) if ch.isspace() or ord(ch) < 32 or ord(ch) == 127), None)
    if bad is not None:
        return f"has whitespace or a control character ({url[bad]!r}) at position {bad}; give the URL alone"
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError as exc:
        return f"is not a valid URL ({exc})"
    if parts.scheme not in ("http", "https"):
        return "must be an http:// or https:// URL, e.g. 'http://localhost:8000'"
    if not parts.hostname:
        return "has no host; e.g. 'http://localhost:8000'"
    if parts.username is not None or parts.password is not None:
        return "holds credentials; give the API key through api_key_env (--api-key-env), never in the URL"
    if parts.query or parts.fragment or url.endswith(("?", "#")):
        return "has a query or fragment; give the server root, e.g. 'http://localhost:8000'"
    path = parts.path.rstrip("/")
    hit = next((e for e in _ENDPOINTS if path.endswith(e)), None)
    if hit is not None:
        root = f"{parts.scheme}://{parts.netloc}"
        endpoint = path[path.rfind("/v1/") :] if "/v1/" in path else hit
        return f"names the endpoint {endpoint!r}: give the server root, e.g. {root!r} (or {root + '/v1'!r})"
    del port
    return ""
