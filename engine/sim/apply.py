"""Applying a decision to the simulated cluster, as the reconciler applies it to Kubernetes.

Preemptions first (GPUs freed; a resumable task keeps its progress less ``checkpoint_loss_s``,
a non-resumable one starts over), then admissions (the placement must name healthy,
uncordoned nodes with enough free GPUs, else the scheduler is wrong and
:class:`SimulationError` is raised), rejections, cordons and drained marks. A restarted run
pays ``restart_overhead_s`` before it makes progress again; a node left empty while unhealthy
is repaired ``repair_s`` later (the loop schedules it). An admission on loan (``Admit.loan``)
runs as unallocated work for that run (:func:`engine.core.types.as_run`): not charged,
protected until its start.

:class:`Applier` is this part of the event loop (:mod:`engine.sim.engine`), as a mixin: it
changes the per-task run state (:class:`TaskRun`), the free GPUs, the running work and the
pending queue, which the loop owns and which are declared on the class.
"""

from __future__ import annotations

from typing import Callable, Sequence

from engine.core.queue import shape_of
from engine.core.types import (Action, Admit, Contract, Cordon, MarkDrained, NodeState, Preempt,
                               Reject, Running, Workload, as_run)
from engine.sim.charging import Charges
from engine.sim.idle import IdleMeter
from engine.sim.options import SimOptions
from engine.sim.queue import PendingQueue
from engine.sim.result import Segment, TaskState
from engine.sim.schedulers import Scheduler
from engine.sim.trace import Task

# event kinds of the loop (engine.sim.engine), in the order they apply at one instant
COMPLETE, FAIL, REPAIR, SUBMIT, EXPIRE, PASS = range(6)


class SimulationError(RuntimeError):
    """A scheduler returned an action the cluster cannot apply (a bug, never a user error)."""


class TaskRun:
    """A task's mutable state during a run (its current run, progress, waits)."""

    __slots__ = ("task", "wl", "remaining", "state", "seq", "start", "need", "first_start",
                 "end", "preemptions", "lost", "queued", "queued_since", "placed", "protected",
                 "runs", "rate", "allocated")

    def __init__(self, task: Task, wl: Workload, rate: float):
        self.task, self.wl, self.rate = task, wl, rate
        self.remaining = task.runtime
        self.state: TaskState = "pending"
        self.seq = 0
        self.start = 0.0
        self.need = 0.0
        self.first_start: float | None = None
        self.end: float | None = None
        self.preemptions = 0
        self.lost = 0.0
        self.queued = 0.0
        self.queued_since = task.submit
        self.placed: tuple[tuple[str, tuple[int, ...]], ...] = ()
        self.protected = 0.0
        self.allocated = False  # the current run's (a run on loan is not: Admit.loan)
        self.runs = 0


def workload_of(task: Task) -> Workload:
    contract = Contract(budget=task.leaf if task.funded else None,
                        min_runtime_s=float(task.min_runtime or 0.0),
                        resumable=bool(task.resumable), priority=task.priority,
                        gpus_per_pod=task.gpus_per_pod, pods=task.pods, cluster=task.cluster,
                        requested_budget=task.leaf,
                        note="" if task.funded else "unfunded in the trace (min runtime 0)")
    return Workload(id=task.id, contract=contract, submitted_at=task.submit, owner=task.owner)


