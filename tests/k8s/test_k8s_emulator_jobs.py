"""The emulated job controller, scheduler and kubelets: what a reconciler driving Jobs by
``spec.suspend`` observes — pods on the pinned nodes, suspension terminating them, completion,
failures and replacements, eviction, capacity, cordons and taints, the controllable clock."""
from __future__ import annotations

import kubernetes
import pytest
from kubernetes.client import ApiException

NS = "default"
HOSTNAME = "kubernetes.io/hostname"


def job(name: str, gpus: int = 4, parallelism: int = 1, completions: int | None = None,
        indexed: bool = False, suspend: bool = True, node_selector: dict | None = None,
        affinity_nodes: list[str] | None = None, grace: int = 120) -> dict:
    spec: dict = {"restartPolicy": "Never", "terminationGracePeriodSeconds": grace,
                  "containers": [{"name": "main", "image": "trainer:1",
                                  "resources": {"limits": {"nvidia.com/gpu": str(gpus)}}}]}
    if node_selector:
        spec["nodeSelector"] = node_selector
    if affinity_nodes:
        spec["affinity"] = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
            "nodeSelectorTerms": [{"matchExpressions": [
                {"key": HOSTNAME, "operator": "In", "values": affinity_nodes}]}]}}}
    body: dict = {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": name, "namespace": NS},
                  "spec": {"suspend": suspend, "parallelism": parallelism, "template": {"spec": spec}}}
    if completions is not None:
        body["spec"]["completions"] = completions
    if indexed:
        body["spec"]["completionMode"] = "Indexed"
    return body


@pytest.fixture
def cluster(kube_emulator):
    for name in ("gpu-1", "gpu-2", "gpu-3"):
        kube_emulator.add_node(name, gpus=8, labels={"rack": "r1" if name != "gpu-3" else "r2"})
    return kube_emulator


@pytest.fixture
def batch(kube_client):
    return kubernetes.client.BatchV1Api(kube_client)


def placement(emu, name: str) -> list[tuple[str, str | None, str]]:
    return [(p["metadata"]["annotations"].get("batch.kubernetes.io/job-completion-index", "-"),
             p["spec"].get("nodeName"), p["status"]["phase"]) for p in emu.job_pods(NS, name)]


def test_a_suspended_job_makes_no_pods(cluster, batch):
    batch.create_namespaced_job(NS, job("q", parallelism=2, completions=2))
    status = batch.read_namespaced_job("q", NS).status
    assert cluster.job_pods(NS, "q") == []
    assert status.active == 0 and status.start_time is None
    assert [(c.type, c.status, c.reason) for c in status.conditions] == [("Suspended", "True", "JobSuspended")]


def test_unsuspending_runs_an_indexed_gang_on_the_pinned_nodes(cluster, batch):
    cluster.clock.now = 1_750_000_000.0
    batch.create_namespaced_job(NS, job("gang", gpus=8, parallelism=2, completions=2, indexed=True,
                                        affinity_nodes=["gpu-2", "gpu-3"]))
    batch.patch_namespaced_job("gang", NS, {"spec": {"suspend": False}})
    assert placement(cluster, "gang") == [("0", "gpu-2", "Running"), ("1", "gpu-3", "Running")]
    pods = cluster.job_pods(NS, "gang")
    assert [p["metadata"]["name"].rsplit("-", 1)[0] for p in pods] == ["gang-0", "gang-1"]
    assert pods[0]["metadata"]["ownerReferences"][0]["kind"] == "Job"
    status = batch.read_namespaced_job("gang", NS).status
    assert status.active == 2 and status.ready == 2
    assert status.start_time.timestamp() == 1_750_000_000.0
    assert [(c.type, c.status, c.reason) for c in status.conditions] == [("Suspended", "False", "JobResumed")]


