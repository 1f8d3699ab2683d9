"""The simulator's documented definitions, each on a hand-computable run: node failures and
repairs, queued demand, the offered ratio, and trace validation (what the docstrings of
``engine.sim.engine``, ``engine.sim.metrics`` and ``engine.sim.trace`` promise)."""

from __future__ import annotations

import pytest

from engine.sim.engine import simulate
from engine.sim.trace import NodeFailure, Task, Trace
from tests.sim.conftest import tiny_config


def _task(tid: str, submit: float, gpus: int, runtime: float, leaf: str | None,
          min_runtime: float = 600.0, resumable: bool = False) -> Task:
    return Task(tid, submit, 1, gpus, runtime, leaf or "nobody", leaf=leaf,
                min_runtime=min_runtime, resumable=resumable, klass="small")


def test_each_failure_of_a_node_keeps_its_own_repair_time():
    """Node 1 fails at 1000 (repair 600 s) and again at 5000 (repair 1200 s). Its job is
    protected until 3600 and evicted at the first pass after (3640); the node is repaired
    600 s later, not 1200 s later (the second failure's time); then it fails again."""
    trace = Trace.of([_task("A", 0.0, 4, 100000.0, "a", 3600.0, True),
                      _task("B", 0.0, 4, 100000.0, "b", 3600.0, True)],
                     [NodeFailure(1000.0, "c-n0001", 600.0), NodeFailure(5000.0, "c-n0001", 1200.0)],
                     meta={"horizon": 7200.0})
    res = simulate(tiny_config(nodes=2), trace, "budget")
    first, second = res.failures
    assert first == ("c-n0001", 1000.0, 3640.0, 4240.0)
    assert second[:2] == ("c-n0001", 5000.0)


def test_queued_demand_counts_work_of_no_team():
    """Work with no leaf (``default: unfunded`` in a mapping) asks for GPUs like any other:
    one 4-GPU task on one 4-GPU node for the whole hour is a queued demand of 1.0x."""
    trace = Trace.of([_task("X", 0.0, 4, 7200.0, None, 0.0)], meta={"horizon": 3600.0})
    ratio = simulate(tiny_config(), trace, "budget").summary()["demand_ratio"]
    assert (ratio["queued_mean"], ratio["queued_min"], ratio["hours_below_capacity"]) == (1.0, 1.0, 0.0)


def test_an_hour_with_most_nodes_unhealthy_is_still_a_sample_of_queued_demand():
    """Three 4-GPU nodes, a 4-GPU task all along; two nodes fail at 3600 (never repaired):
    hour 0 asks 4 of 12 GPUs, hour 1 (a full hour on 4 healthy GPUs) 4 of 4."""
    trace = Trace.of([_task("A", 0.0, 4, 100000.0, "a")],
                     [NodeFailure(3600.0, "c-n0001", 99999.0), NodeFailure(3600.0, "c-n0002", 99999.0)],
                     meta={"horizon": 7200.0})
    ratio = simulate(tiny_config(nodes=3), trace, "budget").summary()["demand_ratio"]
    assert ratio["queued_mean"] == pytest.approx((1 / 3 + 1.0) / 2, abs=1e-4)
    assert ratio["queued_min"] == pytest.approx(1 / 3, abs=1e-4)
    assert ratio["hours_below_capacity"] == 0.5


def test_offered_demand_is_over_the_run_not_the_whole_trace():
    """A run cut at 3600 s: A (4 GPUs from 0) offers 4 x 3600 GPU-s inside it; B, submitted
    at 5000, offers nothing. On one 4-GPU node: 1.0 (the trace's own horizon would give more)."""
    trace = Trace.of([_task("A", 0.0, 4, 7200.0, "a"), _task("B", 5000.0, 4, 100.0, "a")])
    res = simulate(tiny_config(), trace, "budget", horizon=3600.0)
    assert res.summary()["demand_ratio"]["offered"] == 1.0


@pytest.mark.parametrize("field", ["pods", "gpus_per_pod"])
def test_a_count_of_zero_in_a_trace_record_is_refused_not_read_as_one(field):
    from engine.sim.trace import task_from_record

    record = {"id": "z", "submit": 0, "runtime": 10, "owner": "a", "pods": 1, "gpus_per_pod": 1}
    task, problems = task_from_record({**record, field: 0})
    assert task is None and any(field in p and "1" in p for p in problems), problems
    for blank in (None, ""):  # absent or an empty CSV cell: 1
        task, problems = task_from_record({**record, field: blank})
        assert task is not None and getattr(task, field) == 1 and not problems


def test_a_node_still_draining_at_the_horizon_has_no_drain_time():
    """The node fails at 1000 under a job protected 8 h: at the horizon (7200) it still holds
    the job, so it never drained; the mean drain time covers drained nodes only (none)."""
    trace = Trace.of([_task("A", 0.0, 4, 100000.0, "a", 28800.0, True)],
                     [NodeFailure(1000.0, "c-n0000", 600.0)], meta={"horizon": 7200.0})
    res = simulate(tiny_config(), trace, "budget")
    assert res.failures == [("c-n0000", 1000.0, None, None)]
    drain = res.summary()["drain"]
    assert (drain["failures"], drain["mean_drain_s"], drain["repaired"]) == (1, 0.0, 0)
