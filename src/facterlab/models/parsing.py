"""Parsing an LLM's recommendation list out of its generated text (docs/FACTER.md §1.3, §5).

The prompts ask for ONLY a JSON array of titles; small models often add prose, code fences, numbered
or bulleted lines instead.  :func:`parse_titles` tries, in order:

1. a JSON array of strings (the whole text, a fenced block, or the first ``[...]`` embedded in prose),
   with smart quotes normalised; status :data:`~facterlab.datatypes.PARSE_OK`;
2. list lines: numbered (``1.``, ``2)``), bulleted (``-``, ``*``, ``•``) lines, or the lines of a
   fenced block, or the quoted strings of an unterminated array; status ``PARSE_FALLBACK``;
3. nothing usable: ``()`` with status ``PARSE_EMPTY``.

A served model's answer is first bounded by what was asked (:func:`parse_answer`): text longer than
``max_new_tokens`` tokens can decode to (:data:`MAX_CHARS_PER_TOKEN` characters each) comes from no
model; it is cut to that length before parsing and before the cache, and its status is ``PARSE_CUT``
(the titles are those of the cut text).

The parser never raises on model output: any string (deeply nested brackets, megabytes of junk,
``None``) gives a parse, possibly empty; :func:`parse_with_reason` also says why (``"no output"``,
``"no list found"``, ``"brackets nested too deeply"``...).  At most :data:`MAX_ARRAY_STARTS` ``[``
positions are tried as JSON arrays, so the cost stays linear in the text's length.

Titles are kept as the model wrote them minus list markup and surrounding quotes (a trailing year
such as ``(1995)`` is kept: stripping it is the catalogue mapper's job), de-duplicated
case-insensitively (first occurrence wins) and capped at ``k``.
"""

from __future__ import annotations

import json
import numbers
import re

from facterlab.data.titles import normalise_title
from facterlab.datatypes import PARSE_CUT, PARSE_EMPTY, PARSE_FALLBACK, PARSE_NA, PARSE_OK, Prediction

__all__ = [
    "parse_titles",
    "parse_with_reason",
    "parse_answer",
    "max_answer_chars",
    "MAX_CHARS_PER_TOKEN",
    "clean_title",
    "answer_complete",
    "PARSER_VERSION",
    "MAX_ARRAY_STARTS",
]

#: bumped whenever parsing or candidate matching changes an output; it is part of the LLM recommender's
#: fingerprint, so cached predictions parsed by an older version are not reused
PARSER_VERSION = 2

_SMART = {
    "\u201c": '"',
    "\u201d": '"',
    "\u201e": '"',
    "\u201f": '"',
    "\u00ab": '"',
    "\u00bb": '"',
    "\u2018": "'",
    "\u2019": "'",
    "\u201a": "'",
    "\u201b": "'",
}
_SMART_RE = re.compile("|".join(map(re.escape, _SMART)))
_FENCE_RE = re.compile(r"```[a-zA-Z0-9_-]*\s*\n?(.*?)(?:```|$)", re.S)
# a list line's marker; the item is the rest of the line, stripped (:func:`_list_item`: a regex with the
# item inside, ``\s+(.*\S)\s*$``, backtracks quadratically on a marker followed by spaces only)
_LIST_HEAD_RE = re.compile(r"\s*(?:(?:\d{1,3}|[a-zA-Z])[.):]|#\d{1,3}[.):]?|[-*\u2022\u2023\u25e6\u2013+])\s")
_BRACKETS = ("[", "]")


def _list_item(line: str) -> str | None:
    """The item of a numbered or bulleted ``line`` (its marker, whitespace, then the item), else None;
    linear in the line's length.

    >>> _list_item(" 2) Heat (1995)  "), _list_item("Heat"), _list_item("1.    ")
    ('Heat (1995)', None, None)
    """
    m = _LIST_HEAD_RE.match(line)
    if m is None:
        return None
    item = line[m.end() :].strip()
    return item if item and "\n" not in item else None


