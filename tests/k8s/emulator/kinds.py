"""Per-kind defaulting and validation, mirroring the API server's registry strategies.

Only the rules a controller can trip over are emulated, each as the real server words it:

- names: lowercase RFC 1123 (a label for Namespaces and Jobs, a subdomain otherwise);
- Jobs: ``restartPolicy`` must be Never/OnFailure, Indexed needs ``completions``, defaults
  (parallelism, completions, backoffLimit, completionMode, suspend, selector and the
  ``controller-uid``/``job-name`` template labels); on update ``spec.selector`` and
  ``spec.completionMode`` are immutable and ``spec.template`` is immutable except its scheduling
  directives (nodeSelector, affinity, tolerations, schedulingGates, labels, annotations) while the
  Job is suspended and has never started (``status.startTime`` unset), as in Kubernetes >= 1.27;
- Pods: ``spec`` is immutable except container images, ``activeDeadlineSeconds``, added
  tolerations and removed scheduling gates; ``spec.nodeName`` cannot be changed by an update;
- ConfigMaps: string values only, at most 1 MiB of data, ``immutable: true`` honoured;
- core/v1 Events: ``involvedObject.namespace`` must match the Event's namespace.

The default deletion propagation of batch/v1 Jobs is ``Orphan`` (the API server keeps it for
backward compatibility): deleting a Job without ``propagationPolicy`` leaves its pods running.
"""
from __future__ import annotations

import json
import re
from typing import TYPE_CHECKING, Any

from . import errors
from .resources import ResourceType

if TYPE_CHECKING:
    from .store import Store

_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
CONFIGMAP_MAX_BYTES = 1024 * 1024
JOB_UID_LABEL = "batch.kubernetes.io/controller-uid"
JOB_NAME_LABEL = "batch.kubernetes.io/job-name"
MUTABLE_TEMPLATE_SPEC = ("nodeSelector", "affinity", "tolerations", "schedulingGates")


def validate_name(r: ResourceType, name: str) -> None:
    if r.kind in ("Namespace", "Job"):
        if len(name) > 63 or not _LABEL.match(name):
            raise errors.invalid(r.kind, r.group, name, "metadata.name",
                                 f'Invalid value: "{name}": a lowercase RFC 1123 label must consist '
                                 "of lower case alphanumeric characters or '-', and must start and "
                                 "end with an alphanumeric character (at most 63 characters)")
    elif len(name) > 253 or not _SUBDOMAIN.match(name):
        raise errors.invalid(r.kind, r.group, name, "metadata.name",
                             f'Invalid value: "{name}": a lowercase RFC 1123 subdomain must consist '
                             "of lower case alphanumeric characters, '-' or '.', and must start "
                             "and end with an alphanumeric character")


def default_propagation(r: ResourceType) -> str:
    return "Orphan" if r.kind == "Job" else "Background"


def default_on_create(r: ResourceType, obj: dict[str, Any], store: "Store") -> None:
    meta = obj["metadata"]
    if r.kind == "Namespace":
        meta.setdefault("labels", {})["kubernetes.io/metadata.name"] = meta["name"]
        obj.setdefault("spec", {}).setdefault("finalizers", ["kubernetes"])
        obj["status"] = {"phase": "Active"}
    elif r.kind == "Node":
        obj.setdefault("spec", {})
        status = obj.setdefault("status", {})
        status.setdefault("conditions", [])
        status.setdefault("capacity", {})
        status.setdefault("allocatable", dict(status["capacity"]))
    elif r.kind == "Pod":
        _validate_pod_spec(r, meta["name"], obj.get("spec"), "spec")
        spec = obj["spec"]
        spec.setdefault("restartPolicy", "Always")
        spec.setdefault("schedulerName", "default-scheduler")
        spec.setdefault("terminationGracePeriodSeconds", 30)
        spec.setdefault("dnsPolicy", "ClusterFirst")
        obj["status"] = {"phase": "Pending", "qosClass": "BestEffort"}
    elif r.kind == "Job":
        _default_job(r, obj)
    elif r.kind == "ConfigMap":
        _validate_configmap(r, obj)
    elif r.kind == "Event" and r.group == "":
        involved_ns = (obj.get("involvedObject") or {}).get("namespace")
        if involved_ns and involved_ns != meta["namespace"]:
            raise errors.invalid(r.kind, r.group, meta["name"], "involvedObject.namespace",
                                 f'Invalid value: "{involved_ns}": does not match event.namespace')
    elif r.kind == "PodDisruptionBudget":
        meta["generation"] = 1
        obj["status"] = {"currentHealthy": 0, "desiredHealthy": 0, "disruptionsAllowed": 0,
                         "expectedPods": 0, "observedGeneration": 1}


