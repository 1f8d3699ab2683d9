"""A hand-computable scenario with exact golden waits, preemptions and charged hours.

One node of 4 GPUs, leaves a and b at 50% each, passes on the 60 s grid, checkpoint loss
300 s, restart overhead 120 s.

* A1 (a, 4 GPUs, 2 h, min runtime 1 h, resumable) is submitted at 0 and starts at once.
* B1 (b, 4 GPUs, 30 min, min runtime 30 min) is submitted at 600 and must wait: A1 is protected.
* Budget scheduler: at 3600 A1's protection ends; b (no usage) ranks above a, so A1 is
  preempted and B1 starts (wait 3000 s). A1 keeps 3600 - 300 = 3300 s of progress and loses
  300 s x 4 GPUs. B1 completes at 5400; A1 restarts and needs 3900 + 120 s: done at 9420.
  Charged: a = 4 x (3600 + 4020) GPU-s, b = 4 x 1800 GPU-s.
* Legacy: caps are 2 GPUs each, so both run preemptible on idle GPUs only; B1 waits for A1
  to finish at 7200 (wait 6600 s), nothing is preempted.
* Why work waited (``SimOptions.causes``, read once per 60 s interval): B1 holds a timed
  reservation from 600 to 3600 (A1 releases its GPUs then): b, ``reserved``, 4 x 3000 GPU-s.
  A1, requeued at 3600, counts from the next reading at 3660 until it starts at 5400; a ranks
  below b, so nothing running is preemptible for it and it holds the node as a drain hold:
  a, ``holding``, 4 x 1740 GPU-s. The legacy scheduler gives no causes.
"""

from __future__ import annotations

import pytest

from engine.sim.engine import simulate
from engine.sim.trace import Task, Trace
from tests.sim.conftest import tiny_config

TRACE = Trace.of([
    Task("A1", 0.0, 1, 4, 7200.0, "alice", leaf="a", min_runtime=3600.0, resumable=True, klass="small"),
    Task("B1", 600.0, 1, 4, 1800.0, "bob", leaf="b", min_runtime=1800.0, resumable=True, klass="small"),
], meta={"horizon": 12000.0})


def test_budget_scheduler_golden():
    res = simulate(tiny_config(), TRACE, "budget")
    a, b = res.tasks["A1"], res.tasks["B1"]
    assert (a.wait, b.wait) == (0.0, 3000.0)
    assert (a.preemptions, b.preemptions) == (1, 0)
    assert a.gpu_s_lost == 1200.0
    assert (a.end, b.end) == (9420.0, 5400.0)
    assert res.charged == {"a": 4 * (3600.0 + 4020.0), "b": 4 * 1800.0}
    assert [(s.task, s.start, s.end, s.preempted) for s in res.segments] == [
        ("A1", 0.0, 3600.0, True), ("B1", 3600.0, 5400.0, False), ("A1", 5400.0, 9420.0, False)]
    s = res.summary()
    assert s["preemptions"] == 1
    assert s["gpu_hours"]["lost_to_preemption"] == pytest.approx(1200 / 3600, abs=1e-2)
    assert s["preemptions_of_charged"] == 1  # A1 ran charged to a
    assert s["gpu_hours"]["lost_of_charged"] == s["gpu_hours"]["lost_to_preemption"]
    assert s["gpu_hours"]["charged"] == pytest.approx((30480 + 7200) / 3600, abs=1e-2)
    assert s["waits"]["overall"]["p50_s"] == 1500.0


def test_why_work_waited_golden():
    from engine.sim.engine import SimOptions

    for cadence in ("watch", "interval"):
        options = SimOptions(cadence=cadence, causes=True)
        res = simulate(tiny_config(), TRACE, "budget", options=options)
        assert res.waiting == {"b": {"reserved": 4 * 3000.0}, "a": {"holding": 4 * 1740.0}}
        teams = res.summary()["teams"]
        assert teams["b"]["waiting_gpu_h"] == {"reserved": 3.33}
        assert teams["a"]["waiting_gpu_h"] == {"holding": 1.93}
        assert simulate(tiny_config(), TRACE, "legacy", options=options).waiting == {}
    assert simulate(tiny_config(), TRACE, "budget").waiting == {}  # not asked


