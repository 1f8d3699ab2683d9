"""``allot explain JOB``: why a workload waits, runs or was preempted, with the numbers.

Reads the state (``--sim`` default simulation, ``--trace``/``--at``, ``--report DIR``,
``--state FILE`` or a live reconciler with ``--url``), decides again exactly as the scheduler
did and prints the statements of :func:`engine.views.explain.explain`: status, contract, the
budget's Fair Tree rank with the usage/share ratio at every level, who is ahead and why,
protection, preemption, history and what the user can change. ``JOB`` is a workload id or a
unique suffix of one. ``--timeline``: the job at every pass of a simulated run, as spans
(:mod:`engine.views.timeline`).
"""

from __future__ import annotations

import argparse
import json

from engine.errors import Problem, UserError
from engine.views.source import (add_view_arguments, for_people, job_id, load_state,
                                 view_flag_problems)


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "explain", help="why a workload waits, runs or was preempted, with the numbers",
        description="Explain one workload's state: its budget's rank and the usage/share ratio at "
                    "each level of the budget tree against the work ahead of it, protection, "
                    "preemption, and what you can change.")
    parser.add_argument("job", metavar="JOB", help="workload id (or a unique suffix of one)")
    parser.add_argument("--timeline", action="store_true",
                        help="what the scheduler said of JOB at every pass of the simulated run up "
                             "to --at, as spans of the same state, cause and nodes (a simulated "
                             "state only: not --url or --state)")
    add_view_arguments(parser)
    parser.set_defaults(func=run, flag_checks=flag_problems)


def flag_problems(args: argparse.Namespace) -> list[Problem]:
    """The view options' problems and ``--timeline``'s, all found before any state is read."""
    return view_flag_problems(args) + _timeline_problems(args)


def _timeline_problems(args: argparse.Namespace) -> list[Problem]:
    """``--timeline`` needs a simulated run: a saved or live state kept none of its passes."""
    given = [f for f in ("--url", "--state") if getattr(args, f[2:], None)]
    if not (getattr(args, "timeline", False) and given):
        return []
    return [Problem("--timeline", 0, 0, f"needs a simulated run, not {given[0]}: the passes "
                    f"before a saved or live state are not kept",
                    "give --report DIR, --trace or the embedded default", "usage")]


def run(args: argparse.Namespace) -> int:
    from engine.views.explain import explain

    if args.timeline:
        return timeline(args)
    state = load_state(args)
    exp = explain(state, job_id(state, args.job))
    if args.format == "json":
        print(json.dumps({**exp.to_dict(), "now": state.now, "notes": state.notes}, indent=2))
    else:
        for line in [exp.text(), *(f"note: {n}" for n in state.notes)]:
            print(for_people(state, line))
    return 0


def timeline(args: argparse.Namespace) -> int:
    """``--timeline`` (:mod:`engine.views.timeline`): the run's state names the job (a suffix
    resolved), then the run again with a recorder of its statuses."""
    from engine.views.source import simulated_state
    from engine.views.timeline import Recorder, text

    refused = _timeline_problems(args)
    if refused:
        raise UserError(refused)
    state = load_state(args)
    try:
        job, in_state = job_id(state, args.job), True
    except UserError:  # (not in the state at its time: it may have ended long before)
        job, in_state = args.job, False
    recorder = Recorder(job)
    simulated_state(args, scheduler=recorder.scheduler())
    if not in_state and not recorder.spans:
        raise UserError([Problem("JOB", 0, 0, f"no pass of the run up to t={state.now:g} saw a "
                                 f"workload {job!r}", "give its whole id, as in the report's "
                                 "tasks-*.csv or `allot queue --at TIME`", "not-found")])
    end = float(state.finished.get(job, {}).get(
        "end", state.now if recorder.gone_at is None else recorder.gone_at))
    if args.format == "json":
        print(json.dumps({"workload": job, "now": state.now, "end": end,
                          "spans": [s.to_dict() for s in recorder.spans], "notes": state.notes}, indent=2))
    else:
        print("\n".join(text(job, recorder.spans, end)))
        for n in state.notes:
            print(f"note: {n}")
    return 0
