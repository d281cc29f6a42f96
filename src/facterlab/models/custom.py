"""Your own recommender: a plain Python function or a REST endpoint that is not OpenAI-compatible
(docs/USAGE.md, "Your own recommender").

Any object that implements :class:`facterlab.datatypes.Recommender` (a ``fingerprint`` string and
``predict(requests) -> list[Prediction]``; subclass the protocol to inherit ``plan_batches``) can be
audited: ``run_experiment(cfg, recommender=...)``.  This module adapts the two common shapes:

- :class:`FunctionRecommender`: ``fn(history, attributes, candidates) -> ranked item ids or titles``;
- :class:`RestRecommender`: a JSON request template filled per request, POSTed to an endpoint, and the
  dotted path of the ranked answer in its JSON reply (``facterlab run --model rest:<name>
  --server-url URL --request-template FILE.json --answer-path PATH``).

What they are given comes from the request's ``meta`` (:func:`facterlab.facter.prompts.build_request`):
``history_ids`` (oldest first), the protected attributes named by ``meta["protected"]`` (default
gender, age, occupation), ``candidate_ids`` for re-ranking, ``row_id``.

What comes back (:func:`answer_prediction`): item ids (int) name catalogue items; strings are catalogue
titles (or, when no title matches, the decimal form of an item id).  Unknown items are dropped and
counted: the row's parse status is :data:`PARSE_UNKNOWN` (``"unknown_items"``), or
:data:`PARSE_NOT_CANDIDATE` (``"not_candidates"``) when re-ranking named an item that is not one of the
row's candidates; ``Prediction.raw`` keeps the answer as returned (JSON), and each ``predict`` call logs
one warning with the counts.  An empty answer is ``"empty"``.  Re-ranking completes the permutation with
the unnamed candidates in list order (``n_model_positions`` says how many positions the recommender
gave), as the LLM backends do.

Neither adapter sees FACTER's system prompt (``takes_system_prompt`` is False; a REST template that uses
``$system`` or ``$messages`` does): the monitor, the metrics and the Simpson analysis apply; FACTER's
prompt repair cannot change what such a recommender answers (:func:`facterlab.datatypes.takes_system_prompt`).
"""

from __future__ import annotations

import functools
import hashlib
import inspect
import json
import logging
import re
import time
import traceback
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import FIRST_EXCEPTION, ThreadPoolExecutor, wait
from typing import Any

import numpy as np
import pandas as pd

from facterlab.config import (
    REST_PREFIX,
    ModelConfig,
    parse_answer_path,
    rest_name_parts,
    rest_problems,
    server_url_problem,
    template_placeholders,
)
from facterlab.config_served import PLACEHOLDER
from facterlab.datatypes import PARSE_EMPTY, PARSE_OK, Prediction, PromptRequest, Recommender
from facterlab.models.served_hints import setting_hint
from facterlab.models.served_http import _RETRY_STATUS, NoAnswer, ServerError, ServerUnavailable, _http, api_key

__all__ = [
    "FunctionRecommender",
    "RestRecommender",
    "RecommenderError",
    "PARSE_UNKNOWN",
    "PARSE_NOT_CANDIDATE",
    "DEFAULT_PROTECTED",
    "request_inputs",
    "answer_prediction",
    "fill_template",
    "extract_answer",
    "source_version",
    "check_rest",
]

log = logging.getLogger(__name__)

#: parse status of an answer that named items the catalogue does not have (dropped, counted)
PARSE_UNKNOWN = "unknown_items"
#: parse status of a re-ranking answer that named catalogue items outside the row's candidates (dropped)
PARSE_NOT_CANDIDATE = "not_candidates"
#: the protected attributes of a request whose meta does not name them (the MovieLens vocabulary)
DEFAULT_PROTECTED = ("gender", "age", "occupation")
#: how much of an answer ``Prediction.raw`` keeps
RAW_CHARS = 4000
#: seconds between the progress lines while a REST endpoint's requests wait
PROGRESS_EVERY = 15.0


class RecommenderError(ValueError):
    """A user recommender failed (it raised, or returned something that is not a ranked list); one line
    naming the recommender and the row.  The same request fails again, so executors do not retry it."""

    permanent = True


