"""Two shortcuts of the queue walk change no result (fixed seeds):

* ``Holds.kept_off`` remembers its answer per leaf and per *set of timed reservations that
  start before the workload's protection ends* rather than per min runtime; every answer is
  the one :meth:`~engine.core.reservation.Holds.blocker` gives reservation by reservation,
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

from .test_core_victim_caches import _busy_world


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
            # the reference: every cluster with enough free GPUs is tried
            best = None
            for c in pool.cluster_names(cluster):
                if pool.cluster_free[c] < gpus_per_pod * pods:
                    continue
                skipped += max(pool.free[n] for n in pool.clusters[c]) < gpus_per_pod
                names = [n for n in pool.clusters[c] if n not in exclude]
                found = fit(gpus_per_pod, pods, pool.free, names, pool.groups[c])
                if found is not None:
                    score = (len(found.assignments),
                             sum(pool.free[n] for n in found.nodes) - gpus_per_pod * pods, c)
                    if best is None or score < best[0]:
                        best = (score, found)
            assert got == (None if best is None else best[1])
            if got is not None and rnd.random() < 0.7:
                pool.take(got)
            else:
                busy = [n for n in pool.free if pool.free[n] < 8]
                if busy:  # a preemption: GPUs come back
                    n = rnd.choice(busy)
                    pool.give(n, rnd.randint(1, 8 - pool.free[n]))
    assert skipped > 20
