"""The reconciler against the Kubernetes API emulator, through the official client: what a
researcher and an operator see happen to their Jobs and Nodes.

Every scenario runs passes by hand (``run_pass``) on the emulator's frozen clock, so "a Job ran
for two hours" is ``env.advance(7200)``. The policy: leaves ``team-a`` and ``team-b`` at 50 %
each, 8-GPU nodes, min runtime capped at 8 h, grace period 2 m.
"""

from __future__ import annotations

import re

import pytest

from engine.k8s import marks
from tests.k8s.reconcile_support import Env, T0, ann, events_for, job


@pytest.fixture
def env(kube_emulator, kube_client, tmp_path):
    return Env(kube_emulator, kube_client, tmp_path / "policy")


def pods_on(env: Env, ns: str, name: str) -> list[str]:
    return sorted((p.get("spec") or {}).get("nodeName") or "" for p in env.emu.job_pods(ns, name))


def test_debug_job_is_admitted_pinned_explained_and_never_admitted_twice(env):
    env.nodes(2)
    env.submit(job("team-a", "dbg", budget="team-a", min_runtime="10m", gpus=2))
    r = env.reconciler()
    report = r.run_pass()
    assert report.result.admitted == ["team-a/dbg"]
    j = env.job("team-a", "dbg")
    a = ann(j)
    assert j["spec"]["suspend"] is False
    assert a[marks.STATE] == "running" and a[marks.LEAF] == "team-a"
    assert a[marks.STARTED_AT] == marks.format_time(T0)
    assert a[marks.PROTECTED_UNTIL] == marks.format_time(T0 + 600)
    node_name = a[marks.PLACEMENT].split("=")[0]
    assert a[marks.PLACEMENT] == f"{node_name}=2"
    assert a[marks.CONFIG] == r.policy.commit and a[marks.CONFIG].startswith("dir:")
    term = j["spec"]["template"]["spec"]["affinity"]["nodeAffinity"][
        "requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"][0]
    assert term["matchExpressions"] == [
        {"key": "kubernetes.io/hostname", "operator": "In", "values": [node_name]}]
    assert pods_on(env, "team-a", "dbg") == [node_name]  # the scheduler honoured the pin
    (event,) = events_for(env.emu, "dbg", "Admitted")
    assert event["type"] == "Normal" and "protected for 10m" in event["message"]
    assert "rank 1/2" in event["message"]
    for _ in range(3):
        env.advance(30)
        assert r.run_pass().result.admitted == []
    assert env.admissions("team-a", "dbg") == 1
    assert len(events_for(env.emu, "dbg", "Admitted")) == 1


def test_waiting_job_is_explained_on_its_annotations(env):
    env.nodes(1)
    env.submit(job("team-a", "big", budget="team-a", min_runtime="1h", gpus=8))
    env.submit(job("team-a", "next", budget="team-a", min_runtime="1h", gpus=8))
    r = env.reconciler()
    r.run_pass()
    a = ann(env.job("team-a", "next"))
    assert env.job("team-a", "next")["spec"]["suspend"] is True
    assert a[marks.STATE] == "pending"
    assert a[marks.REASON].startswith("waiting: needs") and "0 GPUs free" in a[marks.REASON]
    # position 2: behind "big", which this same pass admitted
    assert a[marks.QUEUE_POSITION] == "2" and a[marks.RANK] == "1" and a[marks.LEAF] == "team-a"
    # why, in one word: it may never preempt "big" (its own budget's), so it holds the node as
    # a drain hold until big ends; the admitted Job has no such annotation
    assert a[marks.WAITING] == "holding"
    assert marks.WAITING not in ann(env.job("team-a", "big"))
    env.advance(3600)
    env.emu.complete_job("team-a", "big")
    assert r.run_pass().result.admitted == ["team-a/next"]
    assert marks.WAITING not in ann(env.job("team-a", "next"))  # admitted: the word is gone


