"""What a decision pass remembers to stay cheap changes no result.

* :class:`~engine.core.releases.Releases` (running work sorted once per pass as releases)
  gives each holder the releases the reservation used to sort for it, and what is derived
  from them (per node, GPUs later, ids, one-node starts) equals a fresh computation, also
  after workloads are gone and the pool changed.
* :class:`~engine.core.running_facts.RunningFacts` (per running workload, across decisions)
  equals a fresh computation, and starts afresh for another tree or other weights.
* ``Projection.add_all(..., whole=True)`` (rates summed per leaf first) equals ``add`` one
  by one when every rate is a whole number; a projection's runs under a node are the same
  whether gathered early (then kept up to date by ``add``) or on request at the end.
* ``Decision.statuses`` makes its index only when first read, and then reads as the dict
  of every workload's status.
* ``Pool.group_free`` equals the sums of free GPUs per group as the pool changes.
* :class:`~engine.core.queue.KnownEntries` (queue entries across decisions) gives the
  entries of a cold queue, as rank numbers move, for other trees and debug rules, with one
  number per alike tuple; a queue updated from the previous one (a few workloads come and
  gone) is the queue made afresh, also as ranks and the debug rule change; ``decide`` gives the
  same decision with the running facts, victim records and victim sums cold or warm.
"""

from __future__ import annotations

import collections
import math
import random

import engine.core.victim_index as victim_index
from engine.core.placement import Pool
from engine.core.projection import Projection
from engine.core.releases import Releases, single_node_starts
from engine.core.running_facts import RunningFacts
from engine.core.victim_cache import VictimCache
from engine.core.victim_index import KeptSums
from engine.core.types import Contract, NodeState, Placement, Running, Workload
from engine.model import BudgetNode, BudgetTree

TREE = BudgetTree.build([
    BudgetNode("root", None, 100), BudgetNode("A", "root", 60), BudgetNode("B", "root", 40),
    BudgetNode("A1", "A", 70), BudgetNode("A2", "A", 30), BudgetNode("B1", "B", 100),
])
LEAVES = ["A1", "A2", "B1"]
NODES = ["root", "A", "B", "A1", "A2", "B1"]


def _world(rnd: random.Random):
    nodes = tuple(NodeState(f"n{i}", "c", 8, f"d{i // 3}") for i in range(rnd.randint(2, 9)))
    running = []
    for k in range(rnd.randint(0, 25)):
        on = sorted(rnd.sample([n.name for n in nodes], rnd.randint(1, 2)))
        budget = rnd.choice([None, "A1", "A2", "B1", "gone"])
        c = Contract(budget, rnd.choice([0.0, 600.0, 3600.0]), gpus_per_pod=1, pods=len(on))
        start = rnd.choice([0.0, 500.0, 1000.0])
        running.append(Running(Workload(f"w{k:02d}", c, 0.0), Placement(tuple((n, rnd.randint(1, 4)) for n in on)),
                               start, start + c.min_runtime_s if c.allocated else start))
    return nodes, running


def test_releases_equal_the_sort_per_holder():
    rnd = random.Random(7)
    facts = RunningFacts()
    for _ in range(300):
        nodes, running = _world(rnd)
        now = rnd.choice([0.0, 800.0, 2000.0])
        weights = {n.name: 1.0 for n in nodes}
        table = facts.table(TREE, weights)
        held = []
        for r in running:
            hit = table.get(id(r))
            f = hit[1] if hit is not None and hit[0] is r else facts.facts(r)
            held.append((r, f[3], f[5]))
        pool = Pool(nodes, {n: g for r in running for n, g in r.placement.assignments}, True)
        gone: set[str] = set()
        releases = Releases(held, gone, now)
        for step in range(3):
            ok = frozenset(rnd.sample(LEAVES, rnd.randint(0, 3)))
            expected = sorted((max(now, r.protected_until), r.workload.id, r.placement.assignments)
                              for r, lf, _ in held
                              if r.workload.id not in gone and (lf is None or lf in ok))
            mine = releases.eligible(ok)
            assert mine.releases == expected
            later: dict[str, int] = {}
            for _, _, on in expected:
                for n, g in on:
                    later[n] = later.get(n, 0) + g
            assert mine.later == later and mine.ids == {wid for _, wid, _ in expected}
            for total in (1, 4, 8):
                by_node: dict[str, list] = {}
                for rel in expected:
                    for n, _ in rel[2]:
                        by_node.setdefault(n, []).append(rel)
                assert releases.single_node_starts(ok, total, ["c"], pool) == \
                    single_node_starts(total, ["c"], pool, lambda: by_node)
            if held and rnd.random() < 0.7:
                gone.add(rnd.choice(held)[0].workload.id)
            if rnd.random() < 0.5:
                pool.give(nodes[0].name, 1)
        assert releases.running_on() == {
            n: [r.workload.id for r in running if n in r.placement.nodes]
            for n in {n for r in running for n in r.placement.nodes}}