def _quoted(text: str):
    r"""The contents of the double-quoted strings of ``text`` (a backslash escapes the next character,
    except a line end), in order; an empty ``""`` is no string (its closing quote may open one).  Linear:
    a string that is never closed ends the scan, since every later quote up to where it failed was
    escaped, and a scan from one of them fails at the same place.

    >>> list(_quoted('["Heat", "Say \\"hi\\"", "unclosed'))
    ['Heat', 'Say \\"hi\\"']
    """
    n, i = len(text), text.find('"')
    while i != -1:
        j = i + 1
        while j < n:
            c = text[j]
            if c == '"':
                break
            if c == "\\":
                if j + 1 < n and text[j + 1] != "\n":
                    j += 2
                    continue
                break
            j += 1
        if j < n and text[j] == '"':
            if j > i + 1:
                yield text[i + 1 : j]
                i = text.find('"', j + 1)
            else:  # "": its closing quote may open a string
                i = j
        else:  # never closed (the end, or a backslash before a line end)
            i = text.find('"', j + 1) if j < n else -1


def _desmart(text: str) -> str:
    return _SMART_RE.sub(lambda m: _SMART[m.group(0)], text)


def clean_title(raw: str) -> str:
    """Strip list markup, surrounding quotes/brackets, trailing commas and markdown emphasis.

    >>> clean_title(' 1. "Toy Story (1995)", ')
    'Toy Story (1995)'
    >>> clean_title('- **Heat**')
    'Heat'
    """
    s = _desmart(str(raw)).strip()
    item = _list_item(s)
    if item is not None:
        s = item
    for _ in range(3):
        s = s.strip().rstrip(",;").strip()
        s = re.sub(r"^(\*\*|__|\*|_|`)(.*)\1$", r"\2", s).strip()
        if len(s) >= 2 and s[0] == s[-1] and s[0] in "\"'":
            s = s[1:-1]
    return re.sub(r"\s+", " ", s).strip()


def _dedup_cap(titles, k: int) -> tuple:
    out, seen, raw_seen = [], set(), set()
    for t in titles:
        if isinstance(t, str):
            if t in raw_seen:  # the same text again: the same title, already kept or skipped
                continue
            raw_seen.add(t)
        else:
            if isinstance(t, (int, float)) and not isinstance(t, bool):
                t = str(t)
            elif isinstance(t, dict):  # {"title": ...} objects
                t = next(
                    (
                        v
                        for key, v in t.items()
                        if str(key).lower() in ("title", "name", "movie", "item") and isinstance(v, str)
                    ),
                    None,
                )
                if t is None:
                    continue
            else:
                continue
        c = clean_title(t)
        key = normalise_title(c)  # the catalogue's key: one movie is listed once
        if not c or key in seen:
            continue
        seen.add(key)
        out.append(c)
        if len(out) >= k:
            break
    return tuple(out)


#: how many ``[`` positions are tried as the start of a JSON array (bounds the cost on hostile text)
MAX_ARRAY_STARTS = 256


class _Notes:
    """What went wrong while parsing (for :func:`parse_with_reason`)."""

    def __init__(self) -> None:
        self.too_deep = False
        self.capped = False


def _json_arrays(text: str, notes: _Notes | None = None):
    """Yield every JSON array that parses, scanning each ``[`` in order (at most
    :data:`MAX_ARRAY_STARTS` of them).  Brackets nested deeper than the interpreter's recursion limit
    are skipped (the JSON decoder raises RecursionError on them), with the run of ``[`` that caused it."""
    dec = json.JSONDecoder()
    i, tried, n = text.find("["), 0, len(text)
    while i != -1:
        if tried >= MAX_ARRAY_STARTS:
            if notes is not None:
                notes.capped = True
            return
        tried += 1
        nxt = i + 1
        try:
            val, _ = dec.raw_decode(text, i)
        except RecursionError:
            if notes is not None:
                notes.too_deep = True
            while nxt < n and text[nxt] in "[ \t\r\n":  # every start inside this run nests as deep
                nxt += 1
            val = None
        except ValueError:
            val = None
        if isinstance(val, list):
            yield val
        i = text.find("[", nxt)