def test_over_budget_job_is_preempted_for_an_under_budget_one(env):
    env.nodes(1)
    env.submit(job("team-b", "hog", budget="team-b", min_runtime="1h", gpus=8))
    r = env.reconciler()
    assert r.run_pass().result.admitted == ["team-b/hog"]
    env.advance(2 * 3600)  # team-b used 16 GPU-hours; its protection ended after 1 h
    env.submit(job("team-a", "fresh", budget="team-a", min_runtime="1h", gpus=8))
    report = r.run_pass()
    assert report.result.preempted == ["team-b/hog"]
    hog = env.job("team-b", "hog")
    a = ann(hog)
    assert hog["spec"]["suspend"] is True and a[marks.STATE] == "preempted"
    assert marks.PLACEMENT not in a and marks.STARTED_AT not in a
    assert a[marks.PREEMPTIONS] == "1" and float(a[marks.RUN_SECONDS]) == 7200.0
    run = marks.RunRecord.parse(a[marks.LAST_RUN])
    assert (run.start, run.end, run.gpus, run.leaf) == (T0, T0 + 7200, 8, "team-b")
    (event,) = events_for(env.emu, "hog", "Preempted")
    assert event["type"] == "Warning" and "team-a/fresh" in event["message"]
    assert "120s grace" in event["message"]
    # the kubelet gave the pods SIGTERM and the template's grace period
    terms = [t for t in env.emu.terminations if t.job == "hog"]
    assert terms and all(t.reason == "Suspended" and t.grace_seconds == 120 for t in terms)
    # the preemptor gets the GPUs (this pass or the next) and team-b's usage was charged
    if "team-a/fresh" not in report.result.admitted:
        env.advance(1)
        assert r.run_pass().result.admitted == ["team-a/fresh"]
    assert env.state("team-a", "fresh") == "running"
    assert env.ledger_usage()["team-b"] == pytest.approx(8 * 7200)


def test_protected_job_is_not_preempted_until_its_min_runtime_is_over(env):
    env.nodes(1)
    env.submit(job("team-b", "hog", budget="team-b", min_runtime="1h", gpus=8))
    r = env.reconciler()
    r.run_pass()
    env.advance(1800)
    env.submit(job("team-a", "fresh", budget="team-a", min_runtime="1h", gpus=8))
    report = r.run_pass()
    assert report.result.preempted == [] and report.result.admitted == []
    a = ann(env.job("team-a", "fresh"))
    assert a[marks.STATE] == "pending"
    hog = ann(env.job("team-b", "hog"))
    assert hog[marks.STATE] == "running"
    env.advance(1800 - 1)  # one second before the protection ends: still protected
    assert r.run_pass().result.preempted == []
    env.advance(1)
    assert r.run_pass().result.preempted == ["team-b/hog"]


def test_unallocated_work_is_preempted_first(env):
    env.nodes(2)
    env.submit(job("team-b", "funded", budget="team-b", min_runtime="1h", gpus=8))
    env.submit(job("team-b", "free", min_runtime="0", gpus=8))  # unallocated: no budget
    r = env.reconciler()
    assert sorted(r.run_pass().result.admitted) == ["team-b/free", "team-b/funded"]
    assert ann(env.job("team-b", "free"))[marks.PROTECTED_UNTIL] == marks.format_time(T0)
    assert marks.LEAF not in ann(env.job("team-b", "free"))
    env.advance(2 * 3600)  # team-b's funded job is now over budget and unprotected too
    env.submit(job("team-a", "fresh", budget="team-a", min_runtime="1h", gpus=8))
    report = r.run_pass()
    assert report.result.preempted == ["team-b/free"]
    assert env.state("team-b", "funded") == "running"
    # free work is never charged: only the funded job's 2 h of 8 GPUs
    assert env.ledger_usage() == {"team-a": 0.0, "team-b": pytest.approx(8 * 7200)}


