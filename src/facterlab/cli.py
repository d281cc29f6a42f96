"""The ``facterlab`` command.

Sub-commands are registered by the modules that own them, imported lazily so that
``facterlab --help`` stays fast:

- ``facterlab data summary|build``  (facterlab.data.commands)
- ``facterlab run``                 (facterlab.facter.commands)
- ``facterlab reproduce``           (facterlab.reporting.reproduce)
- ``facterlab runs list|compare``   (facterlab.reporting.runs)
"""

from __future__ import annotations

import argparse
import importlib
import sys

from facterlab.progress import ENV_LOG, enable_logging
from facterlab.threads import configure_cli

# (sub-command, module that defines `register(subparsers)`)
_COMMANDS = (
    ("data", "facterlab.data.commands"),
    ("run", "facterlab.facter.commands"),
    ("reproduce", "facterlab.reporting.reproduce"),
    ("runs", "facterlab.reporting.runs"),
)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="facterlab", description=__doc__.splitlines()[0])
    parser.add_argument(
        "--threads",
        default=None,
        metavar="N|auto|off",
        help="CPU threads for torch (default auto: one per usable core, with "
        "OMP_WAIT_POLICY=PASSIVE; also FACTERLAB_THREADS; off: torch's defaults)",
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
    argv = list(sys.argv[1:] if argv is None else argv)
    if "-h" not in argv and "--help" not in argv and argv:
        try:
            argv = configure_cli(argv)  # --threads / FACTERLAB_THREADS, applied before torch loads
        except ValueError as exc:
            print(f"facterlab: error: {exc}", file=sys.stderr)
            return 2
    try:
        argv = _configure_logging(argv)
    except ValueError as exc:  # FACTERLAB_LOG=<not a level>
        print(f"facterlab: error: {exc}", file=sys.stderr)
        return 2
    parser = build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "func", None):
        parser.print_help()
        return 2
    try:
        return int(args.func(args) or 0)
    except (FileNotFoundError, ValueError) as exc:
        print(f"facterlab {args.command}: error: {exc}", file=sys.stderr)
        return 1


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