class Applier:
    """Applies actions to the loop's state (a mixin of the event loop, which sets these)."""

    tasks: dict[str, TaskRun]
    nodes: dict[str, NodeState]
    free: dict[str, list[int]]
    running: dict[str, Running]
    pending: PendingQueue
    meter: IdleMeter
    charges: Charges
    segments: list[Segment]
    marked: set[str]
    preempt_log: list[tuple[float, float, bool]]
    weight: dict[str, float]
    sched: Scheduler
    opt: SimOptions
    cache_nodes: tuple[NodeState, ...] | None
    cache_running: tuple[Running, ...] | None
    cache_pending: tuple[Workload, ...] | None
    log: Callable[[float, str, str, str], None]
    push: Callable[[float, int, str, int], None]
    maybe_repair: Callable[[str, float], None]

    def apply(self, actions: Sequence[Action], now: float) -> bool:
        """Apply a decision's ``actions`` at ``now`` (module docstring); True when a preempted
        workload was requeued (it is pending in the next snapshot)."""
        requeued = False
        for a in actions:
            if isinstance(a, Preempt):
                self.preempt(a, now)
                requeued = requeued or a.requeue
        for a in actions:
            if isinstance(a, Admit):
                self.admit(a, now)
            elif isinstance(a, Reject):
                self.reject(a, now)
            elif isinstance(a, Cordon):
                node = self.nodes[a.node]
                if not node.cordoned:
                    self.nodes[a.node] = NodeState(node.name, node.cluster, node.gpus, node.domain,
                                                   healthy=node.healthy, cordoned=True)
                    self.cache_nodes = None
                    self.log(now, "cordon", a.node, a.reason)
            elif isinstance(a, MarkDrained):
                if a.node not in self.marked:
                    self.marked.add(a.node)
                    self.log(now, "drained", a.node, a.reason)
        return requeued

    def reject(self, a: Reject, now: float) -> None:
        st = self.tasks.get(a.workload_id)
        if st is None or st.state != "pending":
            raise SimulationError(f"{self.sched.name}: reject of non-pending {a.workload_id}")
        st.state, st.end = "rejected", now
        st.queued += now - st.queued_since
        self.pending.remove(st.wl)
        self.meter.add_pending(shape_of(st.wl.contract), -1)
        self.cache_pending = None
        self.log(now, "reject", a.workload_id, a.reason)

    def preempt(self, a: Preempt, now: float) -> None:
        st = self.tasks.get(a.workload_id)
        if st is None or st.state != "running":
            raise SimulationError(f"{self.sched.name}: preempt of non-running {a.workload_id}")
        task = st.task
        elapsed = now - st.start
        overhead = self.opt.restart_overhead_s if st.runs > 1 else 0.0
        done = min(max(0.0, elapsed - overhead), st.remaining)
        kept = max(0.0, done - self.opt.checkpoint_loss_s) if task.resumable else 0.0
        if not task.resumable:
            st.remaining = task.runtime
        else:
            st.remaining -= kept
        st.lost += (elapsed - kept) * task.gpus
        self.preempt_log.append((now, (elapsed - kept) * task.gpus, st.allocated))
        st.preemptions += 1
        self.close(st, now, preempted=True)
        self.log(now, "preempt", task.id, f"by {a.preemptor or '-'}: {a.reason}")
        if a.requeue:
            st.state, st.queued_since = "pending", now
            self.pending.requeue(st.wl)
            self.meter.add_pending(shape_of(st.wl.contract))
            self.cache_pending = None
        else:
            st.state, st.end = "killed", now
            self.log(now, "kill", task.id, a.reason)

    def close(self, st: TaskRun, now: float, preempted: bool, horizon: bool = False) -> None:
        """End the task's current run at ``now``: free its GPUs and record the segment
        (``horizon``: the run ends with the simulation, which drains no node)."""
        for node, idx in st.placed:
            free = self.free[node]
            free.extend(idx)
            free.sort()
            self.meter.set_free(node, len(free))
        if st.rate:
            self.charges.set_rate(st.task.leaf, now, -st.rate)
        self.segments.append(Segment(st.task.id, st.task.leaf, st.start, now, st.placed,
                                     st.protected, st.allocated, preempted))
        del self.running[st.task.id]
        self.cache_running = None
        st.seq += 1
        st.rate = 0.0
        if not horizon:
            for node, _ in st.placed:
                self.maybe_repair(node, now)
        st.placed = ()

    def admit(self, a: Admit, now: float) -> None:
        st = self.tasks.get(a.workload_id)
        if st is None or st.state != "pending":
            raise SimulationError(f"{self.sched.name}: admit of non-pending {a.workload_id}")
        task = st.task
        if a.placement.gpus != task.gpus:
            raise SimulationError(f"{self.sched.name}: admit {task.id} with {a.placement.gpus} GPUs, "
                                  f"it needs {task.gpus}")
        placed = []
        weight = 0.0
        for node, n in a.placement.assignments:
            ns = self.nodes.get(node)
            free = self.free.get(node)
            if ns is None or not ns.healthy or ns.cordoned or free is None or len(free) < n:
                why = ("unknown" if ns is None or free is None else "unhealthy" if not ns.healthy
                       else "cordoned" if ns.cordoned else f"has {len(free)} free")
                raise SimulationError(f"{self.sched.name}: admit {task.id} on {node} x{n}: node {why}")
            placed.append((node, tuple(free[:n])))
            del free[:n]
            self.meter.set_free(node, len(free))
            weight += n * self.weight[ns.cluster]
        self.pending.remove(st.wl)
        self.meter.add_pending(shape_of(st.wl.contract), -1)
        self.cache_pending = None
        st.queued += now - st.queued_since
        st.runs += 1
        st.state, st.start, st.placed, st.seq = "running", now, tuple(placed), st.seq + 1
        if st.first_start is None:
            st.first_start = now
        overhead = self.opt.restart_overhead_s if st.runs > 1 else 0.0
        st.need = st.remaining + overhead
        wl = as_run(st.wl, a.loan)  # on loan: unallocated for this run
        st.protected = self.sched.protect(wl, a, now)
        self.push(now + st.need, COMPLETE, task.id, st.seq)
        if now < st.protected < now + st.need and self.opt.cadence != "watch":
            self.push(st.protected, EXPIRE, task.id, st.seq)
        st.allocated = wl.contract.allocated
        st.rate = weight if st.allocated else 0.0
        if st.rate:
            self.charges.set_rate(task.leaf, now, st.rate)
        self.running[task.id] = Running(wl, a.placement, now, st.protected)
        self.cache_running = None
        self.log(now, "start", task.id, a.reason)
