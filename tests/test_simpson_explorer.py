"""Simpson part: explorer logic without a browser (widget construction and update callback)."""

from __future__ import annotations

import pytest

pytest.importorskip("ipywidgets")

from facterlab.simpson.explorer import build_explorer, explorer_numbers, numbers_html  # noqa: E402


def test_numbers_are_the_simulation_readouts():
    r = explorer_numbers(d1=2.0, sigma1=1.0, bias=0.05, n_users=800, seed=3)
    assert (r["d1"], r["sigma1"], r["bias"], r["n_users"], r["seed"]) == (2.0, 1.0, 0.05, 800, 3)
    html = numbers_html(r)
    assert f"{100 * r['per_user_gap']:+.3f}" in html and "id='simpson-aggregate-gap'" in html
    assert "SYNTHETIC DATA" in html


def test_slider_change_recomputes_numbers_and_figure():
    import matplotlib

    matplotlib.use("Agg")
    ex = build_explorer(n_users=1_000)
    assert ex.n_updates == 1
    for sl in ex.sliders.values():
        assert sl.continuous_update is False
    assert ex.sliders["d1"].description == "density d_1"
    assert "simpson-slider-d1" in ex.sliders["d1"]._dom_classes
    html0, png0 = ex.numbers.value, ex.image.value
    assert png0[:8] == b"\x89PNG\r\n\x1a\n"
    ex.sliders["d1"].value = 3.5
    assert ex.n_updates == 2 and ex.last["d1"] == 3.5
    assert ex.numbers.value != html0 and ex.image.value != png0
    assert ex.status.value == "updated (2)"
