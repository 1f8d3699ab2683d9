"""Observation and the reconciler's marks: cluster objects -> the Snapshot the core sees."""

from __future__ import annotations

import math

import pytest

from engine.core.types import Placement
from engine.k8s import marks
from engine.k8s.apply import pin_affinity
from engine.k8s.jobs import runs_on_its_placement
from engine.k8s.observe import observe, unhealthy_because
from engine.loader import load_config
from engine.model import Principal
from tests.k8s.reconcile_support import job, node, write_policy

T0 = 1_750_000_000.0


@pytest.fixture(scope="module")
def config(tmp_path_factory):
    return load_config(write_policy(tmp_path_factory.mktemp("policy")))


def running_job(name: str, ns: str = "team-a", *, start: float = T0, protected: float,
                placement: str = "n1=4", leaf: str | None = "team-a", **kw):
    obj = job(ns, name, budget=leaf, min_runtime="1h", suspend=False, **kw)
    obj["metadata"]["annotations"].update({
        marks.STATE: "running", marks.STARTED_AT: marks.format_time(start),
        marks.PROTECTED_UNTIL: marks.format_time(protected), marks.PLACEMENT: placement,
    })
    if leaf:
        obj["metadata"]["annotations"][marks.LEAF] = leaf
    return obj


# ------------------------------------------------------------------------------ marks


def test_times_round_trip_to_the_millisecond():
    t = 1_750_000_123.4567
    text = marks.format_time(t)
    assert text == "2025-06-15T15:08:43.457Z"
    assert marks.parse_time(text) == pytest.approx(t, abs=1e-3)
    assert marks.parse_time("2025-06-15T15:08:43Z") == 1_750_000_123.0
    assert marks.parse_time("2025-06-15T17:08:43.123456789+02:00") == pytest.approx(
        1_750_000_123.123457, abs=1e-6)
    assert marks.parse_time("yesterday") is None and marks.parse_time(None) is None


def test_placement_codec_sorts_and_refuses_garbage():
    p = marks.parse_placement("n2=8,n1=4")
    assert p == Placement((("n1", 4), ("n2", 8)))
    assert marks.format_placement(p) == "n1=4,n2=8"
    for bad in ("", "n1", "n1=x", "=3", "n1=-1"):
        assert marks.parse_placement(bad) is None


def test_submitter_annotation_adds_users_and_groups():
    assert marks.parse_submitter("user:alice, group:vision,bob,robot:x,") == (
        Principal("user", "alice"), Principal("group", "vision"), Principal("user", "bob"))


def test_metric_formatting_spells_infinity():
    assert marks.format_metric(math.inf) == "inf"
    assert marks.format_metric(0.123456) == "0.1235"
    assert marks.format_metric(None) == ""


def test_run_record_round_trips_and_ignores_garbage():
    rec = marks.RunRecord(T0, T0 + 60.5, 8, 1.6, "team-a")
    assert marks.RunRecord.parse(rec.to_text()) == rec
    assert marks.RunRecord.parse("{not json") is None


# ------------------------------------------------------------------------------ nodes


def test_nodes_capacity_cluster_domain_health_and_cordon(config):
    nodes = [
        node("n1", 8, domain="rack-1"),
        node("n2", 8, domain=None),  # domain defaults to the node name
        node("n3", 8, ready="Unknown"),
        node("n4", 8, conditions={"GPUUnhealthy": "True"}),
        node("n5", 8, taints=[{"key": "allot.dev/maintenance", "effect": "NoSchedule"}]),
        node("n6", 8, labels={"allot.dev/maintenance": "true"}),
        node("n7", 8, unschedulable=True),
        node("n8", 8, cluster="elsewhere"),  # not a policy cluster
        node("n9", 0),  # no GPUs
        node("n10", 8, cluster=None),  # only one cluster in the policy: it is that one
        node("n11", 8, labels={"allot.dev/maintenance": "false"}),
    ]
    snap = observe([], [], nodes, config).snapshot
    by = {n.name: n for n in snap.nodes}
    assert set(by) == {"n1", "n2", "n3", "n4", "n5", "n6", "n7", "n10", "n11"}
    assert by["n1"].domain == "rack-1" and by["n2"].domain == "n2"
    assert by["n1"].cluster == "gpu" and by["n10"].cluster == "gpu"
    assert [n for n in by if not by[n].healthy] == ["n3", "n4", "n5", "n6"]
    assert by["n7"].cordoned and by["n7"].healthy and not by["n1"].cordoned
    assert all(n.gpus == 8 for n in snap.nodes)
    # what made each unhealthy node so, as its cordon says it
    because = {n["metadata"]["name"]: unhealthy_because(n, config) for n in nodes}
    assert {k: v for k, v in because.items() if v} == {
        "n3": ["condition Ready=Unknown"], "n4": ["condition GPUUnhealthy=True"],
        "n5": ["taint allot.dev/maintenance"], "n6": ["label allot.dev/maintenance=true"]}