def _validate_pod_spec(r: ResourceType, name: str, spec: Any, field: str) -> None:
    if not isinstance(spec, dict) or not spec.get("containers"):
        raise errors.invalid(r.kind, r.group, name, f"{field}.containers", "Required value")
    if not isinstance(spec["containers"], list):  # (a real server refuses it when decoding)
        raise errors.invalid(r.kind, r.group, name, f"{field}.containers",
                             "Invalid value: must be a list of containers")
    for i, container in enumerate(spec["containers"]):
        if not isinstance(container, dict) or not container.get("name") or not container.get("image"):
            raise errors.invalid(r.kind, r.group, name, f"{field}.containers[{i}]",
                                 "Required value: name and image are required")


def _default_job(r: ResourceType, job: dict[str, Any]) -> None:
    meta, name = job["metadata"], job["metadata"]["name"]
    spec = job.setdefault("spec", {})
    template = spec.get("template")
    if not isinstance(template, dict):
        raise errors.invalid(r.kind, r.group, name, "spec.template", "Required value")
    _validate_pod_spec(r, name, template.get("spec"), "spec.template.spec")
    if template["spec"].get("restartPolicy") not in ("Never", "OnFailure"):
        raise errors.invalid(r.kind, r.group, name, "spec.template.spec.restartPolicy",
                             'Required value: valid values: "OnFailure", "Never"')
    spec.setdefault("completionMode", "NonIndexed")
    if spec["completionMode"] not in ("NonIndexed", "Indexed"):
        raise errors.invalid(r.kind, r.group, name, "spec.completionMode",
                             f'Unsupported value: "{spec["completionMode"]}"')
    if spec["completionMode"] == "Indexed" and spec.get("completions") is None:
        raise errors.invalid(r.kind, r.group, name, "spec.completions",
                             "Required value: when completion mode is Indexed")
    if spec.get("completions") is None and spec.get("parallelism") is None:
        spec["completions"] = 1
    spec.setdefault("parallelism", 1)
    spec.setdefault("backoffLimit", 6)
    spec.setdefault("suspend", False)
    spec.setdefault("podReplacementPolicy", "TerminatingOrFailed")
    uid = meta["uid"]
    spec["selector"] = {"matchLabels": {JOB_UID_LABEL: uid}}
    labels = template.setdefault("metadata", {}).setdefault("labels", {})
    labels.update({JOB_UID_LABEL: uid, JOB_NAME_LABEL: name, "controller-uid": uid, "job-name": name})
    meta["generation"] = 1
    job["status"] = {}


