"""A served model's name and its server: ``openai:<model id>`` (:data:`SERVED_PREFIX`,
:func:`is_served_name`), the checks of a server URL (:func:`server_url_problem`) and of an API key's
variable name, and the transport settings that stay out of every run id (:data:`TRANSPORT_FIELDS`).
A REST endpoint that is not OpenAI-compatible, ``rest:<name>[@<version>]`` (:data:`REST_PREFIX`,
:func:`is_rest_name`): its request template's placeholders (:data:`PLACEHOLDERS`) and its answer path
(:func:`parse_answer_path`), checked before any work (:func:`rest_problems`); the adapter itself is
:class:`facterlab.models.custom.RestRecommender`.

:class:`facterlab.config.ModelConfig` checks its served-model fields with these (and
:mod:`facterlab.config` re-exports every name here); the served backend itself is
:mod:`facterlab.models.served`.
"""

from __future__ import annotations

import json
import re
from typing import Any

__all__ = [
    "SERVED_PREFIX",
    "is_served_name",
    "TRANSPORT_FIELDS",
    "ENV_NAME",
    "server_url_problem",
    "redact_url",
    "REST_PREFIX",
    "is_rest_name",
    "rest_name_parts",
    "PLACEHOLDERS",
    "parse_answer_path",
    "template_placeholders",
    "rest_problems",
]

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