def test_the_maintenance_taint_makes_a_node_unhealthy_whatever_its_effect_and_no_other_does(config):
    nodes = [node("evicting", 8, taints=[{"key": "allot.dev/maintenance", "effect": "NoExecute"}]),
             node("tainted", 8, taints=[{"key": "nvidia.com/gpu", "effect": "NoSchedule"},
                                        {"key": "dedicated", "value": "ml", "effect": "NoExecute"}])]
    by = {n.name: n for n in observe([], [], nodes, config).snapshot.nodes}
    assert not by["evicting"].healthy and by["tainted"].healthy
    assert unhealthy_because(nodes[0], config) == ["taint allot.dev/maintenance"]
    assert unhealthy_because(nodes[1], config) == []


def test_healed_nodes_are_the_healthy_ones_the_reconciler_itself_cordoned(config):
    """Healed (to be uncordoned): cordoned, with the reconciler's cordon reason, and healthy
    again. Not a node still unhealthy, not an operator's cordon (no reason), not a node an
    operator already uncordoned by hand (a stale reason on a schedulable node)."""
    def cordoned_by_us(n, reason="node unhealthy"):
        n["metadata"]["annotations"] = {marks.CORDON_REASON: reason}
        return n

    nodes = [
        cordoned_by_us(node("repaired", 8, unschedulable=True), "unhealthy (condition Ready=False)"),
        cordoned_by_us(node("still-sick", 8, unschedulable=True, conditions={"GPUUnhealthy": "True"})),
        node("operators", 8, unschedulable=True),
        cordoned_by_us(node("uncordoned-by-hand", 8)),
        node("fine", 8),
    ]
    assert observe([], [], nodes, config).healed == {
        "repaired": "unhealthy (condition Ready=False)"}


def test_gpus_used_by_other_tenants_pods_are_not_offered(config):
    foreign = {"metadata": {"name": "p", "namespace": "infra"},
               "spec": {"nodeName": "n1", "containers": [
                   {"resources": {"requests": {"nvidia.com/gpu": "3"}}}]},
               "status": {"phase": "Running"}}
    done = {**foreign, "status": {"phase": "Succeeded"}}
    managed_pod = {"metadata": {"name": "a-0", "namespace": "team-a",
                                "labels": {"batch.kubernetes.io/job-name": "a"}},
                   "spec": {"nodeName": "n1", "containers": [
                       {"resources": {"limits": {"nvidia.com/gpu": "4"}}}]},
                   "status": {"phase": "Running"}}
    jobs = [running_job("a", protected=T0 + 3600, placement="n1=4")]
    snap = observe(jobs, [foreign, done, managed_pod], [node("n1", 8)], config).snapshot
    # 8 allocatable, 3 used by the foreign pod; the managed Job's 4 are in its placement
    assert (snap.nodes[0].gpus, snap.nodes[0].foreign) == (8, 3)
    assert snap.running[0].placement.gpus == 4