def test_free_work_waits_as_its_team_s_free_work():
    """Unfunded work of leaf a waits behind b's protected job: a's ``free-work`` (its team is
    the leaf it requests, as in the metrics), 4 GPUs from the pass at 60 (the first on the 60 s
    grid after its submission at 30) until it starts at 600."""
    from engine.sim.engine import SimOptions

    trace = Trace.of([
        Task("paid", 0.0, 1, 4, 600.0, "y", leaf="b", min_runtime=600.0, resumable=False, klass="small"),
        Task("free", 30.0, 1, 4, 600.0, "x", leaf="a", min_runtime=0.0, resumable=False, klass="small"),
    ], meta={"horizon": 3600.0})
    res = simulate(tiny_config(), trace, "budget", options=SimOptions(cadence="interval", causes=True))
    assert res.tasks["free"].wait == 600.0 - 30.0
    assert res.waiting == {"a": {"free-work": 4 * (600.0 - 60.0)}}


def test_between_readings_admitted_work_stops_counting_once_and_new_work_waits_for_a_reading():
    """The counting rules of :class:`~engine.sim.causes.WaitCauses` (read every 300 s): w1 (4
    GPUs, kept-off at the reading at 0) is admitted at 100, requeued and admitted again at 200
    (it stops counting once: 4 x 100 GPU-s); w2 (2 GPUs) arrives at 50 and waits, but counts
    only from the reading at 300 (2 x 300 GPU-s up to 600); ``(none)`` work is its own team."""
    from types import SimpleNamespace as NS

    from engine.core.types import Admit
    from engine.sim.causes import WaitCauses
    from engine.core.statuses import NO_TEAM

    def w(wid: str, leaf: str | None, gpus: int) -> NS:
        return NS(id=wid, contract=NS(requested_budget=leaf, gpus=gpus))

    def admit(wid: str) -> Admit:
        return Admit(wid, None, "")  # type: ignore[arg-type]  # (only the id is read)

    w1, w2, w3 = w("w1", "a", 4), w("w2", "b", 2), w("w3", None, 1)
    counts = WaitCauses(measure_from=0.0, every=300.0)
    counts.after_pass(0.0, [w1, w3], NS(waiting={"w1": "kept-off", "w3": "free-work"}, actions=[]))
    counts.after_pass(50.0, [w1, w2, w3], NS(waiting={}, actions=[]))  # (not a reading: unread)
    counts.after_pass(100.0, [w1, w2, w3], NS(waiting={}, actions=[admit("w1")]))
    counts.after_pass(200.0, [w1, w2, w3], NS(waiting={}, actions=[admit("w1")]))
    counts.after_pass(300.0, [w2, w3], NS(waiting={"w2": "no-room", "w3": "free-work"}, actions=[]))
    counts.until(600.0)
    assert counts.gpu_s == {"a": {"kept-off": 4 * 100.0}, "b": {"no-room": 2 * 300.0},
                            NO_TEAM: {"free-work": 1 * 600.0}}


def test_legacy_baseline_golden():
    res = simulate(tiny_config(), TRACE, "legacy")
    a, b = res.tasks["A1"], res.tasks["B1"]
    assert (a.wait, b.wait) == (0.0, 6600.0)
    assert (a.preemptions, b.preemptions) == (0, 0)
    assert (a.end, b.end) == (7200.0, 9000.0)
    assert res.charged == {"a": 4 * 7200.0, "b": 4 * 1800.0}