def _meta_value(meta: Mapping, key: str, default: Any = None) -> Any:
    value = meta.get(key, default)
    return list(value) if isinstance(value, tuple) else value


def request_inputs(req: PromptRequest) -> dict:
    """What a user recommender is given for one request, from its ``meta``.

    Parameters
    ----------
    req : PromptRequest
        A request built by :func:`facterlab.facter.prompts.build_request`.

    Returns
    -------
    dict
        ``history`` (item ids, oldest first), ``history_titles``, ``attributes`` (protected attribute
        -> value, in ``meta["protected"]``'s order; None where the request has no value),
        ``candidates`` (candidate item ids; None for open generation), ``candidate_titles``, ``k``,
        ``row_id`` (None when absent), ``seed``.

    Examples
    --------
    >>> meta = (("gender", "F"), ("age", "25-34"), ("occupation", "writer"), ("history_ids", (3, 1)), ("row_id", 7))
    >>> r = PromptRequest.from_messages([{"role": "user", "content": "hi"}], meta=meta)
    >>> x = request_inputs(r)
    >>> x["history"], x["attributes"], x["candidates"], x["row_id"]
    ([3, 1], {'gender': 'F', 'age': '25-34', 'occupation': 'writer'}, None, 7)
    """
    meta = req.meta_dict
    if "history_ids" not in meta:
        raise RecommenderError(
            "the request carries no history_ids in its meta (build requests with facterlab.facter.prompts.build_request)"
        )
    protected = meta.get("protected", DEFAULT_PROTECTED)
    if isinstance(protected, str):
        protected = (protected,)
    rank = req.candidates is not None
    return {
        "history": [int(i) for i in meta["history_ids"]],
        "history_titles": [str(t) for t in meta.get("history_titles", ())],
        "attributes": {str(a): _meta_value(meta, str(a)) for a in protected},
        "candidates": [int(i) for i in meta.get("candidate_ids", ())] if rank else None,
        "candidate_titles": [str(t) for t in req.candidates] if rank and req.candidates is not None else None,
        "k": int(req.k),
        "row_id": None if meta.get("row_id") is None else int(meta["row_id"]),
        "seed": int(req.seed),
    }


class _Catalogue:
    """Item id <-> title of an items table (``item_id`` column or index, ``title``), or a mapping id -> title."""

    def __init__(self, items: Any):
        if isinstance(items, pd.DataFrame):
            table = items.set_index("item_id") if "item_id" in items.columns else items
            if "title" not in table.columns:
                raise ValueError("items must have a title column (and item_id as a column or the index)")
            pairs: Any = zip(table.index, table["title"])
        elif isinstance(items, Mapping):
            pairs = items.items()
        else:
            raise TypeError(
                f"items must be the catalogue (a DataFrame with item_id and title) or a mapping item id -> title, "
                f"not {type(items).__name__}"
            )
        self.title: dict = {}
        self.by_title: dict = {}
        for iid, title in pairs:
            self.title[int(iid)] = str(title)
            self.by_title.setdefault(str(title), int(iid))


def _as_list(answer: Any) -> list | None:
    """The answer as a list, or None when it is not a ranked list (a string, a dict, None, a number)."""
    if isinstance(answer, (list, tuple)):
        return list(answer)
    if isinstance(answer, (np.ndarray, pd.Series, pd.Index)) and np.ndim(answer) == 1:
        return list(np.asarray(answer).tolist())
    return None


