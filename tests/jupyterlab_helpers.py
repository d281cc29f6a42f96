"""Shared helpers of the real-browser tests: JupyterLab in a sandbox, driven by the system Chromium.

- :func:`require_browser` skips the test (never fails) when ``/usr/bin/chromium`` or playwright is
  missing; playwright never downloads a browser here: the system Chromium is launched by path.
- :func:`jupyterlab` starts ``jupyter lab`` on 127.0.0.1 (free port, random token, its own HOME and
  Jupyter config/data/runtime dirs, announcements off, optional user settings such as autosave off)
  and stops it afterwards; :class:`Lab` gives the URLs.
- :func:`open_notebook`, :func:`run_all_and_wait`, :func:`notebook_outputs` work on the notebook
  panel through ``window.jupyterapp`` (``--LabApp.expose_app_in_browser``), i.e. on JupyterLab's own
  model, not on the DOM (JupyterLab may virtualise cells that are off screen).
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
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
CHROMIUM = Path("/usr/bin/chromium")
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
# every non-empty code cell has run (or one failed: run-all stops there) and the kernel is idle
RUN_ALL_DONE = """() => {
  const w = window.jupyterapp.shell.currentWidget;
  if (!w || !w.content || !w.content.model || !w.sessionContext) return false;
  const k = w.sessionContext.session && w.sessionContext.session.kernel;
  if (!k || k.status !== 'idle') return false;
  const cells = w.content.model.cells;
  let pending = false;
  for (let i = 0; i < cells.length; i++) {
    const c = cells.get(i);
    if (c.type !== 'code' || !c.sharedModel.getSource().trim()) continue;
    if (c.outputs.toJSON().some(o => o.output_type === 'error')) return true;
    if (c.executionCount === null) pending = true;
  }
  return !pending;
}"""
CELL_OUTPUTS = """() => {
  const cells = window.jupyterapp.shell.currentWidget.content.model.cells;
  const out = [];
  for (let i = 0; i < cells.length; i++) {
    const c = cells.get(i);
    out.push({type: c.type, source: c.sharedModel.getSource(),
              outputs: c.type === 'code' ? c.outputs.toJSON() : []});
  }
  return out;
}"""
SET_CELL_SOURCE = """([index, text]) => {
  const cells = window.jupyterapp.shell.currentWidget.content.model.cells;
  cells.get(index).sharedModel.setSource(text);
  return cells.get(index).sharedModel.getSource();
}"""


def require_browser():
    """playwright's sync API, or skip: no Chromium at /usr/bin/chromium, or no playwright."""
    if not CHROMIUM.exists():
        pytest.skip("Debian chromium is not installed at /usr/bin/chromium (apt-get install chromium)")
    return pytest.importorskip("playwright.sync_api")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_server(url: str, proc: subprocess.Popen, timeout: float = 40.0) -> None:
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


@dataclass
class Lab:
    """A running JupyterLab: ``base`` (``http://127.0.0.1:<port>``), ``token``, its ``log`` file."""

    base: str
    token: str
    root: Path
    log: Path
    env: dict

    def url(self, path: str) -> str:
        sep = "&" if "?" in path else "?"
        return f"{self.base}/{path.lstrip('/')}{sep}token={self.token}"

    def api(self, path: str) -> dict:
        """GET a JSON endpoint of the server (e.g. ``lab/api/settings/<plugin>``)."""
        with urllib.request.urlopen(self.url(path), timeout=10) as r:
            return json.loads(r.read().decode())


