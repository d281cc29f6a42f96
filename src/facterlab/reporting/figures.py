"""Saving figures as PNG (screens) + PDF (reports), with their provenance; the figure style itself lives
in :mod:`facterlab.style` (re-exported here).

Figures are named after the paper artefact (``fig1_violations_by_pass``, ``simpson_fig5``) and go to
``figures/`` in the report run only (``facterlab reproduce --profile default``), else beside the
results: ``results/figures/<notebook>/<UTC start of this kernel>/`` when a notebook saves them (so that
one exploratory run never overwrites another's), ``results/figures/`` from a script or a test;
``$FACTERLAB_FIGURES`` overrides both (docs/PATHS.md).

Provenance: every saved figure names the FACTER runs it was drawn from (their ids and the code
version that made them) and the code version that drew it, in its caption's last line and in the
file's metadata (PNG text chunks ``facterlab:runs`` and ``facterlab:code``; PDF ``Subject`` and
``Keywords``); tables carry the same line in their header (:func:`run_provenance`).  matplotlib is
imported inside the functions so that importing facterlab stays light.
"""

from __future__ import annotations

import functools
import os
import re
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from facterlab import paths as _paths
from facterlab.facter.record import RunRecord, as_metrics, code_version, is_one_run
from facterlab.style import PALETTE, apply_style, set_provenance, title_with_provenance

__all__ = [
    "PALETTE",
    "apply_style",
    "title_with_provenance",
    "figures_dir",
    "save_figure",
    "attach_runs",
    "run_provenance",
    "provenance_line",
    "read_png_provenance",
]  # style re-exported from facterlab.style

PNG_RUNS_KEY = "facterlab:runs"
PNG_CODE_KEY = "facterlab:code"
NO_RUNS = "none named (not drawn from FACTER runs, or the caller did not name them)"


@functools.lru_cache(maxsize=1)
def drawing_code_version() -> str:
    """The code version of this process (:func:`facterlab.facter.record.code_version`), asked once."""
    return code_version()


@functools.lru_cache(maxsize=1)
def _session_stamp() -> str:
    return datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%SZ")


def notebook_name() -> str | None:
    """The notebook this kernel runs: ``$FACTERLAB_NOTEBOOK`` (set by ``facterlab reproduce``), else
    JupyterLab's ``$JPY_SESSION_NAME``; None outside a notebook."""
    name = os.environ.get("FACTERLAB_NOTEBOOK") or os.environ.get("JPY_SESSION_NAME")
    if not name:
        return None
    stem = Path(name).stem
    return re.sub(r"[^A-Za-z0-9_.-]", "_", stem) or None


def figures_dir(explicit: os.PathLike | str | None = None) -> Path:
    """Where figures and tables go, created if missing: ``explicit``, else ``$FACTERLAB_FIGURES``, else
    ``<project root>/figures`` in the report run (``FACTERLAB_REPORT=1``, set by ``facterlab reproduce
    --profile default``), else ``<results>/figures`` (:func:`facterlab.paths.figures_dir`), inside it
    ``<notebook>/<UTC time this kernel first saved>/`` when a notebook saves (:func:`notebook_name`), so
    that exploratory runs keep their outputs side by side instead of overwriting one another."""
    path = _paths.figures_dir(explicit)
    if explicit is None and not os.environ.get(_paths.ENV_FIGURES) and not _paths.is_report_run():
        nb = notebook_name()
        if nb:
            path = path / nb / _session_stamp()
    path.mkdir(parents=True, exist_ok=True)
    return path


#: what a footer says instead of a code version it does not know, and why (issue 42: never "not recorded")
UNKNOWN_CODE = {
    "id": "an unknown commit (the artefact was given a run id, not the run's record)",
    "metrics": "an unknown commit (the artefact was given metrics only; the run's run.json holds the commit)",
    "meta": "an unknown commit (the run folder has no run.json)",
    "empty": "an unknown commit (the run's run.json records none)",
}


def _run_entries(runs: Any) -> list:
    """``[(run_id, code version or None, seed or None), ...]`` of run records, results or metrics."""
    if runs is None:
        return []
    out: list[tuple[str, Any, Any]] = []
    for r in [runs] if is_one_run(runs) else runs:
        rec = r if isinstance(r, RunRecord) else getattr(r, "record", None)
        if isinstance(r, str):  # a run id
            out.append((r, UNKNOWN_CODE["id"], None))
            continue
        if not r:
            continue
        m = as_metrics(r)  # anything else that is not a run is an error, never a run left out silently
        if not isinstance(rec, RunRecord):
            code = UNKNOWN_CODE["metrics"]
        elif rec.meta is None:
            code = UNKNOWN_CODE["meta"]
        else:
            code = rec.meta.code_version or UNKNOWN_CODE["empty"]
        seed = rec.config.setting("seed") if isinstance(rec, RunRecord) else None
        out.append((str(m.run_id) if m.run_id else "unknown run id", code, seed))
    return list(dict.fromkeys(out))


