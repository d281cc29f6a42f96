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


@pytest.mark.slow
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


@pytest.mark.slow
def test_executed_notebook_renders_for_a_reader(tmp_path):
    """papermill (as ``facterlab reproduce`` runs it) stores the widget state, the widget's text form
    says what it is (not ``VBox(children=...)``) and the static figure and numbers follow it."""
    import json
    from pathlib import Path

    import papermill

    from facterlab.simpson.explorer import TEXT_FORM

    notebook = Path(__file__).resolve().parents[2] / "notebooks" / "15_simpson_explorer.ipynb"
    out = tmp_path / "15.ipynb"
    papermill.execute_notebook(
        str(notebook),
        str(out),
        parameters={"SMOKE": True},
        kernel_name="python3",
        cwd=str(tmp_path),
        progress_bar=False,
    )
    nb = json.loads(out.read_text())
    state = nb["metadata"]["widgets"]["application/vnd.jupyter.widget-state+json"]["state"]
    outputs = [o for c in nb["cells"] for o in c.get("outputs", []) if o["output_type"] == "display_data"]
    i = next(i for i, o in enumerate(outputs) if "application/vnd.jupyter.widget-view+json" in o["data"])
    assert outputs[i]["data"]["application/vnd.jupyter.widget-view+json"]["model_id"] in state
    assert "".join(outputs[i]["data"]["text/plain"]) == TEXT_FORM
    after = [set(o["data"]) for o in outputs[i + 1 :]]
    assert any("image/png" in d for d in after) and any("text/html" in d for d in after)


def test_explorer_names_groups_flags_a_reversal_and_shows_the_ips_interval():
    import matplotlib

    matplotlib.use("Agg")
    from facterlab.simpson.explorer import GROUP_NAMES, explorer_figure, figure_png, sign_reversal
    from facterlab.style import apply_style

    apply_style()  # the house style (larger tick labels) as the notebook has it

    # b = 0.02 at d_1 = 4 (N = 20,000, seed 0): the PerUserGap favours group 1, the aggregate group 0
    r = explorer_numbers(d1=4.0, bias=0.02, n_users=20_000, seed=0, n_draws=4)
    assert (r["per_user_gap"] < 0) != (r["aggregate_gap"] < 0)
    text = sign_reversal(r)
    assert text.startswith("SIGN REVERSAL") and "favours group 0" in text and "favours group 1" in text
    html = numbers_html(r)
    assert "id='simpson-reversal'" in html and "reference items" in html and "varied items" in html
    assert r["ips_model_draws"] == 4 and r["ips_model_half_width"] == pytest.approx(1.96 * r["ips_model_sd"])
    assert f"±{100 * r['ips_model_half_width']:.3f}" in html
    fig = explorer_figure(r)
    figure_png(fig)  # draws (tight bbox)
    gids = {t.get_gid() for t in fig.texts}
    assert "simpson-reversal" in gids
    from matplotlib.container import ErrorbarContainer

    (eb,) = [c for c in fig.axes[0].containers if isinstance(c, ErrorbarContainer)]
    (seg,) = eb.lines[2][0].get_segments()  # the interval of the model IPS bar, in pp
    lo, hi = sorted(seg[:, 0])
    assert lo == pytest.approx(100 * (r["ips_model"] - r["ips_model_half_width"]))
    assert hi == pytest.approx(100 * (r["ips_model"] + r["ips_model_half_width"]))
    assert "group 0 (reference items) minus group 1 (varied items)" in fig.axes[0].get_xlabel()
    assert GROUP_NAMES[0] in fig._facterlab_caption and "95% interval" in fig._facterlab_caption
    # the title fits the figure: its rendered box lies inside the figure's
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    renderer = FigureCanvasAgg(fig).get_renderer()
    box, fbox = fig._suptitle.get_window_extent(renderer), fig.bbox
    assert "N = 20,000" in fig._suptitle.get_text()
    assert box.x0 >= fbox.x0 and box.x1 <= fbox.x1 and box.y1 <= fbox.y1
    # no reversal: no flag
    same = explorer_numbers(d1=1.5, bias=0.03, n_users=2_000, seed=0, n_draws=0)
    assert sign_reversal(same) is None and "simpson-reversal" not in numbers_html(same)
    assert "ips_model_half_width" not in same


def test_default_n_is_where_the_estimate_was_measured_reliable():
    from facterlab.simpson.explorer import DEFAULT_N, DEFAULTS

    assert DEFAULTS["n_users"] == DEFAULT_N == 20_000


@pytest.mark.slow
def test_the_explorer_opens_on_a_sign_reversal_and_the_default_is_one_click_away():
    """Issue 42: the explorer's opening setting shows the paradox (the two gaps favour different groups,
    and the explorer says so); the button 'default setting' moves every slider to DEFAULTS with one
    recomputation, where the gaps agree in sign."""
    from facterlab.simpson.explorer import DEFAULTS, OPENING, sign_reversal

    opening = explorer_numbers(**OPENING, n_draws=0)
    assert opening["per_user_gap"] * opening["aggregate_gap"] < 0, opening
    assert sign_reversal(opening).startswith("SIGN REVERSAL")
    default = explorer_numbers(**DEFAULTS, n_draws=0)
    assert default["per_user_gap"] * default["aggregate_gap"] > 0 and sign_reversal(default) is None

    ex = build_explorer(n_users=1_000)
    assert ex.values()["d1"] == OPENING["d1"] and ex.values()["bias"] == OPENING["bias"]
    n = ex.n_updates
    ex.buttons["default"].click()
    assert ex.n_updates == n + 1  # one recomputation, not one per slider
    assert {k: ex.values()[k] for k in ("d1", "sigma1", "bias", "n_users", "seed")} == DEFAULTS
    ex.buttons["opening"].click()
    assert ex.values()["d1"] == OPENING["d1"] and ex.n_updates == n + 2
