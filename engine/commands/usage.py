"""``allot usage [--subtree NODE] [--png PATH]``: delivered vs allocation for a budget owner.

Prints, for the subtree and each node in it, charged GPU-hours over the lookback window
against allocation, delivered against entitled, the last bins over time and a 24-hour burn
projection (:mod:`engine.views.usage`); ``--png`` also draws the chart.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from engine.commands import output_dir
from engine.errors import Problem, UserError
from engine.views.source import add_view_arguments, load_state, view_flag_problems


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "usage", help="delivered vs allocation over the window and over time, with a burn projection",
        description="For a budget subtree: charged vs allocated GPU-hours over the lookback window, "
                    "delivered vs entitled over time, and where the current burn rate leads.")
    parser.add_argument("--subtree", default=None, metavar="NODE", help="budget node (default: the root)")
    parser.add_argument("--png", default=None, metavar="PATH", help="also write a PNG chart here")
    add_view_arguments(parser)
    parser.set_defaults(func=run, flag_checks=flag_problems)


def flag_problems(args: argparse.Namespace) -> list[Problem]:
    """The view options' problems and ``--png``'s, all found before any state is read."""
    problems = view_flag_problems(args)
    if args.png:
        try:
            png_path(args.png)
        except UserError as err:
            problems += err.problems
    return problems


def run(args: argparse.Namespace) -> int:
    from engine.views.usage import usage_png, usage_report, usage_text

    png = png_path(args.png) if args.png else None  # (checked before any simulation)
    state = load_state(args)
    rep = usage_report(state, args.subtree)
    if png:
        usage_png(rep, png)
    if args.format == "json":
        print(json.dumps({**rep, "png": png}, indent=2))
    else:
        print(usage_text(rep))
        if png:
            print(f"chart: {png}")
    return 0


def png_path(path: str) -> str:
    """Where ``--png PATH`` writes: ``PATH``, with ``.png`` added when it has no suffix;
    another suffix, or a directory where the file would go, is refused."""
    out = Path(path)
    if out.suffix == "" and not out.is_dir():
        out = out.with_name(out.name + ".png")
    if out.is_dir() or out.suffix.lower() != ".png":
        raise UserError([Problem("--png", 0, 0, f"{path!r} is not a .png file name",
                                 "give a file name ending in .png, e.g. --png usage.png", "usage")])
    output_dir("--png", out.parent)
    return str(out)
