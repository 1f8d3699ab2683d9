"""Export of demand: the managed Jobs submitted recently, as a trace in the simulator's format.

So the PR dry-run (``allot simulate`` / the impact report) can replay real demand. The cluster
is the memory: the trace is built from the Jobs the pass observed (no extra API call), those
created within ``window_s`` before ``now``. One :class:`engine.sim.trace.Task` per Job:

- ``id`` ``namespace/name``; ``submit`` seconds after the earliest submission of the window;
  ``owner`` the first user principal (``allot.dev/submitter``), else the namespace;
- ``pods``, ``gpus_per_pod``, ``leaf`` (the budget charged; none for unallocated work),
  ``min_runtime``, ``resumable``, ``priority``, ``cluster`` from the parsed contract;
- ``runtime`` the work it needed: for a finished Job the seconds it ran (earlier runs
  ``allot.dev/run-seconds`` plus the last); for a Job still running or waiting the work is not
  known yet, so a lower bound is written (seconds run so far, at least its min runtime, at
  least 60 s) and the Job is counted as *censored* in the result.

Jobs whose contract was refused are left out (they never ran). Written with
:func:`engine.sim.trace.save_trace` (``.jsonl`` or ``.csv``).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path

from engine.k8s import marks
from engine.k8s.observe import Observation, finished_at
from engine.sim.trace import Task, Trace, save_trace


@dataclass(frozen=True)
class Export:
    """The trace written, where, how many Jobs are censored, and the epoch of ``submit`` 0."""

    trace: Trace
    path: Path | None
    censored: int
    start_epoch: float


def build_trace(obs: Observation, now: float, window_s: float) -> Export:
    """The trace of Jobs submitted in ``(now - window_s, now]`` (not written)."""
    rows: list[tuple[float, Task, bool]] = []
    for view in obs.jobs.values():
        w = view.workload
        if w.invalid is not None or w.submitted_at <= now - window_s or w.submitted_at > now:
            continue
        ann = view.annotations
        ran = _float(ann.get(marks.RUN_SECONDS))
        started = marks.parse_time(ann.get(marks.STARTED_AT))
        done = finished_at(view.obj, now)
        censored = True
        if done is not None:
            last = marks.RunRecord.parse(ann.get(marks.LAST_RUN))
            if started is not None and ann.get(marks.STATE) == "running":
                ran += max(0.0, done - started)  # finished since the last pass
            elif last is not None and ann.get(marks.STATE) == "finished":
                pass  # already folded into run-seconds when marked finished
            censored = False
            runtime = max(ran, 1.0)
        else:
            if view.kind == "running" and started is not None:
                ran += max(0.0, now - started)
            runtime = max(ran, w.contract.min_runtime_s, 60.0)
        c = w.contract
        task = Task(id=w.id, submit=w.submitted_at, pods=c.pods, gpus_per_pod=c.gpus_per_pod,
                    runtime=round(runtime, 3), owner=w.owner or view.namespace,
                    leaf=c.budget if c.allocated else None, min_runtime=c.min_runtime_s,
                    resumable=c.resumable, priority=c.priority, cluster=c.cluster)
        rows.append((w.submitted_at, task, censored))
    start = min((r[0] for r in rows), default=now)
    tasks = [replace(t, submit=round(t.submit - start, 3)) for _, t, _ in rows]
    n_censored = sum(1 for *_, c in rows if c)
    trace = Trace.of(tasks, name="cluster-export",
                     meta={"source": "allot reconcile", "start_epoch": start,
                           "censored": n_censored})
    return Export(trace, None, n_censored, start)


def export_trace(obs: Observation, now: float, window_s: float, path: str | Path) -> Export:
    """Build the trace and write it to ``path`` (atomically: a temporary file, then rename)."""
    out = build_trace(obs, now, window_s)
    target = Path(path)
    tmp = target.with_name(f".{target.name}.tmp{target.suffix}")
    save_trace(out.trace, tmp)
    tmp.replace(target)
    return Export(out.trace, target, out.censored, out.start_epoch)


def _float(text: str | None) -> float:
    try:
        return float(text) if text else 0.0
    except ValueError:
        return 0.0
