"""``Projection.add_all`` (how a decision loads its running work in one walk) is exactly
``Projection.add`` called once per run in the same order: the same rolled-up rates, the same
protected runs, and the same certain charges (``behind``) to the last bit, whether or not a
node was already summed before the load.
"""

from __future__ import annotations

import random

from engine.core.projection import Projection
from engine.model import BudgetNode, BudgetTree

TREE = BudgetTree.build([
    BudgetNode("root", None, 100), BudgetNode("A", "root", 60), BudgetNode("B", "root", 40),
    BudgetNode("A1", "A", 70), BudgetNode("A2", "A", 30), BudgetNode("B1", "B", 100),
])
LEAVES = ["A1", "A2", "B1"]
NODES = ["root", "A", "B", "A1", "A2", "B1"]
HORIZONS = [0.0, 900.0, 3600.0 * 1.7, 8 * 3600.0]


def _charges(seed: int) -> list[tuple[str, float, float]]:
    rnd = random.Random(seed)
    return [(rnd.choice(LEAVES), rnd.choice([1, 2, 8]) * rnd.choice([1.0, 0.7, 2.3]),
             rnd.choice([-500.0, 0.0, 123.4, 3600.0, 9e4 / 7])) for _ in range(rnd.randint(0, 60))]


def _state(p: Projection) -> tuple:
    return (dict(p.rate), list(p.protected),
            [[p.behind(m)[n] for n in NODES] for m in HORIZONS])


def test_add_all_matches_add_one_by_one():
    for seed in range(40):
        charges = _charges(seed)
        one, bulk = Projection(TREE), Projection(TREE)
        for c in charges:
            one.add(*c)
        bulk.add_all(charges)
        assert _state(bulk) == _state(one)


def test_add_all_after_a_lookup_keeps_summed_nodes_current():
    for seed in range(40):
        first, later = _charges(seed), _charges(seed + 1000)
        one, bulk = Projection(TREE), Projection(TREE)
        for p in (one, bulk):
            for c in first:
                p.add(*c)
            assert p.behind(3600.0)["root"] >= 0.0  # sums some nodes before the load
        for c in later:
            one.add(*c)
        bulk.add_all(later)
        assert _state(bulk) == _state(one)


def test_add_all_moves_the_version():
    p = Projection(TREE)
    before = p.version
    p.add_all([("A1", 1.0, 60.0)])
    assert p.version != before


def test_certain_charges_are_the_plain_left_to_right_sums():
    """``behind(m)[node]``: ``0.0 + rate x min(seconds, m)`` of each protected run under the
    node, added in the order the runs came, to the last bit (a node summed on lookup, or kept
    up to date by later runs)."""
    import math

    for seed in range(40):
        charges = _charges(seed) + [(LEAVES[0], 0.1, 1e-3), (LEAVES[1], 3.3, 7.77e5)]
        rnd = random.Random(seed)
        p = Projection(TREE)
        early = [m for m in HORIZONS + [math.inf] if rnd.random() < 0.5]
        for i, c in enumerate(charges):
            p.add(*c)
            if i == len(charges) // 2:
                for m in early:  # summed now: the later runs are added to these sums
                    p.behind(m)[rnd.choice(NODES)]
        for m in HORIZONS + [math.inf]:
            for n in NODES:
                want = 0.0
                for leaf, rate, seconds in charges:
                    if seconds > 0 and n in TREE.path(leaf):
                        want = want + rate * min(seconds, m)
                assert p.behind(m).get(n) == (want if n in p.rate else 0.0), (seed, m, n)
