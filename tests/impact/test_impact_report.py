"""The impact report's wording: what its cluster-wide rows say they count."""

from __future__ import annotations

from engine.impact.diff import ConfigDiff
from engine.impact.replay import Pair, ReplayImpact, TeamImpact


def test_the_cluster_wide_delivered_row_counts_all_work_not_only_the_teams():
    """The row is the simulator's delivered GPU-hours of every job, funded or free, with a leaf
    or not: a renamed team's work runs unfunded in the head and stays in it, while the per-team
    table shows that team at a dash. It was labelled "delivered to teams", which it is not."""
    from engine.impact.report import render_markdown

    teams = (TeamImpact("kept", Pair(60.0, 70.0), Pair(50.0, 50.0), Pair(1, 1), Pair(2, 2), Pair(0, 0)),
             TeamImpact("renamed", Pair(40.0, None), Pair(50.0, None), Pair(1, None), Pair(2, None),
                        Pair(0, None)))
    overall = {"delivered_gpu_h": Pair(100.0, 100.0)}  # the renamed team's 30 GPU-h ran unfunded
    impact = ReplayImpact("t", 10, 86400.0, Pair(8, 8), None, teams, (), overall)
    md = render_markdown("a" * 40, "b" * 40, ConfigDiff((), (), (), (), (), (), (), ()), impact)
    assert "delivered to teams" not in md
    assert "| delivered, all work (GPU-h) | 100 | 100 |" in md
