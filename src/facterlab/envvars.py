"""Every ``FACTERLAB_*`` environment variable, its type and its meaning, in one registry (issue 44).

A value is read through :func:`get`, which refuses a bad one in one line naming the variable, the
value and what it takes (``FACTERLAB_PREFETCH='off'`` was "on": anything but ``0`` meant on).  The
command line checks the whole environment before any work (:func:`check_environment`): a bad value is
an error, an unknown ``FACTERLAB_*`` name a warning with the closest known name.  The table in
docs/PATHS.md is generated from the registry (:func:`markdown_table`; a test compares them).

Switches take ``1``/``true``/``yes``/``on`` and ``0``/``false``/``no``/``off`` (any case).

>>> get("FACTERLAB_PREFETCH", {"FACTERLAB_PREFETCH": "off"}), get("FACTERLAB_PREFETCH", {})
(False, True)
>>> get("FACTERLAB_PREFETCH", {"FACTERLAB_PREFETCH": "maybe"})
Traceback (most recent call last):
...
ValueError: FACTERLAB_PREFETCH='maybe': expected a switch (1/true/yes/on or 0/false/no/off)
>>> get("FACTERLAB_WORKERS", {"FACTERLAB_WORKERS": "abc"})
Traceback (most recent call last):
...
ValueError: FACTERLAB_WORKERS='abc': expected a whole number in [1, 1024]
"""

from __future__ import annotations

import difflib
import math
import os
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

__all__ = ["EnvVar", "REGISTRY", "get", "check_environment", "markdown_table", "PREFIX"]

PREFIX = "FACTERLAB_"
_TRUE = ("1", "true", "yes", "on")
_FALSE = ("0", "false", "no", "off")


@dataclass(frozen=True)
class EnvVar:
    """One variable: ``kind`` is ``path``, ``switch``, ``int``, ``float``, ``choice`` or ``text``;
    ``words`` are the words an ``int`` also takes (``auto``), or a ``choice``'s values; ``low``/``high``
    bound a number; ``who`` says who sets it (``user``, ``facterlab``: set by facterlab for its own
    children, or ``tests``: the test suite's)."""

    name: str
    kind: str
    default: str
    meaning: str
    words: tuple = ()
    low: float | None = None
    high: float | None = None
    who: str = "user"

    def takes(self) -> str:
        """What the variable takes, in a few words."""
        if self.kind == "switch":
            return "a switch (1/true/yes/on or 0/false/no/off)"
        if self.kind in ("int", "float"):
            num = "a whole number" if self.kind == "int" else "a number of seconds"
            rng = f" in [{_num(self.low)}, {_num(self.high)}]" if self.low is not None else ""
            return f"{' or '.join(repr(w) for w in self.words)} or {num}{rng}" if self.words else f"{num}{rng}"
        if self.kind == "choice":
            return "one of " + ", ".join(self.words) + " (any case)"
        return "a folder" if self.kind == "path" else "text"

    def parse(self, raw: str) -> Any:
        """The value of ``raw`` (already known to be set and not blank); ValueError in one line."""
        text = raw.strip()
        low = text.lower()
        bad = ValueError(f"{self.name}={raw[:80]!r}: expected {self.takes()}")
        if self.kind == "switch":
            if low in _TRUE:
                return True
            if low in _FALSE:
                return False
            raise bad
        if self.kind in ("int", "float"):
            if low in self.words:
                return low
            try:
                value: float = int(text) if self.kind == "int" else float(text)
            except (ValueError, OverflowError):
                raise bad from None
            if not math.isfinite(value) or (self.low is not None and not self.low <= value <= (self.high or math.inf)):
                raise bad
            return value
        if self.kind == "choice":
            match = next((w for w in self.words if w.lower() == low), None)
            if match is None:
                raise bad
            return match
        if self.kind == "path" and "\0" in raw:
            raise ValueError(f"{self.name}: a folder's name holds no NUL character")
        return raw


def _num(x: float | None) -> str:
    return "" if x is None else f"{x:g}"


