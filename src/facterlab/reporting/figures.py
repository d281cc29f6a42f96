"""One figure style for every notebook, and saving as PNG (screens) + PDF (reports).

Figures are named after the paper artefact (``fig1_violations_by_pass``, ``simpson_fig5``) and go to
``figures/`` (or ``$FACTERLAB_FIGURES``).  matplotlib is imported inside the functions so that
importing facterlab stays light.
"""

from __future__ import annotations

import os
from pathlib import Path

PALETTE = {
    "neutral": "#7f7f7f",
    "fair": "#1f77b4",
    "facter": "#d62728",
    "aggregate": "#ff7f0e",
    "per_user": "#2ca02c",
    "ips_counts": "#9467bd",
    "ips_model": "#8c564b",
}


def figures_dir(explicit: os.PathLike | str | None = None) -> Path:
    """``explicit``, else ``$FACTERLAB_FIGURES``, else ``./figures``; created if missing."""
    path = Path(explicit) if explicit is not None else Path(os.environ.get("FACTERLAB_FIGURES", "figures"))
    path.mkdir(parents=True, exist_ok=True)
    return path


def apply_style() -> None:
    """The house style: seaborn whitegrid, readable fonts, tight layout."""
    import matplotlib as mpl

    try:
        import seaborn as sns

        sns.set_theme(style="whitegrid", context="notebook")
    except ImportError:  # seaborn is optional for the style
        pass
    mpl.rcParams.update(
        {
            "figure.dpi": 100,
            "savefig.dpi": 150,
            "figure.autolayout": True,
            "pdf.fonttype": 42,
            "axes.titlesize": "medium",
        }
    )


def save_figure(fig, name: str, directory: os.PathLike | str | None = None) -> list:
    """Save ``fig`` as ``<name>.png`` and ``<name>.pdf``; return the two paths."""
    out = figures_dir(directory)
    paths = []
    for ext in ("png", "pdf"):
        path = out / f"{name}.{ext}"
        # no creation date in the PDF: the same figure gives the same bytes, so git shows real changes only
        meta = {"CreationDate": None} if ext == "pdf" else {"Software": None}
        fig.savefig(path, bbox_inches="tight", metadata=meta)
        paths.append(path)
    return paths


def title_with_provenance(title: str, dataset: str, is_synthetic: bool, model: str = "", profile: str = "") -> str:
    """A figure title that says which data (and model, profile) made it; synthetic data says so.

    >>> title_with_provenance("Fig 1", "synthetic", True, "smollm2-135m", "default")
    'Fig 1 [SYNTHETIC DATA; synthetic, smollm2-135m, profile default]'
    """
    bits = [b for b in (dataset, model, f"profile {profile}" if profile else "") if b]
    tag = ("SYNTHETIC DATA; " if is_synthetic else "") + ", ".join(bits)
    return f"{title} [{tag}]"
