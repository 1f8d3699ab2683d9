"""What a decision keeps of its victims across decisions changes no result (fixed seeds):

* :class:`~engine.core.victim_cache.VictimCache` gives the list that building every victim
  with ``make_victim`` and sorting in victim order gives, pass after pass while running work
  comes and goes, ages (non-resumable work costs more each pass), changes leaf or rank, and
  for another debug rule or grace period; it stays bounded;
* :class:`~engine.core.victim_index.KeptSums` gives each node's bounds as fresh sums do,
  while the victims on a node change (equal lists, other lists, a victim gone);
* :class:`~engine.core.ranksums.RankSums` built from GPUs per rank answers as one built by
  adding them one by one;
* ``Eligibility.ok_victim_leaves`` (what a victim search asks) is the rule's leaves among
  those with work past its min runtime, also after victims go;
* a victim search that a pass skips because one with no fewer nodes and no fewer eligible
  victims failed before it (since the last preemption) would have failed;
* when ``VictimIndex.room_below`` finds no room with every victim ranked below a rank, no
  search allowed only such victims finds room; and the walk that relies on it for work kept
  off by reservations decides as the walk that always asks the anti-ping-pong rule.
"""

from __future__ import annotations

import random

from engine.core.preemption import make_victim
from engine.core.ranksums import RankSums
from engine.core.types import Contract, Placement, Running, Workload
from engine.core.victim_cache import VictimCache
from engine.core.victim import Victim
from engine.core.victim_index import KeptSums, _NodeSums
from engine.model import DebugRule

LEAVES = ["A1", "A2", "B1", None]


def _running(rnd: random.Random, k: int) -> Running:
    gpp, pods = rnd.choice([1, 2, 8]), rnd.choice([1, 1, 2])
    budget = rnd.choice(["A1", "A2", "B1", None])
    c = Contract(budget, rnd.choice([0.0, 600.0]), gpus_per_pod=gpp, pods=pods,
                 resumable=rnd.random() < 0.6)
    start = float(rnd.choice([0, 100, 250, 900]))
    on = tuple((f"n{(k + i) % 5}", gpp) for i in range(pods))
    return Running(Workload(f"r{k:03d}", c, 0.0), Placement(on), start, start + c.min_runtime_s)


def _fresh(prey, now: float, grace: float, rule: DebugRule, size: float) -> list[Victim]:
    return sorted((make_victim(r, leaf, rank, now, grace,
                               leaf is not None and r.workload.contract.gpus <= rule.max_gpus
                               and r.workload.contract.min_runtime_s <= rule.max_min_runtime_s
                               and r.workload.contract.allocated, size)
                   for r, leaf, rank in prey),
                  key=lambda v: (v.leaf is not None, v.cost, -v.rank, v.id))


def _fields(victims: list[Victim]) -> list[tuple]:
    return [(v.id, v.running, v.leaf, v.rank, v.cost, v.gpus, dict(v.per_node), v.debug)
            for v in victims]


def test_victim_cache_gives_the_built_and_sorted_victims():
    rnd = random.Random(11)
    cache = VictimCache(limit=30)
    running = [_running(rnd, k) for k in range(25)]
    now, rule, grace, size = 1000.0, DebugRule(), 120.0, 28800.0
    reused = 0
    for step in range(200):
        if rnd.random() < 0.3:  # work ends and starts
            running[rnd.randrange(len(running))] = _running(rnd, 100 + step)
        now += rnd.choice([0.0, 60.0, 600.0])
        if step % 50 == 49:  # another rule, grace period or min-runtime cap (the size term)
            rule, grace, size = rnd.choice([(DebugRule(max_gpus=2), grace, size), (rule, 300.0, size),
                                            (DebugRule(), 120.0, 28800.0), (rule, grace, 3600.0)])
        ranks = {leaf: i for i, leaf in enumerate(rnd.sample(["A1", "A2", "B1"], 3), 1)}
        prey = [(r, leaf, ranks[leaf] if leaf else 4)
                for r in running if now >= r.protected_until
                for leaf in [r.workload.contract.budget if r.workload.contract.allocated
                             and rnd.random() < 0.95 else None]]
        before = {id(hit[1]) for hit in cache.remembered.values()}
        got = cache.victims(prey, now, grace, rule, size)
        assert _fields(got) == _fields(_fresh(prey, now, grace, rule, size))
        reused += sum(id(v) in before for v in got)
        assert len(cache.remembered) <= 30
    assert reused > 500  # (the cache is used: most victims are the same from pass to pass)



