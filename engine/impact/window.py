"""Which part of which trace an impact replay replays, and how fast (steps 1 and 2 of
:mod:`engine.impact.replay`): what to replay (:class:`ReplaySpec`), the trace from its start
day, and the window of ``days`` simulated days compressed to offer ``demand_ratio`` times the
base capacity."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from engine.errors import Problem, UserError

DEFAULT_TRACE = "philly"
RAMP_UP_SHARE = 0.01


@dataclass(frozen=True)
class ReplaySpec:
    """What to replay: trace name or path, window, mapping, demand, seed."""

    trace: str | None = None
    days: float | None = None
    start_day: float | None = None  # None: the default (see load_replay_trace)
    mapping: str | None = None
    demand_ratio: float | None = 1.1
    seed: int = 0
    parallel: bool = True  # run the two simulations in two processes
    cadence: str = "watch"  # when passes run (engine.sim.engine.SimOptions): watch or interval


def load_replay_trace(spec: ReplaySpec):
    """The trace named by ``spec`` (default :data:`DEFAULT_TRACE`), from its start day.

    ``start_day`` None: for the default trace (named or not), where ``allot simulate``'s
    embedded experiment starts; for any other trace, past its ramp-up (:func:`ramp_up_day`)."""
    from engine.sim.importers import load_trace

    trace = load_trace(spec.trace or DEFAULT_TRACE)
    start = spec.start_day
    if start is None and (spec.trace or DEFAULT_TRACE) == DEFAULT_TRACE:  # (named or not)
        start = default_start_day()
    if start is None:
        start = ramp_up_day(trace)
    if start and start * 86400.0 >= trace.span:
        raise UserError([Problem("--start-day", 0, 0, f"day {start:g} is past the last submission of "
                                 f"{trace.name} (day {trace.span / 86400.0:.1f})",
                                 "give an earlier --start-day")])
    if start:
        trace = trace.window(start * 86400.0, None).with_meta(start_day=start)
    return trace


def bundled_mapping(name: str):
    """The ``mapping.yaml`` shipped beside a bundled trace (``None`` for other traces)."""
    from engine.sim.importers import BUNDLED

    if name not in BUNDLED:
        return None
    path = BUNDLED[name][1].parent / "mapping.yaml"
    return path if path.exists() else None


def default_start_day() -> float:
    """Where the simulator's embedded default experiment starts its window of the default
    trace (``allot simulate``'s ``DEFAULT["window"]``), in days."""
    from engine.commands.siminputs import DEFAULT
    from engine.durations import parse_duration

    return parse_duration(DEFAULT["window"].split(":")[0]) / 86400.0


def ramp_up_day(trace) -> float:
    """The whole day by which ``RAMP_UP_SHARE`` of the trace's jobs had been submitted.

    Real traces often begin with days of near-silence while collection was being set up
    (Philly's first 20 days hold 0.1% of its jobs); replaying those measures nothing."""
    if not trace.tasks:
        return 0.0
    index = min(len(trace.tasks) - 1, int(RAMP_UP_SHARE * len(trace.tasks)))
    return float(int(trace.tasks[index].submit // 86400.0))


def window_for(trace, capacity_gpus: int, spec: ReplaySpec) -> tuple[Any, float]:
    """Cut and compress the trace: returns (window of the trace, compression factor ``f``).

    The window covers ``days * f`` days of trace time, which compress to ``days`` simulated
    days; ``f`` is chosen so that the window itself offers ``demand_ratio`` times
    ``capacity_gpus`` (:func:`~engine.sim.prepare.window_compression`; 1 when no ratio is
    asked). Without ``days`` (the whole trace) ``f`` is chosen on the whole rest of the trace.
    (Choosing it on the rest of the trace for a few days' window, as a first version did,
    replayed Philly's first simulated day from day 28 at 0.50x capacity instead of 1.1x, and
    its first 3 days at 0.90x.) When the trace ends earlier, the tail of the horizon has no
    submissions (a note says so).
    """
    from engine.sim.prepare import compression_for_ratio, window_compression

    factor = 1.0
    if spec.demand_ratio and spec.days:
        factor = window_compression(trace, capacity_gpus, spec.days * 86400.0, spec.demand_ratio)
    elif spec.demand_ratio:
        factor = compression_for_ratio(trace, capacity_gpus, spec.demand_ratio)
    if spec.days:
        trace = trace.window(0.0, spec.days * 86400.0 * factor)
    return trace, factor
