"""The structures that make a busy decision's victim search and anti-ping-pong tests fast give
exactly the answers of the plain definitions, on random worlds (fixed seeds):

* ``VictimIndex``: its per-node lists and counts are those of the victims still alive, and
  its per-node bounds never exceed the cost of any victim set that makes room on the node;
* ``find_victims`` over a ``VictimIndex`` (nodes visited cheapest bound first) returns the
  same placement and victims as over a plain dict of lists (every node in name order),
  while victims go and free GPUs change between searches, with multi-GPU victims (the
  order-dependent case), exclusions, debug preemptors, and free victims (no grace period);
* ``PingPongLeaves`` (and ``ChargeOrder`` behind it) gives the sets of
  ``outranked_after_charge`` and the answers of ``still_ranks_above`` while the projection
  moves.
"""

from __future__ import annotations

import itertools
import math
import random

import pytest

import engine.core.victim_index as victim_index
from engine.core.fairshare import outranked_after_charge, still_ranks_above, subtree_leaves
from engine.core.ledger import rollup_usage
from engine.core.placement import Pool
from engine.core.pingpong import PingPongLeaves
from engine.core.preemption import Victim, find_victims, set_cost
from engine.core.projection import Projection
from engine.core.types import Contract, NodeState, Placement, Running, Workload
from engine.core.victim_index import VictimIndex
from engine.model import BudgetNode, BudgetTree

LEAVES = ["A1", "A2", "B1", "B2"]
COSTS = [0.0, 120.0, 120.0, 240.0, 480.0, 1000.0, 3600.5]


def _world(rnd: random.Random) -> tuple[list[NodeState], dict[str, int], list[Victim]]:
    nodes = [NodeState(f"n{i}", rnd.choice(["c", "d"]), rnd.choice([4, 8]), f"dom{i % 3}")
             for i in range(rnd.randint(1, 7))]
    free = {n.name: n.gpus for n in nodes}
    victims = []
    free_victims = rnd.random() < 0.2  # allocated victims may cost nothing (no grace period)
    for k in range(rnd.randint(0, 14)):
        gpp, pods = rnd.choice([1, 1, 1, 2, 4]), rnd.choice([1, 1, 2])
        spots = [n for n in sorted(free) if free[n] >= gpp]
        if len(spots) < pods:
            continue
        on = sorted(rnd.sample(spots, pods))
        for n in on:
            free[n] -= gpp
        leaf = rnd.choice(LEAVES + [None])
        cost = rnd.choice(COSTS if free_victims or leaf is None else COSTS[1:]) * gpp * pods
        c = Contract(budget=leaf, min_runtime_s=900.0 if leaf else 0.0, gpus_per_pod=gpp, pods=pods)
        r = Running(Workload(f"v{k}", c, 0.0), Placement(tuple((n, gpp) for n in on)), 0.0, 0.0)
        victims.append(Victim(r.workload.id, r, leaf, LEAVES.index(leaf) + 1 if leaf else 5, cost,
                              gpp * pods, dict(r.placement.assignments),
                              debug=leaf is not None and rnd.random() < 0.4))
    used = {n.name: n.gpus - free[n.name] for n in nodes}
    for n in nodes:  # some protected work too (not a victim)
        if free[n.name] and rnd.random() < 0.5:
            used[n.name] += rnd.randint(1, free[n.name])
    victims.sort(key=lambda v: v.order)
    return nodes, used, victims


def _plain(victims: list[Victim]) -> tuple[dict[str, list[Victim]], dict[str, int]]:
    by_node: dict[str, list[Victim]] = {}
    held: dict[str, int] = {}
    for v in victims:
        for n, g in v.on:
            by_node.setdefault(n, []).append(v)
            held[n] = held.get(n, 0) + g
    return by_node, held


def test_index_tracks_alive_victims():
    rnd = random.Random(1)
    for _ in range(300):
        nodes, used, victims = _world(rnd)
        index = VictimIndex(victims)
        alive = list(victims)
        while True:
            by_node, held = _plain(alive)
            assert {n: vs for n, vs in index.on.items() if vs} == by_node
            assert {n: g for n, g in index.held.items() if g} == held
            assert index.unallocated == sum(v.leaf is None for v in alive)
            for ok in (frozenset(), frozenset(LEAVES[:2]), frozenset(LEAVES)):
                for debug_ok in (None, frozenset(), frozenset(LEAVES[1:3])):
                    expect = any(v.leaf is None or (v.leaf in ok and (
                        debug_ok is None or not v.debug or v.leaf in debug_ok)) for v in alive)
                    assert index.any_eligible(ok, debug_ok) == expect
            if not alive:
                break
            gone = alive.pop(rnd.randrange(len(alive)))
            index.remove(gone)


