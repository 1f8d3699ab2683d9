"""View state from a simulation run: the cluster as the scheduler saw it at an instant.

:func:`state_from_sim` reads a finished :class:`~engine.sim.result.SimResult` (its segments,
task records, event log and node failures) and rebuilds the snapshot the scheduling pass at
time ``at`` (default: the horizon) was given: every event before ``at``, and the events at
``at`` that the simulator applies before its pass (submissions, completions, failures), but
not the pass's own actions (its admissions, preemptions, rejections and cordons). So
``decide()`` on the state *is* the simulator's decision at ``at`` when a pass ran then (passes
run on the policy's interval grid while work waits), and the forecaster's first pass at ``at``
repeats it.

* running: segments with ``start < at < end``, or ending at ``at`` by a preemption (the pass
  preempts them), or still running at the horizon;
* pending: submitted at or before ``at``, not running then, not completed before or at ``at``
  and not rejected or killed before ``at`` (a task preempted and requeued is pending between
  its segments);
* nodes: unhealthy from a failure until its repair; cordoned once a pass before ``at`` did;
* usage: a ledger charged with every allocated segment up to ``at`` at its cluster's billing
  weight, exactly as the simulator charges.

:func:`default_simulation` is the *embedded default*: the repository's own budgets and policy
replayed over a seeded synthetic trace (:func:`engine.sim.synthetic.synthetic_trace`).
"""

from __future__ import annotations

import math
from typing import Any, Callable

from engine.core.ledger import Ledger
from engine.core.types import Placement, Running, Snapshot, as_run
from engine.model import Config
from engine.sim.apply import workload_of
from engine.sim.engine import SimOptions, build_nodes, simulate
from engine.sim.metrics import node_gpus, out_of_service
from engine.sim.result import SimResult
from engine.sim.schedulers import Scheduler
from engine.views.state import Demand, Run, ViewState

DEFAULT_DAYS = 2.0
DEFAULT_TASKS = 2400
DEFAULT_DEMAND = 2.0
HISTORY_KINDS = ("submit", "start", "preempt", "complete", "reject", "kill")


def default_simulation(config: Config | None = None, *, days: float = DEFAULT_DAYS,
                       tasks: int = DEFAULT_TASKS, demand_ratio: float = DEFAULT_DEMAND,
                       seed: int = 0, horizon: float | None = None,
                       progress: Callable[[float, float], None] | None = None,
                       scheduler: str | Scheduler = "budget") -> SimResult:
    """Run the embedded default: ``config`` (default: the repository's) on a synthetic trace
    (``progress(simulated time, horizon)``: as :func:`~engine.sim.engine.simulate` calls it;
    ``scheduler``: the budget scheduler, or one wrapping it, e.g. to record its decisions)."""
    from engine.loader import load_config
    from engine.sim.prepare import prepare_trace
    from engine.sim.synthetic import synthetic_trace

    config = config or load_config()
    trace = prepare_trace(synthetic_trace(config, days=days, tasks=tasks,
                                          demand_ratio_target=demand_ratio, seed=seed),
                          config, seed=seed)
    return simulate(config, trace, scheduler, seed=seed, horizon=horizon, progress=progress)


def run_trace(config: Config, trace_ref: str, *, seed: int = 0, horizon: float | None = None,
              demand_ratio: float | None = None,
              progress: Callable[[float, float], None] | None = None,
              scheduler: str | Scheduler = "budget") -> SimResult:
    """Load ``trace_ref`` (bundled name or file), prepare it for ``config`` and simulate it
    (``scheduler`` as for :func:`default_simulation`); refused, as ``allot simulate`` refuses
    it, when it names a cluster or node the configuration lacks."""
    from engine.sim.importers import load_trace
    from engine.sim.prepare import placed_and_prepared

    trace = placed_and_prepared(load_trace(trace_ref), config, demand_ratio_target=demand_ratio, seed=seed)
    return simulate(config, trace, scheduler, seed=seed, horizon=horizon, progress=progress)


def remaining_runtime(task, segments, opt: SimOptions) -> float:
    """Work a task still needs after its finished ``segments`` (the simulator's progress rule:
    a resumable run keeps its progress less ``checkpoint_loss_s``, a non-resumable one restarts;
    every run after the first pays ``restart_overhead_s`` first)."""
    left = task.runtime
    for i, s in enumerate(segments):
        if not s.preempted:
            continue
        overhead = opt.restart_overhead_s if i > 0 else 0.0
        done = min(max(0.0, (s.end - s.start) - overhead), left)
        left = left - max(0.0, done - opt.checkpoint_loss_s) if task.resumable else task.runtime
    return left


