"""The impact report's wording, rendered from a replay's numbers (no replay runs here): what
its cluster-wide rows say they count; the chart folds long tails; the waiting table folds
quiet teams; the summary names the waiting that moved most; the verdict warns of moves
against a share change and says the replay's length as people read it."""

from __future__ import annotations

from dataclasses import replace

from engine.impact.chart import MAX_BARS, bars, write_chart
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



def fake_impact(changes: dict[str, float]) -> ReplayImpact:
    teams = tuple(TeamImpact(n, Pair(100.0, 100.0 + c), Pair(90.0, 90.0), Pair(1, 1), Pair(2, 2),
                             Pair(0, 0)) for n, c in sorted(changes.items(), key=lambda kv: -kv[1]))
    return ReplayImpact("t", 10, 86400.0, Pair(8, 8), None, teams, (), {})


def test_chart_folds_the_long_tail_and_writes_a_png(tmp_path):
    changes = {f"g{i:02d}": 30.0 - i for i in range(15)} | {f"l{i:02d}": -(30.0 - i) for i in range(15)}
    data = bars(fake_impact(changes))
    assert len(data) == MAX_BARS + 2
    assert data[0] == ("g00", 30.0) and data[-1] == ("l00", -30.0)
    assert ("5 other teams", sum(30.0 - i for i in range(10, 15))) in data
    png = write_chart(fake_impact(changes), tmp_path / "c.png")
    assert png.read_bytes()[:4] == b"\x89PNG"
    assert write_chart(fake_impact({"a": 0.0}), tmp_path / "flat.png").stat().st_size > 0


def test_the_waiting_fold_skips_teams_that_did_not_wait_and_dashes_a_missing_side():
    """Teams whose work waited under 0.05 GPU-h on both sides have no row; a team the head
    removed shows a dash after; runs without causes (none collected) give no fold at all."""
    from engine.impact.report import _waiting_table

    def team(name: str, waiting: dict[str, Pair]) -> TeamImpact:
        return TeamImpact(name, Pair(1.0, 1.0), Pair(1.0, 1.0), Pair(0, 0), Pair(0, 0), Pair(0, 0),
                          waiting)

    teams = (team("quiet", {"no-room": Pair(0.04, 0.0), "free-work": Pair(0.0, 0.01)}),
             team("gone", {"no-room": Pair(2.0, None), "free-work": Pair(1.0, None)}),
             team("busy", {"no-room": Pair(10.0, 30.0), "free-work": Pair(0.0, 0.0)}))
    table = _waiting_table(ReplayImpact("t", 1, 3600.0, Pair(8, 8), None, teams, (), {}))
    assert table is not None and "quiet" not in table
    body = table.splitlines()[-2:]
    assert body == ["| busy | 10.0 → 30.0 | 0.0 | 10.0 → 30.0 |", "| gone | 2.0 → – | 1.0 → – | 3.0 → – |"]
    assert _waiting_table(fake_impact({"a": 1.0})) is None


def test_the_summary_table_names_the_waiting_that_moved_most():
    """Each team that gained or lost gets the cause whose waiting moved most (largest in size,
    either way), or a dash when none moved by 0.05 GPU-h; runs without causes get no column."""
    from engine.impact.diff import ConfigDiff
    from engine.impact.report import render_markdown

    def team(name: str, change: float, waiting: dict[str, Pair]) -> TeamImpact:
        return TeamImpact(name, Pair(100.0, 100.0 + change), Pair(90.0, 90.0), Pair(1, 1),
                          Pair(2, 2), Pair(0, 0), waiting)

    teams = (team("g", 30.0, {"kept-off": Pair(100.0, 20.0), "holding": Pair(5.0, 10.0)}),
             team("l", -30.0, {"kept-off": Pair(1.0, 1.02), "holding": Pair(0.0, 0.0)}))
    nothing = ConfigDiff((), (), (), (), (), (), (), ())
    md = render_markdown("a" * 40, "b" * 40, nothing, ReplayImpact("t", 1, 3600.0, Pair(8, 8),
                                                                         None, teams, (), {}))
    assert "| change | entitled GPU-h | waiting that moved most |" in md
    assert md.splitlines()[6].startswith("| g |") and md.splitlines()[6].endswith("| kept-off −80.0 GPU-h |")
    assert md.splitlines()[7].startswith("| l |") and md.splitlines()[7].endswith("| – |")  # < 0.05
    plain = render_markdown("a" * 40, "b" * 40, nothing, fake_impact({"g": 30.0}))
    assert "waiting that moved most" not in plain


def test_the_verdict_warns_when_a_team_moves_against_its_share_change():
    """A short replay can move a team against its share change (a share acts through the usage
    fair share remembers): the verdict says so, with the moves, and points to more days."""
    from engine.impact.diff import ConfigDiff, LeafChange
    from engine.impact.report import render_markdown

    def team(name: str, change: float) -> TeamImpact:
        return TeamImpact(name, Pair(100.0, 100.0 + change), Pair(90.0, 90.0), Pair(1, 1),
                          Pair(2, 2), Pair(0, 0), {})

    def leaf(name: str, before: float, after: float) -> LeafChange:
        return LeafChange(name, "p", "p", before * 100, after * 100, before, after, {}, {})

    diff = ConfigDiff((), (), (), (leaf("up", 0.06, 0.09), leaf("down", 0.105, 0.075)), (), (), (), ())
    against = ReplayImpact("t", 1, 43200.0, Pair(8, 8), None, (team("up", -2.0), team("down", 1.5)), (), {})
    verdict = render_markdown("a" * 40, "b" * 40, diff, against).splitlines()[2]
    assert ("**up** and **down** moved against their share change (−2.0 GPU-h (−2.0%) and +1.5 GPU-h "
            "(+1.5%)): a share acts through the usage fair share remembers over the policy's "
            "lookback, so over 12.0 h such moves are mostly chance; replay more days (`--days`)") in verdict
    along = replace(against, teams=(team("up", 2.0), team("down", -1.5)))
    assert "moved against" not in render_markdown("a" * 40, "b" * 40, diff, along)


def test_the_verdict_says_a_replay_length_people_can_read():
    """A replay of less than three days is said in hours or minutes (never ``0.0 days``), a
    longer one in days; one leaf changed is ``1 leaf affected``."""
    from engine.impact.diff import ConfigDiff, LeafChange
    from engine.impact.report import render_markdown

    one = LeafChange("up", "p", "p", 6.0, 9.0, 0.06, 0.09, {}, {})
    diff = ConfigDiff((), (), (), (one,), (), (), (), ())

    def verdict(horizon_s: float) -> str:
        impact = ReplayImpact("t", 1, horizon_s, Pair(8, 8), None, (), (), {})
        return render_markdown("a" * 40, "b" * 40, diff, impact)

    assert "Replayed 14.4 min of `t`" in verdict(864.0)
    assert "Replayed 12.0 h of `t`" in verdict(43200.0)
    assert "Replayed 14.0 days of `t`" in verdict(14 * 86400.0)
    assert "Budget tree changes (1 leaf affected)" in verdict(43200.0)
