"""What the reconciler finds edited by hand, or answered oddly, never stops it: annotations
and ConfigMaps it wrote, changed into values no reconciler writes, are read as absent (never
a NaN or a negative charge that would poison the ledger and the ranks for good), and a pass
that fails in a way nobody foresaw is logged and counted while the loop goes on (a crash would
restart the process into the same state: a crash loop)."""

from __future__ import annotations

import base64
import gzip
import json
import math

import pytest

from engine.core.ledger import Ledger
from engine.k8s import marks
from engine.k8s.jobs import gpu_quantity as _quantity
from tests.k8s.reconcile_support import POLICY_NS, T0, Env, ann, job


@pytest.fixture
def env(kube_emulator, kube_client, tmp_path):
    return Env(kube_emulator, kube_client, tmp_path / "policy")


@pytest.mark.parametrize("text", [
    '{"start":1,"end":2,"gpus":1,"weight":NaN,"leaf":"a"}', '{"start":1,"end":2,"gpus":1,"weight":-1,"leaf":"a"}',
    '{"start":1,"end":2,"gpus":1,"weight":Infinity,"leaf":"a"}', '{"start":1,"end":2,"gpus":1e999,"leaf":"a"}',
    '{"start":1,"end":2,"gpus":-3,"leaf":"a"}', '{"start":3,"end":2,"gpus":1,"leaf":"a"}',
    '{"start":1,"end":2,"gpus":1,"leaf":["x"]}', '{"start":"abc","end":2,"gpus":1}', "[1,2]", "{"])
def test_a_run_record_edited_into_nonsense_is_read_as_none(text):
    assert marks.RunRecord.parse(text) is None


def test_numbers_the_reconciler_wrote_are_finite_and_not_negative_or_absent():
    assert marks.number("2.5", 1.0) == 2.5 and marks.number(None, 1.0) == 1.0
    for bad in ("nan", "inf", "-1", "1e999", "abc", ""):
        assert marks.number(bad, 7.0) == 7.0 and marks.maybe_number(bad) is None, bad
    assert _quantity("inf") == 0 and _quantity("1e999") == 0 and _quantity("-2") == 0 and _quantity("8") == 8


@pytest.mark.parametrize("value, gpus", [
    ("8", 8), (8, 8), ("1k", 1000), ("2Ki", 2048), ("1e3", 1000), ("16E0", 16), ("8.5", 8),
    ("500m", 0), ("0.5", 0), ("-1", 0), ("nan", 0), ("inf", 0), ("1e999", 0), ("abc", 0),
    ("", 0), (None, 0), (True, 0), ([8], 0)])
def test_gpu_quantities_are_read_as_kubernetes_reads_quantities(value, gpus):
    assert _quantity(value) == gpus


def test_the_ledger_refuses_what_is_not_finite():
    ledger = Ledger(["a"], 3600.0)
    with pytest.raises(ValueError, match="not finite"):
        ledger.charge("a", 0.0, 10.0, 1, math.nan)
    good = Ledger(["a"], 3600.0)
    good.charge("a", 0.0, 10.0, 1)
    d = good.to_dict()
    for change in ({"origin": "abc"}, {"origin": math.inf}, {"base": [math.nan]}, {"lookback_s": math.nan}):
        with pytest.raises((ValueError, TypeError)):
            Ledger.from_dict({**d, **change})
    assert Ledger.from_dict(d).usage(10.0) == good.usage(10.0)


@pytest.mark.parametrize("change", [{"origin": "abc"}, {"base": [math.nan, 0.0]}])
def test_a_ledger_configmap_edited_into_nonsense_starts_afresh(env, change):
    env.charged(600)
    cm = env.emu.get("configmaps", POLICY_NS, "allot-ledger")
    d = {**json.loads(gzip.decompress(base64.b64decode(cm["binaryData"]["ledger.json.gz"]))), **change}
    cm["binaryData"]["ledger.json.gz"] = base64.b64encode(gzip.compress(json.dumps(d).encode())).decode()
    env.emu.replace(cm)
    fresh = env.reconciler("r1")
    state = fresh.store.load(fresh.policy.poll() and fresh.policy.config)
    assert state.ledger.origin is None and state.charged_until is None  # (fresh, not NaN kept)


