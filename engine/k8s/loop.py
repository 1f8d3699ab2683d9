"""The reconcile loop: watch-driven passes with a periodic resync, run by the elected leader.

One pass (:meth:`Reconciler.run_pass`), at ``now = clock()``:

1. leader election round (a dry run never takes the Lease: it only watches and logs);
2. poll the policy source (a new valid revision takes effect from this pass; an invalid one is
   reported by Event, metric and log while the last good one stays in force);
3. list Nodes, Jobs and Pods and build the :class:`~engine.k8s.observe.Observation`;
4. charge the ledger up to ``now`` and compute usage over the lookback window;
5. ``decide(snapshot, config, now)`` and apply the decision (patches + Events);
6. save the ledger (one conditional write), update metrics, export the trace if asked.

Every pass lists the objects afresh (the list is the truth, one consistent read per kind), so
the loop never acts on a cache that lags behind its own writes. Watches on Jobs and Nodes
(:mod:`engine.k8s.watches`) only say *when* to run: a change that matters (a Job created,
suspended, finished, relabelled; a node condition, taint, label or capacity change; not the
reconciler's own explanation annotations) wakes the loop at once; otherwise it runs every
``interval_s`` (the resync) and renews the Lease every third of its duration. A pass whose
writes met a changed object (``stale``) is followed by another at once.
"""

from __future__ import annotations

import logging
import socket
import threading
import time
from dataclasses import dataclass, field, replace
from typing import Callable, Mapping

from engine.core.decide import decide
from engine.core.types import Admit, Decision, Reject
from engine.k8s import marks
from engine.k8s.apply import Applier, ApplyResult
from engine.k8s.client import ApiError, KubeClient
from engine.k8s.export import export_trace
from engine.k8s.leader import LeaderElector
from engine.k8s.ledger_store import LedgerState, LedgerStore, charge, usage
from engine.k8s.metrics import Health, Metrics, waiting_gpus
from engine.k8s.observe import Observation, observe
from engine.k8s.policy_source import PolicyEvent, PolicySource
from engine.k8s.watches import Watches

log = logging.getLogger("allot.k8s.loop")


@dataclass
class LoopOptions:
    """Settings of one reconciler instance (the command maps its flags onto these)."""

    namespace: str = "allot-system"  # where the Lease, the ledger and policy Events live
    watch_namespace: str | None = None  # Jobs of this namespace only (None: all)
    interval_s: float | None = None  # resync period (None: the policy's schedulingInterval)
    dry_run: bool = False
    identity: str = field(default_factory=socket.gethostname)
    lease_name: str = "allot-reconciler"
    lease_s: float = 15.0
    ledger_name: str = "allot-ledger"
    refresh_s: float = 60.0  # explanation annotations refreshed at most this often per Job
    watch_timeout_s: int = 300
    debounce_s: float = 0.02  # coalesce a burst of watch events into one pass
    export_path: str | None = None
    export_window_s: float | None = None  # default: the policy's lookback


@dataclass
class PassReport:
    """What one pass did; ``acted`` is False when it only took part in the election.
    ``pending`` and ``running`` count managed Jobs after the pass's actions."""

    now: float
    leader: bool
    acted: bool
    revision: str = ""
    duration_s: float = 0.0
    pending: int = 0
    running: int = 0
    charged_gpu_s: float = 0.0
    decision: Decision | None = None
    result: ApplyResult | None = None
    observation: Observation | None = None
    policy_event: PolicyEvent | None = None
    error: str | None = None

    @property
    def stale(self) -> bool:
        return bool(self.result and self.result.stale)


