"""Contracts parsed from labels: every rule of engine.core.contract, with its exact reason."""

from __future__ import annotations

import pytest

from engine.core.contract import ContractError, parse_contract
from engine.model import BudgetNode, BudgetTree, Cluster, Config, Policy, Principal

TREE = BudgetTree.build([
    BudgetNode("root", None, 100),
    BudgetNode("vision", "root", 60),
    BudgetNode("vision-a1", "vision", 100, principals=(Principal("namespace", "team-a1"),
                                                        Principal("group", "a1-people"))),
    BudgetNode("speech", "root", 40, principals=()),
])
CONFIG = Config(TREE, Policy(clusters=(Cluster("h100", "h100", 4, 8, 2),)))
NS = [Principal("namespace", "team-a1")]


def meta(**kw):
    names = {"budget": "allot.dev/budget", "min": "allot.dev/min-runtime", "res": "allot.dev/resumable",
             "prio": "allot.dev/priority", "gpp": "allot.dev/gpus-per-pod", "pods": "allot.dev/pods",
             "cluster": "allot.dev/cluster"}
    return {names[k]: v for k, v in kw.items()}


def test_full_contract():
    c = parse_contract(meta(budget="vision-a1", min="2h", res="false", prio="5", gpp="8", pods="4",
                            cluster="h100"), NS, CONFIG)
    assert (c.budget, c.min_runtime_s, c.resumable, c.priority, c.gpus_per_pod, c.pods, c.cluster) == \
        ("vision-a1", 7200.0, False, 5, 8, 4, "h100")
    assert c.allocated and c.gpus == 32 and c.note == ""


def test_defaults_and_shape_from_pod_specs():
    c = parse_contract(meta(budget="vision-a1"), [Principal("group", "a1-people")], CONFIG,
                       gpus_per_pod=2, pods=3)
    assert c.min_runtime_s == CONFIG.policy.default_min_runtime_s
    assert (c.gpus_per_pod, c.pods, c.resumable, c.priority) == (2, 3, True, 0)


def test_min_runtime_above_cap_is_refused_not_clamped():
    with pytest.raises(ContractError, match=r"9h is above the policy cap of 8h.*never clamped"):
        parse_contract(meta(budget="vision-a1", min="9h"), NS, CONFIG)


@pytest.mark.parametrize("labels", [meta(), meta(budget="0"), meta(budget="")])
def test_no_budget_is_unallocated(labels):
    c = parse_contract(labels, NS, CONFIG)
    assert c.budget is None and not c.allocated and "no budget" in c.note


def test_min_runtime_zero_is_unallocated_and_keeps_the_request():
    c = parse_contract(meta(budget="vision-a1", min="0"), NS, CONFIG)
    assert c.budget is None and c.requested_budget == "vision-a1" and "min runtime 0" in c.note


def test_budget_the_submitter_may_not_charge_runs_unallocated_with_why():
    c = parse_contract(meta(budget="vision-a1", min="1h"), [Principal("namespace", "intruder")], CONFIG)
    assert c.budget is None and not c.allocated
    assert "namespace:intruder may not charge budget 'vision-a1'" in c.note
    assert "group:a1-people, namespace:team-a1" in c.note


def test_leaf_without_principals_can_be_charged_by_nobody():
    c = parse_contract(meta(budget="speech"), NS, CONFIG)
    assert c.budget is None and "its principals: nobody" in c.note


def test_unknown_budget_gets_a_hint():
    with pytest.raises(ContractError, match=r"unknown budget 'vision-a2'; did you mean vision-a1\?"):
        parse_contract(meta(budget="vision-a2"), NS, CONFIG)


def test_inner_budget_is_refused_with_its_leaves():
    with pytest.raises(ContractError, match=r"'vision' is not a leaf budget; charge one of its leaves: vision-a1"):
        parse_contract(meta(budget="vision"), NS, CONFIG)