def test_a_nan_weight_in_a_last_run_never_reaches_the_ledger(env):
    env.nodes(1)
    env.submit(job("team-a", "bad", budget="team-a", min_runtime="1h", gpus=1, annotations={
        marks.LAST_RUN: json.dumps({"start": T0 - 600, "end": T0, "gpus": 1, "leaf": "team-a"}).replace(
            '"leaf"', '"weight": NaN, "leaf"')}))
    r = env.reconciler()
    r.run_pass()
    usage = env.ledger_usage()
    assert all(math.isfinite(v) for v in usage.values()), usage


def test_a_pass_that_fails_unforeseen_is_logged_and_the_loop_goes_on(env, monkeypatch, caplog):
    import engine.k8s.loop as loop_module

    env.nodes(1)
    env.submit(job("team-a", "a", budget="team-a", min_runtime="10m", gpus=1))
    r = env.reconciler()
    real = loop_module.observe

    def broken(*args, **kwargs):
        raise AttributeError("'str' object has no attribute 'get'")

    monkeypatch.setattr(loop_module, "observe", broken)
    report = r.safe_pass()
    assert report.acted is False and report.error.startswith("the pass failed (AttributeError: ")
    assert r.metrics.get("allot_pass_errors_total") == 1 and r.health.ready is False
    assert "pass failed" in caplog.text and "Traceback" in caplog.text
    monkeypatch.setattr(loop_module, "observe", real)
    env.advance(30)
    assert r.safe_pass().acted and env.state("team-a", "a") == "running"  # (and it schedules again)
    assert r.health.ready is True
    assert ann(env.job("team-a", "a"))[marks.STATE] == "running"


@pytest.mark.parametrize("spec", [
    {"renewTime": marks.format_micro_time(T0 + 10 ** 9), "leaseDurationSeconds": 15},  # (a skewed clock)
    {"renewTime": marks.format_micro_time(T0), "leaseDurationSeconds": 2 ** 31 - 1},
    {"renewTime": marks.format_micro_time(T0), "leaseDurationSeconds": "abc", "leaseTransitions": "x"}])
def test_a_lease_that_claims_to_last_for_ever_expires_as_seen_from_here(env, spec):
    """A standby counts the holder's Lease from when it first saw that record, and for at
    most four of its own lease durations: a renewTime in the future or a huge duration,
    written by a skewed clock or by hand, would otherwise stop all scheduling for good."""
    env.nodes(1)
    env.submit(job("team-a", "a", budget="team-a", min_runtime="10m", gpus=1))
    env.emu.create({"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
                    "metadata": {"name": "allot-reconciler", "namespace": POLICY_NS},
                    "spec": {"holderIdentity": "dead", "acquireTime": marks.format_micro_time(T0), **spec}})
    r = env.reconciler()
    assert r.safe_pass().leader is False  # (held, as far as it can tell yet)
    env.advance(4 * 15 + 1)
    report = r.safe_pass()
    assert report.leader and report.result.admitted == ["team-a/a"]


def test_a_running_record_edited_to_game_the_scheduler_gains_nothing_a_contract_could_not(env):
    """The running record lives in the Job's annotations, which its owner can edit: protection
    past the policy's cap, or another team's budget, would each be a way to game the
    scheduler. The record is bounded by what any contract may have: protection up to the
    cap, the budget of the Job's own contract."""
    env.nodes(1)
    env.submit(job("team-a", "a", budget="team-a", min_runtime="10m", gpus=8))
    r = env.reconciler()
    r.run_pass()
    assert env.state("team-a", "a") == "running"
    env.emu.patch("Job", "team-a", "a", {"metadata": {"annotations": {
        marks.PROTECTED_UNTIL: "2999-01-01T00:00:00Z", marks.LEAF: "team-b"}}})
    env.advance(3600)
    r.run_pass()
    usage = env.ledger_usage()
    assert usage["team-b"] == 0.0 and usage["team-a"] == pytest.approx(8 * 3600)  # (billed to its own)
    env.submit(job("team-b", "b", budget="team-b", min_runtime="1h", gpus=8))
    env.advance(60)
    r.run_pass()
    assert env.state("team-b", "b") != "running"  # (protected up to the cap: 8 h from its start)
    env.advance(7 * 3600)
    r.run_pass()
    r.run_pass()
    assert env.state("team-b", "b") == "running" and env.state("team-a", "a") != "running"