def test_unallocated_work_is_never_charged_and_preempted_first():
    trace = Trace.of([
        Task("free", 0.0, 1, 4, 7200.0, "x", leaf="a", min_runtime=0.0, resumable=False, klass="small"),
        Task("paid", 60.0, 1, 4, 600.0, "y", leaf="b", min_runtime=600.0, resumable=False, klass="small"),
    ], meta={"horizon": 3600.0})
    res = simulate(tiny_config(), trace, "budget")
    assert res.tasks["paid"].wait == 0.0
    assert res.tasks["free"].preemptions == 1
    assert res.tasks["free"].gpu_s_lost == 4 * 60.0  # non-resumable: the whole run is lost
    assert res.charged["a"] == 0.0 and res.charged["b"] == 4 * 600.0
    assert res.segments[0].allocated is False and res.segments[0].protected_until == 0.0


def test_watch_cadence_starts_work_at_the_event_instant_and_the_grid_waits_for_its_tick():
    trace = Trace.of([Task("t", 30.0, 1, 1, 100.0, "x", leaf="a", min_runtime=60.0,
                           resumable=True, klass="debug")], meta={"horizon": 600.0})
    from engine.sim.engine import SimOptions

    watch = simulate(tiny_config(), trace, "budget")  # the default mirrors the reconciler
    grid = simulate(tiny_config(), trace, "budget", options=SimOptions(cadence="interval"))
    assert watch.tasks["t"].wait == 0.0
    assert grid.tasks["t"].wait == 30.0  # next pass on the 60 s grid


def test_unhealthy_node_drains_at_min_runtime_and_is_repaired_once_empty():
    """Two nodes. J runs on node 0, which fails at 100 (a watch event: a pass cordons node 0).
    J is protected until 300; its expiry wakes nobody, so the resync pass every 60 s after the
    last pass sees it at 340 and evicts J, requeued; the follow-up pass at once (an evicted
    workload is still running in the snapshot that evicts it) restarts it from scratch on
    node 1 (non-resumable: 340 s x 4 GPUs lost; 1000 s of work + 120 s overhead, done at
    1460). Node 0 is empty at 340 and repaired 600 s later."""
    from engine.sim.trace import NodeFailure

    trace = Trace.of([Task("J", 0.0, 1, 4, 1000.0, "x", leaf="a", min_runtime=300.0,
                           resumable=False, klass="small")],
                     [NodeFailure(100.0, "c-n0000", 600.0)], meta={"horizon": 3000.0})
    res = simulate(tiny_config(nodes=2), trace, "budget")
    j = res.tasks["J"]
    assert (j.preemptions, j.gpu_s_lost, j.end) == (1, 4 * 340.0, 1460.0)
    assert [(s.gpus[0][0], s.start, s.end) for s in res.segments] == [
        ("c-n0000", 0.0, 340.0), ("c-n0001", 340.0, 1460.0)]
    assert res.failures == [("c-n0000", 100.0, 340.0, 940.0)]
    assert {e.kind for e in res.events} >= {"fail", "cordon", "preempt", "repair"}


def test_preempted_free_work_is_not_counted_as_charged():
    # F1 is unallocated (no leaf): B1 preempts it at once at 600 (no protection); F1 keeps
    # 600 - 300 s of progress and loses 300 s x 4 GPUs, none of it of a charged run
    trace = Trace.of([
        Task("F1", 0.0, 1, 4, 7200.0, "fred", leaf=None, min_runtime=0.0, resumable=True, klass="small"),
        Task("B1", 600.0, 1, 4, 1800.0, "bob", leaf="b", min_runtime=1800.0, resumable=True, klass="small"),
    ], meta={"horizon": 12000.0})
    res = simulate(tiny_config(), trace, "budget")
    assert (res.tasks["F1"].preemptions, res.tasks["B1"].wait) == (1, 0.0)
    s = res.summary()
    assert (s["preemptions"], s["preemptions_of_charged"]) == (1, 0)
    assert s["gpu_hours"]["lost_to_preemption"] == pytest.approx(1200 / 3600, abs=1e-2)
    assert s["gpu_hours"]["lost_of_charged"] == 0.0
    assert s["gpu_hours"]["charged"] == pytest.approx(4 * 1800 / 3600, abs=1e-2)
