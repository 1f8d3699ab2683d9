"""Run the impact replays: one simulation reduced to plain data, several in forked processes.

:func:`outcome_of` runs one replay through the simulator (budget scheduler) and keeps only
what the comparison (:func:`engine.impact.replay.compare`) reads: the stable summary (with
why work waited: the runs collect causes, :mod:`engine.sim.causes`),
preemptions per team, jobs, horizon and capacity, a :class:`RunOutcome` small enough to
cross a process boundary. :func:`simulate_all` runs several: in one forked worker process
each when the machine has more than one core and the platform can fork
(:mod:`engine.sim.forked`: the inputs reach the workers through the fork, never pickled),
else one after the other here. Each run is deterministic and independent, so the results
are the same either way; if no worker can be started the runs happen here. Progress is the
fraction of each run's horizon simulated so far: polled from the workers, or reported by
each run here, and once more at the end (all 1.0). A run whose horizon is 0 is done from
the start.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Mapping

from engine.model import Config
from engine.sim.trace import Trace


# why work waited is read every 5 simulated minutes in the replays (every scheduling interval
# in ``allot simulate``): each reading costs about a quarter of a busy pass (engine.sim.causes),
# and read at every interval (then at a third of a pass) it made the 14-day, 1,024-GPU
# replay a third slower (130 s against 99 s)
CAUSES_EVERY_S = 300.0


@dataclass(frozen=True)
class RunOutcome:
    """What the comparison needs from one simulation, as plain data (it crosses processes):
    the simulator's stable summary, preemptions per team, jobs, horizon, capacity and each
    job's time queued."""

    summary: Mapping[str, Any]
    preemptions: Mapping[str, int]
    tasks: int
    horizon_s: float
    capacity_gpus: int
    # task id -> (its leaf, seconds it was queued in all): the jobs whose wait moved most
    queued: Mapping[str, tuple[str | None, float]] = field(default_factory=dict)
    # task id -> GPU-hours it ran in the measured window (funded or not; jobs that ran only):
    # what a team the head removes still got there, unfunded
    ran: Mapping[str, float] = field(default_factory=dict)


def outcome_of(config: Config, trace: Trace, seed: int, cadence: str = "watch",
               progress: Callable[[float, float], None] | None = None) -> RunOutcome:
    """One replay; ``progress(now, horizon)`` as the simulator reports it."""
    from engine.sim.engine import SimOptions, simulate
    from engine.sim.prepare import capacity

    result = simulate(config, trace, "budget", seed=seed, progress=progress,
                      options=SimOptions(cadence=cadence, causes=True, causes_every_s=CAUSES_EVERY_S))
    return RunOutcome(result.summary(), _preemptions_by_team(result), len(trace.tasks),
                      result.horizon, capacity(config),
                      {r.id: (r.leaf, r.queued_s) for r in result.tasks.values()}, _ran(result))


Job = tuple[Config, Trace, int, str]  # (config, trace, seed, cadence)
Progress = Callable[[list[float]], None]  # the fraction of each job's horizon simulated so far


def _fraction(now: float, end: float) -> float:
    """How much of a run whose horizon is ``end`` is simulated at ``now``, in [0, 1]."""
    return min(1.0, now / end) if end > 0 else 1.0


def simulate_all(jobs: list[Job], parallel: bool = True,
                 progress: Progress | None = None) -> list[RunOutcome]:
    """Run every ``(config, trace, seed, cadence)``; in parallel worker processes when asked and the
    machine allows it, else one after the other here (:func:`engine.sim.forked.run_all`: the
    inputs reach the workers through the fork, not pickling; only the plain
    :class:`RunOutcome` comes back). Results are identical either way: each run is
    deterministic and independent. ``progress`` gets the fraction of every job's horizon
    simulated so far as the runs report (polled from the workers every
    :data:`~engine.sim.forked.POLL_S` seconds; a run not started yet counts 0), and once more
    at the end (all 1.0)."""
    from engine.sim.forked import run_all

    done = [0.0] * len(jobs)

    def report(i: int, now: float, end: float) -> None:
        done[i] = _fraction(now, end)
        if progress:
            progress(list(done))

    results = run_all([_run(job) for job in jobs], report if progress else None, parallel)
    if progress:
        progress([1.0] * len(jobs))
    return results


def _run(job: Job) -> Callable[[Callable[[float, float], None]], RunOutcome]:
    """``job`` as a run for :func:`~engine.sim.forked.run_forked`, given where to report."""
    config, trace, seed, cadence = job
    return lambda report: outcome_of(config, trace, seed, cadence, progress=report)


def _ran(result) -> dict[str, float]:
    """GPU-hours each job ran inside the measured window ``[measure_from, horizon]``, the
    window every team figure of the summary covers."""
    lo, hi = result.measure_from, result.horizon
    out: dict[str, float] = {}
    for seg in result.segments:
        span = min(seg.end, hi) - max(seg.start, lo)
        if span > 0:
            out[seg.task] = out.get(seg.task, 0.0) + span * seg.gpu_count / 3600.0
    return out


def _preemptions_by_team(result) -> dict[str, int]:
    out: dict[str, int] = {}
    for rec in result.tasks.values():
        if rec.preemptions and rec.leaf:
            out[rec.leaf] = out.get(rec.leaf, 0) + rec.preemptions
    return out
