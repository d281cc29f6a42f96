"""Readable names for metric keys and methods, and the notes every figure carries.

One mapping for figures and tables: ``metrics.json`` and the flat keys of
:meth:`facterlab.facter.record.MethodMetrics.flat` (``ndcg@10_multi``, ``cfr_multi``,
``violations_adaptive``...) are never shown as they are; :func:`label` gives the display name.

Figure helpers (no matplotlib import here; they take the figure or axes they annotate):

- :func:`add_caption`: a caption line under the figure (how much data stands behind it, which interval);
- :func:`degenerate_note`: a visible note in a panel that has nothing meaningful to draw (all-equal
  values, an empty group, fewer than 2 points), instead of an empty or misleading panel;
- :func:`mean_ci`: a mean with its Student-t interval over runs or seeds.

>>> label("ndcg@10_multi"), label("cfr_gender"), label("violations_adaptive_pass2"), label("facter")
('NDCG@10', 'CFR (gender)', 'V(t) pass 2', 'FACTER')
>>> label("some_new_key")
'Some new key'
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable

# figure annotations live with the figure style in the base layer (docs/ARCHITECTURE.md); re-exported here
from facterlab.style import DEGENERATE_PREFIX, add_caption, degenerate_note  # noqa: F401

METHOD_LABELS = {"neutral": "Neutral", "fair": "Fair", "facter": "FACTER", "random_floor": "Random ranking (floor)"}

_VIOLATION_LABELS = {
    "fixed_q0": "V(0)",
    "adaptive": "V(t)",
    "corrected": "V(0) + our correction",
    "q_star": "V(Q*)",
    "hoeffding": "V(0) + Hoeffding",
    "repro_count": "REPRO fixed (corrected)",
    "repro_dynamic": "REPRO corrected-dynamic",
}
_ATTRS = ("joint", "gender", "age", "occupation")

METRIC_LABELS: dict = {
    "ndcg@10_multi": "NDCG@10",
    "ndcg@10_single": "NDCG@10 (single)",
    "recall@10_multi": "Recall@10",
    "recall@10_single": "Recall@10 (single)",
    "valid@10": "Valid@10",
    "snsr_joint": "SNSR",
    "snsv_joint": "SNSV",
    "cfr_multi": "CFR",
    "no_neighbour_test": "No CF nb.",
    "no_neighbour_calib": "No CF nb. (calib)",
    "n_degenerate": "Degenerate",
    "q0": "Q0",
    "q_final": "Q final",
    "recall@10": "Recall@10",
    "ndcg@10": "NDCG@10",
    "cfr": "CFR",
    "snsr": "SNSR",
    "snsv": "SNSV",
    "per_user_gap": "Per-user gap",
    "aggregate_gap": "Aggregate gap",
    "share_defined": "Share of rows with both item groups",
    **{f"snsr_{a}": f"SNSR ({a})" for a in _ATTRS[1:]},
    **{f"snsv_{a}": f"SNSV ({a})" for a in _ATTRS[1:]},
    **{f"n_groups_{a}": f"Groups ({a})" for a in _ATTRS},
    **{f"cfr_{a}": f"CFR ({a})" for a in _ATTRS[1:]},
    **{f"violations_{k}": v for k, v in _VIOLATION_LABELS.items()},
    **{f"violations_{k}_total": f"{v} (all passes)" for k, v in _VIOLATION_LABELS.items()},
}

_PASS = re.compile(r"^violations_([a-z_0-9]+)_pass(\d+)$")


def label(key: str) -> str:
    """The display name of a metric key or method; unknown keys get a readable fallback (underscores
    to spaces, first letter capitalised), so a raw key never reaches a figure or a table header."""
    if key in METRIC_LABELS:
        return METRIC_LABELS[key]
    if key in METHOD_LABELS:
        return METHOD_LABELS[key]
    m = _PASS.match(key)
    if m and m.group(1) in _VIOLATION_LABELS:
        return f"{_VIOLATION_LABELS[m.group(1)]} pass {m.group(2)}"
    text = key.replace("_", " ").strip()
    return text[:1].upper() + text[1:]


def is_raw_key(text: str) -> bool:
    """True when ``text`` is a metric key as stored (what figures must not show).

    >>> is_raw_key("cfr_multi"), is_raw_key("CFR"), is_raw_key("violations_fixed_q0_pass1")
    (True, False, True)
    """
    return text in METRIC_LABELS or bool(_PASS.match(text)) or bool(re.fullmatch(r"[a-z0-9@]+(_[a-z0-9@]+)+", text))


def mean_ci(values: Iterable, level: float = 0.95) -> tuple:
    """``(mean, low, high, n)`` of the finite values: Student-t interval ``mean ± t_{n-1} sd / sqrt(n)``;
    low/high are NaN when fewer than 2 values (no interval), mean NaN when none.

    >>> m, lo, hi, n = mean_ci([1.0, 2.0, 3.0])
    >>> (m, round(lo, 3), round(hi, 3), n)
    (2.0, -0.484, 4.484, 3)
    >>> mean_ci([5.0])[1:]
    (nan, nan, 1)
    """
    vals = [float(v) for v in values if v is not None and math.isfinite(float(v))]
    n = len(vals)
    if n == 0:
        return (math.nan, math.nan, math.nan, 0)
    mean = sum(vals) / n
    if n < 2:
        return (mean, math.nan, math.nan, n)
    from scipy import stats

    sd = math.sqrt(sum((v - mean) ** 2 for v in vals) / (n - 1))
    half = float(stats.t.ppf(0.5 + level / 2, n - 1)) * sd / math.sqrt(n)
    return (mean, mean - half, mean + half, n)
