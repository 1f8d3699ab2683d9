"""Metrics: entitlement water-filling, exact hourly integrals, and deterministic reports."""

from __future__ import annotations

import numpy as np
import pytest

from engine.model import BudgetNode, BudgetTree
from engine.sim.entitlement import entitlement, hourly_integral, waterfill
from engine.sim.engine import SimOptions
from engine.sim.experiment import run_experiment
from engine.sim.metrics import sampled_hours, score_teams, wait_stats
from engine.sim.prepare import prepare_trace
from engine.sim.report import write_report
from engine.sim.synthetic import synthetic_trace
from tests.sim.conftest import tiny_config


def test_waterfill_gives_unused_share_to_the_others_by_share():
    cap = np.array([100.0])
    demand = np.array([[10.0], [100.0], [100.0]])
    alloc = waterfill(cap, demand, np.array([50.0, 25.0, 25.0]))
    assert alloc[:, 0].tolist() == pytest.approx([10.0, 45.0, 45.0])
    assert waterfill(cap, np.array([[0.0], [5.0]]), np.array([50.0, 50.0]))[:, 0].tolist() == [0.0, 5.0]


def test_entitlement_redistributes_to_siblings_first_and_keeps_unallocated_back():
    tree = BudgetTree.build([BudgetNode("r", None, 100), BudgetNode("p", "r", 50),
                             BudgetNode("q", "r", 50), BudgetNode("p1", "p", 50),
                             BudgetNode("p2", "p", 50), BudgetNode("q1", "q", 100)])
    cap = np.array([100.0])
    ent = entitlement(tree, cap, {"p1": np.array([0.0]), "p2": np.array([100.0]),
                                  "q1": np.array([100.0])})
    assert (ent["p1"][0], ent["p2"][0], ent["q1"][0]) == (0.0, 50.0, 50.0)
    # the part a manager left unallocated is nobody's entitlement, even when both children want more
    tree = BudgetTree.build([BudgetNode("r", None, 100), BudgetNode("p", "r", 100, unallocated_pct=20),
                             BudgetNode("p1", "p", 40), BudgetNode("p2", "p", 40)])
    ent = entitlement(tree, cap, {"p1": np.array([100.0]), "p2": np.array([100.0])})
    assert (ent["p1"][0], ent["p2"][0]) == pytest.approx((40.0, 40.0))


def test_a_team_under_an_unallocated_part_is_entitled_to_all_it_asks_on_an_idle_cluster():
    """p keeps 20% unallocated; p1 asks 10 GPU-hours of a 100-GPU cluster nobody else wants:
    entitled to all 10 (not 8, 80% of its demand), delivered 10 is 100%, not 125%. When the
    share binds, the unallocated part is still kept back."""
    tree = BudgetTree.build([BudgetNode("r", None, 100), BudgetNode("p", "r", 100, unallocated_pct=20),
                             BudgetNode("p1", "p", 40), BudgetNode("p2", "p", 40)])
    ent = entitlement(tree, np.array([100.0, 100.0]),
                      {"p1": np.array([10.0, 100.0]), "p2": np.array([0.0, 100.0])})
    assert ent["p1"].tolist() == pytest.approx([10.0, 40.0])
    assert ent["p2"].tolist() == pytest.approx([0.0, 40.0])


def test_a_node_keeping_all_its_share_unallocated_leaves_it_to_its_siblings():
    """p gives nothing to its children (unallocated 100%): they are entitled to nothing however
    much they ask, and p wants nothing at r, so q is entitled to all q asks."""
    tree = BudgetTree.build([BudgetNode("r", None, 100), BudgetNode("p", "r", 50, unallocated_pct=100),
                             BudgetNode("p1", "p", 0), BudgetNode("q", "r", 50)])
    ent = entitlement(tree, np.array([100.0]), {"p1": np.array([100.0]), "q": np.array([100.0])})
    assert ent["p1"].tolist() == [0.0]
    assert ent["q"].tolist() == pytest.approx([100.0])


