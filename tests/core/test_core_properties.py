"""Properties of decide() over random clusters and queues (hypothesis).

For any cluster, running set, queue and usage: capacity is never exceeded, protected work is
never preempted, gangs get all their GPUs or none, the same input gives the same decision,
and every non-drain preemption has a higher-ranked allocated beneficiary admitted in the
same decision, ranked as workloads: a pending debug workload ranks above all running
non-debug work (engine.core.queue rule 2); otherwise, and always against running debug work,
the beneficiary's leaf ranks strictly higher. A drain hold (reservation.py) is held by a
non-debug allocated workload, and allocated work queued behind it that starts on its nodes
ranks below it.
Ledger-level: unallocated work is never charged.
"""

from __future__ import annotations

import re

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from engine.core.decide import decide
from engine.core.fairshare import (outranked_after_charge, rank_leaves, still_ranks_above,
                                   subtree_leaves)
from engine.core.ledger import Ledger, rollup_usage
from engine.core.queue import is_debug
from engine.core.types import (Admit, Contract, NodeState, Placement, Preempt, Running, Snapshot,
                               Workload)
from engine.model import BudgetNode, BudgetTree, Cluster, Config, Policy

TREE = BudgetTree.build([
    BudgetNode("root", None, 100), BudgetNode("A", "root", 60), BudgetNode("B", "root", 40),
    BudgetNode("A1", "A", 70), BudgetNode("A2", "A", 30), BudgetNode("B1", "B", 100),
])
LEAVES = ["A1", "A2", "B1"]
HOLDING = re.compile(r"holding (.+?) for it \(")
LOAN = re.compile(r"on loan \(reserved for ([^)]+)\)")
KEPT_BY = re.compile(r"(?:(?:is|are) held for|are reserved for) (\S+) (?:\(budget|until)")


@st.composite
def worlds(draw):
    n_nodes = draw(st.integers(1, 6))
    # some GPUs held by other tenants' pods (``foreign``): never free to the decision
    nodes = tuple(NodeState(f"n{i}", "c", draw(st.sampled_from([4, 8])), f"d{i % 2}",
                            healthy=draw(st.booleans()) or i % 3 != 0,
                            foreign=draw(st.sampled_from([0, 0, 0, 1, 3]))) for i in range(n_nodes))
    free = {n.name: n.gpus - n.foreign for n in nodes}
    now = 10_000.0
    running = []
    for k in range(draw(st.integers(0, 8))):
        budget = draw(st.sampled_from(LEAVES + [None]))
        mn = draw(st.sampled_from([0.0, 900.0, 3600.0, 8 * 3600.0]))
        gpp = draw(st.sampled_from([1, 2, 4]))
        pods = draw(st.integers(1, 2))
        spots = [n for n in sorted(free) if free[n] >= gpp]
        if len(spots) < pods:
            continue
        chosen = draw(st.permutations(spots))[:pods]
        for n in chosen:
            free[n] -= gpp
        started = now - draw(st.sampled_from([0.0, 600.0, 5000.0, 40000.0]))
        c = Contract(budget=budget, min_runtime_s=mn, gpus_per_pod=gpp, pods=pods,
                     resumable=draw(st.booleans()))
        protected = started + mn if c.allocated else started
        running.append(Running(Workload(f"r{k}", c, started), Placement(tuple(sorted((n, gpp) for n in chosen))),
                               started, protected))
    pending = []
    for k in range(draw(st.integers(0, 10))):
        budget = draw(st.sampled_from(LEAVES + [None]))
        c = Contract(budget=budget, min_runtime_s=draw(st.sampled_from([0.0, 900.0, 3600.0])),
                     gpus_per_pod=draw(st.sampled_from([1, 2, 4, 8])), pods=draw(st.integers(1, 3)),
                     priority=draw(st.integers(0, 2)), resumable=draw(st.booleans()))
        pending.append(Workload(f"p{k}", c, float(draw(st.integers(0, 100)))))
    usage = {leaf: float(draw(st.integers(0, 100_000))) for leaf in LEAVES}
    policy = Policy(clusters=(Cluster("c", "gpu", n_nodes, 8, 2),),
                    gang_in_one_domain=draw(st.booleans()), loans=draw(st.booleans()))
    return Snapshot(nodes, tuple(running), tuple(pending), usage), Config(TREE, policy), now


