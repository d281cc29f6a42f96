"""Baselines Neutral and Fair (docs/FACTER.md §3): one pass with a static system prompt.

They are scored exactly like FACTER (same calibration neighbours, same Q0) and counted both against
Q0 and against the threshold path that their own updates (the configured ``threshold_rule``,
``one_sided`` by default) would produce, so that tables put like beside like (REPRO compared
baselines counted with test-set neighbours and a corrected threshold against FACTER's adaptive
count).  No rules are mined or shown.
"""

from __future__ import annotations

from facterlab.facter.monitor import FacterMonitor, MonitorResult

BASELINES = ("neutral", "fair")


def run_baseline(kind: str, **monitor_kw) -> MonitorResult:
    """Run baseline ``kind`` ("neutral" | "fair" | "empty") for one pass with :class:`FacterMonitor`
    (keywords as for the monitor, minus ``system_kind``)."""
    if kind not in BASELINES + ("empty",):
        raise ValueError(f"unknown baseline {kind!r}; choose one of 'neutral', 'fair', 'empty'")
    mon = FacterMonitor(system_kind=kind, name=monitor_kw.pop("name", kind), **monitor_kw)
    res = mon.run(passes=1)
    res.extra["monitor"] = mon
    return res
