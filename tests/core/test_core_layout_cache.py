"""Caches and shortcuts that keep a decision pass cheap change no result.

* :class:`~engine.core.placement.Layouts`: the static node layout is shared across decisions
  (by identity of the nodes tuple, else by value, per ``gang_in_one_domain``); a pool built on
  it holds exactly what a pool built from scratch holds.
* The budget tree's derived structures (walk order, paths, bottom-up order, leaves under a
  node, normalised sibling shares) equal their definitions, and caching them leaves the
  tree's equality and repr alone; likewise ``Placement.nodes/gpus`` and ``Contract.gpus/
  allocated``.
* A gang's pods spread inside a group (``placement._fill``: largest nodes first, the rest on
  the smallest node that holds it) as the plain search of every fitting node would.
* ``earliest_start`` (one walk over the releases for every group) and ``hold_nodes`` (no
  greedy sort when a group has exactly the pod slots needed) equal the direct per-group
  searches they replace, on random multi-cluster pools.
* The queue entries of unallocated work remembered across decisions equal fresh ones, and
  ``decide`` gives the same decision with the caches cold or warm.
* The "can never fit" split asked per shape the queue counts, with verdicts remembered per
  layout, keeps and rejects what ``never_fits`` asked entry by entry does.
"""

from __future__ import annotations

import dataclasses
import math
import pickle
import random

import engine.core.decide as decide_module
import engine.core.queue as queue_module
from engine.core.decide import decide
from engine.core.placement import Layout, Layouts, Pool, _fill, fit
from engine.core.queue import KnownEntries, build_queue
from engine.core.releases import Eligible
from engine.core.reservation import earliest_start, hold_nodes
from engine.core.types import Contract, NodeState, Placement, Running, Snapshot, Workload
from engine.model import BudgetNode, BudgetTree, Cluster, Config, Policy

TREE = BudgetTree.build([
    BudgetNode("root", None, 100, unallocated_pct=10), BudgetNode("A", "root", 50),
    BudgetNode("B", "root", 40), BudgetNode("A1", "A", 70), BudgetNode("A2", "A", 30),
    BudgetNode("B1", "B", 0), BudgetNode("B2", "B", 100),
])


def _nodes(rnd: random.Random) -> tuple[NodeState, ...]:
    out = []
    for cluster in rnd.sample(["ca", "cb", "cc"], rnd.randint(1, 3)):
        gpus = rnd.choice([2, 4, 8])
        for i in range(rnd.randint(1, 9)):
            out.append(NodeState(f"{cluster}-n{i}", cluster, gpus, f"{cluster}-d{i // rnd.randint(1, 4)}",
                                 healthy=rnd.random() > 0.1, cordoned=rnd.random() < 0.1))
    rnd.shuffle(out)
    return tuple(out)


def _pool_state(p: Pool) -> tuple:
    return (p.free, p.cluster_free, p.nodes, p.all_nodes, p.clusters, p.groups, p.max_node,
            [p.cluster_names(c) for c in [None, *p.clusters, "none"]])


# ---------------------------------------------------------------------------- layouts


def test_layouts_by_identity_value_and_gang_flag():
    rnd = random.Random(3)
    nodes = _nodes(rnd)
    layouts = Layouts()
    first = layouts.get(nodes, True)
    assert layouts.get(nodes, True) is first
    assert layouts.get(tuple(list(nodes)), True) is first  # an equal tuple: same layout
    other = layouts.get(nodes, False)
    assert other is not first and layouts.get(nodes, True) is first
    changed = tuple(dataclasses.replace(n, healthy=False) if i == 0 else n for i, n in enumerate(nodes))
    assert nodes[0].name not in layouts.get(changed, True).nodes


def test_layouts_are_bounded():
    layouts = Layouts(limit=3)
    for k in range(10):
        layouts.get((NodeState(f"n{k}", "c", 8, "d"),), True)
    assert len(layouts._layouts) <= 3


def test_pool_on_a_shared_layout_equals_a_fresh_pool():
    rnd = random.Random(5)
    layouts = Layouts()
    for _ in range(200):
        nodes = _nodes(rnd)
        gang = rnd.random() < 0.5
        used = {n.name: rnd.randint(0, n.gpus + 1) for n in nodes if rnd.random() < 0.7}
        used["unknown-node"] = 3
        assert _pool_state(Pool(nodes, used, gang, layouts.get(nodes, gang))) == \
            _pool_state(Pool(nodes, used, gang))


