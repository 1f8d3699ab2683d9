"""The replay: one trace, both revisions, the same jobs and mapping; what happens to work of a
leaf the head removes; the ramp-up skip; parallel and serial runs agree (what the report
says of its numbers: test_impact_report.py)."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest

from engine.impact.replay import Pair, ReplaySpec, run_replay
from engine.impact.window import ramp_up_day
from engine.model import BudgetNode, BudgetTree, Cluster, Config, Policy, Principal
from engine.sim.trace import Task, Trace

NS = (Principal("namespace", "ns"),)
SMALL = (Cluster("h100", "h100", 4, 8, 4),)  # 32 GPUs: fast simulations

def config(shares: dict[str, float]) -> Config:
    nodes = [BudgetNode("lab", None, 100.0, owners=("@lab",))]
    nodes += [BudgetNode(n, "lab", s, principals=NS) for n, s in shares.items()]
    return Config(BudgetTree.build(nodes), Policy(clusters=SMALL))


def trace_file(tmp_path, teams, jobs=24, leaf=True) -> str:
    path = tmp_path / "t.jsonl"
    with open(path, "w") as fh:
        for k, team in enumerate(teams):
            for i in range(jobs):
                rec = {"id": f"{team}-{i}", "submit": float(i + k), "pods": 1, "gpus_per_pod": 4,
                       "runtime": 3 * 3600.0, "owner": team, "min_runtime": 1800.0,
                       "resumable": True}
                if leaf:
                    rec["leaf"] = team
                fh.write(json.dumps(rec) + "\n")
    return str(path)


def spec(path, **kw) -> ReplaySpec:
    return ReplaySpec(trace=path, days=0.25, demand_ratio=None, start_day=0.0, **kw)


def test_share_moves_delivered_hours_in_its_direction(tmp_path):
    path = trace_file(tmp_path, ("x", "y"))
    impact = run_replay(config({"x": 70.0, "y": 30.0}), config({"x": 30.0, "y": 70.0}),
                        spec(path, parallel=False))
    teams = {t.team: t for t in impact.teams}
    assert teams["y"].change > 0 > teams["x"].change
    assert [t.team for t in impact.gainers] == ["y"] and [t.team for t in impact.losers] == ["x"]
    assert impact.tasks == 48 and impact.horizon_s == pytest.approx(0.25 * 86400)
    assert impact.capacity_gpus == Pair(32, 32)


def test_parallel_and_serial_runs_agree(tmp_path):
    path = trace_file(tmp_path, ("x", "y"), jobs=12)
    base, head = config({"x": 50.0, "y": 50.0}), config({"x": 20.0, "y": 80.0})
    one = run_replay(base, head, spec(path, parallel=False))
    two = run_replay(base, head, spec(path, parallel=True))
    assert replace(one, wall_s=0.0) == replace(two, wall_s=0.0)


def test_interval_cadence_runs_passes_on_the_grid_and_says_so(tmp_path):
    path = trace_file(tmp_path, ("x", "y"))
    base, head = config({"x": 70.0, "y": 30.0}), config({"x": 30.0, "y": 70.0})
    watch = run_replay(base, head, spec(path, parallel=False))
    grid = run_replay(base, head, spec(path, parallel=False, cadence="interval"))
    teams = {t.team: t for t in grid.teams}
    assert teams["y"].change > 0 > teams["x"].change  # the same direction as at every event
    assert any("--cadence interval" in n for n in grid.notes)
    assert not any("cadence" in n for n in watch.notes)
    # jobs arrive in the first 25 s: at every event they start at once, on the grid the
    # 32 GPUs idle until the first pass at 60 s (about 0.5 GPU-hours less delivered)
    for side in ("before", "after"):
        lost = getattr(watch.overall["delivered_gpu_h"], side) - getattr(grid.overall["delivered_gpu_h"], side)
        assert 0.3 < lost < 0.6


def test_work_of_a_leaf_removed_in_the_head_runs_unfunded_there(tmp_path):
    path = trace_file(tmp_path, ("x", "y"), jobs=8)
    impact = run_replay(config({"x": 50.0, "y": 50.0}), config({"x": 100.0}),
                        spec(path, parallel=False))
    teams = {t.team: t for t in impact.teams}
    assert teams["y"].delivered.after is None and teams["y"].delivered.before > 0
    # its jobs waited in the base, as y's; in the head y is no team (its jobs count under none)
    assert any(p.before for p in teams["y"].waiting.values())
    assert all(p.after is None for p in teams["y"].waiting.values())
    assert any("y (not a leaf in the head) run unfunded" in n for n in impact.notes)
    assert impact.overall["unallocated_share"].after > impact.overall["unallocated_share"].before
    # what y's jobs still ran in the head: all of the head's unallocated GPU-hours (x's are funded)
    unallocated = impact.overall["unallocated_share"].after * impact.overall["delivered_gpu_h"].after
    assert teams["y"].ran_unfunded > 0
    assert teams["y"].ran_unfunded == pytest.approx(unallocated, rel=1e-3)
    assert teams["x"].ran_unfunded is None
    from engine.impact.cells import gpu_h
    from engine.impact.diff import ConfigDiff
    from engine.impact.report import render_markdown
    md = render_markdown("a" * 40, "b" * 40, ConfigDiff((), (), (), (), (), (), (), ()), impact)
    row = next(line for line in md.splitlines() if line.startswith("| y |"))
    assert f"→ – ({gpu_h(teams['y'].ran_unfunded)} ran unfunded)" in row
    assert impact.to_dict()["teams"][[t.team for t in impact.teams].index("y")]["ran_unfunded_gpu_h"] \
        == teams["y"].ran_unfunded


def test_owners_without_leaves_are_mapped_once_against_the_base_tree(tmp_path):
    path = trace_file(tmp_path, ("alice", "bob"), jobs=6, leaf=False)
    impact = run_replay(config({"x": 50.0, "y": 50.0}), config({"x": 40.0, "y": 60.0}),
                        spec(path, parallel=False))
    # derive_mapping put one owner on each leaf; both sides replay the same mapping
    teams = {t.team: t for t in impact.teams}
    assert teams["x"].delivered.before > 0 and teams["y"].delivered.before > 0


def test_a_mapping_file_names_leaves_of_either_tree_and_a_new_one_is_unfunded_in_the_base(tmp_path):
    from engine.errors import UserError

    path = trace_file(tmp_path, ("alice", "bob"), jobs=6, leaf=False)
    mapping = tmp_path / "map.yaml"
    mapping.write_text("owners:\n  alice: x\n  bob: z\n")  # z: a leaf the head adds
    base, head = config({"x": 50.0, "y": 50.0}), config({"x": 40.0, "y": 40.0, "z": 20.0})
    impact = run_replay(base, head, spec(path, parallel=False, mapping=str(mapping)))
    teams = {t.team: t for t in impact.teams}
    assert teams["z"].delivered.before is None and teams["z"].delivered.after > 0
    assert any("z (not a leaf in the base) runs unfunded in the base replay" in n for n in impact.notes)
    # y (in the base only) and z (in the head only): each side funds its own
    path = trace_file(tmp_path, ("alice", "bob", "carol"), jobs=6, leaf=False)
    mapping.write_text("owners:\n  alice: x\n  bob: z\n  carol: y\n")
    impact = run_replay(base, config({"x": 50.0, "z": 50.0}), spec(path, parallel=False,
                                                                     mapping=str(mapping)))
    teams = {t.team: t for t in impact.teams}
    assert teams["z"].delivered.before is None and teams["z"].delivered.after > 0
    assert teams["y"].delivered.before > 0 and teams["y"].delivered.after is None
    mapping.write_text("owners:\n  alice: x\n  bob: nosuch\n  carol: lab\n")
    with pytest.raises(UserError) as err:
        run_replay(base, head, spec(path, parallel=False, mapping=str(mapping)))
    assert [(p.file, p.line, p.message) for p in err.value.problems] == [
        (str(mapping), 3, "'nosuch' is not a leaf of the budget tree"),
        (str(mapping), 4, "'lab' is not a leaf of the budget tree")]


def test_the_default_trace_starts_where_the_default_experiment_does_named_or_not():
    from engine.impact.replay import ReplaySpec
    from engine.impact.window import default_start_day, load_replay_trace

    days = {name: load_replay_trace(ReplaySpec(trace=name)).meta.get("start_day")
            for name in (None, "philly", "helios")}
    assert days[None] == days["philly"] == default_start_day() == 42.0
    assert days["helios"] != days["philly"]  # (another trace: past its ramp-up)


def test_ramp_up_day_skips_a_near_silent_start():
    quiet = [Task(f"q{i}", i * 86400.0, 1, 1, 60.0, "o") for i in range(3)]
    busy = [Task(f"b{i}", 5 * 86400.0 + i, 1, 1, 60.0, "o") for i in range(997)]
    assert ramp_up_day(Trace.of(quiet + busy)) == 5.0
    assert ramp_up_day(Trace.of(busy)) == 5.0
    assert ramp_up_day(Trace.of([])) == 0.0


def test_a_policy_change_gets_the_same_treatment(tmp_path):
    """The debug rule narrowed from 8 to 4 GPUs: contracts and classes follow each side's
    policy, so the same short 8-GPU jobs are debug jobs in the base replay and not in the head."""
    path = tmp_path / "t.jsonl"
    with open(path, "w") as fh:
        for k, team in enumerate(("x", "y")):
            for i in range(16):  # no min_runtime / resumable / class: assigned from the policy
                fh.write(json.dumps({"id": f"{team}-{i}", "submit": float(60 * i + k),
                                     "pods": 1, "gpus_per_pod": 8, "runtime": 600.0,
                                     "owner": team, "leaf": team}) + "\n")
    base = config({"x": 50.0, "y": 50.0})
    head = replace(base, policy=replace(base.policy, debug=replace(base.policy.debug, max_gpus=4)))
    impact = run_replay(base, head, spec(str(path), parallel=False))
    classes = {c.klass: c for c in impact.classes}
    assert classes["debug"].jobs == Pair(32, 0)
    assert classes["small"].jobs == Pair(0, 32)


def _loan_world(tmp_path) -> tuple[str, Config, Config]:
    """x keeps 7 of 8 GPUs of every node protected for 4 h; y's whole-node job (y-big, at 60 s)
    reserves a node until then; y's six 1-GPU jobs (3 h each, from 120 s) take the three free
    GPUs outside the reservation. Base: loans off; head: ``placement.loans`` on."""
    path = tmp_path / "t.jsonl"
    recs = [{"id": f"x-{i}", "submit": 0.0, "pods": 1, "gpus_per_pod": 7, "runtime": 6 * 3600.0,
             "owner": "x", "leaf": "x", "min_runtime": 4 * 3600.0, "resumable": False} for i in range(4)]
    recs.append({"id": "y-big", "submit": 60.0, "pods": 1, "gpus_per_pod": 8, "runtime": 3600.0,
                 "owner": "y", "leaf": "y", "min_runtime": 1800.0, "resumable": True})
    recs += [{"id": f"y-{i}", "submit": 120.0 + i, "pods": 1, "gpus_per_pod": 1, "runtime": 3 * 3600.0,
              "owner": "y", "leaf": "y", "min_runtime": 1800.0, "resumable": True} for i in range(6)]
    path.write_text("".join(json.dumps(r) + "\n" for r in recs))
    base = config({"x": 50.0, "y": 50.0})
    return str(path), base, replace(base, policy=replace(base.policy, loans=True))


def test_turning_loans_on_shows_the_gpu_hours_lent(tmp_path):
    """A policy change like any other: ``placement.loans`` off -> on (:func:`_loan_world`):
    y's small resumable jobs run on the reserved node's free GPU on loan in the head only. The
    cluster-wide table shows the GPU-hours lent (and hides the row when neither side lent)."""
    from engine.impact.report import _overall_table

    path, base, head = _loan_world(tmp_path)
    impact = run_replay(base, head, spec(path, parallel=False))
    lent = impact.overall["on_loan_gpu_h"]
    assert lent.before == 0.0 and lent.after > 1.0
    assert "of it funded work on loan (GPU-h)" in _overall_table(impact)
    same = run_replay(base, base, spec(path, parallel=False))
    assert "on loan" not in _overall_table(same)


def test_each_team_s_waiting_is_split_by_cause_before_and_after(tmp_path):
    """Why work waited, from both replays (:func:`_loan_world`), read every
    ``CAUSES_EVERY_S`` (5 min) from the first pass at 0 s; work counts from the first reading
    after it arrives. y-big (60 s) reserves a node until x's protection ends at 4 h: 8 GPUs
    *reserved* from the reading at 5 min to 4 h, on both sides. Of y's 1-GPU jobs (120 s),
    three start on the free GPUs outside the reservation; the rest are kept off the reserved
    node until those three end, 3 h later: three jobs in the base, two in the head, where one
    runs on loan. x's preempted job holds a drain hold while y-big runs. The PR comment's
    fold lists the teams by the change of their total."""
    from engine.impact.diff import diff_configs
    from engine.impact.report import _waiting_table, render_markdown
    from engine.impact.runs import CAUSES_EVERY_S

    path, base, head = _loan_world(tmp_path)
    impact = run_replay(base, head, spec(path, parallel=False))
    teams = {t.team: t for t in impact.teams}
    y, x = teams["y"].waiting, teams["x"].waiting
    assert list(y) == list(x) == ["kept-off", "reserved", "holding"]  # WAIT_CAUSES order, causes met
    reserved = 8 * (4 * 3600.0 - CAUSES_EVERY_S) / 3600.0
    assert y["reserved"].before == pytest.approx(reserved, abs=0.01)
    assert y["reserved"].after == pytest.approx(reserved, abs=0.01)
    late = CAUSES_EVERY_S / 3600.0  # counted from the next reading: up to 5 min late
    assert 3 * (3.0 - late) - 0.01 <= y["kept-off"].before <= 3 * 3.0
    assert 2 * (3.0 - late) - 0.01 <= y["kept-off"].after <= 2 * 3.0
    assert y["holding"] == Pair(0.0, 0.0) and x["kept-off"] == x["reserved"] == Pair(0.0, 0.0)
    assert 0.0 < x["holding"].before == x["holding"].after <= 7 * 1.0  # while y-big runs its hour
    table = _waiting_table(impact)
    assert table is not None
    assert "| team | kept-off | reserved | holding | total |" in table
    assert "(read every 5 simulated minutes)" in table
    rows = [line.split(" | ")[0] for line in table.splitlines() if line.startswith("| x") or line.startswith("| y")]
    assert rows == ["| y", "| x"]  # y's total moved by a job's 3 h, x's not at all
    assert f"{y['kept-off'].before:.1f} → {y['kept-off'].after:.1f}" in table
    md = render_markdown("a" * 40, "b" * 40, diff_configs(base, head), impact)
    assert "<summary>Why work waited (GPU-h of pending work per cause)</summary>" in md
    in_json = {t["team"]: t["waiting_gpu_h"] for t in impact.to_dict()["teams"]}
    assert in_json["y"]["kept-off"] == {"before": y["kept-off"].before, "after": y["kept-off"].after,
                                        "delta": y["kept-off"].after - y["kept-off"].before}


def test_progress_reports_each_side_up_to_the_end(tmp_path, monkeypatch):
    """``run_replay(progress=...)`` hears the fraction of each side's horizon simulated so far:
    never falling, within [0, 1], ending at [1.0, 1.0]; run here, the head starts once the
    base is done; in worker processes, the parent reads what they report (polled)."""
    import engine.sim.forked as forked_module

    path = trace_file(tmp_path, ("x", "y"), jobs=12)
    base, head = config({"x": 50.0, "y": 50.0}), config({"x": 20.0, "y": 80.0})

    def check(calls: list[list[float]]) -> None:
        assert calls and calls[-1] == [1.0, 1.0]
        for side in (0, 1):
            seen = [c[side] for c in calls]
            assert all(0.0 <= a <= b <= 1.0 for a, b in zip(seen, seen[1:]))

    serial: list[list[float]] = []
    run_replay(base, head, spec(path, parallel=False), progress=serial.append)
    check(serial)
    assert [1.0, 0.0] in serial  # the base reported its end before the head started
    monkeypatch.setattr(forked_module, "POLL_S", 0.001)
    parallel: list[list[float]] = []
    two = run_replay(base, head, spec(path, parallel=True), progress=parallel.append)
    check(parallel)
    one = run_replay(base, head, spec(path, parallel=False))
    assert replace(one, wall_s=0.0) == replace(two, wall_s=0.0)


def test_a_replay_of_a_few_days_offers_the_demand_asked_in_those_days():
    """The compression is chosen on the replayed window itself: a trace that starts quiet and
    gets busy still offers ``demand_ratio`` x capacity over the first simulated day (chosen
    on the whole trace, that day offered a third of it)."""
    from engine.impact.window import window_for
    from engine.sim.prepare import compress, demand_ratio

    quiet = [Task(f"q{i}", i * 3600.0, 1, 1, 1800.0, "x", leaf="x") for i in range(48)]
    busy = [Task(f"b{i}", 172800.0 + i * 600.0, 1, 8, 7200.0, "x", leaf="x") for i in range(432)]
    trace = Trace.of(quiet + busy)
    for days in (1.0, 2.5):
        window, factor = window_for(trace, 32, ReplaySpec(days=days, demand_ratio=1.1))
        replayed = compress(window, factor)
        assert replayed.meta["horizon"] == pytest.approx(days * 86400.0)
        assert demand_ratio(replayed, 32) == pytest.approx(1.1, rel=1e-4)
    whole, factor = window_for(trace, 32, ReplaySpec(days=None, demand_ratio=1.1))
    assert demand_ratio(compress(whole, factor), 32) == pytest.approx(1.1, rel=1e-4)
    first_day = compress(trace.window(0.0, 86400.0 * factor), factor)
    assert demand_ratio(first_day, 32) < 0.5  # the whole trace's factor, on its first day


def test_a_window_that_cannot_offer_the_demand_is_refused():
    from engine.errors import UserError
    from engine.impact.window import window_for

    trace = Trace.of([Task("a", 0.0, 1, 1, 60.0, "x", leaf="x")])
    with pytest.raises(UserError, match=r"cannot reach demand ratio 1.1 \(at most 2.17e-05 however compressed\)"):
        window_for(trace, 32, ReplaySpec(days=1.0, demand_ratio=1.1))
    with pytest.raises(UserError, match="the window holds no GPU work to replay"):
        window_for(Trace.of([]), 32, ReplaySpec(days=1.0, demand_ratio=1.1))


def test_a_start_day_past_the_trace_says_so(shift_repo, capsys):
    """Not "cannot reach demand ratio 1.1", which sent the user to lower the ratio."""
    from engine.cli import main

    assert main(["impact", "--repo", str(shift_repo.path), "--base", shift_repo.base, "--head",
                 shift_repo.head, "--trace", "helios", "--start-day", "500"]) == 1
    err = capsys.readouterr().err
    assert "--start-day: day 500 is past the last submission of helios (day 20.2); give an earlier --start-day" in err


def test_a_replay_not_started_in_its_worker_shows_none_done(monkeypatch):
    """Polled from the workers, a replay that has not reported yet, ``(0, 0)``, counts 0, not
    done: a progress line that took it for done ended before either replay had begun."""
    import engine.sim.forked as forked_module
    from engine.impact.runs import simulate_all

    polls = [[(0.0, 0.0), (0.0, 0.0)], [(30.0, 100.0), (0.0, 0.0)], [(100.0, 100.0), (50.0, 200.0)]]

    def fake_run_forked(runs, polled, workers=None):
        for pairs in polls:
            polled(pairs)
        return ["base", "head"]

    monkeypatch.setattr(forked_module, "run_forked", fake_run_forked)
    heard: list[list[float]] = []
    jobs = [(None, None, 0, "interval")] * 2
    assert simulate_all(jobs, parallel=True, progress=heard.append) == ["base", "head"]  # type: ignore[arg-type]
    assert heard == [[0.3, 0.0], [1.0, 0.0], [1.0, 0.25], [1.0, 1.0]]