def test_running_facts_equal_a_fresh_computation():
    rnd = random.Random(3)
    facts = RunningFacts(limit=40)
    for weights in ({"n0": 2.0}, {"n0": 0.5, "n1": 3.0}):
        nodes, running = _world(rnd)
        for tree in (TREE, BudgetTree.build([BudgetNode("root", None, 100), BudgetNode("A1", "root", 100)])):
            table = facts.table(tree, weights)
            for r in running + running:
                hit = table.get(id(r))
                got = hit[1] if hit is not None and hit[0] is r else facts.facts(r)
                c = r.workload.contract
                leaf = c.budget if c.allocated and c.budget in tree.leaves() else None
                rate = sum(g * weights.get(n, 1.0) for n, g in r.placement.assignments)
                release = (r.protected_until, r.workload.id, r.placement.assignments)
                assert got == (r.workload.id, r.placement.assignments, r.placement.gpus, leaf,
                               rate, (release, r.workload.id, leaf))
            assert len(facts.remembered) <= 40


def _state(p: Projection) -> tuple:
    return (dict(p.rate), list(p.protected), [[p.behind(m)[n] for n in NODES] for m in (60.0, 3600.0)])


def test_whole_rates_summed_per_leaf_equal_one_by_one():
    rnd = random.Random(5)
    for _ in range(60):
        charges = [(rnd.choice(LEAVES), float(rnd.choice([1, 2, 8, 16])) * rnd.choice([1.0, 3.0]),
                    rnd.choice([-5.0, 0.0, 123.4, 3600.0])) for _ in range(rnd.randint(0, 80))]
        one, bulk = Projection(TREE), Projection(TREE)
        for c in charges:
            one.add(*c)
        bulk.add_all(charges, whole=True)
        assert _state(bulk) == _state(one)
        more = [(rnd.choice(LEAVES), 4.0, 900.0) for _ in range(3)]
        for c in more:
            one.add(*c)
            bulk.add(*c)
        assert _state(bulk) == _state(one)
        lazy = Projection(TREE)  # runs added one by one, gathered per node only at the end
        for c in charges + more:
            lazy.add(*c)
        assert [lazy.protected_under(n) for n in NODES] == [one.protected_under(n) for n in NODES]


def test_group_free_most_free_and_best_node_follow_the_pool():
    rnd = random.Random(9)
    nodes, running = _world(rnd)
    pool = Pool(nodes, {n: g for r in running for n, g in r.placement.assignments}, True)
    for _ in range(200):
        version = pool.version
        if rnd.random() < 0.7:  # (asked or not between changes: kept up to date or made afresh)
            expected = {key: sum(pool.free[n] for n in names)
                        for groups in pool.groups.values() for key, names in groups.items()}
            assert pool.group_free() == expected
            for c, names in pool.clusters.items():
                assert pool.most_free(c) == max(pool.free[n] for n in names)
                total = rnd.randint(1, 8)
                exclude = frozenset(rnd.sample(names, rnd.randint(0, len(names))))
                fits = [(pool.free[n], n) for n in names if pool.free[n] >= total and n not in exclude]
                assert pool.best_node(c, total, exclude) == (min(fits)[1] if fits else None)
        n = rnd.choice(nodes).name
        if n not in pool.nodes:
            pool.give(n, 1)  # (a node that takes no work: ignored)
            continue
        if pool.free[n] > 0 and rnd.random() < 0.5:
            pool.take(Placement(((n, rnd.randint(1, pool.free[n])),)))
        else:
            pool.give(n, rnd.randint(1, 3))
        assert pool.version != version
    assert not math.isnan(sum(pool.group_free().values()))


