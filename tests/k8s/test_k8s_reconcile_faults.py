"""Faults: conflicts, server errors, dropped watches and 410 Gone, a reconciler killed mid-pass,
leader hand-over. After each: no Job admitted twice, no protected Job preempted, no node
over-committed, and the ledger holds exactly the GPU-seconds that ran."""

from __future__ import annotations

import logging
import os
import signal
import subprocess
import sys
import threading
import time
from dataclasses import replace
from pathlib import Path

import pytest

from engine.core.decide import decide
from engine.k8s import marks
from engine.k8s.client import KubeClient
from engine.k8s.observe import observe
from tests.k8s.reconcile_support import POLICY_NS, T0, Env, ann, events_for, job

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture
def env(kube_emulator, kube_client, tmp_path):
    return Env(kube_emulator, kube_client, tmp_path / "policy")


def assert_consistent(env: Env) -> None:
    """Every running Job admitted exactly once; no node holds more GPUs than it has."""
    per_node: dict[str, int] = {}
    for j in env.emu.list("jobs"):
        a = ann(j)
        ns, name = j["metadata"]["namespace"], j["metadata"]["name"]
        if a.get(marks.STATE) == "running":
            assert j["spec"]["suspend"] is False
            placement = marks.parse_placement(a[marks.PLACEMENT])
            for n, g in placement.assignments:
                per_node[n] = per_node.get(n, 0) + g
            admitted = env.admissions(ns, name)
            runs = int(a.get(marks.PREEMPTIONS, "0")) + 1
            assert admitted == runs, f"{ns}/{name} admitted {admitted} times for {runs} runs"
    for n, used in per_node.items():
        assert used <= 8, f"node {n} over-committed: {used} GPUs"


def hog_and_guard(env: Env):
    """Two 8-GPU nodes: team-b's "hog" (1 h min runtime) and "guard" (8 h) run from T0; two
    hours later team-a submits "fresh" (8 GPUs), which may only take the hog's GPUs."""
    env.nodes(2)
    env.submit(job("team-b", "hog", budget="team-b", min_runtime="1h", gpus=8))
    env.submit(job("team-b", "guard", budget="team-b", min_runtime="8h", gpus=8))
    r = env.reconciler()
    assert sorted(r.run_pass().result.admitted) == ["team-b/guard", "team-b/hog"]
    env.advance(7200)
    env.submit(job("team-a", "fresh", budget="team-a", min_runtime="1h", gpus=8))
    return r


# ------------------------------------------------------------------------------ 409 and 5xx


def test_spurious_conflicts_are_retried_and_admit_once(env):
    env.nodes(1)
    env.submit(job("team-a", "dbg", budget="team-a", min_runtime="10m"))
    fault = env.emu.fail_next("PATCH", r"/namespaces/team-a/jobs/dbg$", 409, times=2)
    report = env.reconciler().run_pass()
    assert fault.hits == 2
    assert report.result.admitted == ["team-a/dbg"] and not report.result.stale
    assert env.admissions("team-a", "dbg") == 1
    assert_consistent(env)


def test_a_real_conflict_skips_the_stale_write_and_asks_for_a_new_pass(env):
    env.nodes(1)
    env.submit(job("team-a", "dbg", budget="team-a", min_runtime="10m"))
    r = env.reconciler()
    assert r.elector.try_acquire_or_renew()
    config = r.policy.poll() and r.policy.config
    jobs = env.emu.list("jobs")
    obs = observe(jobs, [], env.emu.list("nodes"), config)
    decision = decide(obs.snapshot, config, T0)
    # the user edits the Job after the observation: the decision is stale
    env.emu.patch("Job", "team-a", "dbg", {"metadata": {"labels": {"allot.dev/priority": "5"}}})
    result = r.applier.apply(decision, obs, config, T0, r.policy.commit)
    assert result.admitted == [] and result.skipped == ["team-a/dbg"] and result.stale
    assert env.job("team-a", "dbg")["spec"]["suspend"] is True
    assert r.run_pass().result.admitted == ["team-a/dbg"]  # a fresh pass admits it
    assert_consistent(env)


def test_a_write_that_succeeded_but_was_retried_counts_as_done(env, kube_client):
    env.nodes(1)
    env.submit(job("team-a", "dbg", budget="team-a", min_runtime="10m"))
    client = KubeClient(kube_client, backoff_s=0.001)
    rv = env.job("team-a", "dbg")["metadata"]["resourceVersion"]
    patch = {"metadata": {"annotations": {"x/y": "1", "x/gone": None}}}
    client.patch("jobs", "team-a", "dbg", patch, resource_version=rv)
    # the same conditional write again (as after a lost response): 409, then seen as applied
    again = client.patch("jobs", "team-a", "dbg", patch, resource_version=rv)
    assert again["metadata"]["annotations"]["x/y"] == "1"


