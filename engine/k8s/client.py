"""The one layer that talks to the Kubernetes API (the official ``kubernetes`` client).

Everything above this module works on plain dicts, exactly as the API serves them (responses
are read raw, ``_preload_content=False``, which is also much faster than model objects for a
thousand Jobs). The rules every call follows:

- **Retries.** 429, 5xx and connection errors are retried with exponential backoff
  (``retries`` attempts, from ``backoff_s``); anything else is raised at once as
  :class:`ApiError` (``status`` set; :class:`Conflict` for 409, :class:`Gone` for 410,
  :class:`NotFound` for 404).
- **Optimistic concurrency.** :meth:`KubeClient.patch` takes the resourceVersion the caller's
  decision was based on and sends it in the merge patch, so the server refuses the write if
  the object changed meanwhile. On a 409 the object is read again: if its resourceVersion is
  still the expected one the conflict was spurious and the patch is retried; if the object
  already shows everything the patch writes (a retried request that had in fact succeeded), the
  patch counts as done; otherwise :class:`Conflict` tells the caller its view is stale.
- **Watches.** :meth:`KubeClient.watch` streams ``(type, object)`` from a resourceVersion with
  bookmarks and remembers the last version seen (``Watch.resource_version``); a dropped
  connection simply ends the stream (the caller resumes from that version) and a ``410 Gone``
  (as an HTTP status or an ``ERROR`` event) raises :class:`Gone` (the caller lists again).

Kinds are named by their plural: ``jobs``, ``pods``, ``nodes``, ``configmaps``, ``leases``,
``events``.
"""

from __future__ import annotations

import json
import logging
import threading
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Iterator, Mapping

import kubernetes
import urllib3
from kubernetes.client.exceptions import ApiException

log = logging.getLogger("allot.k8s.client")

MERGE_PATCH = "application/merge-patch+json"
RETRY_STATUSES = frozenset({429, 500, 502, 503, 504})


class ApiError(Exception):
    """A failed API call; ``status`` is the HTTP status (0 for a connection failure)."""

    def __init__(self, status: int, message: str):
        super().__init__(f"{status}: {message}" if status else message)
        self.status = status


class Conflict(ApiError):
    """409: the object changed since the caller read it."""


class Gone(ApiError):
    """410: the resourceVersion to resume a watch from is too old; list again."""


class NotFound(ApiError):
    """404."""


def _error(status: int, message: str) -> ApiError:
    cls = {409: Conflict, 410: Gone, 404: NotFound}.get(status, ApiError)
    return cls(status, message)


def _said(exc: ApiException) -> str:
    """What the API server said about a failed call: its ``Status`` message
    (``namespaces "allot-system" not found``, ``jobs.batch is forbidden: User ... cannot list
    resource "jobs" ...``), which names what to fix; the HTTP reason phrase when the body has
    none (a proxy's HTML page, an empty body)."""
    body: Any = exc.body
    try:
        text = body.decode("utf-8", "replace") if isinstance(body, bytes) else body
        status = json.loads(text) if text else None
    except ValueError:
        status = None
    message = status.get("message") if isinstance(status, dict) else None
    if isinstance(message, str) and message.strip():
        return " ".join(message.split())
    return str(exc.reason)


def _decode(resp: Any) -> dict:
    data = resp.data if hasattr(resp, "data") else resp.read()
    return json.loads(data) if data else {}


def patch_applied(obj: Any, patch: Any) -> bool:
    """True when ``obj`` already shows everything a JSON merge ``patch`` writes (None = absent).
    ``metadata.resourceVersion`` in the patch is a precondition, not content, and is ignored."""
    if isinstance(patch, Mapping):
        if not isinstance(obj, Mapping):
            return False
        for key, value in patch.items():
            if key == "resourceVersion":
                continue
            if value is None:
                if obj.get(key) is not None:
                    return False
            elif not patch_applied(obj.get(key), value):
                return False
        return True
    return obj == patch


@dataclass
class Stats:
    """Counters of API traffic for metrics: calls, retries and errors by status."""

    calls: int = 0
    retries: int = 0
    errors: dict[int, int] = field(default_factory=dict)
    lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def error(self, status: int) -> None:
        with self.lock:
            self.errors[status] = self.errors.get(status, 0) + 1


