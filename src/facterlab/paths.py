"""One project root, whatever the working directory (docs/PATHS.md).

JupyterLab starts a notebook's kernel in ``notebooks/``, papermill and ``facterlab reproduce`` in the
repository root, a user's shell anywhere: every one of them resolves results, run folders, figures and
the cache through these functions, so that a notebook opened after ``make reproduce`` finds its runs.

``project_root()``: ``$FACTERLAB_ROOT``; else the nearest ancestor of the current directory (then of
the JupyterLab notebook's directory, ``$JPY_SESSION_NAME``) holding this project's ``pyproject.toml``
(``name = "facterlab"``); else the current directory (a pip-installed user outside a clone).

- results: ``$FACTERLAB_RESULTS``, else ``<root>/results`` (run folders in ``runs/``, notebook metrics);
- cache: ``$FACTERLAB_CACHE``, else ``<root>/build/cache`` in a clone, else ``~/.cache/facterlab/cache``;
- figures and tables: ``$FACTERLAB_FIGURES``, else ``<root>/figures`` in the report run
  (``FACTERLAB_REPORT=1``), else ``<results>/figures`` (beside the results of that run);
- build: ``<root>/build`` (executed notebooks, the cache).

The committed report figures in ``<root>/figures`` are written only by the report run:
``facterlab reproduce --profile default`` (``make reproduce``) or ``--report``, which set
``FACTERLAB_REPORT=1`` for their notebook kernels.

>>> import os, tempfile
>>> d = Path(tempfile.mkdtemp())
>>> _ = (d / "pyproject.toml").write_text('[project]\\nname = "facterlab"\\n')
>>> (d / "notebooks").mkdir()
>>> find_project_root(d / "notebooks") == d
True
>>> find_project_root(Path(tempfile.mkdtemp())) is None
True
"""

from __future__ import annotations

import contextlib
import os
import re
from pathlib import Path

ENV_ROOT = "FACTERLAB_ROOT"
ENV_RESULTS = "FACTERLAB_RESULTS"
ENV_CACHE = "FACTERLAB_CACHE"
ENV_FIGURES = "FACTERLAB_FIGURES"
#: ``1``: a data file that differs from its pinned checksum is an error (``facterlab --strict-data``)
ENV_STRICT_DATA = "FACTERLAB_STRICT_DATA"
ENV_REPORT = "FACTERLAB_REPORT"
PROJECT_NAME = "facterlab"

_NAME = re.compile(r"""^\s*name\s*=\s*["']([^"']+)["']""", re.M)


def _is_project(directory: Path) -> bool:
    """Whether ``directory`` holds the pyproject.toml of this project (``[project] name = "facterlab"``)."""
    py = directory / "pyproject.toml"
    if not py.is_file():
        return False
    try:
        text = py.read_text(encoding="utf-8")
    except OSError:
        return False
    section = text.split("[project]", 1)
    if len(section) < 2:
        return False
    body = re.split(r"^\s*\[", section[1], maxsplit=1, flags=re.M)[0]  # up to the next table
    m = _NAME.search(body)
    return m is not None and m.group(1).strip().lower() == PROJECT_NAME


def find_project_root(start: os.PathLike | str | None = None) -> Path | None:
    """The nearest ancestor of ``start`` (default: the current directory; then the JupyterLab
    notebook's directory) that holds this project's ``pyproject.toml``; None outside a clone.
    ``$FACTERLAB_ROOT`` is not consulted here (see :func:`project_root`)."""
    starts = [Path(start)] if start is not None else [Path.cwd()]
    if start is None:
        session = os.environ.get("JPY_SESSION_NAME")  # JupyterLab: the notebook's path
        if session and Path(session).is_absolute():
            starts.append(Path(session).parent)
    for s in starts:
        s = s.expanduser().resolve()
        for d in (s, *s.parents):
            if _is_project(d):
                return d
    return None


def project_root() -> Path:
    """``$FACTERLAB_ROOT``, else the clone holding the current directory (:func:`find_project_root`),
    else the current directory."""
    env = os.environ.get(ENV_ROOT)
    if env:
        return Path(env).expanduser().resolve()
    found = find_project_root()
    return found if found is not None else Path.cwd()