def test_unhealthy_node_is_cordoned_drained_as_min_runtimes_end_and_labelled(env):
    env.nodes(2)
    env.submit(job("team-a", "a", budget="team-a", min_runtime="1h", gpus=8))
    env.submit(job("team-b", "b", budget="team-b", min_runtime="1h", gpus=8))
    r = env.reconciler()
    r.run_pass()
    sick = ann(env.job("team-a", "a"))[marks.PLACEMENT].split("=")[0]
    env.emu.set_node_condition(sick, "GPUUnhealthy", "True")
    env.advance(600)
    report = r.run_pass()
    assert report.result.cordoned == [sick] and report.result.evicted == []
    node = env.emu.get("nodes", None, sick)
    assert node["spec"]["unschedulable"] is True
    # the cordon says what made the node unhealthy, for the operator who looks
    assert node["metadata"]["annotations"][marks.CORDON_REASON].endswith("(condition GPUUnhealthy=True)")
    (cordoned,) = events_for(env.emu, sick, "Cordoned")
    assert cordoned["message"].endswith("(condition GPUUnhealthy=True)")
    env.advance(3000)  # the job on the sick node reaches its min runtime
    report = r.run_pass()
    assert report.result.evicted == ["team-a/a"] and report.result.preempted == []
    (ev,) = events_for(env.emu, "a", "Evicted")
    assert "unhealthy" in ev["message"]
    # times people read are RFC 3339, not the clock's epoch seconds (t=1796469421)
    ended = f"its min runtime ended at {marks.format_kube_time(T0 + 3600)}"
    assert ended in ev["message"] and ended in ann(env.job("team-a", "a"))[marks.REASON]
    assert not re.search(r"t=\d{10}", ev["message"] + ann(env.job("team-a", "a"))[marks.REASON])
    env.advance(60)
    report = r.run_pass()
    assert report.result.drained == [sick]
    assert env.emu.get("nodes", None, sick)["metadata"]["labels"]["allot.dev/drained"] == "true"
    assert events_for(env.emu, sick, "Drained")
    env.advance(60)
    assert r.run_pass().result.drained == []  # labelled once, not every pass
    assert len(events_for(env.emu, sick, "Drained")) == 1


def test_a_node_healthy_again_is_back_in_service_but_an_operators_cordon_stays(env):
    env.nodes(2)
    r = env.reconciler()
    sick, kept = "n0", "n1"
    env.emu.set_node_condition(sick, "GPUUnhealthy", "True")
    env.emu.patch("nodes", None, kept, {"spec": {"unschedulable": True}})  # an operator's cordon
    first = r.run_pass().result
    assert first.cordoned == [sick] and first.drained == [sick]  # (empty: drained at once)
    assert env.emu.get("nodes", None, sick)["metadata"]["labels"]["allot.dev/drained"] == "true"
    env.emu.set_node_condition(sick, "GPUUnhealthy", "False")  # repaired
    env.advance(60)
    report = r.run_pass()
    assert report.result.uncordoned == [sick]
    node = env.emu.get("nodes", None, sick)
    assert not node["spec"].get("unschedulable")
    assert marks.CORDON_REASON not in (node["metadata"].get("annotations") or {})
    assert "allot.dev/drained" not in (node["metadata"].get("labels") or {})
    (ev,) = events_for(env.emu, sick, "Uncordoned")
    assert ev["type"] == "Normal" and "healthy again" in ev["message"]
    assert r.metrics.get("allot_uncordons_total") == 1
    assert env.emu.get("nodes", None, kept)["spec"]["unschedulable"] is True
    # back in service: an 8-GPU job starts there (the other node is still the operator's)
    env.submit(job("team-a", "a", budget="team-a", min_runtime="1h", gpus=8))
    env.advance(60)
    report = r.run_pass()
    assert report.result.admitted == ["team-a/a"] and report.result.uncordoned == []
    assert ann(env.job("team-a", "a"))[marks.PLACEMENT] == f"{sick}=8"


