"""A cache file that does not read is named, moved aside and rebuilt (issue 44).

Every cache (the SQLite LLM and embedding caches, a sweep's shards, an interactions entry) calls
:func:`move_aside` when it finds its file unreadable: the file goes to ``<file>.corrupt-<UTC time>``
(kept for a post-mortem, never read again), one warning line names it and says what was lost, and the
caller rebuilds what it needs.  Light: standard library only.

>>> is_corrupt(__import__("sqlite3").DatabaseError("file is not a database"))
True
>>> is_corrupt(__import__("sqlite3").OperationalError("database is locked"))
False
"""

from __future__ import annotations

import logging
import os
import sqlite3
import time
from pathlib import Path

__all__ = ["move_aside", "is_corrupt", "CORRUPT_INFIX"]

log = logging.getLogger(__name__)

#: a file moved aside is named ``<name>.corrupt-<UTC time>``
CORRUPT_INFIX = ".corrupt-"
#: SQLite's primary result codes of an unreadable file: SQLITE_CORRUPT, SQLITE_NOTADB
_CORRUPT_CODES = (11, 26)
_CORRUPT_TEXT = ("malformed", "not a database", "corrupt")
#: the files SQLite keeps beside a database
_SQLITE_COMPANIONS = ("-wal", "-shm", "-journal")


def is_corrupt(exc: BaseException) -> bool:
    """Whether the SQLite error ``exc`` says that the file's content is unreadable (a damaged or foreign
    file), as opposed to a busy, locked, full or read-only one."""
    if not isinstance(exc, sqlite3.DatabaseError):
        return False
    code = getattr(exc, "sqlite_errorcode", None)
    if code is not None:
        return (code & 0xFF) in _CORRUPT_CODES
    return not isinstance(exc, sqlite3.OperationalError) and any(t in str(exc).lower() for t in _CORRUPT_TEXT)


def move_aside(path: os.PathLike | str, what: str, reason: BaseException | str, lost: str) -> Path | None:
    """Move the unreadable ``path`` (a file or a folder) to ``<path>.corrupt-<UTC time>``, with SQLite's
    ``-wal``/``-journal`` companions beside it (a ``-shm`` file is only an index: removed), and log one
    warning: ``<what> <path> is unreadable (<reason>): moved aside to <name>; <lost>``.  Returns the new
    path, or None when ``path`` was already gone (another process moved it first)."""
    path = Path(path)
    stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
    dest = path.with_name(f"{path.name}{CORRUPT_INFIX}{stamp}")
    n = 1
    while dest.exists():
        n += 1
        dest = path.with_name(f"{path.name}{CORRUPT_INFIX}{stamp}-{n}")
    try:
        os.replace(path, dest)
    except FileNotFoundError:
        return None
    for suffix in _SQLITE_COMPANIONS:
        companion = Path(f"{path}{suffix}")
        try:
            if suffix == "-shm":
                companion.unlink()
            else:
                os.replace(companion, f"{dest}{suffix}")
        except FileNotFoundError:
            pass
    why = (
        reason
        if isinstance(reason, str)
        else f"{type(reason).__name__}: {str(reason).splitlines()[0] if str(reason) else ''}"
    )
    log.warning("%s %s is unreadable (%s): moved aside to %s; %s", what, path, why, dest.name, lost)
    return dest