def state_from_sim(result: SimResult, at: float | None = None, *, keep_s: float | None = None,
                   options: SimOptions | None = None, run_s: float | None = None,
                   stopped: bool = False) -> ViewState:
    """The view state of ``result`` at time ``at`` (see the module docstring). ``keep_s``:
    how far back runs, demand and history are kept (default: the policy's lookback). For the
    state's note: ``run_s``, the whole run's length when ``result`` was simulated only up to
    the state (default: ``result``'s horizon); ``stopped``, so simulated with no such length
    known."""
    config = result.config
    if options is None:  # (the run's own costs of a preemption)
        options = result.options
    gpus = node_gpus(config)
    T = result.horizon if at is None else float(at)
    if T > result.horizon:
        raise ValueError(f"time {T} is after the simulation horizon {result.horizon}")
    keep = config.policy.lookback_s if keep_s is None else keep_s
    tasks = {t.id: t for t in result.trace.tasks}
    recs = result.tasks
    nodes = build_nodes(config)
    cluster_of = {n.name: n.cluster for n in nodes}
    weight = {c.name: config.policy.billing_weight(c.gpu_type) for c in config.policy.clusters}

    by_task: dict[str, list] = {}
    for s in result.segments:
        by_task.setdefault(s.task, []).append(s)

    def covers(s) -> bool:
        if s.start >= T:
            return False
        if T < s.end:
            return True
        return s.end == T and (s.preempted or (T == result.horizon and recs[s.task].state == "running"))

    running: list[Running] = []
    runs: list[Run] = []
    ledger = Ledger(config.tree.leaves(), config.policy.lookback_s)
    live: set[str] = set()
    expected: dict[str, float] = {}
    for tid, segs in by_task.items():
        for i, s in enumerate(segs):
            if s.start >= T:
                break
            w = weight[cluster_of[s.gpus[0][0]]] if s.gpus else 1.0
            end = None if covers(s) else min(s.end, T)
            if s.allocated and s.leaf:
                stop = T if end is None else end
                if stop > s.start:
                    ledger.charge(s.leaf, s.start, stop, s.gpu_count, w)
            if end is not None and end < T - keep:
                continue
            runs.append(Run(tid, s.leaf, s.start, end, s.gpus, s.allocated,
                            s.preempted and end is not None, s.protected_until, w))
            if end is None:
                live.add(tid)
                task = tasks[tid]
                placement = Placement(tuple(sorted((n, len(idx)) for n, idx in s.gpus)))
                # a funded task's unallocated run is on loan (as_run keeps free work as it is)
                running.append(Running(as_run(workload_of(task), not s.allocated),
                                       placement, s.start, s.protected_until))
                overhead = options.restart_overhead_s if i > 0 else 0.0
                expected[tid] = s.start + overhead + remaining_runtime(task, segs[:i], options)

    pending = []
    finished: dict[str, dict[str, Any]] = {}
    demand: list[Demand] = []
    for tid, rec in recs.items():
        if rec.submit > T:
            continue
        ended = rec.end is not None and (rec.end < T or (rec.end == T and rec.state == "done")) \
            and rec.state in ("done", "rejected", "killed")
        if not ended and tid not in live:
            task = tasks[tid]
            pending.append(workload_of(task))
            done_segs = [s for s in by_task.get(tid, []) if s.start < T and s.end <= T]
            overhead = options.restart_overhead_s if done_segs else 0.0
            expected[tid] = overhead + remaining_runtime(task, done_segs, options)
        end = rec.end if ended else None
        if end is not None:
            finished[tid] = {"state": rec.state, "end": end, "leaf": rec.leaf, "submit": rec.submit,
                             "first_start": rec.first_start, "gpus": rec.gpus,
                             "preemptions": rec.preemptions}
        if end is None or end >= T - keep:
            demand.append(Demand(tid, rec.leaf, rec.submit, end, rec.gpus))
    pending.sort(key=lambda w: (w.submitted_at, w.id))
    finished = {k: v for k, v in finished.items() if v["end"] >= T - keep}

    node_states = []
    down: dict[str, tuple[float, float]] = {}
    for node, failed, _drained, repaired in result.failures:
        if failed <= T and (repaired is None or repaired > T):
            down[node] = (failed, math.inf if repaired is None else repaired)
    cordoned = {e.subject for e in result.events
                if e.kind == "cordon" and e.time < T and e.subject in down and e.time >= down[e.subject][0]}
    for n in nodes:
        if n.name in down:
            n = type(n)(n.name, n.cluster, n.gpus, n.domain, healthy=False,
                        cordoned=n.name in cordoned)
        node_states.append(n)

    history: dict[str, list[list]] = {}
    wanted = live | {w.id for w in pending} | set(finished)
    for e in result.events:
        if e.time > T:
            break
        if e.time == T and e.kind not in ("submit", "complete"):
            continue  # the pass at T has not run yet in this state
        if e.kind in HISTORY_KINDS and e.subject in wanted:
            history.setdefault(e.subject, []).append([e.time, e.kind, e.detail])

    usage = ledger.usage(T)
    snapshot = Snapshot(tuple(node_states), tuple(sorted(running, key=lambda r: r.workload.id)),
                        tuple(pending), usage)
    return ViewState(
        source="sim", now=T, config=config, snapshot=snapshot, ledger=ledger.to_dict(),
        runs=runs, demand=demand, history=history, expected=expected, finished=finished,
        notes=[f"simulated state at t={T:.0f}s ({T / 3600:.1f} h into "
               f"{'the' if stopped and run_s is None else f'a {(run_s or result.horizon) / 3600:.1f} h'} "
               f"run of trace {result.trace.name or '(unnamed)'}, {len(result.trace.tasks)} tasks, "
               f"scheduler {result.scheduler})"],
        meta={"trace": result.trace.name, "horizon": result.horizon, "tasks": len(result.trace.tasks),
              "measure_from": result.measure_from,  # (a warm-up's end: the report's window opens)
              # nodes out of service (failure to repair, or the horizon): [node, GPUs, from, to],
              # which the report's healthy capacity leaves out (engine.sim.metrics)
              "down": [[node, gpus.get(node, 0), failed, back]
                       for node, failed, back in out_of_service(result)],
              "scheduler": result.scheduler, "expected": "exact runtimes from the trace",
              "cadence": result.options.cadence, "checkpoint_loss_s": result.options.checkpoint_loss_s,
              "restart_overhead_s": result.options.restart_overhead_s})
