"""Tables from FACTER run records (docs/FACTER.md §4, §6): Markdown, CSV and LaTeX.

A table is built from one or more run records (:mod:`facterlab.facter.record`; the flat view
:meth:`RunMetrics.flat` gives each cell's value; a partial metrics.json object is read with
:meth:`RunMetrics.partial`).
Runs that agree on everything but the seed form one group; each cell of a group is
``mean ± sd`` over its seeds (sample sd, ``ddof = 1``; a single seed prints the value alone).
A value that cannot be computed prints ``n/a [k]`` with footnote ``[k]`` giving the reason,
never 0; a mean over fewer seeds than the group has gets a footnote that says how many were missing.

Every table states what made it: dataset, model, profile, preset, protocol and the variant names
(threshold_rule, snsr variant, mapping, flip strategy, correction, ...). A variant on which the
runs disagree becomes a row-label column, so that rows never mix variants silently.

>>> m = {"dataset": "synthetic", "is_synthetic": True, "model": "fake", "protocol": "open",
...      "preset": "repro", "variants": {"threshold_rule": "one_sided"},
...      "methods": {"neutral": {"ndcg@10_multi": 0.25},
...                  "facter": {"ndcg@10_multi": {"value": None, "missing_reason": "no rows"}}}}
>>> t = method_table([RunMetrics.partial(m)], name="t", title="T", columns=[Column("ndcg@10_multi", "NDCG@10")],
...                  methods=("neutral", "facter"), published=())
>>> [r[-1] for r in t.rows]
['0.250', 'n/a [1]']
>>> t.footnotes
['[1] no rows']
"""

from __future__ import annotations

import io
import math
import os
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from facterlab.config import FAKE_LLM, SIMULATED_LLM
from facterlab.datatypes import MissingValue
from facterlab.facter.record import METHODS, RunMetrics, RunRecord, as_metrics
from facterlab.facter.record import as_value as metric_value
from facterlab.reporting import published as pub
from facterlab.reporting.figures import figures_dir, run_provenance
from facterlab.reporting.labels import METHOD_LABELS as _METHOD_LABELS

__all__ = ["MissingValue", "metric_value"]  # re-exported: the one missing-value type, record values as numbers

METHOD_LABELS = _METHOD_LABELS  # the one mapping of display names (facterlab.reporting.labels)
VIOLATION_KINDS = ("fixed_q0", "adaptive", "corrected", "q_star", "hoeffding", "repro_count", "repro_dynamic")
#: REPRO's names for its two corrected counts, beside ours: its "fixed (corrected)" count (threshold
#: Q0 + C/sqrt(n), our ``repro_count``) and its corrected-dynamic count (Q_t + C/sqrt(n), ``repro_dynamic``)
REPRO_FIXED_CORRECTED = "REPRO fixed (corrected)"
REPRO_CORRECTED_DYNAMIC = "REPRO corrected-dynamic"
#: why a column is missing when the run did not record it (instead of the generic "not recorded")
MISSING_REASONS = {
    "violations_repro_dynamic": "REPRO's corrected-dynamic count (S > Q_t + C/sqrt(n)) is not computed by this "
    "run's monitor: it records fixed_q0, adaptive, corrected, q_star, hoeffding and repro_count only",
}
ATTRIBUTES = ("gender", "age", "occupation")
#: Variant names printed with every table (keys of metrics.json "variants").
VARIANT_KEYS = (
    "threshold_rule",
    "correction",
    "rule_keying",
    "mapping",
    "flip_strategy",
    "snsr",
    "calibration_prompt",
    "ranker",
)
#: The protocol switches (docs/PROTOCOL.md; config.PROTOCOL_SWITCHES): printed in their own header line
#: ("Protocol: ...", also in the LaTeX caption) and "not recorded" for runs that predate them.
PROTOCOL_KEYS = (
    "tie_order",
    "ndcg_positions",
    "snsr_items",
    "snsr_empty_rows",
    "rule_tie_order",
    "top1",
    "empty_output_rule",
    "cfr_prompt",
    "gender_in_prompt",
)
#: Run-level fields that identify a group besides the variants.
RUN_KEYS = ("dataset", "model", "encoder", "protocol", "preset", "is_synthetic")
NOT_REPORTED = "not reported by the published source"
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


