"""Label selectors, field selectors and paging, as the official client sends them."""
from __future__ import annotations

import json

import kubernetes
import pytest
from kubernetes.client import ApiException

NS = "default"


@pytest.fixture
def core(kube_client, kube_emulator):
    labels = {
        "a": {"team": "vision", "tier": "prod", "contract": "v1"},
        "b": {"team": "nlp", "tier": "dev"},
        "c": {"team": "infra"},
        "d": {},
    }
    for name, lbls in labels.items():
        kube_emulator.create({"apiVersion": "v1", "kind": "ConfigMap",
                              "metadata": {"name": name, "namespace": NS, "labels": lbls}})
    kube_emulator.create({"apiVersion": "v1", "kind": "ConfigMap",
                          "metadata": {"name": "e", "namespace": "other", "labels": {"team": "nlp"}}})
    return kubernetes.client.CoreV1Api(kube_client)


def names(items) -> list[str]:
    return [item.metadata.name for item in items]


@pytest.mark.parametrize("selector, expected", [
    ("team=nlp", ["b"]),
    ("team==nlp", ["b"]),
    ("team!=nlp", ["a", "c", "d"]),  # objects without the key match != too
    ("team in (vision, nlp)", ["a", "b"]),
    ("team notin (vision,nlp)", ["c", "d"]),
    ("contract", ["a"]),
    ("!contract", ["b", "c", "d"]),
    ("team,tier=dev", ["b"]),
    ("team in (vision,nlp),!contract", ["b"]),
    ("", ["a", "b", "c", "d"]),
])
def test_label_selector_operators(core, selector, expected):
    assert names(core.list_namespaced_config_map(NS, label_selector=selector).items) == expected


def test_label_selector_across_namespaces(core):
    assert names(core.list_config_map_for_all_namespaces(label_selector="team=nlp").items) == ["b", "e"]


def test_malformed_label_selector_is_a_bad_request(core):
    with pytest.raises(ApiException) as err:
        core.list_namespaced_config_map(NS, label_selector="team in vision")
    assert err.value.status == 400


def test_field_selectors_on_pods(kube_client, kube_emulator):
    core = kubernetes.client.CoreV1Api(kube_client)
    kube_emulator.add_node("gpu-1", gpus=1)
    for name in ("p1", "p2"):
        kube_emulator.create({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": NS},
                              "spec": {"containers": [{"name": "c", "image": "i", "resources": {
                                  "limits": {"nvidia.com/gpu": "1"}}}]}})
    assert names(core.list_pod_for_all_namespaces(field_selector="spec.nodeName=gpu-1").items) == ["p1"]
    assert names(core.list_namespaced_pod(NS, field_selector="spec.nodeName=").items) == ["p2"]
    assert names(core.list_namespaced_pod(NS, field_selector="status.phase=Pending").items) == ["p2"]
    assert names(core.list_namespaced_pod(NS, field_selector="status.phase!=Pending,metadata.name=p1").items) == ["p1"]
    assert names(core.list_pod_for_all_namespaces(field_selector="metadata.namespace=default").items) == ["p1", "p2"]
    assert names(core.list_node(field_selector="metadata.name=gpu-1").items) == ["gpu-1"]
    assert names(core.list_node(field_selector="spec.unschedulable=false").items) == []  # unset reads ""
    with pytest.raises(ApiException) as err:
        core.list_namespaced_pod(NS, field_selector="spec.containers=x")
    assert err.value.status == 400 and "field label not supported" in err.value.body


def test_limit_and_continue_page_through_a_list(core):
    first = core.list_namespaced_config_map(NS, limit=3)
    assert names(first.items) == ["a", "b", "c"]
    assert first.metadata.remaining_item_count == 1 and first.metadata._continue
    rest = core.list_namespaced_config_map(NS, limit=3, _continue=first.metadata._continue)
    assert names(rest.items) == ["d"] and not rest.metadata._continue


def test_list_items_omit_type_meta_and_carry_the_list_resource_version(kube_client, kube_emulator, core):
    raw = core.list_namespaced_config_map(NS, _preload_content=False)
    body = json.loads(raw.data)
    assert body["kind"] == "ConfigMapList" and body["apiVersion"] == "v1"
    assert "kind" not in body["items"][0] and "apiVersion" not in body["items"][0]
    assert body["metadata"]["resourceVersion"] == str(kube_emulator.resource_version)
