"""Watch semantics through ``kubernetes.watch.Watch``: replay from a resourceVersion, live events,
selector transitions, 410 Gone after compaction or beyond the history window, timeouts, dropped
streams and bookmarks."""
from __future__ import annotations

import queue
import threading
import time

import kubernetes
import pytest
from kubernetes.client import ApiException

NS = "default"


def cm(name: str, **labels: str) -> dict:
    return {"metadata": {"name": name, "labels": labels}, "data": {}}


def collect(stream, count: int, watch: kubernetes.watch.Watch) -> list[tuple[str, str]]:
    events = []
    for event in stream:
        obj = event["raw_object"]
        events.append((event["type"], obj["metadata"].get("name", obj["metadata"].get("resourceVersion"))))
        if len(events) == count:
            watch.stop()
    return events


class Background:
    """A watch consumed in a thread; ``events`` is a queue of (type, name, rv)."""

    def __init__(self, func, **kwargs) -> None:
        self.watch = kubernetes.watch.Watch()
        self.events: queue.Queue = queue.Queue()
        self.error: BaseException | None = None
        self.thread = threading.Thread(target=self._run, args=(func, kwargs), daemon=True)
        self.thread.start()

    def _run(self, func, kwargs) -> None:
        try:
            for event in self.watch.stream(func, **kwargs):
                meta = event["raw_object"]["metadata"]
                self.events.put((event["type"], meta.get("name"), meta.get("resourceVersion")))
        except BaseException as exc:  # surfaced to the test
            self.error = exc

    def take(self, n: int, timeout: float = 5.0) -> list[tuple[str, str]]:
        return [self.events.get(timeout=timeout)[:2] for _ in range(n)]

    def close(self) -> None:
        self.watch.stop()
        self.thread.join(5)


def test_watch_replays_changes_after_a_resource_version(kube_client):
    core = kubernetes.client.CoreV1Api(kube_client)
    core.create_namespaced_config_map(NS, cm("before"))
    rv = core.list_namespaced_config_map(NS).metadata.resource_version
    core.create_namespaced_config_map(NS, cm("x"))
    core.patch_namespaced_config_map("x", NS, {"data": {"k": "v"}})
    core.delete_namespaced_config_map("x", NS)
    w = kubernetes.watch.Watch()
    events = collect(w.stream(core.list_namespaced_config_map, NS, resource_version=rv), 3, w)
    assert events == [("ADDED", "x"), ("MODIFIED", "x"), ("DELETED", "x")]


def test_watch_without_resource_version_starts_with_the_current_state(kube_client):
    core = kubernetes.client.CoreV1Api(kube_client)
    core.create_namespaced_config_map(NS, cm("a"))
    core.create_namespaced_config_map(NS, cm("b"))
    w = kubernetes.watch.Watch()
    assert collect(w.stream(core.list_namespaced_config_map, NS), 2, w) == [("ADDED", "a"), ("ADDED", "b")]


def test_live_events_arrive_in_order_with_increasing_resource_versions(kube_client, kube_emulator):
    core = kubernetes.client.CoreV1Api(kube_client)
    rv = core.list_namespaced_config_map(NS).metadata.resource_version
    watcher = Background(core.list_namespaced_config_map, namespace=NS, resource_version=rv)
    try:
        for i in range(5):
            core.create_namespaced_config_map(NS, cm(f"c{i}"))
        seen = [watcher.events.get(timeout=5) for _ in range(5)]
    finally:
        watcher.close()
    assert [name for _, name, _ in seen] == [f"c{i}" for i in range(5)]
    rvs = [int(r) for _, _, r in seen]
    assert rvs == sorted(rvs) and rvs[-1] == kube_emulator.resource_version


def test_selectors_turn_relabelling_into_added_and_deleted(kube_client):
    core = kubernetes.client.CoreV1Api(kube_client)
    rv = core.list_namespaced_config_map(NS).metadata.resource_version
    core.create_namespaced_config_map(NS, cm("x", team="a"))
    core.patch_namespaced_config_map("x", NS, {"metadata": {"labels": {"team": "b"}}})
    core.patch_namespaced_config_map("x", NS, {"metadata": {"labels": {"team": "a"}}})
    core.create_namespaced_config_map(NS, cm("other", team="b"))
    w = kubernetes.watch.Watch()
    events = collect(w.stream(core.list_namespaced_config_map, NS, label_selector="team=a",
                              resource_version=rv), 3, w)
    assert events == [("ADDED", "x"), ("DELETED", "x"), ("ADDED", "x")]