def test_a_victim_costs_its_progress_lost_plus_the_cap_per_gpu_it_holds_past_its_first():
    """Cost = progress lost + (GPUs held - 1) x size_s (preemption.victim_cost), the GPUs
    being those its placement holds (what it must find free at once to run again), not its
    contract's (they differ when a running Job's spec.parallelism is edited: its contract is
    read again, 2 pods x 4 GPUs, while it holds the 4 GPUs it was admitted with). Resumable,
    running since t=0, at t=1000 with a 120 s grace and a cap of 28,800 s: 4 x 120 +
    3 x 28,800 = 86,880 (with the contract's 8 GPUs: 8 x 120 + 7 x 28,800 = 202,560). Not
    resumable: 4 x 1,000 + 3 x 28,800 = 90,400. The cache gives the same costs."""
    from dataclasses import replace

    c = Contract("A1", 600.0, gpus_per_pod=4, pods=2, resumable=True)
    held = Running(Workload("r", c, 0.0), Placement((("n1", 4),)), 0.0, 600.0)
    stuck = replace(held, workload=replace(held.workload, contract=replace(c, resumable=False)))
    assert make_victim(held, "A1", 1, 1000.0, 120.0, False, 28800.0).cost == 86880.0
    assert make_victim(stuck, "A1", 1, 1000.0, 120.0, False, 28800.0).cost == 90400.0
    got = VictimCache().victims([(held, "A1", 1), (stuck, "A1", 1)], 1000.0, 120.0, DebugRule(), 28800.0)
    assert [(v.running, v.cost, v.gpus) for v in got] == [(held, 86880.0, 4), (stuck, 90400.0, 4)]


def test_kept_sums_give_the_bounds_of_fresh_sums():
    rnd = random.Random(5)
    kept = KeptSums(limit=3)
    running = [_running(rnd, k) for k in range(12)]
    pool: list[Victim] = [make_victim(r, rnd.choice(LEAVES), rnd.randint(1, 4), 5000.0, 120.0)
                          for r in running]
    for _ in range(300):
        node = f"n{rnd.randrange(5)}"
        on = sorted((v for v in pool if node in v.per_node and rnd.random() < 0.8),
                    key=lambda v: v.order)
        if rnd.random() < 0.3:  # an equal record, not the same object
            i = rnd.randrange(len(pool))
            pool[i] = make_victim(*_args(pool[i]))
        elif rnd.random() < 0.2:  # another one
            i = rnd.randrange(len(pool))
            pool[i] = make_victim(running[i], rnd.choice(LEAVES), rnd.randint(1, 4), 9000.0, 120.0)
        sums, fresh = kept.sums(node, on), _NodeSums(on, node)
        for need in range(0, 20):
            assert sums.bound(need, node) == fresh.bound(need, node)
        assert len(kept.kept) <= 3


def _args(v: Victim) -> tuple:
    return (v.running, v.leaf, v.rank, 5000.0, 120.0)


def test_rank_sums_built_at_once_equal_added_one_by_one():
    rnd = random.Random(8)
    for _ in range(200):
        n = rnd.randint(1, 40)
        at: dict[int, int] = {}
        one = RankSums(n)
        for _ in range(rnd.randint(0, 30)):
            rank, gpus = rnd.randint(1, n), rnd.choice([1, 2, 8])
            at[rank] = at.get(rank, 0) + gpus
            one.add(rank, gpus)
        built = RankSums(n, at)
        assert built.tree == one.tree and built.total == one.total
        assert [built.above(r) for r in range(n + 1)] == [one.above(r) for r in range(n + 1)]


def test_ok_victim_leaves_are_the_rule_among_leaves_with_victims():
    import engine.core.decide as decide_module
    from tests.core.test_core_layout_cache import _world

    rnd = random.Random(6)
    asked = 0
    for _ in range(40):
        snapshot, config, now = _world(rnd)
        p = decide_module._Pass(snapshot, config, now)
        rules, leaves = p.rules, sorted(p.ranks)
        for _ in range(4):
            for leaf in leaves:
                for rank in range(0, len(leaves) + 1):
                    charge = (rnd.choice([0.0, 3600.0, 36000.0]), rnd.choice([600.0, 3600.0]))
                    with_victims = frozenset(x for x in rules.lower(rank) if p.gpus_by_leaf.get(x, 0) > 0)
                    assert rules.victims_below(rank) == with_victims
                    assert rules.ok_victim_leaves(leaf, rank, charge) == \
                        rules.ok_leaves(leaf, rank, charge) & with_victims
                    asked += 1
            alive = [(leaf, g) for leaf, g in p.gpus_by_leaf.items() if leaf is not None and g > 0]
            if alive:  # a victim goes
                leaf, g = rnd.choice(alive)
                rules.victim_gone(leaf, p.ranks[leaf].rank, g)
    assert asked > 1000


def _running_on(rnd: random.Random, nodes, now: float, sizes: list[int],
                used: list[int] | None = None) -> list:
    """Running work of leaves A1, A2, B1 and unallocated on each node, one-node jobs of
    ``sizes`` GPUs, some past their min runtime: every GPU used, or a choice of ``used``."""
    running = []
    for i, n in enumerate(nodes):
        left = rnd.choice(used) if used else 8
        while left:
            g = min(left, rnd.choice(sizes))
            c = Contract(rnd.choice(["A1", "A2", "B1", None]), rnd.choice([600.0, 3600.0]),
                         gpus_per_pod=g)
            started = now - rnd.choice([300.0, 5000.0, 20000.0])
            running.append(Running(Workload(f"r{i}-{left}", c, 0.0), Placement(((n.name, g),)),
                                   started, started + c.min_runtime_s))
            left -= g
    return running