def test_a_start_edited_into_the_future_is_charged_and_unprotected(env):
    """Never charged, and protected afresh at every pass, otherwise."""
    env.nodes(1)
    env.submit(job("team-a", "a", budget="team-a", min_runtime="8h", gpus=8))
    r = env.reconciler()
    r.run_pass()
    env.emu.patch("Job", "team-a", "a", {"metadata": {"annotations": {
        marks.STARTED_AT: marks.format_time(T0 + 10 ** 8)}}})
    env.advance(4 * 3600)
    r.run_pass()
    assert env.ledger_usage()["team-a"] == pytest.approx(8 * 4 * 3600)  # (from the last charged instant)
    env.submit(job("team-b", "b", budget="team-b", min_runtime="1h", gpus=8))
    env.advance(60)
    r.run_pass()
    r.run_pass()
    assert env.state("team-b", "b") == "running"  # (its 8 h protection was not honoured: an edit)


def test_a_ledger_configmap_deleted_by_hand_is_written_again(env):
    r = env.charged(600)
    env.emu.delete("configmaps", POLICY_NS, "allot-ledger")
    env.advance(600)
    r.run_pass()
    assert env.ledger_usage()["team-a"] == pytest.approx(4 * 1200)  # (nothing lost, nothing twice)


def test_a_ledger_charged_until_far_ahead_charges_again_from_now():
    """``charged-until`` edited far ahead of any clock would stop all charging until then."""
    from engine.k8s.ledger_store import LedgerState, charge
    from engine.k8s.observe import Occupancy

    state = LedgerState(Ledger(["a"], 7 * 86400.0), T0 + 10 ** 8, T0 + 10 ** 8, None)
    run = [Occupancy("x", "a", T0 - 600, None, 2, 1.0)]
    assert charge(state, run, T0) == 0.0 and state.charged_until == T0  # (nothing twice)
    assert charge(state, run, T0 + 60) == pytest.approx(2 * 60)  # (and charging again)
    ahead = LedgerState(Ledger(["a"], 7 * 86400.0), T0 + 5, T0 + 5, None)  # (another replica's clock)
    assert charge(ahead, run, T0) == 0.0 and ahead.charged_until == T0 + 5


@pytest.mark.parametrize("edit", [{"allot.dev/priority": "high"}, {"allot.dev/min-runtime": "0"},
                                  {"allot.dev/budget": "team-b"}])
def test_labels_edited_after_admission_leave_the_run_funded_as_it_is_charged(env, edit):
    """A running Job stays charged to the leaf it was admitted on; its labels edited into a
    typo, a min runtime of 0 or a budget it may not charge used to make it read as free work
    ("runs unallocated ... (not charged)", preempted first as unallocated work) while the
    ledger still charged it."""
    env.nodes(1)
    env.submit(job("team-a", "a", budget="team-a", min_runtime="2h", gpus=8))
    r = env.reconciler()
    r.run_pass()
    env.emu.patch("Job", "team-a", "a", {"metadata": {"labels": edit}})
    env.advance(600)
    r.run_pass()
    reason = ann(env.job("team-a", "a"))[marks.REASON]
    assert reason.startswith("running on n0:8: protected by its min runtime until")
    assert "budget team-a" in reason and "unallocated" not in reason and "not charged" not in reason
    assert env.ledger_usage()["team-a"] == 8 * 600