def test_bounds_never_exceed_a_set_that_makes_room():
    rnd = random.Random(2)
    for _ in range(300):
        nodes, used, victims = _world(rnd)
        index = VictimIndex(victims)
        for node in nodes:
            on = index.get(node.name)
            for need in range(-1, node.gpus + 1):
                bound = index.bound(node.name, need)
                sets = [c for k in range(len(on) + 1) for c in itertools.combinations(on, k)
                        if sum(v.per_node[node.name] for v in c) >= need]
                if not sets:
                    assert bound is None
                    continue
                assert bound is not None
                for c in sets:  # ``c`` in victim order, summed as the search sums a set
                    assert (set_cost(c), 0, node.name) >= bound, (need, c, bound)


@pytest.mark.parametrize("seed", range(6))
def test_search_over_the_index_matches_the_scan(monkeypatch, seed):
    monkeypatch.setattr(victim_index, "SORT_AFTER", 1)  # always the sorted search
    rnd = random.Random(100 + seed)
    for _ in range(120):
        nodes, used, victims = _world(rnd)
        gang = rnd.random() < 0.5
        pool, mirror = Pool(nodes, used, gang), Pool(nodes, used, gang)
        index, alive = VictimIndex(victims), list(victims)
        names = [n.name for n in nodes]
        for _ in range(12):
            by_node, held = _plain(alive)
            gpp, pods = rnd.choice([(1, 1), (1, 1), (2, 1), (4, 1), (3, 1), (8, 1), (2, 2), (4, 2)])
            clusters = rnd.choice([("c",), ("d",), ("c", "d")])
            clusters = tuple(c for c in clusters if c in pool.clusters)
            ok = frozenset(rnd.sample(LEAVES, rnd.randint(0, len(LEAVES))))
            debug_ok = rnd.choice([None, frozenset(rnd.sample(LEAVES, rnd.randint(0, 3)))])
            exclude = frozenset(rnd.sample(names, min(len(names), rnd.choice([0, 0, 1, 2]))))
            fast = find_victims(gpp, pods, clusters, pool, index, ok, exclude, None, debug_ok)
            scan = find_victims(gpp, pods, clusters, mirror, by_node, ok, exclude, held, debug_ok)
            assert fast == scan
            fresh = VictimIndex(alive)  # room with every victim ranked below: what the index
            for c in clusters:  # remembers per group, kept up to date, is what a fresh one sums
                assert index._group_slots(pool, c, gpp, exclude) == fresh._group_slots(
                    pool, c, gpp, exclude)
            for rank in rnd.sample(range(6), 3):  # and gives the fresh answer
                for k in (1, 2, 3):
                    assert index.room_below(rank, gpp, k, clusters, pool, exclude) == \
                        fresh.room_below(rank, gpp, k, clusters, pool, exclude)
            if fast is not None and rnd.random() < 0.6:  # as a decision admits: victims go
                placement, chosen = fast
                for v in chosen:
                    for n, g in v.on:
                        pool.give(n, g)
                        mirror.give(n, g)
                    index.remove(v)
                    alive.remove(v)
                pool.take(placement)
                mirror.take(placement)
                for n, _ in placement.assignments:
                    index.changed(n)
            elif alive and rnd.random() < 0.3:  # or a victim goes for another reason
                v = alive.pop(rnd.randrange(len(alive)))
                for n, g in v.on:
                    pool.give(n, g)
                    mirror.give(n, g)
                index.remove(v)
            else:  # or free GPUs are taken without preemption
                spots = [n for n in names if n in pool.free and pool.free[n] > 0]
                if spots:
                    n = rnd.choice(spots)
                    pool.take(Placement(((n, 1),)))
                    mirror.take(Placement(((n, 1),)))
                    index.changed(n)


