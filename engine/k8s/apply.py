"""Applying a Decision to the cluster: each action becomes one patch and one Event.

Every Job write is a single JSON merge patch conditional on the resourceVersion the decision
was based on, so it is atomic (a crash leaves the Job entirely before or after) and a stale
decision cannot overwrite a newer state (another leader's admission, a user's edit): the write
fails with a conflict, the action is skipped and the loop runs a fresh pass at once.

Order: preemptions first (they free GPUs), then admissions (skipped for the rest of the pass
if any preemption failed, so a failed preemption never leads to an over-committed node),
rejections, holds, node cordons and drains, finished runs, and last the explanation
annotations of every other managed Job.

- **Admit**: ``spec.suspend: false``; the pod template is pinned to the placement's nodes by
  a required node affinity ``kubernetes.io/hostname In [nodes]`` added to each of the Job's own
  node-selector terms (an earlier pin is replaced); the running record (``state=running``,
  ``started-at``, ``protected-until``, ``placement``, ``leaf``, ``billing-weight``) is written in
  the same patch. Limitation: plain Jobs have one pod template, so an Indexed Job spread over
  several nodes is pinned to the node *set*, not index by index; the gang still fits exactly
  because its placement reserves exactly those nodes' GPUs. Kubernetes accepts a new pin only
  on a suspended Job that never started, so a Job that ran before (preempted, or held) first
  has its ``status.startTime`` cleared through the status subresource, as Kueue does.
- **Preempt**: ``spec.suspend: true`` (the Job controller deletes the pods: SIGTERM, then the
  pod's ``terminationGracePeriodSeconds``; set it in the template to the policy's
  ``preemption_grace`` as the README example does; Kubernetes forbids changing it on an existing
  Job), the run is moved to ``last-run`` for charging, the running record is removed and the
  Job waits in the queue again.
- **Reject**: ``state=rejected`` and the reason, a Warning Event; the Job stays suspended.
  Written once: a Job already rejected for the same reason is not touched again.
- **Hold** (a contract Job found running without admission): suspended and queued.
- **Cordon**: ``spec.unschedulable: true`` on the node; **MarkDrained**: the policy's
  ``drain.drained_label`` set to ``"true"`` on the node. A node it cordoned that is healthy
  again (``Observation.healed``) is uncordoned, its cordon reason and drained label removed
  (Event ``Uncordoned``): repaired, it is back in service, as in the simulator.

Explanations (``reason``, ``rank``, ``rank-metric``, ``queue-position``, ``config``) are
refreshed at most every ``refresh_s`` per Job (and at once for a Job never explained), so a
thousand waiting Jobs do not cost a thousand writes per loop.
"""

from __future__ import annotations

import logging
import uuid
from dataclasses import dataclass, field
from functools import partial
from typing import Any, Callable, Mapping

from engine.core.types import Admit, Cordon, Decision, MarkDrained, Placement, Preempt, Reject, \
    WorkloadStatus, as_run
from engine.durations import format_duration
from engine.k8s import marks
from engine.k8s.client import ApiError, Conflict, KubeClient
from engine.k8s.observe import JobView, Observation, billing_weight, unhealthy_because
from engine.model import Config
from engine.timestamps import readable_times

log = logging.getLogger("allot.k8s.apply")

COMPONENT = "allot-reconciler"


@dataclass
class ApplyResult:
    """What a pass changed. ``stale`` is True when a write found the cluster changed since
    the observation (the loop then runs again at once)."""

    admitted: list[str] = field(default_factory=list)
    preempted: list[str] = field(default_factory=list)
    evicted: list[str] = field(default_factory=list)  # preemptions by a drain
    rejected: list[str] = field(default_factory=list)
    held: list[str] = field(default_factory=list)
    cordoned: list[str] = field(default_factory=list)
    drained: list[str] = field(default_factory=list)
    uncordoned: list[str] = field(default_factory=list)  # healthy again, back in service
    explained: int = 0
    skipped: list[str] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    stale: bool = False
    planned: list[str] = field(default_factory=list)  # dry run: what would have been done