def in_clone() -> bool:
    """Whether :func:`project_root` is a facterlab clone (``$FACTERLAB_ROOT`` or a found pyproject)."""
    return bool(os.environ.get(ENV_ROOT)) or find_project_root() is not None


def _env_path(var: str) -> Path | None:
    value = os.environ.get(var)
    return Path(value).expanduser() if value else None


def build_dir() -> Path:
    """``<root>/build``: executed notebooks, the cache (in a clone)."""
    return project_root() / "build"


def results_dir(explicit: os.PathLike | str | None = None) -> Path:
    """``explicit``, else ``$FACTERLAB_RESULTS``, else ``<root>/results``; an empty ``explicit`` (``--out-dir
    ""``) is an error, not the current folder."""
    if explicit is not None:
        if not str(explicit).strip():
            raise ValueError(
                f"--out-dir / out_dir {str(explicit)!r} is empty: give a folder, or leave it out for "
                "$FACTERLAB_RESULTS (or <root>/results)"
            )
        return Path(explicit).expanduser()
    return _env_path(ENV_RESULTS) or project_root() / "results"


def runs_dir(results: os.PathLike | str | None = None) -> Path:
    """``<results>/runs``: where run folders go (``results`` defaults to :func:`results_dir`); the one
    place this path is built."""
    return results_dir(results) / "runs"


@contextlib.contextmanager
def locked(folder: os.PathLike | str):
    """Hold an exclusive lock on ``folder`` (created if missing) for the ``with`` block: writers that
    rename entries into one folder (run folders, interaction cache entries) take turns, so that two
    processes writing the same entry both end with one complete entry and no error.  An advisory
    ``flock`` on the folder itself: nothing is left behind, and the lock goes with the process when it
    is killed.  Without ``fcntl`` (Windows) the block runs unlocked."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    try:
        import fcntl
    except ImportError:  # pragma: no cover - not POSIX
        yield folder
        return
    fd = os.open(folder, os.O_RDONLY)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield folder
    finally:
        os.close(fd)  # closing releases the lock


def pid_alive(pid: int) -> bool:
    """A process with id ``pid`` exists (this process included)."""
    if pid == os.getpid():
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:
        return True
    return True


def remove_dead_temps(folder: os.PathLike | str, key: str, kinds: tuple = ("tmp", "old")) -> list:
    """Delete ``.<kind>-<key>-<pid>-*`` entries of ``folder`` whose writer (process ``pid``) is gone;
    return what was removed.  A live writer's temporary folder is left alone."""
    import shutil

    removed: list = []
    folder = Path(folder)
    if not folder.is_dir():
        return removed
    for p in folder.glob(f".*-{key}-*"):
        kind, _, rest = p.name[1:].partition("-")
        if kind not in kinds or not rest.startswith(key + "-"):
            continue
        pid = rest[len(key) + 1 :].split("-", 1)[0]
        if pid.isdigit() and not pid_alive(int(pid)):
            shutil.rmtree(p, ignore_errors=True)
            removed.append(p)
    return removed


def cache_dir(explicit: os.PathLike | str | None = None) -> Path:
    """``explicit``, else ``$FACTERLAB_CACHE``, else ``<root>/build/cache`` in a clone, else
    ``~/.cache/facterlab/cache`` (a pip-installed user: one cache for every working directory)."""
    if explicit is not None:
        return Path(explicit).expanduser()
    env = _env_path(ENV_CACHE)
    if env is not None:
        return env
    if in_clone():
        return build_dir() / "cache"
    return Path.home() / ".cache" / "facterlab" / "cache"


def is_report_run() -> bool:
    """Whether this process is the report run (``$FACTERLAB_REPORT`` is 1/true/yes)."""
    from facterlab import envvars

    return bool(envvars.get(ENV_REPORT))


def report_figures_dir() -> Path:
    """``<root>/figures``: the committed report figures (written only by the report run)."""
    return project_root() / "figures"


def figures_dir(explicit: os.PathLike | str | None = None) -> Path:
    """Where figures and tables go (not created): ``explicit``, else ``$FACTERLAB_FIGURES``, else
    ``<root>/figures`` in the report run (:func:`is_report_run`), else ``<results>/figures``."""
    if explicit is not None:
        return Path(explicit).expanduser()
    env = _env_path(ENV_FIGURES)
    if env is not None:
        return env
    return report_figures_dir() if is_report_run() else results_dir() / "figures"