class Watch:
    """One watch stream; ``resource_version`` is the last version delivered (resume point)."""

    def __init__(self, client: "KubeClient", kind: str, resource_version: str,
                 namespace: str | None, timeout_s: int):
        self.client = client
        self.kind = kind
        self.resource_version = resource_version
        self.namespace = namespace
        self.timeout_s = timeout_s
        self._resp: Any = None
        self._closed = False

    def close(self) -> None:
        """Stop the stream from another thread."""
        self._closed = True
        resp = self._resp
        if resp is not None:
            try:
                resp.close()
            except Exception:  # pragma: no cover - best effort
                pass

    def __iter__(self) -> Iterator[tuple[str, dict]]:
        fn = self.client._list_fn(self.kind, self.namespace)
        kwargs: dict[str, Any] = dict(
            watch=True, resource_version=self.resource_version, allow_watch_bookmarks=True,
            timeout_seconds=self.timeout_s, _preload_content=False,
            _request_timeout=(self.client.connect_timeout_s, self.timeout_s + 5))
        if self.namespace:
            kwargs["namespace"] = self.namespace
        try:
            self._resp = fn(**kwargs)
        except ApiException as exc:
            self.client.stats.error(exc.status or 0)
            raise _error(exc.status or 0, _said(exc)) from None
        except (urllib3.exceptions.HTTPError, OSError) as exc:
            self.client.stats.error(0)
            raise ApiError(0, f"watch {self.kind}: {exc}") from None
        try:
            buffer = b""
            for chunk in self._resp.stream(amt=None, decode_content=True):
                if self._closed:
                    return
                buffer += chunk
                while b"\n" in buffer:
                    line, buffer = buffer.split(b"\n", 1)
                    if line.strip():
                        yield from self._event(line)
            if buffer.strip() and not self._closed:
                yield from self._event(buffer)
        except (urllib3.exceptions.HTTPError, OSError, ValueError, AttributeError):
            return  # dropped connection or closed from another thread: caller resumes
        finally:
            try:
                self._resp.release_conn()
            except Exception:  # pragma: no cover - best effort
                pass
            self._resp = None

    def _event(self, line: bytes) -> Iterator[tuple[str, dict]]:
        try:
            event = json.loads(line)
        except ValueError:
            return
        etype, obj = event.get("type"), event.get("object") or {}
        if etype == "ERROR":
            code = int(obj.get("code") or 0)
            raise _error(code, str(obj.get("message") or obj.get("reason") or "watch error"))
        rv = (obj.get("metadata") or {}).get("resourceVersion")
        if rv:
            self.resource_version = str(rv)
        if etype == "BOOKMARK":
            return
        yield str(etype), obj