@pytest.mark.parametrize("labels, reason", [
    (meta(min="2hours"), "allot.dev/min-runtime: duration '2hours' has unknown unit 'hours'"),
    (meta(min="90"), "has no unit"),
    (meta(res="maybe"), "allot.dev/resumable: 'maybe' is not a boolean"),
    (meta(prio="high"), "allot.dev/priority: 'high' is not a whole number"),
    (meta(prio="2000000"), "out of range"),
    (meta(gpp="0"), "allot.dev/gpus-per-pod: 0 is out of range"),
    (meta(pods="two"), "allot.dev/pods: 'two' is not a whole number"),
    (meta(cluster="h200"), "unknown cluster 'h200'; clusters are h100; did you mean h100?"),
    (meta(budget="-bad"), "is not a valid label value"),
    (meta(budget="x" * 64), "is 64 characters; label values are at most 63"),
    (meta(prio="-3"), "is not a valid label value"),
])
def test_malformed_values_get_precise_reasons(labels, reason):
    with pytest.raises(ContractError) as err:
        parse_contract(labels, NS, CONFIG)
    assert reason in str(err.value)


def test_labels_and_pod_specs_must_agree():
    with pytest.raises(ContractError, match="label says 4 but the workload requests 2"):
        parse_contract(meta(pods="4"), NS, CONFIG, pods=2)


def test_a_pod_count_refused_without_its_field_reads_as_before():
    """``pods_from`` names the field that gives the pod count (a Job's spec.parallelism); a
    caller that names none gets the messages that name no field: no pods at all is "at least
    1, got 0", and a disagreeing label is said against what "the workload requests"."""
    with pytest.raises(ContractError) as err:
        parse_contract(meta(), NS, CONFIG, pods=0)
    assert str(err.value) == "pod count must be at least 1, got 0"
    with pytest.raises(ContractError) as err:
        parse_contract(meta(pods="4"), NS, CONFIG, pods=2)
    assert str(err.value) == ("allot.dev/pods: label says 4 but the workload requests 2; make them "
                              "agree (or remove the label)")


def test_every_broken_label_is_reported_at_once():
    """One resubmission can fix them all: the reason numbers each broken label, and a label
    that is not a valid label value is not also refused for its content."""
    with pytest.raises(ContractError) as err:
        parse_contract(meta(budget="vision-a2", min="9h", prio="high", cluster="h200", pods="-2"),
                       NS, CONFIG)
    text = str(err.value)
    assert text.startswith("5 problems: (1) allot.dev/pods: '-2' is not a valid label value")
    for i, part in enumerate(["allot.dev/min-runtime: 9h is above the policy cap of 8h",
                              "allot.dev/priority: 'high' is not a whole number",
                              "allot.dev/cluster: unknown cluster 'h200'",
                              "allot.dev/budget: unknown budget 'vision-a2'; did you mean vision-a1?"], 2):
        assert f"({i}) {part}" in text
    assert "(6)" not in text and "'-2' is not a whole number" not in text


def test_the_bounds_of_a_min_runtime_and_a_priority_are_inclusive():
    assert parse_contract(meta(budget="vision-a1", min="8h"), NS, CONFIG).min_runtime_s == 8 * 3600  # = the cap
    assert parse_contract(meta(budget="vision-a1", prio="1000000"), NS, CONFIG).priority == 1_000_000
    with pytest.raises(ContractError, match="1000001 is out of range"):
        parse_contract(meta(budget="vision-a1", prio="1000001"), NS, CONFIG)


def test_pods_that_request_no_gpus_are_refused_even_with_the_label():
    """A Job whose containers request no GPU would run without any on the node it is pinned
    to (the label cannot add the request); it was read as 1 GPU (or the label's count) and
    admitted. Refused with what to do, among the other problems."""
    with pytest.raises(ContractError) as err:
        parse_contract(meta(budget="vision-a1", min="1h"), NS, CONFIG, gpus_per_pod=0, pods=1)
    assert str(err.value).startswith("the workload's pods request no nvidia.com/gpu")
    assert "resources.limits (nvidia.com/gpu: N)" in str(err.value)
    with pytest.raises(ContractError) as err:
        parse_contract(meta(budget="vision-a1", gpp="4", prio="high"), NS, CONFIG,
                       gpus_per_pod=0, pods=1)
    text = str(err.value)
    assert text.startswith("2 problems:") and "'high' is not a whole number" in text
    assert "the allot.dev/gpus-per-pod label cannot give pods GPUs" in text
    # a trace task (no pod spec: nothing given) still takes the label or 1
    assert parse_contract(meta(budget="vision-a1", gpp="4"), NS, CONFIG).gpus_per_pod == 4
