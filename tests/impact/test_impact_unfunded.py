"""What a removed team's jobs still ran in the head, counted over the measured window, and how
the report says it and a replay's length."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from engine.impact.replay import Pair, TeamImpact, _ran_unfunded
from engine.impact.report import _delivered_cell, _span
from engine.impact.runs import RunOutcome, _ran

H = 3600.0


def seg(task: str, start: float, end: float, gpus: int) -> SimpleNamespace:
    return SimpleNamespace(task=task, start=start, end=end, gpu_count=gpus)


def test_a_jobs_gpu_hours_are_counted_inside_the_measured_window_only():
    """Warm-up to 1h, horizon 5h: a job's segments (one per run between preemptions) add up,
    each cut to the window; a job that ran only in the warm-up ran nothing measured."""
    result = SimpleNamespace(measure_from=1 * H, horizon=5 * H, segments=[
        seg("j", 0.0, 2 * H, 2),        # 1 h measured, 2 GPUs
        seg("j", 3 * H, 4 * H, 2),      # preempted, resumed: 1 h more
        seg("k", 4.5 * H, 7 * H, 4),    # cut at the horizon: 0.5 h
        seg("w", 0.0, 0.5 * H, 8),      # warm-up only
    ])
    assert _ran(result) == pytest.approx({"j": 4.0, "k": 2.0})


def outcome(queued: dict, ran: dict) -> RunOutcome:
    return RunOutcome({}, {}, len(queued), 10 * H, 8, queued, ran)


def test_a_removed_teams_unfunded_gpu_hours_are_what_its_jobs_ran_in_the_head():
    base = outcome({"y1": ("y", 0.0), "y2": ("y", 0.0), "x1": ("x", 0.0)},
                   {"y1": 5.0, "y2": 3.0, "x1": 4.0})
    head = outcome({"y1": (None, 60.0), "y2": (None, 600.0), "x1": ("x", 0.0)},
                   {"y1": 2.0, "x1": 6.0})  # y2 never ran in the head
    assert _ran_unfunded(base, head, {"y"}) == {"y": 2.0}
    assert _ran_unfunded(base, head, {"z"}) == {"z": 0.0}  # (a removed team without jobs)


def team(before: float, after: float | None, unfunded: float | None) -> TeamImpact:
    none = Pair(None, None)
    return TeamImpact("y", Pair(before, after), none, none, none, none, ran_unfunded=unfunded)


def test_the_delivered_cell_of_a_removed_team_says_what_ran_unfunded_even_nothing():
    assert _delivered_cell(team(96.0, None, 40.0)) == "96.0 → – (40.0 ran unfunded)"
    assert _delivered_cell(team(96.0, None, 0.0)) == "96.0 → – (0.0 ran unfunded)"
    assert _delivered_cell(team(96.0, 90.0, None)) == "96.0 → 90.0"


def test_a_replay_of_three_days_or_more_is_said_in_days_a_shorter_one_in_its_unit():
    assert _span(3 * 86400.0) == "3.0 days"
    assert _span(14 * 86400.0) == "14.0 days"
    assert "day" not in _span(3 * 86400.0 - 3600) and _span(12 * H) != "0.5 days"