def test_bad_contract_is_rejected_with_an_event_and_never_admitted(env):
    env.nodes(1)
    env.submit(job("team-a", "typo", budget="team-aa", min_runtime="1h", gpus=1))
    env.submit(job("team-a", "greedy", budget="team-a", min_runtime="9h", gpus=1))
    r = env.reconciler()
    report = r.run_pass()
    assert sorted(report.result.rejected) == ["team-a/greedy", "team-a/typo"]
    assert report.pending == 0 and r.metrics.get("allot_queue_length") == 0  # (not queued)
    for name, words in (("typo", "team-aa"), ("greedy", "8h")):
        j = env.job("team-a", name)
        assert j["spec"]["suspend"] is True
        assert ann(j)[marks.STATE] == "rejected" and words in ann(j)[marks.REASON]
        (ev,) = events_for(env.emu, name, "Rejected")
        assert ev["type"] == "Warning" and words in ev["message"]
    env.advance(120)
    again = r.run_pass()
    assert again.result.rejected == []  # already said: no new Event
    assert again.pending == 0 and r.metrics.get("allot_queue_length") == 0  # (still not queued)
    assert len(events_for(env.emu, "typo", "Rejected")) == 1
    assert env.admissions("team-a", "typo") == 0


def test_fixed_labels_make_a_rejected_job_schedulable(env):
    env.nodes(1)
    env.submit(job("team-a", "typo", budget="team-aa", min_runtime="1h"))
    r = env.reconciler()
    r.run_pass()
    env.emu.patch("Job", "team-a", "typo", {"metadata": {"labels": {"allot.dev/budget": "team-a"}}})
    assert r.run_pass().result.admitted == ["team-a/typo"]


def test_job_created_unsuspended_is_held_then_admitted_by_the_reconciler(env):
    env.nodes(1)
    env.submit(job("team-a", "eager", budget="team-a", min_runtime="1h", gpus=4, suspend=False))
    r = env.reconciler()
    assert r.run_pass().result.held == ["team-a/eager"]
    assert env.job("team-a", "eager")["spec"]["suspend"] is True
    assert events_for(env.emu, "eager", "Held")
    env.advance(5)
    assert r.run_pass().result.admitted == ["team-a/eager"]
    j = env.job("team-a", "eager")
    assert j["spec"]["suspend"] is False and ann(j)[marks.STATE] == "running"
    assert pods_on(env, "team-a", "eager") == [ann(j)[marks.PLACEMENT].split("=")[0]]


def test_preempted_job_is_readmitted_on_new_nodes(env):
    env.nodes(1)
    env.submit(job("team-b", "hog", budget="team-b", min_runtime="1h", gpus=8))
    r = env.reconciler()
    r.run_pass()
    env.advance(7200)
    env.submit(job("team-a", "fresh", budget="team-a", min_runtime="10m", gpus=8))
    r.run_pass()
    r.run_pass()
    env.advance(600)
    env.emu.complete_job("team-a", "fresh")
    env.emu.add_node("n9", gpus=8, labels={"allot.dev/cluster": "gpu"})
    env.advance(60)
    report = r.run_pass()
    assert report.result.admitted == ["team-b/hog"]
    hog = env.job("team-b", "hog")
    assert ann(hog)[marks.STARTED_AT] == marks.format_time(T0 + 7200 + 660)
    assert ann(env.job("team-a", "fresh"))[marks.STATE] == "finished"
    assert env.emu.job_pods("team-b", "hog")  # pods created again after re-pinning
    # the finished job was charged to its completion, not beyond
    assert env.ledger_usage()["team-a"] == pytest.approx(8 * 600)


