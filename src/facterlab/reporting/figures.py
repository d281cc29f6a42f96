"""Saving figures as PNG (screens) + PDF (reports); the figure style itself lives in :mod:`facterlab.style` (re-exported here).

Figures are named after the paper artefact (``fig1_violations_by_pass``, ``simpson_fig5``) and go to
``figures/`` in the report run only (``facterlab reproduce --profile default``), else beside the
results (``results/figures/``); ``$FACTERLAB_FIGURES`` overrides both (docs/PATHS.md).  matplotlib is imported inside the functions so that
importing facterlab stays light.
"""

from __future__ import annotations

import os
from pathlib import Path

from facterlab import paths as _paths
from facterlab.style import PALETTE, apply_style, title_with_provenance

__all__ = [
    "PALETTE",
    "apply_style",
    "title_with_provenance",
    "figures_dir",
    "save_figure",
]  # style re-exported from facterlab.style


def figures_dir(explicit: os.PathLike | str | None = None) -> Path:
    """Where figures and tables go, created if missing: ``explicit``, else ``$FACTERLAB_FIGURES``, else
    ``<project root>/figures`` in the report run (``FACTERLAB_REPORT=1``, set by ``facterlab reproduce
    --profile default``), else ``<results>/figures`` (:func:`facterlab.paths.figures_dir`)."""
    path = _paths.figures_dir(explicit)
    path.mkdir(parents=True, exist_ok=True)
    return path


def save_figure(fig, name: str, directory: os.PathLike | str | None = None) -> list:
    """Save ``fig`` as ``<name>.png`` and ``<name>.pdf`` into :func:`figures_dir`, print where they
    went, and return the two paths.  Only the report run writes the committed ``figures/``; any other
    run writes beside its results (docs/PATHS.md)."""
    out = figures_dir(directory)
    paths = []
    for ext in ("png", "pdf"):
        path = out / f"{name}.{ext}"
        # no creation date in the PDF: the same figure gives the same bytes, so git shows real changes only
        meta = {"CreationDate": None} if ext == "pdf" else {"Software": None}
        fig.savefig(path, bbox_inches="tight", metadata=meta)
        paths.append(path)
    kind = "report figure" if directory is None and _paths.is_report_run() else "figure"
    print(f"[figures] {kind} {name}.png/.pdf -> {out}")
    return paths
