"""The emulator as an API server, seen through the official client: discovery, CRUD, PUT
concurrency, PATCH flavours, status subresources, deletion propagation, validation."""
from __future__ import annotations

import json

import kubernetes
import pytest
from kubernetes.client import ApiException

NS = "default"


def job_manifest(name: str = "train", suspend: bool = True, **spec: object) -> dict:
    return {
        "apiVersion": "batch/v1", "kind": "Job",
        "metadata": {"name": name, "namespace": NS, "labels": {"team": "a"}},
        "spec": {"suspend": suspend, "parallelism": 1, "completions": 1, **spec,
                 "template": {"spec": {"restartPolicy": "Never", "containers": [
                     {"name": "main", "image": "trainer:1",
                      "resources": {"limits": {"nvidia.com/gpu": "1"}}}]}}},
    }


def test_discovery_and_version_are_served(kube_client):
    assert kubernetes.client.VersionApi(kube_client).get_code().git_version.startswith("v1.30")
    assert kubernetes.client.CoreApi(kube_client).get_api_versions().versions == ["v1"]
    groups = {g.name for g in kubernetes.client.ApisApi(kube_client).get_api_versions().groups}
    assert {"batch", "coordination.k8s.io", "events.k8s.io", "policy"} <= groups
    core = kubernetes.client.CoreV1Api(kube_client).get_api_resources()
    names = {r.name for r in core.resources}
    assert core.group_version == "v1"
    assert {"pods", "pods/status", "pods/eviction", "nodes", "nodes/status", "namespaces",
            "events", "configmaps"} <= names
    batch = {r.name for r in kubernetes.client.BatchV1Api(kube_client).get_api_resources().resources}
    assert batch == {"jobs", "jobs/status"}


def test_kubeconfig_file_configures_the_official_client(kube_emulator, kube_kubeconfig):
    config = kubernetes.client.Configuration()
    kubernetes.config.load_kube_config(str(kube_kubeconfig), client_configuration=config)
    with kubernetes.client.ApiClient(config) as api:
        names = [n.metadata.name for n in kubernetes.client.CoreV1Api(api).list_namespace().items]
    assert names == ["default", "kube-node-lease", "kube-public", "kube-system"]
    assert config.host == kube_emulator.url


def test_create_sets_identity_and_rejects_duplicates(kube_client, kube_emulator):
    core = kubernetes.client.CoreV1Api(kube_client)
    kube_emulator.clock.now = 1_750_000_000.0
    cm = core.create_namespaced_config_map(NS, {"metadata": {"generateName": "ledger-"}, "data": {"k": "v"}})
    assert cm.metadata.name.startswith("ledger-") and len(cm.metadata.name) == len("ledger-") + 5
    assert cm.metadata.uid and int(cm.metadata.resource_version) == kube_emulator.resource_version
    assert cm.metadata.creation_timestamp.timestamp() == 1_750_000_000.0
    core.create_namespaced_config_map(NS, {"metadata": {"name": "fixed"}, "data": {}})
    with pytest.raises(ApiException) as err:
        core.create_namespaced_config_map(NS, {"metadata": {"name": "fixed"}, "data": {}})
    assert err.value.status == 409 and json.loads(err.value.body)["reason"] == "AlreadyExists"
    with pytest.raises(ApiException) as err:
        core.create_namespaced_config_map("nowhere", {"metadata": {"name": "x"}})
    assert err.value.status == 404  # the namespace does not exist
    with pytest.raises(ApiException) as err:  # re-creating an object read back from the server
        core.create_namespaced_config_map(NS, {"metadata": {"name": "again", "resourceVersion": "3"}})
    assert err.value.status == 500 and "resourceVersion should not be set" in err.value.body


