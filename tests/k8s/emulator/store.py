"""The emulator's object store: etcd plus the API server's registry logic, without HTTP.

- One global, monotonically increasing resourceVersion; every write bumps it and stamps the
  object's ``metadata.resourceVersion`` (a decimal string, as in Kubernetes).
- Stored objects are never mutated in place: each write stores a fresh dict, so readers and the
  watch log can share them without copying (callers outside the package get deep copies).
- Per-resource change logs (the API server's watch cache) keep the last ``history_window``
  events; ``compact(rv)`` forgets everything up to ``rv``. A watch that resumes from a
  resourceVersion older than what a log still holds is answered with ``410 Gone``.
- Create fills uid, creationTimestamp, generateName, generation; PUT and PATCH enforce
  ``metadata.resourceVersion`` preconditions (409 Conflict), keep immutable metadata, and route
  status through the ``status`` subresource only (for kinds that have one). Deletion honours
  finalizers (deletionTimestamp first) and ``propagationPolicy`` for owned objects.

Kind-specific defaulting and validation live in :mod:`.kinds`; controllers subscribe through
``on_commit`` and run synchronously under the same lock, so a test that unsuspends a Job sees its
pods in the next read.
"""
from __future__ import annotations

import copy
import random
import threading
import uuid
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from . import errors, kinds
from .clock import Clock, rfc3339
from .patching import apply_patch
from .resources import RESOURCES, ResourceType, resolve
from .selectors import Requirement, match_requirements

Key = tuple[str | None, str]  # (namespace, name)
_NAME_ALPHABET = "bcdfghjklmnpqrstvwxz2456789"


@dataclass(frozen=True)
class Change:
    """One watch-log entry: the object after the change and, for MODIFIED, before it."""
    rv: int
    type: str  # ADDED | MODIFIED | DELETED
    obj: dict[str, Any]
    old: dict[str, Any] | None
    note: Mapping[str, Any] | None = None  # deletes: {"reason": ..., "grace": seconds | None}