def test_a_job_that_fits_the_node_waits_while_other_tenants_use_it_rather_than_being_rejected(config):
    """Other tenants' pods hold GPUs for a while; a Job that fits the node's capacity waits for
    them (before, the node looked 5 GPUs big and the 8-GPU Job was rejected as never fitting)."""
    from engine.core.decide import decide
    from engine.core.types import Admit

    foreign = {"metadata": {"name": "p", "namespace": "infra"},
               "spec": {"nodeName": "n1", "containers": [
                   {"resources": {"requests": {"nvidia.com/gpu": "3"}}}]},
               "status": {"phase": "Running"}}
    wanted = job("team-a", "whole", budget="team-a", min_runtime="1h", gpus=8)
    busy = observe([wanted], [foreign], [node("n1", 8)], config).snapshot
    status = decide(busy, config, T0).statuses["team-a/whole"]
    assert status.state == "pending", status.reason
    assert "needs 8 GPUs, 5 GPUs free" in status.reason
    assert ("holding n1 for it (5 of 8 GPUs free, 0 held by work it may preempt, 0 held by "
            "work it may not preempt: none, 3 by other tenants' pods)") in status.reason
    # three GPUs free (no managed work): still not room for 8, and a 4-GPU Job takes 4 of the 5
    small = job("team-a", "half", budget="team-a", min_runtime="1h", gpus=4)
    both = observe([small], [foreign], [node("n1", 8)], config).snapshot
    (admit,) = [a for a in decide(both, config, T0).actions if isinstance(a, Admit)]
    assert admit.placement.assignments == (("n1", 4),)
    free = observe([wanted], [], [node("n1", 8)], config).snapshot  # the tenant's pod ended
    assert [a.workload_id for a in decide(free, config, T0).actions
            if isinstance(a, Admit)] == ["team-a/whole"]


# ------------------------------------------------------------------------------ jobs


def test_jobs_without_contract_labels_are_ignored(config):
    obs = observe([job("team-a", "plain", contract=False, suspend=False)], [], [], config)
    assert obs.jobs == {} and obs.snapshot.pending == () and obs.held == ()


def test_suspended_contract_job_is_pending_with_parsed_contract(config):
    obj = job("team-a", "train", budget="team-a", min_runtime="2h", gpus=8, pods=2,
              resumable=False, created="2025-06-15T15:00:00Z",
              annotations={marks.SUBMITTER: "user:alice"})
    obs = observe([obj], [], [], config)
    (w,) = obs.snapshot.pending
    assert w.id == "team-a/train" and w.invalid is None and w.owner == "alice"
    c = w.contract
    assert (c.budget, c.min_runtime_s, c.gpus_per_pod, c.pods, c.resumable) == \
        ("team-a", 7200.0, 8, 2, False)
    assert w.submitted_at == marks.parse_time("2025-06-15T15:00:00Z")
    assert obs.jobs["team-a/train"].kind == "pending"


def test_budget_of_another_namespace_runs_unallocated(config):
    obs = observe([job("team-b", "sneaky", budget="team-a", min_runtime="1h")], [], [], config)
    (w,) = obs.snapshot.pending
    assert w.invalid is None and w.contract.budget is None and not w.contract.allocated


def test_group_from_submitter_annotation_may_charge_a_leaf(tmp_path):
    root = write_policy(tmp_path)
    text = (root / "budgets" / "root.yaml").read_text().replace(
        "        - namespace: team-a", "        - namespace: team-a\n        - group: vision")
    (root / "budgets" / "root.yaml").write_text(text)
    cfg = load_config(root)
    obj = job("shared", "x", budget="team-a", min_runtime="1h",
              annotations={marks.SUBMITTER: "group:vision"})
    (w,) = observe([obj], [], [], cfg).snapshot.pending
    assert w.contract.budget == "team-a"


def test_bad_contract_is_pending_with_the_reason(config):
    obj = job("team-a", "bad", budget="team-zzz", min_runtime="1h")
    (w,) = observe([obj], [], [], config).snapshot.pending
    assert w.invalid is not None and "team-zzz" in w.invalid


