"""The report's pictures say what the data says: what is drawn is visible, and where."""

from __future__ import annotations

import matplotlib.image as mpimg
import numpy as np

from engine.sim import plots
from engine.sim.engine import simulate
from engine.sim.trace import Task, Trace
from tests.sim.conftest import tiny_config


def _red(png) -> np.ndarray:
    rgb = mpimg.imread(png)[..., :3]
    return (rgb[..., 0] > 0.9) & (rgb[..., 1] < 0.2) & (rgb[..., 2] < 0.2)


def test_the_preempted_edge_is_drawn_over_the_bar_it_ends(tmp_path):
    """Free work of b fills the node and is preempted at 600 s by a's funded job: the red edge
    at the end of b's first run shows across the row, not hidden under b's bar (drawn after
    it, b's name sorting after the edge's key)."""
    trace = Trace.of([Task("free", 0.0, 1, 4, 7200.0, "o", leaf="b", min_runtime=0.0,
                           resumable=False, klass="small"),
                      Task("x", 600.0, 1, 4, 1200.0, "o", leaf="a", min_runtime=1200.0,
                           resumable=False, klass="small")], meta={"horizon": 3600.0})
    res = simulate(tiny_config(), trace, "budget")
    assert [s.preempted for s in res.segments if s.task == "free"] == [True, False]
    plots.plot_gantt([res], tmp_path / "gantt.png", (0.0, 3600.0))
    red = _red(tmp_path / "gantt.png")
    height = red.any(axis=1).sum()  # rows of pixels with some red in them (the legend's too)
    assert height > 100, height  # the four GPU rows, not only hairlines at their edges


def test_the_gantt_legend_fits_a_one_node_figure_without_covering_the_axis(tmp_path, monkeypatch):
    """One node of 8 GPUs (a short figure, one panel) and 12 teams with long names: the legend
    stays inside the figure's width and below the x-axis label, not over it."""
    from engine.model import BudgetNode, BudgetTree, Cluster, Config, Policy

    names = [f"long-team-name-{i:02d}" for i in range(12)]
    tree = BudgetTree.build([BudgetNode("root", None, 100.0)]
                            + [BudgetNode(n, "root", 100.0 / len(names)) for n in names])
    config = Config(tree=tree, policy=Policy(clusters=(Cluster("c", "h100", 1, 8, 1),)), origin="t")
    trace = Trace.of([Task(f"t{i}", 300.0 * i, 1, 1, 600.0, "o", leaf=n, min_runtime=600.0,
                           resumable=False, klass="small") for i, n in enumerate(names)],
                     meta={"horizon": 7200.0})
    figures = []
    monkeypatch.setattr(plots.plt, "close", figures.append)
    plots.plot_gantt([simulate(config, trace, "budget")], tmp_path / "gantt.png", (0.0, 7200.0))
    (fig,) = figures
    renderer = fig.canvas.get_renderer()
    (legend,) = fig.legends
    box = legend.get_window_extent(renderer)
    assert len(legend.get_texts()) == 14  # the 12 teams, preemptible, preempted
    assert 0 <= box.x0 and box.x1 <= fig.bbox.width
    label = fig.axes[0].xaxis.label.get_window_extent(renderer)
    assert box.y1 <= label.y0  # below the x-axis label


def test_usage_names_every_team_without_work_inside_the_figure(tmp_path, monkeypatch):
    """One team of 17 has work: the 16 named under the panel are wrapped onto lines that fit
    the figure, not one line cut at both sides."""
    from engine.model import BudgetNode, BudgetTree, Cluster, Config, Policy

    names = [f"long-context-team-{i:02d}" for i in range(17)]
    tree = BudgetTree.build([BudgetNode("root", None, 100.0)]
                            + [BudgetNode(n, "root", 100.0 / len(names)) for n in names])
    config = Config(tree=tree, policy=Policy(clusters=(Cluster("c", "h100", 1, 8, 1),)), origin="t")
    trace = Trace.of([Task("x", 0.0, 1, 2, 3600.0, "o", leaf=names[0], min_runtime=600.0,
                           resumable=False, klass="small")], meta={"horizon": 7200.0})
    figures = []
    monkeypatch.setattr(plots.plt, "close", figures.append)
    plots.plot_usage([simulate(config, trace, "budget")], tmp_path / "usage.png")
    (fig,) = figures
    (label,) = [t for t in fig.texts if "no work in the window" in t.get_text()]
    text = " ".join(label.get_text().split())
    assert all(n in text for n in names[1:])
    box = label.get_window_extent(fig.canvas.get_renderer())
    assert 0 <= box.x0 and box.x1 <= fig.bbox.width


def test_waiting_draws_a_team_that_barely_waited_faded_with_its_small_total(tmp_path, monkeypatch):
    """Team a waited 100 GPU-h, team b 0.05: both bars split their own waiting by cause (so
    both span the axis), but b's is faded and hatched and its label says "only 0.05 GPU-h", so
    it does not read like a's; the legend says what faded means."""
    from types import SimpleNamespace

    teams = {leaf: {"ratio": 1.0, "enough_demand": True} for leaf in ("a", "b")}
    res = SimpleNamespace(config=tiny_config(), scheduler="budget", summary=lambda: {"teams": teams},
                          waiting={"a": {"kept-off": 60 * 3600.0, "free-work": 40 * 3600.0},
                                   "b": {"free-work": 0.05 * 3600.0}})
    figures = []
    monkeypatch.setattr(plots.plt, "close", figures.append)
    assert plots.plot_waiting([res], tmp_path / "waiting.png") == tmp_path / "waiting.png"
    (fig,) = figures
    ax = fig.axes[0]
    labels = [t.get_text() for t in ax.get_yticklabels()]
    row = {leaf: next(i for i, t in enumerate(labels) if t.startswith(f"{leaf} ")) for leaf in "ab"}
    y = {leaf: ax.get_yticks()[i] for leaf, i in row.items()}
    bars = {leaf: [p for p in ax.patches if abs(p.get_y() + p.get_height() / 2 - y[leaf]) < 1e-9]
            for leaf in "ab"}
    assert bars["a"] and bars["b"]
    assert sum(p.get_width() for p in bars["b"]) == 1.0  # its own split, all free-work
    assert all(p.get_alpha() is None and not p.get_hatch() for p in bars["a"])
    assert all(p.get_alpha() is not None and p.get_alpha() < 1 and p.get_hatch() for p in bars["b"])
    texts = {t.get_text().split(";")[0]: t for t in ax.texts}
    assert texts["100 GPU-h"].get_fontweight() == "normal"
    assert texts["only 0.05 GPU-h"].get_fontweight() == "bold"
    legend = [t.get_text() for t in ax.get_legend().get_texts()]
    assert legend[:2] == ["kept-off", "free-work"]
    assert legend[2].startswith("faded: waited under 1% of the most (100 GPU-h)")
