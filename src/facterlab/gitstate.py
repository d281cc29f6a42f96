"""What git says of the work tree: the tracked files that differ from the commit, outside the paths a
run's own outputs may change.  Light (no facterlab import): used by the runs' provenance
(:mod:`facterlab.facter.provenance`) and by ``facterlab reproduce --report``'s check."""

from __future__ import annotations

import os
import shutil
import subprocess

__all__ = ["OUTPUT_PATHS", "changed_tracked_files"]

#: tracked paths a run's own outputs may change without making the code uncommitted: the report run
#: rewrites the committed ``figures/`` as it goes, and the runs it makes after the first figure are still
#: made by the commit (``facterlab reproduce``'s check uses the same rule)
OUTPUT_PATHS = ("figures/",)


def changed_tracked_files(root: os.PathLike | str, ignore: tuple = OUTPUT_PATHS) -> list | None:
    """The tracked files at ``root`` that differ from ``HEAD``, outside ``ignore`` (None: not a git work
    tree, or git cannot say).  Untracked files are not counted.  Notebooks are compared through ``cat`` as
    the clean filter: in a fresh clone nbstripout (the clone's git filter for ``*.ipynb``, ``make
    install``) would start Python once per notebook, 20 s for the 17 notebooks; with ``cat`` a notebook
    counts as changed when its file differs from the committed (stripped) one, outputs included.

    >>> import tempfile
    >>> changed_tracked_files(tempfile.mkdtemp()) is None
    True
    """
    git = shutil.which("git")
    if git is None:
        return None
    try:
        r = subprocess.run(
            [git, "-c", "filter.nbstripout.clean=cat", "status", "--porcelain", "--untracked-files=no"],
            cwd=root,
            capture_output=True,
            text=True,
            timeout=60,
        )
    except (OSError, subprocess.SubprocessError):
        return None
    if r.returncode != 0:
        return None
    changed = [ln[3:].strip() for ln in r.stdout.splitlines() if ln.strip()]
    return [c for c in changed if not c.startswith(tuple(ignore))]
