"""Real-browser test of notebook 15 (the Simpson explorer) in JupyterLab + headless Chromium.

Starts JupyterLab on 127.0.0.1 (free port, token, isolated HOME and Jupyter dirs, a temp root holding
a copy of the notebook), opens it with playwright driving the system Chromium (never a downloaded
browser), runs all cells, moves the density slider with the keyboard and checks that the numbers and
the figure change.  Saves the screenshot to the repository's ``figures/simpson_explorer.png``.
"""

from __future__ import annotations

import json
import os
import secrets
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
CHROMIUM = Path("/usr/bin/chromium")
NOTEBOOK = REPO / "notebooks" / "15_simpson_explorer.ipynb"
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
KERNEL_IDLE = """() => {
  const app = window.jupyterapp; if (!app) return false;
  const w = app.shell.currentWidget; if (!w || !w.sessionContext) return false;
  const k = w.sessionContext.session && w.sessionContext.session.kernel;
  return !!k && k.status === 'idle';
}"""


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _wait_server(url: str, proc: subprocess.Popen, timeout: float = 40.0) -> None:
    end = time.time() + timeout
    while time.time() < end:
        if proc.poll() is not None:
            raise RuntimeError(f"JupyterLab exited early with code {proc.returncode}; see its log")
        try:
            with urllib.request.urlopen(url, timeout=2) as r:
                if r.status == 200:
                    return
        except OSError:
            time.sleep(0.5)
    raise TimeoutError("JupyterLab did not answer in time")


@pytest.mark.browser
def test_explorer_slider_updates_numbers_and_figure(tmp_path):
    if not CHROMIUM.exists():
        pytest.skip("Debian chromium is not installed at /usr/bin/chromium (apt-get install chromium)")
    sync_api = pytest.importorskip("playwright.sync_api")
    import nbformat

    root = tmp_path / "root"
    root.mkdir()
    nb = nbformat.read(str(NOTEBOOK), as_version=4)
    params = next(c for c in nb.cells if "parameters" in c.metadata.get("tags", []))
    params.source = params.source.replace("N_USERS = 5_000", "N_USERS = 2_000")  # snappier updates
    nbformat.write(nb, str(root / "explorer.ipynb"))

    home = tmp_path / "home"
    cfg = home / "jupyter_config"
    (cfg / "labconfig").mkdir(parents=True)
    (cfg / "labconfig" / "page_config.json").write_text(
        json.dumps({"disabledExtensions": {"@jupyterlab/apputils-extension:announcements": True}})
    )
    env = {
        **os.environ,
        "HOME": str(home),
        "JUPYTER_CONFIG_DIR": str(cfg),
        "JUPYTER_DATA_DIR": str(home / "jupyter_data"),
        "JUPYTER_RUNTIME_DIR": str(home / "jupyter_runtime"),
        "IPYTHONDIR": str(home / "ipython"),
        "JUPYTER_PLATFORM_DIRS": "1",
        "MPLCONFIGDIR": str(home / "mpl"),
        "PYTHONWARNINGS": "ignore",
    }
    port, token = _free_port(), secrets.token_hex(16)
    cmd = [
        sys.executable,
        "-m",
        "jupyter",
        "lab",
        "--no-browser",
        "--ip=127.0.0.1",
        f"--port={port}",
        f"--IdentityProvider.token={token}",
        f"--ServerApp.root_dir={root}",
        "--LabApp.expose_app_in_browser=True",
        "--ServerApp.port_retries=0",
    ]
    if hasattr(os, "geteuid") and os.geteuid() == 0:
        cmd.append("--allow-root")  # CI containers run as root
    log = open(tmp_path / "jupyter.log", "wb")
    proc = subprocess.Popen(cmd, env=env, stdout=log, stderr=subprocess.STDOUT, cwd=root)
    browser = None
    try:
        _wait_server(f"http://127.0.0.1:{port}/api/status?token={token}", proc)
        with sync_api.sync_playwright() as p:
            browser = p.chromium.launch(executable_path=str(CHROMIUM), headless=True, args=CHROMIUM_ARGS)
            page = browser.new_page(viewport={"width": 1400, "height": 1000})
            page.goto(f"http://127.0.0.1:{port}/lab/tree/explorer.ipynb?token={token}")
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
            out = REPO / "figures"
            out.mkdir(exist_ok=True)
            page.locator(".simpson-explorer").scroll_into_view_if_needed()
            page.screenshot(path=str(out / "simpson_explorer.png"), full_page=False)
    finally:
        if browser is not None:
            try:
                browser.close()
            except Exception:  # noqa: BLE001 - the browser may already be gone
                pass
        proc.terminate()
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=5)
        log.close()
        shutil.rmtree(home, ignore_errors=True)
