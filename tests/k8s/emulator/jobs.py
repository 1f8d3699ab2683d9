"""The emulated Job controller: suspend/resume, pod creation per index, completion and failure.

Follows ``pkg/controller/job`` closely enough that a reconciler driving Jobs by ``spec.suspend``
sees what it would see on a real cluster:

- A suspended Job has no active pods and a ``Suspended=True`` condition (reason
  ``JobSuspended``). Suspending a running Job deletes its active pods (the kubelet records each
  termination with reason ``Suspended`` and the template's ``terminationGracePeriodSeconds``);
  those deletions are not counted as failures. ``status.startTime`` is KEPT on suspension, as in
  Kubernetes: the template's scheduling directives stay immutable until someone clears
  ``status.startTime`` through the ``status`` subresource (what Kueue does before re-pinning).
- Resuming sets ``Suspended=False`` (reason ``JobResumed``) and resets ``status.startTime`` to
  now; a Job never suspended gets ``startTime`` when it first syncs.
- Active pods: NonIndexed makes ``min(parallelism, completions - succeeded)`` pods named
  ``<job>-xxxxx``; Indexed makes the lowest not-yet-succeeded, not-active indexes up to
  ``parallelism``, named ``<job>-<i>-xxxxx`` with the ``batch.kubernetes.io/job-completion-index``
  annotation and label. Pods carry the template plus the controller labels and an owner reference.
- A running pod that is deleted (evicted, drained) or fails counts in ``status.failed`` and is
  replaced while ``failed <= backoffLimit``; beyond that the Job gets ``FailureTarget`` + ``Failed``
  (``BackoffLimitExceeded``) and its remaining pods are deleted.
- Success: when enough pods (or all indexes) succeeded, ``SuccessCriteriaMet`` + ``Complete``,
  ``completionTime``; ``status.completedIndexes`` for Indexed Jobs.
- The controller records core/v1 Events (SuccessfulCreate, SuccessfulDelete, Suspended, Resumed,
  Completed, BackoffLimitExceeded) from ``job-controller``, like the real one.
"""
from __future__ import annotations

import copy
import secrets
from typing import Any

from .clock import rfc3339
from .kinds import JOB_NAME_LABEL, JOB_UID_LABEL
from .kubelet import Kubelet, is_terminal
from .resources import ResourceType, resolve
from .store import Change, Store

JOBS, PODS, EVENTS = resolve("jobs"), resolve("pods"), resolve("v1/events")
INDEX_KEY = "batch.kubernetes.io/job-completion-index"


def _condition(job: dict[str, Any], ctype: str) -> dict[str, Any] | None:
    return next((c for c in (job.get("status") or {}).get("conditions") or [] if c["type"] == ctype), None)


def is_finished(job: dict[str, Any]) -> bool:
    return any((_condition(job, t) or {}).get("status") == "True" for t in ("Complete", "Failed"))


def compress_indexes(indexes: set[int]) -> str:
    """``{0,1,2,5}`` -> ``"0-2,5"`` (the API's completedIndexes format)."""
    parts, ordered, i = [], sorted(indexes), 0
    while i < len(ordered):
        j = i
        while j + 1 < len(ordered) and ordered[j + 1] == ordered[j] + 1:
            j += 1
        parts.append(str(ordered[i]) if i == j else f"{ordered[i]}-{ordered[j]}")
        i = j + 1
    return ",".join(parts)