def test_node_selector_by_hostname_pins_every_pod(cluster, batch):
    batch.create_namespaced_job(NS, job("pinned", gpus=2, parallelism=3, completions=3,
                                        node_selector={HOSTNAME: "gpu-3"}, suspend=False))
    assert [node for _, node, _ in placement(cluster, "pinned")] == ["gpu-3"] * 3
    assert cluster.free_gpus() == {"gpu-1": 8, "gpu-2": 8, "gpu-3": 2}


def test_suspending_terminates_pods_with_their_grace_period(cluster, batch):
    batch.create_namespaced_job(NS, job("run", gpus=4, parallelism=2, completions=2, indexed=True,
                                        node_selector={"rack": "r1"}, suspend=False, grace=300))
    cluster.clock.now = 1_750_003_600.0
    batch.patch_namespaced_job("run", NS, {"spec": {"suspend": True}})
    assert cluster.job_pods(NS, "run") == []
    gone = cluster.terminations
    assert {(t.job, t.reason, t.grace_seconds, t.at) for t in gone} == {("run", "Suspended", 300, 1_750_003_600.0)}
    assert sorted(t.node for t in gone) == ["gpu-1", "gpu-2"]
    status = batch.read_namespaced_job("run", NS).status
    assert status.active == 0 and not status.failed
    assert [(c.type, c.status) for c in status.conditions] == [("Suspended", "True")]
    batch.patch_namespaced_job("run", NS, {"spec": {"suspend": False}})  # resumes: fresh pods
    assert len(cluster.job_pods(NS, "run")) == 2
    assert batch.read_namespaced_job("run", NS).status.start_time.timestamp() == 1_750_003_600.0


def test_pods_that_do_not_fit_stay_pending_until_capacity_frees(cluster, batch):
    batch.create_namespaced_job(NS, job("big", gpus=8, node_selector={HOSTNAME: "gpu-1"}, suspend=False))
    batch.create_namespaced_job(NS, job("late", gpus=4, node_selector={HOSTNAME: "gpu-1"}, suspend=False))
    [(_, node, phase)] = placement(cluster, "late")
    assert (node, phase) == (None, "Pending")
    scheduled = next(c for c in cluster.job_pods(NS, "late")[0]["status"]["conditions"] if c["type"] == "PodScheduled")
    assert scheduled["status"] == "False" and scheduled["reason"] == "Unschedulable"
    cluster.complete_job(NS, "big")
    assert placement(cluster, "late") == [("-", "gpu-1", "Running")]


def test_cordoned_tainted_and_not_ready_nodes_receive_no_new_pods(cluster, batch):
    core = kubernetes.client.CoreV1Api(batch.api_client)
    core.patch_node("gpu-1", {"spec": {"unschedulable": True}})
    core.patch_node("gpu-2", {"spec": {"taints": [{"key": "allot.dev/maintenance", "effect": "NoSchedule"}]}})
    cluster.set_node_condition("gpu-3", "Ready", "False")
    batch.create_namespaced_job(NS, job("nowhere", gpus=1, suspend=False))
    assert placement(cluster, "nowhere") == [("-", None, "Pending")]
    cluster.set_node_condition("gpu-3", "Ready", "True")
    assert placement(cluster, "nowhere") == [("-", "gpu-3", "Running")]


def test_a_no_execute_taint_evicts_running_pods_and_the_job_replaces_them(cluster, batch):
    core = kubernetes.client.CoreV1Api(batch.api_client)
    batch.create_namespaced_job(NS, job("w", gpus=1, node_selector={"rack": "r1"}, suspend=False))
    [(_, node, _)] = placement(cluster, "w")
    core.patch_node(node, {"spec": {"taints": [{"key": "gpu-broken", "effect": "NoExecute"}]}})
    assert [t.reason for t in cluster.terminations] == ["TaintEviction"]
    [(_, new_node, phase)] = placement(cluster, "w")
    assert new_node != node and phase == "Running"
    assert batch.read_namespaced_job("w", NS).status.failed == 1


