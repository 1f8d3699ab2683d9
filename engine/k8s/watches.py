"""Watches on Jobs and Nodes: they only say *when* the loop should run a pass.

A :class:`Watches` runs one thread per kind. Each lists the objects once (remembering a
*fingerprint* of each: what a pass reads of it), then watches from that list's
resourceVersion; an event whose object's fingerprint changed, or a deletion, wakes the loop.
A Job's fingerprint leaves out the reconciler's own explanation annotations
(``marks.EXPLAIN_KEYS``), so its own writes do not wake it. It holds its pods' counts
(``status.active``, ``status.terminating``) only where a pass counts its pods as holding GPUs:
every Job but one admitted and still running (not suspended, not finished, marked running
with a placement and start that can be read: :func:`engine.k8s.jobs.runs_on_its_placement`,
by which observe classifies Jobs too), whose GPUs are its placement's. So a preempted, failed or unmanaged
Job's pods that are gone wake the loop (they free GPUs), while an admitted Job's pods coming
up do not wake it again. A node's fingerprint holds its labels, ``unschedulable``, taints,
allocatable and conditions. A watch that ends is resumed from the last
resourceVersion seen; a ``410 Gone`` relists (and wakes the loop: events may have been missed);
an API error waits a second and retries. An object a lenient API server let through in a shape
no fingerprint can read (annotations that are a list) counts as changed: it wakes the loop
rather than ending the watch's thread.
"""

from __future__ import annotations

import logging
import threading
from typing import Any, Callable, Mapping

from engine.k8s import marks
from engine.k8s.client import ApiError, Gone, KubeClient, Watch
from engine.k8s.jobs import runs_on_its_placement

log = logging.getLogger("allot.k8s.loop")


def _job_fingerprint(obj: Mapping[str, Any]) -> tuple:
    meta = obj.get("metadata") or {}
    annotations = meta.get("annotations") or {}
    ann = {k: v for k, v in annotations.items() if k not in marks.EXPLAIN_KEYS}
    spec = obj.get("spec") or {}
    status = obj.get("status") or {}
    conds = tuple(sorted((c.get("type"), c.get("status")) for c in status.get("conditions") or []))
    # its pods' counts, where a pass counts its pods as holding GPUs (every Job but an admitted
    # one still running: jobs.runs_on_its_placement, the predicate observe classifies by): a
    # preempted Job's pods that finish terminating free GPUs a pass should offer then rather
    # than at the next resync; an admitted Job's pods coming up change nothing a pass reads
    # (its GPUs are its placement's)
    pods = None if runs_on_its_placement(obj) else (status.get("active"), status.get("terminating"))
    return (spec.get("suspend"), spec.get("parallelism"), tuple(sorted((meta.get("labels") or {})
                                                                        .items())),
            tuple(sorted(ann.items())), conds, meta.get("deletionTimestamp") is not None, pods)


def _node_fingerprint(obj: Mapping[str, Any]) -> tuple:
    meta = obj.get("metadata") or {}
    spec = obj.get("spec") or {}
    status = obj.get("status") or {}
    conds = tuple(sorted((c.get("type"), c.get("status")) for c in status.get("conditions") or []))
    taints = tuple(sorted((t.get("key"), t.get("effect")) for t in spec.get("taints") or []))
    return (tuple(sorted((meta.get("labels") or {}).items())), spec.get("unschedulable"), taints,
            tuple(sorted((status.get("allocatable") or {}).items())), conds)


FINGERPRINTS: dict[str, Callable[[Mapping[str, Any]], tuple]] = {
    "jobs": _job_fingerprint, "nodes": _node_fingerprint}


def fingerprint(kind: str, obj: Mapping[str, Any]) -> tuple | None:
    """What a pass reads of ``obj``; None when it cannot be read (then it always counts as
    changed)."""
    try:
        return FINGERPRINTS[kind](obj)
    except (AttributeError, TypeError, ValueError):
        return None


class Watches:
    """The watch threads of one reconciler (module docstring): ``wake`` is called when a pass
    should run; they end when ``stop`` is set (and :meth:`close` ends their streams)."""

    def __init__(self, client: KubeClient, namespace: str | None, timeout_s: int,
                 wake: Callable[[], None], stop: threading.Event):
        self.client, self.namespace, self.timeout_s = client, namespace, timeout_s
        self.wake, self.stop = wake, stop
        self._threads: list[threading.Thread] = []
        self._open: dict[str, Watch] = {}
        self._prints: dict[str, dict[str, tuple | None]] = {"jobs": {}, "nodes": {}}

    def start(self) -> None:
        for kind in ("jobs", "nodes"):
            t = threading.Thread(target=self._loop, args=(kind,), daemon=True,
                                 name=f"allot-watch-{kind}")
            t.start()
            self._threads.append(t)

    def close(self, join: bool = False) -> None:
        """End the open streams (and, with ``join``, wait for the threads)."""
        for watch in list(self._open.values()):
            watch.close()
        if join:
            for t in self._threads:
                t.join(timeout=2.0)
            self._threads.clear()

    def relevant(self, kind: str, etype: str, obj: Mapping[str, Any]) -> bool:
        """Does this event change what a pass reads?"""
        meta = obj.get("metadata") or {}
        key = str(meta.get("uid") or f"{meta.get('namespace')}/{meta.get('name')}")
        prints = self._prints[kind]
        if etype == "DELETED":
            prints.pop(key, None)
            return True
        new = fingerprint(kind, obj)
        old = prints.get(key)
        prints[key] = new
        return new is None or old != new

    def _loop(self, kind: str) -> None:
        ns = self.namespace if kind == "jobs" else None
        rv: str | None = None
        while not self.stop.is_set():
            try:
                if rv is None:
                    items, rv = self.client.list(kind, ns)
                    self._prints[kind] = {
                        str((o.get("metadata") or {}).get("uid")): fingerprint(kind, o)
                        for o in items}
                    self.wake()  # events may have been missed before this list
                watch = self.client.watch(kind, rv, ns, self.timeout_s)
                self._open[kind] = watch
                if self.stop.is_set():
                    break
                for etype, obj in watch:
                    if self.relevant(kind, etype, obj):
                        self.wake()
                rv = watch.resource_version
            except Gone:
                log.info("watch %s: resourceVersion %s expired (410); relisting", kind, rv)
                rv = None
            except ApiError as err:
                log.warning("watch %s failed: %s; retrying", kind, err)
                self.stop.wait(1.0)