def test_known_entries_give_the_entries_of_a_cold_queue(monkeypatch):
    import engine.core.queue as queue_module
    from engine.core.fairshare import rank_leaves
    from engine.core.queue import KnownEntries, build_queue
    from engine.model import DebugRule

    rnd = random.Random(4)
    other = BudgetTree.build([BudgetNode("root", None, 100), BudgetNode("A1", "root", 100)])
    pending = [Workload(f"p{k:02d}", Contract(rnd.choice(["A1", "A2", "B1", None, "gone"]),
                                              rnd.choice([0.0, 600.0, 3600.0]), priority=rnd.randint(0, 2),
                                              gpus_per_pod=rnd.choice([0, 1, 4, 8]), pods=rnd.choice([1, 2])),
                        float(rnd.randint(0, 50))) for k in range(60)]
    for tree in (TREE, other, TREE, TREE):
        for rule in (DebugRule(), DebugRule(max_gpus=4), None, DebugRule()):
            for _ in range(4):  # the leaves' rank numbers move between decisions
                ranks = rank_leaves(tree, {leaf: float(rnd.randint(0, 900)) for leaf in LEAVES})
                queued = rnd.sample(pending, 40)
                warm = build_queue(queued, ranks, rule)
                kept = queue_module._KNOWN
                monkeypatch.setattr(queue_module, "_KNOWN", KnownEntries())
                cold = build_queue(queued, ranks, rule)
                monkeypatch.setattr(queue_module, "_KNOWN", kept)
                # the same entries but for the numbers of alike tuples, which only name them
                assert [e[:-1] for e in cold[0]] == [e[:-1] for e in warm[0]] and cold[1] == warm[1]
                assert len({e.same for e in warm[0]}) == len({e.alike for e in warm[0]}) == \
                    len({(e.alike, e.same) for e in warm[0]})
                for e in warm[0]:  # the rank number of its leaf in this decision
                    assert e.rank == (ranks[e.leaf].rank if e.leaf is not None else None)


def test_a_queue_updated_from_the_previous_one_is_the_queue_made_afresh(monkeypatch):
    import engine.core.queue as queue_module
    from engine.core.fairshare import rank_leaves
    from engine.core.queue import KnownEntries, build_queue, queue_shapes
    from engine.model import DebugRule

    rnd = random.Random(11)

    def workload(k: int) -> Workload:
        c = Contract(rnd.choice(["A1", "A2", "B1", None, "gone"]), rnd.choice([0.0, 600.0, 3600.0]),
                     priority=rnd.randint(0, 2), gpus_per_pod=rnd.choice([0, 1, 4, 8]),
                     pods=rnd.choice([1, 2]))
        return Workload(f"w{k:04d}", c, float(rnd.randint(0, 500)),
                        invalid="refused" if rnd.random() < 0.03 else None)

    pool = [workload(k) for k in range(400)]
    pending = rnd.sample(pool, 150)
    usage = {leaf: float(rnd.randint(0, 900)) for leaf in LEAVES}
    rule: DebugRule | None = DebugRule()
    sizes = []
    entries_of = queue_module._entries

    def counted(ws, *args):
        sizes.append(len(ws))
        return entries_of(ws, *args)

    monkeypatch.setattr(queue_module, "_entries", counted)
    for step in range(300):
        out = [w for w in pending if rnd.random() > 0.02]  # a few go (admitted, rejected)
        queued = {w.id for w in out}
        others = [w for w in pool if w.id not in queued]
        came = rnd.sample(others, min(len(others), rnd.choice([0, 1, 3, 80])))
        if rnd.random() < 0.3:  # in any order; else the order kept, the new ones put in anywhere
            pending = out + came
            rnd.shuffle(pending)
        else:
            pending = out
            for w in came:
                pending.insert(rnd.randint(0, len(pending)), w)
        if rnd.random() < 0.05:  # the leaves' rank numbers move
            usage = {leaf: float(rnd.randint(0, 900)) for leaf in LEAVES}
        if rnd.random() < 0.03:
            rule = rnd.choice([DebugRule(), DebugRule(max_gpus=4), None])
        ranks = rank_leaves(TREE, usage)
        warm = build_queue(tuple(pending), ranks, rule)
        kept = queue_module._KNOWN
        monkeypatch.setattr(queue_module, "_KNOWN", KnownEntries())
        cold = build_queue(tuple(pending), ranks, rule)
        monkeypatch.setattr(queue_module, "_KNOWN", kept)
        assert [e[:-1] for e in warm[0]] == [e[:-1] for e in cold[0]] and warm[1] == cold[1], step
        # the shapes kept beside the queue are its entries' shapes, each counted
        counts = collections.Counter(e.alike[2:5] for e in warm[0])
        assert queue_module._KNOWN.last.shapes == counts, step
        assert set(queue_shapes(warm[0])) == set(counts) == set(queue_shapes(list(warm[0])))
    # most queues were updates: only the workloads new since the previous one were made
    assert sum(1 for n in sizes if n < 100) > 100