def _from_json(text: str, k: int, notes: _Notes | None = None) -> tuple | None:
    for arr in _json_arrays(text, notes):
        # a list of lists (e.g. [["a", "b"]]) -> flatten one level
        if arr and all(isinstance(x, list) for x in arr):
            arr = [y for x in arr for y in x]
        titles = _dedup_cap(arr, k)
        if titles:
            return titles
    return None


def _from_lines(text: str, k: int) -> tuple:
    marked = [item for item in map(_list_item, text.splitlines()) if item is not None]
    if marked:
        return _dedup_cap(marked, k)
    # an unterminated array or quoted strings separated by commas: take the quoted strings
    if "[" in text:
        quoted = list(_quoted(text[text.index("[") :]))
        if quoted:
            return _dedup_cap(quoted, k)
    return ()


def parse_titles(text: str, k: int) -> tuple:
    """Parse up to ``k`` distinct titles from generated ``text``; return ``(titles, status)``.

    Status is ``"ok"`` for a JSON array, ``"fallback"`` for list lines/fenced lines/quoted strings,
    ``"empty"`` when nothing usable was found.  Never raises on ``text`` (only on ``k <= 0``).

    >>> parse_titles('["Heat (1995)", "Fargo (1996)"]', 10)
    (('Heat (1995)', 'Fargo (1996)'), 'ok')
    >>> parse_titles('Sure!\\n1. Heat\\n2. Fargo\\n3. heat', 10)
    (('Heat', 'Fargo'), 'fallback')
    >>> parse_titles('I cannot help with that.', 10)
    ((), 'empty')
    >>> parse_titles("[" * 100_000, 10)
    ((), 'empty')
    """
    titles, status, _ = parse_with_reason(text, k)
    return titles, status


def parse_with_reason(text, k: int) -> tuple:
    """``(titles, status, reason)``: :func:`parse_titles` plus a short reason for the status.

    >>> parse_with_reason("", 10)
    ((), 'empty', 'no output')
    >>> parse_with_reason("[" * 5000, 10)[2]
    'no list found (brackets nested too deeply)'
    >>> parse_with_reason('["A"]', 10)[2]
    'JSON array'
    """
    if isinstance(k, bool) or not isinstance(k, numbers.Integral) or k <= 0:
        raise ValueError(f"k must be positive (an integer), got {k!r}")
    if text is None:
        return (), PARSE_EMPTY, "no output"
    try:
        t = _desmart(text if isinstance(text, str) else str(text))
    except Exception as exc:  # noqa: BLE001 - an object whose str() fails is still just bad output
        return (), PARSE_EMPTY, f"output is not text ({type(exc).__name__})"
    if not t.strip():
        return (), PARSE_EMPTY, "no output"
    notes = _Notes()
    try:
        found = _from_json(t, k, notes)
        if found:
            return found, PARSE_OK, "JSON array"
        fences = [m.group(1) for m in _FENCE_RE.finditer(t)]
        for block in fences:
            lines = [ln for ln in block.splitlines() if ln.strip() and ln.strip() not in _BRACKETS]
            found = _from_lines(block, k) or _dedup_cap(lines, k)
            if found:
                return found, PARSE_FALLBACK, "fenced block"
        found = _from_lines(t, k)
        if found:
            return found, PARSE_FALLBACK, "list lines or quoted strings"
    except (RecursionError, MemoryError, ValueError, TypeError, re.error) as exc:
        return (), PARSE_EMPTY, f"unparseable ({type(exc).__name__})"
    why = "no list found"
    if notes.too_deep:
        why += " (brackets nested too deeply)"
    elif notes.capped:
        why += f" (only the first {MAX_ARRAY_STARTS} '[' were tried)"
    return (), PARSE_EMPTY, why


#: the most characters one generated token is taken to decode to (vocabularies' longest tokens, runs of
#: spaces or punctuation, are shorter); an answer over ``max_new_tokens`` times this comes from no model
MAX_CHARS_PER_TOKEN = 64