def test_wait_percentiles_interpolate_between_waits():
    stats = wait_stats([0.0, 10.0, 20.0, 30.0], 1)
    assert stats == {"n": 4, "censored": 1, "p50_s": 15.0, "p90_s": 27.0, "p99_s": 29.7, "mean_s": 15.0}


def test_hourly_integral_is_exact_for_partial_hours():
    out = hourly_integral(np.array([1800.0, 0.0]), np.array([5400.0, 3600.0]),
                          np.array([2.0, 1.0]), 3)
    assert out.tolist() == pytest.approx([2.0, 1.0, 0.0])


def test_same_inputs_and_seed_give_byte_identical_reports(tmp_path):
    """Twice the same run, causes collected: the same bytes in every file, pictures included
    (``waiting.png`` too). Without causes there is no ``waiting.png``, and the report does
    not name it."""
    cfg = tiny_config(nodes=4, gpus_per_node=8)
    trace = prepare_trace(synthetic_trace(cfg, days=0.5, tasks=150, seed=3), cfg, seed=3)
    outs = []
    for k in range(2):
        exp = run_experiment(cfg, trace, ("budget", "legacy", "monopoly"), seed=3,
                             options=SimOptions(causes=True))
        outs.append(write_report(exp, tmp_path / str(k)))
    for a, b in zip(*outs):
        assert a.name == b.name and a.read_bytes() == b.read_bytes(), a.name
    summary = exp.summary()["schedulers"]["budget"]
    assert summary["tasks"]["submitted"] == 150
    assert 0.0 < summary["occupancy"] <= 1.0
    assert {p.name for p in outs[0]} >= {"summary.json", "report.md", "gantt.png", "usage.png",
                                         "waits.png", "waiting.png"}
    assert "`waiting.png`" in (tmp_path / "0" / "report.md").read_text()
    plain = write_report(run_experiment(cfg, trace, ("budget", "legacy"), seed=3), tmp_path / "plain")
    assert "waiting.png" not in {p.name for p in plain} and not (tmp_path / "plain" / "waiting.png").exists()
    assert "waiting.png" not in (tmp_path / "plain" / "report.md").read_text()


def test_no_waiting_picture_when_only_work_of_no_team_waited(tmp_path):
    """Work that requests no budget waits under no team: the report's table and picture are
    per team, so neither is written (and the report does not name the picture)."""
    from engine.sim.engine import simulate
    from engine.sim.plots import plot_waiting
    from engine.sim.trace import Task, Trace

    trace = Trace.of([
        Task("paid", 0.0, 1, 4, 600.0, "y", leaf="b", min_runtime=600.0, resumable=False, klass="small"),
        Task("anon", 30.0, 1, 4, 600.0, "x", leaf=None, min_runtime=0.0, resumable=False, klass="small"),
    ], meta={"horizon": 3600.0})
    res = simulate(tiny_config(), trace, "budget", options=SimOptions(cadence="interval", causes=True))
    assert list(res.waiting) == ["(none)"]  # it did wait, under no team
    assert plot_waiting([res], tmp_path / "waiting.png") is None
    assert not (tmp_path / "waiting.png").exists()


def test_monopoly_never_lends_gpus():
    cfg = tiny_config(nodes=1, gpus_per_node=4)
    from engine.sim.engine import simulate
    from engine.sim.trace import Task, Trace

    trace = Trace.of([Task("x", 0.0, 1, 3, 100.0, "o", leaf="a", min_runtime=60.0, resumable=True,
                           klass="small")], meta={"horizon": 1000.0})
    res = simulate(cfg, trace, "monopoly")
    assert res.tasks["x"].first_start is None  # a's quota is 2 GPUs of 4
    assert res.summary()["waits"]["overall"]["censored"] == 1