def _item_of(x: Any, catalogue: _Catalogue | None, req: PromptRequest, inputs: dict) -> tuple:
    """``(kind, value)`` of one element: ``("id", item id)``, ``("title", title)`` (a free title, when there
    is no catalogue), ``("unknown", x)`` or ``("bad", x)`` (neither an id nor a title)."""
    if isinstance(x, (bool, np.bool_)) or not isinstance(x, (int, np.integer, str)):
        return "bad", x
    if isinstance(x, str):
        if inputs["candidate_titles"] is not None and x in inputs["candidate_titles"]:
            return "id", inputs["candidates"][inputs["candidate_titles"].index(x)]
        if catalogue is not None and x in catalogue.by_title:
            return "id", catalogue.by_title[x]
        text = x.strip()
        if text.lstrip("-").isdigit():
            x = int(text)
        elif catalogue is None and inputs["candidates"] is None:
            return "title", x  # no catalogue here: the run's catalogue mapper maps it, as an LLM's title
        else:
            return "unknown", x
    iid = int(x)
    if catalogue is not None:
        return ("id", iid) if iid in catalogue.title else ("unknown", iid)
    if inputs["candidates"] is not None and iid in inputs["candidates"]:
        return "id", iid
    return "noitems", iid


def answer_prediction(
    answer: Any, req: PromptRequest, catalogue: Any = None, who: str = "recommender", inputs: dict | None = None
) -> tuple:
    """A user recommender's ranked answer as a :class:`~facterlab.datatypes.Prediction` (module docstring).

    Parameters
    ----------
    answer : list, tuple or 1-d array
        Item ids (int) and/or titles (str), best first.
    req : PromptRequest
        The request it answers.
    catalogue : DataFrame, mapping or None
        The items table (``item_id``, ``title``) or a mapping id -> title; None: ids are named through the
        request's own candidates (re-ranking) and strings are passed on as free titles (open generation).
    who : str
        The recommender's name, for error lines.
    inputs : dict or None
        :func:`request_inputs` of ``req`` when already computed.

    Returns
    -------
    tuple
        ``(Prediction, dropped)``: the prediction and the list of the answer's elements that were dropped.

    Raises
    ------
    RecommenderError
        When the answer is not a list, or holds something that is neither an item id nor a title.

    Examples
    --------
    >>> items = {1: "Alien (1979)", 2: "Heat (1995)", 3: "Babe (1995)"}
    >>> r = PromptRequest.from_messages([], meta=(("history_ids", (1,)),), k=2)
    >>> p, dropped = answer_prediction([2, "Babe (1995)", 99], r, items)
    >>> p.titles, p.parse_status, dropped
    (('Heat (1995)', 'Babe (1995)'), 'unknown_items', [99])
    """
    inputs = inputs if inputs is not None else request_inputs(req)
    where = f"{who} on row {inputs['row_id']}" if inputs["row_id"] is not None else who
    seq = _as_list(answer)
    if seq is None:
        raise RecommenderError(
            f"{where} returned {type(answer).__name__} {repr(answer)[:60]}; it must return a list of item ids "
            "(int) or titles (str), best first"
        )
    cat = catalogue if isinstance(catalogue, _Catalogue) or catalogue is None else _Catalogue(catalogue)
    ids: list = []
    free: list = []
    unknown: list = []
    outside: list = []
    for x in seq:
        kind, value = _item_of(x, cat, req, inputs)
        if kind == "bad":
            raise RecommenderError(
                f"{where} returned {type(value).__name__} {repr(value)[:60]} in its list; each element must be an "
                "item id (int) or a title (str)"
            )
        if kind == "noitems":
            raise RecommenderError(
                f"{where} answered item id {value}, which cannot be named without the catalogue: build the "
                "recommender with items=dataset.items (RestRecommender.from_config(cfg.model, items=...), passed "
                "as recommender=; facterlab run does so), or answer titles"
            )
        if kind == "unknown":
            unknown.append(value)
        elif kind == "title":
            free.append(value)
        elif inputs["candidates"] is not None and value not in inputs["candidates"]:
            outside.append(value)
        else:
            ids.append(value)
    raw = json.dumps([x if isinstance(x, (int, str)) else int(x) for x in seq], ensure_ascii=False)[:RAW_CHARS]
    status = PARSE_UNKNOWN if unknown else PARSE_NOT_CANDIDATE if outside else PARSE_OK if seq else PARSE_EMPTY
    if inputs["candidates"] is None:  # open generation: the first k
        titles = [cat.title[i] for i in ids] if cat is not None else free
        return Prediction(titles=tuple(titles[: req.k]), parse_status=status, raw=raw), unknown + outside
    cands, names = inputs["candidates"], list(req.candidates or ())
    used = [False] * len(cands)
    order = []
    for iid in ids:  # each id takes its first unused candidate position
        pos = next((i for i, c in enumerate(cands) if c == iid and not used[i]), None)
        if pos is not None:
            used[pos] = True
            order.append(pos)
    n = len(order)
    order += [i for i in range(len(cands)) if not used[i]]
    return Prediction(titles=tuple(names[i] for i in order), parse_status=status, raw=raw, n_model_positions=n), (
        unknown + outside
    )


