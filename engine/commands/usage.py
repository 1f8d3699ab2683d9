"""``allot usage [--subtree NODE] [--png PATH]``: delivered vs allocation for a budget owner.

Prints, for the subtree and each node in it, charged GPU-hours over the lookback window
against allocation, delivered against entitled, the last bins over time and a 24-hour burn
projection (:mod:`engine.views.usage`); ``--png`` also draws the chart.
"""

from __future__ import annotations

import argparse
import json

from engine.views.source import add_view_arguments, load_state


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "usage", help="delivered vs allocation over the window and over time, with a burn projection",
        description="For a budget subtree: charged vs allocated GPU-hours over the lookback window, "
                    "delivered vs entitled over time, and where the current burn rate leads.")
    parser.add_argument("--subtree", default=None, metavar="NODE", help="budget node (default: the root)")
    parser.add_argument("--png", default=None, metavar="PATH", help="also write a PNG chart here")
    add_view_arguments(parser)
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from engine.views.usage import usage_png, usage_report, usage_text

    state = load_state(args)
    rep = usage_report(state, args.subtree)
    if args.png:
        usage_png(rep, args.png)
    if args.format == "json":
        print(json.dumps({**rep, "png": args.png}, indent=2))
    else:
        print(usage_text(rep))
        if args.png:
            print(f"chart: {args.png}")
    return 0