class Reconciler:
    """One reconciler instance (see the module docstring)."""

    def __init__(self, client: KubeClient, policy: PolicySource, options: LoopOptions, *,
                 clock: Callable[[], float] = time.time, metrics: Metrics | None = None,
                 health: Health | None = None):
        self.client = client
        self.policy = policy
        self.options = options
        self.clock = clock
        self.metrics = metrics or Metrics()
        self.health = health or Health(stall_s=max(300.0, 3 * (options.interval_s or 60.0)))
        self.elector = LeaderElector(client, options.namespace, options.identity,
                                     name=options.lease_name, lease_s=options.lease_s, clock=clock)
        self.store = LedgerStore(client, options.namespace, options.ledger_name)
        self.applier = Applier(client, identity=options.identity, dry_run=options.dry_run,
                               refresh_s=options.refresh_s, may_write=self._may_write)
        self.ledger: LedgerState | None = None
        self.passes = 0
        self._unreadable: dict[str, str] = {}  # Jobs that could not be read -> why (logged)
        # called with (reconciler, report) after every pass that acted (e.g. the dashboard's recorder)
        self.listeners: list[Callable[[Reconciler, PassReport], None]] = []
        self._wake = threading.Event()
        self._stop = threading.Event()
        self.watches = Watches(client, options.watch_namespace, options.watch_timeout_s,
                               self.wake, self._stop)

    # ------------------------------------------------------------------ one pass

    def _may_write(self) -> bool:
        return self.elector.is_leader() or self.elector.try_acquire_or_renew()

    def run_pass(self) -> PassReport:
        """One pass (module docstring). The API traffic counters are published after every
        pass, whether it acted, stood by or could not read the cluster: an outage must show in
        ``allot_api_errors_total`` while it lasts."""
        try:
            return self._run_pass()
        finally:
            self._api_metrics()

    def _run_pass(self) -> PassReport:
        started = time.perf_counter()
        now = self.clock()
        self.health.beat()
        leader = self.options.dry_run or self.elector.try_acquire_or_renew()
        report = PassReport(now=now, leader=leader, acted=False)
        self.metrics.set("allot_is_leader", 1.0 if leader and not self.options.dry_run else 0.0)
        report.policy_event = event = self.policy.poll()
        if event is not None:
            self._policy_event(event, leader)
        config = self.policy.config
        self._policy_metrics()
        if config is None:
            self.health.ready, self.health.reason = False, "no valid policy yet"
            report.error = "no valid policy"
            return report
        report.revision = self.policy.commit
        if not leader:
            self.ledger = None  # reload when leadership comes back: the leader charges
            self.health.ready, self.health.reason = True, "standby"
            lease = f"the Lease {self.elector.namespace}/{self.elector.name}"
            report.error = (f"cannot read or write {lease}: {self.elector.error}" if self.elector.error
                            else f"not the leader: {lease} is held by {self.elector.holder or 'another instance'}")
            return report
        try:
            ns = self.options.watch_namespace
            nodes, _ = self.client.list("nodes")
            jobs, _ = self.client.list("jobs", ns)
            # every namespace's pods: with --watch-namespace the others are other tenants'
            # GPUs on the same nodes (never offered to managed work)
            pods, _ = self.client.list("pods")
            obs = observe(jobs, pods, nodes, config, now)
            if self.ledger is None or self.options.dry_run:
                self.ledger = self.store.load(config)
        except ApiError as err:
            self.health.ready, self.health.reason = False, f"cannot read the cluster: {err}"
            report.error = str(err)
            log.warning("pass skipped: %s", err)
            return report
        report.observation = obs
        self._say_unreadable(obs.unreadable)
        report.charged_gpu_s = charge(self.ledger, obs.occupancy, now)
        use = usage(self.ledger, now, config.policy.lookback_s)
        decision = decide(replace(obs.snapshot, usage=use), config, now)
        report.decision = decision
        report.result = result = self.applier.apply(decision, obs, config, now, self.policy.commit)
        if not self.options.dry_run:
            try:
                if not self.store.save(self.ledger, config, now, self.policy.commit):
                    self.ledger = None
            except ApiError as err:  # kept in memory; the next pass writes it
                log.warning("ledger not saved: %s", err)
        report.acted = True
        moved_in = len(result.admitted)
        moved_out = len(result.preempted) + len(result.evicted)
        # (a rejected Job stays suspended and is offered again each pass, but it is not queued:
        # the decision rejects it every pass, though it is written only the first time)
        rejected = sum(isinstance(a, Reject) for a in decision.actions)
        report.pending = len(obs.snapshot.pending) - moved_in + moved_out - rejected
        report.running = len(obs.snapshot.running) + moved_in - moved_out
        report.duration_s = time.perf_counter() - started
        self.passes += 1
        self.health.ready, self.health.reason = True, "ok"
        self._pass_metrics(report, decision, obs, result)
        for listener in self.listeners:
            try:
                listener(self, report)
            except Exception:  # a view must never stop the scheduling loop
                log.exception("pass listener failed")
        if self.options.export_path:
            try:
                window = self.options.export_window_s or config.policy.lookback_s
                export_trace(obs, now, window, self.options.export_path)
            except OSError as err:
                log.warning("trace export to %s failed: %s", self.options.export_path, err)
        log.info("pass", extra={"fields": {
            "now": marks.format_time(now), "revision": report.revision,
            "duration_s": round(report.duration_s, 4), "pending": report.pending,
            "running": report.running, "admitted": result.admitted,
            "preempted": result.preempted, "evicted": result.evicted,
            "rejected": result.rejected, "held": result.held, "cordoned": result.cordoned,
            "drained": result.drained, "uncordoned": result.uncordoned, "explained": result.explained, "stale": result.stale,
            "errors": result.errors, "planned": result.planned,
            "charged_gpu_s": round(report.charged_gpu_s, 3), "dry_run": self.options.dry_run}})
        return report

    def _policy_event(self, event: PolicyEvent, leader: bool) -> None:
        if event.kind == "invalid":
            self.metrics.inc("allot_policy_invalid_total")
        elif event.kind == "fetch-failed":
            self.metrics.inc("allot_policy_fetch_errors_total")
        if not leader or self.options.dry_run:
            return
        lease = {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
                 "metadata": {"name": self.options.lease_name,
                              "namespace": self.options.namespace}}
        etype = "Normal" if event.kind == "applied" else "Warning"
        reason = {"applied": "PolicyApplied", "invalid": "PolicyInvalid",
                  "fetch-failed": "PolicyFetchFailed"}[event.kind]
        self.applier.event(lease, etype, reason, event.message, now=self.clock())

    def _say_unreadable(self, unreadable: Mapping[str, str]) -> None:
        """Log each Job that cannot be read once per reason (it is left out of every pass
        until it is fixed or deleted), and count them."""
        for wid, why in sorted(unreadable.items()):
            if self._unreadable.get(wid) != why:
                log.warning("Job %s cannot be read and is left out of scheduling (its pods count "
                            "as other tenants' GPUs) until it is fixed: %s", wid, why)
        self._unreadable = dict(unreadable)
        self.metrics.set("allot_unreadable_jobs", len(unreadable))

    def _policy_metrics(self) -> None:
        rev = self.policy.commit
        self.metrics.replace("allot_config_info", {(("revision", rev),): 1.0} if rev else {})
        bad = self.policy.last_invalid
        self.metrics.replace("allot_policy_invalid", {(("revision", bad),): 1.0} if bad else {})

    def _pass_metrics(self, report: PassReport, decision: Decision, obs: Observation,
                      result: ApplyResult) -> None:
        m = self.metrics
        m.set("allot_queue_length", report.pending)
        m.set("allot_running_workloads", report.running)
        gone = set(result.preempted) | set(result.evicted)
        admitted = {a.workload_id: a.placement.gpus for a in decision.actions
                    if isinstance(a, Admit) and a.workload_id in set(result.admitted)}
        m.set("allot_running_gpus", sum(r.placement.gpus for r in obs.snapshot.running
                                        if r.workload.id not in gone) + sum(admitted.values()))
        m.inc("allot_admissions_total", len(result.admitted))
        m.inc("allot_preemptions_total", len(result.preempted), cause="contention")
        m.inc("allot_preemptions_total", len(result.evicted), cause="drain")
        m.inc("allot_rejections_total", len(result.rejected))
        m.inc("allot_holds_total", len(result.held))
        m.inc("allot_cordons_total", len(result.cordoned))
        m.inc("allot_drained_nodes_total", len(result.drained))
        m.inc("allot_uncordons_total", len(result.uncordoned))
        m.inc("allot_stale_writes_total", 1 if result.stale else 0)
        m.inc("allot_ledger_charged_gpu_seconds_total", report.charged_gpu_s)
        for name, attr in (("allot_leaf_usage_gpu_seconds", "usage"), ("allot_leaf_share", "share"),
                           ("allot_leaf_rank_metric", "metric"), ("allot_leaf_rank", "rank")):
            m.replace(name, {(("leaf", leaf),): float(getattr(r, attr))
                             for leaf, r in decision.ranks.items()})
        m.replace("allot_waiting_gpus", waiting_gpus(obs.snapshot.pending, decision))
        m.set("allot_last_loop_duration_seconds", report.duration_s)
        m.observe("allot_loop_duration_seconds", report.duration_s)
        m.set("allot_last_pass_timestamp_seconds", report.now)

    def _api_metrics(self) -> None:
        m, stats = self.metrics, self.client.stats
        with stats.lock:
            m.set("allot_api_calls_total", stats.calls)
            m.set("allot_api_retries_total", stats.retries)
            m.replace("allot_api_errors_total", {(("status", str(s)),): float(n)
                                                 for s, n in stats.errors.items()})

    # ------------------------------------------------------------------ watches

    def wake(self) -> None:
        """Ask for a pass now (watch events call this)."""
        self._wake.set()

    # ------------------------------------------------------------------ running

    @property
    def interval_s(self) -> float:
        """The resync period: the option, else the policy's scheduling interval."""
        if self.options.interval_s:
            return self.options.interval_s
        config = self.policy.config
        return config.policy.scheduling_interval_s if config is not None else 60.0

    def safe_pass(self) -> PassReport:
        """:meth:`run_pass`, but a pass that fails in a way nobody foresaw (a Job or ConfigMap
        edited into something no reconciler wrote, an API answer that is not JSON) is logged
        with its traceback, counted (``allot_pass_errors_total``) and reported, and the loop
        goes on: the next pass may find the object fixed, and every other Job still needs
        scheduling. Crashing would restart the process into the same state, a crash loop."""
        try:
            return self.run_pass()
        except Exception as err:
            log.exception("pass failed")
            self.metrics.inc("allot_pass_errors_total")
            self.health.ready, self.health.reason = False, f"last pass failed: {type(err).__name__}: {err}"
            return PassReport(now=self.clock(), leader=self.elector.is_leader(), acted=False,
                              error=f"the pass failed ({type(err).__name__}: {err}); see the log")

    def run(self, once: bool = False) -> PassReport | None:
        """Run passes until :meth:`stop` (or a single pass with ``once``)."""
        if once:
            try:
                return self.safe_pass()
            finally:
                if not self.options.dry_run:
                    self.elector.release()
        self.watches.start()
        renew_every = max(0.05, self.options.lease_s / 3)
        next_resync = 0.0
        report: PassReport | None = None
        force = True
        try:
            while not self._stop.is_set():
                woke = self._wake.is_set()
                self._wake.clear()
                if woke or force or time.monotonic() >= next_resync:
                    report = self.safe_pass()
                    next_resync = time.monotonic() + self.interval_s
                    force = report.stale
                elif not self.options.dry_run:
                    was_leader = self.elector.is_leader()
                    if self.elector.try_acquire_or_renew() and not was_leader:
                        force = True  # just became leader: pass at once
                        continue
                wait = min(renew_every, max(0.0, next_resync - time.monotonic()))
                if force:
                    wait = 0.0
                if self._wake.wait(wait) and self.options.debounce_s:
                    self._stop.wait(self.options.debounce_s)
        finally:
            self._shutdown()
        return report

    def stop(self) -> None:
        self._stop.set()
        self._wake.set()
        self.watches.close()

    def _shutdown(self) -> None:
        self.watches.close(join=True)
        if not self.options.dry_run:
            self.elector.release()
