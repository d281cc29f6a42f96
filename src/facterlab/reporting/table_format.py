"""The table object of facterlab's tables (:mod:`facterlab.reporting.tables`) and its cells.

A cell is ``mean ± sd`` over the values present (sample sd; a single value prints alone), with the
reasons of the missing ones as numbered footnotes, never 0; a :class:`Table` writes itself as Markdown,
CSV and LaTeX with its provenance notes.  These were part of :mod:`facterlab.reporting.tables`, which
still re-exports them.
"""

from __future__ import annotations

import io
import math
import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from facterlab.datatypes import MissingValue
from facterlab.reporting.figures import figures_dir

__all__ = ["Cell", "aggregate", "format_mean_sd", "Footnotes", "render_cell", "Table"]

_TEX = {
    "\\": r"\textbackslash{}",
    "&": r"\&",
    "%": r"\%",
    "$": r"\$",
    "#": r"\#",
    "_": r"\_",
    "{": r"\{",
    "}": r"\}",
    "~": r"\textasciitilde{}",
    "^": r"\textasciicircum{}",
    "±": r"$\pm$",
}


# ---------------------------------------------------------------------------------------------
# Cells


@dataclass
class Cell:
    """A table cell: the mean and sd over the values present, how many were present, and why the
    others were missing."""

    mean: float | None
    sd: float | None
    n: int
    n_total: int
    reasons: tuple = ()

    @property
    def missing(self) -> bool:
        """Whether no value was present (``n == 0``)."""
        return self.n == 0


def aggregate(values: Sequence[Any]) -> Cell:
    """Mean and sample sd (ddof = 1) of the present values; missing ones are counted, not zeroed.

    >>> c = aggregate([1.0, 2.0, 3.0]); (c.mean, c.sd, c.n)
    (2.0, 1.0, 3)
    >>> c = aggregate([1.0, MissingValue("x")]); (c.mean, c.sd, c.n, c.n_total, c.reasons)
    (1.0, None, 1, 2, ('x',))
    >>> aggregate([MissingValue("x")]).missing
    True
    """
    present = [float(v) for v in values if not isinstance(v, MissingValue)]
    reasons = tuple(dict.fromkeys(v.reason for v in values if isinstance(v, MissingValue)))
    if not present:
        return Cell(None, None, 0, len(values), reasons)
    mean = sum(present) / len(present)
    sd = None
    if len(present) >= 2:
        sd = math.sqrt(sum((v - mean) ** 2 for v in present) / (len(present) - 1))
    return Cell(mean, sd, len(present), len(values), reasons)


def format_mean_sd(mean: float, sd: float | None, decimals: int = 3, pm: str = "±") -> str:
    """``mean ± sd`` at ``decimals`` places (the sd omitted when None).

    >>> format_mean_sd(0.03456, 0.0041), format_mean_sd(42.666, None, 1)
    ('0.035 ± 0.004', '42.7')
    """
    if sd is None:
        return f"{mean:.{decimals}f}"
    return f"{mean:.{decimals}f} {pm} {sd:.{decimals}f}"


class Footnotes:
    """Numbered footnotes, one per distinct text, in order of first use."""

    def __init__(self) -> None:
        self.texts: list = []

    MAX_LEN = 240

    def mark(self, text: str) -> str:
        """The mark of ``text`` (``"[i]"``), numbering it when it is new; a text over ``MAX_LEN`` characters is cut
        with ``...``.

        >>> f = Footnotes()
        >>> f.mark("a"), f.mark("b"), f.mark("a")
        ('[1]', '[2]', '[1]')
        """
        if len(text) > self.MAX_LEN:
            text = text[: self.MAX_LEN - 3].rstrip() + "..."
        if text not in self.texts:
            self.texts.append(text)
        return f"[{self.texts.index(text) + 1}]"

    def lines(self) -> list:
        """The footnotes as lines ``"[i] text"``, in order of first use."""
        return [f"[{i}] {t}" for i, t in enumerate(self.texts, start=1)]


def render_cell(cell: Cell, decimals: int, notes: Footnotes) -> str:
    """The text of a cell: ``mean ± sd`` at ``decimals`` places, or ``n/a [k]`` with its reason as footnote ``k``."""
    if cell.missing:
        reason = "; ".join(cell.reasons) or "missing"
        return f"n/a {notes.mark(reason)}"
    assert cell.mean is not None  # a cell with n > 0 values has a mean (see aggregate)
    text = format_mean_sd(cell.mean, cell.sd, decimals)
    if cell.n < cell.n_total:
        reason = f"{cell.n_total - cell.n} of {cell.n_total} seeds missing: " + "; ".join(cell.reasons)
        text += f" {notes.mark(reason)}"
    return text


