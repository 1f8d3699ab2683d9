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
