"""``allot tree [PATH] [--rev REV] [--cluster NAME] [--format text|json]``: show the budget tree.

Each node with its share of the parent, its effective share of all GPU time (the product
down the path) and what that is in GPUs of each cluster (or of ``--cluster``), plus owners
(inner nodes) or owners and principals (leaves). See :mod:`engine.treeview`.
"""

from __future__ import annotations

import argparse
import json

from engine.commands.validate import add_source_arguments
from engine.errors import Problem, UserError
from engine.loader import load_config
from engine.treeview import tree_json, tree_table


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "tree",
        help="show the budget tree: shares, effective shares, GPUs per cluster, owners",
        description="Show the budget hierarchy with share of parent, effective share and "
                    "the equivalent GPUs of each cluster.",
    )
    add_source_arguments(parser)
    parser.add_argument("--cluster", default=None, metavar="NAME",
                        help="show GPUs of this cluster only (default: every cluster)")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    config = load_config(args.path, args.rev)
    clusters = config.policy.clusters
    if args.cluster is not None:
        names = [c.name for c in clusters]
        if args.cluster not in names:
            raise UserError([Problem("--cluster", 0, 0, f"unknown cluster {args.cluster!r}",
                                     f"choose one of {', '.join(names)}", "usage")])
        clusters = (config.policy.cluster(args.cluster),)
    if args.format == "json":
        print(json.dumps(tree_json(config, clusters), indent=2))
    else:
        print(tree_table(config, clusters))
    return 0