def test_every_served_kind_round_trips(kube_client, kube_emulator):
    core = kubernetes.client.CoreV1Api(kube_client)
    batch = kubernetes.client.BatchV1Api(kube_client)
    coordination = kubernetes.client.CoordinationV1Api(kube_client)
    events = kubernetes.client.EventsV1Api(kube_client)
    core.create_namespace({"metadata": {"name": "team-a"}})
    assert core.read_namespace("team-a").status.phase == "Active"
    kube_emulator.add_node("gpu-1", gpus=8)
    assert core.read_node("gpu-1").status.allocatable["nvidia.com/gpu"] == "8"
    pod = core.create_namespaced_pod("team-a", {"metadata": {"name": "p"}, "spec": {
        "containers": [{"name": "c", "image": "i"}]}})
    assert pod.status.phase == "Pending"
    assert core.read_namespaced_pod("p", "team-a").status.phase == "Running"  # scheduled, started
    core.create_namespaced_event("team-a", {
        "metadata": {"name": "p.1"}, "reason": "Admitted", "message": "m", "type": "Normal",
        "involvedObject": {"kind": "Pod", "name": "p", "namespace": "team-a"}})
    events.create_namespaced_event("team-a", {
        "metadata": {"name": "p.2"}, "eventTime": "2025-01-01T00:00:00.000000Z", "reason": "Admitted",
        "action": "Admit", "reportingController": "allot", "reportingInstance": "r1",
        "regarding": {"kind": "Pod", "name": "p", "namespace": "team-a"}, "type": "Normal"})
    batch.create_namespaced_job("team-a", job_manifest() | {"metadata": {"name": "j"}})
    coordination.create_namespaced_lease("team-a", {"metadata": {"name": "leader"},
                                                    "spec": {"holderIdentity": "r1"}})
    assert [e.reason for e in core.list_namespaced_event("team-a", field_selector="involvedObject.name=p").items] == ["Admitted"]
    assert events.read_namespaced_event("p.2", "team-a").reporting_controller == "allot"
    assert batch.read_namespaced_job("j", "team-a").spec.parallelism == 1
    assert coordination.read_namespaced_lease("leader", "team-a").spec.holder_identity == "r1"
    core.delete_namespace("team-a")
    with pytest.raises(ApiException) as err:
        batch.read_namespaced_job("j", "team-a")
    assert err.value.status == 404
    assert kube_emulator.list("pods", "team-a") == []


def test_put_with_a_stale_resource_version_conflicts(kube_client):
    coordination = kubernetes.client.CoordinationV1Api(kube_client)
    lease = coordination.create_namespaced_lease(NS, {"metadata": {"name": "leader"},
                                                      "spec": {"holderIdentity": "r1", "leaseDurationSeconds": 15}})
    stale = lease.metadata.resource_version
    lease.spec.holder_identity = "r2"
    won = coordination.replace_namespaced_lease("leader", NS, lease)
    assert won.spec.holder_identity == "r2" and won.metadata.resource_version != stale
    lease.spec.holder_identity = "r3"  # still carries the stale resourceVersion
    with pytest.raises(ApiException) as err:
        coordination.replace_namespaced_lease("leader", NS, lease)
    body = json.loads(err.value.body)
    assert err.value.status == 409 and body["reason"] == "Conflict"
    assert "the object has been modified" in body["message"]
    assert coordination.read_namespaced_lease("leader", NS).spec.holder_identity == "r2"


def test_patch_with_a_stale_resource_version_conflicts(kube_client):
    core = kubernetes.client.CoreV1Api(kube_client)
    cm = core.create_namespaced_config_map(NS, {"metadata": {"name": "ledger"}, "data": {"a": "1"}})
    core.patch_namespaced_config_map("ledger", NS, {"data": {"a": "2"}})
    with pytest.raises(ApiException) as err:
        core.patch_namespaced_config_map("ledger", NS, {"metadata": {"resourceVersion": cm.metadata.resource_version},
                                                        "data": {"a": "3"}})
    assert err.value.status == 409
    assert core.read_namespaced_config_map("ledger", NS).data == {"a": "2"}


def test_a_no_op_write_keeps_the_resource_version(kube_client):
    core = kubernetes.client.CoreV1Api(kube_client)
    cm = core.create_namespaced_config_map(NS, {"metadata": {"name": "c", "labels": {"x": "1"}}})
    same = core.patch_namespaced_config_map("c", NS, {"metadata": {"labels": {"x": "1"}}})
    assert same.metadata.resource_version == cm.metadata.resource_version


def test_strategic_merge_patch_merges_maps_and_keyed_lists(kube_client, kube_emulator):
    core = kubernetes.client.CoreV1Api(kube_client)
    kube_emulator.add_node("gpu-1", labels={"rack": "r1", "old": "x"},
                           taints=[{"key": "a", "value": "1", "effect": "NoSchedule"}])
    core.patch_node("gpu-1", {"metadata": {"labels": {"drained": "true", "old": None},
                                           "annotations": {"allot.dev/state": "cordoned"}},
                              "spec": {"unschedulable": True,
                                       "taints": [{"key": "maintenance", "effect": "NoSchedule"}]}})
    node = kube_emulator.get("nodes", None, "gpu-1")
    assert node["metadata"]["labels"]["rack"] == "r1" and node["metadata"]["labels"]["drained"] == "true"
    assert "old" not in node["metadata"]["labels"]
    assert node["spec"] == {"unschedulable": True, "taints": [{"key": "maintenance", "effect": "NoSchedule"}]}
    core.patch_node_status("gpu-1", {"status": {"conditions": [{"type": "GPUHealthy", "status": "False"}]}})
    types = [c["type"] for c in kube_emulator.get("nodes", None, "gpu-1")["status"]["conditions"]]
    assert types == ["Ready", "GPUHealthy"]  # merged by type, not replaced


