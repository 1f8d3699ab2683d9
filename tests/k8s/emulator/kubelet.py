"""The emulated scheduler, kubelets, taint manager and eviction API: what happens to pods.

Scheduling (default-scheduler semantics, enough for pinned GPU jobs): a pod without
``spec.nodeName`` is bound to a node that

- matches ``spec.nodeSelector`` (every node carries ``kubernetes.io/hostname=<name>``) and the
  required node affinity (``nodeSelectorTerms`` OR-ed, expressions AND-ed, In/NotIn/Exists/
  DoesNotExist/Gt/Lt, ``matchFields`` on ``metadata.name``);
- is schedulable: not cordoned (``spec.unschedulable``), condition ``Ready=True``, and every
  NoSchedule/NoExecute taint tolerated (a cordon or not-ready node counts as tainted with
  ``node.kubernetes.io/unschedulable`` / ``node.kubernetes.io/not-ready``, like the real
  controllers do, without writing those taints into the Node);
- has enough free ``nvidia.com/gpu`` (allocatable minus the requests of its non-terminal pods;
  a container's request defaults to its limit).

Among fitting nodes the one with the most free GPUs wins (LeastAllocated), ties by name. A pod
that fits nowhere stays Pending with ``PodScheduled=False, reason=Unschedulable`` and is retried
whenever pods or nodes change. Bound pods start Running at once (the emulated kubelet); a pod
created with ``spec.nodeName`` on a node without room fails with ``OutOfnvidia.com/gpu`` as the
kubelet's admission would. A NoExecute taint evicts running pods that do not tolerate it.

Deletion is immediate (no Terminating phase); every running pod that goes away is recorded in
``terminations`` with the grace period it was given and why.
"""
from __future__ import annotations

import copy
from dataclasses import dataclass
from typing import Any

from . import errors
from .clock import rfc3339
from .resources import resolve
from .selectors import match_label_selector_dict, match_node_selector_term
from .store import Change, Store

GPU = "nvidia.com/gpu"
PODS, NODES, PDBS = resolve("pods"), resolve("nodes"), resolve("poddisruptionbudgets")


@dataclass(frozen=True)
class Termination:
    """A pod the kubelet stopped: ``reason`` in Suspended, Evicted, Deleted, JobFailed, ..."""
    namespace: str
    pod: str
    job: str | None
    node: str | None
    at: float
    grace_seconds: int | None
    reason: str


def _quantity(value: Any) -> int:
    if value is None:
        return 0
    text = str(value)
    return int(text[:-1]) * 1000 if text.endswith("k") else int(float(text))


def pod_gpus(pod: dict[str, Any]) -> int:
    total = 0
    for container in (pod.get("spec") or {}).get("containers") or []:
        resources = container.get("resources") or {}
        requests, limits = resources.get("requests") or {}, resources.get("limits") or {}
        total += _quantity(requests.get(GPU, limits.get(GPU)))
    return total


def is_terminal(pod: dict[str, Any]) -> bool:
    return (pod.get("status") or {}).get("phase") in ("Succeeded", "Failed")


def _tolerates(tolerations: list[dict[str, Any]], taint: dict[str, Any]) -> bool:
    for tol in tolerations:
        if tol.get("effect") and tol["effect"] != taint.get("effect"):
            continue
        if tol.get("operator", "Equal") == "Exists":
            if not tol.get("key") or tol["key"] == taint.get("key"):
                return True
        elif tol.get("key") == taint.get("key") and tol.get("value", "") == taint.get("value", ""):
            return True
    return False


def effective_taints(node: dict[str, Any]) -> list[dict[str, Any]]:
    taints = list((node.get("spec") or {}).get("taints") or [])
    if (node.get("spec") or {}).get("unschedulable"):
        taints.append({"key": "node.kubernetes.io/unschedulable", "effect": "NoSchedule"})
    ready = next((c for c in (node.get("status") or {}).get("conditions") or []
                  if c.get("type") == "Ready"), None)
    if ready is None or ready.get("status") != "True":
        taints.append({"key": "node.kubernetes.io/not-ready", "effect": "NoSchedule"})
    return taints


