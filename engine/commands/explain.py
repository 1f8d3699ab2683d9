"""``allot explain JOB``: why a workload waits, runs or was preempted, with the numbers.

Reads the state (``--sim`` default simulation, ``--trace``/``--at``, ``--state FILE`` or a live
reconciler with ``--url``), decides again exactly as the scheduler did and prints the
statements of :func:`engine.views.explain.explain`: status, contract, the budget's Fair Tree
rank with the usage/share ratio at every level, who is ahead and why, protection, preemption,
history and what the user can change. ``JOB`` is a workload id or a unique suffix of one.
"""

from __future__ import annotations

import argparse
import json

from engine.views.source import add_view_arguments, job_id, load_state


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "explain", help="why a workload waits, runs or was preempted, with the numbers",
        description="Explain one workload's state: its budget's rank and the usage/share ratio at "
                    "each level of the budget tree against the work ahead of it, protection, "
                    "preemption, and what you can change.")
    parser.add_argument("job", metavar="JOB", help="workload id (or a unique suffix of one)")
    add_view_arguments(parser)
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from engine.views.explain import explain

    state = load_state(args)
    exp = explain(state, job_id(state, args.job))
    if args.format == "json":
        print(json.dumps({**exp.to_dict(), "now": state.now, "notes": state.notes}, indent=2))
    else:
        print(exp.text())
        for n in state.notes:
            print(f"note: {n}")
    return 0
