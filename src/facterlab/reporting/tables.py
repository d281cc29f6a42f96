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

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from facterlab.datatypes import MissingValue
from facterlab.facter.record import METHODS, RunMetrics, RunRecord, as_metrics
from facterlab.facter.record import as_value as metric_value
from facterlab.reporting import published as pub
from facterlab.reporting.figures import run_provenance
from facterlab.reporting.labels import METHOD_LABELS as _METHOD_LABELS

# re-exported: the table object and the run-settings logic lived here before the split (issue 32)
from facterlab.reporting.settings import (  # noqa: F401
    LABELLED_SETTINGS,
    OWN_SCORE_MODELS,
    PROTOCOL_KEYS,
    RUN_KEYS,
    SEED_SETTINGS,
    VARIANT_KEYS,
    _provenance_notes,
    _with_provenance,
    differences_note,
    group_labels,
    recommender_label,
    row_label,
    run_field,
    run_settings,
    seed_groups,
    setting_differences,
    varying_keys,
)
from facterlab.reporting.table_format import Cell, Footnotes, Table, aggregate, format_mean_sd, render_cell  # noqa: F401
from facterlab.reporting.table_format import Footnotes as _Footnotes

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
NOT_REPORTED = "not reported by the published source"


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
        labels = [row_label(group[0], k) for k in label_keys] + ([diff] if show_setting else [])
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
