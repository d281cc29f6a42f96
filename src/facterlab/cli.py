"""The ``facterlab`` command.

Sub-commands are registered by the modules that own them, imported lazily so that
``facterlab --help`` stays fast:

- ``facterlab data summary|build``  (facterlab.data.commands)
- ``facterlab run``                 (facterlab.facter.commands)
- ``facterlab reproduce``           (facterlab.reporting.reproduce)
"""

from __future__ import annotations

import argparse
import importlib
import sys

# (sub-command, module that defines `register(subparsers)`)
_COMMANDS = (
    ("data", "facterlab.data.commands"),
    ("run", "facterlab.facter.commands"),
    ("reproduce", "facterlab.reporting.reproduce"),
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
            from facterlab.threads import configure_cli

            argv = configure_cli(argv)  # --threads / FACTERLAB_THREADS, applied before torch loads
        except ValueError as exc:
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


if __name__ == "__main__":
    sys.exit(main())