def test_server_errors_are_retried(env):
    env.nodes(1)
    env.submit(job("team-a", "dbg", budget="team-a", min_runtime="10m"))
    faults = [env.emu.fail_next("GET", r"/api/v1/nodes$", 503, times=2),
              env.emu.fail_next("PATCH", r"/jobs/dbg$", 500, times=2),
              env.emu.fail_next("PUT", r"/configmaps/allot-ledger$", 502, times=1),
              env.emu.fail_next("POST", r"/events$", 504, times=1)]
    report = env.reconciler().run_pass()
    assert [f.hits for f in faults] == [2, 2, 0, 1]  # no ledger PUT yet: it is created
    assert report.result.admitted == ["team-a/dbg"] and report.result.errors == []
    assert events_for(env.emu, "dbg", "Admitted")
    assert_consistent(env)


def test_a_persistent_outage_skips_the_pass_and_the_next_one_recovers(env):
    env.nodes(1)
    env.submit(job("team-a", "dbg", budget="team-a", min_runtime="10m"))
    r = env.reconciler()
    env.emu.fail_next("GET", r"/apis/batch/v1/jobs$", 503, times=10)
    report = r.run_pass()
    assert not report.acted and "503" in report.error
    assert not r.health.ready and "cannot read" in r.health.reason
    env.emu.clear_faults()
    assert r.run_pass().result.admitted == ["team-a/dbg"]
    assert r.health.ready


# ------------------------------------------------------------------------------ watches


def wait_for(predicate, timeout: float = 8.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.02)
    return False


def test_watch_drives_passes_and_survives_a_drop_and_a_410(env, caplog):
    env.nodes(2)
    r = env.reconciler(interval_s=3600)  # resync far away: only watch events wake the loop
    thread = threading.Thread(target=r.run, daemon=True)
    caplog.set_level(logging.INFO, logger="allot.k8s.loop")
    thread.start()
    try:
        assert wait_for(lambda: r.passes >= 1 and env.emu.open_watches >= 2)

        def admitted(name: str) -> bool:
            return env.state("team-a", name) == "running"

        env.submit(job("team-a", "one", budget="team-a", min_runtime="10m"))
        assert wait_for(lambda: admitted("one"))

        env.emu.drop_watches()  # clean end of stream: resumed from the last resourceVersion
        env.submit(job("team-a", "two", budget="team-a", min_runtime="10m"))
        assert wait_for(lambda: admitted("two"))

        # the resume point expires while the watch is down: 410, relist, pass
        env.emu.delay_next("GET", r"/apis/batch/v1/jobs$", 0.5, times=1)
        env.emu.drop_watches()
        env.submit(job("team-a", "three", budget="team-a", min_runtime="10m"))
        env.emu.compact()
        assert wait_for(lambda: admitted("three"))
        assert wait_for(lambda: "expired (410)" in caplog.text)
    finally:
        r.stop()
        thread.join(timeout=5)
    assert not thread.is_alive()
    assert_consistent(env)
    # the stopped leader released its Lease for a fast hand-over
    lease = env.emu.get("leases", POLICY_NS, "allot-reconciler")
    assert lease["spec"]["holderIdentity"] == ""


# ------------------------------------------------------------------------------ crashes


class Killed(BaseException):
    """The process dies here (nothing after it runs, no exception handler sees it)."""


class DyingClient(KubeClient):
    """Dies on the ``nth`` write (PATCH/PUT/POST of a non-Event object)."""

    def __init__(self, api_client, nth: int, kinds: tuple[str, ...] = ("jobs", "configmaps")):
        super().__init__(api_client, backoff_s=0.001)
        self.left = nth
        self.kinds = kinds

    def _tick(self, kind: str) -> None:
        if kind.split("/")[0] in self.kinds:
            self.left -= 1
            if self.left <= 0:
                raise Killed()

    def patch(self, kind, namespace, name, patch, resource_version=None):
        self._tick(kind)
        return super().patch(kind, namespace, name, patch, resource_version)

    def replace(self, kind, namespace, name, body):
        self._tick(kind)
        return super().replace(kind, namespace, name, body)


@pytest.mark.parametrize("die_at", [1, 2, 3], ids=["after-nothing", "after-preempt",
                                                   "before-ledger-save"])
