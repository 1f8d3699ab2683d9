"""The emulator's patch semantics, checked directly against the Kubernetes rules for each flavour."""
from __future__ import annotations

import pytest

from .emulator.errors import ApiError
from .emulator.patching import JSON_PATCH, MERGE, STRATEGIC, apply_patch

POD = {
    "metadata": {"name": "p", "labels": {"a": "1", "b": "2"}, "finalizers": ["x"]},
    "spec": {
        "containers": [{"name": "main", "image": "v1", "env": [{"name": "A", "value": "1"}]},
                       {"name": "side", "image": "s1"}],
        "tolerations": [{"key": "t1", "operator": "Exists"}],
        "affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
            "nodeSelectorTerms": [{"matchExpressions": [{"key": "h", "operator": "In", "values": ["n1"]}]}]}}},
    },
    "status": {"conditions": [{"type": "Ready", "status": "True"}, {"type": "PodScheduled", "status": "True"}]},
}


def test_strategic_merge_merges_containers_by_name_and_conditions_by_type():
    out = apply_patch(POD, {"spec": {"containers": [{"name": "main", "image": "v2"}]},
                            "status": {"conditions": [{"type": "Ready", "status": "False"}]}}, STRATEGIC)
    assert [(c["name"], c["image"]) for c in out["spec"]["containers"]] == [("main", "v2"), ("side", "s1")]
    assert out["spec"]["containers"][0]["env"] == [{"name": "A", "value": "1"}]
    assert out["status"]["conditions"] == [{"type": "Ready", "status": "False"},
                                           {"type": "PodScheduled", "status": "True"}]
    assert POD["spec"]["containers"][0]["image"] == "v1"  # the input is never mutated


def test_strategic_merge_replaces_lists_without_a_merge_key():
    out = apply_patch(POD, {"spec": {"tolerations": [{"key": "t2", "operator": "Exists"}]}}, STRATEGIC)
    assert out["spec"]["tolerations"] == [{"key": "t2", "operator": "Exists"}]
    terms = [{"matchExpressions": [{"key": "h", "operator": "In", "values": ["n2"]}]}]
    out = apply_patch(POD, {"spec": {"affinity": {"nodeAffinity": {
        "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": terms}}}}}, STRATEGIC)
    assert out["spec"]["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"][
        "nodeSelectorTerms"] == terms


def test_strategic_merge_directives():
    out = apply_patch(POD, {"metadata": {"finalizers": ["y"], "labels": {"a": None}}}, STRATEGIC)
    assert out["metadata"]["finalizers"] == ["x", "y"] and out["metadata"]["labels"] == {"b": "2"}
    out = apply_patch(POD, {"metadata": {"$deleteFromPrimitiveList/finalizers": ["x"]}}, STRATEGIC)
    assert out["metadata"]["finalizers"] == []
    out = apply_patch(POD, {"spec": {"containers": [{"name": "side", "$patch": "delete"}]}}, STRATEGIC)
    assert [c["name"] for c in out["spec"]["containers"]] == ["main"]
    out = apply_patch(POD, {"metadata": {"labels": {"$patch": "replace", "c": "3"}}}, STRATEGIC)
    assert out["metadata"]["labels"] == {"c": "3"}
    out = apply_patch(POD, {"spec": {"$setElementOrder/containers": [{"name": "side"}, {"name": "main"}],
                                     "containers": [{"name": "side", "image": "s2"}]}}, STRATEGIC)
    assert [c["image"] for c in out["spec"]["containers"]] == ["v1", "s2"]


def test_merge_patch_replaces_lists_and_deletes_nulls():
    out = apply_patch(POD, {"spec": {"containers": [{"name": "only", "image": "o"}]},
                            "metadata": {"labels": {"b": None, "c": "3"}}}, MERGE)
    assert out["spec"]["containers"] == [{"name": "only", "image": "o"}]
    assert out["metadata"]["labels"] == {"a": "1", "c": "3"}


def test_json_patch_operations_and_failures():
    out = apply_patch(POD, [{"op": "replace", "path": "/metadata/labels/a", "value": "9"},
                            {"op": "remove", "path": "/spec/tolerations"},
                            {"op": "add", "path": "/metadata/annotations", "value": {"k": "v"}}], JSON_PATCH)
    assert out["metadata"]["labels"]["a"] == "9" and "tolerations" not in out["spec"]
    assert out["metadata"]["annotations"] == {"k": "v"}
    with pytest.raises(ApiError) as err:
        apply_patch(POD, [{"op": "remove", "path": "/no/such"}], JSON_PATCH)
    assert err.value.code == 422


def test_server_side_apply_and_unknown_types_are_refused():
    for content_type in ("application/apply-patch+yaml", "text/plain"):
        with pytest.raises(ApiError) as err:
            apply_patch(POD, {}, content_type)
        assert err.value.code == 415
