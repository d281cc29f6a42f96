"""Shared helpers of the real-browser tests: JupyterLab in a sandbox, driven by the system Chromium.

- :func:`require_browser` skips the test (never fails) when ``/usr/bin/chromium`` or playwright is
  missing; playwright never downloads a browser here: the system Chromium is launched by path.
- :func:`jupyterlab` starts ``jupyter lab`` on 127.0.0.1 (free port, random token, its own HOME and
  Jupyter config/data/runtime dirs, announcements off, optional user settings such as autosave off)
  and stops it afterwards; :class:`Lab` gives the URLs.
- :func:`open_notebook`, :func:`run_all_and_wait`, :func:`notebook_outputs` work on the notebook
  panel through ``window.jupyterapp`` (``--LabApp.expose_app_in_browser``), i.e. on JupyterLab's own
  model, not on the DOM (JupyterLab may virtualise cells that are off screen).

Every wait here waits on the condition the test checks (the server answers, the kernel is idle, the
session has settled, a cell ran, a file was written), never on a fixed sleep, with one generous
deadline, :data:`DEADLINE_S` (``$FACTERLAB_BROWSER_DEADLINE_S``, default 600 s): on a loaded machine
(load 15 on 2 cores) JupyterLab takes tens of seconds to start and to answer, and a deadline is only
there to end a test that hangs.
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

REPO = Path(__file__).resolve().parents[2]
#: the one deadline of every wait (seconds): generous, since it only ends a test that hangs
DEADLINE_S = float(os.environ.get("FACTERLAB_BROWSER_DEADLINE_S", "600"))
DEADLINE_MS = int(DEADLINE_S * 1000)
#: one HTTP request to the Jupyter server (a loaded server answers slowly, never this slowly)
REQUEST_S = min(DEADLINE_S, 180.0)
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


def wait_until(condition, what: str, timeout: float | None = None, every: float = 0.2):
    """Call ``condition()`` until it returns a true value (returned), at most ``timeout`` seconds
    (default :data:`DEADLINE_S`); the pause between calls grows from ``every`` to 2 s.  TimeoutError
    naming ``what`` after the deadline."""
    end = time.monotonic() + (DEADLINE_S if timeout is None else timeout)
    pause = every
    while True:
        value = condition()
        if value:
            return value
        if time.monotonic() > end:
            raise TimeoutError(f"{what}: not after {DEADLINE_S if timeout is None else timeout:.0f} s")
        time.sleep(pause)  # a poll interval, not a wait for something to happen
        pause = min(2.0, pause * 1.5)


def wait_server(url: str, proc: subprocess.Popen, timeout: float | None = None) -> None:
    """Until ``url`` answers 200 (JupyterLab is up); RuntimeError when the server exits first."""

    def answered() -> bool:
        if proc.poll() is not None:
            raise RuntimeError(f"JupyterLab exited early with code {proc.returncode}; see its log")
        try:
            with urllib.request.urlopen(url, timeout=REQUEST_S) as r:
                return r.status == 200
        except OSError:
            return False

    wait_until(answered, "JupyterLab answering api/status", timeout)


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
        with urllib.request.urlopen(self.url(path), timeout=REQUEST_S) as r:
            return json.loads(r.read().decode())

    def put(self, path: str, body: dict) -> int:
        """PUT ``body`` as JSON to an endpoint (a contents-API save, as JupyterLab sends it); the status."""
        req = urllib.request.Request(self.url(path), data=json.dumps(body).encode(), method="PUT")
        req.add_header("Content-Type", "application/json")
        with urllib.request.urlopen(req, timeout=REQUEST_S) as r:
            return r.status


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


def open_notebook(page, lab: Lab, path: str, timeout_ms: int = DEADLINE_MS) -> None:
    """Open ``path`` (relative to the server root) and wait until its kernel is idle."""
    page.goto(lab.url(f"lab/tree/{path}"), timeout=timeout_ms)
    page.wait_for_function(KERNEL_IDLE, timeout=timeout_ms)


# the session has settled: JupyterLab's session is ready, the kernel answered kernel_info and is idle,
# and no iopub status message came for ``quiet`` ms (the start-up requests, comm_info included, are over)
HOOK_SETTLED = """() => {
  const k = window.jupyterapp.shell.currentWidget.sessionContext.session.kernel;
  window._facterlabLastStatus = Date.now(); window._facterlabInfo = false;
  k.info.then(() => { window._facterlabInfo = true; });
  k.iopubMessage.connect((_, m) => { if (m.header.msg_type === 'status') window._facterlabLastStatus = Date.now(); });
  return true;
}"""
SETTLED = """(quiet) => {
  const w = window.jupyterapp.shell.currentWidget;
  const k = w.sessionContext.session && w.sessionContext.session.kernel;
  return w.sessionContext.isReady && window._facterlabInfo && !!k && k.status === 'idle'
    && Date.now() - window._facterlabLastStatus >= quiet;
}"""


def wait_kernel_settled(page, quiet_ms: int = 1000, timeout_ms: int = DEADLINE_MS) -> None:
    """After :func:`open_notebook`: until the session's start-up messages are over (:data:`SETTLED`), so
    that what a test records next is the cells' own messages; on a loaded machine this waits longer."""
    page.wait_for_function(KERNEL_IDLE, timeout=timeout_ms)
    page.evaluate(HOOK_SETTLED)
    page.wait_for_function(SETTLED, arg=quiet_ms, timeout=timeout_ms, polling=100)


def run_all_and_wait(page, timeout_ms: int = DEADLINE_MS) -> None:
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


def poll_kernel_status(page, until: str, every: float = 0.5, timeout: float | None = None) -> list:
    """``[(ms, kernel status, status bar text)]`` polled every ``every`` seconds until the JavaScript
    condition ``until`` holds (e.g. the cell's idle message came), at most ``timeout`` seconds
    (default :data:`DEADLINE_S`)."""
    polls: list = []
    end = time.monotonic() + (DEADLINE_S if timeout is None else timeout)
    while not page.evaluate(until):
        if time.monotonic() > end:
            raise TimeoutError(f"kernel status polls: {until!r} not true before the deadline")
        polls.append(tuple(page.evaluate(KERNEL_STATUS)))
        time.sleep(every)  # the polling interval (what the test samples), not a wait for something
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
