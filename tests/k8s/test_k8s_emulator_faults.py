"""Fault injection and the request log: injected errors reach the client as real API errors and
change nothing; latency can be added; every request is logged with its answer."""
from __future__ import annotations

import json
import time

import kubernetes
import pytest
from kubernetes.client import ApiException

NS = "default"


def test_fail_next_answers_with_the_status_and_changes_nothing(kube_client, kube_emulator):
    core = kubernetes.client.CoreV1Api(kube_client)
    fault = kube_emulator.fail_next("POST", r"/configmaps$", 409)
    before = kube_emulator.resource_version
    with pytest.raises(ApiException) as err:
        core.create_namespaced_config_map(NS, {"metadata": {"name": "ledger"}})
    body = json.loads(err.value.body)
    assert err.value.status == 409 and body["kind"] == "Status" and body["code"] == 409
    assert kube_emulator.get("configmaps", NS, "ledger") is None
    assert kube_emulator.resource_version == before
    core.create_namespaced_config_map(NS, {"metadata": {"name": "ledger"}})  # the fault is spent
    assert fault.hits == 1 and fault.remaining == 0


@pytest.mark.parametrize("status", [500, 503, 504])
def test_server_errors_surface_as_api_exceptions(kube_client, kube_emulator, status):
    core = kubernetes.client.CoreV1Api(kube_client)
    kube_emulator.fail_next("GET", r"^/api/v1/nodes$", status, times=2)
    for _ in range(2):
        with pytest.raises(ApiException) as err:
            core.list_node()
        assert err.value.status == status
    assert core.list_node().items == []


def test_throttling_carries_retry_after_which_the_client_honours_on_reads(kube_client, kube_emulator):
    core = kubernetes.client.CoreV1Api(kube_client)
    fault = kube_emulator.fail_next("GET", r"^/api/v1/nodes$", 429)
    assert core.list_node().items == []  # urllib3 retried after the Retry-After second
    assert fault.hits == 1
    assert [r.status for r in kube_emulator.requests if r.path == "/api/v1/nodes"] == [429, 200]
    kube_emulator.fail_next("POST", r"/configmaps$", 429)
    with pytest.raises(ApiException) as err:  # writes are not retried
        core.create_namespaced_config_map(NS, {"metadata": {"name": "c"}})
    assert err.value.status == 429


def test_faults_match_method_and_path(kube_client, kube_emulator):
    batch = kubernetes.client.BatchV1Api(kube_client)
    core = kubernetes.client.CoreV1Api(kube_client)
    kube_emulator.create({"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "j", "namespace": NS},
                          "spec": {"suspend": True, "template": {"spec": {"restartPolicy": "Never",
                                   "containers": [{"name": "c", "image": "i"}]}}}})
    fault = kube_emulator.fail_next("PATCH", r"/jobs/j$", 409, times=1,
                                    body={"kind": "Status", "apiVersion": "v1", "status": "Failure",
                                          "reason": "Conflict", "code": 409, "message": "custom"})
    batch.read_namespaced_job("j", NS)  # GET does not match
    core.list_node()
    assert fault.hits == 0
    with pytest.raises(ApiException) as err:
        batch.patch_namespaced_job("j", NS, {"spec": {"suspend": False}})
    assert json.loads(err.value.body)["message"] == "custom"
    assert kube_emulator.get("jobs", NS, "j")["spec"]["suspend"] is True


def test_any_method_and_clear_faults(kube_client, kube_emulator):
    core = kubernetes.client.CoreV1Api(kube_client)
    kube_emulator.fail_next("*", r"/configmaps", 500, times=100)
    with pytest.raises(ApiException):
        core.list_namespaced_config_map(NS)
    kube_emulator.clear_faults()
    assert core.list_namespaced_config_map(NS).items == []


def test_delay_next_adds_latency_then_serves_normally(kube_client, kube_emulator):
    core = kubernetes.client.CoreV1Api(kube_client)
    kube_emulator.delay_next("GET", r"/namespaces$", 0.3)
    started = time.monotonic()
    assert len(core.list_namespace().items) == 4
    assert time.monotonic() - started >= 0.3
    started = time.monotonic()
    core.list_namespace()
    assert time.monotonic() - started < 0.3


def test_a_fault_on_the_watch_endpoint(kube_client, kube_emulator):
    core = kubernetes.client.CoreV1Api(kube_client)
    kube_emulator.fail_next("GET", r"/configmaps$", 503)  # only matches when the path matches exactly
    with pytest.raises(ApiException) as err:
        for _ in kubernetes.watch.Watch().stream(core.list_namespaced_config_map, NS, timeout_seconds=1):
            pass
    assert err.value.status == 503


def test_the_kmock_dsl_works_on_the_emulator(kube_client, kube_emulator):
    core = kubernetes.client.CoreV1Api(kube_client)
    kube_emulator["get /api/v1/nodes"] << 418 << {"kind": "Status", "code": 418, "message": "teapot"}
    with pytest.raises(ApiException) as err:
        core.list_node()
    assert err.value.status == 418


def test_the_request_log_records_method_path_body_and_status(kube_client, kube_emulator):
    core = kubernetes.client.CoreV1Api(kube_client)
    kube_emulator.clear_requests()
    core.create_namespaced_config_map(NS, {"metadata": {"name": "c"}, "data": {"k": "v"}})
    with pytest.raises(ApiException):
        core.read_namespaced_config_map("missing", NS)
    core.list_namespaced_config_map(NS, label_selector="a=b")
    log = kube_emulator.requests
    assert [(r.method, r.path, r.status) for r in log] == [
        ("POST", "/api/v1/namespaces/default/configmaps", 201),
        ("GET", "/api/v1/namespaces/default/configmaps/missing", 404),
        ("GET", "/api/v1/namespaces/default/configmaps", 200)]
    assert log[0].body["data"] == {"k": "v"} and log[2].params == {"labelSelector": "a=b"}
    assert kube_emulator.internal_errors == []
