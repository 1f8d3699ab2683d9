"""A Kubernetes HTTP API emulator on 127.0.0.1 for testing the reconciler with the real client.

Built on ``kmock`` 0.8 (``kmock.KubernetesScaffold``: aiohttp server, discovery, Status errors,
request DSL) and extended with what a controller needs: a global resourceVersion, uid /
creationTimestamp / generateName, label and field selectors, limit/continue, PUT with optimistic
concurrency, strategic-merge / merge / JSON patch, status subresources, watch with resume, bounded
history and ``410 Gone``, the Job suspend semantics (job controller + a small scheduler), pod
eviction, a controllable clock and fault injection. The reconciler under test talks to it through
the official ``kubernetes`` client and cannot tell it from a real API server for the resources
below.

Resources served: core/v1 ``namespaces nodes pods events configmaps`` (pods: ``status``,
``eviction``; nodes, namespaces: ``status``), batch/v1 ``jobs`` (+``status``),
coordination.k8s.io/v1 ``leases``, events.k8s.io/v1 ``events``, policy/v1
``poddisruptionbudgets`` (stored, honoured by eviction).

Pytest fixtures (``tests/k8s/conftest.py`` re-exports ``tests/k8s/emulator/fixtures.py``)::

    def test_admits(kube_emulator, kube_client, kube_kubeconfig):
        emu = kube_emulator                      # KubeEmulator, already serving on emu.url
        emu.add_node("gpu-1", gpus=8, labels={"topology.example.com/rack": "r1"})
        batch = kubernetes.client.BatchV1Api(kube_client)   # kube_client: configured ApiClient
        # ... or run the reconciler with ["--kubeconfig", str(kube_kubeconfig)]

Outside pytest (benchmarks): ``with run_emulator() as emu: ...`` (same object, same API; put the
repository root on ``sys.path`` and ``from tests.k8s.emulator import run_emulator``).

Direct state access (thread-safe, no HTTP, no faults, no request log):

- ``emu.create(obj) -> dict`` (namespace auto-created), ``emu.get(kind, ns, name) -> dict | None``,
  ``emu.list(kind, ns=None, label_selector=None, field_selector=None) -> list[dict]``,
  ``emu.patch(kind, ns, name, patch, patch_type="merge") -> dict``, ``emu.replace(obj)``,
  ``emu.delete(kind, ns, name)``. ``kind`` is a Kind ("Job"), a plural ("jobs") or
  "group/version/plural"; cluster-scoped kinds take ``ns=None``.
- ``emu.add_node(name, gpus=8, labels=None, conditions=None, taints=None, unschedulable=False)``
  (labels get ``kubernetes.io/hostname=<name>``; conditions default to Ready=True; a mapping
  ``{"Ready": "False"}`` or full condition dicts), ``emu.set_node_condition(name, type, status)``.
- Jobs: ``emu.complete_job(ns, name)``, ``emu.fail_job(ns, name)``, ``emu.fail_pod(ns, pod)``,
  ``emu.succeed_pod(ns, pod)``, ``emu.job_pods(ns, name) -> list[dict]`` (active pods),
  ``emu.free_gpus() -> {node: free}``; ``emu.terminations`` lists every running pod that went
  away (``Termination(namespace, pod, job, node, at, grace_seconds, reason)``, reason one of
  ``Suspended``, ``Evicted``, ``TaintEviction``, ``Deleted``, ``JobFailed``, ``JobComplete``,
  ``GarbageCollected``).
- Time: ``emu.clock()`` returns the emulated epoch seconds used for every timestamp;
  ``emu.clock.now = t`` freezes it at ``t``; ``emu.clock.advance(dt)``; ``emu.clock.resume()``.

Watch and history:

- ``emu.resource_version -> int`` (global, monotonic); ``emu.history_window = n`` keeps only the
  last ``n`` change events (older resume points get 410); ``emu.compact(rv)`` forgets history
  up to and including ``rv``; ``emu.drop_watches()`` closes all open watch streams (clients see
  a clean end of stream); ``emu.open_watches -> int``; ``emu.bookmark_interval`` (seconds) for
  ``allowWatchBookmarks``.

Job semantics a reconciler must respect (as on a real cluster, see :mod:`.jobs`, :mod:`.kinds`):
``spec.template`` of a Job is immutable except nodeSelector / affinity / tolerations /
schedulingGates / labels / annotations, and those only while the Job is suspended AND
``status.startTime`` is unset. Suspending a started Job keeps ``startTime``: to re-pin a preempted
Job, clear it first through the status subresource (``patch_namespaced_job_status(name, ns,
{"status": {"startTime": None}})``), then patch the template and unsuspend. Deleting a Job without
``propagation_policy`` orphans its pods (batch/v1 default). Pod deletions are immediate (no
Terminating phase); ``emu.terminations`` records the grace period each pod was given.

Faults and logs:

- ``emu.fail_next(method, path_regex, status, times=1, body=None) -> Fault``: the next ``times``
  matching requests get ``status`` (a proper ``Status`` body unless ``body`` given) and change
  nothing; ``Fault.hits`` counts them. ``emu.delay_next(method, path_regex, seconds, times=1)``
  adds latency. ``emu.clear_faults()``. Method ``"*"`` matches any; the regex is searched in the
  path (no query string). The full kmock DSL works too: ``emu["get /api/v1/nodes"] << 503``.
- ``emu.requests -> list[RequestRecord(method, path, params, body, status, at)]`` (``body`` is
  the decoded JSON or None); ``emu.clear_requests()``.
- ``emu.internal_errors`` lists unexpected exceptions inside the emulator (the fixture fails the
  test if any occurred, so an emulator bug never masquerades as an injected fault).

Known differences from a real API server: no authentication/RBAC (any bearer token works), no
server-side apply (415), no managedFields, ``continue`` pages are served from the current state
rather than a snapshot, deletions are immediate, events are not aggregated (``count`` stays 1),
a NotReady node never gets its pods evicted, only ``nvidia.com/gpu`` is accounted when scheduling.
"""
from .clock import Clock
from .faults import Fault, RequestRecord
from .server import KubeEmulator
from .runner import run_emulator
from .kubelet import Termination

__all__ = ["Clock", "Fault", "KubeEmulator", "RequestRecord", "Termination", "run_emulator"]
