"""The replay: one trace, both revisions, the same jobs and mapping; what happens to work of a
leaf the head removes; the ramp-up skip; parallel and serial runs agree; the chart folds
long tails."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest

from engine.impact.chart import MAX_BARS, bars, write_chart
from engine.impact.replay import (Pair, ReplayImpact, ReplaySpec, TeamImpact, ramp_up_day,
                                  run_replay)
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
    assert any("y (not a leaf in the head) run unfunded" in n for n in impact.notes)
    assert impact.overall["unallocated_share"].after > impact.overall["unallocated_share"].before


def test_owners_without_leaves_are_mapped_once_against_the_base_tree(tmp_path):
    path = trace_file(tmp_path, ("alice", "bob"), jobs=6, leaf=False)
    impact = run_replay(config({"x": 50.0, "y": 50.0}), config({"x": 40.0, "y": 60.0}),
                        spec(path, parallel=False))
    # derive_mapping put one owner on each leaf; both sides replay the same mapping
    teams = {t.team: t for t in impact.teams}
    assert teams["x"].delivered.before > 0 and teams["y"].delivered.before > 0


def test_ramp_up_day_skips_a_near_silent_start():
    quiet = [Task(f"q{i}", i * 86400.0, 1, 1, 60.0, "o") for i in range(3)]
    busy = [Task(f"b{i}", 5 * 86400.0 + i, 1, 1, 60.0, "o") for i in range(997)]
    assert ramp_up_day(Trace.of(quiet + busy)) == 5.0
    assert ramp_up_day(Trace.of(busy)) == 5.0
    assert ramp_up_day(Trace.of([])) == 0.0


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


def test_turning_loans_on_shows_the_gpu_hours_lent(tmp_path):
    """A policy change like any other: ``placement.loans`` off -> on. x keeps 7 of 8 GPUs of
    every node protected; y's whole-node job holds a node, and y's small resumable jobs run
    there on loan in the head only. The cluster-wide table shows the GPU-hours lent (and
    hides the row when neither side lent)."""
    from engine.impact.report import _overall_table

    path = tmp_path / "t.jsonl"
    recs = [{"id": f"x-{i}", "submit": 0.0, "pods": 1, "gpus_per_pod": 7, "runtime": 6 * 3600.0,
             "owner": "x", "leaf": "x", "min_runtime": 4 * 3600.0, "resumable": False} for i in range(4)]
    recs.append({"id": "y-big", "submit": 60.0, "pods": 1, "gpus_per_pod": 8, "runtime": 3600.0,
                 "owner": "y", "leaf": "y", "min_runtime": 1800.0, "resumable": True})
    recs += [{"id": f"y-{i}", "submit": 120.0 + i, "pods": 1, "gpus_per_pod": 1, "runtime": 3 * 3600.0,
              "owner": "y", "leaf": "y", "min_runtime": 1800.0, "resumable": True} for i in range(6)]
    path.write_text("".join(json.dumps(r) + "\n" for r in recs))
    base = config({"x": 50.0, "y": 50.0})
    head = replace(base, policy=replace(base.policy, loans=True))
    impact = run_replay(base, head, spec(str(path), parallel=False))
    lent = impact.overall["on_loan_gpu_h"]
    assert lent.before == 0.0 and lent.after > 1.0
    assert "of it funded work on loan (GPU-h)" in _overall_table(impact)
    same = run_replay(base, base, spec(str(path), parallel=False))
    assert "on loan" not in _overall_table(same)


def test_progress_reports_each_side_up_to_the_end(tmp_path, monkeypatch):
    """``run_replay(progress=...)`` hears the fraction of each side's horizon simulated so far:
    never falling, within [0, 1], ending at [1.0, 1.0]; run here, the head starts once the
    base is done; in worker processes, the parent reads what they report (polled)."""
    import engine.impact.runs as runs_module

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
    monkeypatch.setattr(runs_module, "POLL_S", 0.001)
    parallel: list[list[float]] = []
    two = run_replay(base, head, spec(path, parallel=True), progress=parallel.append)
    check(parallel)
    one = run_replay(base, head, spec(path, parallel=False))
    assert replace(one, wall_s=0.0) == replace(two, wall_s=0.0)
