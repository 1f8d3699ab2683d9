"""``allot eta``: forecast when pending workloads start by simulating forward from now.

The forecast runs the simulator (:func:`engine.sim.engine.simulate`, the same event loop and
scheduling cadence as any simulation, the same ``decide()``) from the view state's instant with
the queue as it stands. The simulator starts empty, so the current state is seeded through its
public :class:`~engine.sim.schedulers.Scheduler` interface by a wrapper (:class:`_Seeded`):

* every workload (running or pending) becomes a trace task submitted at ``now``;
* at the first pass the wrapper admits the running ones on their current GPUs, keeping their
  start time and protection end (``Running.started_at`` / ``protected_until`` are restored in
  every snapshot it hands to ``decide()``), and decides for the queue in the same pass;
* pending workloads keep their own submit times, owners and contracts (queue order);
* usage is the ledger's as it stands, decaying as the window slides, plus what the forecast
  charges (exact: ``Ledger.usage`` of the state's ledger at each instant plus the simulator's);
* every pass sees the nodes as the state has them: unhealthy and cordoned nodes take no work
  (unhealthy ones are also failed in the simulator just after the first pass and stay down),
  and GPUs of other tenants' pods (``NodeState.foreign``) stay in use.

Assumptions (printed with every forecast): no new submissions (work submitted later with a
better rank would start earlier and may delay this one); each running workload ends at its
expected end (the simulator knows exact runtimes; the reconciler does not, and then a running
workload is assumed to run until preempted); each pending workload, once started, runs for its
expected runtime (unknown: its min runtime, or the policy's default min runtime when that is 0);
no node fails or is repaired. Nodes of a live cluster are renamed to the simulator's scheme
(``{cluster}-n{index}``, grouped by topology domain).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from typing import Iterable

from engine.core.decide import decide
from engine.core.ledger import Ledger
from engine.core.types import Admit, Decision, Placement, Preempt, Reject, Running, Snapshot, as_run
from engine.durations import format_duration
from engine.model import Cluster, Config
from engine.sim.engine import SimOptions, build_nodes, simulate
from engine.sim.schedulers import Scheduler, contract_protection
from engine.sim.trace import NodeFailure, Task, Trace
from engine.views.state import ViewState

DEFAULT_HORIZON_S = 3 * 86400.0


class _Done(Exception):
    """Raised by the wrapper once every target has started (ends the simulation early)."""


@dataclass
class Forecast:
    now: float
    horizon: float
    starts: dict[str, float | None]  # target -> forecast start (None: not within the horizon)
    outcome: dict[str, str] = field(default_factory=dict)  # target -> started | rejected | waiting
    assumptions: list[str] = field(default_factory=list)
    passes: int = 0

    def to_dict(self) -> dict:
        return {"now": self.now, "horizon": self.horizon, "passes": self.passes,
                "assumptions": self.assumptions,
                "forecast": [{"workload": k, "outcome": self.outcome.get(k, "waiting"), "start": v,
                              "wait_s": None if v is None else v - self.now}
                             for k, v in self.starts.items()]}


def _node_map(state: ViewState) -> tuple[Config, dict[str, str]]:
    """A config whose simulated nodes stand for the snapshot's nodes, and the name map."""
    config = state.config
    names = [n.name for n in state.snapshot.nodes]
    if {n.name for n in build_nodes(config)} == set(names):
        return config, {n: n for n in names}
    by_cluster: dict[str, list] = {}
    for n in state.snapshot.nodes:
        by_cluster.setdefault(n.cluster, []).append(n)
    clusters, mapping = [], {}
    for name in sorted(by_cluster):
        nodes = sorted(by_cluster[name], key=lambda n: (n.domain, n.name))
        per_domain: dict[str, int] = {}
        for n in nodes:
            per_domain[n.domain] = per_domain.get(n.domain, 0) + 1
        try:
            gpu_type = config.policy.cluster(name).gpu_type
        except KeyError:
            gpu_type = "gpu"
        clusters.append(Cluster(name, gpu_type, len(nodes), max(n.gpus for n in nodes),
                                max(per_domain.values())))
        for i, n in enumerate(nodes):
            mapping[n.name] = clusters[-1].node_name(i)
    return replace(config, policy=replace(config.policy, clusters=tuple(clusters))), mapping