def test_decide_same_with_pass_caches_cold_or_warm(monkeypatch):
    import engine.core.decide as decide_module
    from tests.core.test_core_layout_cache import _outcome, _world

    rnd = random.Random(12)
    worlds = [_world(rnd) for _ in range(20)]
    warm = [_outcome(*w) for w in worlds] + [_outcome(*w) for w in worlds]
    cold = []
    for w in worlds * 2:
        monkeypatch.setattr(decide_module, "_FACTS", RunningFacts())
        monkeypatch.setattr(decide_module, "_VICTIMS", VictimCache())
        monkeypatch.setattr(victim_index, "_KEPT", KeptSums())
        cold.append(_outcome(*w))
    assert warm == cold


def test_statuses_are_indexed_on_first_read():
    from engine.core.decide import decide
    from tests.core.test_core_layout_cache import _world

    rnd = random.Random(4)
    for _ in range(10):
        snapshot, config, now = _world(rnd)
        d = decide(snapshot, config, now)
        assert d.statuses._index is None  # (nothing read yet: the simulator's case)
        ids = sorted({w.id for w in snapshot.pending} | {r.workload.id for r in snapshot.running})
        assert list(d.statuses) == ids and len(d.statuses) == len(ids)
        assert all(d.statuses[i].workload_id == i for i in ids)
        assert dict(d.statuses) == dict(decide(snapshot, config, now).statuses)


def test_the_difference_of_two_queues_found_in_order_is_the_difference_of_their_sets():
    # what came and went between two presentations of the queue, found by aligning them
    # (the common case: the order kept, a few taken out and put in) or by their id sets, is
    # the set difference both ways; for a workload presented twice there is none (the queue
    # is made afresh)
    import engine.core.queue as queue_module
    from engine.core.queue import _difference

    rnd = random.Random(17)
    objects = [object() for _ in range(300)]
    for step in range(3000):
        old = rnd.sample(objects, rnd.randint(0, 60))
        new = [o for o in old if rnd.random() > rnd.choice([0.0, 0.05, 0.5])]
        for o in rnd.sample(objects, rnd.choice([0, 1, 2, 5, 30])):  # new ones, or moved
            if o not in new:
                new.insert(rnd.randint(0, len(new)), o)
        if rnd.random() < 0.1:
            rnd.shuffle(new)
        twice = rnd.random() < 0.1 and new
        if twice:
            new.insert(rnd.randint(0, len(new)), rnd.choice(new))
        last = queue_module._Last((-1, -1.0), {}, 0, set(map(id, old)), [], [], [], {}, [],
                                  tuple(old))
        diff = _difference(last, tuple(new))
        if twice:
            assert diff is None, step
            continue
        assert diff is not None, step
        gone, came_ids, came = diff
        assert gone == set(map(id, old)) - set(map(id, new)), step
        assert came_ids == set(map(id, new)) - set(map(id, old)), step
        assert came == [o for o in new if id(o) in came_ids], step  # in the order given


def test_aligned_lists_every_difference_of_two_sequences():
    """``queue._aligned``: the items of ``old`` it does not list as taken out are, in order,
    the items of ``new`` it does not list as put in (by identity), however the edits fall."""
    from engine.core.queue import _aligned

    rnd = random.Random(13)
    found = 0
    for _ in range(3000):
        old = [object() for _ in range(rnd.randint(0, 60))]
        new = list(old)
        for _ in range(rnd.choice([0, 1, 2, 5, 12])):
            what = rnd.random()
            if what < 0.4 and new:
                del new[rnd.randrange(len(new))]
            elif what < 0.8:
                new.insert(rnd.randint(0, len(new)), object())
            elif new:  # moved
                new.insert(rnd.randint(0, len(new)), new.pop(rnd.randrange(len(new))))
        got = _aligned(tuple(old), tuple(new), 16, window=rnd.choice([1, 2, 8]))
        if got is None:
            continue
        found += 1
        out, came = ({id(x) for x in side} for side in got)
        assert [x for x in old if id(x) not in out] == [x for x in new if id(x) not in came]
        assert len(got[0]) + len(got[1]) <= 16
    assert found > 2000
