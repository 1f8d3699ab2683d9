"""Loans in the simulator (``policy.loans``): a hand-computable run, with and without.

Two nodes of 4 GPUs; leaves a (90%) and b (10%); checkpoint loss 300 s, restart overhead 120 s.

* t=0: A1 (a, 3 GPUs, 2 h) and A2 (a, 4 GPUs, 3 h) fill one node each but one GPU; B0 (b, 1
  GPU, 3000 s) takes that GPU.
* t=3000: B0 ends; BIG (b, 4 GPUs, 1 h) and L (b, 1 GPU, 2 h, resumable) arrive. b ranks below
  a (usage 3000 vs 21000 GPU-s against shares 10/90), so BIG may preempt nothing: it holds
  A1's node (short 3 GPUs, the other node is short 4). L is kept off the held node and the
  other is full.
* Without loans L waits until A2 ends at 10800, and ends at 18000.
* With loans L starts at once on the held node's free GPU, unallocated for that run (not
  charged, protected until its start). At 7200 A1 ends: BIG preempts L (unallocated work goes
  first) and starts; L keeps 4200 - 300 s of progress. At 10800 A2 and BIG end; L runs again,
  funded and protected, for 3300 + 120 s: done at 14220. Charged to b: B0 3000 + BIG 4 x 3600
  + L's funded run 3420 GPU-s; never L's run on loan.
"""

from __future__ import annotations

import dataclasses

import pytest

from engine.sim.engine import simulate
from engine.sim.trace import Task, Trace
from tests.sim.conftest import tiny_config

TRACE = Trace.of([
    Task("A1", 0.0, 1, 3, 7200.0, "alice", leaf="a", min_runtime=3600.0, resumable=True, klass="small"),
    Task("A2", 0.0, 1, 4, 10800.0, "alice", leaf="a", min_runtime=3600.0, resumable=True, klass="small"),
    Task("B0", 0.0, 1, 1, 3000.0, "bob", leaf="b", min_runtime=60.0, resumable=True, klass="small"),
    Task("BIG", 3000.0, 1, 4, 3600.0, "bob", leaf="b", min_runtime=3600.0, resumable=True, klass="small"),
    Task("L", 3000.0, 1, 1, 7200.0, "bob", leaf="b", min_runtime=3600.0, resumable=True, klass="small"),
], meta={"horizon": 20000.0})


def config(loans: bool):
    base = tiny_config(nodes=2, shares=(90.0, 10.0))
    return dataclasses.replace(base, policy=dataclasses.replace(base.policy, loans=loans))


def runs(res, task):
    return [(s.start, s.end, s.allocated, s.preempted, s.protected_until)
            for s in res.segments if s.task == task]


def test_without_loans_the_lender_waits_for_free_gpus():
    res = simulate(config(False), TRACE, "budget")
    assert res.tasks["BIG"].first_start == 7200.0
    assert runs(res, "L") == [(10800.0, 18000.0, True, False, 14400.0)]


def test_a_loan_runs_unallocated_on_held_gpus_until_the_holder_takes_them():
    res = simulate(config(True), TRACE, "budget")
    assert res.tasks["BIG"].first_start == 7200.0  # the loan does not delay the holder
    held = dict(next(s for s in res.segments if s.task == "A1").gpus)
    loan, funded = runs(res, "L")
    assert loan == (3000.0, 7200.0, False, True, 3000.0)  # unallocated, unprotected, preempted
    assert funded == (10800.0, 14220.0, True, False, 14400.0)
    assert set(dict(next(s for s in res.segments if s.task == "L").gpus)) == set(held)
    assert res.tasks["L"].preemptions == 1 and res.tasks["L"].gpu_s_lost == 300.0
    assert res.charged == {"a": 3 * 7200.0 + 4 * 10800.0, "b": 3000.0 + 4 * 3600.0 + 3420.0}
    start = next(e for e in res.events if e.subject == "L" and e.kind == "start")
    assert "on loan (reserved for BIG)" in start.detail


def test_the_summary_counts_gpu_hours_on_loan_and_the_report_shows_them_only_then():
    from engine.sim.report import summary_rows

    lent = simulate(config(True), TRACE, "budget").summary()
    plain = simulate(config(False), TRACE, "budget").summary()
    assert lent["gpu_hours"]["on_loan"] == pytest.approx(4200 / 3600, abs=1e-2)  # L: 3000-7200
    assert plain["gpu_hours"]["on_loan"] == 0.0
    rows = dict(summary_rows({"schedulers": {"budget": lent}}))
    assert rows["  of it funded work on loan"] == ["1 GPU-h"]
    assert "  of it funded work on loan" not in dict(summary_rows({"schedulers": {"budget": plain}}))


def test_only_funded_work_is_ever_lent():
    """as_run: a loan drops the budget of funded work; free work stays exactly as it is (the
    forecast and the views rebuild runs through it without knowing which ones were lent)."""
    from engine.core.types import Contract, Workload, as_run

    funded = Workload("f", Contract(budget="a", min_runtime_s=600.0), 0.0)
    free = Workload("u", Contract(budget=None, min_runtime_s=0.0, note="no budget label"), 0.0)
    lent = as_run(funded, True)
    assert lent.contract.budget is None and "on loan" in lent.contract.note
    assert as_run(funded, False) is funded
    assert as_run(free, True) is free
