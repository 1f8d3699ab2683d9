"""Where a view's state comes from: a simulation, a saved state file, or a live reconciler.

Every view command (explain, queue, eta, usage, dashboard) takes the same options
(:func:`add_view_arguments`) and calls :func:`load_state`:

* ``--url http://HOST:PORT``: GET ``/api/state`` from a reconciler (or from ``allot
  dashboard``), the state of its last pass;
* ``--state FILE``: a state saved from ``/api/state`` (or ``allot queue --format json --full``);
* otherwise (``--sim``, the default): run a simulation and take its state at ``--at`` (default:
  its end). The embedded default is the repository's budgets and policy (or ``--config DIR``)
  on a seeded synthetic trace of ``--days`` days; ``--trace NAME|PATH`` replays a bundled
  (``philly``, ``helios``) or documented-format trace instead.

Failures a user can cause (unreachable URL, bad file, time after the end) are
:class:`~engine.errors.UserError` s.
"""

from __future__ import annotations

import argparse
import json
import sys
import urllib.error
import urllib.request
from pathlib import Path
from typing import Callable

from engine.commands import Checked, days, read_json, refused_flags, seconds_arg, seed, tasks
from engine.commands.progress import ProgressLine, bar
from engine.durations import format_duration
from engine.errors import Problem, UserError
from engine.sim.schedulers import Scheduler
from engine.timestamps import readable_times
from engine.views import statecache
from engine.views.codec import config_to_dict
from engine.views.state import NotFound, ViewState

URL_TIMEOUT_S = 30.0
STATE_HINT = "give a file saved from /api/state or `allot queue --format json --full`"


def add_view_arguments(parser: argparse.ArgumentParser, *, formats: bool = True) -> None:
    from engine.views.simstate import DEFAULT_DAYS, DEFAULT_TASKS

    g = parser.add_argument_group("state (default: --sim)")
    g.add_argument("--sim", action="store_true",
                   help="simulate the embedded default (the repository's budgets and policy on a "
                        "seeded synthetic trace) and use its state; the default without --url/--state")
    g.add_argument("--trace", metavar="NAME|PATH", default=None,
                   help="simulate this trace instead (bundled: philly, helios; or a trace file)")
    # (Checked: a refused value is said with the other flags' problems, not alone)
    g.add_argument("--at", action=Checked, kind=seconds_arg, hint="give a time, e.g. 16h or 1d2h",
                   default=None, metavar="TIME",
                   help="simulated time of the state, seconds or e.g. 16h, 1d2h (default: the end)")
    g.add_argument("--days", action=Checked, kind=days, hint=f"give a number of days, e.g. {DEFAULT_DAYS:g}",
                   default=None, metavar="D",
                   help=f"length of the default synthetic trace in days (default: {DEFAULT_DAYS:g})")
    g.add_argument("--tasks", action=Checked, kind=tasks, hint=f"give a count, e.g. {DEFAULT_TASKS}",
                   default=None, metavar="N",
                   help=f"tasks in the default synthetic trace (default: {DEFAULT_TASKS} per "
                        f"{DEFAULT_DAYS:g} days)")
    g.add_argument("--seed", action=Checked, kind=seed, hint="give a whole number, e.g. 0", default=None,
                   help="seed of the simulation's trace and contracts (default: 0)")
    g.add_argument("--config", metavar="DIR", default=None,
                   help="budgets/ and policies/ to simulate (default: the embedded default); with "
                        "--report, where the run's configuration (or repository) is now, if not "
                        "where it was recorded")
    g.add_argument("--report", metavar="DIR", default=None,
                   help="the budget run of an `allot simulate` report in DIR, simulated again from "
                        "its run.json up to --at (seconds of the run, as in its tasks-*.csv)")
    g.add_argument("--url", metavar="URL", default=None,
                   help="a reconciler's (or allot dashboard's) address; reads URL/api/state")
    g.add_argument("--state", metavar="FILE", default=None,
                   help="a view state saved from /api/state")
    g.add_argument("--progress", action="store_true",
                   help="show the simulation's progress on stderr even when not a TTY (shown on a TTY)")
    g.add_argument("--fresh", action="store_true",
                   help="simulate the embedded default again even when an identical earlier run's "
                        "state is kept (in $ALLOT_CACHE_DIR, else ~/.cache/allot)")
    if formats:
        parser.add_argument("--format", choices=("text", "json"), default="text",
                            help="output format (default: text)")
    parser.set_defaults(flag_checks=view_flag_problems)  # (a command with more checks replaces it)


def fetch_state(url: str) -> ViewState:
    target = url.rstrip("/") + "/api/state"
    try:
        with urllib.request.urlopen(target, timeout=URL_TIMEOUT_S) as resp:
            data = json.loads(resp.read().decode())
    except (urllib.error.URLError, OSError, ValueError) as err:
        raise UserError([Problem("--url", 0, 0, f"cannot read the state from {target}: {err}",
                                 "check the address and that the reconciler runs with --metrics-port")]) from None
    return _from_dict(data, target)