def _validate_configmap(r: ResourceType, obj: dict[str, Any]) -> None:
    name = obj["metadata"]["name"]
    data = obj.get("data") or {}
    if not isinstance(data, dict) or not all(isinstance(v, str) for v in data.values()):
        raise errors.bad_request("ConfigMap in version \"v1\" cannot be handled as a ConfigMap: "
                                 "json: cannot unmarshal non-string into Go struct field "
                                 "ConfigMap.data of type string")
    size = sum(len(k) + len(v.encode()) for k, v in data.items())
    size += sum(len(k) + len(str(v)) * 3 // 4 for k, v in (obj.get("binaryData") or {}).items())
    if size > CONFIGMAP_MAX_BYTES:
        raise errors.invalid(r.kind, r.group, name, "[]",
                             f"Too long: must have at most {CONFIGMAP_MAX_BYTES} bytes")


def validate_update(r: ResourceType, old: dict[str, Any], new: dict[str, Any]) -> None:
    name = old["metadata"]["name"]
    if r.kind == "Job":
        _validate_job_update(r, name, old, new)
    elif r.kind == "Pod":
        _validate_pod_update(r, name, old, new)
    elif r.kind == "ConfigMap":
        _validate_configmap(r, new)
        if old.get("immutable") and (old.get("data") != new.get("data")
                                     or old.get("binaryData") != new.get("binaryData")
                                     or not new.get("immutable")):
            raise errors.invalid(r.kind, r.group, name, "data",
                                 "Forbidden: field is immutable when `immutable` is set")


def _immutable(r: ResourceType, name: str, field: str, value: Any) -> errors.ApiError:
    return errors.invalid(r.kind, r.group, name, field,
                          f"Invalid value: {json.dumps(value, sort_keys=True)}: field is immutable")


def _validate_job_update(r: ResourceType, name: str, old: dict[str, Any], new: dict[str, Any]) -> None:
    old_spec, new_spec = old.get("spec") or {}, new.get("spec") or {}
    for field in ("selector", "completionMode"):
        if old_spec.get(field) != new_spec.get(field):
            raise _immutable(r, name, f"spec.{field}", new_spec.get(field))
    if old_spec.get("completions") != new_spec.get("completions"):
        elastic = (new_spec.get("completionMode") == "Indexed"
                   and new_spec.get("completions") == new_spec.get("parallelism")
                   and old_spec.get("completions") == old_spec.get("parallelism"))
        if not elastic:
            raise _immutable(r, name, "spec.completions", new_spec.get("completions"))
    old_t, new_t = old_spec.get("template") or {}, new_spec.get("template") or {}
    if old_t == new_t:
        return
    suspended_never_started = bool(old_spec.get("suspend")) and not (old.get("status") or {}).get("startTime")
    if suspended_never_started:
        strip_meta = lambda t: {k: v for k, v in (t.get("metadata") or {}).items()  # noqa: E731
                                if k not in ("labels", "annotations")}
        strip_spec = lambda t: {k: v for k, v in (t.get("spec") or {}).items()  # noqa: E731
                                if k not in MUTABLE_TEMPLATE_SPEC}
        if strip_meta(old_t) == strip_meta(new_t) and strip_spec(old_t) == strip_spec(new_t):
            new_labels = (new_t.get("metadata") or {}).get("labels") or {}
            if new_labels.get(JOB_UID_LABEL) != old["metadata"]["uid"]:
                raise errors.invalid(r.kind, r.group, name, "spec.template.metadata.labels",
                                     "Invalid value: `selector` does not match template `labels`")
            return
    raise _immutable(r, name, "spec.template", new_t)


def _validate_pod_update(r: ResourceType, name: str, old: dict[str, Any], new: dict[str, Any]) -> None:
    old_spec, new_spec = old.get("spec") or {}, new.get("spec") or {}

    def normalized(spec: dict[str, Any]) -> dict[str, Any]:
        out = {k: v for k, v in spec.items()
               if k not in ("activeDeadlineSeconds", "tolerations", "schedulingGates")}
        for field in ("containers", "initContainers"):
            if field in out:
                out[field] = [{k: v for k, v in c.items() if k != "image"} for c in out[field]]
        return out

    added_only = all(t in (new_spec.get("tolerations") or []) for t in old_spec.get("tolerations") or [])
    gates_removed_only = all(g in (old_spec.get("schedulingGates") or [])
                             for g in new_spec.get("schedulingGates") or [])
    if normalized(old_spec) != normalized(new_spec) or not added_only or not gates_removed_only:
        raise errors.invalid(r.kind, r.group, name, "spec",
                             "Forbidden: pod updates may not change fields other than "
                             "`spec.containers[*].image`, `spec.initContainers[*].image`, "
                             "`spec.activeDeadlineSeconds`, `spec.tolerations` (only additions to "
                             "existing tolerations), `spec.schedulingGates` (only removals)")
