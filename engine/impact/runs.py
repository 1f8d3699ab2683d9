"""Run the impact replays: one simulation reduced to plain data, several in forked processes.

:func:`outcome_of` runs one replay through the simulator (budget scheduler) and keeps only
what the comparison (:func:`engine.impact.replay.compare`) reads: the stable summary (with
why work waited: the runs collect causes, :mod:`engine.sim.causes`),
preemptions per team, jobs, horizon and capacity, a :class:`RunOutcome` small enough to
cross a process boundary. :func:`simulate_all` runs several: in one forked worker process
each when the machine has more than one core and the platform can fork (the inputs reach
the workers through the fork, never pickled), else one after the other here. Each run is
deterministic and independent, so the results are the same either way; if no worker can
be started the runs happen here. Progress is the fraction of each run's horizon simulated
so far: polled every :data:`POLL_S` seconds from a shared array the workers write, or
reported by each run here, and once more at the end (all 1.0). A run whose horizon is 0 is
done from the start.
"""

from __future__ import annotations

import multiprocessing as mp
import os
from concurrent.futures import ProcessPoolExecutor, wait
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass
from typing import Any, Callable, Mapping

from engine.model import Config
from engine.sim.trace import Trace


@dataclass(frozen=True)
class RunOutcome:
    """What the comparison needs from one simulation, as plain data (it crosses processes):
    the simulator's stable summary, preemptions per team, jobs, horizon and capacity."""

    summary: Mapping[str, Any]
    preemptions: Mapping[str, int]
    tasks: int
    horizon_s: float
    capacity_gpus: int


def outcome_of(config: Config, trace: Trace, seed: int, cadence: str = "watch",
               progress: Callable[[float, float], None] | None = None) -> RunOutcome:
    """One replay; ``progress(now, horizon)`` as the simulator reports it."""
    from engine.sim.engine import SimOptions, simulate
    from engine.sim.prepare import capacity

    result = simulate(config, trace, "budget", seed=seed,
                      options=SimOptions(cadence=cadence, causes=True), progress=progress)
    return RunOutcome(result.summary(), _preemptions_by_team(result), len(trace.tasks),
                      result.horizon, capacity(config))


Job = tuple[Config, Trace, int, str]  # (config, trace, seed, cadence)
Progress = Callable[[list[float]], None]  # the fraction of each job's horizon simulated so far
_FORKED_JOBS: list[Job] = []
_FORKED_DONE: Any = None  # a shared array of fractions, one per job, written by the workers
POLL_S = 0.5  # how often the parent reports progress while the workers run


def _fraction(now: float, end: float) -> float:
    """How much of a run whose horizon is ``end`` is simulated at ``now``, in [0, 1]."""
    return min(1.0, now / end) if end > 0 else 1.0


def _forked(index: int) -> RunOutcome:
    done = _FORKED_DONE

    def report(now: float, end: float) -> None:
        if done is not None:
            done[index] = _fraction(now, end)

    return outcome_of(*_FORKED_JOBS[index], progress=report)


def simulate_all(jobs: list[Job], parallel: bool = True,
                 progress: Progress | None = None) -> list[RunOutcome]:
    """Run every ``(config, trace, seed, cadence)``; in parallel worker processes when asked and the
    platform can fork (the inputs reach the workers through the fork, not pickling; only the
    plain :class:`RunOutcome` comes back). Results are identical either way: each run is
    deterministic and independent. ``progress`` gets the fraction of every job's horizon
    simulated so far, every :data:`POLL_S` seconds while workers run (from a shared array
    they write), or as each run here reports, and once more at the end (all 1.0)."""
    results = None
    if parallel and len(jobs) > 1 and (os.cpu_count() or 1) > 1 \
            and "fork" in mp.get_all_start_methods():
        results = _in_workers(jobs, progress)
    if results is None:  # one at a time, here
        done = [0.0] * len(jobs)
        results = []
        for i, job in enumerate(jobs):
            def report(now: float, end: float, i: int = i) -> None:
                done[i] = _fraction(now, end)
                if progress:
                    progress(list(done))

            results.append(outcome_of(*job, progress=report if progress else None))
    if progress:
        progress([1.0] * len(jobs))
    return results


def _in_workers(jobs: list[Job], progress: Progress | None) -> list[RunOutcome] | None:
    """:func:`simulate_all` in forked worker processes, one per job; None when no process can
    be started (the caller then runs the jobs itself)."""
    global _FORKED_DONE
    ctx = mp.get_context("fork")
    _FORKED_JOBS[:] = jobs
    _FORKED_DONE = ctx.Array("d", len(jobs), lock=False) if progress else None
    try:
        with ProcessPoolExecutor(len(jobs), mp_context=ctx) as pool:
            futures = [pool.submit(_forked, i) for i in range(len(jobs))]
            while wait(futures, timeout=POLL_S).not_done:
                if progress and _FORKED_DONE is not None:
                    progress(list(_FORKED_DONE))
            return [f.result() for f in futures]
    except (OSError, BrokenProcessPool):
        return None
    finally:
        _FORKED_JOBS.clear()
        _FORKED_DONE = None


def _preemptions_by_team(result) -> dict[str, int]:
    out: dict[str, int] = {}
    for rec in result.tasks.values():
        if rec.preemptions and rec.leaf:
            out[rec.leaf] = out.get(rec.leaf, 0) + rec.preemptions
    return out