def _from_dict(data, where: str) -> ViewState:
    try:
        return ViewState.from_dict(data)
    except (KeyError, TypeError, ValueError, AttributeError, IndexError) as err:
        what = f"missing {err}" if isinstance(err, KeyError) else str(err)
        raise UserError([Problem(where, 0, 0, f"not a view state: {what}",
                                 "give the JSON served at /api/state")]) from None


def job_id(state: ViewState, job: str) -> str:
    """The workload id the command's ``JOB`` names (:meth:`ViewState.one`), or its problem. A
    simulated state keeps the work that ended only as far back as the lookback window, so its
    hint says how to ask about older work."""
    try:
        return state.one(job)
    except NotFound as err:
        hint = "see `allot queue` for the ids"
        if state.source == "sim":
            hint += (f"; work that ended more than the lookback "
                     f"({format_duration(state.config.policy.lookback_s)}) "
                     f"before t={state.now:g} is not in the state: give --at a time it was queued or "
                     "running, or use --timeline")
        raise UserError([Problem("JOB", 0, 0, str(err), hint, "not-found")]) from None


def for_people(state: ViewState, text: str) -> str:
    """``text`` as a view prints it: a live cluster's clock is epoch seconds, so its times
    (``t=1796469421``) read as RFC 3339 (:func:`~engine.durations.readable_times`), as in the
    reconciler's Events; a simulation's seconds of the run stay as they are."""
    return (readable_times(text) or "") if state.source == "live" else text


def view_flag_problems(args: argparse.Namespace) -> list[Problem]:
    """The problems of the view options found before any state is read: more than one source
    of the state, a flag that would do nothing for the source given (ignored silently, ``--days
    7 --url ...`` would show the cluster's state as if it were a week's simulation), and an
    ``--at`` that no simulation reaches."""
    url, state, trace, report = (getattr(args, k, None) for k in ("url", "state", "trace", "report"))
    sources = [f for f, v in (("--sim", getattr(args, "sim", False)), ("--trace", trace),
                              ("--report", report), ("--url", url), ("--state", state)) if v]
    problems = []
    if len(sources) > 1:
        problems.append(Problem(" and ".join(sources), 0, 0, "give one source of the state, not several",
                                "the sources are --sim (the default), --trace, --report, --url and --state",
                                "usage"))
    given = [flag for flag in ("--days", "--tasks", "--seed", "--at", "--config", "--fresh")  # they shape a simulation
             if getattr(args, flag[2:], None) is not None and getattr(args, flag[2:]) is not False]
    if url or state:
        problems += [Problem(f, 0, 0, f"does not apply to {'--url' if url else '--state'}: it shapes "
                             f"a simulated state", "drop it", "usage") for f in given]
        return problems  # (no simulation: no --at to check)
    if trace:  # (a trace's simulation takes --at and --config too)
        problems += [Problem(f, 0, 0, f"does not apply to --trace {trace}: it shapes the embedded "
                             f"default's simulation", "drop it", "usage")
                     for f in given if f in ("--days", "--tasks", "--fresh")]
    elif report:  # (the run is the report's: the instant, --fresh and where its config is now)
        problems += [Problem(f, 0, 0, f"does not apply to --report {report}: the report's run "
                             f"recorded its own", "drop it", "usage")
                     for f in given if f in ("--days", "--tasks", "--seed")]
    at = getattr(args, "at", None)
    if at is not None and at <= 0:
        problems.append(Problem("--at", 0, 0, f"time {at:g} is not after the start", "give e.g. 16h"))
    elif at is not None and not (trace or report) and "--days" not in {p.file for p in refused_flags(args)}:
        from engine.views.simstate import DEFAULT_DAYS

        days = getattr(args, "days", None) or DEFAULT_DAYS
        if at > days * 86400:
            problems.append(Problem("--at", 0, 0, f"time {at:g}s is after the end of the {days:g}-day "
                                    f"simulation", "lower --at or raise --days"))
    return problems


def _check_source_flags(args: argparse.Namespace) -> None:
    """Refuse the view options' problems (:func:`view_flag_problems`), all at once."""
    problems = view_flag_problems(args)
    if problems:
        raise UserError(problems)


def load_state(args: argparse.Namespace) -> ViewState:
    _check_source_flags(args)
    if getattr(args, "url", None):
        return fetch_state(args.url)
    if getattr(args, "state", None):
        path = Path(args.state)
        return _from_dict(read_json(path, "view state", STATE_HINT), str(path))
    return _simulated(args)