def test_node_weights():
    nodes = (NodeState("a", "ca", 8, "d"), NodeState("b", "cb", 8, "d", healthy=False))
    layout = Layout(nodes, True)
    assert layout.node_weights({"ca": 0.5}) == {"a": 0.5, "b": 1.0}
    assert layout.node_weights({}) == {"a": 1.0, "b": 1.0}


# ---------------------------------------------------------------------------- derived values


def test_tree_derived_structures():
    tree = BudgetTree.build([*TREE.nodes.values()])
    before = repr(tree)
    walk: list[str] = []
    stack = [tree.root]
    while stack:
        name = stack.pop()
        walk.append(name)
        stack.extend(reversed(tree.children(name)))
    assert tree.walk() == tuple(walk)
    for name in walk:
        path = [name]
        while tree.nodes[path[-1]].parent is not None:
            path.append(tree.nodes[path[-1]].parent)
        assert tree.path(name) == tuple(reversed(path))
        kids = tree.children(name)
        total = sum(tree.nodes[k].share_pct for k in kids)
        assert tree.sibling_shares(name) == tuple(
            tree.nodes[k].share_pct / total if total > 0 else 0.0 for k in kids)
        assert tree.leaves_under()[name] == tuple(
            x for x in tree.leaves() if name in tree.path(x))
    assert tree.bottom_up() == tuple((n, tree.children(n)) for n in reversed(walk))
    assert tree.sibling_shares("B") == (0.0, 1.0)
    assert repr(tree) == before and tree == TREE


def test_cached_properties_leave_dataclasses_alone():
    p = Placement((("a", 2), ("b", 6)))
    c = Contract("A1", 60.0, gpus_per_pod=4, pods=2)
    for obj in (p, c):
        fresh = dataclasses.replace(obj)
        assert (obj.gpus, repr(obj), hash(obj)) == (fresh.gpus, repr(fresh), hash(fresh))
        assert obj == fresh and dataclasses.asdict(obj) == dataclasses.asdict(fresh)
        assert pickle.loads(pickle.dumps(obj)) == obj
    assert (p.nodes, p.gpus, c.gpus, c.allocated) == (("a", "b"), 8, 8, True)
    assert [f.name for f in dataclasses.fields(Placement)] == ["assignments"]
    assert not Contract(None, 60.0).allocated and not Contract("A1", 0.0).allocated


# ---------------------------------------------------------------------------- reservation searches


