"""One reader for the JSON and TOML files facterlab reads: size and nesting depth are checked before parsing.

Every JSON or TOML file a user can hand facterlab (a ``--sim-bias-table`` file, a sweep file, the files
of a run folder that ``facterlab runs list/compare`` reads, a notebook's parameters cell, the caches'
sidecar files) is read by :func:`read_json` or :func:`read_toml`.  Both read at most the size limit
(plus one byte), so that a huge file, a device or a file that grows never fills the memory, and check
the nesting depth without recursion before the parser (which recurses) sees the text.  A file over a
limit is a :class:`FileLimitError`: a ``ValueError`` whose one line names the file, what it holds and
the limit.  A file within the limits parses exactly as :func:`json.loads` / :func:`tomllib.loads` parse
it, and their own errors (``JSONDecodeError``, ``TOMLDecodeError``, ``UnicodeDecodeError``) pass through
unchanged, so that every caller's messages for malformed files stay as they were.

The limits are in :data:`facterlab.config.BOUNDS` (section ``"files"``).

>>> import tempfile, pathlib
>>> p = pathlib.Path(tempfile.mkdtemp()) / "t.json"
>>> _ = p.write_text('{"a": [1, {"b": "[[[["}]}')
>>> read_json(p)
{'a': [1, {'b': '[[[['}]}
>>> _ = p.write_text("[" * 100 + "]" * 100)
>>> read_json(p, what="bias table")  # doctest: +ELLIPSIS
Traceback (most recent call last):
...
facterlab.safeio.FileLimitError: bias table .../t.json: nests deeper than 64 levels (at character 64) ...
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path
from typing import Any

from facterlab.config import BOUNDS

__all__ = [
    "FileLimitError",
    "depth_problem",
    "loads_json",
    "max_bytes",
    "max_depth",
    "read_json",
    "read_toml",
]


class FileLimitError(ValueError):
    """A JSON or TOML file (or text) over a size or nesting limit of :data:`facterlab.config.BOUNDS`:
    one line naming the file."""


def max_bytes(kind: str = "max_bytes") -> int:
    """The size limit in bytes: ``BOUNDS["files"][kind]`` (``"max_bytes"``, ``"bias_table_bytes"``).

    >>> max_bytes() >= 2**20
    True
    """
    return int(BOUNDS["files"][kind].hi)


def max_depth() -> int:
    """The nesting limit: ``BOUNDS["files"]["depth"]``."""
    return int(BOUNDS["files"]["depth"].hi)


def _size(n: int) -> str:
    return f"{n / 2**20:.1f} MiB" if n >= 2**20 else f"{n / 2**10:.1f} KiB" if n >= 2**10 else f"{n} bytes"


# A JSON string (escapes included), written unrolled so that the regex engine never backtracks.
_JSON_STRING = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*"', re.S)
# TOML: multi-line basic and literal strings, basic and literal strings, and comments.
_TOML_SKIP = re.compile(
    r'"""(?:[^\\]|\\.)*?"""' r"|'''[\s\S]*?'''" r'|"[^"\\\n]*(?:\\.[^"\\\n]*)*"' r"|'[^'\n]*'" r"|#[^\n]*",
    re.S,
)
# TOML keys (strings blanked): a table header, or the text before "=" at a line start or after "{" or ","
_TOML_HEADER = re.compile(r"^[ \t]*\[\[?([^\]\n]*)\]", re.M)
_TOML_KEY = re.compile(r"(?:^|[{,])[ \t]*([^=\n{},\[\]]*)=", re.M)
_OPEN, _CLOSE = b"[{", b"]}"
_OTHERS = bytes(c for c in range(256) if c not in b"[]{}")


def depth_problem(text: str, limit: int | None = None, toml: bool = False) -> str:
    """Why ``text`` nests deeper than ``limit`` brackets (``[`` ``{``) outside strings (and, with
    ``toml``, outside comments); ``""`` when it does not.  A linear scan, no recursion.

    >>> depth_problem('[[["]]]]]]"]]]', 2)
    'nests deeper than 2 levels (at character 2)'
    >>> depth_problem('{"a": [1, 2]}', 2), depth_problem("x = [[1]] # [[[[", 2, toml=True)
    ('', '')
    >>> depth_problem("[a.b]\\nc.d = 1.5", 3, toml=True)
    'nests deeper than 3 levels (dotted keys of 4 parts)'

    """
    limit = max_depth() if limit is None else limit
    nests = text.count("[") + text.count("{") + (text.count(".") if toml else 0)
    if nests <= limit:  # cannot nest deeper: the common case, in C
        return ""
    pattern = _TOML_SKIP if toml else _JSON_STRING
    # blank out the strings (and comments) keeping every position, then look only at the brackets
    blank = pattern.sub(lambda m: " " * (m.end() - m.start()), text)
    if toml:  # dotted keys nest tables without brackets (and the parser is slow on long ones): bound them
        headers = max((m.group(1).count(".") + 1 for m in _TOML_HEADER.finditer(blank)), default=0)
        keys = max((m.group(1).count(".") + 1 for m in _TOML_KEY.finditer(blank)), default=0)
        if headers + keys > limit:
            return f"nests deeper than {limit} levels (dotted keys of {headers + keys} parts)"
    kept = blank.encode("utf-8", "surrogatepass")
    brackets = kept.translate(None, _OTHERS)
    if brackets.count(b"[") + brackets.count(b"{") <= limit:
        return ""
    depth = 0
    for i, c in enumerate(brackets):
        if c in _OPEN:
            depth += 1
            if depth > limit:
                at = _nth_bracket(kept, i)
                return f"nests deeper than {limit} levels (at character {at})"
        elif c in _CLOSE:
            depth -= 1
    return ""


def _nth_bracket(kept: bytes, n: int) -> int:
    """The character position of the ``n``-th bracket (0-based) of ``kept`` (for the message only)."""
    seen = -1
    for m in re.finditer(rb"[\[\]{}]", kept):
        seen += 1
        if seen == n:
            return len(kept[: m.start()].decode("utf-8", "replace"))
    return len(kept)


def _object_depth_problem(obj: Any, limit: int) -> str:
    """Why a parsed object nests deeper than ``limit`` (TOML's dotted keys nest without brackets);
    iterative."""
    stack = [(obj, 0)]
    while stack:
        x, d = stack.pop()
        if isinstance(x, (dict, list)):
            if d + 1 > limit:
                return f"nests deeper than {limit} levels"
            stack.extend((v, d + 1) for v in (x.values() if isinstance(x, dict) else x))
    return ""


def _limit_line(what: str, where: Any, problem: str, kind: str) -> str:
    bound = BOUNDS["files"][kind]
    return f"{what} {where}: {problem} ({bound.why}; config.BOUNDS['files'][{kind!r}])"


def _read_text(path: Path, what: str, kind: str) -> str:
    """At most the limit plus one byte of ``path``, decoded as UTF-8; FileLimitError past the limit."""
    limit = max_bytes(kind)
    with open(path, "rb") as fh:
        size = os.fstat(fh.fileno()).st_size
        if size > limit:
            raise FileLimitError(_limit_line(what, path, f"{_size(size)}, more than the {_size(limit)} limit", kind))
        data = fh.read(limit + 1)
    if len(data) > limit:  # a file that grew, or one whose size the file system does not say
        raise FileLimitError(_limit_line(what, path, f"more than the {_size(limit)} limit", kind))
    return data.decode("utf-8")


def read_json(path: os.PathLike | str, what: str = "JSON file", kind: str = "max_bytes") -> Any:
    """The JSON value of the file ``path``, checked for size (``BOUNDS["files"][kind]``) and depth
    before it is parsed; ``what`` names the file in the error (``"bias table"``, ``"sweep file"``)."""
    p = Path(path)
    text = _read_text(p, what, kind)
    problem = depth_problem(text)
    if problem:
        raise FileLimitError(_limit_line(what, p, problem, "depth"))
    return json.loads(text)


def read_toml(path: os.PathLike | str, what: str = "TOML file", kind: str = "max_bytes") -> dict:
    """The TOML table of the file ``path``, checked like :func:`read_json` (bracket depth before the
    parser, and the parsed table's depth, which TOML's dotted keys can raise without brackets)."""
    import tomllib

    p = Path(path)
    text = _read_text(p, what, kind)
    problem = depth_problem(text, toml=True)
    if problem:
        raise FileLimitError(_limit_line(what, p, problem, "depth"))
    data = tomllib.loads(text)
    problem = _object_depth_problem(data, max_depth())
    if problem:
        raise FileLimitError(_limit_line(what, p, problem, "depth"))
    return data


def loads_json(text: str | bytes, where: str = "JSON text") -> Any:
    """:func:`json.loads` of ``text`` (a line of a JSON-lines file) after the size and depth checks;
    ``where`` names it in the error (``"<file>: line 12"``)."""
    limit = max_bytes()
    if len(text) > limit:
        raise FileLimitError(_limit_line("", where, f"more than the {_size(limit)} limit", "max_bytes").lstrip())
    s = text.decode("utf-8") if isinstance(text, bytes) else text
    problem = depth_problem(s)
    if problem:
        raise FileLimitError(_limit_line("", where, problem, "depth").lstrip())
    return json.loads(s)
