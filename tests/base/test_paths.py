"""One project root whatever the working directory; the report flag decides where figures go."""

from __future__ import annotations

from pathlib import Path

import pytest

from facterlab import config, paths
from facterlab.reporting import figures

REPO = Path(__file__).resolve().parents[2]
ENV = ("FACTERLAB_ROOT", "FACTERLAB_RESULTS", "FACTERLAB_CACHE", "FACTERLAB_FIGURES", "FACTERLAB_REPORT")


@pytest.fixture
def clean_env(monkeypatch):
    for var in (*ENV, "JPY_SESSION_NAME"):
        monkeypatch.delenv(var, raising=False)
    return monkeypatch


@pytest.fixture
def project(tmp_path):
    root = tmp_path / "clone"
    (root / "notebooks").mkdir(parents=True)
    (root / "src" / "facterlab" / "deep").mkdir(parents=True)
    (root / "pyproject.toml").write_text(
        '[build-system]\nrequires = []\n\n[project]\nname = "facterlab"\nversion = "0"\n'
    )
    return root


def test_root_from_notebooks_and_from_a_subfolder(clean_env, project):
    for where in (project, project / "notebooks", project / "src" / "facterlab" / "deep"):
        clean_env.chdir(where)
        assert paths.project_root() == project.resolve()
        assert paths.results_dir() == project.resolve() / "results"
        assert paths.cache_dir() == project.resolve() / "build" / "cache"
        assert config.results_dir() == paths.results_dir() and config.cache_dir() == paths.cache_dir()


def test_root_of_this_repository_from_its_notebooks_folder(clean_env):
    clean_env.chdir(REPO / "notebooks")
    assert paths.project_root() == REPO
    assert paths.figures_dir() == REPO / "results" / "figures"  # not a report run


def test_another_projects_pyproject_is_not_a_root(clean_env, tmp_path):
    other = tmp_path / "other"
    (other / "notebooks").mkdir(parents=True)
    (other / "pyproject.toml").write_text('[project]\nname = "not-facterlab"\n\n[tool.x]\nname = "facterlab"\n')
    clean_env.chdir(other / "notebooks")
    assert paths.find_project_root() is None
    assert paths.project_root() == Path.cwd()  # outside a clone: the current directory


def test_outside_a_clone_the_cache_is_per_user(clean_env, tmp_path):
    clean_env.setenv("HOME", str(tmp_path / "home"))
    clean_env.chdir(tmp_path)
    assert paths.results_dir() == tmp_path.resolve() / "results"
    assert paths.cache_dir() == tmp_path / "home" / ".cache" / "facterlab" / "cache"


def test_jupyterlab_session_path_finds_the_root(clean_env, project, tmp_path):
    clean_env.chdir(tmp_path)  # a kernel started elsewhere, with the notebook's path in its environment
    clean_env.setenv("JPY_SESSION_NAME", str(project / "notebooks" / "06_x.ipynb"))
    assert paths.project_root() == project.resolve()


def test_env_overrides(clean_env, project, tmp_path):
    clean_env.chdir(tmp_path)
    clean_env.setenv("FACTERLAB_ROOT", str(project))
    assert paths.project_root() == project.resolve()
    assert paths.results_dir() == project.resolve() / "results"
    for var, fn in (
        ("FACTERLAB_RESULTS", paths.results_dir),
        ("FACTERLAB_CACHE", paths.cache_dir),
        ("FACTERLAB_FIGURES", paths.figures_dir),
    ):
        clean_env.setenv(var, str(tmp_path / var))
        assert fn() == tmp_path / var
    assert paths.results_dir(tmp_path / "explicit") == tmp_path / "explicit"


def test_report_flag_decides_the_figures_folder(clean_env, project, capsys):
    pytest.importorskip("matplotlib")
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    clean_env.chdir(project / "notebooks")
    root = project.resolve()
    fig, ax = plt.subplots()
    ax.plot([0, 1])
    # an exploratory run (JupyterLab, papermill, reproduce --profile smoke): beside the results
    written = figures.save_figure(fig, "fig_x")
    assert [p.parent for p in written] == [root / "results" / "figures"] * 2
    assert all(p.is_file() for p in written) and not (root / "figures").exists()
    assert f"-> {root / 'results' / 'figures'}" in capsys.readouterr().out
    # the report run: the committed figures/
    clean_env.setenv("FACTERLAB_REPORT", "1")
    written = figures.save_figure(fig, "fig_x")
    assert [p.parent for p in written] == [root / "figures"] * 2
    assert "report figure fig_x" in capsys.readouterr().out
    # an explicit FACTERLAB_FIGURES wins over both
    clean_env.setenv("FACTERLAB_FIGURES", str(project / "elsewhere"))
    assert figures.figures_dir() == project / "elsewhere"
    clean_env.setenv("FACTERLAB_REPORT", "0")
    clean_env.delenv("FACTERLAB_FIGURES")
    assert figures.figures_dir() == root / "results" / "figures"
    plt.close(fig)