# ---------------------------------------------------------------------------------------------
# The table object and its writers


@dataclass
class Table:
    """A formatted table: header, string rows, provenance notes and numbered footnotes.

    ``values`` is the long numeric form (one row per cell: labels, column, mean, sd, n, n_total,
    missing_reason) for anyone who wants numbers rather than strings.
    """

    name: str
    title: str
    header: list
    rows: list
    notes: list = field(default_factory=list)
    footnotes: list = field(default_factory=list)
    values: Any = None

    def to_frame(self):
        """The formatted table as a pandas DataFrame (the header as columns, string cells)."""
        import pandas as pd

        return pd.DataFrame(self.rows, columns=self.header)

    def to_markdown(self) -> str:
        """GitHub Markdown: title, provenance lines, the table, footnotes."""

        def esc(s: str) -> str:
            return str(s).replace("|", "\\|")

        lines = [f"**{self.title}**", ""]
        lines += [f"{n}  " for n in self.notes]
        if self.notes:
            lines.append("")
        lines.append("| " + " | ".join(esc(h) for h in self.header) + " |")
        lines.append("|" + "|".join("---" for _ in self.header) + "|")
        for row in self.rows:
            lines.append("| " + " | ".join(esc(c) for c in row) + " |")
        if self.footnotes:
            lines.append("")
            lines += [f"{f}  " for f in self.footnotes]
        return "\n".join(lines) + "\n"

    def to_csv(self) -> str:
        """CSV of the formatted cells; provenance and footnotes follow as ``# `` comment lines
        (``pandas.read_csv(path, comment="#")`` reads the table back)."""
        import csv

        buf = io.StringIO()
        for line in self.provenance():  # the header: which runs and code made the table
            buf.write(f"# {line}\n")
        w = csv.writer(buf, lineterminator="\n")
        w.writerow(self.header)
        w.writerows(self.rows)
        for line in [self.title, *[n for n in self.notes if n not in self.provenance()], *self.footnotes]:
            buf.write(f"# {line}\n")
        return buf.getvalue()

    def provenance(self) -> list:
        """The notes naming the runs and code version behind the table (:func:`run_provenance`)."""
        return [n for n in self.notes if n.startswith(("Runs: ", "Made from: "))]

    def to_latex(self) -> str:
        """A ``table`` environment with booktabs rules; notes and footnotes below the tabular."""

        def tex(s: str) -> str:
            return "".join(_TEX.get(ch, ch) for ch in str(s))

        ncol = len(self.header)
        lines = [
            *[f"% {line}" for line in self.provenance()],
            r"\begin{table}[t]",
            r"\centering",
            r"\small",
            r"\begin{tabular}{" + "l" * ncol + "}",
            r"\toprule",
            " & ".join(tex(h) for h in self.header) + r" \\",
            r"\midrule",
        ]
        for row in self.rows:
            lines.append(" & ".join(tex(c) for c in row) + r" \\")
        lines.append(r"\bottomrule")
        lines.append(r"\end{tabular}")
        extra = [*self.notes, *self.footnotes]
        if extra:
            lines.append(r"\par\footnotesize " + r" \\ ".join(tex(e) for e in extra))
        proto = [n for n in self.notes if n.startswith("Protocol (")]
        lines.append(r"\caption{" + tex(" ".join([self.title, *proto])) + "}")
        lines.append(r"\label{tab:" + self.name.replace("_", "-") + "}")
        lines.append(r"\end{table}")
        return "\n".join(lines) + "\n"

    def save(self, directory: os.PathLike | str | None = None) -> dict:
        """Write ``<name>.md``, ``<name>.csv`` and ``<name>.tex`` into ``figures/`` (or
        ``directory``); return ``{"md": path, "csv": path, "tex": path}``."""
        out = figures_dir(directory)
        paths = {}
        for ext, text in (("md", self.to_markdown()), ("csv", self.to_csv()), ("tex", self.to_latex())):
            p = out / f"{self.name}.{ext}"
            p.write_text(text, encoding="utf-8")
            paths[ext] = p
        return paths