def _busy_world(rnd: random.Random):
    """A full cluster of victims of every leaf, a long queue of a few shapes with many min
    runtimes (the anti-ping-pong rule then allows different leaves), and reservations."""
    from engine.core.types import NodeState, Snapshot
    from engine.model import BudgetNode, BudgetTree, Cluster, Config, Policy

    tree = BudgetTree.build([
        BudgetNode("root", None, 100), BudgetNode("A", "root", 60), BudgetNode("B", "root", 40),
        BudgetNode("A1", "A", 70), BudgetNode("A2", "A", 30), BudgetNode("B1", "B", 100)])
    nodes = tuple(NodeState(f"n{i}", "c", 8, f"d{i // 2}") for i in range(8))
    now = 50_000.0
    running = _running_on(rnd, nodes, now, [1, 2, 4, 8])
    pending = [Workload(f"p{k:02d}", Contract(rnd.choice(["A1", "A2", "B1"]),
                                              rnd.choice([600.0, 1200.0, 3600.0, 4 * 3600.0, 12 * 3600.0]),
                                              gpus_per_pod=rnd.choice([4, 8]),
                                              pods=rnd.choice([1, 1, 2])), float(k))
               for k in range(30)]
    usage = {leaf: float(rnd.choice([0, 20_000, 100_000, 400_000])) for leaf in ("A1", "A2", "B1")}
    policy = Policy(clusters=(Cluster("c", "gpu", 8, 8, 2),), reservations=rnd.choice([0, 2, 3]),
                    reservation_share=1.0)
    return Snapshot(nodes, tuple(running), tuple(pending), usage), Config(tree, policy), now


def test_a_search_skipped_as_failed_before_would_fail(monkeypatch):
    import engine.core.decide as decide_module
    from engine.core.preemption import find_victims
    from engine.core.walk_memo import WalkMemos

    asked = WalkMemos.failed_before
    skipped: list[tuple] = []
    passes: list = []

    def checked(memo, gang, exclude, vok, dok):
        if not asked(memo, gang, exclude, vok, dok):
            return False
        p = passes[-1]
        assert p.memo is memo
        gpus_per_pod, pods, cluster = gang
        assert find_victims(gpus_per_pod, pods, p.pool.cluster_names(cluster), p.pool, p.by_node,
                            vok, exclude, None, dok) is None
        skipped.append((exclude, vok))
        return True

    class Pass(decide_module._Pass):
        def __init__(self, *args):
            super().__init__(*args)
            passes.append(self)

    monkeypatch.setattr(WalkMemos, "failed_before", checked)
    monkeypatch.setattr(decide_module, "_Pass", Pass)
    rnd = random.Random(2)
    for _ in range(300):
        decide_module.decide(*_busy_world(rnd))
    assert len(skipped) > 30 and sum(1 for kept, _ in skipped if kept) > 10  # with nodes kept off


def test_no_room_below_a_rank_means_no_search_below_it_finds_room(monkeypatch):
    """``VictimIndex.room_below`` False: the search fails with every leaf ranked below the
    rank eligible, and so with any part of them."""
    import engine.core.decide as decide_module
    from engine.core.preemption import find_victims
    from engine.core.victim_index import VictimIndex

    asked = VictimIndex.room_below
    answers = {True: 0, False: 0}

    def checked(index, rank, gpus_per_pod, pods, clusters, pool, exclude):
        room = asked(index, rank, gpus_per_pod, pods, clusters, pool, exclude)
        answers[room] += 1
        if not room:
            below = frozenset(v.leaf for vs in index.on.values() for v in vs
                              if v.leaf is not None and v.rank > rank)
            for ok in (below, frozenset(sorted(below)[::2])):
                assert find_victims(gpus_per_pod, pods, clusters, pool, index, ok, exclude) is None
        return room

    monkeypatch.setattr(VictimIndex, "room_below", checked)
    rnd = random.Random(5)
    for _ in range(300):
        decide_module.decide(*_busy_world(rnd))
    assert answers[False] > 30 and answers[True] > 10


def test_deciding_kept_off_work_by_every_victim_below_changes_no_decision(monkeypatch):
    """Work kept off by reservations once no more can be made (and no loan to try) is refused
    without asking the anti-ping-pong rule when even every victim ranked below it would not
    make room, and at once when its shape failed so for a rank no better: the actions and
    every status are those of a walk that always takes every step."""
    import engine.core.decide as decide_module

    worlds = [_busy_world(random.Random(seed)) for seed in range(200)]
    asked = decide_module._Pass.fails_for_all_below
    refused = [0]

    def counted(self, *args):
        found = asked(self, *args)
        refused[0] += found
        return found

    monkeypatch.setattr(decide_module._Pass, "fails_for_all_below", counted)
    quick = [decide_module.decide(*w) for w in worlds]
    monkeypatch.setattr(decide_module._Pass, "why_unshown", lambda self, e: False)
    for world, got in zip(worlds, quick):
        full = decide_module.decide(*world)
        assert got.actions == full.actions and got.statuses == full.statuses
    assert refused[0] > 50
