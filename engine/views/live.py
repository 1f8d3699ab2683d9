"""View state of a live cluster: a recorder fed by the reconciler after every pass.

:class:`LiveRecorder` is registered as a pass listener of :class:`engine.k8s.loop.Reconciler`
(``reconciler.listeners.append(recorder.record)``). After each pass that acted it keeps:

* the pass's inputs: the config in force and the observed snapshot, with the usage the
  decision used (each leaf's ``LeafRank.usage``), so ``decide()`` on the view state
  reproduces the pass's decision, statuses and ranks exactly;
* the ledger (``reconciler.ledger.ledger.to_dict()``) for usage over time;
* runs for the per-GPU timeline: a run opens when a workload is admitted (or is first seen
  running) and closes when it is no longer running (``preempted`` when the pass preempted it);
  Kubernetes reports GPU counts per node, not device indices, so each run is given the lowest
  free indices of its node (rows are stable while it runs);
* demand intervals (submitted .. no longer pending or running) and a short history per
  workload (start, preempt with the reason, reject).

Runs, demand and history older than ``retention_s`` (default: 7 days) are dropped. The live
state has no expected runtimes, which ``allot eta`` states as an assumption.
"""

from __future__ import annotations

import threading
from typing import Any

from engine.core.types import Admit, Preempt, Reject, Snapshot
from engine.views.state import Demand, Run, ViewState

MAX_EVENTS_PER_WORKLOAD = 20