def server_url_problem(url: Any, any_path: bool = False) -> str:
    """Why ``url`` cannot be an OpenAI-compatible server's root URL ("" when it can), read with
    :func:`urllib.parse.urlsplit`: http or https, a host, a valid port, no whitespace or control
    character, no credentials, query or fragment, and no endpoint path.  ``any_path=True`` (a REST
    endpoint, ``rest:<name>``) accepts any path.

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
    hit = None if any_path else next((e for e in _ENDPOINTS if path.endswith(e)), None)
    if hit is not None:
        root = f"{parts.scheme}://{parts.netloc}"
        endpoint = path[path.rfind("/v1/") :] if "/v1/" in path else hit
        return f"names the endpoint {endpoint!r}: give the server root, e.g. {root!r} (or {root + '/v1'!r})"
    del port
    return ""


#: the prefix of a REST endpoint's name, ``rest:<name>[@<version>]`` (facterlab.models.custom; docs/USAGE.md)
REST_PREFIX = "rest:"


def is_rest_name(name: Any) -> bool:
    """Whether ``name`` names a REST endpoint that is not OpenAI-compatible (``rest:<name>``).

    >>> is_rest_name("rest:my-service"), is_rest_name("openai:llama")
    (True, False)
    """
    return isinstance(name, str) and name.strip().lower().startswith(REST_PREFIX)


_REST_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._/-]{0,127}")


def rest_name_parts(name: str) -> tuple:
    """``(name, version)`` of ``rest:<name>[@<version>]`` (version ``""`` when not given); a ValueError
    names what is wrong.

    >>> rest_name_parts("rest:books-ranker@2024-11"), rest_name_parts("rest:svc")
    (('books-ranker', '2024-11'), ('svc', ''))
    """
    body = name.strip()[len(REST_PREFIX) :].strip()
    svc, _, version = body.partition("@")
    for what, value, need in (("name", svc, True), ("version", version, False)):
        if (value or need) and not _REST_NAME.fullmatch(value):
            raise ValueError(
                f"model {name!r}: the {what} after {REST_PREFIX!r} must be 1-128 letters, digits and ._/- "
                "(e.g. 'rest:my-ranker' or 'rest:my-ranker@v2')"
            )
    return svc, version


#: what a REST request template's ``"$name"`` strings stand for (facterlab.models.custom.fill_template)
PLACEHOLDERS = {
    "history_ids": "the user's history, item ids oldest first",
    "history_titles": "the history's titles, oldest first",
    "attributes": "the user's protected attributes, {attribute: value}",
    "attributes.<name>": "one protected attribute's value (null when the user has none)",
    "candidate_ids": "the candidates' item ids (re-ranking; null for open generation)",
    "candidate_titles": "the candidates' titles (re-ranking; null for open generation)",
    "k": "the number of items asked for",
    "prompt": "facterlab's user prompt (text)",
    "system": "facterlab's system prompt (text; FACTER's prompt repair then applies)",
    "messages": "the chat messages [{role, content}], the system prompt included",
    "seed": "the request's seed",
    "row_id": "the row's id (null when absent)",
}
#: ``$name`` (``$attributes.<name>``) inside a template string; ``$$`` is a literal ``$``
PLACEHOLDER = re.compile(r"\$(\$|attributes\.[A-Za-z0-9_][A-Za-z0-9_-]*|[A-Za-z_][A-Za-z0-9_]*)")
_SEGMENT = re.compile(r"([^.\[\]]+)?((?:\[(?:\*|-?\d+)\])*)")


def template_placeholders(template: Any) -> list:
    """The placeholders a request template uses, in order of appearance (without ``$``).

    >>> template_placeholders({"user": "$attributes", "q": ["$history_ids", "for $attributes.country"]})
    ['attributes', 'history_ids', 'attributes.country']
    """
    out: list = []

    def walk(node: Any) -> None:
        if isinstance(node, dict):
            for key, value in node.items():
                walk(key)
                walk(value)
        elif isinstance(node, list):
            for value in node:
                walk(value)
        elif isinstance(node, str):
            out.extend(m.group(1) for m in PLACEHOLDER.finditer(node) if m.group(1) != "$")

    walk(template)
    return out


def parse_answer_path(path: Any) -> tuple:
    """The steps of an answer path: ``("key", name)``, ``("index", i)`` or ``("all",)`` (``[*]``, at most
    one); a ValueError names the problem.  Dotted keys, list indices (negative from the end) and ``[*]``
    (every element; the rest of the path is then read in each).

    >>> parse_answer_path("result.items[*].id")
    (('key', 'result'), ('key', 'items'), ('all',), ('key', 'id'))
    >>> parse_answer_path("data[0].recommendations")
    (('key', 'data'), ('index', 0), ('key', 'recommendations'))
    """
    if not isinstance(path, str) or not path.strip() or len(path) > 512:
        raise ValueError(
            f"answer path {str(path)[:80]!r}: give a dotted path of at most 512 characters, e.g. 'data.items'"
        )
    steps: list = []
    for part in path.strip().split("."):
        m = _SEGMENT.fullmatch(part)
        if not part or m is None or not (m.group(1) or m.group(2)):
            raise ValueError(
                f"answer path {path!r}: cannot read {part!r}; write keys with dots, list indices as [0] and "
                "every element as [*], e.g. 'result.items[*].id'"
            )
        if m.group(1):
            steps.append(("key", m.group(1)))
        for idx in re.findall(r"\[(\*|-?\d+)\]", m.group(2) or ""):
            steps.append(("all",) if idx == "*" else ("index", int(idx)))
    if sum(s == ("all",) for s in steps) > 1:
        raise ValueError(f"answer path {path!r}: at most one [*]")
    return tuple(steps)


def rest_problems(template: Any, answer_path: Any) -> list:
    """What is wrong with a REST endpoint's request template (JSON text, a dict or a list) and answer
    path, one sentence each (empty when both can be used).

    >>> rest_problems('{"h": "$history_ids", "n": "$k"}', "items")
    []
    >>> rest_problems('{"h": "$histroy_ids"}', "items[")
    ["request template: unknown placeholder '$histroy_ids'; known: $history_ids, $history_titles, $attributes, $attributes.<name>, $candidate_ids, $candidate_titles, $k, $prompt, $system, $messages, $seed, $row_id ($$ for a literal $)", "answer path 'items[': cannot read 'items['; write keys with dots, list indices as [0] and every element as [*], e.g. 'result.items[*].id'"]
    """
    out = []
    obj = template
    if isinstance(template, str):
        try:
            obj = json.loads(template)
        except ValueError as exc:
            out.append(f"request template: not JSON ({exc})")
            obj = None
    if obj is not None and not isinstance(obj, (dict, list)):
        out.append(f"request template: must be a JSON object or array, not {type(obj).__name__}")
    elif obj is not None:
        known = [p for p in PLACEHOLDERS if "<" not in p]
        for name in template_placeholders(obj):
            if name not in known and not (name.startswith("attributes.") and len(name) > len("attributes.")):
                listed = ", ".join("$" + p for p in PLACEHOLDERS)
                out.append(f"request template: unknown placeholder '${name}'; known: {listed} ($$ for a literal $)")
                break
    try:
        parse_answer_path(answer_path)
    except ValueError as exc:
        out.append(str(exc))
    return out