class Kubelet:
    """Scheduler + kubelets + taint manager; ``settle`` runs after each batch of writes."""

    def __init__(self, store: Store) -> None:
        self.store = store
        self.terminations: list[Termination] = []
        self._pending: set[tuple[str, str]] = set()  # pods waiting for a node or for their kubelet
        self._nodes_changed = True  # the taint manager and pending pods need another look
        self._capacity_freed = True
        store.on_commit.append(self._observe)

    @property
    def dirty(self) -> bool:
        return self._nodes_changed or (bool(self._pending) and self._capacity_freed)

    def _observe(self, r: Any, change: Change) -> None:
        if r.kind == "Node":
            self._nodes_changed = True
            return
        if r.kind != "Pod":
            return
        meta = change.obj["metadata"]
        key = (meta["namespace"], meta["name"])
        pending = change.type != "DELETED" and (change.obj.get("status") or {}).get("phase") == "Pending"
        if pending:
            if key not in self._pending:
                self._pending.add(key)
                self._capacity_freed = True  # a new pod deserves one scheduling attempt
            elif change.old is not None and change.old.get("spec") != change.obj.get("spec"):
                self._capacity_freed = True  # e.g. a toleration was added: try again
        else:
            self._pending.discard(key)
        if change.old is not None and not is_terminal(change.old) and (
                change.type == "DELETED" or is_terminal(change.obj)):
            self._capacity_freed = True
        if change.type == "DELETED":
            pod = change.old or change.obj
            if not is_terminal(pod):
                note = change.note or {}
                grace = note.get("grace")
                if grace is None:
                    grace = (pod.get("spec") or {}).get("terminationGracePeriodSeconds")
                owner = next((ref["name"] for ref in pod["metadata"].get("ownerReferences") or []
                              if ref.get("kind") == "Job"), None)
                self.terminations.append(Termination(
                    pod["metadata"]["namespace"], pod["metadata"]["name"], owner,
                    (pod.get("spec") or {}).get("nodeName"), self.store.clock(), grace,
                    note.get("reason", "Deleted")))

    # ---- scheduling --------------------------------------------------------------------------
    def free_gpus(self) -> dict[str, int]:
        free = {n["metadata"]["name"]: _quantity(((n.get("status") or {}).get("allocatable") or {}).get(GPU))
                for n in self.store.all_objects(NODES)}
        for pod in self.store.all_objects(PODS):
            node = (pod.get("spec") or {}).get("nodeName")
            if node in free and not is_terminal(pod):
                free[node] -= pod_gpus(pod)
        return free

    def _fits(self, pod: dict[str, Any], node: dict[str, Any]) -> bool:
        spec = pod.get("spec") or {}
        labels = node["metadata"].get("labels") or {}
        for key, value in (spec.get("nodeSelector") or {}).items():
            if labels.get(key) != value:
                return False
        required = (((spec.get("affinity") or {}).get("nodeAffinity") or {})
                    .get("requiredDuringSchedulingIgnoredDuringExecution"))
        if required is not None:
            terms = required.get("nodeSelectorTerms") or []
            if not any(match_node_selector_term(term, node) for term in terms):
                return False
        tolerations = spec.get("tolerations") or []
        return all(_tolerates(tolerations, taint) for taint in effective_taints(node)
                   if taint.get("effect") in ("NoSchedule", "NoExecute"))

    def settle(self) -> None:
        """Bind pending pods, start bound ones, evict on NoExecute; repeat until stable."""
        while self.dirty:
            if self._nodes_changed:
                self._nodes_changed = False
                self._capacity_freed = True
                self._taint_manager()
            self._capacity_freed = False
            if self._pending:
                self._schedule()

    def _schedule(self) -> None:
        nodes = {n["metadata"]["name"]: n for n in self.store.all_objects(NODES)}
        free = self.free_gpus()
        pods = [self.store.get(PODS, ns, name) for ns, name in self._pending]
        pending = sorted((p for p in pods if p is not None and not p["metadata"].get("deletionTimestamp")),
                         key=lambda p: (p["metadata"]["creationTimestamp"], p["metadata"]["name"]))
        for pod in pending:
            need = pod_gpus(pod)
            bound = (pod.get("spec") or {}).get("nodeName")
            if bound:
                if bound not in nodes:
                    continue  # waits for its node, as a real pod would
                if free[bound] < 0:  # bound over capacity: the kubelet's admission rejects it
                    self._set_phase(pod, "Failed", reason=f"OutOf{GPU}",
                                    message=f"Node didn't have enough resource: {GPU}")
                    free[bound] += need
                    continue
                self._run(pod, bound)
                continue
            candidates = [name for name, node in nodes.items()
                          if free[name] >= need and self._fits(pod, node)]
            if not candidates:
                self._unschedulable(pod, len(nodes))
                continue
            best = min(candidates, key=lambda name: (-free[name], name))
            free[best] -= need
            self._run(pod, best)

    def _conditions(self, pod: dict[str, Any], **statuses: str) -> list[dict[str, Any]]:
        now = rfc3339(self.store.clock())
        conditions = {c["type"]: c for c in (pod.get("status") or {}).get("conditions") or []}
        for ctype, status in statuses.items():
            old = conditions.get(ctype)
            if old is None or old.get("status") != status:
                conditions[ctype] = {"type": ctype, "status": status, "lastProbeTime": None,
                                     "lastTransitionTime": now}
        return list(conditions.values())

    def _run(self, pod: dict[str, Any], node: str) -> None:
        new = copy.deepcopy(pod)
        new["spec"]["nodeName"] = node
        now = rfc3339(self.store.clock())
        new["status"] = {
            **(new.get("status") or {}), "phase": "Running", "hostIP": "10.0.0.1",
            "podIP": "10.1.0.1", "startTime": now,
            "conditions": self._conditions(pod, PodReadyToStartContainers="True", Initialized="True",
                                           Ready="True", ContainersReady="True", PodScheduled="True"),
            "containerStatuses": [
                {"name": c["name"], "image": c.get("image", ""), "imageID": "", "ready": True, "restartCount": 0,
                 "started": True, "state": {"running": {"startedAt": now}}}
                for c in new["spec"].get("containers") or []],
        }
        self.store.commit(PODS, new)

    def _unschedulable(self, pod: dict[str, Any], n_nodes: int) -> None:
        message = f"0/{n_nodes} nodes are available: no node matches the pod's node selector, " \
                  "affinity, tolerations and free nvidia.com/gpu."
        scheduled = next((c for c in (pod.get("status") or {}).get("conditions") or []
                          if c["type"] == "PodScheduled"), None)
        if scheduled and scheduled.get("reason") == "Unschedulable":
            return
        new = copy.deepcopy(pod)
        conditions = self._conditions(pod, PodScheduled="False")
        for c in conditions:
            if c["type"] == "PodScheduled":
                c.update(reason="Unschedulable", message=message)
        new["status"]["conditions"] = conditions
        self.store.commit(PODS, new)

    def _set_phase(self, pod: dict[str, Any], phase: str, reason: str, message: str,
                   exit_code: int | None = None) -> dict[str, Any]:
        new = copy.deepcopy(pod)
        status = new.setdefault("status", {})
        status.update(phase=phase, reason=reason, message=message)
        if exit_code is not None:
            now = rfc3339(self.store.clock())
            status["containerStatuses"] = [
                {"name": c["name"], "image": c.get("image", ""), "imageID": "", "ready": False, "restartCount": 0,
                 "started": False, "state": {"terminated": {"exitCode": exit_code, "reason": reason,
                                                            "finishedAt": now}}}
                for c in new["spec"].get("containers") or []]
            status["conditions"] = self._conditions(pod, Ready="False", ContainersReady="False")
        return self.store.commit(PODS, new)

    def finish_pod(self, pod: dict[str, Any], succeeded: bool, reason: str | None = None) -> dict[str, Any]:
        if succeeded:
            return self._set_phase(pod, "Succeeded", reason or "Completed", "", exit_code=0)
        return self._set_phase(pod, "Failed", reason or "Error", "", exit_code=1)

    def _taint_manager(self) -> None:
        nodes = {n["metadata"]["name"]: n for n in self.store.all_objects(NODES)}
        for pod in self.store.all_objects(PODS):
            node = nodes.get((pod.get("spec") or {}).get("nodeName"))
            if node is None or is_terminal(pod):
                continue
            tolerations = (pod.get("spec") or {}).get("tolerations") or []
            for taint in (node.get("spec") or {}).get("taints") or []:
                if taint.get("effect") == "NoExecute" and not _tolerates(tolerations, taint):
                    meta = pod["metadata"]
                    self.store.delete(PODS, meta["namespace"], meta["name"], {"_reason": "TaintEviction"})
                    break

    # ---- eviction API ------------------------------------------------------------------------
    def evict(self, ns: str, name: str, body: dict[str, Any] | None) -> None:
        pod = self.store.must_get(PODS, ns, name)
        options = dict((body or {}).get("deleteOptions") or {})
        if not is_terminal(pod):
            for pdb in self.store.list(PDBS, ns):
                selector = (pdb.get("spec") or {}).get("selector")
                if not match_label_selector_dict(selector, pod["metadata"].get("labels")):
                    continue
                healthy, desired = self._pdb_budget(pdb)
                if healthy - desired <= 0:
                    raise errors.ApiError(
                        429, "Cannot evict pod as it would violate the pod's disruption budget.",
                        "TooManyRequests", details={"causes": [{
                            "reason": "DisruptionBudget",
                            "message": f"The disruption budget {pdb['metadata']['name']} needs "
                                       f"{desired} healthy pods and has {healthy} currently"}]})
        options["_reason"] = "Evicted"
        self.store.delete(PODS, ns, name, options)

    def _pdb_budget(self, pdb: dict[str, Any]) -> tuple[int, int]:
        spec = pdb.get("spec") or {}
        matching = [p for p in self.store.list(PODS, pdb["metadata"]["namespace"])
                    if match_label_selector_dict(spec.get("selector"), p["metadata"].get("labels"))]
        healthy = sum(1 for p in matching if (p.get("status") or {}).get("phase") == "Running")

        def resolve_amount(value: Any) -> int:
            if isinstance(value, str) and value.endswith("%"):
                return -(-len(matching) * int(value[:-1]) // 100)
            return int(value)

        if spec.get("minAvailable") is not None:
            return healthy, resolve_amount(spec["minAvailable"])
        if spec.get("maxUnavailable") is not None:
            return healthy, len(matching) - resolve_amount(spec["maxUnavailable"])
        return healthy, 0