def test_merge_patch_and_json_patch_are_honoured(kube_client, kube_emulator):
    batch = kubernetes.client.BatchV1Api(kube_client)
    batch.create_namespaced_job(NS, job_manifest())
    batch.patch_namespaced_job("train", NS, [{"op": "add", "path": "/metadata/annotations",
                                              "value": {"allot.dev/state": "queued"}}])
    batch.patch_namespaced_job("train", NS, {"metadata": {"labels": None}},
                               _content_type="application/merge-patch+json")
    job = kube_emulator.get("jobs", NS, "train")
    assert job["metadata"]["annotations"] == {"allot.dev/state": "queued"}
    assert "labels" not in job["metadata"]
    with pytest.raises(ApiException) as err:
        batch.patch_namespaced_job("train", NS, [{"op": "test", "path": "/spec/parallelism", "value": 9}])
    assert err.value.status == 422


def test_status_is_written_only_through_the_status_subresource(kube_client, kube_emulator):
    batch = kubernetes.client.BatchV1Api(kube_client)
    batch.create_namespaced_job(NS, job_manifest())
    batch.patch_namespaced_job("train", NS, {"status": {"active": 7}, "spec": {"parallelism": 2}})
    job = kube_emulator.get("jobs", NS, "train")
    assert job["spec"]["parallelism"] == 2 and job["status"]["active"] == 0
    assert job["metadata"]["generation"] == 2
    batch.patch_namespaced_job_status("train", NS, {"status": {"failed": 2}, "spec": {"parallelism": 5}})
    job = kube_emulator.get("jobs", NS, "train")
    assert job["status"]["failed"] == 2 and job["spec"]["parallelism"] == 2


def test_job_template_is_mutable_only_while_suspended_and_never_started(kube_client, kube_emulator):
    batch = kubernetes.client.BatchV1Api(kube_client)
    kube_emulator.add_node("gpu-1")
    batch.create_namespaced_job(NS, job_manifest())
    pin = {"spec": {"template": {"spec": {"nodeSelector": {"kubernetes.io/hostname": "gpu-1"}}}}}
    batch.patch_namespaced_job("train", NS, pin)  # suspended, never started: allowed
    with pytest.raises(ApiException) as err:
        batch.patch_namespaced_job("train", NS, {"spec": {"template": {"spec": {"containers": [
            {"name": "main", "image": "other:2"}]}}}})
    assert err.value.status == 422 and "field is immutable" in json.loads(err.value.body)["message"]
    batch.patch_namespaced_job("train", NS, {"spec": {"suspend": False}})
    batch.patch_namespaced_job("train", NS, {"spec": {"suspend": True}})
    job = kube_emulator.get("jobs", NS, "train")
    assert job["status"]["startTime"]  # kept on suspension, as the real job controller does
    with pytest.raises(ApiException) as err:
        batch.patch_namespaced_job("train", NS, {"spec": {"template": {"spec": {"nodeSelector": {"x": "y"}}}}})
    assert err.value.status == 422
    batch.patch_namespaced_job_status("train", NS, {"status": {"startTime": None}})
    batch.patch_namespaced_job("train", NS, {"spec": {"template": {"spec": {"nodeSelector": {"x": "y"}}}}})
    assert kube_emulator.get("jobs", NS, "train")["spec"]["template"]["spec"]["nodeSelector"] == {
        "kubernetes.io/hostname": "gpu-1", "x": "y"}


def test_job_validation_matches_the_api_server(kube_client):
    batch = kubernetes.client.BatchV1Api(kube_client)
    bad = job_manifest()
    bad["spec"]["template"]["spec"]["restartPolicy"] = "Always"
    with pytest.raises(ApiException) as err:
        batch.create_namespaced_job(NS, bad)
    assert err.value.status == 422 and "restartPolicy" in json.loads(err.value.body)["message"]
    with pytest.raises(ApiException) as err:
        batch.create_namespaced_job(NS, job_manifest(name="Bad_Name"))
    assert err.value.status == 422
    with pytest.raises(ApiException) as err:
        batch.create_namespaced_job(NS, job_manifest(completionMode="Indexed", completions=None))
    assert err.value.status == 422