def test_min_runtime_above_the_cap_is_refused(config):
    (w,) = observe([job("team-a", "long", budget="team-a", min_runtime="9h")], [], [],
                   config).snapshot.pending
    assert w.invalid is not None and "8h" in w.invalid


def test_running_state_is_recovered_from_the_marks(config):
    obj = running_job("a", start=T0, protected=T0 + 3600, placement="n2=8,n1=8")
    obj["metadata"]["labels"]["allot.dev/min-runtime"] = "8h"  # edited after admission
    obs = observe([obj], [], [node("n1"), node("n2")], config)
    (r,) = obs.snapshot.running
    assert r.started_at == pytest.approx(T0, abs=1e-3)
    assert r.protected_until == pytest.approx(T0 + 3600, abs=1e-3)  # not extended by the edit
    assert r.placement == Placement((("n1", 8), ("n2", 8)))
    assert r.workload.contract.budget == "team-a"
    (occ,) = obs.occupancy
    assert (occ.leaf, occ.end, occ.gpus, occ.weight) == ("team-a", None, 16, 1.0)


def test_unsuspended_contract_job_without_admission_is_held(config):
    obs = observe([job("team-a", "sneaky", budget="team-a", min_runtime="1h", suspend=False)],
                  [], [], config)
    assert obs.held == ("team-a/sneaky",)
    assert obs.snapshot.pending == () and obs.snapshot.running == ()


def test_finished_running_job_is_charged_to_its_end_and_leaves_the_snapshot(config):
    obj = running_job("a", start=T0, protected=T0 + 3600, placement="n1=4")
    obj["status"] = {"conditions": [{"type": "Complete", "status": "True",
                                     "lastTransitionTime": marks.format_kube_time(T0 + 600)}]}
    obs = observe([obj], [], [node("n1")], config)
    assert obs.snapshot.running == () and obs.snapshot.pending == ()
    assert obs.finished == ("team-a/a",)
    (occ,) = obs.occupancy
    assert (occ.start, occ.end, occ.gpus) == (pytest.approx(T0, abs=1e-3), T0 + 600, 4)


@pytest.mark.parametrize("status, end", [
    ({"completionTime": marks.format_kube_time(T0 + 700)}, T0 + 700),  # the status's time
    ({}, T0 + 900),  # no time anywhere: it ended by the pass that sees it finished
])
def test_finished_job_without_a_condition_time_is_finished(config, status, end):
    # a True Complete condition that carries no lastTransitionTime or lastProbeTime still
    # finishes the Job: it must leave the snapshot and be charged to an end, not run on
    obj = running_job("a", start=T0, protected=T0 + 3600, placement="n1=4")
    obj["status"] = {"conditions": [{"type": "Complete", "status": "True"}], **status}
    assert not runs_on_its_placement(obj)
    obs = observe([obj], [], [node("n1")], config, T0 + 900)
    assert obs.snapshot.running == () and obs.finished == ("team-a/a",)
    (occ,) = obs.occupancy
    assert (occ.start, occ.end) == (pytest.approx(T0, abs=1e-3), pytest.approx(end, abs=1e-3))


def test_preempted_job_is_pending_and_its_last_run_stays_chargeable(config):
    obj = job("team-a", "p", budget="team-a", min_runtime="1h")
    rec = marks.RunRecord(T0, T0 + 900, 8, 1.0, "team-a")
    obj["metadata"]["annotations"].update({marks.STATE: "preempted",
                                           marks.LAST_RUN: rec.to_text()})
    obs = observe([obj], [], [], config)
    assert [w.id for w in obs.snapshot.pending] == ["team-a/p"]
    (occ,) = obs.occupancy
    assert (occ.start, occ.end, occ.gpus, occ.leaf) == (T0, T0 + 900, 8, "team-a")


def test_unallocated_running_job_is_never_charged(config):
    obj = running_job("free", protected=T0, placement="n1=2", leaf=None)
    obs = observe([obj], [], [node("n1")], config)
    (r,) = obs.snapshot.running
    assert not r.workload.contract.allocated
    assert obs.occupancy[0].leaf is None