def _warn_dropped(who: str, dropped: list, n: int) -> None:
    rows = [d for d in dropped if d]
    if rows:
        items = [x for d in rows for x in d]
        log.warning(
            "%s: %d of %d answers named %d items that are not in the catalogue or not among the row's "
            "candidates, dropped (parse status %r or %r), e.g. %s",
            who, len(rows), n, len(items), PARSE_UNKNOWN, PARSE_NOT_CANDIDATE, ", ".join(map(repr, items[:3])),
        )  # fmt: skip


def source_version(fn: Callable) -> str:
    """``src-<12 hex>``: the SHA-256 of ``fn``'s source (:func:`inspect.getsource`; a callable object's
    class, a :func:`functools.partial`'s function and arguments).  A ValueError when the source cannot
    be read (a lambda typed at an interactive prompt, a built-in), or a partial binds an object whose
    text names its address: then declare ``version=``.

    >>> def top(history, attributes, candidates):
    ...     return [1, 2]
    >>> source_version(top).startswith("src-")
    True
    """
    target: Any = fn
    extra = ""
    if isinstance(fn, functools.partial):
        target, extra = fn.func, repr((fn.args, sorted(fn.keywords.items())))
        if re.search(r" at 0x[0-9a-f]+", extra):  # an object's address: another in every process
            raise ValueError(
                f"the arguments bound to {getattr(target, '__qualname__', target)!r} have no stable text to "
                "fingerprint; declare FunctionRecommender(..., version='...')"
            )
    if not (inspect.isfunction(target) or inspect.ismethod(target)) and not inspect.isclass(target):
        target = type(target)
    try:
        source = inspect.getsource(target)
    except (OSError, TypeError):
        raise ValueError(
            f"cannot read the source of {getattr(fn, '__qualname__', type(fn).__name__)!r} to fingerprint it; "
            "declare FunctionRecommender(..., version='...') so that a changed function never reuses cached answers"
        ) from None
    return "src-" + hashlib.sha256((source + extra).encode()).hexdigest()[:12]


def _user_frame(exc: BaseException) -> str:
    """``file:line`` of the innermost frame of a traceback (where the user's function failed)."""
    frames = traceback.extract_tb(exc.__traceback__)
    return f" at {frames[-1].filename}:{frames[-1].lineno}" if frames else ""


