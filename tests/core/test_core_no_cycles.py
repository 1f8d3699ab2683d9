"""A decision builds no reference cycles: all it makes is freed by reference counting once
the caller drops it, so the cycle collector finds nothing to free during a simulation
(:func:`engine.sim.engine._collector_between_passes` relies on it). Checked on busy worlds
whose walks ask the anti-ping-pong rule for certain charges (``Projection.behind``), make
reservations and search for victims, with every status built; and on a short simulation,
the shell included.
"""

from __future__ import annotations

import gc
import random
from collections import Counter
from pathlib import Path
from typing import Callable

from engine.core.projection import Projection


def _cycles_left_by(run: Callable[[], None]) -> list:
    """The objects of the engine's own types made by ``run()`` that only the cycle collector
    would have freed after it. (Objects made before may be dropped during the run, e.g. an
    earlier test's budget tree, whose networkx graph holds cycles, leaving a cache across
    decisions; a thread an earlier test left running may make garbage of its own: neither is
    the run's. A cycle of the engine's holds an instance of one of its classes.)"""
    gc.collect()
    before = {id(o) for o in gc.get_objects()}
    was = gc.get_debug()
    gc.set_debug(was | gc.DEBUG_SAVEALL)
    try:
        run()
        gc.collect()
        return [o for o in gc.garbage
                if id(o) not in before and type(o).__module__.startswith("engine.")]
    finally:
        gc.set_debug(was)
        gc.garbage.clear()


def _kinds(objects: list) -> list[tuple[str, int]]:
    return Counter(type(o).__name__ for o in objects).most_common(6)


def test_a_decision_leaves_no_cycles(monkeypatch):
    from engine.core.decide import decide
    from tests.core.test_core_victim_caches import _busy_world

    asked = Projection.behind
    sums = [0]

    def counted(self, m):
        sums[0] += 1
        return asked(self, m)

    monkeypatch.setattr(Projection, "behind", counted)
    worlds = [_busy_world(random.Random(seed)) for seed in range(40)]

    def run() -> None:
        for world in worlds:
            decision = decide(*world)
            assert len(list(decision.statuses.values())) == len(world[0].running) + len(world[0].pending)

    left = _cycles_left_by(run)
    assert not left, _kinds(left)
    assert sums[0] > 100  # the walks did ask for certain charges


def test_a_simulation_leaves_no_cycles():
    from engine.loader import load_config
    from engine.sim.engine import simulate
    from engine.sim.clusters import with_clusters
    from engine.sim.prepare import prepare_trace
    from engine.sim.synthetic import synthetic_trace
    config = with_clusters(load_config(Path(__file__).resolve().parents[2]), "h100:4")
    trace = prepare_trace(synthetic_trace(config, days=0.5, tasks=400, demand_ratio_target=1.5,
                                          seed=3), config, seed=3)

    def run() -> None:
        result = simulate(config, trace, "budget")
        assert result.decide_calls > 50 and sum(r.preemptions for r in result.tasks.values()) > 0

    left = _cycles_left_by(run)
    assert not left, _kinds(left)
