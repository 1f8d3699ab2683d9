"""The queue walk's shortcuts for work kept off by reservations change no result (fixed seeds):

* ``Holds.kept_off`` remembers its answer per leaf and per *set of timed reservations that
  start before the workload's protection ends* rather than per min runtime; every answer is
  the one :meth:`~engine.core.reservation.Holds.blocker` gives reservation by reservation,
  also for min runtimes that end exactly at a reservation's start (not protected past it)
  or just after it, and for reservations that start at the same time;
* the walk reuses the short ``reserved-out`` outcome of a workload for a later one that
  differs only in its min runtime and is kept off by the same reservations: the actions and
  every status are those of the walk without that memo, and the actions those of a walk
  that steps every workload;
* a placement skips a cluster with no node that has a pod's GPUs free, and places as
  before.
"""

from __future__ import annotations

import dataclasses
import random

import engine.core.decide as decide_module
from engine.core.placement import Pool, fit
from engine.core.queue import Entry
from engine.core.reservation import Reservation
from engine.core.types import (Admit, Contract, NodeState, Placement, Running, Snapshot,
                               Workload)
from engine.core.walk_memo import WalkMemos

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


def _step_every_workload(self, entries):
    """A walk with no memo of outcomes: every workload takes its step, in queue order."""
    self.memo = WalkMemos()
    self.quick = not self._prey and all(f == 0 for f in self.pool.free.values())
    return [self.step(e) for e in entries]


def _loan_world(rnd: random.Random):
    """A busy world with some GPUs free, loans on, and work kept off by reservations that
    may start on loan or not (resumable or not) and unallocated work."""
    snapshot, config, now = _busy_world(rnd)
    running = tuple(r for r in snapshot.running if rnd.random() < 0.75)
    pending = tuple(Workload(w.id, dataclasses.replace(
        w.contract, resumable=rnd.random() < 0.5,
        budget=w.contract.budget if rnd.random() < 0.9 else None), w.submitted_at)
        for w in snapshot.pending)
    policy = dataclasses.replace(config.policy, loans=True, reservations=rnd.choice([1, 2]))
    return (Snapshot(snapshot.nodes, running, pending, snapshot.usage),
            dataclasses.replace(config, policy=policy), now)


def test_the_short_memo_of_the_walk_changes_no_action_or_status(monkeypatch):
    worlds = [_busy_world(random.Random(seed)) for seed in range(200)]
    worlds += [_loan_world(random.Random(seed)) for seed in range(200)]
    steps = [0]
    stepped = decide_module._Pass.step

    def counted(self, e):
        steps[0] += 1
        return stepped(self, e)

    def counted_no_short(self, e):  # the short memo is never filled
        got = counted(self, e)
        self.cut = None
        return got

    monkeypatch.setattr(decide_module._Pass, "step", counted)
    fast = [decide_module.decide(*w) for w in worlds]
    with_short, steps[0] = steps[0], 0
    monkeypatch.setattr(decide_module._Pass, "step", counted_no_short)
    for world, got in zip(worlds, fast):
        plain = decide_module.decide(*world)
        assert got.actions == plain.actions and got.statuses == plain.statuses
    assert with_short < steps[0] - 500  # the memo spared steps in these worlds
    # and the actions are those of a walk without any memo of outcomes (the words of a
    # status may differ there: an alike workload's step then reads memos its twin filled)
    monkeypatch.setattr(decide_module._Pass, "step", stepped)
    monkeypatch.setattr(decide_module._Pass, "run", _step_every_workload)
    assert [decide_module.decide(*w).actions for w in worlds] == [d.actions for d in fast]


def test_a_short_outcome_is_not_reused_after_a_loan(monkeypatch):
    """A run on loan changes neither the projection nor the reservations (so not which
    reservations keep work off), but it takes free GPUs: a short outcome made before it is
    not reused after it. One hold (on n1, 4 GPUs free) keeps A1's work off n1; x-a fails
    there for its shape, x-b ends its walk in short, y starts on loan on n1, then x-c (alike
    x-b but for its min runtime) sees no GPU free."""
    from engine.model import BudgetNode, BudgetTree, Cluster, Config, Policy

    tree = BudgetTree.build([BudgetNode("root", None, 100), BudgetNode("A1", "root", 50),
                             BudgetNode("B1", "root", 50)])
    nodes = (NodeState("n0", "c", 8, "d0"), NodeState("n1", "c", 8, "d0"))
    now = 10_000.0

    def running(wid: str, node: str, gpus: int) -> Running:
        return Running(Workload(wid, Contract("B1", 8 * 3600.0, gpus_per_pod=gpus), 0.0),
                       Placement(((node, gpus),)), now - 60.0, now - 60.0 + 8 * 3600.0)

    def pending(wid: str, gpus: int, min_runtime: float, resumable: bool, at: float) -> Workload:
        return Workload(wid, Contract("A1", min_runtime, resumable=resumable, gpus_per_pod=gpus), at)

    queue = (pending("p", 8, 3600.0, False, 0.0), pending("x-a", 8, 3600.0, False, 1.0),
             pending("x-b", 8, 7200.0, False, 2.0), pending("y", 4, 3600.0, True, 3.0),
             pending("x-c", 8, 5400.0, False, 4.0))
    snapshot = Snapshot(nodes, (running("r0", "n0", 8), running("r1", "n1", 4)), queue,
                        {"A1": 1e6, "B1": 0.0})
    config = Config(tree, Policy(clusters=(Cluster("c", "gpu", 2, 8, 2),), reservations=1,
                                 reservation_share=1.0, loans=True))
    got = decide_module.decide(snapshot, config, now)
    assert [a.workload_id for a in got.actions if isinstance(a, Admit) and a.loan] == ["y"]
    assert "4 GPUs free" in got.statuses["x-b"].reason
    assert "0 GPUs free" in got.statuses["x-c"].reason or "no GPU free" in got.statuses["x-c"].reason
    monkeypatch.setattr(decide_module._Pass, "run", _step_every_workload)
    assert decide_module.decide(snapshot, config, now).statuses == got.statuses


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