class Store:
    def __init__(self, clock: Clock, history_window: int = 50_000) -> None:
        self.lock = threading.RLock()
        self.clock = clock
        self.rv = 0
        self.history_window = history_window
        self._objects: dict[str, dict[Key, dict[str, Any]]] = {r.key: {} for r in RESOURCES}
        self._logs: dict[str, list[Change]] = {r.key: [] for r in RESOURCES}
        self._compacted: dict[str, int] = {r.key: 0 for r in RESOURCES}  # resume floor
        self._trimmed: dict[str, int] = {r.key: 0 for r in RESOURCES}  # newest change forgotten
        self.on_commit: list[Callable[[ResourceType, Change], None]] = []
        self.on_change: list[Callable[[], None]] = []  # called by flush() after a batch of writes
        self._unflushed = False
        self._owned: dict[str, set[tuple[ResourceType, str | None, str]]] = {}  # owner uid -> objects

    # ---- reads -------------------------------------------------------------------------------
    def get(self, r: ResourceType, ns: str | None, name: str) -> dict[str, Any] | None:
        with self.lock:
            return self._objects[r.key].get((ns if r.namespaced else None, name))

    def must_get(self, r: ResourceType, ns: str | None, name: str) -> dict[str, Any]:
        obj = self.get(r, ns, name)
        if obj is None:
            raise errors.not_found(r.plural, r.group, name)
        return obj

    def list(self, r: ResourceType, ns: str | None = None,
             labels: list[Requirement] | None = None,
             fields: Callable[[Mapping[str, Any]], bool] | None = None) -> list[dict[str, Any]]:
        with self.lock:
            items = [obj for (obj_ns, _), obj in self._objects[r.key].items()
                     if ns is None or obj_ns == ns]
        items.sort(key=lambda o: (o["metadata"].get("namespace", ""), o["metadata"]["name"]))
        return [o for o in items
                if (not labels or match_requirements(labels, o["metadata"].get("labels")))
                and (fields is None or fields(o))]

    def changes_after(self, r: ResourceType, rv: int) -> tuple[list[Change], int]:
        """Changes with resourceVersion > rv, and the global rv they are complete up to.

        Raises 410 if a change after ``rv`` has already been dropped from the log.
        """
        with self.lock:
            if rv < self._trimmed[r.key]:
                raise errors.gone(f"too old resource version: {rv} ({self._trimmed[r.key] + 1})")
            log = self._logs[r.key]
            if not log or log[-1].rv <= rv:
                return [], self.rv
            lo, hi = 0, len(log)
            while lo < hi:
                mid = (lo + hi) // 2
                if log[mid].rv <= rv:
                    lo = mid + 1
                else:
                    hi = mid
            return log[lo:], self.rv

    def compacted(self, r: ResourceType) -> int:
        with self.lock:
            return self._compacted[r.key]

    def compact(self, rv: int) -> None:
        """Refuse resumes from before ``rv`` (410); live watchers keep streaming (watch cache)."""
        with self.lock:
            for key in self._logs:
                self._compacted[key] = max(self._compacted[key], min(rv, self.rv))

    # ---- low-level write (controllers use it directly) ----------------------------------------
    def commit(self, r: ResourceType, obj: dict[str, Any], deleted: bool = False,
               note: Mapping[str, Any] | None = None) -> dict[str, Any]:
        """Store ``obj`` (a fresh dict the caller no longer touches) under a new resourceVersion."""
        with self.lock:
            meta = obj["metadata"]
            key = (meta.get("namespace") if r.namespaced else None, meta["name"])
            old = self._objects[r.key].get(key)
            self.rv += 1
            meta["resourceVersion"] = str(self.rv)
            if deleted:
                self._objects[r.key].pop(key, None)
                change = Change(self.rv, "DELETED", obj, old, note)
            else:
                self._objects[r.key][key] = obj
                change = Change(self.rv, "MODIFIED" if old is not None else "ADDED", obj, old)
            log = self._logs[r.key]
            log.append(change)
            if len(log) > self.history_window:
                drop = len(log) - self.history_window
                self._compacted[r.key] = max(self._compacted[r.key], log[drop - 1].rv)
                self._trimmed[r.key] = max(self._trimmed[r.key], log[drop - 1].rv)
                del log[:drop]
            self._index_owners(r, key, old, None if deleted else obj)
            self._unflushed = True
            for hook in self.on_commit:
                hook(r, change)
        return obj

    def flush(self) -> None:
        """Wake the watchers once for everything committed since the last flush."""
        if self._unflushed:
            self._unflushed = False
            for notify in self.on_change:
                notify()

    def _index_owners(self, r: ResourceType, key: Key, old: dict[str, Any] | None,
                      new: dict[str, Any] | None) -> None:
        def owners(obj: dict[str, Any] | None) -> set[str]:
            refs = (obj or {}).get("metadata", {}).get("ownerReferences") or []
            return {ref["uid"] for ref in refs if ref.get("uid")}
        before, after = owners(old), owners(new)
        for uid in before - after:
            self._owned.get(uid, set()).discard((r, key[0], key[1]))
        for uid in after - before:
            self._owned.setdefault(uid, set()).add((r, key[0], key[1]))

    # ---- API operations ----------------------------------------------------------------------
    def create(self, r: ResourceType, body: dict[str, Any], ns: str | None = None,
               dry_run: bool = False, strict: bool = True) -> dict[str, Any]:
        """POST semantics; ``strict=False`` (direct test access) tolerates a set resourceVersion."""
        with self.lock:
            if strict and (body.get("metadata") or {}).get("resourceVersion"):
                # etcd3 storage refuses it with a plain error, which the API server returns as a 500
                raise errors.ApiError(500, "resourceVersion should not be set on objects to be created")
            obj = copy.deepcopy(body)
            obj["apiVersion"], obj["kind"] = r.api_version, r.kind
            meta = obj.setdefault("metadata", {})
            if r.namespaced:
                body_ns = meta.get("namespace")
                if ns and body_ns and body_ns != ns:
                    raise errors.bad_request("the namespace of the provided object does not match "
                                             "the namespace sent on the request")
                meta["namespace"] = ns = ns or body_ns or "default"
                ns_type = resolve("namespaces")
                namespace = self.get(ns_type, None, ns)
                if namespace is None:
                    raise errors.not_found("namespaces", "", ns)
                if namespace["metadata"].get("deletionTimestamp"):
                    raise errors.ApiError(403, f'{r.plural}{"." + r.group if r.group else ""} '
                                          f'"{meta.get("name", "")}" is forbidden: unable to create '
                                          f"new content in namespace {ns} because it is being "
                                          "terminated", "Forbidden")
            else:
                meta.pop("namespace", None)
            if not meta.get("name"):
                if not meta.get("generateName"):
                    raise errors.invalid(r.kind, r.group, "", "metadata.name",
                                         "Required value: name or generateName is required")
                for _ in range(100):
                    name = meta["generateName"] + "".join(random.choices(_NAME_ALPHABET, k=5))
                    if self.get(r, ns, name) is None:
                        break
                meta["name"] = name
            kinds.validate_name(r, meta["name"])
            if self.get(r, ns, meta["name"]) is not None:
                raise errors.already_exists(r.plural, r.group, meta["name"])
            for field in ("resourceVersion", "deletionTimestamp", "deletionGracePeriodSeconds"):
                meta.pop(field, None)
            meta["uid"] = str(uuid.uuid4())
            meta["creationTimestamp"] = rfc3339(self.clock())
            kinds.default_on_create(r, obj, self)
            if dry_run:
                return obj
            return self.commit(r, obj)

    def replace(self, r: ResourceType, ns: str | None, name: str, body: dict[str, Any],
                subresource: str | None = None, dry_run: bool = False) -> dict[str, Any]:
        with self.lock:
            old = self.must_get(r, ns, name)
            body_meta = body.get("metadata") or {}
            if body_meta.get("name") not in (None, name):
                raise errors.bad_request(f"the name of the object ({body_meta.get('name')}) does "
                                         f"not match the name on the URL ({name})")
            wanted_rv = body_meta.get("resourceVersion")
            if wanted_rv not in (None, "") and wanted_rv != old["metadata"]["resourceVersion"]:
                raise errors.conflict(r.plural, r.group, name)
            return self._update(r, old, copy.deepcopy(body), subresource, dry_run)

    def patch(self, r: ResourceType, ns: str | None, name: str, patch: Any, content_type: str,
              subresource: str | None = None, dry_run: bool = False) -> dict[str, Any]:
        with self.lock:
            old = self.must_get(r, ns, name)
            new = apply_patch(old, patch, content_type)
            wanted_rv = (new.get("metadata") or {}).get("resourceVersion")
            if wanted_rv not in (None, "") and wanted_rv != old["metadata"]["resourceVersion"]:
                raise errors.conflict(r.plural, r.group, name)
            return self._update(r, old, new, subresource, dry_run)

    def _update(self, r: ResourceType, old: dict[str, Any], new: dict[str, Any],
                subresource: str | None, dry_run: bool) -> dict[str, Any]:
        if not isinstance(new.get("metadata"), dict):
            new["metadata"] = {}
        new["apiVersion"], new["kind"] = r.api_version, r.kind
        meta, old_meta = new["metadata"], old["metadata"]
        for field in ("name", "namespace", "uid", "creationTimestamp", "deletionTimestamp",
                      "deletionGracePeriodSeconds", "generation"):
            if field in old_meta:
                meta[field] = old_meta[field]
            else:
                meta.pop(field, None)
        if subresource == "status":
            status = new.get("status")
            new = copy.deepcopy(old)
            if status is None:
                new.pop("status", None)
            else:
                new["status"] = status
        elif subresource is not None:
            raise errors.ApiError(405, f"{subresource} does not support this method", "MethodNotAllowed")
        elif r.has_status:
            if "status" in old:
                new["status"] = copy.deepcopy(old["status"])
            else:
                new.pop("status", None)
        kinds.validate_update(r, old, new)
        if "generation" in old_meta and new.get("spec") != old.get("spec"):
            meta["generation"] = old_meta["generation"] + 1
        if _same(old, new):
            return old  # a no-op write does not bump the resourceVersion (as in Kubernetes)
        if dry_run:
            return new
        if meta.get("deletionTimestamp") and not meta.get("finalizers"):
            self.commit(r, new, deleted=True)
            return new
        return self.commit(r, new)

    def delete(self, r: ResourceType, ns: str | None, name: str,
               options: Mapping[str, Any] | None = None, dry_run: bool = False) -> dict[str, Any]:
        """Delete (or mark for deletion if finalizers remain); returns the last state."""
        options = options or {}
        with self.lock:
            old = self.must_get(r, ns, name)
            pre = options.get("preconditions") or {}
            if pre.get("uid") and pre["uid"] != old["metadata"]["uid"]:
                raise errors.conflict(r.plural, r.group, name)
            if pre.get("resourceVersion") and pre["resourceVersion"] != old["metadata"]["resourceVersion"]:
                raise errors.conflict(r.plural, r.group, name)
            if dry_run:
                return old
            policy = options.get("propagationPolicy")
            if policy is None and options.get("orphanDependents") is not None:
                policy = "Orphan" if options["orphanDependents"] else "Background"
            policy = policy or kinds.default_propagation(r)
            if r.plural == "namespaces" and not old["metadata"].get("deletionTimestamp"):
                self.delete_namespace_contents(name)
            if old["metadata"].get("finalizers"):
                if old["metadata"].get("deletionTimestamp"):
                    return old
                marked = copy.deepcopy(old)
                marked["metadata"]["deletionTimestamp"] = rfc3339(self.clock())
                marked["metadata"]["deletionGracePeriodSeconds"] = 0
                return self.commit(r, marked)
            note = {"reason": options.get("_reason", "Deleted"),
                    "grace": options.get("gracePeriodSeconds")}
            gone = self.commit(r, copy.deepcopy(old), deleted=True, note=note)
            self._collect_dependents(old, policy)
            return gone

    def _collect_dependents(self, owner: dict[str, Any], policy: str) -> None:
        """The garbage collector, synchronously: delete or orphan what ``owner`` owned."""
        uid = owner["metadata"]["uid"]
        for r, ns, name in sorted(self._owned.pop(uid, set()), key=lambda x: (x[0].key, x[1] or "", x[2])):
            obj = self._objects[r.key].get((ns, name))
            if obj is not None:
                refs = obj["metadata"].get("ownerReferences") or []
                if policy == "Orphan":
                    orphan = copy.deepcopy(obj)
                    orphan["metadata"]["ownerReferences"] = [x for x in refs if x.get("uid") != uid]
                    if not orphan["metadata"]["ownerReferences"]:
                        del orphan["metadata"]["ownerReferences"]
                    self.commit(r, orphan)
                else:
                    meta = obj["metadata"]
                    self.delete(r, meta.get("namespace"), meta["name"],
                                {"propagationPolicy": "Background", "_reason": "GarbageCollected"})

    def delete_namespace_contents(self, ns: str) -> None:
        with self.lock:
            for r in RESOURCES:
                if r.namespaced:
                    for (obj_ns, name) in list(self._objects[r.key]):
                        if obj_ns == ns and self.get(r, ns, name) is not None:
                            self.delete(r, ns, name, {"propagationPolicy": "Background"})

    def all_objects(self, r: ResourceType) -> Iterable[dict[str, Any]]:
        with self.lock:
            return list(self._objects[r.key].values())


def _same(a: dict[str, Any], b: dict[str, Any]) -> bool:
    strip = lambda o: {k: v for k, v in o.items() if k != "metadata"}  # noqa: E731
    meta_a = {k: v for k, v in a["metadata"].items() if k != "resourceVersion"}
    meta_b = {k: v for k, v in b["metadata"].items() if k != "resourceVersion"}
    return strip(a) == strip(b) and meta_a == meta_b
