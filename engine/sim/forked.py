"""Independent runs in forked worker processes, one per run, with their progress polled.

``allot simulate`` (the budget scheduler beside its baselines) and ``allot impact`` (the base
and head replays) run simulations that share nothing and are each deterministic, so on a
machine with more than one core they run side by side: :func:`run_forked` starts one forked
worker per run. The runs reach the workers through the fork (closures over configurations
and traces, which are never pickled: a configuration holds read-only mapping proxies); only
what each returns is pickled back, so it must be plain data. Progress: each run reports
``(now, end)`` as it goes into a shared array of doubles, which the parent reads every
:data:`POLL_S` seconds and hands to ``progress`` (one pair per run), and once more at the end.
``allot simulate --sweep`` has more runs than cores: it caps the workers at ``--jobs``.
:func:`run_all` runs them here instead, one after the other, where no worker can start.

It gives up, returning ``None``, where the platform cannot fork, the machine has one core,
or no worker process can be started (the caller then runs the jobs itself, with the same
results: the runs are deterministic and independent). An exception inside a run is raised
here, as it would be when run in place.
"""

from __future__ import annotations

import multiprocessing as mp
import os
from concurrent.futures import ProcessPoolExecutor, wait
from concurrent.futures.process import BrokenProcessPool
from typing import Any, Callable, Sequence, TypeVar

T = TypeVar("T")
Report = Callable[[float, float], None]  # report(now, end): how far a run is
Run = Callable[[Report], Any]  # one run, given where to report; returns plain data
Progress = Callable[[list[tuple[float, float]]], None]  # (now, end) of every run so far
POLL_S = 0.5  # how often the parent reads the workers' progress

_RUNS: list[Run] = []  # the runs of the current call, inherited by the forked workers
_DONE: Any = None  # shared doubles: now, end of run i at 2i, 2i + 1


def can_fork(runs: int) -> bool:
    """Whether :func:`run_forked` may start ``runs`` workers here: more than one run, more
    than one core, and a platform that forks."""
    return runs > 1 and (os.cpu_count() or 1) > 1 and "fork" in mp.get_all_start_methods()


def _worker(index: int) -> Any:
    done = _DONE

    def report(now: float, end: float) -> None:
        if done is not None:
            done[2 * index], done[2 * index + 1] = now, end

    return _RUNS[index](report)


def run_forked(runs: Sequence[Run], progress: Progress | None = None,
               workers: int | None = None) -> list[Any] | None:
    """Each of ``runs`` in a forked worker (module docstring); their results in order, or
    ``None`` when no worker could be started. ``workers``: at most this many at once (a run
    waiting for a worker reports ``(0, 0)``); default one per run."""
    global _DONE
    if not can_fork(len(runs)):
        return None
    ctx = mp.get_context("fork")
    _RUNS[:] = runs
    _DONE = ctx.Array("d", 2 * len(runs), lock=False) if progress else None
    try:
        with ProcessPoolExecutor(min(workers or len(runs), len(runs)), mp_context=ctx) as pool:
            futures = [pool.submit(_worker, i) for i in range(len(runs))]
            while wait(futures, timeout=POLL_S).not_done:
                if progress and _DONE is not None:
                    progress(_pairs(_DONE))
            results = [f.result() for f in futures]
        if progress and _DONE is not None:
            progress(_pairs(_DONE))
        return results
    except (OSError, BrokenProcessPool):
        return None
    finally:
        _RUNS.clear()
        _DONE = None


def run_all(runs: Sequence[Run], progress: Callable[[int, float, float], None] | None = None,
            parallel: bool = True, workers: int | None = None) -> list[Any]:
    """Every one of ``runs``, their results in order: in forked workers (:func:`run_forked`,
    at most ``workers`` at once) when ``parallel`` and the machine allows, else one after the
    other here, with the same results. ``progress(i, now, end)`` as run ``i`` reports (a run
    waiting for a worker is not reported)."""
    if parallel:
        def polled(pairs: list[tuple[float, float]]) -> None:
            assert progress is not None
            for i, (now, end) in enumerate(pairs):
                if end > 0:  # (0, 0): not started yet
                    progress(i, now, end)

        got = run_forked(runs, polled if progress else None, workers)
        if got is not None:
            return got
    return [run(_reporting(progress, i)) for i, run in enumerate(runs)]


def _reporting(progress: Callable[[int, float, float], None] | None, i: int) -> Report:
    if progress is None:
        return lambda now, end: None
    return lambda now, end: progress(i, now, end)


def _pairs(done: Any) -> list[tuple[float, float]]:
    return [(done[i], done[i + 1]) for i in range(0, len(done), 2)]
