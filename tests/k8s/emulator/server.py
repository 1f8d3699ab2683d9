"""``KubeEmulator``: kmock's Kubernetes scaffold turned into a stateful API server.

What kmock 0.8 provides and is used as is: the aiohttp server on 127.0.0.1 (``kmock.Server``),
the discovery endpoints (``/api``, ``/apis``, ``/api/v1``, ``/apis/<group>[/<version>]``, ``/``)
built from the declared resources, the request model and its DSL (``emu["get /api/v1/nodes"] <<
503``), reactions and priorities. What this class changes or adds:

- request parsing: kmock's path parser crashes on ``/api/v1/namespaces`` and reads
  ``/api/v1/namespaces/<n>`` as a namespace scope; routes are parsed here instead;
- matching: kmock re-scans the whole request history for every reaction on every request
  (quadratic); plain filter chains are evaluated directly on the request instead;
- the API itself (:mod:`.verbs`, :mod:`.store`, :mod:`.kinds`, :mod:`.patching`,
  :mod:`.selectors`, :mod:`.watch`) replaces ``kmock.KubernetesEmulator``'s dict-merging store,
  which has no resourceVersion, selectors, PUT, patch types, status subresources or watch
  resume;
- controllers (:mod:`.jobs`, :mod:`.kubelet`), the clock, fault injection (:mod:`.faults`),
  a bounded request log and real ``v1 Status`` error bodies.

Order of service for each request: user reactions (faults, DSL), then the API, then kmock's
fallbacks (discovery, ``/version``, 404).
"""
from __future__ import annotations

import asyncio
import collections
import json
import math
import threading
import traceback
from typing import Any

import aiohttp.web
import kmock
from kmock._internal import enums, filtering, parsing, rendering

from . import errors, resources
from .clock import Clock
from .faults import CURRENT_RECORD, Fault, RequestRecord
from .jobs import JobController
from .kubelet import Kubelet
from .selectors import parse_field_selector, parse_label_selector
from .state import DirectAccess
from .store import Store
from .verbs import ResourceVerbs
from .watch import make_matcher, serve_watch

BOOT_NAMESPACES = ("default", "kube-system", "kube-public", "kube-node-lease")


def parse_route(path: str) -> parsing.ParsedPath:
    """``/api/v1/...`` and ``/apis/<g>/<v>/...`` into group/version/plural/ns/name/subresource."""
    parts = [p for p in path.strip("/").split("/") if p]
    if len(parts) >= 2 and parts[0] == "api":
        group, version, rest = "", parts[1], parts[2:]
    elif len(parts) == 2 and parts[0] == "apis":
        return parsing.ParsedPath(group=parts[1])
    elif len(parts) >= 3 and parts[0] == "apis":
        group, version, rest = parts[1], parts[2], parts[3:]
    else:
        return parsing.ParsedPath()
    namespace = None
    if len(rest) >= 3 and rest[0] == "namespaces":
        namespace, rest = rest[1], rest[2:]
    plural = rest[0] if rest else None
    name = rest[1] if len(rest) > 1 else None
    sub = "/".join(rest[2:]) or None
    return parsing.ParsedPath(group, version, plural, namespace, name, sub)


