"""Baselines Neutral and Fair (docs/FACTER.md §3): one pass with a static system prompt.

They are scored exactly like FACTER (same calibration neighbours, same Q0) and counted both against
Q0 and against the threshold path that their own updates (the configured ``threshold_rule``,
``one_sided`` by default) would produce, so that tables put like beside like (REPRO compared
baselines counted with test-set neighbours and a corrected threshold against FACTER's adaptive
count).  No rules are mined or shown.
"""

from __future__ import annotations

from dataclasses import replace

from facterlab.facter.monitor import FacterMonitor, MonitorResult, MonitorSettings

BASELINES = ("neutral", "fair")


def run_baseline(kind: str, settings: MonitorSettings, **parts) -> MonitorResult:
    """Run baseline ``kind`` ("neutral" | "fair" | "empty") for one pass with :class:`FacterMonitor`:
    ``settings`` with ``system_kind=kind`` (and ``name=kind`` unless named), ``parts`` as for the monitor.

    Parameters
    ----------
    kind : {"neutral", "fair", "empty"}
        The static system prompt.
    settings : MonitorSettings
        The run's settings; ``system_kind`` is replaced by ``kind``.
    **parts
        ``rows``, ``items``, ``recommender``, ``scorer``, ``postprocess``, ``represent`` (and
        optionally ``prompts``, ``twins``) as for :class:`FacterMonitor`.

    Returns
    -------
    MonitorResult
        The one-pass result; ``extra["monitor"]`` holds the monitor (for audit prompts).
    """
    if kind not in BASELINES + ("empty",):
        raise ValueError(f"unknown baseline {kind!r}; choose one of 'neutral', 'fair', 'empty'")
    mon = FacterMonitor(replace(settings, system_kind=kind, name=settings.name or kind), **parts)
    res = mon.run(passes=1)
    res.extra["monitor"] = mon
    return res