@dataclass(frozen=True)
class Column:
    """A table column: the flat metric key, its header, and decimals (3 for rates, 1 for counts)."""

    key: str
    label: str
    decimals: int = 3


OPEN_COLUMNS = (
    Column("ndcg@10_multi", "NDCG@10"),
    Column("ndcg@10_single", "NDCG@10 (single)"),
    Column("recall@10_multi", "Recall@10"),
    Column("recall@10_single", "Recall@10 (single)"),
    Column("valid@10", "Valid@10"),
    Column("snsr_joint", "SNSR"),
    Column("cfr_multi", "CFR"),
    Column("violations_fixed_q0", "V(0)", 1),
    Column("violations_adaptive", "V(t)", 1),
    Column("violations_repro_count", REPRO_FIXED_CORRECTED, 1),
    Column("no_neighbour_test", "No CF nb."),  # share of test rows without a counterfactual neighbour
    Column("n_degenerate", "Degenerate", 1),  # rows with empty/unparseable output, or all when one list for all
)
RANK_COLUMNS = tuple(c for c in OPEN_COLUMNS if c.key != "valid@10")  # re-ranking outputs are always valid
THRESHOLD_COLUMNS = (
    Column("violations_fixed_q0", "V vs Q0", 1),
    Column("violations_adaptive", "V vs Q_t", 1),
    Column("violations_q_star", "V vs Q*", 1),
    Column("violations_repro_count", f"{REPRO_FIXED_CORRECTED}: Q0 + C/sqrt(n)", 1),
    Column("violations_repro_dynamic", f"{REPRO_CORRECTED_DYNAMIC}: Q_t + C/sqrt(n)", 1),
    Column("violations_corrected", "V vs Q0 + our correction", 1),
    Column("violations_hoeffding", "V vs Q0 + Hoeffding", 1),
    Column("no_neighbour_test", "No CF nb. (test)"),
    Column("no_neighbour_calib", "No CF nb. (calib)"),
    Column("q_final", "Q final"),
)


def run_level_values(metrics: Any) -> dict:
    """Run-level cells shown beside each method's (:meth:`RunMetrics.run_level`): the shares of test and
    calibration rows with no counterfactual neighbour (Delta = 0 there, so S is the prediction error d alone).

    >>> run_level_values(RunMetrics.partial({"calibration": {"share_no_neighbour": 0.969, "test_share_no_neighbour": 0.95}}))
    {'no_neighbour_test': 0.95, 'no_neighbour_calib': 0.969}
    >>> run_level_values(RunMetrics.partial({}))["no_neighbour_test"].reason
    'share of rows without a counterfactual neighbour not recorded in metrics.json'
    """
    return as_metrics(metrics).run_level()


def run_field(metrics: Any, key: str) -> Any:
    """A run-level field or variant of a run (:meth:`RunMetrics.field_value`).

    >>> run_field(RunMetrics.partial({"model": "smollm2-135m@ab12", "model_name": "smollm2-135m"}), "model")
    'smollm2-135m'
    """
    return as_metrics(metrics).field_value(key)


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


class _Footnotes:
    """Numbered footnotes, one per distinct text, in order of first use."""

    def __init__(self) -> None:
        self.texts: list = []

    MAX_LEN = 240

    def mark(self, text: str) -> str:
        if len(text) > self.MAX_LEN:
            text = text[: self.MAX_LEN - 3].rstrip() + "..."
        if text not in self.texts:
            self.texts.append(text)
        return f"[{self.texts.index(text) + 1}]"

    def lines(self) -> list:
        return [f"[{i}] {t}" for i, t in enumerate(self.texts, start=1)]


def render_cell(cell: Cell, decimals: int, notes: _Footnotes) -> str:
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


# ---------------------------------------------------------------------------------------------
# Provenance


