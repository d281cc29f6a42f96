"""The documentation site builds offline with warnings as errors, and reads right in a browser.

One build per module (about a minute on 2 cores): the repository's ``docs/`` copied into a temporary source
folder (so that a ``make docs`` running beside it is left alone), with ``docs/conf.py`` from the repository
(``-c``) and ``FACTERLAB_DOCS_NOTEBOOKS`` naming a folder with one notebook that this test executes first
(notebook 10, the Simpson toy example, with papermill at ``SMOKE``: seconds), so that a notebook page with
a figure exists whatever ``build/notebooks/`` holds. The site is served over HTTP on localhost and opened
in Debian's headless Chromium through playwright; the browser test skips with the reason when either is
missing.

Checked: ``sphinx-build -W`` exits 0 with no warning line; the formulas of docs/FACTER.md, SIMPSON.md,
SIMULATED.md, USAGE.md and PROTOCOL.md are typeset by MathJax (served from the site itself, no CDN); the notebook page shows its figure (an ``<img>`` that loaded);
the API page of ``facterlab.facter`` lists its public names and modules; the curated API page (docs/api.rst)
links every row to an anchor that exists, and the sidebar holds no module page; the search box finds the
FACTER page.
"""

from __future__ import annotations

import functools
import http.server
import os
import re
import shutil
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from jupyterlab_helpers import chromium_page, require_browser

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"
VENV_BIN = Path(sys.executable).parent
NOTEBOOK = "10_simpson_fig2_toy"

pytestmark = pytest.mark.slow


def _sphinx_available() -> None:
    for mod in ("sphinx", "myst_nb", "furo", "sphinxcontrib.bibtex"):
        pytest.importorskip(mod, reason=f"{mod} missing: pip install -e '.[docs]'")


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    """Build the site once: ``(html folder, sphinx-build result, seconds)``."""
    _sphinx_available()
    base = tmp_path_factory.mktemp("docs-site")
    env = dict(os.environ)
    for key in ("FACTERLAB_RESULTS", "FACTERLAB_FIGURES", "FACTERLAB_CACHE"):
        env[key] = str(base / key.lower())
    env["PYTHONHASHSEED"] = "0"
    nbdir = base / "executed"
    nbdir.mkdir()
    r = subprocess.run(
        [str(VENV_BIN / "papermill"), str(ROOT / "notebooks" / f"{NOTEBOOK}.ipynb"), str(nbdir / f"{NOTEBOOK}.ipynb")]
        + ["-p", "SMOKE", "True", "--cwd", str(ROOT / "notebooks"), "--no-progress-bar"],
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert r.returncode == 0, f"papermill {NOTEBOOK} failed:\n{r.stdout[-2000:]}\n{r.stderr[-3000:]}"
    src = base / "src"
    shutil.copytree(DOCS, src, ignore=shutil.ignore_patterns("_build", "api", "_notebooks", "__pycache__"))
    env["FACTERLAB_DOCS_NOTEBOOKS"] = str(nbdir)
    out = base / "html"
    start = time.perf_counter()
    build = subprocess.run(
        [str(VENV_BIN / "sphinx-build"), "-W", "--keep-going", "-b", "html", "-c", str(DOCS), str(src), str(out)],
        env=env,
        capture_output=True,
        text=True,
        timeout=900,
    )
    return out, build, time.perf_counter() - start


def test_site_builds_offline_without_warnings(site):
    out, build, seconds = site
    assert build.returncode == 0, (
        f"sphinx-build -W failed ({seconds:.0f} s):\n{build.stdout[-3000:]}\n{build.stderr[-5000:]}"
    )
    assert "WARNING" not in build.stderr and "ERROR" not in build.stderr, build.stderr[-5000:]
    for page in ("index.html", "getting-started.html", "FACTER.html", "BENCHMARKS.html", "references.html"):
        assert (out / page).is_file(), f"no {page} in the site"
    assert (out / "api" / "facterlab.facter.html").is_file()
    assert (out / "_notebooks" / f"{NOTEBOOK}.html").is_file()
    assert (out / "_static" / "mathjax" / "tex-chtml.js").is_file(), "MathJax is not served by the site itself"
    # the API reference lists public names only (no documented object has a component with a leading _, dunders aside)
    private = []
    for html in (out / "api").glob("*.html"):
        for anchor in re.findall(r'<dt class="sig sig-object py" id="([^"]+)"', html.read_text(encoding="utf-8")):
            if any(part.startswith("_") and not part.endswith("__") for part in anchor.split(".")):
                private.append(f"{html.name}: {anchor}")
    assert not private, "private names in the API reference:\n" + "\n".join(private[:20])
    # the curated API page (docs/api.rst): every row links to an anchor that exists; no module page in the sidebar
    api = (out / "api.html").read_text(encoding="utf-8")
    rows = re.findall(r'<tr class="row-(?:odd|even)"><td><p>(.*?)</p></td>', api, flags=re.S)
    assert len(rows) > 100, f"{len(rows)} rows on the API page"
    broken = []
    for row in rows:
        link = re.search(r'href="([^"#]+)#([^"]+)"', row)
        target = out / link.group(1) if link else None
        if link is None or not target.is_file() or f'id="{link.group(2)}"' not in target.read_text(encoding="utf-8"):
            broken.append(re.sub(r"<[^>]+>", "", row)[:80])
    assert not broken, f"API page rows without a working link: {broken[:10]}"
    sidebar = re.search(
        r'<div class="sidebar-tree">(.*?)</div>', (out / "index.html").read_text(encoding="utf-8"), re.S
    )
    assert sidebar, "no furo sidebar in index.html"
    in_sidebar = [h for h in re.findall(r'href="([^"]+)"', sidebar.group(1)) if h.startswith("api/")]
    assert not in_sidebar, f"module pages in the sidebar: {in_sidebar[:10]}"
    # offline: no page asks a CDN for a script or a style sheet
    for html in out.rglob("*.html"):
        text = html.read_text(encoding="utf-8")
        for cdn in ("cdn.jsdelivr.net", "unpkg.com", "cdnjs.cloudflare.com", "googleapis.com"):
            assert cdn not in text, f"{html.relative_to(out)} loads from {cdn}"


@pytest.fixture(scope="module")
def server(site):
    out, build, _ = site
    if build.returncode != 0:
        pytest.skip("the site did not build (test_site_builds_offline_without_warnings says why)")
    handler = functools.partial(_QuietHandler, directory=str(out))
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{httpd.server_address[1]}"
    finally:
        httpd.shutdown()
        httpd.server_close()


class _QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, format, *args):  # noqa: A002 - the base class's name
        pass


