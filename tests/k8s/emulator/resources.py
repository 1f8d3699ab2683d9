"""The resource types the emulator serves, and their registration for kmock's discovery.

Each :class:`ResourceType` says where a kind lives (group/version/plural), whether it is
namespaced, which subresources it has, and whether it has a ``status`` subresource (then the main
endpoint ignores status changes and ``/status`` ignores everything but status, as in Kubernetes).
"""
from __future__ import annotations

from dataclasses import dataclass

import kmock

VERBS = ("create", "delete", "deletecollection", "get", "list", "patch", "update", "watch")


@dataclass(frozen=True)
class ResourceType:
    group: str
    version: str
    plural: str
    kind: str
    namespaced: bool
    subresources: tuple[str, ...] = ()
    short_names: tuple[str, ...] = ()

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version

    @property
    def has_status(self) -> bool:
        return "status" in self.subresources

    @property
    def key(self) -> str:
        """``group/version/plural`` with an empty group for core (``/v1/pods``)."""
        return f"{self.group}/{self.version}/{self.plural}"

    def path(self, namespace: str | None = None, name: str | None = None) -> str:
        base = f"/apis/{self.group}/{self.version}" if self.group else f"/api/{self.version}"
        if self.namespaced and namespace:
            base += f"/namespaces/{namespace}"
        base += f"/{self.plural}"
        return f"{base}/{name}" if name else base


RESOURCES: tuple[ResourceType, ...] = (
    ResourceType("", "v1", "namespaces", "Namespace", False, ("status",), ("ns",)),
    ResourceType("", "v1", "nodes", "Node", False, ("status",), ("no",)),
    ResourceType("", "v1", "pods", "Pod", True, ("status", "eviction"), ("po",)),
    ResourceType("", "v1", "events", "Event", True, (), ("ev",)),
    ResourceType("", "v1", "configmaps", "ConfigMap", True, (), ("cm",)),
    ResourceType("batch", "v1", "jobs", "Job", True, ("status",)),
    ResourceType("coordination.k8s.io", "v1", "leases", "Lease", True),
    ResourceType("events.k8s.io", "v1", "events", "Event", True, (), ("ev",)),
    ResourceType("policy", "v1", "poddisruptionbudgets", "PodDisruptionBudget", True,
                 ("status",), ("pdb",)),
)

_BY_PATH = {(r.group, r.version, r.plural): r for r in RESOURCES}
_BY_KIND: dict[str, ResourceType] = {}
for _r in RESOURCES:
    _BY_KIND.setdefault(_r.kind.lower(), _r)  # "event" -> core/v1 (first registered)
    _BY_KIND.setdefault(_r.plural, _r)
    _BY_KIND[_r.key.lstrip("/")] = _r
    _BY_KIND[f"{_r.api_version}/{_r.plural}"] = _r
    _BY_KIND[f"{_r.api_version}/{_r.kind}".lower()] = _r


def by_path(group: str, version: str, plural: str) -> ResourceType | None:
    return _BY_PATH.get((group, version, plural))


def resolve(kind: str) -> ResourceType:
    """``"Job"``, ``"jobs"``, ``"batch/v1/jobs"``, ``"v1/pods"`` or ``"events.k8s.io/v1/Event"``."""
    found = _BY_KIND.get(kind) or _BY_KIND.get(kind.lower())
    if found is None:
        raise KeyError(f"the emulator does not serve {kind!r}")
    return found


def for_object(obj: dict) -> ResourceType:
    api_version, kind = obj.get("apiVersion", ""), obj.get("kind", "")
    for resource in RESOURCES:
        if resource.api_version == api_version and resource.kind == kind:
            return resource
    raise KeyError(f"the emulator does not serve apiVersion={api_version!r} kind={kind!r}")


def declare(handler: kmock.KubernetesScaffold) -> None:
    """Register every resource in kmock's resource array so its discovery endpoints list it."""
    for r in RESOURCES:
        handler.resources[kmock.resource(r.group, r.version, r.plural)] = kmock.ResourceInfo(
            namespaced=r.namespaced, kind=r.kind, singular=r.kind.lower(), verbs=set(VERBS),
            shortnames=set(r.short_names), subresources=set(r.subresources))