def test_completion_and_failure(cluster, batch):
    batch.create_namespaced_job(NS, job("ok", gpus=1, parallelism=2, completions=4, indexed=True, suspend=False))
    status = batch.read_namespaced_job("ok", NS).status
    assert status.active == 2
    cluster.complete_job(NS, "ok")
    status = batch.read_namespaced_job("ok", NS).status
    assert status.succeeded == 4 and status.active == 0 and status.completed_indexes == "0-3"
    assert {c.type for c in status.conditions if c.status == "True"} >= {"Complete"}
    assert status.completion_time is not None and cluster.free_gpus()["gpu-1"] == 8
    batch.create_namespaced_job(NS, job("bad", gpus=1, suspend=False))
    cluster.fail_job(NS, "bad")
    status = batch.read_namespaced_job("bad", NS).status
    failed = next(c for c in status.conditions if c.type == "Failed")
    assert failed.status == "True" and failed.reason == "BackoffLimitExceeded"
    assert cluster.job_pods(NS, "bad") == []


def test_a_failed_pod_is_counted_and_replaced_within_the_backoff_limit(cluster, batch):
    body = job("retry", gpus=1, suspend=False)
    body["spec"]["backoffLimit"] = 1
    batch.create_namespaced_job(NS, body)
    first = cluster.job_pods(NS, "retry")[0]["metadata"]["name"]
    cluster.fail_pod(NS, first)
    second = cluster.job_pods(NS, "retry")[0]["metadata"]["name"]
    assert second != first and batch.read_namespaced_job("retry", NS).status.failed == 1
    cluster.fail_pod(NS, second)
    assert cluster.job_pods(NS, "retry") == []
    assert any(c.type == "Failed" for c in batch.read_namespaced_job("retry", NS).status.conditions)


def test_eviction_deletes_the_pod_unless_a_disruption_budget_forbids_it(cluster, batch):
    core = kubernetes.client.CoreV1Api(batch.api_client)
    batch.create_namespaced_job(NS, job("e", gpus=1, node_selector={HOSTNAME: "gpu-1"}, suspend=False))
    pod = cluster.job_pods(NS, "e")[0]["metadata"]["name"]
    policy = kubernetes.client.PolicyV1Api(batch.api_client)
    policy.create_namespaced_pod_disruption_budget(NS, {"metadata": {"name": "keep"}, "spec": {
        "maxUnavailable": 0, "selector": {"matchLabels": {"job-name": "e"}}}})
    eviction = {"apiVersion": "policy/v1", "kind": "Eviction", "metadata": {"name": pod, "namespace": NS},
                "deleteOptions": {"gracePeriodSeconds": 30}}
    with pytest.raises(ApiException) as err:
        core.create_namespaced_pod_eviction(pod, NS, eviction)
    assert err.value.status == 429
    policy.delete_namespaced_pod_disruption_budget("keep", NS)
    core.create_namespaced_pod_eviction(pod, NS, eviction)
    [gone] = cluster.terminations
    assert (gone.pod, gone.reason, gone.grace_seconds, gone.node) == (pod, "Evicted", 30, "gpu-1")
    with pytest.raises(ApiException) as err:
        core.create_namespaced_pod_eviction("no-such-pod", NS, eviction)
    assert err.value.status == 404


def test_the_clock_drives_every_timestamp(cluster, batch):
    cluster.clock.now = 1_000_000.0
    batch.create_namespaced_job(NS, job("t", gpus=1, suspend=False))
    cluster.clock.advance(3 * 3600)
    cluster.complete_job(NS, "t")
    status = batch.read_namespaced_job("t", NS).status
    assert status.start_time.timestamp() == 1_000_000.0
    assert status.completion_time.timestamp() == 1_000_000.0 + 3 * 3600
    assert cluster.clock() == 1_000_000.0 + 3 * 3600  # frozen: no wall time passes
