"""The ``facterlab`` command.

Sub-commands are registered by the modules that own them, imported lazily so that
``facterlab --help`` stays fast:

- ``facterlab data summary|build``  (facterlab.data.commands)
- ``facterlab run``                 (facterlab.facter.commands)
- ``facterlab reproduce``           (facterlab.reporting.reproduce)
- ``facterlab runs list|compare``   (facterlab.reporting.runs)
- ``facterlab sweep``               (facterlab.reporting.sweep)
"""

from __future__ import annotations

import argparse
import contextvars
import importlib
import sys

from facterlab import envvars
from facterlab.config import THREADS
from facterlab.params import ParameterError, parse_set_items
from facterlab.paths import ENV_STRICT_DATA
from facterlab.progress import ENV_LOG, enable_logging
from facterlab.threads import configure_cli

# (sub-command, module that defines `register(subparsers)`)
_COMMANDS = (
    ("data", "facterlab.data.commands"),
    ("run", "facterlab.facter.commands"),
    ("reproduce", "facterlab.reporting.reproduce"),
    ("runs", "facterlab.reporting.runs"),
    ("sweep", "facterlab.reporting.sweep"),
    ("simpson", "facterlab.simpson.commands"),
)


class _Parser(argparse.ArgumentParser):
    """argparse with one-line errors: ``facterlab run: error: argument --passes: invalid int value:
    'nan' (facterlab run --help lists the flags)`` instead of the usage block.  Sub-command parsers
    inherit it."""

    def error(self, message: str):
        self.exit(2, f"{self.prog}: error: {message} ({self.prog} --help lists the flags)\n")


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of the ``facterlab`` command, with every sub-command (``--help`` shows the bounds)."""
    parser = _Parser(prog="facterlab", description=__doc__.splitlines()[0])
    parser.add_argument(
        "--threads",
        default=None,
        metavar="N|auto|off",
        help=f"CPU threads for torch, {THREADS.span()} (default auto: one per usable core, with "
        "OMP_WAIT_POLICY=PASSIVE; also FACTERLAB_THREADS; off: torch's defaults)",
    )
    parser.add_argument(
        "--strict-data",
        action="store_true",
        help="a data file that differs from its pinned SHA-256 is an error, not a warning (anywhere on the "
        f"line; also {ENV_STRICT_DATA}=1)",
    )
    verbosity = parser.add_mutually_exclusive_group()
    verbosity.add_argument("-v", "--verbose", action="store_true", help="log DEBUG lines too (anywhere on the line)")
    verbosity.add_argument("-q", "--quiet", action="store_true", help="log warnings only (default INFO; FACTERLAB_LOG)")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for _name, module in _COMMANDS:
        try:
            mod = importlib.import_module(module)
        except ModuleNotFoundError as exc:  # a part not built in this checkout
            if exc.name != module:
                raise
            continue
        mod.register(sub)
    return parser


def main(argv: list | None = None) -> int:
    """Run the ``facterlab`` command with ``argv`` (default: ``sys.argv[1:]``); return its exit status.
    Ctrl-C, at any point, is one line and status 130 (:data:`INTERRUPTED`)."""
    restore_sigint()  # Ctrl-C works even when started with SIGINT ignored (a script's background job)
    seen: dict = {}
    try:
        return _main(argv, seen)
    except KeyboardInterrupt:
        print(f"facterlab{' ' + seen['command'] if seen.get('command') else ''}: {INTERRUPTED}", file=sys.stderr)
        return 130


def _main(argv: list | None, seen: dict) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    # the command's name for a Ctrl-C before the parser has read it: the first word that looks like one
    seen["command"] = next((a for a in argv if a[:1].isalpha() and a.replace("-", "").isalpha()), None)
    if "-h" not in argv and "--help" not in argv and argv:
        try:
            for line in envvars.check_environment():  # every FACTERLAB_* variable, before any work
                print(f"facterlab: warning: {line}", file=sys.stderr)
            _check_threads(argv)
            argv = configure_cli(argv)  # --threads / FACTERLAB_THREADS, applied before torch loads
        except ValueError as exc:
            print(f"facterlab: error: {exc}", file=sys.stderr)
            return 2
    try:
        argv = _configure_logging(argv)
    except ValueError as exc:  # FACTERLAB_LOG=<not a level>
        print(f"facterlab: error: {exc}", file=sys.stderr)
        return 2
    if "--strict-data" in argv:  # anywhere on the line; exported so that notebook kernels follow it
        import os

        argv = [a for a in argv if a != "--strict-data"]
        os.environ[ENV_STRICT_DATA] = "1"
    parser = build_parser()
    args = parser.parse_args(argv)
    seen["command"] = getattr(args, "command", None)
    if not getattr(args, "func", None):
        parser.print_help()
        return 2
    if getattr(args, "set", None):  # facterlab reproduce --set KEY=VALUE: a KEY given twice is an error
        try:
            parse_set_items(args.set)
        except ParameterError as exc:
            print(f"facterlab {args.command}: error: {exc}", file=sys.stderr)
            return 2
    try:  # in a copy of this context: what a command sets there (served hints' command) ends with it
        return int(contextvars.copy_context().run(args.func, args) or 0)
    except (FileNotFoundError, ValueError) as exc:
        print(f"facterlab {args.command}: error: {exc}", file=sys.stderr)
        return 1
    except OSError as exc:  # a full disk, a folder another process holds, a permission: one line
        print(f"facterlab {args.command}: error: {os_error_line(exc)}", file=sys.stderr)
        return 1


#: the line of a command stopped by Ctrl-C (rc 130)
INTERRUPTED = "interrupted (Ctrl-C); what was finished is kept: the same command goes on from there"


def restore_sigint() -> None:
    """Give SIGINT its default Python handler (KeyboardInterrupt) when this process inherited it
    ignored, as a script's background job does; the processes started later (pool workers, notebook
    kernels) then inherit the default too.  Only in the main thread (elsewhere signals cannot be set)."""
    import signal
    import threading

    if threading.current_thread() is threading.main_thread() and signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)


def os_error_line(exc: OSError) -> str:
    """One line for an OSError: the cause and the path(s) it names, with what to do for a full disk.

    >>> import errno
    >>> os_error_line(OSError(errno.ENOSPC, "No space left on device", "/r/runs/x"))
    "no space left on device: '/r/runs/x' (free some space or pass another --out-dir / FACTERLAB_CACHE; no partial run folder is kept)"
    """
    import errno

    cause = (exc.strerror or str(exc) or type(exc).__name__).rstrip(".")
    where = " -> ".join(repr(str(p)) for p in (exc.filename, exc.filename2) if p is not None)
    line = f"{cause[:1].lower()}{cause[1:]}" + (f": {where}" if where else "")
    if exc.errno in (errno.ENOSPC, errno.EDQUOT):
        line += " (free some space or pass another --out-dir / FACTERLAB_CACHE; no partial run folder is kept)"
    return line


def _check_threads(argv: list) -> None:
    """``--threads N`` / ``FACTERLAB_THREADS=N`` within :data:`facterlab.config.THREADS`."""
    import os

    from facterlab.threads import ENV_THREADS, parse_threads

    values = [(ENV_THREADS, os.environ.get(ENV_THREADS))]
    for i, a in enumerate(argv):
        if a == "--threads" and i + 1 < len(argv):
            values.append(("--threads", argv[i + 1]))
        elif a.startswith("--threads="):
            values.append(("--threads", a.split("=", 1)[1]))
    for source, raw in values:
        if raw is None or not str(raw).strip():
            continue
        n = parse_threads(raw)
        if isinstance(n, int) and not THREADS.contains(n):
            raise ValueError(f"{source} {raw}: must be {THREADS.describe()}, 'auto' or 'off' ({THREADS.why})")


def _configure_logging(argv: list) -> list:
    """Take ``-v``/``--verbose`` and ``-q``/``--quiet`` from anywhere in ``argv`` and show facterlab's
    log lines on stderr: DEBUG, WARNING, else ``$FACTERLAB_LOG``, else INFO (facterlab.progress).  A
    flag is also exported as ``FACTERLAB_LOG`` so that notebook kernels (``reproduce``) follow it."""
    import os

    pre = argparse.ArgumentParser(add_help=False, allow_abbrev=False)
    pre.add_argument("-v", "--verbose", action="store_true")
    pre.add_argument("-q", "--quiet", action="store_true")
    known, rest = pre.parse_known_args(argv)
    if known.verbose and known.quiet:
        return argv  # the full parser names the conflict
    if known.verbose or known.quiet:
        os.environ[ENV_LOG] = "DEBUG" if known.verbose else "WARNING"
    level = os.environ.get(ENV_LOG) or "INFO"
    try:
        enable_logging(level, stream="stderr")
    except ValueError as exc:
        raise ValueError(f"{ENV_LOG}={level!r}: {exc}") from None
    return rest


if __name__ == "__main__":
    sys.exit(main())
