"""A Job's watch fingerprint (:mod:`engine.k8s.watches`): which changes to a Job wake the loop.

Its pod counts are in it only where a pass counts the Job's pods as holding GPUs: every Job but
one admitted and still running (not suspended, not finished, its running marks readable:
``jobs.runs_on_its_placement``, the predicate observe classifies Jobs by)."""

from __future__ import annotations

from engine.core.types import Placement
from engine.k8s.marks import PLACEMENT, STARTED_AT, STATE, format_placement, format_time
from engine.k8s.watches import _job_fingerprint

# the marks of a Job the reconciler admitted (observe counts it by this placement)
RUNNING = {STATE: "running", PLACEMENT: format_placement(Placement((("n1", 8),))),
           STARTED_AT: format_time(100.0)}


def test_pods_that_finish_terminating_wake_the_loop():
    # a preempted Job's pods hold their GPUs while they terminate (the grace period to
    # checkpoint); its pod counts changing is when a pass should offer the GPUs, not the next
    # resync (the emulator deletes pods at once, so the watch's fingerprint is asked directly)
    suspended = {"metadata": {"name": "one"}, "spec": {"suspend": True},
                 "status": {"active": 0, "terminating": 2}}
    gone = {**suspended, "status": {"active": 0, "terminating": 0}}
    assert _job_fingerprint(suspended) != _job_fingerprint(gone)
    # not suspended but not admitted (held, or no managed Job at all): a pass counts its pods
    # as other tenants' GPUs, so their counts still matter
    started = {**gone, "spec": {"suspend": False}}
    assert _job_fingerprint({**started, "status": {"active": 2}}) != _job_fingerprint(started)


def test_an_admitted_jobs_pods_coming_up_do_not_wake_the_loop_again():
    # admission already woke it (suspend and state changed); a running Job's GPUs are its
    # placement's, so its pods starting (active 0 -> 8) change nothing a pass reads
    meta = {"name": "one", "annotations": dict(RUNNING)}
    admitted = {"metadata": meta, "spec": {"suspend": False},
                "status": {"active": 0, "terminating": 0}}
    up = {**admitted, "status": {"active": 8, "terminating": 0}}
    assert _job_fingerprint(admitted) == _job_fingerprint(up)
    # preempted: suspended (still marked running until the pass rewrites it), its pods
    # terminating, then gone: that frees their GPUs
    preempted = {**admitted, "spec": {"suspend": True}, "status": {"active": 0, "terminating": 8}}
    assert _job_fingerprint(preempted) != _job_fingerprint(up)
    assert _job_fingerprint(preempted) != _job_fingerprint(
        {**preempted, "status": {"active": 0, "terminating": 0}})
    # failed while marked running: its pods that still terminate hold GPUs until they are gone
    failed = {**admitted, "status": {"active": 0, "terminating": 8, "conditions": [
        {"type": "Failed", "status": "True", "lastTransitionTime": "2026-12-05T10:00:00Z"}]}}
    assert _job_fingerprint(failed) != _job_fingerprint(
        {**failed, "status": {**failed["status"], "terminating": 0}})


def test_each_pod_count_of_a_job_not_admitted_wakes_the_loop_on_its_own():
    # held (not suspended, not marked running): its pods are other tenants' GPUs to a pass, so
    # either count moving alone (pods starting: active 0 -> 2; stopping: terminating 1 -> 0)
    # is a change
    held = {"metadata": {"name": "one"}, "spec": {"suspend": False},
            "status": {"active": 0, "terminating": 1}}
    assert _job_fingerprint(held) != _job_fingerprint({**held, "status": {"active": 2, "terminating": 1}})
    assert _job_fingerprint(held) != _job_fingerprint({**held, "status": {"active": 0, "terminating": 0}})


def test_a_finished_jobs_pods_count_whichever_way_it_finished():
    # a Job marked running that is Complete (as Failed, above) is no longer counted by its
    # placement: its pods that still terminate hold GPUs until they are gone
    meta = {"name": "one", "annotations": dict(RUNNING)}
    complete = {"metadata": meta, "spec": {"suspend": False}, "status": {
        "active": 0, "terminating": 2, "conditions": [
            {"type": "Complete", "status": "True", "lastTransitionTime": "2026-12-05T10:00:00Z"}]}}
    assert _job_fingerprint(complete) != _job_fingerprint(
        {**complete, "status": {**complete["status"], "terminating": 0}})


def test_a_condition_that_is_not_true_does_not_make_a_job_finished():
    # finished means a Complete or Failed condition whose status is "True" (jobs.finished_at);
    # an admitted running Job with a Failed condition "False" is still counted by its
    # placement: its pods coming up do not wake the loop
    meta = {"name": "one", "annotations": dict(RUNNING)}
    conds = [{"type": "Failed", "status": "False"}, {"type": "Complete", "status": "False"}]
    running = {"metadata": meta, "spec": {"suspend": False},
               "status": {"active": 0, "terminating": 0, "conditions": conds}}
    assert _job_fingerprint(running) == _job_fingerprint(
        {**running, "status": {**running["status"], "active": 8}})


def test_a_job_marked_running_whose_marks_cannot_be_read_counts_its_pods():
    """Marked running, but with a placement or start that does not parse (an edit), a Job is
    not counted by its placement: observe classes it as held and counts its pods as holding
    their nodes' GPUs, so its pod counts wake the loop, as they do for a held Job; the one
    predicate (jobs.runs_on_its_placement) decides both."""
    for broken in ({PLACEMENT: "n1:eight"}, {STARTED_AT: "yesterday"}, {PLACEMENT: None}):
        ann = {k: v for k, v in {**RUNNING, **broken}.items() if v is not None}
        job = {"metadata": {"name": "one", "annotations": ann}, "spec": {"suspend": False},
               "status": {"active": 0, "terminating": 0}}
        assert _job_fingerprint(job) != _job_fingerprint(
            {**job, "status": {"active": 8, "terminating": 0}}), broken