def test_dry_run_writes_nothing(env):
    env.nodes(1)
    env.submit(job("team-a", "dbg", budget="team-a", min_runtime="10m", gpus=1))
    env.emu.clear_requests()
    report = env.reconciler(dry_run=True).run_pass()
    assert report.result.admitted == ["team-a/dbg"]
    assert any("admit team-a/dbg" in p for p in report.result.planned)
    assert {req.method for req in env.emu.requests} == {"GET"}
    assert env.job("team-a", "dbg")["spec"]["suspend"] is True


def test_loan_runs_unallocated_on_held_gpus_and_the_holder_takes_them_back(env):
    """``placement.loans``: two 8-GPU nodes, team-a 95 % / team-b 5 %. team-a fills all but one
    GPU; team-b's 1-GPU job takes it and ends. team-b now ranks below team-a, so its 8-GPU job
    may preempt nothing and holds the node short the fewest GPUs; team-b's resumable 1-GPU job
    is kept off that node, the other is full: it starts there on loan, recorded with no leaf and
    no protection, never charged. When team-a's job on the held node ends, the holder preempts
    the loan and starts; the loaned job is funded again in the queue."""
    from tests.k8s.reconcile_support import write_policy

    write_policy(env.policy_root, {"team-a": 95, "team-b": 5}, loans=True)
    env.nodes(2)
    env.submit(job("team-a", "a7", budget="team-a", min_runtime="1h", gpus=7))
    env.submit(job("team-a", "a8", budget="team-a", min_runtime="1h", gpus=8))
    env.submit(job("team-b", "b1", budget="team-b", min_runtime="1h", gpus=1))
    r = env.reconciler()
    assert sorted(r.run_pass().result.admitted) == ["team-a/a7", "team-a/a8", "team-b/b1"]
    held = ann(env.job("team-a", "a7"))[marks.PLACEMENT].split("=")[0]
    env.advance(3600)
    env.emu.complete_job("team-b", "b1")
    env.submit(job("team-b", "big", budget="team-b", min_runtime="1h", gpus=8))
    env.submit(job("team-b", "lender", budget="team-b", min_runtime="1h", gpus=1, resumable=True))
    assert r.run_pass().result.admitted == ["team-b/lender"]
    a = ann(env.job("team-b", "lender"))
    assert a[marks.PLACEMENT] == f"{held}=1" and marks.LEAF not in a
    assert a[marks.PROTECTED_UNTIL] == marks.format_time(T0 + 3600)
    assert "on loan (reserved for team-b/big)" in a[marks.REASON]
    (event,) = events_for(env.emu, "lender", "Admitted")
    assert "unprotected (preemptible at any time)" in event["message"]
    env.advance(60)  # the next pass explains the running loan as such
    r.run_pass()
    assert "runs unallocated: on loan" in ann(env.job("team-b", "lender"))[marks.REASON]
    env.advance(1740)
    env.emu.complete_job("team-a", "a7")
    report = r.run_pass()
    assert report.result.preempted == ["team-b/lender"]
    if "team-b/big" not in report.result.admitted:
        env.advance(1)
        assert r.run_pass().result.admitted == ["team-b/big"]
    assert env.state("team-b", "big") == "running"
    assert ann(env.job("team-b", "big"))[marks.PLACEMENT] == f"{held}=8"
    # team-b paid for b1's hour only (and big's second, if it took one): never for the loan
    assert env.ledger_usage()["team-b"] == pytest.approx(3600, abs=8)
    env.advance(1)
    report = r.run_pass()
    a = ann(env.job("team-b", "lender"))
    assert a[marks.STATE] == "preempted" and "preempted for team-b/big" in a[marks.REASON]
    assert marks.RunRecord.parse(a[marks.LAST_RUN]).leaf is None  # the loan: charged to nobody
    queued = report.decision.statuses["team-b/lender"]  # queued again as team-b's funded work
    assert queued.state == "pending" and queued.leaf == "team-b" and queued.rank is not None
