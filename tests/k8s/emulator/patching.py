"""The three PATCH flavours of the API server: JSON merge, strategic merge and JSON patch.

- ``application/merge-patch+json`` (RFC 7386): maps merge recursively, ``null`` deletes a key,
  every list is replaced whole.
- ``application/strategic-merge-patch+json`` (what the python client sends for a dict body):
  like merge patch, but lists the Kubernetes types declare ``patchStrategy: merge`` are merged
  element-wise by their ``patchMergeKey`` (:data:`MERGE_KEYS`: containers/env/volumes by
  ``name``, conditions/addresses by ``type``, ownerReferences by ``uid``, ...) and
  ``metadata.finalizers`` is a set union. Lists without a strategy (tolerations, node taints,
  nodeSelectorTerms, args) are replaced, as in Kubernetes. Directives: ``$patch: replace|delete``
  (maps and list elements), ``$deleteFromPrimitiveList/<f>``, ``$retainKeys``, and
  ``$setElementOrder/<f>`` (accepted, ordering ignored).
- ``application/json-patch+json`` (RFC 6902, a list of operations) via ``jsonpatch``.

Server-side apply (``application/apply-patch+yaml``) is refused with 415 rather than
approximated: its field-ownership semantics would be silently wrong.
"""
from __future__ import annotations

import copy
from typing import Any

import jsonpatch

from .errors import ApiError

MERGE_KEYS: dict[str, str] = {
    "containers": "name", "initContainers": "name", "ephemeralContainers": "name",
    "env": "name", "volumes": "name", "imagePullSecrets": "name", "resourceClaims": "name",
    "schedulingGates": "name", "ports": "containerPort", "volumeMounts": "mountPath",
    "volumeDevices": "devicePath", "conditions": "type", "addresses": "type",
    "ownerReferences": "uid", "hostAliases": "ip", "podIPs": "ip", "hostIPs": "ip",
    "topologySpreadConstraints": "topologyKey",
}
SET_LISTS: frozenset[str] = frozenset({"metadata.finalizers", "spec.podCIDRs"})

MERGE = "application/merge-patch+json"
STRATEGIC = "application/strategic-merge-patch+json"
JSON_PATCH = "application/json-patch+json"
APPLY = "application/apply-patch+yaml"


def apply_patch(target: dict[str, Any], patch: Any, content_type: str) -> dict[str, Any]:
    """Return a patched deep copy of ``target``; ``content_type`` picks the flavour."""
    content_type = (content_type or "").split(";")[0].strip().lower()
    if content_type == JSON_PATCH:
        if not isinstance(patch, list):
            raise ApiError(400, "json patch must be a list of operations")
        try:
            return jsonpatch.apply_patch(copy.deepcopy(target), patch)
        except (jsonpatch.JsonPatchException, jsonpatch.JsonPointerException) as exc:
            raise ApiError(422, f"the server rejected our request due to an error in our request: {exc}",
                           "Invalid") from exc
    if content_type in (MERGE, STRATEGIC):
        if not isinstance(patch, dict):
            raise ApiError(400, "patch body must be a JSON object")
        if content_type == MERGE:
            return merge_patch(copy.deepcopy(target), patch)
        return strategic_merge(copy.deepcopy(target), patch, "")
    if content_type == APPLY:
        raise ApiError(415, "server-side apply is not supported by the test emulator; use a "
                            "strategic-merge, merge or JSON patch", "UnsupportedMediaType")
    raise ApiError(415, f"the body of the request was in an unknown format - accepted media types "
                        f"include: {JSON_PATCH}, {MERGE}, {STRATEGIC}, {APPLY}",
                   "UnsupportedMediaType")


def merge_patch(target: Any, patch: Any) -> Any:
    """RFC 7386 JSON merge patch (mutates and returns ``target`` when both are dicts)."""
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    if not isinstance(target, dict):
        target = {}
    for key, value in patch.items():
        if value is None:
            target.pop(key, None)
        else:
            target[key] = merge_patch(target.get(key), value)
    return target


def strategic_merge(target: Any, patch: dict[str, Any], path: str) -> Any:
    """Strategic merge of a map ``patch`` into ``target`` found at dotted ``path``."""
    directive = patch.get("$patch")
    if directive == "delete":
        return None
    if directive == "replace":
        return {k: copy.deepcopy(v) for k, v in patch.items() if k != "$patch"}
    if not isinstance(target, dict):
        target = {}
    retain = patch.get("$retainKeys")
    for key, value in patch.items():
        if key.startswith("$setElementOrder/") or key in ("$patch", "$retainKeys"):
            continue
        if key.startswith("$deleteFromPrimitiveList/"):
            field = key.split("/", 1)[1]
            if isinstance(target.get(field), list):
                target[field] = [item for item in target[field] if item not in value]
            continue
        child_path = f"{path}.{key}" if path else key
        if value is None:
            target.pop(key, None)
        elif isinstance(value, dict):
            merged = strategic_merge(target.get(key), value, child_path)
            if merged is None:
                target.pop(key, None)
            else:
                target[key] = merged
        elif isinstance(value, list):
            target[key] = _merge_list(target.get(key), value, key, child_path)
        else:
            target[key] = copy.deepcopy(value)
    if isinstance(retain, list):
        for key in list(target):
            if key not in retain:
                del target[key]
    return target


def _merge_list(current: Any, patch: list[Any], field: str, path: str) -> list[Any]:
    current = current if isinstance(current, list) else []
    if path in SET_LISTS or path.endswith(".metadata.finalizers"):
        merged = list(current)
        for item in patch:
            if item not in merged:
                merged.append(copy.deepcopy(item))
        return merged
    key = MERGE_KEYS.get(field)
    if key is None or not all(isinstance(item, dict) for item in patch):
        return [_strip_directives(copy.deepcopy(item)) for item in patch]
    if any(item.get("$patch") == "replace" for item in patch):
        return [_strip_directives(copy.deepcopy(item)) for item in patch if item.get("$patch") != "replace"]
    merged = [copy.deepcopy(item) for item in current]
    for item in patch:
        ident = item.get(key)
        index = next((i for i, existing in enumerate(merged)
                      if isinstance(existing, dict) and existing.get(key) == ident), None)
        if item.get("$patch") == "delete":
            if index is not None:
                del merged[index]
            continue
        if index is None:
            merged.append(_strip_directives(copy.deepcopy(item)))
        else:
            merged[index] = strategic_merge(merged[index], item, path + "[]")
    return merged


def _strip_directives(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _strip_directives(v) for k, v in value.items() if not k.startswith("$")}
    if isinstance(value, list):
        return [_strip_directives(v) for v in value]
    return value
