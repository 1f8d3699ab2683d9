"""Where the GPUs went: the idle-time breakdown by cause, and the pass cadence that drives it.

Every GPU-second of capacity lands in exactly one bucket (busy, no work, fragmentation, lag,
reserved, unhealthy), and each cause is measured where it happens.
"""

from __future__ import annotations

import pytest

from engine.sim.engine import SimOptions, simulate
from engine.sim.idle import BUCKETS, IdleMeter
from engine.sim.trace import NodeFailure, Task, Trace
from tests.sim.conftest import tiny_config


def _task(tid, submit, gpus, runtime, leaf="a", minrt=600.0, pods=1):
    return Task(tid, submit, pods, gpus, runtime, "x", leaf=leaf, min_runtime=minrt,
                resumable=True, klass="small")


def test_buckets_add_up_to_capacity_and_busy_matches_occupancy():
    trace = Trace.of([_task("a1", 0.0, 2, 1000.0), _task("a2", 10.0, 4, 500.0),
                      _task("b1", 30.0, 1, 2000.0, leaf="b")],
                     [NodeFailure(100.0, "c-n0001", 300.0)], meta={"horizon": 4000.0})
    res = simulate(tiny_config(nodes=2), trace, "budget")
    total = sum(res.idle[k] for k in BUCKETS)
    assert total == pytest.approx(8 * 4000.0)
    s = res.summary()
    healthy = total - res.idle["unhealthy"]
    assert res.idle["busy"] / healthy == pytest.approx(s["occupancy"], abs=1e-4)
    assert sum(v["share"] for v in s["idle"].values()) == pytest.approx(1.0, abs=1e-3)


def test_no_work_and_fragmentation():
    """One node of 4 GPUs. s (3 GPUs) runs 0-1000; g (4 GPUs) waits for it: the one free GPU is
    fragmentation (work pending, nothing fits), then after both end the node has no work."""
    trace = Trace.of([_task("s", 0.0, 3, 1000.0, minrt=3600.0),
                      _task("g", 1.0, 4, 1000.0, minrt=3600.0)], meta={"horizon": 3001.0})
    res = simulate(tiny_config(), trace, "budget")
    assert res.idle["fragmentation"] == pytest.approx(1 * 999.0)
    assert res.idle["busy"] == pytest.approx(3 * 1000.0 + 4 * 1000.0)
    assert res.idle["no_work"] == pytest.approx(1 * 1.0 + 4 * 1001.0)
    assert res.idle["lag"] == res.idle["reserved"] == 0.0


def test_the_interval_grid_shows_as_scheduling_lag_and_watch_cadence_has_none():
    """b (1 GPU) is submitted at 30 while a holds 3 of 4 GPUs: on the 60 s grid the free GPU
    sits idle 30 s with b fitting (lag); watch-driven passes start b at once."""
    trace = Trace.of([_task("a", 0.0, 3, 600.0), _task("b", 30.0, 1, 300.0)],
                     meta={"horizon": 1200.0})
    grid = simulate(tiny_config(), trace, "budget", options=SimOptions(cadence="interval"))
    watch = simulate(tiny_config(), trace, "budget")
    assert grid.idle["lag"] == pytest.approx(30.0)
    assert watch.idle["lag"] == 0.0
    assert watch.tasks["b"].wait == 0.0 and grid.tasks["b"].wait == 30.0


def test_unhealthy_nodes_are_out_of_service_busy_or_not():
    trace = Trace.of([], [NodeFailure(100.0, "c-n0000", 500.0)], meta={"horizon": 1000.0})
    res = simulate(tiny_config(), trace, "budget")
    # failed at 100, empty at once, repaired 500 s later
    assert res.idle["unhealthy"] == pytest.approx(4 * 500.0)
    assert res.idle["no_work"] == pytest.approx(4 * 500.0)


def test_fill_respects_gang_groups_and_shapes():
    m = IdleMeter({"n1": "c", "n2": "c"}, {"n1": "c/d0", "n2": "c/d1"}, {"n1": 8, "n2": 8})
    m.set_free("n1", 4)
    m.set_free("n2", 4)
    m.add_pending((4, 2, None))  # 2 pods x 4 GPUs, one domain: n1 and n2 are in different ones
    assert m.fillable() == 0
    m.add_pending((2, 1, None), 3)  # three 2-GPU jobs: 6 of the 8 free GPUs
    assert m.fillable() == 6
    m.add_pending((2, 1, None), -3)
    m.add_pending((1, 1, "other"), 2)  # work for another cluster fits nothing here
    assert m.fillable() == 0


def test_a_run_collects_between_passes_and_gives_the_collector_back(monkeypatch):
    """During a run the cycle collector is off and the run collects the young generations
    itself every ``COLLECT_EVERY`` passes; after it, the collector is as it was."""
    import gc

    import engine.sim.engine as sim_engine

    monkeypatch.setattr(sim_engine, "COLLECT_EVERY", 3)
    asked, states = [], []
    real = gc.collect

    def collect(generation=2):
        asked.append(generation)
        return real(generation)

    monkeypatch.setattr(sim_engine.gc, "collect", collect)
    trace = Trace.of([_task(f"t{i}", 60.0 * i, 1, 400.0) for i in range(12)], [],
                     meta={"horizon": 2000.0})
    inner = sim_engine._Sim.decide

    def decide(self, now):
        states.append(gc.isenabled())
        return inner(self, now)

    monkeypatch.setattr(sim_engine._Sim, "decide", decide)
    for enabled in (True, False):
        (gc.enable if enabled else gc.disable)()
        try:
            asked.clear()
            states.clear()
            res = simulate(tiny_config(), trace, "budget", options=SimOptions(cadence="interval"))
            assert gc.isenabled() is enabled
        finally:
            gc.enable()
        assert states and not any(states)
        assert asked == [1] * (res.decide_calls // 3)


def test_monopoly_quota_left_empty_is_held_back_and_so_labelled():
    """One node of 4 GPUs split 50/50 (quotas of 2): a's 4 one-GPU jobs wait while b's
    2 GPUs stay empty: the monopoly baseline holds them back (``reserved``, the report's
    *held back by the scheduler*), it is not fragmentation."""
    from engine.sim.report import IDLE_LABELS

    trace = Trace.of([_task(f"a{i}", 0.0, 1, 1000.0) for i in range(4)], meta={"horizon": 2000.0})
    res = simulate(tiny_config(), trace, "monopoly")
    assert res.idle["reserved"] == pytest.approx(2 * 1000.0)
    assert res.idle["fragmentation"] == 0.0
    assert dict(IDLE_LABELS)["reserved"] == "held back by the scheduler"