class JobController:
    def __init__(self, store: Store, kubelet: Kubelet) -> None:
        self.store = store
        self.kubelet = kubelet
        self._dirty: set[tuple[str, str]] = set()
        self._counted: set[str] = set()  # uids of pods already counted as succeeded/failed
        self._pods_of: dict[str, set[tuple[str, str]]] = {}  # job uid -> its pods' (ns, name)
        store.on_commit.append(self._observe)

    def _observe(self, r: ResourceType, change: Change) -> None:
        meta = change.obj["metadata"]
        if r.kind == "Job":
            if change.type != "DELETED":
                self._dirty.add((meta["namespace"], meta["name"]))
        elif r.kind == "Pod":
            job = (meta.get("labels") or {}).get(JOB_NAME_LABEL)
            uid = (meta.get("labels") or {}).get(JOB_UID_LABEL)
            if uid:
                pods = self._pods_of.setdefault(uid, set())
                if change.type == "DELETED":
                    pods.discard((meta["namespace"], meta["name"]))
                else:
                    pods.add((meta["namespace"], meta["name"]))
            if job:
                self._dirty.add((meta["namespace"], job))
            if change.type == "DELETED" and job and change.obj["metadata"]["uid"] not in self._counted:
                pod = change.old or change.obj
                reason = (change.note or {}).get("reason")
                if not is_terminal(pod) and reason not in ("Suspended", "JobFailed", "GarbageCollected"):
                    self._counted.add(pod["metadata"]["uid"])
                    self._bump_failed(meta["namespace"], job, pod)

    def _bump_failed(self, ns: str, name: str, pod: dict[str, Any]) -> None:
        job = self.store.get(JOBS, ns, name)
        if job is None or job["metadata"]["uid"] != (pod["metadata"].get("labels") or {}).get(JOB_UID_LABEL):
            return
        new = copy.deepcopy(job)
        new["status"]["failed"] = new["status"].get("failed", 0) + 1
        self.store.commit(JOBS, new)

    def settle(self) -> bool:
        """Sync every Job touched since the last call; True if anything was synced."""
        synced = False
        while self._dirty:
            ns, name = self._dirty.pop()
            self.sync(ns, name)
            synced = True
        return synced

    def _pods(self, job: dict[str, Any]) -> list[dict[str, Any]]:
        keys = sorted(self._pods_of.get(job["metadata"]["uid"], ()))
        return [p for p in (self.store.get(PODS, ns, name) for ns, name in keys) if p is not None]

    def sync(self, ns: str, name: str) -> None:
        job = self.store.get(JOBS, ns, name)
        if job is None or is_finished(job):
            return
        spec, status = job["spec"], dict(job.get("status") or {})
        pods = self._pods(job)
        for pod in pods:
            uid = pod["metadata"]["uid"]
            if is_terminal(pod) and uid not in self._counted:
                self._counted.add(uid)
                key = "succeeded" if pod["status"]["phase"] == "Succeeded" else "failed"
                status[key] = status.get(key, 0) + 1
        active = [p for p in pods if not is_terminal(p)]
        now = rfc3339(self.store.clock())
        indexed = spec.get("completionMode") == "Indexed"
        done_indexes = {int(p["metadata"]["annotations"][INDEX_KEY]) for p in pods
                        if indexed and (p.get("status") or {}).get("phase") == "Succeeded"}
        if indexed:
            status["completedIndexes"] = compress_indexes(done_indexes)
        conditions = list(status.get("conditions") or [])

        def set_condition(ctype: str, value: str, reason: str, message: str) -> bool:
            existing = next((c for c in conditions if c["type"] == ctype), None)
            if existing is not None and existing["status"] == value:
                return False
            if existing is None and value == "False":
                return False
            fresh = {"type": ctype, "status": value, "lastProbeTime": now,
                     "lastTransitionTime": now, "reason": reason, "message": message}
            if existing is None:
                conditions.append(fresh)
            else:
                conditions[conditions.index(existing)] = fresh
            return True

        if status.get("failed", 0) > spec.get("backoffLimit", 6):
            for pod in active:
                self._delete_pod(job, pod, "JobFailed")
            active = []
            set_condition("FailureTarget", "True", "BackoffLimitExceeded", "Job has reached the specified backoff limit")
            set_condition("Failed", "True", "BackoffLimitExceeded", "Job has reached the specified backoff limit")
            self.record_event(job, "Warning", "BackoffLimitExceeded", "Job has reached the specified backoff limit")
        elif spec.get("suspend"):
            for pod in active:
                self._delete_pod(job, pod, "Suspended")
            active = []
            if set_condition("Suspended", "True", "JobSuspended", "Job suspended"):
                self.record_event(job, "Normal", "Suspended", "Job suspended")
        else:
            if set_condition("Suspended", "False", "JobResumed", "Job resumed"):
                status["startTime"] = now
                self.record_event(job, "Normal", "Resumed", "Job resumed")
            status.setdefault("startTime", now)
            completions = spec.get("completions")
            succeeded = status.get("succeeded", 0)
            if indexed:
                complete = len(done_indexes) >= completions
            elif completions is not None:
                complete = succeeded >= completions
            else:
                complete = succeeded > 0 and not active
            if complete:
                for pod in active:
                    self._delete_pod(job, pod, "JobComplete")
                active = []
                set_condition("SuccessCriteriaMet", "True", "CompletionsReached", "Reached expected number of succeeded pods")
                set_condition("Complete", "True", "CompletionsReached", "Reached expected number of succeeded pods")
                status["completionTime"] = now
                self.record_event(job, "Normal", "Completed", "Job completed")
            else:
                active += self._create_pods(job, active, done_indexes, succeeded)
        status["active"] = len(active)
        status["ready"] = sum(1 for p in active if (p.get("status") or {}).get("phase") == "Running")
        status["terminating"] = 0
        status.setdefault("uncountedTerminatedPods", {})
        if conditions:
            status["conditions"] = conditions
        latest = self.store.get(JOBS, ns, name)
        if latest is not None and latest["metadata"]["uid"] == job["metadata"]["uid"]:
            if latest.get("status") != status:
                new = copy.deepcopy(latest)
                new["status"] = status
                self.store.commit(JOBS, new)

    def _create_pods(self, job: dict[str, Any], active: list[dict[str, Any]], done: set[int],
                     succeeded: int) -> list[dict[str, Any]]:
        spec = job["spec"]
        room = spec.get("parallelism", 1) - len(active)
        if spec.get("completionMode") == "Indexed":
            busy = {int(p["metadata"]["annotations"][INDEX_KEY]) for p in active}
            todo = [i for i in range(spec["completions"]) if i not in done and i not in busy][:max(room, 0)]
        else:
            completions = spec.get("completions")
            want = spec.get("parallelism", 1) if completions is None else min(
                spec.get("parallelism", 1), completions - succeeded)
            todo = [None] * max(want - len(active), 0)
        return [self._create_pod(job, index) for index in todo]

    def _create_pod(self, job: dict[str, Any], index: int | None) -> dict[str, Any]:
        meta, template = job["metadata"], copy.deepcopy(job["spec"]["template"])
        pod_meta = template.get("metadata") or {}
        labels = dict(pod_meta.get("labels") or {})
        annotations = dict(pod_meta.get("annotations") or {})
        prefix = f"{meta['name']}-"
        if index is not None:
            labels[INDEX_KEY] = annotations[INDEX_KEY] = str(index)
            prefix = f"{meta['name']}-{index}-"
        pod = {
            "apiVersion": "v1", "kind": "Pod",
            "metadata": {"generateName": prefix, "namespace": meta["namespace"], "labels": labels,
                         "annotations": annotations,
                         "ownerReferences": [{"apiVersion": "batch/v1", "kind": "Job", "name": meta["name"],
                                              "uid": meta["uid"], "controller": True,
                                              "blockOwnerDeletion": True}]},
            "spec": template["spec"],
        }
        created = self.store.create(PODS, pod, meta["namespace"])
        self.record_event(job, "Normal", "SuccessfulCreate", f"Created pod: {created['metadata']['name']}")
        return created

    def _delete_pod(self, job: dict[str, Any], pod: dict[str, Any], reason: str) -> None:
        grace = (pod.get("spec") or {}).get("terminationGracePeriodSeconds")
        self.store.delete(PODS, pod["metadata"]["namespace"], pod["metadata"]["name"],
                          {"gracePeriodSeconds": grace, "_reason": reason})
        self.record_event(job, "Normal", "SuccessfulDelete", f"Deleted pod: {pod['metadata']['name']}")

    def record_event(self, obj: dict[str, Any], type_: str, reason: str, message: str,
                     component: str = "job-controller") -> None:
        meta = obj["metadata"]
        now = rfc3339(self.store.clock())
        self.store.create(EVENTS, {
            "metadata": {"name": f"{meta['name']}.{secrets.token_hex(8)}", "namespace": meta.get("namespace") or "default"},
            "involvedObject": {"kind": obj["kind"], "apiVersion": obj["apiVersion"], "name": meta["name"],
                               "namespace": meta.get("namespace"), "uid": meta["uid"],
                               "resourceVersion": meta.get("resourceVersion")},
            "reason": reason, "message": message, "type": type_, "count": 1,
            "source": {"component": component}, "firstTimestamp": now, "lastTimestamp": now,
            "reportingComponent": component, "reportingInstance": "",
        })

    # ---- test helpers ------------------------------------------------------------------------
    def complete(self, ns: str, name: str) -> None:
        """Every active pod succeeds; any index never started is recorded as succeeded too."""
        job = self.store.must_get(JOBS, ns, name)
        for _ in range((job["spec"].get("completions") or 1) + 1):  # one wave per parallelism batch
            active = [p for p in self._pods(job) if not is_terminal(p)]
            if not active or is_finished(job):
                break
            for pod in active:
                self.kubelet.finish_pod(pod, succeeded=True)
            self.sync(ns, name)
            self.kubelet.settle()
            job = self.store.must_get(JOBS, ns, name)
        if not is_finished(job):  # suspended or never started: record the success directly
            new = copy.deepcopy(job)
            completions = new["spec"].get("completions") or 1
            now = rfc3339(self.store.clock())
            new["status"]["succeeded"] = completions
            if new["spec"].get("completionMode") == "Indexed":
                new["status"]["completedIndexes"] = compress_indexes(set(range(completions)))
            new["status"].setdefault("conditions", []).extend([
                {"type": t, "status": "True", "lastProbeTime": now, "lastTransitionTime": now,
                 "reason": "CompletionsReached", "message": "Reached expected number of succeeded pods"}
                for t in ("SuccessCriteriaMet", "Complete")])
            new["status"]["completionTime"] = now
            new["status"]["active"] = 0
            self.store.commit(JOBS, new)

    def fail(self, ns: str, name: str) -> None:
        """Push the Job past its backoffLimit: it fails with BackoffLimitExceeded."""
        job = self.store.must_get(JOBS, ns, name)
        new = copy.deepcopy(job)
        new["status"]["failed"] = job["spec"].get("backoffLimit", 6) + 1
        self.store.commit(JOBS, new)
        self.sync(ns, name)
