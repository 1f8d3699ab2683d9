"""The API's verbs on stored objects: what GET, POST, PUT, PATCH and DELETE do to a resource.

Reached once the route is parsed, no user reaction (fault, DSL) answered and the request is not
a watch (:mod:`.watch`): each verb runs under the store lock on :class:`~.store.Store` (which
holds the object semantics: generateName, resourceVersion preconditions, patch types) and,
after a write, lets the controllers settle before answering, so the answer already shows what
the job controller and the kubelet made of it. ``dryRun=All`` holds for every write.

- GET of one object, or a list filtered by label and field selectors and paged by ``limit`` /
  ``continue`` (the token carries the list's resourceVersion and the last key; one older than
  the compacted history is ``410 Gone``);
- POST creates, or evicts a pod (``pods/<n>/eviction``); on a named object it is ``405``;
- PUT replaces (the object or a subresource), and creates the kinds whose registry allows
  create-on-update (``CREATE_ON_UPDATE``);
- PATCH in the request's ``Content-Type`` (:mod:`.patching`);
- DELETE of one object or of a collection (the selectors apply), with ``propagationPolicy``
  and ``gracePeriodSeconds`` from the body, the query overriding.

``KubeEmulator`` (:mod:`.server`) mixes this in and provides ``settle``.
"""
from __future__ import annotations

import base64
import json
from typing import TYPE_CHECKING, Any

import kmock

from . import errors, resources
from .selectors import parse_field_selector, parse_label_selector

if TYPE_CHECKING:
    from .kubelet import Kubelet
    from .store import Store


CREATE_ON_UPDATE = ("Lease", "Event")  # registry strategies with AllowCreateOnUpdate() == true


class ResourceVerbs:
    """The verbs, on the emulator's store and kubelet (a mixin of ``KubeEmulator``)."""

    store: "Store"
    kubelet: "Kubelet"

    def settle(self) -> None:  # provided by KubeEmulator
        raise NotImplementedError

    def _execute(self, r: resources.ResourceType, method: str, ns: str | None, name: str | None,
                 sub: str | None, request: kmock.Request) -> tuple[Any, int]:
        params, data = request.params, request.data
        dry = params.get("dryRun") == "All"
        if r.namespaced and ns is None and (name or method not in ("GET",)):
            raise errors.ApiError(405, "the namespace must be given for this request", "MethodNotAllowed")
        with self.store.lock:
            if method == "GET":
                if name:
                    return self.store.must_get(r, ns, name), 200
                return self._list_body(r, ns, params), 200
            if method in ("POST", "PUT") and not isinstance(data, dict):
                raise errors.bad_request("the request body must be a JSON object")
            if method == "POST":
                if name and sub == "eviction":
                    self.kubelet.evict(ns or "", name, data)
                    self.settle()
                    return errors.status_body(201, "", "Success"), 201
                if name:
                    raise errors.ApiError(405, "POST is not allowed on a named object", "MethodNotAllowed")
                created = self.store.create(r, data, ns, dry)
                self.settle()
                return created, 201
            if method == "PUT" and name and r.kind in CREATE_ON_UPDATE and self.store.get(r, ns, name) is None:
                created = self.store.create(r, {**data, "metadata": {**(data.get("metadata") or {}),
                                                                     "name": name}}, ns, dry)
                self.settle()
                return created, 201
            if method == "PUT" and name:
                replaced = self.store.replace(r, ns, name, data, sub, dry)
                self.settle()
                return replaced, 200
            if method == "PATCH" and name:
                content_type = request.headers.get("Content-Type", "")
                patched = self.store.patch(r, ns, name, data, content_type, sub, dry)
                self.settle()
                return patched, 200
            if method == "DELETE":
                options = dict(data) if isinstance(data, dict) else {}
                for key in ("propagationPolicy", "gracePeriodSeconds"):
                    if key in params:
                        options[key] = int(params[key]) if key == "gracePeriodSeconds" else params[key]
                if name:
                    gone = self.store.delete(r, ns, name, options, dry)
                    self.settle()
                    return gone, 200
                for obj in self._select(r, ns, params):
                    self.store.delete(r, obj["metadata"].get("namespace"), obj["metadata"]["name"], options, dry)
                self.settle()
                return errors.status_body(200, "", "Success"), 200
        raise errors.ApiError(405, f"{method} is not supported here", "MethodNotAllowed")

    def _select(self, r: resources.ResourceType, ns: str | None, params: dict[str, str]) -> list[dict[str, Any]]:
        labels = parse_label_selector(params.get("labelSelector"))
        fields = parse_field_selector(params.get("fieldSelector"), r.kind)
        return self.store.list(r, ns, labels, fields)

    def _list_body(self, r: resources.ResourceType, ns: str | None, params: dict[str, str]) -> dict[str, Any]:
        items = self._select(r, ns, params)
        list_rv = self.store.rv
        meta: dict[str, Any] = {}
        if params.get("continue"):
            try:
                token = json.loads(base64.urlsafe_b64decode(params["continue"].encode()))
                list_rv, start = int(token["rv"]), tuple(token["start"])
            except (ValueError, KeyError, TypeError) as exc:
                raise errors.bad_request("invalid continue token") from exc
            if list_rv < self.store.compacted(r):
                raise errors.gone("The provided continue parameter is too old to display a consistent "
                                  "list result. You can start a new list without the continue parameter.")
            items = [o for o in items
                     if (o["metadata"].get("namespace", ""), o["metadata"]["name"]) > start]
        limit = int(params.get("limit") or 0)
        if limit and len(items) > limit:
            last = items[limit - 1]["metadata"]
            token = {"rv": list_rv, "start": [last.get("namespace", ""), last["name"]]}
            meta["continue"] = base64.urlsafe_b64encode(json.dumps(token).encode()).decode()
            meta["remainingItemCount"] = len(items) - limit
            items = items[:limit]
        meta["resourceVersion"] = str(list_rv)
        return {"kind": f"{r.kind}List", "apiVersion": r.api_version, "metadata": meta,
                "items": [{k: v for k, v in o.items() if k not in ("kind", "apiVersion")} for o in items]}