class _Seeded:
    """The scheduler wrapper that seeds the simulation with the view state (module docstring)."""

    def __init__(self, state: ViewState, mapping: dict[str, str], targets: set[str]):
        self.state, self.targets = state, targets
        self.mapping = mapping
        self.first = True
        self.orig = {w.id: w for w in state.snapshot.pending}
        self.seeded: dict[str, Running] = {}
        for r in state.snapshot.running:
            self.orig[r.workload.id] = r.workload
            placement = Placement(tuple(sorted((mapping[n], g) for n, g in r.placement.assignments)))
            self.seeded[r.workload.id] = replace(r, placement=placement)
        self.fresh: set[str] = set()  # seeded workloads still in their first (seeded) run
        self.base = Ledger.from_dict(state.ledger) if state.ledger else None
        self.starts: dict[str, float] = {}
        self.outcome: dict[str, str] = {}
        self.passes = 0
        # the state's nodes that are not plain healthy nodes, by simulated name
        self.marked_nodes = {mapping[n.name]: n for n in state.snapshot.nodes
                             if not n.healthy or n.cordoned or n.foreign}
        self._nodes: tuple[tuple, tuple] | None = None  # (simulator's nodes, as the state has them)

    def nodes(self, nodes: tuple) -> tuple:
        """The simulator's nodes with the state's health, cordons and other tenants' GPUs
        (module docstring); the tuple kept while the simulator's is the same."""
        if self._nodes is not None and self._nodes[0] is nodes:
            return self._nodes[1]
        out = []
        for n in nodes:
            s = self.marked_nodes.get(n.name)
            if s is not None:
                n = replace(n, healthy=n.healthy and s.healthy, cordoned=n.cordoned or s.cordoned,
                            foreign=s.foreign)
            out.append(n)
        self._nodes = (nodes, tuple(out))
        return self._nodes[1]

    def usage(self, snap: Snapshot, now: float) -> dict[str, float]:
        base = self.base.usage(now) if self.base is not None else dict(self.state.snapshot.usage)
        out = dict(base)
        for k, v in snap.usage.items():
            out[k] = out.get(k, 0.0) + v
        return out

    def restore(self, r: Running) -> Running:
        wid = r.workload.id
        if wid in self.fresh:
            s = self.seeded[wid]
            return Running(self.orig[wid], r.placement, s.started_at, s.protected_until)
        # a run on loan (Admit.loan) stays unallocated, as the simulator started it (as_run
        # leaves work that is unallocated anyway as it is)
        w = as_run(self.orig[wid], r.workload.contract.budget is None)
        return Running(w, r.placement, r.started_at, r.protected_until)

    def decide(self, snap: Snapshot, config: Config, now: float) -> Decision:
        self.passes += 1
        usage = self.usage(snap, now)
        pending = tuple(self.orig[w.id] for w in snap.pending)
        if self.first:
            self.first = False
            running = tuple(self.seeded.values())
            queue = tuple(w for w in pending if w.id not in self.seeded)
            d = decide(Snapshot(self.nodes(snap.nodes), running, queue, usage), config, now)
            gone = {a.workload_id for a in d.actions if isinstance(a, Preempt)}
            seeds = [Admit(wid, r.placement, "running when the forecast starts")
                     for wid, r in self.seeded.items() if wid not in gone]
            self.fresh = {a.workload_id for a in seeds}
            rest = [a for a in d.actions if not (isinstance(a, Preempt) and a.workload_id in self.seeded)]
            d = Decision(now, tuple(seeds + rest), d.statuses, d.ranks)
        else:
            running = tuple(self.restore(r) for r in snap.running)
            d = decide(Snapshot(self.nodes(snap.nodes), running, pending, usage), config, now)
        for a in d.actions:
            if isinstance(a, Preempt):
                self.fresh.discard(a.workload_id)
            if isinstance(a, (Admit, Reject)) and a.workload_id in self.targets \
                    and a.workload_id not in self.outcome:
                if isinstance(a, Admit):
                    self.starts[a.workload_id], self.outcome[a.workload_id] = now, "started"
                elif isinstance(a, Reject):
                    self.outcome[a.workload_id] = "rejected"
        if self.targets and len(self.outcome) == len(self.targets):
            raise _Done
        return d

    def protect(self, workload, admit: Admit, now: float) -> float:
        if workload.id in self.fresh and admit.reason == "running when the forecast starts":
            return self.seeded[workload.id].protected_until
        return contract_protection(as_run(self.orig.get(workload.id, workload), admit.loan), admit, now)