def _provenance_notes(runs: Sequence[RunMetrics], varying: Sequence[str], profile: str | None) -> list:
    def values_of(key):
        vals = [run_field(m, key) for m in runs]
        return list(dict.fromkeys("n/a" if v is None else str(v) for v in vals))

    made = []
    for key in ("dataset", "model", "encoder", "protocol", "preset"):
        if key in varying:
            continue
        vals = values_of(key)
        made.append(f"{key} {' / '.join(vals)}")
    if profile is not None:
        made.append(f"profile {profile}")
    notes = ["Made by: " + ", ".join(made) + "."]
    if any(bool(m.is_synthetic) for m in runs):
        notes.insert(0, "SYNTHETIC DATA: these numbers are not MovieLens or Amazon results.")
    variant_keys = list(dict.fromkeys([*VARIANT_KEYS, *sorted({k for m in runs for k in m.variants})]))
    proto = []
    for key in PROTOCOL_KEYS:
        if key in varying:
            continue
        vals = [run_field(m, key) for m in runs]
        shown = list(dict.fromkeys("not recorded" if v is None else str(v) for v in vals))
        proto.append(f"{key}={' / '.join(shown)}")
    if proto:
        notes.append("Protocol (docs/PROTOCOL.md): " + ", ".join(proto) + ".")
    variants = []
    for key in variant_keys:
        if key in varying or key in PROTOCOL_KEYS:
            continue
        vals = values_of(key)
        if vals == ["n/a"]:
            continue
        variants.append(f"{key}={' / '.join(vals)}")
    if variants:
        notes.append("Variants: " + ", ".join(variants) + ".")
    calib = [m.calibration for m in runs]
    alphas = list(dict.fromkeys(str(c.alpha) for c in calib if isinstance(c.alpha, (int, float))))
    sizes = list(dict.fromkeys(f"{m.n_calib}/{m.n_test}" for m in runs if m.n_calib is not None))
    if len(sizes) > 1:  # say which runs have which split
        sizes = list(
            dict.fromkeys(f"{run_field(m, 'model')} {m.n_calib}/{m.n_test}" for m in runs if m.n_calib is not None)
        )
    bits = []
    if alphas:
        bits.append(f"alpha {' / '.join(alphas)}")
    if sizes:
        bits.append(f"calibration/test rows {' / '.join(sizes)}")
    if bits:
        notes.append("Setting: " + ", ".join(bits) + "; cells are mean ± sd over seeds (sd with ddof 1).")
    num = lambda x: x if isinstance(x, (int, float)) else None  # noqa: E731
    shares = [(num(c.share_no_neighbour), num(c.test_share_no_neighbour)) for c in calib]
    shares = [s for s in shares if s[0] is not None]
    if shares:
        fmt = lambda xs: " / ".join(dict.fromkeys(f"{x:.1%}" for x in xs if x is not None)) or "n/a"  # noqa: E731
        notes.append(
            f"Counterfactual neighbours: no neighbour for {fmt([s[0] for s in shares])} of calibration "
            f"rows and {fmt([s[1] for s in shares])} of test rows (Delta = 0 there: S = d alone)."
        )
    return notes


#: the settings that make runs seeds of one another: every other setting must match for them to be pooled
SEED_SETTINGS = ("seed", "data.seed", "sim.seed")


def run_settings(run: Any) -> dict:
    """Everything about a run but its seed, flat (``{"n_test": 12, "model.llm": "simulated",
    "sim.beta": 1.0, ...}``): the run-level fields and variants of its metrics, its calibration/test
    sizes and alpha, and, when the run's config is at hand (a run record or result, not a bare metrics
    dict), every setting of that config except :data:`SEED_SETTINGS`.  Two runs are seeds of one
    another exactly when these dicts are equal.

    >>> a = run_settings(RunMetrics.partial({"model": "simulated", "n_calib": 28, "n_test": 12}))
    >>> b = run_settings(RunMetrics.partial({"model": "simulated", "n_calib": 1750, "n_test": 750}))
    >>> a == b, sorted(k for k in a if a[k] != b[k])
    (False, ['n_calib', 'n_test'])
    """
    m = as_metrics(run)
    out: dict = {k: run_field(m, k) for k in RUN_KEYS}
    out.update({k: v for k, v in sorted(m.variants.items())})
    out["n_calib"], out["n_test"] = m.n_calib, m.n_test
    alpha = m.calibration.alpha
    out["alpha"] = alpha if isinstance(alpha, (int, float)) else None
    rec = run if isinstance(run, RunRecord) else getattr(run, "record", None)
    if isinstance(rec, RunRecord):
        flat = rec.config.settings()
        out.update({k: v for k, v in flat.items() if k not in SEED_SETTINGS})
        out["dataset"] = rec.config.dataset  # the data actually used (config says "auto")
    return {k: (v if isinstance(v, (int, float, str, bool, type(None))) else str(v)) for k, v in out.items()}