def test_the_cheapest_node_wins_even_when_it_took_more_before_dropping_overshoot(monkeypatch):
    # n0's only victim costs 100; n1 takes b (20) then c (90), which alone makes room, so its
    # set is c alone (90): n1 wins, in the scan and the index alike. (The scan used to give
    # n1 up at 20 + 90 > 100, before dropping b, and answered n0.)
    monkeypatch.setattr(victim_index, "SORT_AFTER", 1)
    nodes = [NodeState("n0", "c", 4, "d"), NodeState("n1", "c", 8, "d")]

    def victim(vid: str, node: str, gpus: int, cost: float) -> Victim:
        c = Contract(budget="A1", min_runtime_s=900.0, gpus_per_pod=gpus)
        r = Running(Workload(vid, c, 0.0), Placement(((node, gpus),)), 0.0, 0.0)
        return Victim(vid, r, "A1", 1, cost, gpus, {node: gpus})

    victims = sorted([victim("a", "n0", 4, 100.0), victim("b", "n1", 1, 20.0),
                      victim("c", "n1", 4, 90.0)], key=lambda v: v.order)
    pool = Pool(nodes, {"n0": 4, "n1": 8}, False)
    ok = frozenset({"A1"})
    by_node, held = _plain(victims)
    scan = find_victims(4, 1, ("c",), pool, by_node, ok, frozenset(), held)
    assert scan is not None and scan[0].nodes == ("n1",) and [v.id for v in scan[1]] == ["c"]
    assert find_victims(4, 1, ("c",), pool, VictimIndex(victims), ok) == scan
    best = victim_index.cheapest_node(4, ("c",), pool, VictimIndex(victims), ok, frozenset(), None)
    assert best is not None and best[0] == ((1, 90.0, 0.0, 1), 0, "n1")


TREE = BudgetTree.build([
    BudgetNode("root", None, 100), BudgetNode("A", "root", 50), BudgetNode("B", "root", 30),
    BudgetNode("C", "root", 20),
    BudgetNode("A1", "A", 40), BudgetNode("A2", "A", 40), BudgetNode("A3", "A", 20),
    BudgetNode("B1", "B", 50), BudgetNode("B2", "B", 50),
    BudgetNode("C1", "C", 0), BudgetNode("C2", "C", 100),
    BudgetNode("A3x", "A3", 60), BudgetNode("A3y", "A3", 40),
])
TREE_LEAVES = [n for n in TREE.walk() if TREE.is_leaf(n)]


def test_pingpong_leaves_match_the_plain_functions():
    rnd = random.Random(3)
    under = subtree_leaves(TREE)
    for _ in range(150):
        usage = {x: rnd.choice([0.0, 0.0, 1e3, 5e4, rnd.uniform(0, 1e6)]) for x in TREE_LEAVES}
        used = rollup_usage(TREE, usage)
        proj = Projection(TREE)
        proj.add_all([(rnd.choice(TREE_LEAVES), rnd.choice([1.0, 2.0, 8.0]),
                       rnd.choice([-100.0, 0.0, 600.0, 7200.0]))
                      for _ in range(rnd.randint(0, 12))])
        sets = PingPongLeaves(TREE, used, proj)
        for _ in range(40):
            # (a min runtime asked about often gets a sorted order; a rare one, the plain test)
            leaf = rnd.choice(TREE_LEAVES)
            m = rnd.choice([900.0, 3600.0]) if rnd.random() < 0.5 else rnd.uniform(60.0, 3e4)
            extra = rnd.choice([0.0, 1e3, 1e5, rnd.uniform(0, 1e6)])
            lower = frozenset(rnd.sample(TREE_LEAVES, rnd.randint(0, len(TREE_LEAVES))))
            ahead, behind = proj.ahead(m), proj.behind(m)
            expect = outranked_after_charge(TREE, used, leaf, extra, under, ahead, behind) & lower
            assert sets.leaves(leaf, (extra, m), lower) == expect
            # bounded by the charge over an unbounded horizon: the lookups it spares change nothing
            assert outranked_after_charge(TREE, used, leaf, extra, under, ahead, behind,
                                          proj.behind(math.inf)) & lower == expect
            loser = rnd.choice(TREE_LEAVES)
            assert (sets.still_above(leaf, loser, extra, m)
                    == still_ranks_above(TREE, used, leaf, loser, extra, ahead, behind))
            step = rnd.random()  # the projection moves as a decision admits and preempts
            if step < 0.4:
                proj.add(rnd.choice(TREE_LEAVES), rnd.choice([1.0, 4.0]),
                         rnd.choice([0.0, 900.0, 1e4]))
            elif step < 0.6 and proj.rate:
                x = rnd.choice(TREE_LEAVES)
                if proj.rate.get(x, 0.0) > 0:
                    proj.remove(x, min(1.0, proj.rate[x]))