class KubeEmulator(DirectAccess, ResourceVerbs, kmock.KubernetesScaffold):
    """The emulated API server (see the package docstring for the test-facing API)."""

    def __init__(self, *, clock: Clock | None = None, history_window: int = 50_000,
                 request_log_limit: int = 50_000, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.clock = clock or Clock()
        self.store = Store(self.clock, history_window)
        self.kubelet = Kubelet(self.store)
        self.jobs = JobController(self.store, self.kubelet)
        self.bookmark_interval = 5.0
        self.internal_errors: list[str] = []
        self.kubeconfig: Any = None
        self._records: collections.deque[RequestRecord] = collections.deque(maxlen=request_log_limit)
        self._request_log_limit = request_log_limit
        self._faults: list[tuple[Fault, Any]] = []
        self._drop_generation = 0
        self._open_watches = 0
        self._changed = asyncio.Event()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._loop_thread: int | None = None
        self._wake_pending = False
        self._server: kmock.Server | None = None
        self._order_key: tuple[int, ...] = ()
        self._ordered: tuple[list[Any], list[Any]] = ([], [])
        resources.declare(self)
        self.fallback[enums.method.GET][filtering.HTTPCriteria(path="/healthz")] << b"ok"
        self.fallback[enums.method.GET][filtering.HTTPCriteria(path="/readyz")] << b"ok"
        self.fallback[enums.method.GET][filtering.HTTPCriteria(path="/livez")] << b"ok"
        self.store.on_change.append(self._notify)
        with self.store.lock:
            for ns in BOOT_NAMESPACES:
                self.store.create(resources.resolve("namespaces"), {"metadata": {"name": ns}})

    # ---- plumbing ----------------------------------------------------------------------------
    @property
    def url(self) -> str:  # type: ignore[override]
        if self._server is None:
            raise RuntimeError("the emulator is not serving yet")
        return f"http://127.0.0.1:{self._server.port}"

    def _notify(self) -> None:
        loop = self._loop
        if loop is None or self._wake_pending:
            return
        self._wake_pending = True
        try:
            if threading.get_ident() == self._loop_thread:
                loop.call_soon(self._wake)
            else:
                loop.call_soon_threadsafe(self._wake)
        except RuntimeError:  # loop closed during teardown
            pass

    def _wake(self) -> None:
        self._wake_pending = False
        changed, self._changed = self._changed, asyncio.Event()
        changed.set()

    def settle(self) -> None:
        """Run the controllers until nothing changes (caller holds or takes the store lock)."""
        with self.store.lock:
            for _ in range(100_000):
                self.kubelet.settle()
                if not self.jobs.settle() and not self.kubelet.dirty:
                    self.store.flush()
                    return
            raise RuntimeError("the emulated controllers did not settle")

    async def _serve_server_version(self, request: kmock.Request) -> dict[str, str]:
        return {"major": "1", "minor": "30", "gitVersion": "v1.30.0-allot-emulator",
                "gitCommit": "0" * 40, "gitTreeState": "clean", "buildDate": "2024-04-17T00:00:00Z",
                "goVersion": "go1.22.2", "compiler": "gc", "platform": "linux/amd64"}

    async def _serve_api(self, request: kmock.Request) -> dict[str, Any]:
        return {"kind": "APIVersions", "versions": ["v1"],
                "serverAddressByClientCIDRs": [{"clientCIDR": "0.0.0.0/0", "serverAddress": "127.0.0.1"}]}

    async def _serve_version(self, request: kmock.Request) -> dict[str, Any]:
        body = await super()._serve_version(request)
        body["groupVersion"] = body["groupVersion"].lstrip("/")  # kmock renders core as "/v1"
        return body

    # ---- request entry: parse, log, dispatch, render errors --------------------------------------
    async def __call__(self, raw: aiohttp.web.BaseRequest) -> aiohttp.web.StreamResponse:
        body = await raw.read()
        try:
            data = json.loads(body) if body else None
        except ValueError:
            data = None
        path = raw.path.rstrip("/") or "/"  # the API server treats "/api/" as "/api"
        route = parse_route(path)
        method = enums.method(raw.method)
        request = rendering.Request(
            id=len(self._requests), raw_request=raw, url=raw.url.with_path(path), method=raw.method,
            params=dict(raw.query), headers=dict(raw.headers), cookies=dict(raw.cookies),
            data=data, body=body, text=body.decode(errors="replace"),
            action=parsing.guess_k8s(route, method, dict(raw.query)),
            resource=None if route.group is None else kmock.resource(
                group=route.group, version=route.version, plural=route.plural),
            namespace=route.namespace, name=route.name, subresource=route.subresource)
        self._requests.append(request)
        if len(self._requests) > self._request_log_limit:
            del self._requests[: len(self._requests) - self._request_log_limit]
        record = RequestRecord(raw.method, raw.path, dict(raw.query), data, 0, self.clock())
        self._records.append(record)
        CURRENT_RECORD.set(record)
        status = 500
        try:
            response = await self._handle(request)
            status = response.status
            return response
        except rendering.StreamingError as exc:
            cause = exc.__cause__
            if not isinstance(cause, (ConnectionError, errors.ApiError)):
                self.internal_errors.append("".join(traceback.format_exception(cause or exc)))
            status = exc.args[0].status
            return exc.args[0]
        except errors.ApiError as exc:
            status = exc.code
            return self._json(exc.status_body(), exc.code)
        except kmock.KubernetesError as exc:  # kmock's discovery fallbacks: 404 for unknown paths
            status = exc.status
            message = "the server could not find the requested resource" if status == 404 else exc.message
            return self._json(errors.status_body(status, message or ""), status)
        except Exception:  # an emulator bug: answer 500 and make the fixture fail the test
            self.internal_errors.append(traceback.format_exc())
            return self._json(errors.status_body(500, "emulator internal error"), 500)
        finally:
            record.status = status

    @staticmethod
    def _json(body: Any, status: int) -> aiohttp.web.Response:
        return aiohttp.web.Response(body=json.dumps(body, separators=(",", ":")), status=status,
                                    content_type="application/json")

    def _split_payloads(self) -> tuple[list[Any], list[Any]]:
        payloads = list(self._payloads)
        key = tuple(id(p) for p in payloads)
        if key != self._order_key:
            prios = [tuple(-p for p in payload.priorities) for payload in payloads]
            width = max((len(p) for p in prios), default=0)
            prios = [p + (0,) * (width - len(p)) for p in prios]
            ordered = [payloads[i] for i in sorted(range(len(payloads)), key=lambda i: prios[i])]
            user = [p for p in ordered if not p.priorities or p.priorities[0] != -math.inf]
            fallback = [p for p in ordered if p.priorities and p.priorities[0] == -math.inf]
            self._order_key, self._ordered = key, (user, fallback)
        return self._ordered

    def _matches(self, view: Any, request: kmock.Request) -> bool:
        while True:
            if view is self:
                return True
            if type(view) is kmock.Filter:
                if not view.criteria(request):
                    return False
                view = view._source
            elif type(view) is kmock.Priority:
                view = view._source
            else:
                return request in view  # kmock's generic (history-scanning) semantics

    async def _try(self, payload: Any, request: kmock.Request) -> aiohttp.web.StreamResponse | None:
        if payload._disabled.is_set() or not self._matches(payload._source, request):
            return None
        try:
            return await payload(request)
        except rendering.ReactionMismatchError:
            payload._disabled.set()
        except NotImplementedError:
            pass
        return None

    async def _handle(self, request: kmock.Request) -> aiohttp.web.StreamResponse:
        user, fallback = self._split_payloads()
        for payload in user:
            if (response := await self._try(payload, request)) is not None:
                return response
        if request.resource is not None and request.resource.plural:
            return await self._serve_resource(request)
        for payload in fallback:
            if (response := await self._try(payload, request)) is not None:
                return response
        raise errors.ApiError(404, "the server could not find the requested resource", "NotFound")

    # ---- the API -----------------------------------------------------------------------------
    async def _serve_resource(self, request: kmock.Request) -> aiohttp.web.StreamResponse:
        res = request.resource
        r = resources.by_path(res.group, res.version, res.plural)
        ns, name, sub = request.namespace, request.name, request.subresource
        if r is None or (ns and not r.namespaced) or (sub and sub not in r.subresources):
            raise errors.ApiError(404, "the server could not find the requested resource", "NotFound")
        method = str(request.method.value).upper()
        params = request.params
        if method == "GET" and params.get("watch") in ("true", "1"):
            labels = parse_label_selector(params.get("labelSelector"))
            fields = parse_field_selector(params.get("fieldSelector"), r.kind)
            matcher = make_matcher(ns if r.namespaced else None, name, labels, fields)
            return await serve_watch(self, request._raw_request, r, matcher, params)
        body, status = self._execute(r, method, ns, name, sub, request)
        return self._json(body, status)

    # ---- faults, watches, logs -------------------------------------------------------------------
    def fail_next(self, method: str, path_regex: str, status: int, times: int = 1,
                  body: Any = None) -> Fault:
        return self._add_fault(Fault(method, path_regex, status, times, body))

    def delay_next(self, method: str, path_regex: str, seconds: float, times: int | None = 1) -> Fault:
        return self._add_fault(Fault(method, path_regex, None, times, delay=seconds))

    def _add_fault(self, fault: Fault) -> Fault:
        reaction = self[filtering.FnCriteria(fault.matches)] << fault
        self._faults.append((fault, reaction))
        return fault

    def clear_faults(self) -> None:
        for _, reaction in self._faults:
            reaction._disabled.set()
        self._faults.clear()

    def drop_watches(self) -> None:
        self._drop_generation += 1
        self._notify()

    @property
    def open_watches(self) -> int:
        return self._open_watches

    @property
    def requests(self) -> list[RequestRecord]:  # type: ignore[override]
        return list(self._records)

    def clear_requests(self) -> None:
        self._records.clear()

    @property
    def resource_version(self) -> int:
        return self.store.rv

    @property
    def history_window(self) -> int:
        return self.store.history_window

    @history_window.setter
    def history_window(self, value: int) -> None:
        self.store.history_window = value

    def compact(self, rv: int | None = None) -> None:
        self.store.compact(self.store.rv if rv is None else rv)