class FunctionRecommender(Recommender):
    """A plain function as a recommender: ``fn(history, attributes, candidates) -> ranked ids or titles``.

    ``history`` is the user's item ids, oldest first; ``attributes`` a dict protected attribute ->
    value (the dataset's own attributes, in their order); ``candidates`` the row's candidate item ids
    for re-ranking, None for open generation.  ``fn`` returns a list (tuple, 1-d array) of item ids
    or titles, best first (open generation keeps the first k; re-ranking completes the permutation).
    It must be deterministic: the same inputs, the same answer.

    Fingerprint (part of the run id): ``function:<name>:<version>``.  ``name`` defaults to the function's
    qualified name (without ``<locals>``); ``version``, when not declared, is ``src-<hash>`` of the function's source
    (:func:`source_version`), so that an edited function never reuses another's run id or cached
    answers.  The source hash does not see data the function reads from outside (a model file, a
    global table): declare ``version=`` whenever those change.

    Errors: an exception inside ``fn`` ends the run at once (no more requests are asked, no run
    folder is written) with one :class:`RecommenderError` line naming the function, the row id and
    where it failed; so does an answer that is not a list of ids or titles.  Unknown items are not
    errors: they are dropped with a parse status (module docstring).

    Parameters
    ----------
    fn : callable
        ``fn(history, attributes, candidates)``.
    items : DataFrame or mapping
        The catalogue (``item_id``, ``title``; e.g. ``dataset.items``) or a mapping id -> title.
    name : str or None
        The name in the fingerprint and error lines (default: ``fn.__qualname__``).
    version : str or None
        The declared version (default: a hash of the source).

    Examples
    --------
    >>> items = {1: "Alien (1979)", 2: "Heat (1995)", 3: "Babe (1995)"}
    >>> def most_recent_first(history, attributes, candidates):
    ...     pool = candidates if candidates is not None else [1, 2, 3]
    ...     return [i for i in pool if i not in history]
    >>> rec = FunctionRecommender(most_recent_first, items, name="demo", version="1")
    >>> rec.fingerprint, rec.takes_system_prompt
    ('function:demo:1', False)
    >>> req = PromptRequest.from_messages([], meta=(("history_ids", (1,)), ("gender", "F")), k=2)
    >>> rec.predict([req])[0].titles
    ('Heat (1995)', 'Babe (1995)')
    """

    takes_system_prompt = False

    def __init__(self, fn: Callable, items: Any, name: str | None = None, version: str | None = None):
        if not callable(fn):
            raise TypeError(f"fn must be a function fn(history, attributes, candidates), not {type(fn).__name__}")
        self.fn = fn
        default = str(getattr(fn, "__qualname__", None) or type(fn).__name__).split("<locals>.")[-1]
        self.name = str(name or default).strip()
        self.version = str(version).strip() if version is not None else source_version(fn)
        if not self.name or not self.version:
            raise ValueError("name and version must not be empty")
        self.fingerprint = f"function:{self.name}:{self.version}"
        self.catalogue = _Catalogue(items)
        self.n_answers = 0  # answers given
        self.n_dropped = 0  # items dropped from them (unknown, or not a candidate)

    def predict(self, requests: Sequence[PromptRequest]) -> list:
        """One prediction per request, in order (class docstring).

        Parameters
        ----------
        requests : sequence of PromptRequest
            Requests built by :func:`facterlab.facter.prompts.build_request`.

        Returns
        -------
        list of Prediction
            ``len(requests)`` predictions.
        """
        out, dropped = [], []
        who = f"function {self.name!r}"
        for req in requests:
            x = request_inputs(req)
            try:
                answer = self.fn(list(x["history"]), dict(x["attributes"]), x["candidates"])
            except Exception as exc:  # noqa: BLE001 - the user's code: one line, the run stops
                row = f" on row {x['row_id']}" if x["row_id"] is not None else ""
                err = RecommenderError(f"{who} raised{row}: {type(exc).__name__}: {str(exc)[:200]}{_user_frame(exc)}")
                err.original = exc  # type: ignore[attr-defined]
                raise err from None
            pred, lost = answer_prediction(answer, req, self.catalogue, who, x)
            out.append(pred)
            dropped.append(lost)
        self.n_answers += len(out)
        self.n_dropped += sum(len(d) for d in dropped)
        _warn_dropped(who, dropped, len(out))
        return out


# --------------------------------------------------------------------------------------------- REST


def _template_values(req: PromptRequest, x: dict) -> dict:
    msgs = req.message_dicts
    system = next((m["content"] for m in msgs if m["role"] == "system"), "")
    prompt = next((m["content"] for m in reversed(msgs) if m["role"] == "user"), "")
    values = {
        "history_ids": x["history"],
        "history_titles": x["history_titles"],
        "attributes": x["attributes"],
        "candidate_ids": x["candidates"],
        "candidate_titles": x["candidate_titles"],
        "k": x["k"],
        "prompt": prompt,
        "system": system,
        "messages": msgs,
        "seed": x["seed"],
        "row_id": x["row_id"],
    }
    return values