def _earliest_start_direct(gpus_per_pod, pods, clusters, pool, releases, avoid):
    """The per-group search ``earliest_start`` replaces: the earliest one-node start, and
    for a multi-pod gang the earliest group start, which wins only when strictly earlier."""
    total = gpus_per_pod * pods
    best = None
    for c in clusters:
        for n in pool.clusters[c]:
            if pool.nodes[n].gpus < total or n in avoid:
                continue
            free = pool.free[n]
            when = -math.inf if free >= total else math.inf
            for t, _, on in releases:
                if free >= total:
                    break
                if n in dict(on):
                    free += dict(on)[n]
                    if free >= total:
                        when = t
            if when < math.inf and (best is None or (when, n) < best[0]):
                best = ((when, n), Placement(((n, total),)))
    single = None if best is None else (best[0][0], best[1])
    if pods == 1:
        return single
    best = None
    for c in clusters:
        for key, members in sorted(pool.groups[c].items()):
            names = [n for n in members if n not in avoid]
            free = {n: pool.free[n] for n in names}
            slots = sum(f // gpus_per_pod for f in free.values())
            when = -math.inf if slots >= pods else math.inf
            for t, _, on in releases:
                if slots >= pods:
                    break
                for n, g in on:
                    if n in free:
                        slots += (free[n] + g) // gpus_per_pod - free[n] // gpus_per_pod
                        free[n] += g
                if slots >= pods:
                    when = t
            if when == math.inf:
                continue
            placement = fit(gpus_per_pod, pods, free, names, {key: names})
            if placement is not None and (best is None or (when, key) < best[0]):
                best = ((when, key), placement)
    group = None if best is None else (best[0][0], best[1])
    if single is not None and (group is None or single[0] <= group[0]):
        return single
    return group


def _hold_nodes_direct(gpus_per_pod, pods, clusters, pool, later, avoid):
    """The greedy per-group search ``hold_nodes`` shortcuts (always sorting)."""
    total = gpus_per_pod * pods
    best = None
    for c in clusters:
        for n in pool.clusters[c]:
            if pool.nodes[n].gpus >= total and n not in avoid:
                short = max(0, total - pool.free[n] - later.get(n, 0))
                if best is None or (short, 1, -pool.free[n], n) < best[0]:
                    best = ((short, 1, -pool.free[n], n), Placement(((n, total),)))
    if pods == 1:
        return None if best is None else (best[0][0], best[1])
    for c in clusters:
        for key, names in sorted(pool.groups[c].items()):
            names = [n for n in names if n not in avoid]
            order = sorted(names, key=lambda n: (-(pool.free[n] + later.get(n, 0)), n))
            chosen, short, left, free = [], 0, pods, 0
            for n in order:
                k = min(left, pool.nodes[n].gpus // gpus_per_pod)
                if k <= 0:
                    continue
                chosen.append((n, k * gpus_per_pod))
                short += max(0, k * gpus_per_pod - pool.free[n] - later.get(n, 0))
                free += pool.free[n]
                left -= k
                if left == 0:
                    break
            if left > 0:
                continue
            score = (short, len(chosen), -free, "/".join(key))
            if best is None or score < best[0]:
                best = (score, Placement(tuple(sorted(chosen))))
    return None if best is None else (best[0][0], best[1])


def test_reservation_searches_equal_the_direct_ones():
    rnd = random.Random(11)
    checked = 0
    for _ in range(600):
        nodes = _nodes(rnd)
        pool = Pool(nodes, {n.name: rnd.randint(0, n.gpus) for n in nodes}, rnd.random() < 0.6)
        if not pool.clusters:
            continue
        releases, later = [], {}
        for k in range(rnd.randint(0, 12)):
            on = sorted(rnd.sample(sorted(pool.nodes), rnd.randint(1, min(3, len(pool.nodes)))))
            assignments = tuple((n, rnd.randint(1, 4)) for n in on)
            releases.append((rnd.choice([0.0, 100.0, 250.0, 900.0]), f"w{k}", assignments))
            for n, g in assignments:
                later[n] = later.get(n, 0) + g
        releases.sort()
        avoid = frozenset(n for n in pool.nodes if rnd.random() < 0.15)
        clusters = pool.cluster_names(rnd.choice([None, *pool.clusters]))
        for gpus_per_pod, pods in [(1, 1), (2, 2), (4, 1), (4, 3), (8, 1), (2, 5), (4, 4), (8, 2)]:
            args = (gpus_per_pod, pods, clusters, pool)
            assert earliest_start(*args, releases, avoid) == \
                _earliest_start_direct(*args, releases, avoid)
            assert hold_nodes(*args, Eligible(releases), avoid) == \
                _hold_nodes_direct(*args, later, avoid)
            checked += 1
    assert checked > 2000


# ---------------------------------------------------------------------------- queue and decide


def _world(rnd: random.Random) -> tuple[Snapshot, Config, float]:
    nodes = tuple(NodeState(f"n{i}", "c", 8, f"d{i // 2}") for i in range(6))
    now = 20_000.0
    running = [Running(Workload(f"r{k}", Contract(rnd.choice(["A1", "B2", None]), 900.0,
                                                  gpus_per_pod=4), 0.0),
                       Placement(((f"n{k}", 4),)), now - 2000, now - 1100) for k in range(6)]
    pending = [Workload(f"p{k}", Contract(rnd.choice(["A1", "A2", "B2", None, "gone"]),
                                          rnd.choice([0.0, 600.0, 3600.0]),
                                          gpus_per_pod=rnd.choice([1, 4, 8]), pods=rnd.choice([1, 2])),
                        float(rnd.randint(0, 50))) for k in range(20)]
    usage = {leaf: float(rnd.randint(0, 9000)) for leaf in ("A1", "A2", "B2")}
    return (Snapshot(nodes, tuple(running), tuple(pending), usage),
            Config(TREE, Policy(clusters=(Cluster("c", "gpu", 6, 8, 2),))), now)


def _outcome(snap: Snapshot, config: Config, now: float) -> tuple:
    d = decide(snap, config, now)
    return (d.actions, d.ranks, {i: d.statuses[i] for i in
                                 [r.workload.id for r in snap.running] + [w.id for w in snap.pending]})


def test_unallocated_entries_equal_fresh_ones(monkeypatch):
    rnd = random.Random(2)
    snap, config, now = _world(rnd)
    ranks = decide(snap, config, now).ranks
    monkeypatch.setattr(queue_module, "_KNOWN", KnownEntries(limit=5))  # cleared again and again
    for _ in range(3):
        entries, _ = build_queue(snap.pending, ranks)
        for e in entries:
            w, c = e.workload, e.workload.contract
            if not c.allocated:
                assert e[:7] == (w, None, None, e.note, (2, 0, 0, w.submitted_at, w.id), False,
                             (None, False, c.gpus_per_pod, c.pods, c.cluster, c.min_runtime_s,
                              c.resumable))
    warm = build_queue(snap.pending, ranks)
    monkeypatch.setattr(queue_module, "_KNOWN", KnownEntries())
    assert build_queue(snap.pending, ranks) == warm


def test_decide_same_with_caches_cold_or_warm(monkeypatch):
    rnd = random.Random(9)
    worlds = [_world(rnd) for _ in range(30)]
    warm = [_outcome(*w) for w in worlds] + [_outcome(*w) for w in worlds]
    cold = []
    for w in worlds * 2:
        monkeypatch.setattr(decide_module, "_LAYOUTS", Layouts())
        monkeypatch.setattr(queue_module, "_KNOWN", KnownEntries())
        cold.append(_outcome(*w))
    assert warm == cold


def test_split_by_the_queues_shapes_is_the_split_entry_by_entry():
    # "can never fit" asked per shape the queue counts (remembered per layout) keeps and
    # rejects exactly the entries never_fits keeps and rejects, in queue order
    from engine.core.fairshare import rank_leaves
    from engine.core.verdicts import ShapeVerdicts, never_fits
    from engine.core.queue import queue_shapes

    rnd = random.Random(21)
    verdicts = ShapeVerdicts()
    pending: list[Workload] = []
    rejected = 0
    for step in range(120):
        if step % 10 == 0:  # now and then another node layout (clusters, node sizes, domains)
            nodes = _nodes(rnd)
            pool = Pool(nodes, {}, True, Layouts().get(nodes, True))
        pending = [w for w in pending if rnd.random() > 0.1] + [
            Workload(f"w{step:03d}-{k}", Contract(rnd.choice(["A1", "B2", None]), 3600.0,
                                                  gpus_per_pod=rnd.choice([1, 2, 4, 8, 16]),
                                                  pods=rnd.choice([1, 1, 2, 3, 40]),
                                                  cluster=rnd.choice([None, "ca", "cb", "cz"])),
                     float(step)) for k in range(rnd.randint(0, 4))]
        ranks = rank_leaves(TREE, {"A1": float(step % 7), "B2": 3.0})
        entries, _ = build_queue(tuple(pending), ranks)
        expected_kept = [e for e in entries if never_fits(pool, True, e.workload.contract) is None]
        expected_rejects = [(e.workload, never_fits(pool, True, e.workload.contract))
                            for e in entries if never_fits(pool, True, e.workload.contract) is not None]
        assert set(queue_shapes(entries)) == {e.alike[2:5] for e in entries}
        for shapes in (queue_shapes(entries), None):
            kept, rejects = verdicts.split(entries, nodes, pool, True, shapes)
            assert kept == expected_kept and rejects == expected_rejects, step
        rejected += len(expected_rejects)
    assert rejected > 50  # (some shapes never fit some layouts)


def _fill_direct(slots, pods):
    """Pods per node as first written: at each step every later node is tried for the rest."""
    avail = sorted((s for s in slots if s[0] > 0), key=lambda s: (-s[0], s[1]))
    chosen, remaining, i = [], pods, 0
    while remaining > 0:
        fitting = [s for s in avail[i:] if s[0] >= remaining]
        if fitting:
            s, n = min(fitting)
            return chosen + [(n, remaining)]
        s, n = avail[i]
        chosen.append((n, s))
        remaining -= s
        i += 1
    return chosen


def test_a_gang_s_pods_spread_as_the_plain_search_spreads_them():
    rnd = random.Random(5)
    for _ in range(5000):
        slots = [(rnd.randint(0, 4), f"n{j}") for j in rnd.sample(range(20), rnd.randint(1, 10))]
        have = sum(s for s, _ in slots)
        if have:
            pods = rnd.randint(1, have)
            assert _fill(slots, pods) == _fill_direct(slots, pods), (slots, pods)
