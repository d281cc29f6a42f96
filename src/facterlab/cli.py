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
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name, module in _COMMANDS:
        try:
            mod = importlib.import_module(module)
        except ModuleNotFoundError as exc:  # a part not built in this checkout
            if exc.name != module:
                raise
            continue
        mod.register(sub)
    return parser


def main(argv: list | None = None) -> int:
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
