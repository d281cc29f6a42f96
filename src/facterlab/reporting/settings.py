"""Which runs a table puts together, and what tells them apart: run settings, seed groups, row labels
and provenance notes (:mod:`facterlab.reporting.tables`).  Runs that agree on everything but the seed form
one group; a setting on which groups differ becomes a row label, so that rows never mix settings silently.
These were part of :mod:`facterlab.reporting.tables`, which still re-exports them.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from facterlab.config import FAKE_LLM, SIMULATED_LLM
from facterlab.facter.record import RunMetrics, RunRecord, as_metrics
from facterlab.reporting import published as pub
from facterlab.reporting.figures import run_provenance

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


def run_field(metrics: Any, key: str) -> Any:
    """A run-level field or variant of a run (:meth:`RunMetrics.field_value`).

    >>> run_field(RunMetrics.partial({"model": "smollm2-135m@ab12", "model_name": "smollm2-135m"}), "model")
    'smollm2-135m'
    """
    return as_metrics(metrics).field_value(key)


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


def row_label(m: RunMetrics, key: str) -> str:
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