def fill_template(template: Any, values: Mapping) -> Any:
    """``template`` with its placeholders filled: a string that is exactly ``"$name"`` becomes the value
    itself (a list, a dict, a number, null); ``$name`` inside a longer string is replaced by its text
    (JSON for a non-string); ``$attributes.<name>`` is one attribute's value; ``$$`` is ``$``.

    Examples
    --------
    >>> fill_template({"u": "$attributes", "h": "$history_ids", "q": "top $k for $attributes.gender", "p": "$$5"},
    ...               {"attributes": {"gender": "F"}, "history_ids": [3, 1], "k": 2})
    {'u': {'gender': 'F'}, 'h': [3, 1], 'q': 'top 2 for F', 'p': '$5'}
    """

    def value(name: str) -> Any:
        if name.startswith("attributes."):
            return (values.get("attributes") or {}).get(name[len("attributes.") :])
        return values[name]

    def text(m: Any) -> str:
        name = m.group(1)
        if name == "$":
            return "$"
        v = value(name)
        return v if isinstance(v, str) else json.dumps(v, ensure_ascii=False)

    def walk(node: Any) -> Any:
        if isinstance(node, dict):
            return {walk(k): walk(v) for k, v in node.items()}
        if isinstance(node, list):
            return [walk(v) for v in node]
        if isinstance(node, str):
            m = PLACEHOLDER.fullmatch(node)
            if m is not None and m.group(1) != "$":
                return value(m.group(1))
            return PLACEHOLDER.sub(text, node)
        return node

    return walk(template)


def _describe(node: Any) -> str:
    if isinstance(node, dict):
        keys = ", ".join(map(repr, list(node)[:8]))
        return f"an object with keys {keys}" if node else "an empty object"
    if isinstance(node, list):
        return f"a list of {len(node)}"
    return f"{type(node).__name__} {str(node)[:40]!r}"


def extract_answer(obj: Any, path: str) -> list:
    """The ranked answer at ``path`` (:func:`facterlab.config.parse_answer_path`) in a JSON reply: a
    list; with ``[*]``, the rest of the path read in each element.  A ValueError says where the path
    stops matching the reply.

    Examples
    --------
    >>> extract_answer({"result": {"items": [{"id": 4}, {"id": 2}]}}, "result.items[*].id")
    [4, 2]
    >>> extract_answer({"data": {"recs": [4, 2]}}, "data.items")
    Traceback (most recent call last):
    ...
    ValueError: 'data.items': at 'data.items', no key 'items' in an object with keys 'recs'
    """
    steps = parse_answer_path(path)

    def walk(node: Any, rest: tuple, at: str) -> Any:
        for i, step in enumerate(rest):
            if step[0] == "all":
                if not isinstance(node, list):
                    raise ValueError(f"{path!r}: at '{at}[*]', expected a list, found {_describe(node)}")
                return [walk(el, rest[i + 1 :], f"{at}[{j}]") for j, el in enumerate(node)]
            if step[0] == "key":
                at = f"{at}.{step[1]}" if at else step[1]
                if not isinstance(node, dict) or step[1] not in node:
                    where = f"no key {step[1]!r} in" if isinstance(node, dict) else "expected an object, found"
                    raise ValueError(f"{path!r}: at {at!r}, {where} {_describe(node)}")
                node = node[step[1]]
            else:
                at = f"{at}[{step[1]}]"
                if not isinstance(node, list) or not -len(node) <= step[1] < len(node):
                    raise ValueError(f"{path!r}: at {at!r}, no such element in {_describe(node)}")
                node = node[step[1]]
        return node

    out = walk(obj, steps, "")
    if not isinstance(out, list):
        raise ValueError(f"{path!r}: expected a list of item ids or titles, found {_describe(out)}")
    return out


def _rest_fingerprint(url: str, template: Any, answer_path: str, name: str, version: str) -> str:
    ident = json.dumps(
        {"url": url, "template": template, "answer_path": answer_path, "adapter": 1},
        sort_keys=True,
        separators=(",", ":"),
        ensure_ascii=False,
    )
    label = f"{REST_PREFIX}{name}" + (f"@{version}" if version else "")
    return f"{label}:{hashlib.sha256(ident.encode()).hexdigest()[:12]}"