SETTINGS = settings(max_examples=250, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@st.composite
def held_worlds(draw):
    """Worlds where drain holds (and with ``policy.loans``, loans) are the rule: every node
    partly held by protected work of the top leaf, a whole-node job of a leaf ranked below it
    first in the queue (it holds nodes), then smaller work of every leaf and none."""
    n_nodes = draw(st.integers(2, 4))
    nodes = tuple(NodeState(f"n{i}", "c", 8, f"d{i % 2}") for i in range(n_nodes))
    now = 10_000.0
    running = []
    for i, n in enumerate(nodes):
        g = draw(st.integers(1, 6))
        c = Contract(budget="A1", min_runtime_s=8 * 3600.0, gpus_per_pod=g)
        started = now - draw(st.sampled_from([0.0, 600.0]))
        running.append(Running(Workload(f"r{i}", c, started), Placement(((n.name, g),)),
                               started, started + c.min_runtime_s))
    pending = [Workload("big", Contract(budget="B1", min_runtime_s=3600.0, gpus_per_pod=8), 0.0)]
    for k in range(draw(st.integers(1, 6))):
        c = Contract(budget=draw(st.sampled_from(["B1", "B1", "A2", None])),  # mostly behind big
                     min_runtime_s=draw(st.sampled_from([900.0, 3600.0, 7200.0])),
                     gpus_per_pod=draw(st.sampled_from([1, 2, 4, 6])), resumable=draw(st.booleans()))
        pending.append(Workload(f"p{k}", c, float(1 + k)))
    usage = {"A1": 0.0, "A2": float(draw(st.sampled_from([0, 200_000]))), "B1": 50_000.0}
    policy = Policy(clusters=(Cluster("c", "gpu", n_nodes, 8, 2),), loans=draw(st.booleans()),
                    reservations=draw(st.integers(1, 3)), reservation_share=1.0)
    return Snapshot(nodes, tuple(running), tuple(pending), usage), Config(TREE, policy), now


@SETTINGS
@given(worlds())
def test_decide_properties(world):
    check_decision(world)


@SETTINGS
@given(held_worlds())
def test_decide_properties_with_reservations_and_loans(world):
    check_decision(world)


def check_decision(world) -> None:
    """The invariants every decision keeps (see the comments below)."""
    snap, config, now = world
    d = decide(snap, config, now)
    nodes = {n.name: n for n in snap.nodes}
    running = {r.workload.id: r for r in snap.running}
    pending = {w.id: w for w in snap.pending}
    preempted = {a.workload_id: a for a in d.actions if isinstance(a, Preempt)}
    admits = {a.workload_id: a for a in d.actions if isinstance(a, Admit)}

    # capacity is never exceeded, and new work only lands on healthy, uncordoned nodes
    used = {n: 0 for n in nodes}
    for r in snap.running:
        if r.workload.id not in preempted:
            for n, g in r.placement.assignments:
                used[n] += g
    for a in admits.values():
        for n, g in a.placement.assignments:
            used[n] += g
            assert nodes[n].healthy and not nodes[n].cordoned
    assert all(used[n] + nodes[n].foreign <= nodes[n].gpus for n in nodes), used

    # protected work is never preempted (drain included)
    for wid in preempted:
        assert now >= running[wid].protected_until

    # gangs are all or nothing: an admitted workload gets exactly pods x gpus_per_pod, whole pods
    for wid, a in admits.items():
        c = pending[wid].contract
        assert a.placement.gpus == c.gpus
        assert all(g % c.gpus_per_pod == 0 for _, g in a.placement.assignments)
        if config.policy.gang_in_one_domain and len(a.placement.assignments) > 1:
            assert len({nodes[n].domain for n in a.placement.nodes}) == 1

    # every preemption has a higher-ranked allocated beneficiary admitted now (drain excepted)
    for wid, p in preempted.items():
        if p.preemptor is None:
            assert any(not nodes[n].healthy for n in running[wid].placement.nodes)
            continue
        assert p.preemptor in admits
        winner = pending[p.preemptor].contract
        assert winner.allocated and winner.budget in d.ranks
        victim = running[wid].workload.contract
        if victim.allocated and victim.budget in d.ranks:
            # ranked as workloads: a pending debug workload above all running non-debug work;
            # otherwise (and always against running debug work) by leaf rank
            above = d.ranks[winner.budget].rank < d.ranks[victim.budget].rank
            debug_over_ordinary = (is_debug(winner, config.policy.debug)
                                   and not is_debug(victim, config.policy.debug))
            assert above or debug_over_ordinary

    # a drain hold: only work the holder may preempt (unallocated, or of a leaf ranked below
    # the holder's) starts on the held nodes once the hold is made (work queued before it was
# placed before the hold existed)
    for wid, st_ in d.statuses.items():
        m = HOLDING.search(st_.reason) if st_.state == "pending" else None
        if m is None:
            continue
        held = set(m.group(1).split(", "))
        holder = pending[wid].contract
        assert holder.allocated and not is_debug(holder, config.policy.debug)
        for a in admits.values():
            c = pending[a.workload_id].contract
            later = d.statuses[a.workload_id].queue_position > st_.queue_position
            if (later and held & set(a.placement.nodes) and c.allocated and c.budget in d.ranks
                    and not a.loan):
                assert d.ranks[c.budget].rank > d.ranks[holder.budget].rank, (wid, a)

    # a workload kept off reserved nodes names only reservations made before its turn (by work
    # ahead of it in the queue)
    for wid, st_ in d.statuses.items():
        if st_.state == "pending" and wid in pending:
            for holder in KEPT_BY.findall(st_.reason):
                assert d.statuses[holder].queue_position < st_.queue_position, (wid, holder, st_.reason)

    # a loan: only with policy.loans, of resumable funded non-debug work, unprotected, on GPUs
    # that pending holders' reservations keep
    for wid, a in admits.items():
        if a.loan:
            c = pending[wid].contract
            assert config.policy.loans and c.resumable and c.allocated
            assert not is_debug(c, config.policy.debug)
            assert d.statuses[wid].protected_until == now
            m = LOAN.search(a.reason)
            assert m is not None, a.reason
            holders = m.group(1).split(", ")
            assert all(h in pending and d.statuses[h].state == "pending" for h in holders), a

    # every workload has a status; same input -> same decision
    assert set(d.statuses) == set(running) | set(pending)
    again = decide(snap, config, now)
    assert again.actions == d.actions
    assert dict(again.statuses) == dict(d.statuses)
    assert dict(again.ranks) == dict(d.ranks)


@SETTINGS
@given(st.dictionaries(st.sampled_from(LEAVES), st.floats(0, 1e6), min_size=0, max_size=3),
       st.sampled_from(LEAVES), st.floats(0, 1e6))
def test_fast_pingpong_set_matches_pairwise_rule(usage, winner, extra):
    used = rollup_usage(TREE, usage)
    fast = outranked_after_charge(TREE, used, winner, extra, subtree_leaves(TREE))
    slow = {x for x in LEAVES if still_ranks_above(TREE, used, winner, x, extra)}
    assert fast == slow


@st.composite
def flat_trees(draw):
    """Two to five sibling leaves with small integer shares (ties of share / usage are
    common) and small integer usages; the rest of the root unallocated."""
    n = draw(st.integers(2, 5))
    shares = [draw(st.integers(0, 20)) for _ in range(n)]
    shares[0] = max(shares[0], 1)
    nodes = [BudgetNode("root", None, 100, unallocated_pct=100 - sum(shares))]
    nodes += [BudgetNode(f"l{i}", "root", share) for i, share in enumerate(shares)]
    usage = {f"l{i}": float(draw(st.integers(0, 6))) for i in range(n)}
    return BudgetTree.build(nodes), usage


@SETTINGS
@given(flat_trees())
def test_ranks_and_the_pairwise_rule_order_every_pair_alike(world):
    """Fair Tree's ranking and the anti-ping-pong comparison (charge 0) agree on every pair,
    ties included: one key, one arithmetic."""
    tree, usage = world
    used = rollup_usage(tree, usage)
    ranks = rank_leaves(tree, usage, used)
    for x in ranks:
        for y in ranks:
            if x != y:
                assert still_ranks_above(tree, used, x, y, 0.0) == (ranks[x].rank < ranks[y].rank), (x, y)


@SETTINGS
@given(st.lists(st.tuples(st.sampled_from(LEAVES + [None]), st.floats(0, 5000), st.floats(0, 3000),
                          st.integers(1, 8), st.sampled_from([0.0, 900.0])), max_size=30),
       st.floats(1000, 20000))
def test_unallocated_work_is_never_charged(jobs, now):
    """A shell charges through ``Contract.allocated``: free work adds nothing to any leaf."""
    ledger = Ledger(LEAVES, lookback_s=7200)
    expected = {leaf: 0.0 for leaf in LEAVES}
    for budget, start, length, gpus, mn in jobs:
        c = Contract(budget=budget, min_runtime_s=mn, gpus_per_pod=gpus)
        if c.allocated:
            ledger.charge(c.budget, start, start + length, gpus)
            lo, hi = max(start, now - 7200), min(start + length, now)
            expected[c.budget] += gpus * max(0.0, hi - lo)
    got = ledger.usage(now)
    for leaf in LEAVES:
        assert abs(got[leaf] - expected[leaf]) <= 1e-6 * max(1.0, expected[leaf])
    free_only = [j for j in jobs if not Contract(budget=j[0], min_runtime_s=j[4]).allocated]
    if len(free_only) == len(jobs):
        assert all(v == 0.0 for v in got.values())