def pin_affinity(template_spec: Mapping[str, Any], nodes: tuple[str, ...]) -> dict:
    """The Job template's node affinity with every node-selector term narrowed to ``nodes``
    (an earlier hostname pin is replaced; other expressions are kept)."""
    ours = {"key": marks.HOSTNAME_LABEL, "operator": "In", "values": sorted(nodes)}
    affinity = template_spec.get("affinity") or {}
    required = (affinity.get("nodeAffinity") or {}).get(
        "requiredDuringSchedulingIgnoredDuringExecution") or {}
    terms = []
    for term in required.get("nodeSelectorTerms") or [{}]:
        exprs = [e for e in term.get("matchExpressions") or []
                 if not (e.get("key") == marks.HOSTNAME_LABEL and e.get("operator") == "In")]
        new_term = dict(term)
        new_term["matchExpressions"] = exprs + [ours]
        terms.append(new_term)
    return {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
        "nodeSelectorTerms": terms}}}


class Applier:
    """Applies decisions through a :class:`KubeClient` (or only logs them when ``dry_run``)."""

    def __init__(self, client: KubeClient, *, identity: str = COMPONENT, dry_run: bool = False,
                 refresh_s: float = 60.0, may_write: Callable[[], bool] = lambda: True):
        self.client = client
        self.identity = identity
        self.dry_run = dry_run
        self.refresh_s = refresh_s
        self.may_write = may_write
        self._now = 0.0

    # ------------------------------------------------------------------ entry point

    def apply(self, decision: Decision, obs: Observation, config: Config, now: float,
              commit: str) -> ApplyResult:
        res = ApplyResult()
        self._now = now
        touched: set[str] = set()
        actions = decision.actions
        preempts = [a for a in actions if isinstance(a, Preempt)]
        admits = [a for a in actions if isinstance(a, Admit)]
        for pre in preempts:
            touched.add(pre.workload_id)
            done = res.preempted if pre.preemptor is not None else res.evicted
            self._job_write(res, obs, pre.workload_id, "preempt",
                            partial(self._preempt, act=pre, obs=obs, config=config, now=now,
                                    commit=commit), done)
        preempt_failed = any(w in res.skipped for w in (a.workload_id for a in preempts))
        for adm in admits:
            touched.add(adm.workload_id)
            if preempt_failed:
                res.skipped.append(adm.workload_id)
                continue
            st = decision.statuses.get(adm.workload_id)
            self._job_write(res, obs, adm.workload_id, "admit",
                            partial(self._admit, act=adm, status=st, obs=obs, config=config,
                                    now=now, commit=commit),
                            res.admitted)
        for act in actions:
            if isinstance(act, Reject):
                touched.add(act.workload_id)
                view = obs.jobs.get(act.workload_id)
                if view is not None and view.state == "rejected" and \
                        view.annotations.get(marks.REASON) == readable_times(act.reason):
                    continue
                self._job_write(res, obs, act.workload_id, "reject",
                                partial(self._reject, act=act, now=now, commit=commit), res.rejected)
            elif isinstance(act, Cordon):
                signals = unhealthy_because(obs.nodes.get(act.node) or {}, config)
                text = f"{act.reason} ({'; '.join(signals)})" if signals else act.reason
                self._node_write(res, act.node, "Cordoned", text,
                                 {"spec": {"unschedulable": True},
                                  "metadata": {"annotations": {marks.CORDON_REASON: readable_times(text)}}},
                                 res.cordoned)
            elif isinstance(act, MarkDrained):
                label = config.policy.drain.drained_label
                node_labels = ((obs.nodes.get(act.node) or {}).get("metadata") or {}).get(
                    "labels") or {}
                if node_labels.get(label) == "true":
                    continue  # already labelled: decide reports it every pass
                self._node_write(res, act.node, "Drained", act.reason,
                                 {"metadata": {"labels": {label: "true"}}}, res.drained)
        for node, was in obs.healed.items():
            self._node_write(res, node, "Uncordoned", f"healthy again: back in service (cordoned "
                             f"as {was!r})", {"spec": {"unschedulable": False}, "metadata": {
                                 "annotations": {marks.CORDON_REASON: None},
                                 "labels": {config.policy.drain.drained_label: None}}},
                             res.uncordoned)
        for wid in obs.held:
            touched.add(wid)
            self._job_write(res, obs, wid, "hold", lambda v: self._hold(v, now, commit), res.held)
        for wid in obs.finished:
            touched.add(wid)
            self._job_write(res, obs, wid, "finish", lambda v: self._finish(v, obs, config, now),
                            [])
        for wid, status in sorted(decision.statuses.items()):
            if wid in touched or wid not in obs.jobs:
                continue
            self._explain(res, obs.jobs[wid], status, now, commit, decision.waiting.get(wid))
        return res

    # ------------------------------------------------------------------ job writes

    def _job_write(self, res: ApplyResult, obs: Observation, wid: str, verb: str,
                   build: Callable[[JobView], tuple[dict, tuple[str, str, str] | None]],
                   done: list[str]) -> bool:
        view = obs.jobs.get(wid)
        if view is None:
            res.errors.append(f"{verb} {wid}: not observed")
            return False
        patch, event = build(view)
        if self.dry_run:
            res.planned.append(f"{verb} {wid}" + (f": {event[2]}" if event else ""))
            log.info("dry-run: would %s %s", verb, wid, extra={"fields": {"patch": patch}})
            done.append(wid)
            return True
        if not self.may_write():
            res.skipped.append(wid)
            res.errors.append(f"{verb} {wid}: leadership lost")
            return False
        try:
            rv = view.resource_version
            if verb == "admit" and (view.obj.get("status") or {}).get("startTime"):
                # Kubernetes lets the pod template's node affinity change only on a suspended
                # Job that never started: clear startTime first (what Kueue does), under the
                # same precondition, then pin on the version that write produced.
                cleared = self.client.patch("jobs/status", view.namespace, view.name,
                                            {"status": {"startTime": None}}, resource_version=rv)
                rv = str((cleared.get("metadata") or {}).get("resourceVersion") or rv)
            written = self.client.patch("jobs", view.namespace, view.name, patch,
                                        resource_version=rv)
        except Conflict as err:
            log.info("skipping %s %s: %s", verb, wid, err)
            res.skipped.append(wid)
            res.stale = True
            return False
        except ApiError as err:
            log.warning("%s %s failed: %s", verb, wid, err)
            res.skipped.append(wid)
            res.errors.append(f"{verb} {wid}: {err}")
            return False
        done.append(wid)
        if event is not None:
            self.event(written or view.obj, *event)
        return True

    def _admit(self, view: JobView, act: Admit, status: WorkloadStatus | None, obs: Observation,
               config: Config, now: float, commit: str) -> tuple[dict, tuple[str, str, str]]:
        contract = as_run(view.workload, act.loan).contract  # on loan: no budget for this run
        protected = status.protected_until if status and status.protected_until is not None \
            else (now + contract.min_runtime_s if contract.allocated else now)
        weight = billing_weight(act.placement, obs.node_cluster, config)
        template_spec = ((view.obj.get("spec") or {}).get("template") or {}).get("spec") or {}
        ann = marks.explain_annotations(status, commit, running=True)
        # the status's reason is the action's plus, for unallocated work, why it runs unallocated
        # (its submitter may not charge the budget it asked for, min runtime 0, a loan)
        reason = status.reason if status is not None and status.reason else act.reason
        ann.update({
            marks.STATE: "running",
            marks.REASON: readable_times(reason),
            marks.STARTED_AT: marks.format_time(now),
            marks.PROTECTED_UNTIL: marks.format_time(protected),
            marks.PLACEMENT: marks.format_placement(act.placement),
            marks.GPUS: str(act.placement.gpus),
            marks.WEIGHT: f"{weight:g}",
            marks.LEAF: contract.budget if contract.allocated else None,
            marks.QUEUE_POSITION: None,
            marks.UPDATED_AT: marks.format_time(now),
        })
        patch = {"metadata": {"annotations": ann},
                 "spec": {"suspend": False,
                          "template": {"spec": {"affinity": pin_affinity(template_spec,
                                                                         act.placement.nodes)}}}}
        guard = max(0.0, protected - now)
        message = f"{reason}; protected for {format_duration(guard)}" if guard > 0 else \
            f"{reason}; unprotected (preemptible at any time)"
        return patch, ("Normal", "Admitted", message)

    def _preempt(self, view: JobView, act: Preempt, obs: Observation, config: Config, now: float,
                 commit: str) -> tuple[dict, tuple[str, str, str]]:
        ann = view.annotations
        placement = marks.parse_placement(ann.get(marks.PLACEMENT)) or Placement(())
        started = marks.parse_time(ann.get(marks.STARTED_AT)) or now
        weight = billing_weight(placement, obs.node_cluster, config,
                                marks.number(ann.get(marks.WEIGHT), 1.0))
        record = marks.RunRecord(started, max(now, started), placement.gpus, weight,
                                 ann.get(marks.LEAF) or None)
        count = int(marks.number(ann.get(marks.PREEMPTIONS), 0)) + 1
        ran = marks.number(ann.get(marks.RUN_SECONDS), 0.0) + (record.end - record.start)
        patch = {"metadata": {"annotations": {
            marks.STATE: "preempted", marks.REASON: readable_times(act.reason),
            marks.STARTED_AT: None, marks.PROTECTED_UNTIL: None, marks.PLACEMENT: None,
            marks.GPUS: None, marks.WEIGHT: None, marks.LAST_RUN: record.to_text(),
            marks.PREEMPTIONS: str(count), marks.RUN_SECONDS: f"{ran:.3f}",
            marks.CONFIG: commit or None,
            marks.UPDATED_AT: marks.format_time(now),
        }}, "spec": {"suspend": True}}
        grace = (((view.obj.get("spec") or {}).get("template") or {}).get("spec") or {}).get(
            "terminationGracePeriodSeconds", 30)
        tail = "requeued" if act.requeue else "requeued, restarts from scratch"
        if act.preemptor is None:
            reason, text = "Evicted", f"evicted from an unhealthy node: {act.reason}"
        else:
            reason, text = "Preempted", f"preempted for {act.preemptor}: {act.reason}"
        return patch, ("Warning", reason, f"{text}; pods get SIGTERM and {grace}s grace; {tail}")

    def _reject(self, view: JobView, act: Reject, now: float,
                commit: str) -> tuple[dict, tuple[str, str, str]]:
        patch = {"metadata": {"annotations": {
            marks.STATE: "rejected", marks.REASON: readable_times(act.reason),
            marks.CONFIG: commit or None,
            marks.QUEUE_POSITION: None, marks.WAITING: None,
            marks.UPDATED_AT: marks.format_time(now)}}}
        return patch, ("Warning", "Rejected", f"rejected, never admitted: {act.reason}")

    def _hold(self, view: JobView, now: float, commit: str) -> tuple[dict, tuple[str, str, str]]:
        text = ("created unsuspended: a Job with contract labels starts only when allot admits "
                "it; suspended and queued (create it with spec.suspend: true)")
        patch = {"metadata": {"annotations": {
            marks.STATE: "pending", marks.REASON: text, marks.CONFIG: commit or None,
            marks.UPDATED_AT: marks.format_time(now)}}, "spec": {"suspend": True}}
        return patch, ("Warning", "Held", text)

    def _finish(self, view: JobView, obs: Observation, config: Config,
                now: float) -> tuple[dict, None]:
        ann = view.annotations
        record = next((o for o in obs.occupancy if o.workload_id == view.id and o.end is not None
                       and o.start == marks.parse_time(ann.get(marks.STARTED_AT))), None)
        patch: dict = {"metadata": {"annotations": {
            marks.STATE: "finished", marks.QUEUE_POSITION: None,
            marks.UPDATED_AT: marks.format_time(now)}}}
        if record is not None:
            run = marks.RunRecord(record.start, record.end or now, record.gpus, record.weight,
                                  record.leaf)
            patch["metadata"]["annotations"][marks.LAST_RUN] = run.to_text()
            ran = marks.number(ann.get(marks.RUN_SECONDS), 0.0) + (run.end - run.start)
            patch["metadata"]["annotations"][marks.RUN_SECONDS] = f"{ran:.3f}"
        return patch, None

    def _explain(self, res: ApplyResult, view: JobView, status: WorkloadStatus, now: float,
                 commit: str, cause: str | None) -> None:
        ann = view.annotations
        running = view.kind == "running"
        want = marks.explain_annotations(status, commit, running, cause)
        if not ann.get(marks.STATE):
            want[marks.STATE] = "pending"
        changed = {k: v for k, v in want.items() if ann.get(k) != v}
        if not changed:
            return
        updated = marks.parse_time(ann.get(marks.UPDATED_AT))
        if ann.get(marks.STATE) and updated is not None and now - updated < self.refresh_s:
            return
        want[marks.UPDATED_AT] = marks.format_time(now)
        if self.dry_run:
            res.explained += 1
            return
        if not self.may_write():
            return
        try:
            self.client.patch("jobs", view.namespace, view.name,
                              {"metadata": {"annotations": want}},
                              resource_version=view.resource_version)
            res.explained += 1
        except Conflict:
            res.stale = True
        except ApiError as err:
            res.errors.append(f"explain {view.id}: {err}")

    # ------------------------------------------------------------------ nodes and events

    def _node_write(self, res: ApplyResult, node: str, reason: str, message: str, patch: dict,
                    done: list[str]) -> None:
        if self.dry_run:
            res.planned.append(f"{reason.lower()} {node}: {message}")
            done.append(node)
            return
        if not self.may_write():
            res.errors.append(f"{reason} {node}: leadership lost")
            return
        try:
            written = self.client.patch("nodes", None, node, patch)
        except ApiError as err:
            res.errors.append(f"{reason} {node}: {err}")
            return
        done.append(node)
        self.event(written, "Warning" if reason == "Cordoned" else "Normal", reason, message)

    def event(self, obj: Mapping[str, Any], etype: str, reason: str, message: str,
              now: float | None = None) -> None:
        """Record a core/v1 Event about ``obj`` (best effort: a failure is only logged)."""
        if self.dry_run:
            return
        meta = obj.get("metadata") or {}
        kind = obj.get("kind") or ("Node" if not meta.get("namespace") else "Job")
        namespace = meta.get("namespace") or "default"
        stamp = marks.format_kube_time(now if now is not None else self._now)
        involved = {"apiVersion": obj.get("apiVersion") or ("batch/v1" if kind == "Job" else "v1"),
                    "kind": kind, "name": meta.get("name"),
                    "namespace": meta.get("namespace") or None,
                    "uid": meta.get("uid"),
                    "resourceVersion": meta.get("resourceVersion")}
        body = {
            "apiVersion": "v1", "kind": "Event",
            "metadata": {"name": f"{meta.get('name', 'object')}.{uuid.uuid4().hex[:16]}",
                         "namespace": namespace},
            "involvedObject": {k: v for k, v in involved.items() if v},
            "reason": reason, "message": (readable_times(message) or "")[:1024], "type": etype,
            "source": {"component": COMPONENT},
            "reportingComponent": "allot.dev/reconciler", "reportingInstance": self.identity,
            "firstTimestamp": stamp, "lastTimestamp": stamp, "count": 1,
        }
        try:
            self.client.create("events", namespace, body)
        except ApiError as err:
            log.warning("event %s on %s/%s not recorded: %s", reason, namespace, meta.get("name"),
                        err)