# ------------------------------------------------------------------------------ pinning


def test_pin_keeps_the_users_own_node_affinity_and_replaces_an_old_pin():
    spec = {"affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
        "nodeSelectorTerms": [
            {"matchExpressions": [{"key": "gpu", "operator": "In", "values": ["h100"]},
                                  {"key": marks.HOSTNAME_LABEL, "operator": "In",
                                   "values": ["old"]}]},
            {"matchExpressions": [{"key": "zone", "operator": "Exists"}]}]}}}}
    pinned = pin_affinity(spec, ("n2", "n1"))
    terms = pinned["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"][
        "nodeSelectorTerms"]
    ours = {"key": marks.HOSTNAME_LABEL, "operator": "In", "values": ["n1", "n2"]}
    assert terms[0]["matchExpressions"] == [
        {"key": "gpu", "operator": "In", "values": ["h100"]}, ours]
    assert terms[1]["matchExpressions"] == [{"key": "zone", "operator": "Exists"}, ours]
    assert pin_affinity({}, ("n1",))["nodeAffinity"][
        "requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"] == [
        {"matchExpressions": [{**ours, "values": ["n1"]}]}]


def test_gpus_and_pods_are_counted_as_kubernetes_runs_them(config):
    """Pods: at most ``completions`` at once; GPUs of a pod: its containers' sum, or its
    largest init container's when that is more (they run one at a time, first)."""
    from engine.k8s.jobs import parse_job

    wide = job("team-a", "wide", budget="team-a", min_runtime="1h", gpus=4, pods=4)
    wide["spec"]["completions"] = 2
    assert (parse_job(wide, config).contract.pods, parse_job(wide, config).contract.gpus_per_pod) == (2, 4)
    init = job("team-a", "init", budget="team-a", min_runtime="1h", gpus=2)
    init["spec"]["template"]["spec"]["initContainers"] = [
        {"name": "warm", "image": "busybox", "resources": {"limits": {"nvidia.com/gpu": "8"}}}]
    assert parse_job(init, config).contract.gpus_per_pod == 8


def test_a_pod_count_refused_names_the_field_to_change(config):
    """The gang-size label disagrees with the pods Kubernetes would run: the reason names
    spec.parallelism (or spec.completions when that is fewer) and what to set, not "the
    workload requests"."""
    from engine.k8s.jobs import parse_job

    gang = job("team-a", "gang", budget="team-a", min_runtime="1h", gpus=8, pods=2,
               labels={"allot.dev/pods": "4"})
    assert parse_job(gang, config).invalid == (
        "allot.dev/pods: label says 4 but spec.parallelism is 2; make them agree: set "
        "spec.parallelism to 4 or the label to 2 (or remove the label)")
    gang["spec"]["parallelism"] = 4  # (completions stays 2: two pods at once)
    assert parse_job(gang, config).invalid == (
        "allot.dev/pods: label says 4 but spec.completions is 2; make them agree: set "
        "spec.completions to 4 or the label to 2 (or remove the label)")
    none = job("team-a", "none", budget="team-a", min_runtime="1h", gpus=8)
    none["spec"]["parallelism"] = 0
    assert parse_job(none, config).invalid == (
        "pod count must be at least 1, got 0 from spec.parallelism; set spec.parallelism to 1 or "
        "more")


def test_a_job_whose_pods_request_no_gpus_is_rejected_not_admitted_as_one_gpu(config):
    """Its pods would run without GPUs on the node they are pinned to; with the
    gpus-per-pod label too (Kubernetes does not let the label add the request)."""
    from engine.k8s.jobs import parse_job

    cpu = job("team-a", "cpu", budget="team-a", min_runtime="1h")
    cpu["spec"]["template"]["spec"]["containers"][0]["resources"] = {}
    assert "request no nvidia.com/gpu" in (parse_job(cpu, config).invalid or "")
    cpu["metadata"]["labels"]["allot.dev/gpus-per-pod"] = "4"
    assert "label cannot give pods GPUs" in (parse_job(cpu, config).invalid or "")