def test_the_worst_team_is_named_beside_its_ratio():
    """The summary names the team with enough demand that got the smallest share of its
    entitlement (the first in leaf order on a tie), and the headline table shows it."""
    from engine.sim.report import text_table

    cfg = tiny_config(nodes=4, gpus_per_node=8)
    trace = prepare_trace(synthetic_trace(cfg, days=0.5, tasks=150, seed=3), cfg, seed=3)
    summary = run_experiment(cfg, trace, ("budget", "monopoly"), seed=3).summary()
    for s in summary["schedulers"].values():
        ent, teams = s["entitlement"], s["teams"]
        rated = [(t["ratio"], leaf) for leaf, t in teams.items()
                 if t["enough_demand"] and t["ratio"] is not None]
        assert len(rated) >= 2 and len({r for r, _ in rated}) >= 2  # a real choice
        worst = min(r for r, _ in rated)
        assert ent["worst_team"] == next(leaf for r, leaf in rated if r == worst)
        assert ent["worst_ratio"] == worst
    row = next(line for line in text_table(summary).splitlines() if line.startswith("worst team"))
    for s in summary["schedulers"].values():
        assert f"{100 * s['entitlement']['worst_ratio']:.1f}% ({s['entitlement']['worst_team']})" in row


def test_usage_picture_names_the_teams_without_work_instead_of_drawing_them(tmp_path):
    """A team with nothing entitled or delivered in the window gets no panel of flat zeros;
    one that only ran (or only waited) keeps its panel."""
    from engine.sim.engine import simulate
    from engine.sim.plots import plot_usage, usage_teams
    from engine.sim.trace import Task, Trace

    cfg = tiny_config(nodes=1, gpus_per_node=4)
    only_a = Trace.of([Task("x", 0.0, 1, 2, 3600.0, "o", leaf="a", min_runtime=600.0,
                            resumable=False, klass="small")], meta={"horizon": 7200.0})
    runs = [simulate(cfg, only_a, s) for s in ("budget", "legacy")]
    assert usage_teams(runs) == (["a"], ["b"])
    assert plot_usage(runs, tmp_path / "usage.png").stat().st_size > 0
    waits_b = Trace.of([Task("x", 0.0, 1, 4, 7200.0, "o", leaf="a", min_runtime=7200.0,
                             resumable=False, klass="small"),
                        Task("y", 60.0, 1, 4, 600.0, "o", leaf="b", min_runtime=600.0,
                             resumable=False, klass="small")], meta={"horizon": 3600.0})
    runs = [simulate(cfg, waits_b, "budget")]
    assert runs[0].tasks["y"].first_start is None  # b only waited: entitled, not delivered
    assert usage_teams(runs) == (["a", "b"], [])
    nothing = Trace.of([], meta={"horizon": 3600.0})
    runs = [simulate(cfg, nothing, "budget")]
    assert usage_teams(runs) == ([], ["a", "b"])
    assert plot_usage(runs, tmp_path / "empty.png").stat().st_size > 0


def test_waits_picture_says_which_class_had_no_jobs(tmp_path, monkeypatch):
    """A class with no job in the window gets a word in its panel, not an empty plot."""
    from engine.sim import plots
    from engine.sim.engine import simulate
    from engine.sim.trace import Task, Trace

    figures = []
    monkeypatch.setattr(plots.plt, "close", figures.append)
    trace = Trace.of([Task("x", 0.0, 1, 2, 600.0, "o", leaf="a", min_runtime=600.0,
                           resumable=False, klass="small")], meta={"horizon": 3600.0})
    plots.plot_waits([simulate(tiny_config(), trace, "budget")], tmp_path / "waits.png")
    (fig,) = figures
    words = [[t.get_text() for t in ax.texts] for ax in fig.axes]
    assert words == [["no debug jobs in the window"], [], ["no large gangs (64+ GPUs) in the window"]]


def test_gantt_legend_lists_the_teams_drawn_and_work_of_no_team(tmp_path, monkeypatch):
    from engine.sim import plots
    from engine.sim.engine import simulate
    from engine.sim.trace import Task, Trace

    figures = []
    monkeypatch.setattr(plots.plt, "close", figures.append)
    trace = Trace.of([Task("x", 0.0, 1, 2, 600.0, "o", leaf="a", min_runtime=600.0,
                           resumable=False, klass="small"),
                      Task("free", 0.0, 1, 1, 600.0, "o", leaf=None, min_runtime=0.0,
                           resumable=False, klass="small")], meta={"horizon": 3600.0})
    res = simulate(tiny_config(), trace, "budget")
    plots.plot_gantt([res], tmp_path / "gantt.png", (0.0, 3600.0))
    (fig,) = figures
    (legend,) = fig.legends
    assert [t.get_text() for t in legend.get_texts()] == ["a", "(none)", "preemptible", "preempted"]


