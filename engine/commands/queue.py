"""``allot queue [--cluster C] [--team NODE]``: the ranked queue and the metric that orders it.

Pending workloads in the order the scheduler considers them (:func:`engine.views.derived.queue_rows`):
budget rank (Fair Tree over charged usage in the lookback window), then priority within a
budget, then submit time; unallocated work last. ``--cluster`` keeps work that may run on that
cluster; ``--team`` keeps work charged to (or asking for) a budget in that subtree.
"""

from __future__ import annotations

import argparse
import json

from engine.errors import Problem, UserError
from engine.views.source import add_view_arguments, for_people, load_state, view_flag_problems


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "queue", help="the ranked queue with the metric that orders it",
        description="Show waiting workloads in scheduling order with each one's budget rank and "
                    "metric (usage fraction over effective share).")
    parser.add_argument("--cluster", default=None, metavar="C", help="only work that may run on cluster C")
    parser.add_argument("--team", default=None, metavar="NODE", help="only work of budget subtree NODE")
    parser.add_argument("--full", action="store_true",
                        help="with --format json: print the whole view state (for --state FILE)")
    add_view_arguments(parser)
    parser.set_defaults(func=run, flag_checks=flag_problems)


def flag_problems(args: argparse.Namespace) -> list[Problem]:
    """The view options' problems and ``--full``'s, all found before any state is read:
    ``--full`` prints the whole state as JSON, so without ``--format json``, or with a filter it
    would not apply, it would be ignored."""
    problems = view_flag_problems(args)
    if args.full and args.format != "json":
        problems.append(Problem("--full", 0, 0, "prints the whole view state as JSON: it needs --format json",
                                "add --format json (e.g. to save a state for --state FILE), or drop --full",
                                "usage"))
    for flag in ("--team", "--cluster"):
        if args.full and getattr(args, flag[2:]):
            problems.append(Problem(flag, 0, 0, "does not apply with --full: the whole view state is printed",
                                    f"drop {flag} or --full", "usage"))
    return problems


def run(args: argparse.Namespace) -> int:
    from engine.views.derived import document, queue_rows
    from engine.views.tables import queue_text

    state = load_state(args)
    problems = []
    if args.team and args.team not in state.config.tree.nodes:
        problems.append(Problem("--team", 0, 0, f"no budget node {args.team!r}", "see `allot tree`"))
    if args.cluster and args.cluster not in {n.cluster for n in state.snapshot.nodes}:
        problems.append(Problem("--cluster", 0, 0, f"no cluster {args.cluster!r}",
                                f"clusters: {', '.join(sorted({n.cluster for n in state.snapshot.nodes}))}"))
    if problems:
        raise UserError(problems)
    rows = queue_rows(state, args.cluster, args.team)
    if args.format == "json":
        doc = document(state) if args.full else {"now": state.now, "cluster": args.cluster, "team": args.team,
                                                 "order": "rank, priority, submit time; unallocated last",
                                                 "queue": rows, "notes": state.notes}
        print(json.dumps(doc, indent=None if args.full else 2))
    else:
        print(for_people(state, queue_text(state, rows, args.cluster, args.team)))
    return 0
