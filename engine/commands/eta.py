"""``allot eta JOB``: forecast when a pending workload starts, by simulating forward.

Runs the simulator from the state's instant with the queue as it stands
(:func:`engine.views.forecast.forecast`) and prints the forecast start with the assumptions
it rests on. ``--horizon`` bounds how far ahead it looks (default 3 days).
"""

from __future__ import annotations

import argparse
import json

from engine.commands import Checked, seconds_arg
from engine.views.source import add_view_arguments, for_people, job_id, load_state


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "eta", help="forecast when a pending workload starts (simulating forward)",
        description="Forecast a pending workload's start by simulating forward from the current "
                    "state with the queue as it stands; the assumptions are printed.")
    parser.add_argument("job", metavar="JOB", help="workload id (or a unique suffix of one)")
    parser.add_argument("--horizon", action=Checked, kind=seconds_arg, hint="give a time, e.g. 3d",
                        default=3 * 86400.0, metavar="TIME",
                        help="how far ahead to simulate (default: 3d)")
    add_view_arguments(parser)
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from engine.core.explain import when
    from engine.durations import format_duration
    from engine.views.forecast import forecast

    state = load_state(args)
    wid = job_id(state, args.job)
    status = state.decision.statuses.get(wid)
    if status is None or status.state not in ("pending", "admitted"):
        what = status.state if status else state.finished.get(wid, {}).get("state", "not queued")
        doc = {"workload": wid, "state": what, "forecast": None, "now": state.now}
        if args.format == "json":
            print(json.dumps(doc, indent=2))
        else:
            print(f"{wid} is {what}: nothing to forecast.")
        return 0
    fc = forecast(state, [wid], horizon_s=args.horizon)
    start = fc.starts[wid]
    if args.format == "json":
        print(json.dumps({"workload": wid, "state": status.state, **fc.to_dict(), "notes": state.notes}, indent=2))
        return 0

    def say(line: str) -> None:
        print(for_people(state, line))

    if start is not None:
        say(f"{wid}: forecast start {when(start, state.now)}, a wait of {format_duration(round(start - state.now))} "
            f"from now (queue position {status.queue_position}).")
    elif fc.outcome[wid] == "rejected":
        say(f"{wid}: the scheduler would reject it: {status.reason}")
    else:
        say(f"{wid}: not started within the forecast horizon of {format_duration(args.horizon)} "
            f"(queue position {status.queue_position}).")
    say("Assumptions:")
    for a in fc.assumptions:
        say(f"  - {a}")
    for n in state.notes:
        say(f"note: {n}")
    return 0