def test_killed_mid_pass_then_restarted_loses_and_duplicates_nothing(env, kube_client, die_at):
    first = hog_and_guard(env)
    first.client = first.applier.client = first.store.client = first.elector.client = \
        DyingClient(kube_client, die_at)  # writes: 1 preempt hog, 2 admit fresh, 3 ledger
    with pytest.raises(Killed):
        first.run_pass()
    env.advance(30)  # the pod restarts
    second = env.reconciler()  # same identity: it renews its own Lease
    second.run_pass()
    second.run_pass()
    assert env.state("team-b", "guard") == "running"  # protected: never preempted
    assert env.state("team-b", "hog") == "preempted"
    assert env.state("team-a", "fresh") == "running"
    assert_consistent(env)
    hog_end = marks.RunRecord.parse(ann(env.job("team-b", "hog"))[marks.LAST_RUN]).end
    fresh_start = marks.parse_time(ann(env.job("team-a", "fresh"))[marks.STARTED_AT])
    now = T0 + 7200 + 30
    assert hog_end == (T0 + 7200 if die_at > 1 else now)
    usage = env.ledger_usage()
    assert usage["team-b"] == pytest.approx(8 * (hog_end - T0) + 8 * (now - T0))
    assert usage["team-a"] == pytest.approx(8 * (now - fresh_start))