def test_job_containers_that_are_no_list_of_containers_are_refused(kube_emulator):
    """(The official client refuses them before sending; the server refuses them too.)"""
    from .emulator.errors import ApiError

    for containers in ({"main": {"image": "x"}}, ["main"]):
        bad = job_manifest(name=f"c{len(containers)}")
        bad["metadata"]["namespace"] = NS
        bad["spec"]["template"]["spec"]["containers"] = containers
        with pytest.raises(ApiError) as err:
            kube_emulator.create(bad)
        assert err.value.code == 422 and "containers" in err.value.message


def test_deleting_a_job_orphans_its_pods_unless_propagation_is_given(kube_client, kube_emulator):
    batch = kubernetes.client.BatchV1Api(kube_client)
    kube_emulator.add_node("gpu-1")
    batch.create_namespaced_job(NS, job_manifest(name="a", suspend=False))
    batch.create_namespaced_job(NS, job_manifest(name="b", suspend=False))
    batch.delete_namespaced_job("a", NS)
    batch.delete_namespaced_job("b", NS, propagation_policy="Background")
    pods = kube_emulator.list("pods", NS)
    assert [p["metadata"]["labels"]["job-name"] for p in pods] == ["a"]
    assert "ownerReferences" not in pods[0]["metadata"]
    with pytest.raises(ApiException) as err:
        batch.delete_namespaced_job("a", NS)
    assert err.value.status == 404 and json.loads(err.value.body)["message"] == 'jobs.batch "a" not found'


def test_finalizers_hold_deletion_until_removed(kube_client, kube_emulator):
    core = kubernetes.client.CoreV1Api(kube_client)
    core.create_namespaced_config_map(NS, {"metadata": {"name": "held", "finalizers": ["allot.dev/x"]}})
    core.delete_namespaced_config_map("held", NS)
    assert kube_emulator.get("configmaps", NS, "held")["metadata"]["deletionTimestamp"]
    core.patch_namespaced_config_map("held", NS, {"metadata": {"finalizers": None}},
                                     _content_type="application/merge-patch+json")
    assert kube_emulator.get("configmaps", NS, "held") is None


def test_configmaps_are_limited_to_one_mebibyte(kube_client):
    core = kubernetes.client.CoreV1Api(kube_client)
    with pytest.raises(ApiException) as err:
        core.create_namespaced_config_map(NS, {"metadata": {"name": "big"}, "data": {"x": "a" * (1 << 20)}})
    assert err.value.status == 422 and "Too long" in json.loads(err.value.body)["message"]


def test_lease_takeover_race_has_exactly_one_winner(kube_client):
    coordination = kubernetes.client.CoordinationV1Api(kube_client)
    coordination.create_namespaced_lease(NS, {"metadata": {"name": "allot"}, "spec": {"holderIdentity": "r1"}})
    seen_by_r2 = coordination.read_namespaced_lease("allot", NS)
    seen_by_r3 = coordination.read_namespaced_lease("allot", NS)
    seen_by_r2.spec.holder_identity = "r2"
    seen_by_r3.spec.holder_identity = "r3"
    coordination.replace_namespaced_lease("allot", NS, seen_by_r2)
    with pytest.raises(ApiException) as err:
        coordination.replace_namespaced_lease("allot", NS, seen_by_r3)
    assert err.value.status == 409
    with pytest.raises(ApiException) as err:
        coordination.create_namespaced_lease(NS, {"metadata": {"name": "allot"}, "spec": {}})
    assert err.value.status == 409
    assert coordination.read_namespaced_lease("allot", NS).spec.holder_identity == "r2"


def test_put_creates_a_missing_lease_but_not_a_missing_config_map(kube_client):
    coordination = kubernetes.client.CoordinationV1Api(kube_client)
    core = kubernetes.client.CoreV1Api(kube_client)
    made = coordination.replace_namespaced_lease("fresh", NS, {"metadata": {"name": "fresh"},
                                                              "spec": {"holderIdentity": "r1"}})
    assert made.metadata.uid and made.spec.holder_identity == "r1"
    with pytest.raises(ApiException) as err:
        core.replace_namespaced_config_map("fresh", NS, {"metadata": {"name": "fresh"}})
    assert err.value.status == 404