def seed_groups(runs: Sequence[Any]) -> list:
    """The runs grouped so that a group differs only by seed (:func:`run_settings` equal), in order
    of first appearance; each group a list of the runs as given."""
    groups: dict = {}
    for r in runs:
        key = tuple(sorted((k, repr(v)) for k, v in run_settings(r).items()))
        groups.setdefault(key, []).append(r)
    return list(groups.values())


#: settings a group label names first when they differ, with their display names
_LABEL_SETTINGS = {
    "model": "model",
    "dataset": "data",
    "data.n_rows": "rows",
    "n_test": "test rows",
    "n_calib": "calibration rows",
    "protocol": "protocol",
    "preset": "preset",
    "alpha": "alpha",
}


#: settings a group label always shows (recommender, its bias settings, sizes): left out of its differences
LABELLED_SETTINGS = ("n_calib", "n_test", "model", "model.llm", "sim.beta", "sim.rho", "is_synthetic", "encoder")


def differences_note(groups: Sequence[Sequence[Any]], what: str = "block") -> str:
    """A note listing every setting on which the seed groups differ besides what their labels show
    (``""`` when none): ``"Other settings that differ: block 1: metrics.cfr_rows 3; block 2: ..."``."""
    full = setting_differences(groups, skip=LABELLED_SETTINGS)
    if not any(full):
        return ""
    return (
        "Settings that differ between the "
        + f"{what}s: "
        + "; ".join(f"{what} {i}: {d or 'as the others'}" for i, d in enumerate(full, start=1))
        + "."
    )


def recommender_label(run: Any) -> str:
    """What produced a run's answers, for a panel title or a row label: ``"LLM smollm2-135m"``,
    ``"simulated recommender (beta = 1, rho = 1)"`` (its bias settings from the run's config when at hand),
    ``"fake recommender (deterministic test model)"``.

    >>> P = RunMetrics.partial
    >>> recommender_label(P({"model": "smollm2-135m"})), recommender_label(P({"model": "fake"}))
    ('LLM smollm2-135m', 'fake recommender (deterministic test model)')
    """
    m = as_metrics(run)
    name = str(run_field(m, "model"))
    if name == FAKE_LLM:
        return "fake recommender (deterministic test model)"
    if name == SIMULATED_LLM:
        settings = run_settings(run)
        bits = [
            f"{k} = {settings[f'sim.{k}']:g}" for k in ("beta", "rho") if isinstance(settings.get(f"sim.{k}"), float)
        ]
        return "simulated recommender" + (f" ({', '.join(bits)})" if bits else " (settings not recorded)")
    return f"LLM {pub.PUBLISHED_MODELS.get(name, name)}"


def group_labels(groups: Sequence[Sequence[Any]]) -> list:
    """One label per seed group saying what produced it and how it differs from the other groups:
    the recommender (:func:`recommender_label`), the settings on which the groups differ
    (sizes first), and the number of seeds.  A single group is labelled by its recommender and sizes.

    >>> P = RunMetrics.partial
    >>> g = [[P({"model": "simulated", "n_calib": 28, "n_test": 12})], [P({"model": "simulated", "n_calib": 1750, "n_test": 750})]]
    >>> group_labels(g)
    ['simulated recommender (settings not recorded); 28/12 calibration/test rows; 1 seed', 'simulated recommender (settings not recorded); 1750/750 calibration/test rows; 1 seed']
    """
    diffs = setting_differences(groups, skip=LABELLED_SETTINGS, main=True)
    labels = []
    for g, d in zip(groups, diffs):
        s = run_settings(g[0])
        bits = [recommender_label(g[0]), f"{s.get('n_calib')}/{s.get('n_test')} calibration/test rows"]
        bits += [d] if d else []
        bits.append(f"{len(g)} seed{'s' if len(g) != 1 else ''}")
        labels.append("; ".join(bits))
    return labels