def test_process_killed_with_sigkill_mid_pass(env, kube_kubeconfig):
    """A real ``allot reconcile`` process, SIGKILLed between two admissions."""
    env.emu.clock.now = time.time()  # the subprocess uses the wall clock: share it
    env.emu.clock.resume()
    env.nodes(2)
    for i in range(4):
        env.submit(job("team-a", f"j{i}", budget="team-a", min_runtime="1h", gpus=4))
    env.emu.delay_next("PATCH", r"/jobs/j[0-9]$", 0.4, times=None)  # slow writes
    proc = subprocess.Popen(
        [sys.executable, "-m", "engine", "reconcile", "--kubeconfig", str(kube_kubeconfig),
         "--policy-repo", str(env.policy_root), "--namespace", POLICY_NS, "--identity", "r1",
         "--interval", "1"],
        cwd=REPO, env={**os.environ, "PYTHONPATH": str(REPO)},
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        assert wait_for(lambda: env.state("team-a", "j0") == "running", timeout=20)
        os.kill(proc.pid, signal.SIGKILL)  # mid-pass: j1..j3 not admitted yet
    finally:
        proc.kill()
        proc.wait()
    env.emu.clear_faults()
    assert env.state("team-a", "j3") != "running"
    second = env.reconciler()
    env.advance(16)  # the dead leader's Lease (15 s) expires
    second.run_pass()
    time.sleep(0.05)
    second.run_pass()
    assert all(env.state("team-a", f"j{i}") == "running" for i in range(4))
    assert_consistent(env)
    cm = env.emu.get("configmaps", POLICY_NS, "allot-ledger")
    until = float(cm["data"]["charged-until-epoch"])
    expected = sum(4 * (until - marks.parse_time(ann(env.job("team-a", f"j{i}"))[marks.STARTED_AT]))
                   for i in range(4))
    assert env.ledger_usage()["team-a"] == pytest.approx(expected, abs=0.01)


# ------------------------------------------------------------------------------ leadership


def test_leader_hand_over_between_two_reconcilers(env):
    env.nodes(2)
    env.submit(job("team-b", "b1", budget="team-b", min_runtime="2h", gpus=8))
    r1, r2 = env.reconciler("r1"), env.reconciler("r2")
    assert r1.run_pass().result.admitted == ["team-b/b1"]
    standby = r2.run_pass()
    assert standby.leader is False and standby.acted is False  # standby writes nothing
    assert r2.metrics.get("allot_is_leader") == 0.0 and r1.metrics.get("allot_is_leader") == 1.0
    env.advance(600)
    r1.run_pass()  # r1 charges 600 s and renews, then dies without releasing its Lease
    env.submit(job("team-a", "a1", budget="team-a", min_runtime="1h", gpus=8))
    env.advance(10)
    assert r2.run_pass().acted is False  # the Lease is still valid
    env.advance(10)  # 20 s after r1's last renewal: expired
    report = r2.run_pass()
    assert report.leader and report.result.admitted == ["team-a/a1"]
    lease = env.emu.get("leases", POLICY_NS, "allot-reconciler")
    assert lease["spec"]["holderIdentity"] == "r2" and lease["spec"]["leaseTransitions"] == 1
    assert env.admissions("team-b", "b1") == 1  # r2 recovered b1 from its marks
    # the old leader comes back: it sees r2's Lease and writes nothing
    env.advance(5)
    zombie = r1.run_pass()
    assert zombie.leader is False and zombie.acted is False
    env.advance(3000)
    r2.run_pass()
    assert env.state("team-b", "b1") == "running"  # protected 2 h: never preempted
    assert_consistent(env)
    # exactly the GPU-seconds that ran, charged once across the hand-over
    assert env.ledger_usage()["team-b"] == pytest.approx(8 * (620 + 5 + 3000))
    assert env.ledger_usage()["team-a"] == pytest.approx(8 * (5 + 3000))


def test_a_paused_old_leader_cannot_overwrite_the_new_leaders_admission(env):
    env.nodes(1)
    env.submit(job("team-a", "x", budget="team-a", min_runtime="1h", gpus=8))
    env.submit(job("team-b", "y", budget="team-b", min_runtime="1h", gpus=8))
    r1, r2 = env.reconciler("r1"), env.reconciler("r2")
    assert r1.elector.try_acquire_or_renew()
    config = r1.policy.poll() and r1.policy.config
    obs = observe(env.emu.list("jobs"), [], env.emu.list("nodes"), config)
    decision = decide(replace(obs.snapshot), config, T0)  # r1 decides, then pauses
    env.advance(20)
    admitted_by_r2 = r2.run_pass().result.admitted  # r2 takes over and admits one of them
    assert len(admitted_by_r2) == 1
    env.advance(1)
    r1.applier.may_write = lambda: True  # r1 wrongly believes it still leads
    result = r1.applier.apply(decision, obs, config, T0 + 21, r1.policy.commit)
    assert result.admitted == [] and result.stale  # fenced by resourceVersion
    assert_consistent(env)


def test_a_job_spec_no_validating_server_accepts_is_rejected_and_the_pass_goes_on(env):
    """A lenient server let ``parallelism: "abc"`` through: that Job is rejected with the
    field named (not read as 1 pod, not a failed pass), and the other Job is admitted."""
    env.nodes(1)
    bad = job("team-a", "bad", budget="team-a", min_runtime="1h", gpus=2)
    bad["spec"]["parallelism"] = "abc"
    env.submit(bad)
    env.submit(job("team-a", "good", budget="team-a", min_runtime="1h", gpus=2))
    report = env.reconciler().run_pass()
    assert report.error is None
    assert report.result.admitted == ["team-a/good"] and report.result.rejected == ["team-a/bad"]
    a = ann(env.job("team-a", "bad"))
    assert a[marks.STATE] == "rejected"
    assert ("the Job cannot be read: spec.parallelism 'abc' is not a whole number of pods "
            "(0 or more); fix the Job") in a[marks.REASON]
    assert_consistent(env)


def test_a_job_that_cannot_be_read_at_all_is_left_out_and_logged_once(env, caplog):
    """Annotations that are a list: the Job cannot even carry a status. It is left out as if
    unmanaged (so its pods would count as other tenants' GPUs), logged once, counted; the
    pass goes on and schedules the rest."""
    env.nodes(1)
    odd = job("team-a", "odd", budget="team-a", min_runtime="1h", gpus=2)
    odd["metadata"]["annotations"] = ["not", "a", "mapping"]
    env.submit(odd)
    env.submit(job("team-a", "good", budget="team-a", min_runtime="1h", gpus=2))
    r = env.reconciler()
    with caplog.at_level(logging.WARNING, logger="allot.k8s.loop"):
        report = r.run_pass()
        env.advance(60)
        again = r.run_pass()
    assert report.error is None and again.error is None
    assert report.result.admitted == ["team-a/good"]
    assert "team-a/odd" in report.observation.unreadable
    assert "team-a/odd" not in report.observation.jobs
    said = [rec.getMessage() for rec in caplog.records if "team-a/odd" in rec.getMessage()]
    assert len(said) == 1 and "cannot be read and is left out of scheduling" in said[0]
    assert r.metrics.get("allot_unreadable_jobs") == 1.0
    assert ann(env.job("team-a", "good"))[marks.STATE] == "running"
    assert env.admissions("team-a", "good") == 1


def test_a_job_no_fingerprint_can_read_wakes_the_loop_and_the_watch_goes_on(env):
    """Annotations that are a list (a lenient server): the watch counts the Job as changed
    instead of its thread dying, so later Jobs still wake the loop at once."""
    env.nodes(1)
    r = env.reconciler(interval_s=3600)  # resync far away: only watch events wake the loop
    thread = threading.Thread(target=r.run, daemon=True)
    thread.start()
    try:
        assert wait_for(lambda: r.passes >= 1 and env.emu.open_watches >= 2)
        odd = job("team-a", "odd", budget="team-a", min_runtime="10m")
        odd["metadata"]["annotations"] = ["not", "a", "mapping"]
        env.submit(odd)
        assert wait_for(lambda: r.passes >= 2)
        env.submit(job("team-a", "next", budget="team-a", min_runtime="10m"))
        assert wait_for(lambda: env.state("team-a", "next") == "running")
        assert all(t.is_alive() for t in r.watches._threads)
    finally:
        r.stop()
        thread.join(timeout=10)
