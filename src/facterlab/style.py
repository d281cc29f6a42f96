"""The house figure style shared by FACTER's figures (:mod:`facterlab.reporting`) and the Simpson
figures and explorer (:mod:`facterlab.simpson.plots`, :mod:`facterlab.simpson.explorer`).

It sits in the base layer so that both can use it without an upward import (docs/ARCHITECTURE.md);
:mod:`facterlab.reporting.figures` re-exports it.  matplotlib is imported inside :func:`apply_style`
only, so importing this module stays light.
"""

from __future__ import annotations

__all__ = [
    "PALETTE",
    "apply_style",
    "title_with_provenance",
    "add_caption",
    "set_provenance",
    "degenerate_note",
    "DEGENERATE_PREFIX",
]

PALETTE = {
    "neutral": "#7f7f7f",
    "fair": "#1f77b4",
    "facter": "#d62728",
    "aggregate": "#ff7f0e",
    "per_user": "#2ca02c",
    "ips_counts": "#9467bd",
    "ips_model": "#8c564b",
}


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


def title_with_provenance(title: str, dataset: str, is_synthetic: bool, model: str = "", profile: str = "") -> str:
    """A figure title that says which data (and model, profile) made it; synthetic data says so.

    >>> title_with_provenance("Fig 1", "synthetic", True, "smollm2-135m", "default")
    'Fig 1 [SYNTHETIC DATA; synthetic, smollm2-135m, profile default]'
    """
    bits = [b for b in (dataset, model, f"profile {profile}" if profile else "") if b]
    tag = ("SYNTHETIC DATA; " if is_synthetic else "") + ", ".join(bits)
    return f"{title} [{tag}]"


def add_caption(fig, text: str, fontsize: float = 7.5) -> None:
    """A caption line (or lines) under the figure: its n, the interval drawn, notes.  Stored on the
    figure as ``fig._facterlab_caption`` too, so tests and callers can read it back; a second call
    replaces the caption (pass the old one plus a note to extend it).

    Parameters
    ----------
    fig : matplotlib.figure.Figure
        The figure.
    text : str
        The caption, wrapped to the figure's width.
    fontsize : float, default 7.5
        Its size in points.

    Returns
    -------
    None
    """
    fig._facterlab_caption = text
    _draw_caption(fig, fontsize)


def set_provenance(fig, text: str) -> None:
    """The provenance line of a figure (the runs and code version that made it), drawn as the last line
    of its caption (a caption is started when the figure has none); setting it again replaces it.
    Stored as ``fig._facterlab_provenance``."""
    fig._facterlab_provenance = text
    _draw_caption(fig, getattr(fig, "_facterlab_caption_size", 7.5))


def _draw_caption(fig, fontsize: float) -> None:
    import textwrap

    text = "\n".join(
        t for t in (getattr(fig, "_facterlab_caption", ""), getattr(fig, "_facterlab_provenance", "")) if t
    )
    old = getattr(fig, "_facterlab_caption_artist", None)
    if old is not None:
        old.remove()
    # wrapped here, to the figure's width, instead of matplotlib's ``wrap=True``: a wrapped text is laid
    # out again when ``bbox_inches="tight"`` saves the figure, and then lands on the legend above it
    chars = max(40, int(fig.get_figwidth() * 72 / (fontsize * 0.55)))
    lines = "\n".join(
        textwrap.fill(part, chars, break_on_hyphens=False, break_long_words=False) for part in text.split("\n")
    )
    fig._facterlab_caption_size = fontsize
    fig._facterlab_caption_artist = fig.text(
        0.01, -0.01, lines, ha="left", va="top", fontsize=fontsize, gid="facterlab-caption"
    )


DEGENERATE_PREFIX = "not drawn: "


def degenerate_note(ax, reason: str) -> None:
    """Replace a panel's content by a visible note (``"not drawn: <reason>"``, wrapped to the panel) for
    degenerate input; the panel's empty ticks are removed so that nothing reads as data."""
    import textwrap

    ax.set_xticks([])
    ax.set_yticks([])
    ax.text(
        0.5,
        0.5,
        "\n".join(textwrap.wrap(DEGENERATE_PREFIX + reason, 34)),
        ha="center",
        va="center",
        transform=ax.transAxes,
        fontsize=8,
        gid="facterlab-degenerate",
        bbox={"boxstyle": "round", "facecolor": "#fff3cd", "edgecolor": "#d4a017", "linewidth": 0.8},
    )
