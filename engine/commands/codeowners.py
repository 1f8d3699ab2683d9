"""``allot codeowners [PATH] [--check] [--output PATH]``: generate the CODEOWNERS file.

Writes ``.github/CODEOWNERS`` (or ``--output``; ``-`` prints it) so that each budget file is
reviewed by the owners of the subtree it holds. ``--check`` writes nothing: it exits 1 with a
unified diff when the file on disk differs from what would be generated (run it in CI).
"""

from __future__ import annotations

import argparse
import difflib
import sys
from pathlib import Path

from engine.codeowners import CODEOWNERS_PATH, generate
from engine.errors import Problem, UserError
from engine.loader import default_root, load_config
from engine.resources import EMBEDDED


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "codeowners",
        help="generate .github/CODEOWNERS from the budget owners (--check: fail when stale)",
        description="Generate CODEOWNERS mapping each budget file to the owners of its subtree, "
                    "and policies/ to the root owners.",
    )
    parser.add_argument("path", nargs="?", default=None, metavar="PATH",
                        help="directory holding budgets/ and policies/ (default: as for validate)")
    parser.add_argument("--output", default=None, metavar="PATH",
                        help=f"file to write or check (default: PATH/{CODEOWNERS_PATH}; '-' = stdout)")
    parser.add_argument("--check", action="store_true",
                        help="do not write; exit 1 with a diff when the file is out of date")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    root = Path(args.path) if args.path is not None else default_root()
    if root == EMBEDDED and args.output != "-":  # (an installed package's own copy)
        raise UserError([Problem("PATH", 0, 0, "no budgets/ and policies/ in the current directory",
                                 "run it in your policy repository, or give its PATH "
                                 "(or --output - to print the file)", "usage")])
    config = load_config(root)
    text = generate(config)
    if args.output == "-":
        if args.check:
            raise UserError([Problem("--output", 0, 0, "--check needs a file, not '-'",
                                     "drop --output or give a path", "usage")])
        sys.stdout.write(text)
        return 0
    target = Path(args.output) if args.output else root / CODEOWNERS_PATH
    if args.check:
        current = target.read_text(encoding="utf-8") if target.is_file() else ""
        if current == text:
            print(f"OK: {target} is up to date")
            return 0
        diff = difflib.unified_diff(current.splitlines(keepends=True), text.splitlines(keepends=True),
                                    fromfile=f"{target} (on disk)", tofile=f"{target} (generated)")
        sys.stdout.writelines(diff)
        print(f"{target} is out of date: run `allot codeowners` and commit the result", file=sys.stderr)
        return 1
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(text, encoding="utf-8")
    print(f"wrote {target} ({len(text.splitlines())} lines)")
    return 0
