"""Provenance of a run: when, by which code, by which command and on which machine (``run.json``).

These were part of :mod:`facterlab.facter.record`, which still re-exports them.
"""

from __future__ import annotations

import os
import platform
import shutil
import subprocess
import sys
from datetime import datetime, timezone
from pathlib import Path

from facterlab.gitstate import changed_tracked_files

__all__ = ["utc_now", "code_version", "run_command", "host_line"]


def utc_now() -> str:
    """The current UTC time as ISO 8601 text to the second (run records' timestamps)."""
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


def code_version() -> str:
    """``git <describe --always>`` when the package sits in a git work tree, with ``-dirty`` when a tracked
    file outside :data:`OUTPUT_PATHS` differs from the commit (:func:`changed_tracked_files`); else the
    package version.

    Returns
    -------
    str
        The code version.
    """
    pkg = Path(__file__).resolve().parents[1]
    git = shutil.which("git")
    if git and any((p / ".git").exists() for p in (pkg, *pkg.parents)):
        try:
            out = subprocess.run([git, "describe", "--always"], cwd=pkg, capture_output=True, text=True, timeout=10)
            if out.returncode == 0 and out.stdout.strip():
                changed = changed_tracked_files(pkg)  # porcelain paths are the repository root's, from any folder
                if changed is None:
                    return f"git {out.stdout.strip()}-unknown-tree (git status failed)"
                return f"git {out.stdout.strip()}{'-dirty' if changed else ''}"
        except (OSError, subprocess.SubprocessError):
            pass
    try:
        from importlib.metadata import version

        return f"facterlab {version('facterlab')}"
    except Exception:  # noqa: BLE001 - PackageNotFoundError or a broken install: say so
        return "unknown (no git work tree, package not installed)"


def run_command() -> str:
    """The command that made a run: ``sys.argv``; in a Jupyter/papermill kernel the notebook named by
    ``$FACTERLAB_NOTEBOOK`` (or Jupyter's ``$JPY_SESSION_NAME``), else the kernel's working folder.

    Returns
    -------
    str
        The command or notebook that made the run.
    """
    argv = list(sys.argv)
    if argv and "ipykernel" in Path(argv[0]).name:
        nb = os.environ.get("FACTERLAB_NOTEBOOK") or os.environ.get("JPY_SESSION_NAME")
        return (
            f"notebook {nb}" if nb else f"notebook kernel in {os.getcwd()} (name unknown: FACTERLAB_NOTEBOOK not set)"
        )
    return " ".join(argv) if argv else "unknown"


def host_line() -> str:
    """CPU (and GPU when torch is already loaded and sees one) in one line.

    Returns
    -------
    str
        One line describing the CPU (and GPU).
    """
    cpu = platform.processor() or platform.machine()
    line = f"{platform.node()}: {cpu}, {os.cpu_count()} CPUs, {platform.system()} {platform.release()}"
    torch = sys.modules.get("torch")
    if torch is not None:
        try:
            if torch.cuda.is_available():
                line += f", GPU {torch.cuda.get_device_name(0)}"
        except Exception:  # noqa: BLE001 - a broken CUDA set-up must not fail the record
            pass
    return line