#: every FACTERLAB_* variable facterlab, its notebooks and its tests read
REGISTRY: dict = {
    v.name: v
    for v in (
        EnvVar(
            "FACTERLAB_DATA", "path", "`~/.cache/facterlab/data`", "the data folder (MovieLens, Amazon; docs/PATHS.md)"
        ),
        EnvVar("FACTERLAB_RESULTS", "path", "`<root>/results`", "run folders, tables, the sweep's outputs"),
        EnvVar(
            "FACTERLAB_CACHE", "path", "`<root>/build/cache` (a clone)", "LLM answers, embeddings, interactions, models"
        ),
        EnvVar(
            "FACTERLAB_FIGURES",
            "path",
            "`<root>/figures` (report run), else `<results>/figures`",
            "where figures are saved",
        ),
        EnvVar("FACTERLAB_ROOT", "path", "the clone holding the current folder", "the project root"),
        EnvVar(
            "FACTERLAB_THREADS",
            "int",
            "auto",
            "torch/OpenMP threads of a process (`--threads`)",
            ("auto", "off"),
            1,
            1024,
        ),  # fmt: skip
        EnvVar(
            "FACTERLAB_BLAS_THREADS",
            "int",
            "1",
            "numpy's BLAS threads inside a run (part of no run id)",
            ("auto",),
            1,
            1024,
        ),  # fmt: skip
        EnvVar("FACTERLAB_WORKERS", "int", "cores (1-8)", "runs `run_many` runs at once", (), 1, 1024),
        EnvVar(
            "FACTERLAB_LOG",
            "choice",
            "INFO in a kernel, else none",
            "facterlab's log level (`-v`/`-q` set it)",
            ("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL", "off", "none", "0", "false", "no"),
        ),  # fmt: skip
        EnvVar("FACTERLAB_LOG_EVERY", "float", "15", "seconds between progress log lines", (), 0, 86400),
        EnvVar("FACTERLAB_BARS", "choice", "live, or final in papermill", "progress bars", ("live", "final", "off")),
        EnvVar("FACTERLAB_PREFETCH", "switch", "1", "ask a run's calibration and baseline prompts together first"),
        EnvVar("FACTERLAB_STRICT_DATA", "switch", "0", "a changed data file is an error (`--strict-data`)"),
        EnvVar("FACTERLAB_GGUF_CACHE", "switch", "1", "keep a GGUF model converted under `<cache>/converted-gguf`"),
        EnvVar("FACTERLAB_REPORT", "switch", "0", "this process is the report run (`make reproduce`)"),
        EnvVar("FACTERLAB_JUPYTER_STATUS", "switch", "1", "the JupyterLab server extension rewrites subshell status"),
        EnvVar(
            "FACTERLAB_NOTEBOOK", "text", "unset", "the notebook a kernel runs (set by `reproduce`)", who="facterlab"
        ),
        EnvVar(
            "FACTERLAB_THREADS_CHOSEN",
            "text",
            "unset",
            "the thread variables facterlab wrote (for its children)",
            who="facterlab",
        ),  # fmt: skip
        EnvVar("FACTERLAB_BROWSER_DEADLINE_S", "float", "600", "the browser tests' deadline", (), 1, 86400, "tests"),
        EnvVar("FACTERLAB_DOCS_NOTEBOOKS", "text", "unset", "the docs-site test's notebooks", who="tests"),
        EnvVar("FACTERLAB_README_VERBATIM", "text", "unset", "the README test's verbatim mode", who="tests"),
        EnvVar(
            "FACTERLAB_VLLM_PYTHON",
            "text",
            "unset",
            "the Python executable with vLLM for the served tests",
            who="tests",
        ),
    )
}
#: names under these prefixes belong to the tests (an API key's variable, a server switch): never warned about
TEST_PREFIXES = ("FACTERLAB_TEST_",)


def get(name: str, environ: Mapping[str, str] | None = None) -> Any:
    """The value of the registered variable ``name`` (None when unset or blank, except a switch, which
    then gives its default); ValueError in one line for a bad value.  ``environ``: default
    ``os.environ``."""
    var = REGISTRY[name]
    raw = (os.environ if environ is None else environ).get(name)
    if raw is None or not raw.strip():
        return var.default in _TRUE if var.kind == "switch" else None
    return var.parse(raw)


def check_environment(environ: Mapping[str, str] | None = None) -> list:
    """Check every ``FACTERLAB_*`` variable of ``environ`` (default ``os.environ``): raises ValueError
    (one line) for the first bad value; returns one warning line per unknown name, with the closest
    known name (the value is never shown: it may be a key).

    >>> check_environment({"FACTERLAB_STRICT_DAT": "1", "FACTERLAB_DATA": "/d", "HOME": "/h"})
    ['FACTERLAB_STRICT_DAT is not a facterlab variable (did you mean FACTERLAB_STRICT_DATA?); ignored']
    """
    environ = os.environ if environ is None else environ
    warnings = []
    for name in sorted(k for k in environ if k.startswith(PREFIX)):
        if name in REGISTRY:
            get(name, environ)
        elif not name.startswith(TEST_PREFIXES):
            close = difflib.get_close_matches(name, list(REGISTRY), n=1, cutoff=0.6)
            hint = f"did you mean {close[0]}?" if close else "docs/PATHS.md lists them"
            warnings.append(f"{name} is not a facterlab variable ({hint}); ignored")
    return warnings


def markdown_table() -> str:
    """The registry as a Markdown table (docs/PATHS.md holds it between the markers
    ``<!-- envvars:start -->`` and ``<!-- envvars:end -->``)."""
    lines = ["| Variable | Takes | Default | Meaning | Set by |", "|---|---|---|---|---|"]
    for v in REGISTRY.values():
        lines.append(f"| `{v.name}` | {v.takes()} | {v.default} | {v.meaning} | {v.who} |")
    return "\n".join(lines) + "\n"