class KubeClient:
    """Raw-dict access to the resources the reconciler uses, with the rules in the docstring."""

    def __init__(self, api_client: "kubernetes.client.ApiClient", *, retries: int = 5,
                 backoff_s: float = 0.05, request_timeout_s: float = 15.0,
                 connect_timeout_s: float = 5.0, sleep: Callable[[float], None] = time.sleep):
        self.api_client = api_client
        self.core = kubernetes.client.CoreV1Api(api_client)
        self.batch = kubernetes.client.BatchV1Api(api_client)
        self.coordination = kubernetes.client.CoordinationV1Api(api_client)
        self.retries = retries
        self.backoff_s = backoff_s
        self.request_timeout_s = request_timeout_s
        self.connect_timeout_s = connect_timeout_s
        self.sleep = sleep
        self.stats = Stats()

    @staticmethod
    def connect(kubeconfig: str | None = None, **kwargs: Any) -> "KubeClient":
        """From a kubeconfig file, else the in-cluster service account, else ``~/.kube/config``."""
        cfg = kubernetes.client.Configuration()
        if kubeconfig:
            kubernetes.config.load_kube_config(config_file=kubeconfig, client_configuration=cfg)
        else:
            try:
                kubernetes.config.load_incluster_config(client_configuration=cfg)
            except kubernetes.config.ConfigException:
                kubernetes.config.load_kube_config(client_configuration=cfg)
        cfg.connection_pool_maxsize = max(cfg.connection_pool_maxsize or 0, 16)
        return KubeClient(kubernetes.client.ApiClient(cfg), **kwargs)

    # ------------------------------------------------------------------ plumbing

    def _call(self, what: str, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> dict:
        """Call ``fn`` raw, retrying 429/5xx/connection errors; decode the JSON body."""
        kwargs.setdefault("_preload_content", False)
        kwargs.setdefault("_request_timeout", (self.connect_timeout_s, self.request_timeout_s))
        delay = self.backoff_s
        for attempt in range(self.retries + 1):
            with self.stats.lock:
                self.stats.calls += 1
            try:
                return _decode(fn(*args, **kwargs))
            except ApiException as exc:
                status = int(exc.status or 0)
                self.stats.error(status)
                if status not in RETRY_STATUSES or attempt == self.retries:
                    raise _error(status, f"{what}: {_said(exc)}") from None
                log.warning("retrying %s after %s", what, status)
            except (urllib3.exceptions.HTTPError, OSError) as exc:
                self.stats.error(0)
                if attempt == self.retries:
                    raise ApiError(0, f"{what}: {exc}") from None
                log.warning("retrying %s after %s", what, exc)
            with self.stats.lock:
                self.stats.retries += 1
            self.sleep(delay)
            delay = min(delay * 2, 2.0)
        raise AssertionError("unreachable")  # pragma: no cover

    def _list_fn(self, kind: str, namespace: str | None) -> Callable[..., Any]:
        table: dict[str, tuple[Callable[..., Any], Callable[..., Any]]] = {
            "jobs": (self.batch.list_job_for_all_namespaces, self.batch.list_namespaced_job),
            "pods": (self.core.list_pod_for_all_namespaces, self.core.list_namespaced_pod),
            "nodes": (self.core.list_node, self.core.list_node),
            "configmaps": (self.core.list_config_map_for_all_namespaces,
                           self.core.list_namespaced_config_map),
        }
        every, one = table[kind]
        return one if namespace and kind != "nodes" else every

    # ------------------------------------------------------------------ reading

    def list(self, kind: str, namespace: str | None = None,
             label_selector: str | None = None) -> tuple[list[dict], str]:
        """All objects of ``kind`` and the list's resourceVersion (to start a watch from)."""
        kwargs: dict[str, Any] = {}
        if namespace and kind != "nodes":
            kwargs["namespace"] = namespace
        if label_selector:
            kwargs["label_selector"] = label_selector
        body = self._call(f"list {kind}", self._list_fn(kind, namespace), **kwargs)
        items = body.get("items") or []
        return items, str((body.get("metadata") or {}).get("resourceVersion", ""))

    def watch(self, kind: str, resource_version: str, namespace: str | None = None,
              timeout_s: int = 300) -> Watch:
        """A watch from ``resource_version``; iterate it for ``(type, object)`` pairs."""
        return Watch(self, kind, resource_version, namespace, timeout_s)

    def get(self, kind: str, namespace: str | None, name: str) -> dict | None:
        """One object, or None when it does not exist."""
        fns: dict[str, Callable[..., Any]] = {
            "jobs": self.batch.read_namespaced_job,
            "nodes": self.core.read_node,
            "configmaps": self.core.read_namespaced_config_map,
            "leases": self.coordination.read_namespaced_lease,
        }
        kwargs: dict[str, str | None] = ({"name": name} if kind == "nodes"
                                         else {"name": name, "namespace": namespace})
        try:
            return self._call(f"get {kind} {namespace}/{name}", fns[kind], **kwargs)
        except NotFound:
            return None

    # ------------------------------------------------------------------ writing

    def patch(self, kind: str, namespace: str | None, name: str, patch: dict,
              resource_version: str | None = None) -> dict:
        """JSON merge patch (``kind`` may name a subresource: ``jobs/status``); with
        ``resource_version`` the write is conditional (see the module docstring for how a 409
        is resolved). Returns the object as written."""
        fns: dict[str, Callable[..., Any]] = {
            "jobs": self.batch.patch_namespaced_job,
            "jobs/status": self.batch.patch_namespaced_job_status,
            "nodes": self.core.patch_node,
        }
        body = json.loads(json.dumps(patch))
        if resource_version:
            body.setdefault("metadata", {})["resourceVersion"] = resource_version
        kwargs: dict[str, Any] = {"name": name, "body": body, "_content_type": MERGE_PATCH}
        if kind != "nodes":
            kwargs["namespace"] = namespace
        what = f"patch {kind} {namespace or ''}/{name}"
        for _ in range(self.retries + 1):
            try:
                return self._call(what, fns[kind], **kwargs)
            except Conflict:
                current = self.get(kind.split("/")[0], namespace, name)
                if current is None:
                    raise NotFound(404, f"{what}: gone") from None
                if patch_applied(current, patch):
                    return current
                current_rv = str((current.get("metadata") or {}).get("resourceVersion", ""))
                if resource_version and current_rv != resource_version:
                    raise Conflict(409, f"{what}: changed since observed "
                                        f"({resource_version} -> {current_rv})") from None
                log.warning("retrying %s after a spurious conflict", what)
                self.sleep(self.backoff_s)
        raise Conflict(409, f"{what}: conflicts persist")

    def create(self, kind: str, namespace: str, body: dict) -> dict:
        fns: dict[str, Callable[..., Any]] = {
            "configmaps": self.core.create_namespaced_config_map,
            "leases": self.coordination.create_namespaced_lease,
            "events": self.core.create_namespaced_event,
        }
        return self._call(f"create {kind} in {namespace}", fns[kind], namespace=namespace,
                          body=body)

    def replace(self, kind: str, namespace: str, name: str, body: dict) -> dict:
        """PUT; ``body.metadata.resourceVersion`` makes it conditional (409 -> Conflict)."""
        fns: dict[str, Callable[..., Any]] = {
            "configmaps": self.core.replace_namespaced_config_map,
            "leases": self.coordination.replace_namespaced_lease,
        }
        return self._call(f"replace {kind} {namespace}/{name}", fns[kind], name=name,
                          namespace=namespace, body=body)