def assumptions(state: ViewState, horizon_s: float) -> list[str]:
    known = state.meta.get("expected")
    out = ["no new submissions: work submitted later with a better rank would start earlier and "
           "may delay these forecasts",
           ("running workloads end at their expected end and pending ones run for their expected "
            f"runtime ({known})" if known else
            "running workloads without a declared end run until preempted; pending workloads run for "
            "their min runtime (or the policy's default min runtime when it is 0: free work)"),
           "no node fails or is repaired during the forecast; unhealthy and cordoned nodes stay "
           "out of service, and GPUs other tenants' pods use stay in use",
           f"scheduling passes every {format_duration(state.config.policy.scheduling_interval_s)} as "
           f"configured; the forecast looks {format_duration(horizon_s)} ahead"]
    return out


def forecast(state: ViewState, targets: Iterable[str] | None = None, *,
             horizon_s: float = DEFAULT_HORIZON_S, options: SimOptions | None = None) -> Forecast:
    """Forecast the start of ``targets`` (default: every pending workload). ``options``:
    the simulator's; by default its cadence and preemption costs are the ones the state's run
    had (``meta``), else the reconciler's cadence (``watch``) and the simulator's defaults."""
    if options is None:
        meta, default = state.meta, SimOptions()
        options = SimOptions(cadence=str(meta.get("cadence") or default.cadence),
                             checkpoint_loss_s=float(meta.get("checkpoint_loss_s", default.checkpoint_loss_s)),
                             restart_overhead_s=float(meta.get("restart_overhead_s",
                                                               default.restart_overhead_s)))
    now = state.now
    wanted = set(targets) if targets is not None else {w.id for w in state.snapshot.pending}
    config, mapping = _node_map(state)
    interval = config.policy.scheduling_interval_s
    # the first pass: at once (watch-driven cadences: the submissions are events), or on the grid
    first = (max(now, math.ceil(now / interval - 1e-9) * interval)
             if interval > 0 and options.cadence == "interval" else now)
    big = 10.0 * horizon_s
    default_rt = config.policy.default_min_runtime_s
    tasks = []
    for r in state.snapshot.running:
        c = r.workload.contract
        end = state.expected.get(r.workload.id)
        runtime = big if end is None else max(end - first, 1e-3)
        tasks.append(_task(r.workload, now, runtime))
    for w in state.snapshot.pending:
        c = w.contract
        runtime = state.expected.get(w.id) or c.min_runtime_s or default_rt
        tasks.append(_task(w, now, max(runtime, 1e-3)))
    fails = [NodeFailure(first + 1e-3, mapping[n.name], big) for n in state.snapshot.nodes if not n.healthy]
    trace = Trace.of(tasks, fails, "forecast", {"horizon": now + horizon_s})
    seeded = _Seeded(state, mapping, wanted)
    sched = Scheduler("forecast", seeded.decide, seeded.protect)
    try:
        simulate(config, trace, sched, horizon=now + horizon_s, options=options)
    except _Done:
        pass
    starts = {k: seeded.starts.get(k) for k in sorted(wanted)}
    outcome = {k: seeded.outcome.get(k, "waiting") for k in sorted(wanted)}
    return Forecast(now, now + horizon_s, starts, outcome, assumptions(state, horizon_s), seeded.passes)


def _task(w, submit: float, runtime: float) -> Task:
    c = w.contract
    leaf = c.budget if c.allocated else None
    return Task(id=w.id, submit=submit, pods=max(1, c.pods), gpus_per_pod=max(1, c.gpus_per_pod),
                runtime=runtime, owner=w.owner, leaf=leaf,
                min_runtime=c.min_runtime_s if leaf else 0.0, resumable=c.resumable,
                priority=c.priority, cluster=c.cluster)
