"""The discrete-event loop: jump between schedulable moments, decide, apply, charge.

Moments are submissions, completions, node failures and repairs (and, for some cadences,
min-runtime expiries). All events at one instant are applied first, then the scheduler runs
for that instant if one of them could change its decision: a submission or failure always; a
completion or repair only while work is pending (or an unhealthy node still holds work).
When a pass runs is the *cadence* (:class:`SimOptions`):

* ``watch`` (default) mirrors the reconciler (``engine.k8s.loop``): a watch event (a Job
  created or finished, a node condition changed) wakes it at once, so a pass runs at the
  instant of every such event, same-instant events coalesced into one pass; a pass that
  preempted work is followed by another at once (the reconciler's own suspensions wake it,
  and a requeued workload is only pending in the next snapshot); and a resync pass runs
  ``policy.scheduling_interval_s`` after the last pass while work is pending or a node drains
  (ranks move as usage accrues; a min-runtime expiry is no watch event, so it is seen there).
* ``interval``: passes only on the ``scheduling_interval_s`` grid, when something happened
  since the last one (a reconciler without watches): measures what the grid costs.
* ``event``: ``watch`` plus a pass at every min-runtime expiry while work is pending.

Between moments nothing is evaluated, so a quiet week costs nothing.

Each decision is applied as the reconciler applies it (:mod:`engine.sim.apply`): preemptions
first, then admissions (a run on loan as unallocated work), rejections, cordons.

Charging: the ledger is charged per leaf with the billing-weighted GPUs of its *allocated*
running work, as piecewise-constant rates (:mod:`engine.sim.charging`); unallocated work is
never charged.

Incremental state: the snapshot's node, running and pending tuples are rebuilt only when they
changed, and only those; pending work is presented oldest first (by submission time, then
id), a requeued workload put back in its place by binary search (:mod:`engine.sim.queue`);
draining is tracked per unhealthy node. Idle GPU-time by cause is metered as the loop goes
(:mod:`engine.sim.idle`).

Determinism: the heap orders equal times by kind then by a sequence number; nothing depends on
hashing or wall time except the reported ``wall_s``.

Memory: a long run builds a large, long-lived heap (tasks, segments, the event log) that the
cyclic garbage collector rescans whole at every full collection, half a second each late in
the synthetic month, and a pass makes thousands of short-lived objects, which set off a young
collection every few passes. Neither a decision nor this loop builds reference cycles (their
objects are freed by reference counting: ``tests/core/test_core_no_cycles.py``), so those
collections find nothing to free. The run therefore turns automatic collection off
(:func:`_collector_between_passes`) and collects the young generations itself every
:data:`COLLECT_EVERY` passes, between two passes, when almost nothing short-lived is alive: a
cycle made anyway is still freed soon, at a fraction of the cost (about 1.6 s of the 60-s
synthetic month before). Results never depend on the collector.
"""

from __future__ import annotations

import gc
import heapq
import math
import time as _time
from contextlib import contextmanager
from typing import Callable, Iterator

from engine.core.queue import shape_of
from engine.core.types import NodeState, Running, Snapshot, Workload
from engine.model import Config
from engine.sim.apply import (COMPLETE, EXPIRE, FAIL, PASS, REPAIR, SUBMIT, Applier,
                              TaskRun, workload_of)
from engine.sim.causes import WaitCauses
from engine.sim.charging import Charges
from engine.sim.idle import IdleMeter
from engine.sim.options import SimOptions
from engine.sim.prepare import horizon_of
from engine.sim.queue import PendingQueue
from engine.sim.result import Segment, SimResult, TaskRecord
from engine.sim.schedulers import Scheduler, get_scheduler
from engine.sim.trace import Task, Trace

ProgressFn = Callable[[float, float], None]
MAX_FOLLOWUPS = 8  # follow-up passes at one instant (a preemption chain always ends sooner)


def build_nodes(config: Config) -> list[NodeState]:
    out = []
    for c in config.policy.clusters:
        for i in range(c.nodes):
            out.append(NodeState(name=c.node_name(i), cluster=c.name, gpus=c.gpus_per_node,
                                 domain=f"{c.name}-d{i // max(1, c.nodes_per_domain):03d}"))
    return out


