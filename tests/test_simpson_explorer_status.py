"""Issue 23, item 4: the explorer opens its widgets at the end of its cell.

JupyterLab (4.4+, ``commsOverSubshells`` = ``perCommTarget``) answers the first widget's ``comm_open``
with a ``create_subshell_request``; the kernel's ``idle`` status for it set the status bar to Idle for
the rest of the cell (2.07 s of notebook 15's 2.16 s explorer cell, measured in the browser).  The
explorer now computes its first read-outs before constructing any widget.  Checked here without a
browser: every simulation (``explorer_numbers``) of the first draw runs before the first widget is
constructed, and the first draw shows the same values as an update would.
"""

from __future__ import annotations

import pytest

ipywidgets = pytest.importorskip("ipywidgets")

from facterlab.simpson import explorer as ex_mod  # noqa: E402


def test_first_readouts_are_computed_before_any_widget(monkeypatch):
    import matplotlib

    matplotlib.use("Agg")
    events: list = []
    real = ex_mod.explorer_numbers

    def numbers(**kw):
        events.append("compute")
        return real(**kw)

    monkeypatch.setattr(ex_mod, "explorer_numbers", numbers)
    previous = ipywidgets.Widget._widget_construction_callback
    ipywidgets.Widget.on_widget_constructed(lambda w: events.append("widget"))
    try:
        ex = ex_mod.build_explorer(n_users=1_000)
    finally:
        ipywidgets.Widget._widget_construction_callback = previous
    assert "widget" in events and "compute" in events, events
    first_widget = events.index("widget")
    assert events[:first_widget] == ["compute"], events[:5]  # one simulation, then only widgets
    assert "compute" not in events[first_widget:], "a simulation ran after the first widget was opened"
    assert ex.n_updates == 1 and ex.status.value == "updated (1)"
    shown = (ex.numbers.value, ex.image.value)
    ex.update()  # recompute for the same slider values: the first draw showed exactly this
    assert (ex.numbers.value, ex.image.value) == shown
    assert ex.n_updates == 2


def test_values_outside_the_sliders_are_clamped_as_the_sliders_hold_them():
    import matplotlib

    matplotlib.use("Agg")
    ex = ex_mod.build_explorer(n_users=500, d1=9.0)  # below/above the sliders' ranges
    assert ex.values()["n_users"] == 1_000 and ex.values()["d1"] == 4.0
    assert ex.last["n_users"] == 1_000 and ex.last["d1"] == 4.0  # the numbers are for what the sliders show