class LiveRecorder:
    def __init__(self, retention_s: float = 7 * 86400.0):
        self.retention_s = retention_s
        self._lock = threading.Lock()
        self._state: ViewState | None = None
        self._open: dict[str, Run] = {}
        self._closed: list[Run] = []
        self._taken: dict[str, set[int]] = {}
        self._demand: dict[str, Demand] = {}
        self._demand_closed: list[Demand] = []
        self._history: dict[str, list[list]] = {}
        self._finished: dict[str, dict[str, Any]] = {}

    # ------------------------------------------------------------------ feeding

    def record(self, reconciler, report) -> None:
        """Pass listener: ``(reconciler, PassReport)``; ignores passes that did not act."""
        if not getattr(report, "acted", False) or report.decision is None or report.observation is None:
            return
        config = reconciler.policy.config
        ledger = reconciler.ledger.ledger.to_dict() if getattr(reconciler, "ledger", None) else None
        self.observe(config, report.observation.snapshot, report.decision, report.now, ledger,
                     revision=report.revision)

    def observe(self, config, snapshot: Snapshot, decision, now: float, ledger: dict | None = None,
                revision: str = "") -> None:
        """Record one pass: its config, observed snapshot, decision, time and ledger."""
        usage = {leaf: r.usage for leaf, r in decision.ranks.items()}
        snap = Snapshot(snapshot.nodes, snapshot.running, snapshot.pending, usage)
        weights = {c.name: config.policy.billing_weight(c.gpu_type) for c in config.policy.clusters}
        cluster_of = {n.name: n.cluster for n in snapshot.nodes}
        with self._lock:
            running = {r.workload.id: r for r in snapshot.running}
            preempted = {a.workload_id: a for a in decision.actions if isinstance(a, Preempt)}
            for wid in list(self._open):
                if wid not in running or wid in preempted:
                    self._close(wid, now, wid in preempted)
            for wid, r in running.items():
                if wid not in self._open and wid not in preempted:
                    self._start(r.workload, r.placement.assignments, r.started_at, r.protected_until,
                                weights, cluster_of)
            for a in decision.actions:
                if isinstance(a, Admit):
                    w = next((x for x in snapshot.pending if x.id == a.workload_id), None)
                    if w is not None:
                        prot = now + w.contract.min_runtime_s if w.contract.allocated else now
                        self._start(w, a.placement.assignments, now, prot, weights, cluster_of)
                        self._event(a.workload_id, now, "start", a.reason)
                elif isinstance(a, Preempt):
                    self._event(a.workload_id, now, "preempt",
                                f"by {a.preemptor or 'a drain'}: {a.reason}")
                elif isinstance(a, Reject):
                    self._event(a.workload_id, now, "reject", a.reason)
                    self._finished[a.workload_id] = {"state": "rejected", "end": now, "leaf": None,
                                                     "submit": now, "first_start": None, "gpus": 0,
                                                     "preemptions": 0}
            alive = {w.id: w for w in snapshot.pending} | {r.workload.id: r.workload for r in snapshot.running}
            for wid, w in alive.items():
                # (a Job whose contract was refused asks for nothing: its contract is a placeholder)
                if wid not in self._demand and w.invalid is None:
                    leaf = w.contract.budget if w.contract.allocated else None
                    self._demand[wid] = Demand(wid, leaf, w.submitted_at, None, w.contract.gpus)
            for wid in [k for k in self._demand if k not in alive]:
                d = self._demand.pop(wid)
                self._demand_closed.append(Demand(d.workload, d.leaf, d.start, now, d.gpus))
                if wid not in self._finished:
                    self._finished[wid] = {"state": "done", "end": now, "leaf": d.leaf, "submit": d.start,
                                           "first_start": None, "gpus": d.gpus, "preemptions": sum(
                                               1 for e in self._history.get(wid, []) if e[1] == "preempt")}
            self._trim(now)
            self._state = ViewState(
                source="live", now=now, config=config, snapshot=snap, ledger=ledger,
                runs=self._closed + list(self._open.values()),
                demand=self._demand_closed + list(self._demand.values()),
                history={k: list(v) for k, v in self._history.items()}, expected={},
                finished=dict(self._finished),
                notes=[f"live state of the reconciler's pass at t={now:.0f}"
                       + (f", policy revision {revision}" if revision else "")],
                meta={"revision": revision})

    def state(self) -> ViewState | None:
        """The state of the last pass (None before the first): the dashboard's provider."""
        with self._lock:
            return self._state

    def app(self, method: str, path: str, query: str):
        """The dashboard mounted on this recorder's state (for the reconciler's HTTP server)."""
        from engine.dashboard.app import handle

        return handle(method, path, query, self.state)

    # ------------------------------------------------------------------ internals

    def _start(self, w, assignments, start: float, protected: float, weights, cluster_of) -> None:
        gpus = []
        for node, count in assignments:
            taken = self._taken.setdefault(node, set())
            idx: list[int] = []
            g = 0
            while len(idx) < count:
                if g not in taken:
                    idx.append(g)
                    taken.add(g)
                g += 1
            gpus.append((node, tuple(idx)))
        weight = weights.get(cluster_of.get(assignments[0][0], ""), 1.0) if assignments else 1.0
        leaf = w.contract.budget if w.contract.allocated else None
        self._open[w.id] = Run(w.id, leaf, start, None, tuple(gpus), w.contract.allocated, False,
                               protected, weight)

    def _close(self, wid: str, now: float, preempted: bool) -> None:
        r = self._open.pop(wid)
        for node, idx in r.gpus:
            self._taken.get(node, set()).difference_update(idx)
        self._closed.append(Run(r.workload, r.leaf, r.start, now, r.gpus, r.allocated, preempted,
                                r.protected_until, r.weight))

    def _event(self, wid: str, t: float, kind: str, detail: str) -> None:
        events = self._history.setdefault(wid, [])
        events.append([t, kind, detail])
        del events[:-MAX_EVENTS_PER_WORKLOAD]

    def _trim(self, now: float) -> None:
        cut = now - self.retention_s
        self._closed = [r for r in self._closed if r.end is None or r.end >= cut]
        self._demand_closed = [d for d in self._demand_closed if d.end is None or d.end >= cut]
        self._finished = {k: v for k, v in self._finished.items() if v["end"] >= cut}
        live = set(self._open) | set(self._demand)
        self._history = {k: v for k, v in self._history.items() if k in live or k in self._finished}