class RestRecommender(Recommender):
    """A REST endpoint that is not OpenAI-compatible, as a recommender.

    Each request fills ``request_template`` (:func:`fill_template`; the placeholders are
    :data:`facterlab.config.PLACEHOLDERS`: ``$history_ids``, ``$attributes``, ``$candidate_ids``, ``$k``,
    ``$prompt``, ...) and POSTs it as JSON to ``url``; the ranked answer is read at ``answer_path``
    (:func:`extract_answer`) and turned into a prediction as :class:`FunctionRecommender`'s answers are.

    Transport is the served backend's (:mod:`facterlab.models.served_http`): ``concurrency`` requests in
    flight, each within one ``timeout`` (retries of connection errors and HTTP 408/425/429/5xx included,
    at most ``retries``), a body cap, the API key read from ``api_key_env`` at each request and sent as
    ``Authorization: Bearer`` (never stored, never in a message).  An endpoint that answers another HTTP
    status, or JSON without the answer path, or a list of something other than ids and titles, ends
    the run with one line (:class:`~facterlab.models.served_http.ServerError`); one that does not
    answer in time is a :class:`~facterlab.models.served_http.ServerUnavailable`.

    Fingerprint: ``rest:<name>[@<version>]:<hash>`` of the URL (which may hold no credentials), the
    template, the answer path and the declared name and version; the key and the transport settings are
    not part of it.  Declare a new ``version`` whenever the service's model changes behind the same URL.

    ``takes_system_prompt``: True only when the template uses ``$system`` or ``$messages``.

    Parameters
    ----------
    url : str
        The endpoint (http or https; a path is fine; no credentials, query or fragment).
    request_template : dict, list or str
        The JSON template (or its text).
    answer_path : str
        Where the ranked answer is in the reply, e.g. ``data.recommendations`` or ``result.items[*].id``.
    items : DataFrame, mapping or None
        The catalogue, to name answered ids (None: ids are named through the request's candidates, and
        titles are passed on as free titles).
    name, version : str
        Declared identity (``rest:<name>@<version>`` on the command line).
    timeout, retries, concurrency, api_key_env, backoff
        As :class:`facterlab.config.ModelConfig`'s served knobs.

    Examples
    --------
    >>> rec = RestRecommender("http://127.0.0.1:9/recommend", {"h": "$history_ids", "n": "$k"}, "items", name="svc")
    >>> rec.fingerprint.startswith("rest:svc:"), rec.takes_system_prompt
    (True, False)
    """

    def __init__(
        self,
        url: str,
        request_template: Any,
        answer_path: str,
        items: Any = None,
        name: str = "rest",
        version: str = "",
        timeout: float = 300.0,
        retries: int = 2,
        concurrency: int = 4,
        api_key_env: str | None = None,
        backoff: float = 0.5,
    ):
        template = json.loads(request_template) if isinstance(request_template, str) else request_template
        problems = rest_problems(template, answer_path)
        url_problem = server_url_problem(url, any_path=True)
        if url_problem:
            problems.insert(0, f"url {str(url)[:200]!r}: {url_problem}")
        if problems:
            raise ValueError(f"REST recommender {name!r}: " + "; ".join(problems))
        rest_name_parts(f"{REST_PREFIX}{name}" + (f"@{version}" if version else ""))
        self.url, self.template, self.answer_path = url, template, answer_path
        self.name, self.version = name, version
        self.timeout, self.retries, self.concurrency = float(timeout), int(retries), max(1, int(concurrency))
        self.key_env, self.backoff = api_key_env, float(backoff)
        self.catalogue = _Catalogue(items) if items is not None else None
        used = template_placeholders(template)
        self.takes_system_prompt = "system" in used or "messages" in used
        self.fingerprint = _rest_fingerprint(url, template, answer_path, name, version)
        self.n_answers = 0
        self.n_dropped = 0

    @classmethod
    def from_config(cls, model_cfg: ModelConfig, items: Any = None) -> RestRecommender:
        """The recommender of ``model.llm = "rest:<name>[@<version>]"`` and its ``server_url``,
        ``request_template``, ``answer_path`` and transport settings (``ModelConfig`` checked them)."""
        name, version = rest_name_parts(model_cfg.llm)
        assert model_cfg.server_url and model_cfg.request_template and model_cfg.answer_path
        return cls(
            model_cfg.server_url,
            json.loads(model_cfg.request_template),
            model_cfg.answer_path,
            items=items,
            name=name,
            version=version,
            timeout=model_cfg.timeout,
            retries=model_cfg.max_retries,
            concurrency=model_cfg.concurrency,
            api_key_env=model_cfg.api_key_env,
        )

    def body(self, req: PromptRequest) -> Any:
        """The JSON body sent for ``req`` (the filled template)."""
        return fill_template(self.template, _template_values(req, request_inputs(req)))

    def _one(self, req: PromptRequest) -> tuple:
        x = request_inputs(req)
        body = fill_template(self.template, _template_values(req, x))
        row = f" (row {x['row_id']})" if x["row_id"] is not None else ""
        try:
            reply = _http(
                "POST", self.url, body, timeout=self.timeout, retries=self.retries, backoff=self.backoff,
                key_env=self.key_env,
            )  # fmt: skip
        except NoAnswer as exc:
            cls = ServerUnavailable if exc.transient else ServerError
            raise cls(
                f"the endpoint {self.url} gave no answer{row}: {exc.reason} (deadline {self.timeout:g} s, "
                f"{self.retries} retries: {setting_hint('timeout', 'SECONDS')}, {setting_hint('max_retries', 'N')})"
            ) from None
        if reply.status != 200:
            cls = ServerUnavailable if reply.status in _RETRY_STATUS else ServerError
            raise cls(f"the endpoint {self.url} answered HTTP {reply.status}{row}: {reply.what()}")
        if reply.obj is None:
            raise ServerError(f"the endpoint {self.url} answered{row} with {reply.what()}")
        try:
            answer = extract_answer(reply.obj, self.answer_path)
        except ValueError as exc:
            raise ServerError(f"the endpoint {self.url} answered{row} without the answer path {exc}") from None
        try:
            return answer_prediction(answer, req, self.catalogue, f"the endpoint {self.url}", x)
        except RecommenderError as exc:
            raise ServerError(str(exc)) from None

    def predict(self, requests: Sequence[PromptRequest]) -> list:
        """One prediction per request, ``concurrency`` requests at a time; the first error ends the batch.

        Parameters
        ----------
        requests : sequence of PromptRequest
            Requests built by :func:`facterlab.facter.prompts.build_request`.

        Returns
        -------
        list of Prediction
            ``len(requests)`` predictions, in order.
        """
        requests = list(requests)
        if not requests:
            return []
        pool = ThreadPoolExecutor(max_workers=min(self.concurrency, len(requests)), thread_name_prefix="rest")
        try:
            futures = [pool.submit(self._one, r) for r in requests]
            t0, pending = time.monotonic(), set(futures)
            while pending:
                done, pending = wait(pending, timeout=PROGRESS_EVERY, return_when=FIRST_EXCEPTION)
                failed = next((f for f in futures if f in done and f.exception() is not None), None)
                if failed is not None:
                    raise failed.exception()  # type: ignore[misc]
                if pending:
                    log.info(
                        "%s%s at %s: %d of %d requests answered after %.0f s (each ends by its %g s deadline)",
                        REST_PREFIX, self.name, self.url, len(futures) - len(pending), len(futures),
                        time.monotonic() - t0, self.timeout,
                    )  # fmt: skip
            results = [f.result() for f in futures]
        finally:
            pool.shutdown(wait=False, cancel_futures=True)
        self.n_answers += len(results)
        self.n_dropped += sum(len(d) for _, d in results)
        _warn_dropped(f"{REST_PREFIX}{self.name}", [d for _, d in results], len(results))
        return [p for p, _ in results]


def check_rest(model_cfg: ModelConfig) -> None:
    """What can be checked of a ``rest:<name>`` model before any work, without asking the endpoint: its
    settings (``ModelConfig`` checks them when built) and, with ``api_key_env``, that the variable is set."""
    rest_name_parts(model_cfg.llm)
    problems = rest_problems(model_cfg.request_template, model_cfg.answer_path)
    if problems:
        raise ValueError(f"model {model_cfg.llm!r}: " + "; ".join(problems))
    api_key(model_cfg.api_key_env)