def setting_differences(groups: Sequence[Sequence[Any]], skip: Sequence[str] = (), main: bool = False) -> list:
    """Per seed group, the settings (:func:`run_settings`) on which the groups differ, as
    ``"test rows 12, rows 40"`` (sizes and model first; ``skip``: settings shown elsewhere; ``main``: only
    the settings a label names, dataset, rows, protocol, preset, alpha); ``""`` for every group when
    there is one group or nothing else differs."""
    settings = [run_settings(g[0]) for g in groups]
    # settings every group has (a section of another model, e.g. the simulator's for an LLM run, is what
    # the recommender label already tells apart)
    keys = [k for k in dict.fromkeys(k for s in settings for k in s) if all(k in s for s in settings)]
    differ = [k for k in keys if len({repr(s.get(k)) for s in settings}) > 1 and k not in skip]
    differ = [
        *[k for k in _LABEL_SETTINGS if k in differ],
        *([] if main else [k for k in differ if k not in _LABEL_SETTINGS]),
    ]
    return [", ".join(f"{_LABEL_SETTINGS.get(k, k)} {s.get(k)}" for k in differ) for s in settings]


def _with_provenance(notes: list, runs: Sequence[Any]) -> list:
    """``notes`` with the runs-and-code line (:func:`run_provenance`) first, after a SYNTHETIC warning."""
    at = 1 if notes and notes[0].startswith("SYNTHETIC") else 0
    return [*notes[:at], *run_provenance(runs), *notes[at:]]


#: recommenders that rank by their own scores: no LLM ranker (``ranker``) is involved in their answers
OWN_SCORE_MODELS = (SIMULATED_LLM, FAKE_LLM)


def _label(m: RunMetrics, key: str) -> str:
    """A row-label cell: the run's value of ``key``; ``ranker`` of a recommender that ranks by its own
    scores (simulated, fake) reads "own scores", not the config's unused default."""
    if key == "ranker" and str(run_field(m, "model")) in OWN_SCORE_MODELS:
        return "own scores"
    return str(run_field(m, key))


def varying_keys(runs: Sequence[RunMetrics]) -> list:
    """Run keys and variants that take more than one value across ``runs``."""
    runs = [as_metrics(m) for m in runs]
    keys = list(dict.fromkeys([*RUN_KEYS, *VARIANT_KEYS, *sorted({k for m in runs for k in m.variants})]))
    return [k for k in keys if len({str(run_field(m, k)) for m in runs}) > 1]