def simulate(config: Config, trace: Trace, scheduler: str | Scheduler = "budget", *,
             seed: int = 0, horizon: float | None = None, options: SimOptions = SimOptions(),
             progress: ProgressFn | None = None) -> SimResult:
    """Run ``trace`` (prepared: every task has a contract) under ``scheduler`` until ``horizon``
    (default: the trace's horizon). ``seed`` is recorded; the loop itself draws nothing."""
    return _Sim(config, trace, get_scheduler(scheduler), seed, horizon, options, progress).run()


class _Sim(Applier):
    def __init__(self, config: Config, trace: Trace, sched: Scheduler, seed: int,
                 horizon: float | None, options: SimOptions, progress: ProgressFn | None):
        self.config, self.trace, self.sched, self.opt = config, trace, sched, options
        self.seed, self.progress = seed, progress
        self.horizon = float(horizon if horizon is not None else horizon_of(trace))
        pol = config.policy
        self.interval = pol.scheduling_interval_s
        self.nodes: dict[str, NodeState] = {n.name: n for n in build_nodes(config)}
        self.free: dict[str, list[int]] = {n: list(range(s.gpus)) for n, s in self.nodes.items()}
        self.down: set[str] = set()  # unhealthy nodes
        group = {n: (f"{s.cluster}/{s.domain}" if pol.gang_in_one_domain else s.cluster)
                 for n, s in self.nodes.items()}
        self.meter = IdleMeter({n: s.cluster for n, s in self.nodes.items()}, group,
                               {n: s.gpus for n, s in self.nodes.items()})
        self.weight = {c.name: pol.billing_weight(c.gpu_type) for c in pol.clusters}
        self.charges = Charges(config.tree.leaves(), pol.lookback_s)
        self.heap: list[tuple[float, int, int, str, int]] = []
        self.nseq = 0
        self.tasks: dict[str, TaskRun] = {}
        self.pending = PendingQueue()
        self.running: dict[str, Running] = {}
        self.cache_nodes: tuple[NodeState, ...] | None = None
        self.cache_running: tuple[Running, ...] | None = None
        self.cache_pending: tuple[Workload, ...] | None = None
        self.segments: list[Segment] = []
        self.events: list[tuple[float, str, str, str]] = []  # SimResult.event_log
        self.fail_log: dict[str, list] = {}
        self.repair_s: dict[tuple[str, float], float] = {}  # (node, failure time) -> repair time
        self.marked: set[str] = set()
        self.passes: set[float] = set()
        self.resync_token = 0
        self.last_pass = -math.inf
        self.at_instant = 0  # passes run at the current instant
        self.dirty = False  # something changed since the last pass
        self.decide_calls = 0
        self.decide_s = 0.0
        self.nevents = 0
        # a warm-up (engine.sim.prepare.cut): metrics cover [measure_from, horizon]
        self.measure_from = min(max(0.0, float(trace.meta.get("measure_from", 0.0))), self.horizon)
        self.measuring = False
        self.charged_before: dict[str, float] = {}
        self.preempt_log: list[tuple[float, float, bool]] = []  # (time, GPU-s lost, charged run)
        self.truncated = False  # stopped by SimOptions.wall_limit_s
        self.causes = (WaitCauses(self.measure_from, options.causes_every_s or self.interval)
                       if options.causes else None)

    # ------------------------------------------------------------------ events

    def push(self, t: float, kind: int, key: str = "", seq: int = 0) -> None:
        self.nseq += 1
        heapq.heappush(self.heap, (t, kind, self.nseq, key, seq))

    def log(self, t: float, kind: str, subject: str, detail: str = "") -> None:
        self.events.append((t, kind, subject, detail))

    def run(self) -> SimResult:
        with _collector_between_passes():
            return self._run()

    def _run(self) -> SimResult:
        wall0 = _time.perf_counter()
        for task in self.trace.tasks:
            if task.submit < self.horizon:
                self.push(task.submit, SUBMIT, task.id)
        for f in self.trace.failures:
            if f.time < self.horizon and f.node in self.nodes:
                self.push(f.time, FAIL, f.node)
                self.repair_s[(f.node, f.time)] = f.repair_s  # (each failure its own)
        by_id = {t.id: t for t in self.trace.tasks}
        heap = self.heap
        meter = self.meter
        report_every = 2000
        limit = self.opt.wall_limit_s
        while heap and heap[0][0] < self.horizon:
            now = heap[0][0]
            if not self.measuring and now >= self.measure_from:
                self.start_measuring()
            meter.advance(now)
            passed = False
            self.at_instant = 0
            while heap and heap[0][0] == now:
                _, kind, _, key, seq = heapq.heappop(heap)
                self.nevents += 1
                if kind == PASS:
                    self.passes.discard(now)
                    if key == "resync" and seq != self.resync_token:
                        continue  # a later pass superseded this resync
                    if self.last_pass == now and not self.dirty:
                        continue  # nothing changed since this instant's pass
                    self.decide(now)
                    passed = True
                    if self.decide_calls % COLLECT_EVERY == 0:  # (the pass's objects are freed)
                        gc.collect(1)  # (the young generations: see the module docstring)
                elif self.handle(now, kind, key, seq, by_id):
                    self.dirty = True
                    self.request_pass(now)
            meter.classify(after_pass=passed)
            if self.progress and self.nevents >= report_every:
                report_every = self.nevents + 2000
                self.progress(now, self.horizon)
            if limit is not None and _time.perf_counter() - wall0 > limit:
                nxt = heap[0][0] if heap else self.horizon
                if nxt < self.horizon:
                    self.horizon, self.truncated = nxt, True
                    self.measure_from = min(self.measure_from, nxt)
                    if self.causes is not None:
                        self.causes.measure_from = self.measure_from
                break
        if not self.measuring:
            self.start_measuring()
        meter.advance(self.horizon)
        self.charges.charge_until(self.horizon)
        if self.causes is not None:
            self.causes.until(self.horizon)
        for st in self.tasks.values():
            if st.state == "running":
                self.close(st, self.horizon, preempted=False, horizon=True)
            elif st.state == "pending":
                st.queued += self.horizon - st.queued_since
        if self.progress:
            self.progress(self.horizon, self.horizon)
        return self.result(_time.perf_counter() - wall0)

    def start_measuring(self) -> None:
        """The warm-up ends: idle accounting restarts and charges so far are set aside."""
        w = self.measure_from
        self.meter.advance(w)
        self.meter.reset()
        self.charged_before = self.charges.totals_at(w)
        self.measuring = True

    def handle(self, now: float, kind: int, key: str, seq: int, by_id: dict[str, Task]) -> bool:
        """Apply one event; return True when it may change the scheduler's decision."""
        if kind == SUBMIT:
            task = by_id[key]
            wl = workload_of(task)
            rate = 0.0
            self.tasks[key] = TaskRun(task, wl, rate)
            self.pending.submit(wl)
            self.meter.add_pending(shape_of(wl.contract))
            self.cache_pending = None
            self.log(now, "submit", key)
            return True
        if kind == COMPLETE:
            st = self.tasks[key]
            if st.state != "running" or st.seq != seq:
                return False
            self.close(st, now, preempted=False)
            st.state, st.end, st.remaining = "done", now, 0.0
            self.log(now, "complete", key)
            return bool(self.pending) or self.draining()
        if kind == EXPIRE:
            st = self.tasks[key]
            if st.state != "running" or st.seq != seq:
                return False
            return bool(self.pending) or any(not self.nodes[n].healthy for n, _ in st.placed)
        if kind == FAIL:
            node = self.nodes[key]
            if node.healthy:
                self.nodes[key] = NodeState(node.name, node.cluster, node.gpus, node.domain,
                                            healthy=False, cordoned=node.cordoned)
                self.cache_nodes = None
                self.down.add(key)
                self.meter.set_health(key, False, 0)
                self.fail_log.setdefault(key, []).append([now, None, None])
                self.log(now, "fail", key)
                self.maybe_repair(key, now)
            return True
        if kind == REPAIR:
            node = self.nodes[key]
            self.nodes[key] = NodeState(node.name, node.cluster, node.gpus, node.domain)
            self.cache_nodes = None
            self.down.discard(key)
            self.meter.set_health(key, True, len(self.free[key]))
            self.fail_log[key][-1][2] = now
            self.marked.discard(key)
            self.log(now, "repair", key)
            return bool(self.pending)
        raise AssertionError(kind)

    def draining(self) -> bool:
        """Does an unhealthy node still hold work?"""
        return any(len(self.free[name]) < self.nodes[name].gpus for name in self.down)

    def maybe_repair(self, name: str, now: float) -> None:
        node = self.nodes[name]
        if not node.healthy and len(self.free[name]) == node.gpus and self.fail_log[name][-1][1] is None:
            failed_at = self.fail_log[name][-1][0]
            self.fail_log[name][-1][1] = now
            self.push(now + self.repair_s.get((name, failed_at), 0.0), REPAIR, name)

    # ------------------------------------------------------------------ deciding

    def snapshot(self, now: float) -> Snapshot:
        if self.cache_nodes is None:
            self.cache_nodes = tuple(self.nodes.values())
        if self.cache_running is None:
            self.cache_running = tuple(self.running.values())
        if self.cache_pending is None:
            self.cache_pending = self.pending.items()
        usage = self.charges.usage(now) if self.sched.uses_usage else {}
        return Snapshot(self.cache_nodes, self.cache_running, self.cache_pending, usage)

    def decide(self, now: float) -> None:
        self.last_pass = now
        self.dirty = False
        self.at_instant += 1
        snap = self.snapshot(now)
        t0 = _time.perf_counter()
        decision = self.sched.decide(snap, self.config, now)
        self.decide_s += _time.perf_counter() - t0
        self.decide_calls += 1
        requeued = self.apply(decision.actions, now)
        if self.causes is not None:
            self.causes.after_pass(now, snap.pending, decision)
        watch = self.opt.cadence != "interval"
        if requeued and watch and self.at_instant < MAX_FOLLOWUPS:
            self.dirty = True  # the requeued work is pending in the next snapshot: pass again
            self.request_pass(now)
        if (self.pending and self.sched.reevaluate) or self.draining():
            if watch:
                self.resync_token += 1
                self.push(now + self.interval, PASS, "resync", self.resync_token)
            else:
                self.request_pass(now + self.interval)

    def request_pass(self, t: float) -> None:
        """Schedule a scheduling pass at ``t`` (watch and event cadences) or the next grid point."""
        if self.opt.cadence == "interval" and self.interval > 0:
            k = math.ceil(t / self.interval - 1e-9)
            t = max(t, k * self.interval)
        if t not in self.passes:
            self.passes.add(t)
            self.push(t, PASS)

    # ------------------------------------------------------------------ result

    def result(self, wall: float) -> SimResult:
        records = {}
        for tid, st in self.tasks.items():
            t = st.task
            records[tid] = TaskRecord(tid, t.owner, t.leaf, t.klass or "small", t.gpus, t.funded,
                                      t.submit, st.first_start, st.end, st.state, st.queued,
                                      st.preemptions, st.lost, st.runs)
        fails = [(node, f[0], f[1], f[2]) for node, fl in sorted(self.fail_log.items()) for f in fl]
        fails.sort(key=lambda x: (x[1], x[0]))
        self.segments.sort(key=lambda s: (s.start, s.task, s.end))
        return SimResult(self.sched.name, self.config, self.trace, self.horizon, records,
                         self.segments, self.events, fails, self.charges.charged, self.decide_calls,
                         self.nevents, wall, self.decide_s, idle=self.meter.summary(),
                         measure_from=self.measure_from, charged_before=self.charged_before,
                         preempt_log=self.preempt_log, truncated=self.truncated,
                         waiting=self.causes.gpu_s if self.causes is not None else {},
                         options=self.opt)


COLLECT_EVERY = 1000  # passes between the run's own collections of the young generations


@contextmanager
def _collector_between_passes() -> Iterator[None]:
    """No automatic garbage collection for the duration (the run collects the young
    generations itself, module docstring); the collector's previous state is restored after.
    The switch is the process's: runs in several threads at once (no command does so) leave it
    on once the first run that found it on ends, never off for good."""
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()