class SimProgress:
    """The state's simulation as one progress line on stderr (``allot: simulating ... [###  ]
    42.0%``), when ``enabled``; the simulator calls it with (simulated time, horizon)."""

    def __init__(self, enabled: bool, what: str = "") -> None:
        self.what = what
        self.line = ProgressLine() if enabled else None  # (None: disabled, or ended)

    def __call__(self, now: float, horizon: float) -> None:
        self._say(f"simulating {self.what} {bar(min(1.0, now / horizon) if horizon > 0 else 1.0, 30)}")

    def finish(self) -> None:
        """End the line (at 100%: the simulation is over)."""
        self._say(f"simulating {self.what} {bar(1.0, 30)}", final=True)

    def kept(self, where: Path) -> None:
        """Say that no simulation runs: an identical earlier run's state is read back."""
        self._say(f"{self.what}: the state of an identical earlier run, kept in {where} "
                  f"(--fresh simulates again)", final=True)

    def _say(self, text: str, final: bool = False) -> None:
        if self.line is not None:
            self.line.draw(f"allot: {text}", final=final)
            if final:
                self.line = None


def simulated_state(args: argparse.Namespace, scheduler: Scheduler | None = None) -> ViewState:
    """The state of a simulation (module docstring): the embedded default's and a report's are
    kept on disk for the next command that asks for the same one
    (:mod:`engine.views.statecache`). ``scheduler``: one wrapping the budget scheduler, to
    record its decisions along the way (:mod:`engine.views.timeline`): then the simulation
    runs whatever is kept, and is not kept. The options are checked first, as
    :func:`load_state` checks them."""
    _check_source_flags(args)
    return _simulated(args, scheduler)


def _simulated(args: argparse.Namespace, scheduler: Scheduler | None = None) -> ViewState:
    """:func:`simulated_state` once the options are checked."""
    from engine.loader import load_config
    from engine.views.simstate import DEFAULT_DAYS, DEFAULT_TASKS, default_simulation, run_trace, state_from_sim

    at = getattr(args, "at", None)
    show = SimProgress(getattr(args, "progress", False) or sys.stderr.isatty())
    fresh = getattr(args, "fresh", False)
    if getattr(args, "report", None):
        return _report_state(args.report, at, show, fresh, getattr(args, "config", None), scheduler)
    config = load_config(args.config) if getattr(args, "config", None) else load_config()
    if getattr(args, "trace", None):
        show.what = f"trace {args.trace}"
        result = run_trace(config, args.trace, seed=args.seed or 0, horizon=at, progress=show,
                           scheduler=scheduler or "budget")
        show.finish()
        if at is not None and at > result.horizon:
            raise UserError([Problem("--at", 0, 0, f"time {at:g}s is after the end of the trace "
                                     f"({result.horizon:g}s)", "lower --at")])
        return state_from_sim(result, stopped=at is not None)
    days = args.days or DEFAULT_DAYS
    tasks = args.tasks or max(1, round(DEFAULT_TASKS * days / DEFAULT_DAYS))
    show.what = f"the embedded default ({days:g} days, {tasks:,} jobs)"
    key = statecache.state_key({"config": config_to_dict(config), "days": days, "tasks": tasks,
                                "seed": args.seed or 0, "at": at})
    return _kept_or_run(key, show, fresh, scheduler, lambda sched: state_from_sim(default_simulation(
        config, days=days, tasks=tasks, seed=args.seed or 0, horizon=at, progress=show, scheduler=sched)))


def _kept_or_run(key: str, show: SimProgress, fresh: bool, scheduler: Scheduler | None,
                 run: Callable[[str | Scheduler], ViewState]) -> ViewState:
    """The state kept under ``key`` (:mod:`engine.views.statecache`), else ``run``'s with the
    budget scheduler, kept for the next command. With ``fresh``, simulated again; with a
    recording ``scheduler`` (:mod:`engine.views.timeline`), simulated with it whatever is
    kept, and not kept."""
    if not fresh and scheduler is None:
        kept = statecache.load(key)
        if kept is not None:
            show.kept(kept[1])
            return kept[0]
    state = run(scheduler or "budget")
    show.finish()
    if scheduler is None:
        statecache.save(key, state)
    return state


def _report_state(directory: str, at: float | None, show: SimProgress, fresh: bool,
                  root: str | None, scheduler: Scheduler | None) -> ViewState:
    """The state at ``at`` of the budget run an ``allot simulate`` or ``allot impact`` report
    recorded (:mod:`engine.commands.runrecord`; ``root``: ``--config``, where its configuration
    is now if not where it was recorded), kept like the embedded default's: the record (flags
    and fingerprints of its inputs), the instant and its inputs as they are now
    (:func:`~engine.commands.runrecord.sources`) are the key: the same run wherever its
    configuration is read from (the fingerprints see to that), and never a kept state for
    inputs edited since (the replay then refuses)."""
    from engine.commands import runrecord
    from engine.views.simstate import state_from_sim

    rec = runrecord.read(directory)
    key = statecache.state_key({"report": rec, "at": at, "sources": runrecord.sources(rec, root)})
    show.what = f"the budget run of {directory}"
    return _kept_or_run(key, show, fresh, scheduler, lambda sched: state_from_sim(runrecord.replay(
        directory, at, progress=show, rec=rec, root=root, scheduler=sched), run_s=float(rec["horizon_s"])))