def method_table(
    runs: Iterable[Any] | Any,
    *,
    name: str,
    title: str,
    columns: Sequence[Column] = OPEN_COLUMNS,
    methods: Sequence[str] = METHODS,
    row_by: Sequence[str] = ("dataset", "model"),
    profile: str | None = None,
    published: Sequence[tuple] | None = None,
    random_floor: bool = False,
) -> Table:
    """One row per (group of seeds, method), plus published rows, plus the random-ranking floor.

    ``runs``: run records, run results or their metrics (:func:`facterlab.facter.record.as_metrics`; a
    :class:`RunMetrics`). Runs that differ only by seed are one group (mean ± sd).
    ``row_by``: run fields or variants shown as row-label columns; any variant on which the runs
    disagree is added to them (never mixed silently). ``published``: ``(source, dataset, model)``
    triples whose numbers (:mod:`facterlab.reporting.published`) follow as rows labelled with
    their source; ``None`` picks every published setting of the runs' protocols whose dataset is
    among the runs' datasets, else REPRO's ML-1M Llama-3 rows. ``random_floor``: add the
    ``random_floor`` block of rank-protocol runs as a row.
    """
    given = [runs] if isinstance(runs, (dict, RunMetrics, RunRecord)) else list(runs)
    runs = [as_metrics(r) for r in given]
    if not runs:
        raise ValueError("method_table needs at least one run record")
    varying = varying_keys(runs)
    label_keys = list(dict.fromkeys([*row_by, *[k for k in varying if k not in ("is_synthetic", "encoder")]]))
    notes = _with_provenance(_provenance_notes(runs, label_keys, profile), given)
    foot = _Footnotes()
    seed_sets = seed_groups(given)
    # groups that the label columns do not tell apart (e.g. the same model at two sizes) get a column
    # saying what else differs, so that no row pools, or looks like, runs of another setting
    diffs = setting_differences(seed_sets, skip=label_keys)
    show_setting = any(diffs)
    header = [
        "Source",
        *[k.replace("_", " ").capitalize() if k not in ("dataset", "model") else k.capitalize() for k in label_keys],
        *(["Setting"] if show_setting else []),
        "Method",
        "Seeds",
        *[c.label for c in columns],
    ]
    rows, long = [], []

    for group_given, diff in zip(seed_sets, diffs):
        group = [as_metrics(r) for r in group_given]
        labels = [_label(group[0], k) for k in label_keys] + ([diff] if show_setting else [])
        block_methods = list(methods)
        if random_floor:
            block_methods.append("random_floor")
        for method in block_methods:
            flat: list[dict | None]
            if method == "random_floor":
                flat = [m.flat("random_floor") or {} for m in group]
                if not any(flat):
                    continue
            else:
                flat = [m.flat(method) for m in group]
                if all(f is None for f in flat):
                    continue
            cells = []
            for col in columns:
                vals = []
                for f in flat:
                    if f is None:
                        vals.append(MissingValue(f"method {method} not in this run"))
                    elif col.key in f:
                        vals.append(f[col.key])
                    elif method == "random_floor":
                        vals.append(MissingValue("not defined for the random ranking"))
                    else:
                        vals.append(
                            MissingValue(MISSING_REASONS.get(col.key, f"{col.key} not recorded in metrics.json"))
                        )
                cell = aggregate(vals)
                cells.append(render_cell(cell, col.decimals, foot))
                long.append(
                    {
                        "source": "ours",
                        **dict(zip([*label_keys, *(["setting"] if show_setting else [])], labels)),
                        "method": method,
                        "column": col.key,
                        "mean": cell.mean,
                        "sd": cell.sd,
                        "n": cell.n,
                        "n_total": cell.n_total,
                        "missing_reason": "; ".join(cell.reasons) if cell.reasons else None,
                    }
                )
            rows.append(["ours", *labels, METHOD_LABELS.get(method, method), str(len(group)), *cells])

    if published is None:
        run_protocols = {m.protocol for m in runs}
        datasets = {m.dataset for m in runs}
        settings = []
        for r in pub.PUBLISHED:
            if r.protocol in run_protocols and r.dataset in datasets:
                settings.append((r.source, r.dataset, r.model))
        if not settings:
            settings = [
                (r.source, r.dataset, r.model)
                for r in pub.PUBLISHED
                if r.protocol in run_protocols and r.source == "REPRO" and r.dataset == "ml-1m"
            ]
        published = list(dict.fromkeys(settings))
    protocols = sorted({str(m.protocol) for m in runs})
    for source, dataset, model in published:
        for protocol in protocols:
            recs = [
                r
                for r in pub.published_records(source, dataset, None, protocol)
                if r.model == model and r.pass_index is None
            ]
            if not recs:
                continue
            for method in methods:
                mrecs = {r.metric: r for r in recs if r.method == method}
                if not mrecs:
                    continue
                cells = []
                for col in columns:
                    r = mrecs.get(col.key)
                    if r is None:
                        cells.append(f"n/a {foot.mark(NOT_REPORTED)}")
                        continue
                    text = format_mean_sd(r.value, r.sd, col.decimals)
                    if r.note:
                        text += f" {foot.mark(f'{source}: {r.note}')}"
                    cells.append(text)
                label_vals = []
                for k in label_keys:
                    label_vals.append(
                        {"dataset": dataset, "model": pub.PUBLISHED_MODELS.get(model, model), "protocol": protocol}.get(
                            k, "n/a"
                        )
                    )
                if show_setting:
                    label_vals.append("published")
                rows.append(
                    [source, *label_vals, METHOD_LABELS.get(method, method), "3" if source == "REPRO" else "1", *cells]
                )
    if any(r[0] != "ours" for r in rows):
        notes.append(
            "Published rows: "
            + "; ".join(f"{s} = {pub.SOURCES[s]}" for s in dict.fromkeys(r[0] for r in rows if r[0] != "ours"))
            + " (means only: the spec records no sd)."
        )
    import pandas as pd

    return Table(
        name=name, title=title, header=header, rows=rows, notes=notes, footnotes=foot.lines(), values=pd.DataFrame(long)
    )


