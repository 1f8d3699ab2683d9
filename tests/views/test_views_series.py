"""The per-team totals and series of a view state: where they start, what was delivered, and
entitlement water-filled from the healthy capacity only."""

from __future__ import annotations

import pytest

from engine.core.types import Snapshot
from engine.views.series import delivered_since, hourly_entitled, totals_start, usage_series
from engine.views.state import Demand, Run, ViewState
from tests.sim.conftest import tiny_config

H = 3600.0


def state(now: float, *, source: str = "sim", runs=(), demand=(), meta=None) -> ViewState:
    """A state of a 4-GPU cluster (one node) shared by teams a and b, 50/50."""
    return ViewState(source=source, now=now, config=tiny_config(), snapshot=Snapshot((), (), ()),
                     runs=list(runs), demand=list(demand), meta=dict(meta or {}))


def both_want_all(now: float) -> list[Demand]:
    return [Demand("wa", "a", 0.0, None, 4), Demand("wb", "b", 0.0, None, 4)]


def test_delivered_counts_gpu_hours_run_from_the_start_to_the_states_instant():
    """Each run's GPUs x hours inside [start, now): funded or not, not billing-weighted, a run
    still open counted to now, one the state stopped in the middle of cut at now."""
    runs = [Run("a1", "a", 0.0, 2 * H, (("n", (0, 1)),), allocated=True, weight=2.0),
            Run("a2", "a", 2.5 * H, 4 * H, (("n", (2,)),), allocated=True),  # ends after now
            Run("b1", "b", 0.5 * H, None, (("n", (3,)),), allocated=False)]
    got = delivered_since(state(3 * H, runs=runs), 1 * H)
    assert got == pytest.approx({"a": 2.0 + 0.5, "b": 2.0})


def test_totals_start_at_the_end_of_a_warm_up_once_the_state_is_past_it():
    assert totals_start(state(10 * H, meta={"measure_from": 2 * H})) == 2 * H
    # a state still inside the warm-up: from the run's start
    assert totals_start(state(1 * H, meta={"measure_from": 2 * H})) == 0.0
    assert totals_start(state(2 * H, meta={"measure_from": 2 * H})) == 0.0
    # a live state has no warm-up: from its oldest data
    live = state(10 * H, source="live", meta={"measure_from": 5 * H},
                 runs=[Run("a1", "a", 3 * H, None, (("n", (0,)),), allocated=True)])
    assert totals_start(live) == 3 * H


def test_entitlement_leaves_out_a_failed_node_until_its_repair_or_the_states_instant():
    """The only node fails at 1h and is repaired after the state's instant (1.5h): the second,
    short hour has no healthy capacity left to be entitled to. A failure after the instant
    takes nothing."""
    down = [("n", 4, 1 * H, 10 * H), ("n", 4, 2 * H, 3 * H)]
    s = state(1.5 * H, demand=both_want_all(1.5 * H), meta={"down": down})
    assert hourly_entitled(s) == pytest.approx({"a": 2.0, "b": 2.0})
    # the same state without the failure: the half hour is shared too
    assert hourly_entitled(state(1.5 * H, demand=both_want_all(1.5 * H))) == \
        pytest.approx({"a": 3.0, "b": 3.0})


def test_the_entitled_series_is_water_filled_from_the_healthy_capacity():
    s = state(2 * H, demand=both_want_all(2 * H), meta={"down": [("n", 4, 1 * H, 2 * H)]})
    series = usage_series(s, max_bins=2)
    assert series["bin_s"] == H and series["capacity"] == [4.0, 4.0]
    assert series["leaves"]["a"]["entitled"] == [2.0, 0.0]
    assert series["leaves"]["a"]["allocation"] == [2.0, 2.0]  # (the share of all capacity)
