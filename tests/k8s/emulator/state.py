"""Direct, thread-safe state access for tests: arrange a cluster and assert on it without HTTP.

These methods bypass the request log and fault injection but not the API semantics: objects get
uids and resourceVersions, watchers see the changes, and the controllers react (creating a Job
unsuspended makes its pods at once). Returned objects are deep copies.
"""
from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from . import resources
from .clock import rfc3339
from .kinds import JOB_UID_LABEL
from .kubelet import GPU, Termination
from .patching import JSON_PATCH, MERGE, STRATEGIC
from .selectors import parse_field_selector, parse_label_selector

if TYPE_CHECKING:
    from .jobs import JobController
    from .kubelet import Kubelet
    from .store import Store

_PATCH_TYPES = {"merge": MERGE, "strategic": STRATEGIC, "json": JSON_PATCH}


class DirectAccess:
    store: "Store"
    kubelet: "Kubelet"
    jobs: "JobController"

    def settle(self) -> None:  # provided by KubeEmulator
        raise NotImplementedError

    def create(self, obj: Mapping[str, Any]) -> dict[str, Any]:
        """Create any served object (``apiVersion``/``kind`` required); its namespace is made if missing."""
        r = resources.for_object(dict(obj))
        ns = (obj.get("metadata") or {}).get("namespace") if r.namespaced else None
        with self.store.lock:
            if r.namespaced:
                ns = ns or "default"
                ns_type = resources.resolve("namespaces")
                if self.store.get(ns_type, None, ns) is None:
                    self.store.create(ns_type, {"metadata": {"name": ns}})
            created = self.store.create(r, dict(obj), ns, strict=False)
            self.settle()
            return copy.deepcopy(self.store.get(r, ns, created["metadata"]["name"]) or created)

    def get(self, kind: str, ns: str | None, name: str) -> dict[str, Any] | None:
        return copy.deepcopy(self.store.get(resources.resolve(kind), ns, name))

    def list(self, kind: str, ns: str | None = None, label_selector: str | None = None,
             field_selector: str | None = None) -> list[dict[str, Any]]:
        r = resources.resolve(kind)
        fields = parse_field_selector(field_selector, r.kind) if field_selector else None
        return copy.deepcopy(self.store.list(r, ns, parse_label_selector(label_selector), fields))

    def patch(self, kind: str, ns: str | None, name: str, patch: Any, patch_type: str = "merge",
              subresource: str | None = None) -> dict[str, Any]:
        """``patch_type`` is merge, strategic or json; ``subresource="status"`` to touch status."""
        r = resources.resolve(kind)
        with self.store.lock:
            out = self.store.patch(r, ns, name, patch, _PATCH_TYPES[patch_type], subresource)
            self.settle()
            return copy.deepcopy(out)

    def replace(self, obj: Mapping[str, Any], subresource: str | None = None) -> dict[str, Any]:
        r = resources.for_object(dict(obj))
        meta = obj["metadata"]
        with self.store.lock:
            out = self.store.replace(r, meta.get("namespace"), meta["name"], dict(obj), subresource)
            self.settle()
            return copy.deepcopy(out)

    def delete(self, kind: str, ns: str | None, name: str, propagation: str | None = None) -> dict[str, Any]:
        r = resources.resolve(kind)
        with self.store.lock:
            out = self.store.delete(r, ns, name, {"propagationPolicy": propagation} if propagation else {})
            self.settle()
            return copy.deepcopy(out)

    # ---- nodes -------------------------------------------------------------------------------
    def add_node(self, name: str, gpus: int = 8, labels: Mapping[str, str] | None = None,
                 conditions: Mapping[str, str] | list[dict[str, Any]] | None = None,
                 taints: list[dict[str, Any]] | None = None, unschedulable: bool = False,
                 capacity: Mapping[str, str] | None = None) -> dict[str, Any]:
        """A Ready node with ``gpus`` allocatable ``nvidia.com/gpu`` (plus cpu/memory/pods)."""
        now = rfc3339(self.store.clock())
        if conditions is None:
            conditions = {"Ready": "True"}
        if isinstance(conditions, Mapping):
            conditions = [{"type": t, "status": s, "reason": "Emulated", "message": "",
                           "lastHeartbeatTime": now, "lastTransitionTime": now}
                          for t, s in conditions.items()]
        cap = {"cpu": "96", "memory": "1024Gi", "pods": "110", GPU: str(gpus), **(capacity or {})}
        spec: dict[str, Any] = {"taints": list(taints)} if taints else {}
        if unschedulable:
            spec["unschedulable"] = True
        return self.create({
            "apiVersion": "v1", "kind": "Node",
            "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name,
                                                  "kubernetes.io/os": "linux", **(labels or {})}},
            "spec": spec,
            "status": {"capacity": cap, "allocatable": dict(cap), "conditions": list(conditions),
                       "nodeInfo": {"kubeletVersion": "v1.30.0", "kubeProxyVersion": "v1.30.0",
                                    "architecture": "amd64", "operatingSystem": "linux",
                                    "bootID": name, "machineID": name, "systemUUID": name,
                                    "containerRuntimeVersion": "containerd://1.7.15",
                                    "kernelVersion": "6.1.0", "osImage": "Emulated Linux"},
                       "addresses": [{"type": "Hostname", "address": name}]},
        })

    def set_node_condition(self, name: str, ctype: str, status: str, reason: str = "Emulated",
                           message: str = "") -> dict[str, Any]:
        now = rfc3339(self.store.clock())
        condition = {"type": ctype, "status": status, "reason": reason, "message": message,
                     "lastHeartbeatTime": now, "lastTransitionTime": now}
        return self.patch("nodes", None, name, {"status": {"conditions": [condition]}},
                          "strategic", subresource="status")

    # ---- jobs and pods -----------------------------------------------------------------------
    def job_pods(self, ns: str, name: str, active_only: bool = True) -> list[dict[str, Any]]:
        job = self.store.must_get(resources.resolve("jobs"), ns, name)
        pods = self.list("pods", ns, label_selector=f"{JOB_UID_LABEL}={job['metadata']['uid']}")
        if active_only:
            pods = [p for p in pods if p["status"].get("phase") not in ("Succeeded", "Failed")]
        return pods

    def complete_job(self, ns: str, name: str) -> dict[str, Any]:
        with self.store.lock:
            self.jobs.complete(ns, name)
            self.settle()
        return self.get("jobs", ns, name) or {}

    def fail_job(self, ns: str, name: str) -> dict[str, Any]:
        with self.store.lock:
            self.jobs.fail(ns, name)
            self.settle()
        return self.get("jobs", ns, name) or {}

    def fail_pod(self, ns: str, name: str, reason: str = "Error") -> dict[str, Any]:
        with self.store.lock:
            pod = self.store.must_get(resources.resolve("pods"), ns, name)
            out = self.kubelet.finish_pod(pod, succeeded=False, reason=reason)
            self.settle()
            return copy.deepcopy(out)

    def succeed_pod(self, ns: str, name: str) -> dict[str, Any]:
        with self.store.lock:
            pod = self.store.must_get(resources.resolve("pods"), ns, name)
            out = self.kubelet.finish_pod(pod, succeeded=True)
            self.settle()
            return copy.deepcopy(out)

    @property
    def terminations(self) -> list[Termination]:
        with self.store.lock:
            return list(self.kubelet.terminations)

    def free_gpus(self) -> dict[str, int]:
        with self.store.lock:
            return self.kubelet.free_gpus()
