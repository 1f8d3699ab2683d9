"""The ``allot`` command line: parses arguments and dispatches to ``engine.commands.*``.

User errors (:class:`engine.errors.UserError`) are printed as ``file:line:column: message``
lines (or JSON with ``--format json`` where a command offers it) and exit with status 1; they
never surface as a traceback.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from typing import Sequence

from engine import __version__
from engine.errors import UserError, render_problems

# Subcommand modules under engine.commands, in the order ``allot --help`` lists them.
COMMANDS: tuple[str, ...] = (
    "validate",
    "tree",
    "codeowners",
)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="allot",
        description="Budgets of GPU time: validate policy, simulate, reconcile, explain.",
    )
    parser.add_argument("--version", action="version", version=f"allot {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name in COMMANDS:
        importlib.import_module(f"engine.commands.{name}").register(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "func", None):
        parser.print_help()
        return 2
    try:
        return int(args.func(args) or 0)
    except UserError as err:
        fmt = getattr(args, "format", "text")
        print(render_problems(err.problems, "json" if fmt == "json" else "text"), file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
