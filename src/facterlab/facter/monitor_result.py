"""What a run of the online loop returns (docs/FACTER.md §3): :class:`MonitorResult` and its per-pass summary.

- :class:`MonitorResult`: one record per (pass, test row) (the columns are listed in
  :meth:`facterlab.facter.monitor.FacterMonitor.run`), the threshold path, the violation buffer and the
  call counts of one method (Neutral, Fair or FACTER).
- :func:`violation_summary`: per-pass counts of each violation flag in the records (the ``violations``
  of a method's metrics, docs/CONTRACTS.md).

Both are re-exported by :mod:`facterlab.facter.monitor`, where they lived before issue 32.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import pandas as pd

from facterlab.facter.repair import ViolationBuffer


@dataclass
class MonitorResult:
    """Records (one per (pass, row)), the final state and bookkeeping of a monitor run.

    Parameters
    ----------
    records : pandas.DataFrame
        One record per (pass, row); columns as built by :meth:`FacterMonitor.run`.
    q_final : float
        The threshold after the last pass (Q*).
    threshold_path : list of float
        [Q0, Q after pass 1, ...] (passes + 1 entries).
    buffer : ViolationBuffer
        The violation buffer at the end of the run.
    n_predicted : int, default 0
        Requests sent to the recommender (twins included).
    n_repredicted : int, default 0
        Requests made for rows whose earlier prediction went stale.
    n_calls : int, default 0
        Recommender calls.
    n_twin_predicted : int, default 0
        Twin requests (``delta = "twin"``).
    extra : dict, default {}
        Free-form extras (e.g. ``"monitor"``: the :class:`FacterMonitor`).
    """

    records: pd.DataFrame
    q_final: float
    threshold_path: list  # [Q0, Q after pass 1, ...]
    buffer: ViolationBuffer
    n_predicted: int = 0
    n_repredicted: int = 0
    n_calls: int = 0
    n_twin_predicted: int = 0
    extra: dict = field(default_factory=dict)


def violation_summary(records: pd.DataFrame) -> dict:
    """Per-pass violation counts from monitor records: fixed_q0, adaptive, corrected, q_star,
    hoeffding, repro_count, repro_dynamic (REPRO's corrected-dynamic count, S > Q_t + C/sqrt(n)), as lists
    with one entry per pass; a kind whose column the records lack (runs saved before it) is left out.

    Parameters
    ----------
    records : pandas.DataFrame
        Monitor records with a ``pass`` column and the ``viol_*`` boolean columns.

    Returns
    -------
    dict of str to list of int
        Kind -> violation count of each pass, passes in ascending order.
    """
    out = {}
    g = records.groupby("pass", sort=True)
    for name, col in (
        ("fixed_q0", "viol_fixed"),
        ("adaptive", "viol_adaptive"),
        ("corrected", "viol_corrected"),
        ("q_star", "viol_q_star"),
        ("hoeffding", "viol_hoeffding"),
        ("repro_count", "viol_repro_count"),
        ("repro_dynamic", "viol_repro_dynamic"),
    ):
        if col in records.columns:
            out[name] = [int(x) for x in g[col].sum().tolist()]
    return out