def provenance_line(runs: Any = None, source: str | None = None) -> str:
    """One line naming the runs behind an artefact and the code versions: ``"Runs: 18036bc7c7a2-fb778539
    (seed 0). Code: runs made by git 602a7e8; drawn by git 602a7e8-dirty."``.  ``source``: what an artefact
    not drawn from FACTER runs was made from (e.g. a Simpson simulation's seeds).

    >>> provenance_line(None, "toy lists").startswith("Made from: toy lists. Runs: none named")
    True
    """
    return _line(_run_entries(runs), source)


def _line(entries: list, source: str | None) -> str:
    if entries:
        ids = ", ".join(f"{rid} (seed {seed})" if seed is not None else rid for rid, _c, seed in entries)
        codes = list(dict.fromkeys(c if c else UNKNOWN_CODE["empty"] for _r, c, _s in entries))
        text = f"Runs: {ids}. Code: runs made by {' / '.join(codes)}; drawn by {drawing_code_version()}."
    else:
        text = f"Runs: {NO_RUNS}. Code: drawn by {drawing_code_version()}."
    return f"Made from: {source}. {text}" if source else text


def run_provenance(runs: Any = None, source: str | None = None) -> list:
    """The provenance lines a table starts with (:func:`provenance_line`), as a list of one line."""
    return [provenance_line(runs, source)]


def attach_runs(fig, runs: Any) -> Any:
    """Remember on ``fig`` the runs it was drawn from (:func:`save_figure` names them); returns ``fig``."""
    fig._facterlab_runs = _run_entries(runs)
    return fig


def save_figure(
    fig, name: str, directory: os.PathLike | str | None = None, runs: Any = None, source: str | None = None
) -> list:
    """Save ``fig`` as ``<name>.png`` and ``<name>.pdf`` into :func:`figures_dir`, print where they
    went, and return the two paths.  Only the report run writes the committed ``figures/``; any other
    run writes beside its results (docs/PATHS.md).

    Provenance: the runs (``runs``, else those :func:`attach_runs` or the figure function remembered)
    and the code version go into the caption's last line and the files' metadata; ``source`` says what a
    figure not drawn from FACTER runs was made from."""
    entries = _run_entries(runs) if runs is not None else list(getattr(fig, "_facterlab_runs", None) or [])
    line = _line(entries, source)
    set_provenance(fig, line)
    ids = ", ".join(e[0] for e in entries) if entries else NO_RUNS
    out = figures_dir(directory)
    paths = []
    for ext in ("png", "pdf"):
        path = out / f"{name}.{ext}"
        # no creation date in the PDF: the same figure gives the same bytes, so git shows real changes only
        if ext == "pdf":
            meta = {"CreationDate": None, "Subject": line, "Keywords": f"facterlab runs: {ids}"}
        else:
            meta = {"Software": None, PNG_RUNS_KEY: ids, PNG_CODE_KEY: drawing_code_version(), "Description": line}
        fig.savefig(path, bbox_inches="tight", metadata=meta)
        paths.append(path)
    kind = "report figure" if directory is None and _paths.is_report_run() else "figure"
    print(f"[figures] {kind} {name}.png/.pdf -> {out}")
    return paths


def read_png_provenance(path: os.PathLike | str) -> dict:
    """The text chunks of a PNG (``facterlab:runs``, ``facterlab:code``, ``Description``), read with
    the standard library only."""
    import struct
    import zlib

    data = Path(path).read_bytes()
    if data[:8] != b"\x89PNG\r\n\x1a\n":
        raise ValueError(f"{path} is not a PNG file")
    out: dict = {}
    pos = 8
    while pos + 8 <= len(data):
        (length,) = struct.unpack(">I", data[pos : pos + 4])
        kind = data[pos + 4 : pos + 8]
        body = data[pos + 8 : pos + 8 + length]
        if kind == b"tEXt":
            key, _, value = body.partition(b"\x00")
            out[key.decode("latin-1")] = value.decode("latin-1")
        elif kind == b"zTXt":
            key, _, rest = body.partition(b"\x00")
            out[key.decode("latin-1")] = zlib.decompress(rest[1:]).decode("latin-1")
        elif kind == b"iTXt":
            key, _, rest = body.partition(b"\x00")
            flag, _method = rest[0], rest[1]
            _lang, _, rest = rest[2:].partition(b"\x00")
            _tkey, _, text = rest.partition(b"\x00")
            out[key.decode("latin-1")] = (zlib.decompress(text) if flag else text).decode("utf-8")
        elif kind == b"IEND":
            break
        pos += 12 + length
    return out