def test_watch_of_a_single_object_by_field_selector(kube_client, kube_emulator):
    kube_emulator.add_node("gpu-1")
    kube_emulator.add_node("gpu-2")
    core = kubernetes.client.CoreV1Api(kube_client)
    rv = core.list_node().metadata.resource_version
    core.patch_node("gpu-2", {"spec": {"unschedulable": True}})
    core.patch_node("gpu-1", {"spec": {"unschedulable": True}})
    w = kubernetes.watch.Watch()
    events = collect(w.stream(core.list_node, field_selector="metadata.name=gpu-1", resource_version=rv), 1, w)
    assert events == [("MODIFIED", "gpu-1")]


def test_resuming_from_a_compacted_resource_version_raises_410(kube_client, kube_emulator):
    core = kubernetes.client.CoreV1Api(kube_client)
    old = core.list_namespaced_config_map(NS).metadata.resource_version
    core.create_namespaced_config_map(NS, cm("x"))
    kube_emulator.compact()
    with pytest.raises(ApiException) as err:
        for _ in kubernetes.watch.Watch().stream(core.list_namespaced_config_map, NS, resource_version=old):
            pass
    assert err.value.status == 410
    with pytest.raises(ApiException) as err:  # with timeout_seconds the client does not retry first
        for _ in kubernetes.watch.Watch().stream(core.list_namespaced_config_map, NS,
                                                 resource_version=old, timeout_seconds=5):
            pass
    assert err.value.status == 410 and "too old resource version" in err.value.reason
    fresh = core.list_namespaced_config_map(NS).metadata.resource_version
    w = kubernetes.watch.Watch()
    core.create_namespaced_config_map(NS, cm("y"))
    assert collect(w.stream(core.list_namespaced_config_map, NS, resource_version=fresh), 1, w) == [("ADDED", "y")]


def test_history_window_bounds_how_far_back_a_watch_can_resume(kube_client, kube_emulator):
    core = kubernetes.client.CoreV1Api(kube_client)
    kube_emulator.history_window = 3
    start = core.list_namespaced_config_map(NS).metadata.resource_version
    rvs = [core.create_namespaced_config_map(NS, cm(f"c{i}")).metadata.resource_version for i in range(5)]
    with pytest.raises(ApiException) as err:
        for _ in kubernetes.watch.Watch().stream(core.list_namespaced_config_map, NS,
                                                 resource_version=start, timeout_seconds=5):
            pass
    assert err.value.status == 410
    w = kubernetes.watch.Watch()
    assert collect(w.stream(core.list_namespaced_config_map, NS, resource_version=rvs[1]), 3, w) == [
        ("ADDED", "c2"), ("ADDED", "c3"), ("ADDED", "c4")]


def test_timeout_seconds_ends_the_stream(kube_client):
    core = kubernetes.client.CoreV1Api(kube_client)
    started = time.monotonic()
    events = list(kubernetes.watch.Watch().stream(core.list_namespaced_config_map, NS, timeout_seconds=1))
    elapsed = time.monotonic() - started
    assert events == [] and 0.9 <= elapsed < 4


def test_dropped_watches_resume_without_losing_or_repeating_events(kube_client, kube_emulator):
    core = kubernetes.client.CoreV1Api(kube_client)
    rv = core.list_namespaced_config_map(NS).metadata.resource_version
    watcher = Background(core.list_namespaced_config_map, namespace=NS, resource_version=rv)
    try:
        core.create_namespaced_config_map(NS, cm("a"))
        assert watcher.take(1) == [("ADDED", "a")]
        kube_emulator.drop_watches()
        core.create_namespaced_config_map(NS, cm("b"))
        core.create_namespaced_config_map(NS, cm("c"))
        assert watcher.take(2) == [("ADDED", "b"), ("ADDED", "c")]
        assert watcher.events.empty()
    finally:
        watcher.close()
    watches = [r for r in kube_emulator.requests if r.watch]
    assert len(watches) == 2  # the client reconnected once, from the last resourceVersion it saw
    assert watches[1].params["resourceVersion"] != rv


def test_bookmarks_carry_a_resumable_resource_version(kube_client, kube_emulator):
    kube_emulator.bookmark_interval = 0.2
    core = kubernetes.client.CoreV1Api(kube_client)
    core.create_namespaced_config_map(NS, cm("a"))
    w = kubernetes.watch.Watch()
    kinds = []
    for event in w.stream(core.list_namespaced_config_map, NS, allow_watch_bookmarks=True, timeout_seconds=3):
        kinds.append(event["type"])
        if event["type"] == "BOOKMARK":
            w.stop()
    assert kinds == ["ADDED", "BOOKMARK"]
    assert int(w.resource_version) == kube_emulator.resource_version
