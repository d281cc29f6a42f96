"""Real-browser test of notebook 15 (the Simpson explorer) in JupyterLab + headless Chromium.

Starts JupyterLab on 127.0.0.1 (free port, token, isolated HOME and Jupyter dirs, a temp root holding
a copy of the notebook), opens it with playwright driving the system Chromium (never a downloaded
browser), runs all cells, moves the density slider with the keyboard and checks that the numbers and
the figure change.  Saves a screenshot to the test's temporary folder (never to the report's ``figures/``, which only the report
run writes; the report's static view of the explorer is ``figures/simpson_explorer_default.png``, drawn by notebook 15).
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
from jupyterlab_helpers import KERNEL_IDLE, REPO, chromium_page, jupyterlab, require_browser  # noqa: E402

NOTEBOOK = REPO / "notebooks" / "15_simpson_explorer.ipynb"


@pytest.mark.browser
def test_explorer_slider_updates_numbers_and_figure(tmp_path):
    sync_api = require_browser()
    import nbformat

    root = tmp_path / "root"
    root.mkdir()
    nb = nbformat.read(str(NOTEBOOK), as_version=4)
    params = next(c for c in nb.cells if "parameters" in c.metadata.get("tags", []))
    params.source, n_subs = re.subn(r"(?m)^N_USERS = .*$", "N_USERS = 2_000", params.source)  # snappier updates
    assert n_subs == 1, "notebook 15's parameters cell has no N_USERS line"
    nbformat.write(nb, str(root / "explorer.ipynb"))

    with jupyterlab(tmp_path, root) as lab, chromium_page(sync_api) as page:
        page.goto(lab.url("lab/tree/explorer.ipynb"))
        page.wait_for_function(KERNEL_IDLE, timeout=45_000)
        page.evaluate("window.jupyterapp.commands.execute('notebook:run-all-cells')")
        status = page.locator(".simpson-status")
        status.filter(has_text="updated (1)").wait_for(timeout=45_000)
        numbers = page.locator(".simpson-numbers")
        image = page.locator("img.simpson-figure")
        image.wait_for(timeout=10_000)
        before_text = numbers.inner_text()
        before_src = image.get_attribute("src")
        assert "d_1=1.50" in before_text and "PerUserGap" in before_text
        # the groups are named, and the model IPS carries its interval at this N
        assert "group 0: reference items" in before_text and "group 1: varied items" in before_text
        assert page.locator("#simpson-ips-model-half-width").inner_text().startswith("±")
        handle = page.locator(".simpson-slider-d1 .noUi-handle")
        handle.focus()
        for _ in range(6):  # 1.50 -> 3.00 in steps of 0.25; each key press is a change event
            page.keyboard.press("ArrowRight")
        page.wait_for_function(
            "() => document.querySelector('.simpson-numbers').innerText.includes('d_1=3.00')", timeout=45_000
        )
        page.wait_for_function(KERNEL_IDLE, timeout=30_000)
        after_text = numbers.inner_text()
        after_src = image.get_attribute("src")
        assert after_text != before_text
        assert after_src != before_src
        agg = page.locator("#simpson-aggregate-gap").inner_text()
        assert agg != "n/a"
        page.locator(".simpson-explorer").scroll_into_view_if_needed()
        shot = tmp_path / "simpson_explorer.png"
        page.screenshot(path=str(shot), full_page=False)
        assert shot.stat().st_size > 10_000, "the screenshot is (nearly) empty"