@contextmanager
def jupyterlab(tmp_path: Path, root: Path, user_settings: dict | None = None, env: dict | None = None) -> Iterator[Lab]:
    """JupyterLab serving ``root`` (also the server's working directory), sandboxed under
    ``tmp_path/home``.  ``user_settings``: ``{"@jupyterlab/docmanager-extension:plugin":
    {"autosave": False}, ...}`` written as the user's settings before the server starts; ``env``:
    the server's (and so its kernels') environment, default ``os.environ``."""
    home = tmp_path / "home"
    cfg = home / "jupyter_config"
    (cfg / "labconfig").mkdir(parents=True)
    (cfg / "labconfig" / "page_config.json").write_text(
        json.dumps({"disabledExtensions": {"@jupyterlab/apputils-extension:announcements": True}})
    )
    for plugin, values in (user_settings or {}).items():
        package, name = plugin.split(":", 1)
        target = cfg / "lab" / "user-settings" / package / f"{name}.jupyterlab-settings"
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(json.dumps(values))
    full_env = {
        **(os.environ if env is None else env),
        "HOME": str(home),
        "JUPYTER_CONFIG_DIR": str(cfg),
        "JUPYTER_DATA_DIR": str(home / "jupyter_data"),
        "JUPYTER_RUNTIME_DIR": str(home / "jupyter_runtime"),
        "IPYTHONDIR": str(home / "ipython"),
        "JUPYTER_PLATFORM_DIRS": "1",
        "MPLCONFIGDIR": str(home / "mpl"),
        "PYTHONWARNINGS": "ignore",
    }
    port, token = free_port(), secrets.token_hex(16)
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
    log_path = tmp_path / "jupyter.log"
    log = open(log_path, "wb")
    proc = subprocess.Popen(cmd, env=full_env, stdout=log, stderr=subprocess.STDOUT, cwd=root)
    lab = Lab(f"http://127.0.0.1:{port}", token, Path(root), log_path, full_env)
    try:
        wait_server(lab.url("api/status"), proc)
        yield lab
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=5)
        log.close()
        shutil.rmtree(home, ignore_errors=True)


@contextmanager
def chromium_page(sync_api, width: int = 1400, height: int = 1000):
    """A page of the system Chromium (headless), closed afterwards."""
    with sync_api.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=str(CHROMIUM), headless=True, args=CHROMIUM_ARGS)
        try:
            yield browser.new_page(viewport={"width": width, "height": height})
        finally:
            try:
                browser.close()
            except Exception:  # noqa: BLE001 - the browser may already be gone
                pass


def open_notebook(page, lab: Lab, path: str, timeout_ms: int = 60_000) -> None:
    """Open ``path`` (relative to the server root) and wait until its kernel is idle."""
    page.goto(lab.url(f"lab/tree/{path}"))
    page.wait_for_function(KERNEL_IDLE, timeout=timeout_ms)


def run_all_and_wait(page, timeout_ms: int = 300_000) -> None:
    """Run all cells and wait until every code cell ran (or one failed) and the kernel is idle."""
    page.evaluate("window.jupyterapp.commands.execute('notebook:run-all-cells')")
    page.wait_for_function(RUN_ALL_DONE, timeout=timeout_ms, polling=500)


KERNEL_STATUS = """() => {
  const w = window.jupyterapp.shell.currentWidget;
  return [Date.now(), w.sessionContext.session.kernel.status, w.sessionContext.kernelDisplayStatus];
}"""
# records every iopub status message with its parent's type (what JupyterLab's status bar follows)
HOOK_STATUS_MESSAGES = """() => {
  const k = window.jupyterapp.shell.currentWidget.sessionContext.session.kernel;
  window._facterlabStatus = [];
  k.iopubMessage.connect((_, m) => {
    if (m.header.msg_type === 'status')
      window._facterlabStatus.push([Date.now(), m.content.execution_state, m.parent_header.msg_type]);
  });
  return true;
}"""


def start_run_all(page) -> None:
    """Start running all cells and return at once (``commands.execute`` resolves only when the run ends)."""
    page.evaluate("() => { window.jupyterapp.commands.execute('notebook:run-all-cells'); return true; }")


def poll_kernel_status(page, seconds: float, every: float = 0.5) -> list:
    """``[(ms, kernel status, status bar text)]`` polled every ``every`` seconds for ``seconds``."""
    polls = []
    end = time.time() + seconds
    while time.time() < end:
        polls.append(tuple(page.evaluate(KERNEL_STATUS)))
        time.sleep(every)
    return polls


def notebook_outputs(page) -> list:
    """The open notebook's cells as JupyterLab holds them: ``[{type, source, outputs}]``."""
    return page.evaluate(CELL_OUTPUTS)


def output_text(outputs: list) -> str:
    """The text a reader sees in a list of nbformat outputs: streams, ``text/plain``, errors."""
    parts = []
    for o in outputs:
        if o.get("output_type") == "stream":
            parts.append("".join(o.get("text", "")))
        elif o.get("output_type") == "error":
            parts.append(f"{o.get('ename')}: {o.get('evalue')}")
        else:
            parts.append("".join(o.get("data", {}).get("text/plain", "")))
    return "\n".join(parts)
