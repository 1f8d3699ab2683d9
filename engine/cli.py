"""The ``allot`` command line: parses arguments and dispatches to ``engine.commands.*``.

User errors (:class:`engine.errors.UserError`) are printed to stderr as
``file:line:column: message`` lines (or as JSON on stdout with ``--format json`` where a command
offers it, for bots) and exit with status 1; they never surface as a traceback.
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys
from typing import Sequence

from engine import __version__
from engine.errors import Problem, UserError, render_problems

# Subcommand modules under engine.commands, in the order ``allot --help`` lists them.
COMMANDS: tuple[str, ...] = (
    "validate",
    "tree",
    "codeowners",
    "reconcile",
    "impact",
    "simulate",
    "explain",
    "queue",
    "eta",
    "usage",
    "dashboard",
    "buildcore",
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
        return _run(args)
    except BrokenPipeError:  # e.g. `allot tree | head`: the reader left; not an error of ours
        sys.stdout = open(os.devnull, "w")  # keep the interpreter quiet while it flushes at exit
        return 0


def _run(args: argparse.Namespace) -> int:
    from engine.commands import flag_problems

    try:
        refused = flag_problems(args)  # (every flag's problem at once, before any work)
        if refused:
            raise UserError(refused)
        return int(args.func(args) or 0)
    except UserError as err:
        problems = err.problems
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
    except OSError as err:
        if err.filename is None:  # not a file the user named: a bug or the network, with its traceback
            raise
        # a file the user asked for that cannot be read or written (a path, a permission, a full disk)
        problems = (Problem(str(err.filename), 0, 0, f"cannot use this file: {err.strerror or err}",
                            "check the path and its permissions"),)
    # JSON is for bots: it goes to stdout so it can be piped; text problems go to stderr.
    if getattr(args, "format", "text") == "json":
        print(render_problems(problems, "json"))
    else:
        print(render_problems(problems, "text"), file=sys.stderr)
    return 1

if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
