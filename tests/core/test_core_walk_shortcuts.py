"""Two shortcuts of the queue walk change no result (fixed seeds):

* ``Holds.kept_off`` remembers its answer per leaf and per *set of timed reservations that
  start before the workload's protection ends* rather than per min runtime; every answer is
  the one :meth:`~engine.core.holds.Holds.blocker` gives reservation by reservation,
  also for min runtimes that end exactly at a reservation's start (not protected past it)
  or just after it, and for reservations that start at the same time;
* a placement skips a cluster with no node that has a pod's GPUs free, and places as
  before.
"""

from __future__ import annotations

import random

import engine.core.decide as decide_module
from engine.core.placement import Pool, fit
from engine.core.queue import Entry
from engine.core.reservation import Reservation
from engine.core.types import Contract, NodeState, Placement, Workload

from .test_core_victim_caches import _busy_world, _running_on


def _fresh_kept_off(holds, e: Entry):
    """The reference: each reservation asked, in order, whether it keeps ``e`` off."""
    why = tuple((res, code) for res in holds.items if (code := holds.blocker(e, res)) is not None)
    return frozenset().union(*(res.nodes for res, _ in why)), why


def test_kept_off_answers_for_every_min_runtime_are_the_blockers():
    rnd = random.Random(3)
    snapshot, config, now = _busy_world(rnd)
    p = decide_module._Pass(snapshot, config, now)
    # two reservations start at the same time; a drain hold keeps off all funded work
    starts = [now + 600.0, now + 1200.0, now + 1200.0, now + 7200.0]
    leaves = sorted(p.ranks, key=lambda leaf: p.ranks[leaf].rank)
    for i, until in enumerate(starts):
        p.holds.add(Reservation(f"h{i}", leaves[i % len(leaves)], p.ranks[leaves[i % len(leaves)]].rank,
                                until, Placement(((f"n{i}", 8),)), charge=(1000.0 * i, 600.0)))
    p.holds.add(Reservation("hold", leaves[0], p.ranks[leaves[0]].rank, float("inf"),
                            Placement((("n7", 8),)), hold=True))
    runtimes = [0.0, 1.0, 599.0, 600.0, 600.5, 1199.0, 1200.0, 1200.25, 7199.0, 7200.0, 7201.0,
                86_400.0]
    asked = [(leaf, m) for leaf in leaves for m in runtimes]
    for order in range(20):  # the first workload asked fills the memo for the others
        rnd.shuffle(asked)
        for leaf, m in asked:
            w = Workload(f"w-{leaf}-{m}", Contract(leaf, m, gpus_per_pod=4), 0.0)
            e = Entry(w, leaf, p.ranks[leaf].rank, "", ())
            assert p.holds.kept_off(e) == _fresh_kept_off(p.holds, e), (leaf, m, order)
        p.proj.add(leaves[order % len(leaves)], 8.0, 3600.0)  # a new projection: new answers
    # every kind of reason came up
    reasons = {code for leaf, m in asked
               for _, code in _fresh_kept_off(p.holds, Entry(
                   Workload("x", Contract(leaf, m, gpus_per_pod=4), 0.0), leaf, p.ranks[leaf].rank,
                   "", ()))[1]}
    assert {"hold", "rank", "protected"} <= reasons


def test_a_cluster_without_a_pod_s_gpus_free_on_a_node_is_skipped():
    rnd = random.Random(11)
    nodes = tuple(NodeState(f"n{i}", "c" if i < 6 else "d", 8, f"d{i // 3}") for i in range(12))
    skipped = 0
    for _ in range(100):
        used = {n.name: rnd.choice([0, 2, 4, 5, 6, 7, 8, 8, 8]) for n in nodes}
        pool = Pool(nodes, used, gang_in_one_domain=rnd.random() < 0.5)
        for _ in range(8):  # placements while the pool's free GPUs change
            gpus_per_pod, pods = rnd.choice([1, 2, 4, 8]), rnd.choice([1, 1, 2, 3])
            exclude = frozenset(rnd.sample([n.name for n in nodes], rnd.choice([0, 0, 2])))
            cluster = rnd.choice(["c", "d", None])
            got = pool.place(gpus_per_pod, pods, cluster, exclude)
            # the reference: fit on the nodes and groups of every cluster with enough free
            # GPUs at once (one node first, by best fit and name; else the group with fewest
            # nodes, least left over, then key), as if they were one cluster
            names, groups = [], {}
            for c in pool.cluster_names(cluster):
                if pool.cluster_free[c] < gpus_per_pod * pods:
                    continue
                skipped += max(pool.free[n] for n in pool.clusters[c]) < gpus_per_pod
                names += [n for n in pool.clusters[c] if n not in exclude]
                groups.update(pool.groups[c])
            assert got == (fit(gpus_per_pod, pods, pool.free, names, groups) if names else None)
            if got is not None and rnd.random() < 0.7:
                pool.take(got)
            else:
                busy = [n for n in pool.free if pool.free[n] < 8]
                if busy:  # a preemption: GPUs come back
                    n = rnd.choice(busy)
                    pool.give(n, rnd.randint(1, 8 - pool.free[n]))
    assert skipped > 20