def max_answer_chars(max_new_tokens: int) -> int:
    """The longest answer ``max_new_tokens`` generated tokens can decode to (:data:`MAX_CHARS_PER_TOKEN`
    characters each)."""
    return max(1, int(max_new_tokens)) * MAX_CHARS_PER_TOKEN


def parse_answer(text, k: int, max_new_tokens: int) -> tuple:
    """``(titles, status, text)`` of an answer to a request for at most ``max_new_tokens`` tokens: an
    answer longer than :func:`max_answer_chars` is cut to it first, and its status is ``PARSE_CUT``
    (whatever the cut text parses as); ``text`` is what was parsed (what the cache keeps).  The cost is
    linear in the bounded text, whatever the server sent.

    >>> parse_answer('["Heat"]', 10, 5)
    (('Heat',), 'ok', '["Heat"]')
    >>> titles, status, text = parse_answer('["Heat", "' + "x" * 10_000, 10, 5)
    >>> titles, status, len(text)
    (('Heat',), 'cut', 320)
    """
    if isinstance(text, str) and len(text) > max_answer_chars(max_new_tokens):
        text = text[: max_answer_chars(max_new_tokens)]
        return parse_titles(text, k)[0], PARSE_CUT, text
    titles, status = parse_titles(text, k)
    return titles, status, text


def answer_complete(text: str, k: int) -> bool:
    """Whether the parse of ``text`` is final: ``parse_titles(text + more, k) == parse_titles(text, k)``
    for every continuation ``more`` (a generating row may stop here).

    True when the text's first ``[`` opens a JSON array that is closed in ``text`` and gives at least
    one title: :func:`parse_with_reason` tries that array first and returns its titles, and the JSON
    decoder reads an array up to its closing ``]`` and no further.  (A later ``[`` cannot come first,
    and the smart-quote mapping is one character for one, so positions agree.)  False otherwise,
    including for answers that only the list-line fallback would parse.

    >>> answer_complete('Sure: ["Heat", "Fargo"]', 10), answer_complete('["Heat", "Far', 10)
    (True, False)
    >>> answer_complete('[], ["Heat"]', 10)  # the first array is empty: a later one decides
    False
    """
    if not isinstance(text, str):
        return False
    t = _desmart(text)
    i = t.find("[")
    if i == -1:
        return False
    try:
        val, _ = json.JSONDecoder().raw_decode(t, i)
    except (ValueError, RecursionError):
        return False
    if not isinstance(val, list):
        return False
    if val and all(isinstance(x, list) for x in val):
        val = [y for x in val for y in x]
    return bool(_dedup_cap(val, k))


def ranked_by_scores(candidates: list, scores: list, n_truncated_history: int = 0) -> Prediction:
    """The answer of a likelihood ranker (in-process or served): the candidates by descending summed
    log-probability (ties in candidate order), with the sums and per-token means as its raw output.

    Parameters
    ----------
    candidates : list of str
        The candidate titles, in the prompt's order.
    scores : list of (float, int)
        Per candidate, the summed log-probability of its tokens and their number.
    n_truncated_history : int, default 0
        History titles dropped to fit the context.

    Returns
    -------
    Prediction
        Parse status ``PARSE_NA`` (nothing was parsed).

    Examples
    --------
    >>> p = ranked_by_scores(["A", "B"], [(-3.0, 2), (-1.0, 1)])
    >>> p.titles, p.raw
    (('B', 'A'), '{"sum_logprob": [-3.0, -1.0], "mean_logprob": [-1.5, -1.0]}')
    """
    order = sorted(range(len(candidates)), key=lambda i: (-scores[i][0], i))
    raw = json.dumps(
        {"sum_logprob": [round(s, 6) for s, _ in scores], "mean_logprob": [round(s / n, 6) for s, n in scores]}
    )
    return Prediction(
        titles=tuple(candidates[i] for i in order),
        parse_status=PARSE_NA,
        raw=raw,
        n_model_positions=len(candidates),
        n_truncated_history=n_truncated_history,
    )
