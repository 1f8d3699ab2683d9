"""``allot dashboard [--port P]``: serve the dashboard on a simulation's state (or a saved one).

Serves :mod:`engine.dashboard.app` on ``http://HOST:PORT/``: the budget tree with effective
shares and usage, delivered vs entitled per team over time, the ranked queue with each
workload's metric, the per-GPU timeline of the last hours, and a search box that explains a
workload. The state is taken once at start (``--sim`` default simulation, ``--trace``/``--at``,
or ``--state FILE``); a live cluster's dashboard is served by ``allot reconcile --metrics-port``.
"""

from __future__ import annotations

import argparse
import sys
import threading

from engine.commands import Checked, port
from engine.errors import Problem, UserError
from engine.views.source import add_view_arguments, load_state
from engine.views.state import ViewState


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "dashboard", help="serve the dashboard on a simulated (or saved) state",
        description="Serve the dashboard (tree, delivered vs entitled, queue, per-GPU timeline, "
                    "explanations) on http://HOST:PORT/ until interrupted.")
    parser.add_argument("--port", action=Checked, kind=port, hint="give e.g. 8080 (0 picks a free one)",
                        default=8080, help="port (default: 8080; 0 picks a free one)")
    parser.add_argument("--host", default="127.0.0.1", help="address to bind (default: 127.0.0.1)")
    add_view_arguments(parser, formats=False)
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from engine.dashboard.app import serve

    # listen first: a port in use is reported at once, not after the state's simulation (until
    # the state is ready the page answers as a reconciler's does before its first pass)
    held: list[ViewState] = []
    try:
        server = serve(lambda: held[0] if held else None, args.port, args.host)
    except OSError as err:
        raise UserError([Problem("--port", 0, 0, f"cannot listen on {args.host}:{args.port}: "
                                 f"{err.strerror or err}", "choose another --port (0 picks a free one)")])
    try:
        print("allot dashboard: preparing the state...", file=sys.stderr, flush=True)
        state = load_state(args)
        held.append(state)
        host, port = server.server_address[:2]
        assert isinstance(host, str)  # an AF_INET socket's address names its host as a str
        print(f"allot dashboard: serving http://{host}:{port}/ (t={state.now:.0f}); Ctrl-C stops",
              file=sys.stderr, flush=True)
        threading.Event().wait()
    finally:
        server.shutdown()
    return 0