def test_the_walk_s_memos_give_every_turn_the_outcome_of_its_own_step(monkeypatch):
    """``_Pass.run`` gives a workload the outcome of an earlier alike one (same state), or of
    one alike but for its min runtime that ended ``reserved-out`` before a search (same state,
    as many timed reservations starting before its protection ends): the outcomes and actions
    are those of a walk that steps every workload."""
    from engine.core.queue import build_queue

    def walk(snapshot, config, now, remember: bool, nears=None):
        p = decide_module._Pass(snapshot, config, now)
        entries, _ = build_queue(snapshot.pending, p.ranks, p.policy.debug)
        if nears is not None:
            monkeypatch.setattr(decide_module, "near_numbers", lambda resumable: nears)
        steps = 0
        step = p.step

        def counted(e):
            nonlocal steps
            steps += 1
            return step(e)

        p.step = counted  # type: ignore[method-assign]
        if remember:
            outcome = p.run(entries)
        else:
            p.start_walk()
            outcome = [p.step(e) for e in entries]
        monkeypatch.undo()
        return outcome, p.actions, [r.holder for r in p.holds.items], steps, entries

    from engine.core.queue import near_numbers

    served = merged = 0
    worlds = [(_busy_world if seed % 2 else _walk_world)(random.Random(seed)) for seed in range(120)]
    no_loans = [_walk_world(random.Random(seed), loans=False) for seed in range(40)]
    for seed, world in enumerate([*worlds, _loan_world(), *no_loans]):
        got, actions, holders, steps, entries = walk(*world, remember=True)
        want, want_actions, want_holders, _, _ = walk(*world, remember=False)
        assert got == want and actions == want_actions and holders == want_holders, seed
        # without sharing across min runtimes (every alike tuple its own near number)
        _, _, _, unshared, _ = walk(*world, remember=True, nears=list(range(10_000)))
        served += unshared - steps
        if not world[1].policy.loans:  # shared across the resumable flag too: without, more steps
            _, _, _, apart, _ = walk(*world, remember=True, nears=near_numbers(True))
            merged += apart - steps
    assert served > 100  # turns the near memo answered
    assert merged > 20  # of them, turns of work alike but for its resumable flag, without loans


def _walk_world(rnd: random.Random, loans: bool = True):
    """Two clusters with a few GPUs free here and there, and a queue where each leaf's small
    jobs (admitted on them) come between its whole-node jobs of many min runtimes (kept off
    the reservations), with loans unless told (``_busy_world``: without)."""
    from engine.core.types import Snapshot
    from engine.model import BudgetNode, BudgetTree, Cluster, Config, Policy

    tree = BudgetTree.build([
        BudgetNode("root", None, 100), BudgetNode("A", "root", 60), BudgetNode("B", "root", 40),
        BudgetNode("A1", "A", 70), BudgetNode("A2", "A", 30), BudgetNode("B1", "B", 100)])
    nodes = tuple(NodeState(f"n{i}", "c" if i < 6 else "e", 8, f"d{i // 2}") for i in range(10))
    now = 50_000.0
    running = _running_on(rnd, nodes, now, [1, 2, 4], used=[8, 8, 8, 8, 5, 4])
    pending = [Workload(f"p{k:02d}", Contract(
        rnd.choice(["A1", "A2", "B1"]), rnd.choice([600.0, 1200.0, 3600.0, 4 * 3600.0, 7200.0]),
        gpus_per_pod=rnd.choice([1, 1, 2, 8, 8]), pods=rnd.choice([1, 1, 2]),
        resumable=rnd.random() < 0.5, cluster=rnd.choice([None, None, "c", "e"])), float(k))
        for k in range(40)]
    usage = {leaf: float(rnd.choice([0, 20_000, 100_000])) for leaf in ("A1", "A2", "B1")}
    policy = Policy(clusters=(Cluster("c", "gpu", 6, 8, 2), Cluster("e", "gpu", 4, 8, 2)),
                    reservations=rnd.choice([1, 2]),
                    reservation_share=1.0, loans=loans)
    return Snapshot(nodes, tuple(running), tuple(pending), usage), Config(tree, policy), now


def _loan_world():
    """A drain hold on the one node with free GPUs, then three 2-GPU jobs of one leaf kept off
    it: the first two may not borrow them (not resumable), the third may (on loan)."""
    from engine.core.types import Running, Snapshot
    from engine.model import BudgetNode, BudgetTree, Cluster, Config, Policy

    tree = BudgetTree.build([BudgetNode("root", None, 100), BudgetNode("A1", "root", 50),
                             BudgetNode("B1", "root", 50)])
    nodes = (NodeState("n0", "c", 8, "d0"), NodeState("n1", "c", 8, "d0"))
    now = 50_000.0
    running = [Running(Workload(f"r{i}", Contract("A1", 7200.0, gpus_per_pod=g), 0.0),
                       Placement(((n, g),)), now - 60.0, now + 7000.0)
               for i, (n, g) in enumerate([("n0", 8), ("n1", 4)])]
    pending = [Workload("x", Contract("B1", 3600.0, gpus_per_pod=8), 0.0)] + [
        Workload(f"p{k}", Contract("B1", m, gpus_per_pod=2, resumable=resumable), float(k))
        for k, (m, resumable) in enumerate([(3600.0, False), (7200.0, False), (5400.0, True)], 1)]
    policy = Policy(clusters=(Cluster("c", "gpu", 2, 8, 2),), reservations=1, loans=True)
    return Snapshot(nodes, tuple(running), tuple(pending), {"A1": 0.0, "B1": 0.0}), \
        Config(tree, policy), now