@pytest.mark.browser
def test_site_in_the_browser(server):
    sync_api = require_browser()
    with chromium_page(sync_api) as page:
        failed: list = []

        def on_failed(req) -> None:
            # a request of this site aborted because the test navigated on (net::ERR_ABORTED: a font or
            # image still loading) is not a missing resource; any other failure, or any host but ours, is
            if not (req.url.startswith(server) and "ERR_ABORTED" in (req.failure or "")):
                failed.append(f"{req.url} ({req.failure})")

        page.on("requestfailed", on_failed)
        # under CI load (the docs build beside the other tiers) a page or MathJax's typesetting can take far
        # longer than playwright's 30 s default: the test is about what loads, not how fast
        page.set_default_timeout(120_000)
        page.set_default_navigation_timeout(120_000)

        # a formula of the user guide, typeset by MathJax (CHTML output, no error node); MathJax inserts its
        # containers as it typesets, so wait for the count rather than reading it at the first one
        page.goto(f"{server}/FACTER.html")
        page.wait_for_function("document.querySelectorAll('mjx-container').length >= 5")
        assert page.locator("mjx-merror").count() == 0, "MathJax could not typeset a formula"
        assert page.locator("mjx-container[display='true']").count() >= 1, "no display formula"
        # every user-guide page with formulas: each one typeset, none an error (issue 42)
        for guide in ("SIMPSON", "SIMULATED", "USAGE", "PROTOCOL"):
            page.goto(f"{server}/{guide}.html")
            page.wait_for_selector("mjx-container")
            assert page.locator("mjx-merror").count() == 0, f"MathJax could not typeset a formula of {guide}.md"

        # a figure in a notebook page: an <img> of the notebook's output that the browser loaded
        page.goto(f"{server}/_notebooks/{NOTEBOOK}.html")
        imgs = page.locator(".cell_output img")
        assert imgs.count() >= 1, "the notebook page shows no figure"
        loaded = imgs.first.evaluate("img => img.complete && img.naturalWidth > 100")
        assert loaded, "the notebook's figure did not load"

        # the API page of facterlab.facter: its public names and its modules
        page.goto(f"{server}/api/facterlab.facter.html")
        assert page.locator("h1").first.inner_text().startswith("facterlab.facter")
        body = page.locator("article").inner_text()
        for name in ("run_experiment", "FacterMonitor", "ConformalThreshold"):
            assert name in body, f"{name} is not on the API page of facterlab.facter"
        assert page.locator("article a[href*='facterlab.facter.pipeline.html']").count() >= 1, "no link to a module"
        page.goto(f"{server}/api/facterlab.facter.pipeline.html")
        assert page.locator("dt#facterlab\\.facter\\.pipeline\\.run_experiment").count() == 1

        # the search box: a query typed into it finds the FACTER page
        page.goto(f"{server}/index.html")
        box = page.locator("input[name='q']").first
        box.fill("conformal")
        box.press("Enter")
        page.wait_for_url("**/search.html?q=conformal*")
        page.wait_for_selector("#search-results li")
        links = page.locator("#search-results li a").evaluate_all("as => as.map(a => a.getAttribute('href'))")
        assert any("FACTER" in (h or "") for h in links), links
        assert not failed, f"requests that failed: {failed}"
