"""Every figure and table names the runs and the code version that made it (issue 23).

- a saved figure carries its run ids and code version in its caption's last line, in its PNG text
  chunks (``facterlab:runs``, ``facterlab:code``) and in its PDF's ``Subject``/``Keywords``;
- a table names them in its header (Markdown notes, CSV leading ``#`` line, LaTeX leading ``%`` line);
- a notebook run outside the report run keeps its outputs in ``results/figures/<notebook>/<UTC time>/``;
- the committed report figures (``figures/*.png``, written by the report run) carry the same metadata.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

mpl = pytest.importorskip("matplotlib")
mpl.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

from facterlab.facter.record import RunMetrics  # noqa: E402
from facterlab.reporting import facter_figures as ff  # noqa: E402
from facterlab.reporting import figures  # noqa: E402
from facterlab.reporting import tables as tb  # noqa: E402

REPO = Path(__file__).resolve().parents[2]
RUN_ID = re.compile(r"\b[0-9a-f]{12}-[0-9a-f]{8}\b")
#: report figures drawn from FACTER runs: their metadata must name at least one run id
FACTER_REPORT_FIGURES = (
    "quickstart_methods",
    "calibration_scores",
    "table1_open_generation",
    "fig1_violations_by_pass",
    "appendix_single_attribute",
    "threshold_dependence_aci",
    "simpson_llm_gaps",
    "simpson_sim_gaps",
)


@pytest.fixture(autouse=True)
def _close():
    yield
    plt.close("all")


def _metrics(run_id: str, seed: int = 0) -> RunMetrics:
    obj = {
        "run_id": run_id,
        "dataset": "synthetic",
        "is_synthetic": True,
        "model": "fake",
        "n_calib": 28,
        "n_test": 12,
        "calibration": {"alpha": 0.1},
        "methods": {
            "facter": {"violations": {"adaptive": [1 + seed, 1], "fixed_q0": [2, 2]}, "threshold_path": [1, 1.1, 1.2]}
        },
    }
    return RunMetrics.partial(obj)  # a partial metrics.json: absent keys read as missing


@pytest.mark.slow
def test_saved_figure_names_its_runs_in_caption_png_and_pdf(tmp_path):
    runs = [_metrics("aaaaaaaaaaaa-11111111"), _metrics("bbbbbbbbbbbb-22222222", 1)]
    fig = ff.violations_by_pass(runs, "V by pass")
    png, pdf = figures.save_figure(fig, "v", tmp_path)
    meta = figures.read_png_provenance(png)
    assert meta[figures.PNG_RUNS_KEY] == "aaaaaaaaaaaa-11111111, bbbbbbbbbbbb-22222222"
    assert meta[figures.PNG_CODE_KEY] == figures.drawing_code_version()
    assert meta["Description"].startswith("Runs: aaaaaaaaaaaa-11111111")
    raw = pdf.read_bytes()
    assert b"bbbbbbbbbbbb-22222222" in raw and b"/Subject" in raw and b"/Keywords" in raw
    caption = fig._facterlab_caption_artist.get_text().replace("\n", " ")
    assert "Runs: aaaaaaaaaaaa-11111111" in caption and f"drawn by {figures.drawing_code_version()}" in caption
    assert "n = 12 test rows" in caption  # the figure's own caption is kept above the provenance line
    # saving again replaces the provenance line instead of stacking a second one
    figures.save_figure(fig, "v", tmp_path, runs=runs[:1])
    text = fig._facterlab_caption_artist.get_text()
    assert text.count("Runs:") == 1 and "bbbbbbbbbbbb" not in text


def test_figure_without_runs_says_what_made_it(tmp_path):
    fig, ax = plt.subplots()
    ax.plot([0, 1])
    (png, _pdf) = figures.save_figure(fig, "toy", tmp_path, source="toy lists")
    meta = figures.read_png_provenance(png)
    assert meta[figures.PNG_RUNS_KEY].startswith("none named")
    assert meta["Description"].startswith("Made from: toy lists. Runs: none named")


def test_table_header_names_runs_and_code():
    t = tb.per_pass_table([_metrics("cccccccccccc-33333333")], name="t", title="T", published=False)
    md, csv, tex = t.to_markdown(), t.to_csv(), t.to_latex()
    assert md.splitlines()[3].startswith("Runs: cccccccccccc-33333333")  # after the SYNTHETIC warning
    assert csv.splitlines()[0].startswith("# Runs: cccccccccccc-33333333")
    assert tex.splitlines()[0].startswith("% Runs: cccccccccccc-33333333")
    assert figures.drawing_code_version() in csv.splitlines()[0]
    ft = tb.frame_table(__import__("pandas").DataFrame({"a": [1.0]}), name="f", title="F", source="a simulation")
    assert ft.to_csv().startswith("# Made from: a simulation. Runs: none named")


def test_notebook_outputs_are_kept_per_run(tmp_path, monkeypatch):
    for var in ("FACTERLAB_FIGURES", "FACTERLAB_REPORT", "JPY_SESSION_NAME"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("FACTERLAB_RESULTS", str(tmp_path / "results"))
    monkeypatch.setenv("FACTERLAB_NOTEBOOK", "06_fig1_violations_by_pass")
    figures._session_stamp.cache_clear()
    monkeypatch.setattr(figures, "_session_stamp", lambda: "20260101T000000Z")
    first = figures.figures_dir()
    assert first == tmp_path / "results" / "figures" / "06_fig1_violations_by_pass" / "20260101T000000Z"
    fig, ax = plt.subplots()
    figures.save_figure(fig, "x")
    monkeypatch.setattr(figures, "_session_stamp", lambda: "20260101T000100Z")  # a later run of the notebook
    figures.save_figure(fig, "x")
    kept = sorted(p.relative_to(tmp_path) for p in (tmp_path / "results" / "figures").rglob("x.png"))
    assert len(kept) == 2  # the second run did not overwrite the first
    monkeypatch.setenv("JPY_SESSION_NAME", "/home/u/notebooks/15_simpson_explorer.ipynb")
    monkeypatch.delenv("FACTERLAB_NOTEBOOK")
    assert figures.figures_dir().parent.name == "15_simpson_explorer"
    monkeypatch.setenv("FACTERLAB_REPORT", "1")  # the report run writes the committed figures/ flat
    assert figures.figures_dir().name == "figures" and "15_simpson_explorer" not in str(figures.figures_dir())


def test_report_figures_carry_run_ids_in_their_metadata():
    """The committed figures/*.png, as the last report run wrote them (``make reproduce``): every one
    names its code version and runs; those drawn from FACTER runs name at least one run id.  Skipped
    only while no committed figure has the metadata yet (figures drawn before it existed); once one has,
    a figure left without it (not redrawn by the report run) fails."""
    pngs = sorted((REPO / "figures").glob("*.png"))
    if not pngs:
        pytest.skip("no report figures in this checkout")
    metas = {p: figures.read_png_provenance(p) for p in pngs}
    if not any(figures.PNG_CODE_KEY in m for m in metas.values()):
        pytest.skip("the committed figures predate provenance metadata: the next report run (make reproduce) writes it")
    problems = []
    for p, meta in metas.items():
        if figures.PNG_RUNS_KEY not in meta or figures.PNG_CODE_KEY not in meta:
            problems.append(f"{p.name}: no facterlab:runs/facterlab:code metadata (redraw with the report run)")
        elif p.stem in FACTER_REPORT_FIGURES and not RUN_ID.search(meta[figures.PNG_RUNS_KEY]):
            problems.append(f"{p.name}: names no run id ({meta[figures.PNG_RUNS_KEY]!r})")
    assert not problems, "\n".join(problems)


def test_unknown_code_version_says_why():
    """A footer never says "runs made by not recorded" (issue 42): it says why the commit is unknown."""
    by_id = figures.provenance_line(["cccccccccccc-33333333"])
    by_metrics = figures.provenance_line([_metrics("cccccccccccc-33333333")])
    assert "not recorded" not in by_id + by_metrics
    assert "runs made by an unknown commit (the artefact was given a run id, not the run's record)" in by_id
    assert "runs made by an unknown commit (the artefact was given metrics only" in by_metrics
    md = tb.per_pass_table([_metrics("cccccccccccc-33333333")], name="t", title="T", published=False).to_markdown()
    assert "not recorded" not in md.splitlines()[3] and "unknown commit (" in md.splitlines()[3]


def _committed_repo(root) -> None:
    """A git repository at ``root`` with ``a.py`` and ``figures/t.md`` committed."""
    import subprocess

    git = ["git", "-c", "user.name=t", "-c", "user.email=t@t", "-c", "commit.gpgsign=false"]
    subprocess.run([*git, "init", "-q"], cwd=root, check=True)
    (root / "figures").mkdir()
    for f in ("a.py", "figures/t.md"):
        (root / f).write_text("1\n")
    subprocess.run([*git, "add", "."], cwd=root, check=True)
    subprocess.run([*git, "commit", "-q", "-m", "x"], cwd=root, check=True)


def test_uncommitted_reason_reads_the_work_tree(tmp_path):
    """--report needs a commit: a changed tracked file is named, figures/ (the report's output) and untracked
    files are not counted, and a folder outside git says so."""
    import shutil

    from facterlab.reporting import reproduce as rp

    if shutil.which("git") is None:
        pytest.skip("git is not installed")
    assert rp.uncommitted_reason(tmp_path).startswith("not a git work tree")
    _committed_repo(tmp_path)
    assert rp.uncommitted_reason(tmp_path) is None
    (tmp_path / "figures" / "t.md").write_text("2\n")
    (tmp_path / "new.py").write_text("untracked\n")
    assert rp.uncommitted_reason(tmp_path) is None
    (tmp_path / "a.py").write_text("2\n")
    assert rp.uncommitted_reason(tmp_path) == "1 tracked file(s) differ from the last commit (a.py)"


def test_code_version_is_dirty_for_code_not_for_the_reports_own_figures(tmp_path, monkeypatch):
    """A report run rewrites the committed figures/ as it goes: the runs it makes after the first figure
    are still made by the commit, so only tracked files outside figures/ make the code version '-dirty'
    (the report run of 2026-12-07 at 370dedf recorded '370dedf-dirty' for every run)."""
    import shutil

    from facterlab.facter import provenance
    from facterlab.gitstate import changed_tracked_files

    if shutil.which("git") is None or not provenance.code_version().startswith("git "):
        pytest.skip("the package is not in a git work tree here")
    _committed_repo(tmp_path)
    (tmp_path / "figures" / "t.md").write_text("2\n")
    assert changed_tracked_files(tmp_path) == [] and changed_tracked_files(tmp_path, ()) == ["figures/t.md"]
    (tmp_path / "a.py").write_text("2\n")
    assert changed_tracked_files(tmp_path) == ["a.py"]

    for changed, suffix in (([], ""), (["src/x.py"], "-dirty"), (None, "-unknown-tree (git status failed)")):
        monkeypatch.setattr(provenance, "changed_tracked_files", lambda root, c=changed: c)
        version = provenance.code_version()
        assert version.startswith("git ") and version.endswith(suffix or version[-7:])
        assert ("-dirty" in version) == (suffix == "-dirty")