def per_pass_table(
    runs: Iterable[Any] | Any,
    *,
    name: str,
    title: str,
    method: str = "facter",
    profile: str | None = None,
    published: bool = True,
) -> Table:
    """Violations per pass (adaptive, fixed Q0, Q0 + repro_count correction, Q*) and the threshold after each pass,
    mean ± sd over the seeds of one setting; REPRO's ML-1M open per-pass numbers as extra columns.

    Runs are pooled only when they differ by seed alone (:func:`seed_groups`); runs of different
    settings (another model, another size) get their own block of rows, labelled in a first ``Runs``
    column by what produced them (:func:`group_labels`), side by side, never averaged together."""
    given = [runs] if isinstance(runs, (dict, RunMetrics, RunRecord)) else list(runs)
    metrics = [as_metrics(r) for r in given]
    if not metrics:
        raise ValueError("per_pass_table needs at least one run record")
    flats_all = [m.methods[method].flat() if method in m.methods else {} for m in metrics]
    n_pass = max((sum(1 for k in f if k.startswith("violations_adaptive_pass")) for f in flats_all), default=0)
    if n_pass == 0:
        raise ValueError(f"no per-pass violations recorded for method {method!r}")
    foot = _Footnotes()
    cols = [
        ("violations_adaptive_pass{p}", "V(t) adaptive", 1),
        ("violations_fixed_q0_pass{p}", "V(0) fixed Q0", 1),
        ("violations_repro_count_pass{p}", REPRO_FIXED_CORRECTED, 1),
        ("violations_q_star_pass{p}", "V(Q*)", 1),
    ]
    if any(any(k.startswith("violations_repro_dynamic_pass") for k in f) for f in flats_all):
        cols.insert(3, ("violations_repro_dynamic_pass{p}", REPRO_CORRECTED_DYNAMIC, 1))
    groups = seed_groups(given)
    labels = group_labels(groups)
    several = len(groups) > 1
    header = [*(["Runs"] if several else []), "Pass", *[c[1] for c in cols], "Q after pass"]
    show_pub = published and any(m.protocol == "open" for m in metrics)
    if show_pub:
        header += ["REPRO V(t)", "REPRO V(0)", "REPRO Q"]
    rows, long = [], []
    for group, glabel in zip(groups, labels):
        gm = [as_metrics(r) for r in group]
        flats = [m.methods[method].flat() if method in m.methods else {} for m in gm]
        paths = [m.methods[method].threshold_path if method in m.methods else [] for m in gm]
        for p in range(0, n_pass + 1):
            row = [*([glabel] if several else []), "Q0 (before pass 1)" if p == 0 else str(p)]
            for key, _label, dec in cols:
                if p == 0:
                    row.append("")
                    continue
                k = key.format(p=p)
                cell = aggregate([f.get(k, MissingValue(f"{k} not recorded")) for f in flats])
                row.append(render_cell(cell, dec, foot))
                long.append({"runs": glabel, "pass": p, "column": k, "mean": cell.mean, "sd": cell.sd, "n": cell.n})
            qv = [
                metric_value(path[p], "threshold")
                if len(path) > p
                else MissingValue(f"threshold path shorter than {p + 1} entries")
                for path in paths
            ]
            cell = aggregate(qv)
            row.append(render_cell(cell, 3, foot))
            long.append(
                {"runs": glabel, "pass": p, "column": "threshold", "mean": cell.mean, "sd": cell.sd, "n": cell.n}
            )
            if show_pub:
                vals = []
                for metric, dec in (
                    ("violations_adaptive_pass", 1),
                    ("violations_fixed_q0_pass", 1),
                    ("threshold_path", 3),
                ):
                    idx = p if metric == "threshold_path" else p - 1
                    v = (
                        pub.published_value("REPRO", "ml-1m", "llama3-8b", "open", method, metric, idx)
                        if idx >= 0
                        else None
                    )
                    if v is None:
                        vals.append("" if p == 0 and metric != "threshold_path" else f"n/a {foot.mark(NOT_REPORTED)}")
                    else:
                        vals.append(format_mean_sd(v, None, dec))
                row += vals
            rows.append(row)
    notes = _with_provenance(_provenance_notes(metrics, [], profile), given)
    if several:
        notes.append(
            f"{len(groups)} settings, shown side by side and never pooled: runs are averaged only over seeds "
            "of one setting (everything else equal); the Runs column says what produced each block."
        )
        if note := differences_note(groups):
            notes.append(note)
    notes.append(f"Method: {METHOD_LABELS.get(method, method)}; counts are per pass over the test rows.")
    notes.append(_repro_names_note(cols))
    if show_pub:
        notes.append("REPRO columns: ML-1M, Llama-3-8B-Instruct, open generation (docs/FACTER.md §6).")
    import pandas as pd

    return Table(
        name=name, title=title, header=header, rows=rows, notes=notes, footnotes=foot.lines(), values=pd.DataFrame(long)
    )


