"""``eta``'s forecaster simulates forward from a state with the simulator itself. When nothing is
submitted after the state's instant, its forecast is exactly what the simulator then does."""

from __future__ import annotations

import pytest

from engine.core.types import Snapshot
from engine.loader import load_config
from engine.model import Config
from engine.sim.engine import SimOptions, simulate
from engine.sim.prepare import prepare_trace
from engine.sim.synthetic import synthetic_trace
from engine.sim.trace import Trace
from engine.views.forecast import forecast
from engine.views.simstate import state_from_sim
from engine.views.state import ViewState
from tests.core.harness import build_scenario


@pytest.mark.parametrize("cadence", ["watch", "interval"])
def test_forecast_equals_the_simulation_when_no_work_arrives_later(cadence):
    """From an instant the run made a pass at, with the run's own cadence (the state says
    which: a forecast of an interval run passes on the grid too)."""
    config = load_config()
    trace = prepare_trace(synthetic_trace(config, days=0.25, tasks=600, demand_ratio_target=2.2, seed=5,
                                          failures_per_node_day=0), config, seed=5)
    at = 3 * 3600.0
    early = Trace.of([t for t in trace.tasks if t.submit < at - 1], (), trace.name, dict(trace.meta))
    result = simulate(config, early, horizon=at + 12 * 3600, options=SimOptions(cadence=cadence))
    state = state_from_sim(result, at=at)
    assert len(state.snapshot.pending) >= 10, "the test needs a queue"
    fc = forecast(state, horizon_s=12 * 3600 - 1)
    starts: dict[str, float] = {}
    for s in result.segments:
        if s.start >= at:
            starts[s.task] = min(starts.get(s.task, s.start), s.start)
    started = [k for k, v in fc.starts.items() if v is not None]
    assert len(started) >= 10
    for wid, start in fc.starts.items():
        assert start == starts.get(wid), wid
    assert any("no new submissions" in a for a in fc.assumptions)


def _a_job_behind_b_run(nodes: list[dict]) -> tuple[ViewState, Snapshot, Config, float]:
    """a-job (A, 8 GPUs) waits for b-run (B, protected until 7200, expected to end at 3000) on
    c-n0000; ``nodes`` are the others."""
    data = {"budgets": {"A": 50, "B": 50}, "nodes": [{"name": "c-n0000"}, *nodes],
            "usage": {"A": 1000.0}, "now": 600.0,
            "running": [{"id": "b-run", "budget": "B", "min": "2h", "gpus": 8, "at": {"c-n0000": 8},
                         "started": 0}],
            "pending": [{"id": "a-job", "budget": "A", "min": "1h", "gpus": 8, "submitted": 300}]}
    snapshot, config, now = build_scenario(data)
    state = ViewState("scenario", now, config, snapshot, expected={"b-run": 3000.0, "a-job": 1800.0},
                      meta={"expected": "declared"})
    assert state.decision.statuses["a-job"].state == "pending"
    return state, snapshot, config, now


def test_a_job_waiting_for_a_protected_one_starts_when_it_ends():
    state, snapshot, config, now = _a_job_behind_b_run([])
    fc = forecast(state, ["a-job"], horizon_s=6 * 3600)
    assert fc.starts["a-job"] == 3000.0  # b-run ends at 3000, a pass on the 60 s grid
    assert fc.outcome["a-job"] == "started"
    # without an expected end, b-run runs until preempted: A outranks B, so at the end of its
    # min runtime (t=7200)
    state2 = ViewState("scenario", now, config, snapshot)
    assert forecast(state2, ["a-job"], horizon_s=6 * 3600).starts["a-job"] == 7200.0


def test_a_job_that_never_fits_in_the_horizon_has_no_start():
    data = {"budgets": {"A": 50, "B": 50}, "nodes": [{"name": "c-n0000"}], "now": 0.0,
            "running": [{"id": "b-run", "budget": "B", "min": "8h", "gpus": 8, "at": {"c-n0000": 8}}],
            "pending": [{"id": "a-job", "budget": "A", "min": "1h", "gpus": 8}]}
    snapshot, config, now = build_scenario(data)
    state = ViewState("scenario", now, config, snapshot, expected={"b-run": 10 * 3600.0})
    fc = forecast(state, ["a-job"], horizon_s=3600)
    assert fc.starts["a-job"] is None and fc.outcome["a-job"] == "waiting"
    assert fc.to_dict()["forecast"][0]["wait_s"] is None


def test_live_queued_work_runs_for_its_min_runtime_or_else_the_default():
    """Without expected runtimes (a live cluster), queued work is assumed to run for its min
    runtime, and for the policy's default min runtime (1h) when it has none (free work)."""
    data = {"budgets": {"A": 100}, "nodes": [{"name": "c-n0000"}], "now": 0.0,
            "pending": [{"id": "a-first", "budget": "A", "min": "15m", "gpus": 8, "submitted": 0},
                        {"id": "a-free", "budget": "A", "min": "0", "gpus": 8, "submitted": 1},
                        {"id": "a-last", "budget": "A", "min": "1h", "gpus": 8, "submitted": 2}]}
    snapshot, config, now = build_scenario(data)
    assert config.policy.default_min_runtime_s == 3600.0
    fc = forecast(ViewState("scenario", now, config, snapshot), horizon_s=6 * 3600)
    # (funded work first: a-last follows a-first's 15 min, free a-free a-last's hour)
    assert fc.starts == {"a-first": 0.0, "a-last": 900.0, "a-free": 900.0 + 3600.0}


def test_nodes_out_of_service_or_used_by_other_tenants_stay_so_in_the_forecast():
    """An unhealthy node, a cordoned one and one whose GPUs other tenants use take none of
    the queue, at the first pass or later: the 8-GPU job starts only when b-run ends on the
    one node it may use (t=3000), as the state's own decision would have it wait now."""
    state, *_ = _a_job_behind_b_run([{"name": "c-n0001", "healthy": False},
                                     {"name": "c-n0002", "cordoned": True},
                                     {"name": "c-n0003", "foreign": 2}])
    fc = forecast(state, ["a-job"], horizon_s=6 * 3600)
    assert fc.starts["a-job"] == 3000.0
    assert any("cordoned nodes stay out of service" in a for a in fc.assumptions)