def test_team_hues_are_not_the_preempted_red_nor_the_grey_of_work_of_no_team():
    import math

    from engine.sim.plots import team_colors

    colors = team_colors([f"team-{i:02d}" for i in range(17)])
    hues = [c[:3] for leaf, c in colors.items() if leaf is not None]
    assert len(set(hues)) == 17
    for c in hues:
        assert math.dist(c, (1.0, 0.0, 0.0)) > 0.4  # the preempted edge
        assert max(c) - min(c) > 0.1  # a hue, not a grey like work of no team's
    assert max(colors[None][:3]) == min(colors[None][:3])


def test_the_report_names_the_reservation_knobs_it_ran_with(tmp_path):
    from dataclasses import replace

    cfg = tiny_config(nodes=2, gpus_per_node=4)
    cfg = replace(cfg, policy=replace(cfg.policy, reservations=2, reservation_share=0.5, loans=True))
    trace = prepare_trace(synthetic_trace(cfg, days=0.1, tasks=20, seed=3), cfg, seed=3)
    exp = run_experiment(cfg, trace, ("budget",), seed=3)
    assert {k: exp.summary()["experiment"]["config"][k] for k in ("reservations", "reservation_share",
                                                                  "loans")} == {
        "reservations": 2, "reservation_share": 0.5, "loans": True}
    write_report(exp, tmp_path, pictures=False)
    text = (tmp_path / "report.md").read_text()
    assert "up to 2 reservations a pass on at most 50% of the GPUs, loans on;" in text
    assert " window the whole trace, time compression" in text


def test_the_report_writes_the_window_as_it_is_given():
    from engine.sim.report import _window_text

    assert _window_text([3628800.0, 3758400.0]) == "42d to 43d12h of the trace"  # --window 42d:43d12h
    assert _window_text(None) == "the whole trace"


def test_team_scores_at_their_boundaries():
    """Enough demand at exactly half the hours; 95% itself counts; the worst on a tie is the
    first in leaf order."""
    cap = np.full(4, 100.0)
    hours = lambda *v: np.array(v, float)  # noqa: E731
    demand = {"a": hours(50, 50, 0, 0), "b": hours(50, 0, 0, 0), "c": hours(100, 100, 100, 100),
              "d": hours(100, 100, 100, 100)}
    entitled = {"a": hours(50, 50, 0, 0), "b": hours(50, 0, 0, 0), "c": hours(25, 25, 25, 25),
                "d": hours(25, 25, 25, 25)}
    delivered = {"a": hours(47.5, 47.5, 0, 0), "b": hours(10, 0, 0, 0), "c": hours(20, 20, 20, 20),
                 "d": hours(20, 20, 20, 20)}
    teams, score = score_teams(["a", "b", "c", "d"], [0.5, 0.5, 0.25, 0.25], cap, demand, entitled,
                               delivered)
    assert [teams[t]["enough_demand"] for t in "abcd"] == [True, False, True, True]  # a: 2 of 4 hours
    assert teams["a"]["ratio"] == 0.95 and teams["c"]["ratio"] == teams["d"]["ratio"] == 0.8
    ent_total, within, enough, at_95, worst, worst_team = score
    assert (enough, at_95, worst, worst_team) == (3, 1, 0.8, "c")
    assert (ent_total, within) == (350.0, 95.0 + 10.0 + 80.0 + 80.0)


def test_a_last_hour_of_half_an_hour_is_a_sample_and_a_shorter_one_is_not():
    cap = np.array([100.0, 100.0])
    assert sampled_hours(cap.copy(), 3600 + 1800).tolist() == [True, True]
    assert sampled_hours(cap.copy(), 3600 + 1799).tolist() == [True, False]
    assert sampled_hours(np.array([0.0, 100.0]), 7200).tolist() == [False, True]  # (no healthy GPU)