def _repro_names_note(cols: Sequence[tuple]) -> str:
    """How REPRO's corrected counts relate to ours (the per-pass table's note)."""
    text = (
        f"{REPRO_FIXED_CORRECTED} = S > Q0 + C/sqrt(n) with REPRO's count C (our repro_count correction); "
        "our 'corrected' count applies the run's own correction setting (with correction none it equals V(0))"
    )
    if not any(c[0].startswith("violations_repro_dynamic") for c in cols):
        text += f"; {REPRO_CORRECTED_DYNAMIC} (S > Q_t + C/sqrt(n)): {MISSING_REASONS['violations_repro_dynamic']}"
    return text + "."


def frame_table(
    df,
    *,
    name: str,
    title: str,
    notes: Sequence[str] = (),
    decimals: int = 3,
    index: bool = False,
    runs: Any = None,
    source: str | None = None,
) -> Table:
    """A :class:`Table` from a DataFrame whose cells are numbers, strings or MissingValue/None.

    Floats print at ``decimals`` places; missing cells print ``n/a [k]`` with the reason.  The first note
    names the FACTER ``runs`` behind the table (or its ``source``) and the code version
    (:func:`facterlab.reporting.figures.run_provenance`).

    >>> import pandas as pd
    >>> t = frame_table(pd.DataFrame({"a": [1.23456, None]}), name="x", title="X")
    >>> t.rows, t.footnotes
    ([['1.235'], ['n/a [1]']], ['[1] a: value missing'])
    """
    if index:
        df = df.reset_index()
    foot = _Footnotes()
    rows = []
    for rec in df.itertuples(index=False, name=None):
        row = []
        for col, v in zip(df.columns, rec):
            if isinstance(v, MissingValue):
                row.append(f"n/a {foot.mark(v.reason)}")
            elif v is None or (isinstance(v, float) and not math.isfinite(v)):
                row.append(f"n/a {foot.mark(f'{col}: value missing')}")
            elif isinstance(v, dict) and "value" in v:
                mv = metric_value(v, str(col))
                row.append(f"n/a {foot.mark(mv.reason)}" if isinstance(mv, MissingValue) else f"{mv:.{decimals}f}")
            elif isinstance(v, bool):
                row.append(str(v))
            elif isinstance(v, int) or (hasattr(v, "dtype") and getattr(v.dtype, "kind", "") in "iu"):
                row.append(str(int(v)))
            elif isinstance(v, float) or (hasattr(v, "dtype") and getattr(v.dtype, "kind", "") == "f"):
                row.append(f"{float(v):.{decimals}f}")
            else:
                row.append(str(v))
        rows.append(row)
    return Table(
        name=name,
        title=title,
        header=[str(c) for c in df.columns],
        rows=rows,
        notes=[*run_provenance(runs, source), *notes],
        footnotes=foot.lines(),
        values=df.copy(),
    )
