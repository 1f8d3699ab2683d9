"""Properties of decide() over time (hypothesis): a tiny shell applies each decision, advances
the clock, charges usage, and calls decide() again, as the simulator and the reconciler do.

World: fixed work that never completes and no new submissions, usage that only accrues (no
window slide), one billing weight. In that frozen world the anti-ping-pong rule promises:
once leaf X preempted leaf Y's work with workload W, Y does not preempt X's work until W's
min runtime has ended, that moment included (usage is linear in time, so if X still ranks
above Y at the end of W's min runtime, it does so all along), unless X's side of the tree
(the subtree containing X at the level where X and Y split) started more allocated work
after W: the rule checks each move against the moves made before it, not after. Debug
workloads are exempt on both sides (engine.core.queue rule 2: a debug workload may preempt
unprotected work of any leaf; it is protected 15 min at most and charged to its own budget).
Also, across steps: nothing
is preempted while protected, every preemption has an allocated preemptor, capacity is never
exceeded, actions only name workloads in the right state, and decisions do not depend on the
order of the snapshot's nodes, running and pending work. Half the worlds lend reserved GPUs
(``policy.loans``): the shell starts a loan as unallocated work (``as_run``) and requeues the
funded workload when it is preempted, as both shells do.
"""

from __future__ import annotations

import random

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from engine.core.decide import decide
from engine.core.queue import is_debug
from engine.core.types import (Admit, Contract, NodeState, Preempt, Running, Snapshot, Workload,
                               as_run)
from engine.model import BudgetNode, BudgetTree, Cluster, Config, Policy

TREE = BudgetTree.build([
    BudgetNode("root", None, 100), BudgetNode("A", "root", 60), BudgetNode("B", "root", 40),
    BudgetNode("A1", "A", 70), BudgetNode("A2", "A", 30), BudgetNode("B1", "B", 100),
])
LEAVES = ["A1", "A2", "B1"]


@st.composite
def histories(draw):
    n_nodes = draw(st.integers(1, 4))
    nodes = tuple(NodeState(f"n{i}", "c", 8, f"d{i % 2}") for i in range(n_nodes))
    jobs = []
    for k in range(draw(st.integers(1, 14))):
        budget = draw(st.sampled_from(LEAVES + [None]))
        c = Contract(budget=budget, min_runtime_s=draw(st.sampled_from([0.0, 900.0, 3600.0])),
                     gpus_per_pod=draw(st.sampled_from([1, 2, 4, 8])), pods=draw(st.integers(1, 2)),
                     priority=draw(st.integers(0, 1)), resumable=draw(st.booleans()))
        jobs.append(Workload(f"j{k:02d}", c, float(draw(st.integers(0, 50)))))
    usage = {leaf: float(draw(st.integers(0, 40_000))) for leaf in LEAVES}
    steps = draw(st.lists(st.sampled_from([60.0, 300.0, 900.0, 1800.0]), min_size=3, max_size=14))
    policy = Policy(clusters=(Cluster("c", "gpu", n_nodes, 8, 2),),
                    gang_in_one_domain=draw(st.booleans()), loans=draw(st.booleans()))
    return nodes, jobs, usage, steps, Config(TREE, policy)


@st.composite
def held_histories(draw):
    """Histories where drain holds and loans are the rule: A1 (top-ranked) fills 5 of 8 GPUs of
    every node, B1's whole-node job cannot preempt it and holds a node, B1's and A2's smaller
    work (resumable or not) is kept off it; loans on. A1 accrues usage fast, so B1 may later
    outrank it and take the nodes back: loans are then preempted, requeued and lent again."""
    n_nodes = draw(st.integers(1, 2))
    nodes = tuple(NodeState(f"n{i}", "c", 8, f"d{i % 2}") for i in range(n_nodes))
    jobs = [Workload(f"a{i}", Contract(budget="A1", min_runtime_s=3600.0, gpus_per_pod=5), 0.0)
            for i in range(n_nodes)]
    jobs.append(Workload("big", Contract(budget="B1", min_runtime_s=3600.0, gpus_per_pod=8), 1.0))
    for k in range(draw(st.integers(2, 7))):
        c = Contract(budget=draw(st.sampled_from(["B1", "B1", "A2"])),
                     min_runtime_s=draw(st.sampled_from([1800.0, 3600.0])),
                     gpus_per_pod=draw(st.sampled_from([1, 2, 3])), resumable=draw(st.booleans()))
        jobs.append(Workload(f"s{k}", c, float(2 + k)))
    usage = {"A1": 0.0, "A2": float(draw(st.sampled_from([0, 60_000]))), "B1": 30_000.0}
    steps = draw(st.lists(st.sampled_from([60.0, 900.0, 3600.0]), min_size=3, max_size=10))
    policy = Policy(clusters=(Cluster("c", "gpu", n_nodes, 8, 2),), loans=True)
    return nodes, jobs, usage, steps, Config(TREE, policy)


def replay(nodes, jobs, usage, steps, config, shuffle: random.Random | None = None):
    """Run the shell loop; return the log of (time, decision) and the preemption events."""
    now = 100.0
    usage = dict(usage)
    pending = {w.id: w for w in jobs}
    funded = dict(pending)  # what a preempted loan is queued as again
    running: dict[str, Running] = {}
    cap = {n.name: n.gpus for n in nodes}
    log = []
    events = []  # (time, winner leaf, winner min runtime, victim leaf, preemptor's number, debug)
    starts = []  # (time, leaf, number) of every allocated admission, numbered in action order
    for dt in [0.0, *steps]:
        now += dt
        for r in running.values():  # charge the interval that just ended (no window slide)
            if r.workload.contract.allocated:
                usage[r.workload.contract.budget] += r.placement.gpus * dt
        run_t, pend_t, node_t = list(running.values()), list(pending.values()), list(nodes)
        if shuffle is not None:
            shuffle.shuffle(run_t), shuffle.shuffle(pend_t), shuffle.shuffle(node_t)
        d = decide(Snapshot(tuple(node_t), tuple(run_t), tuple(pend_t), dict(usage)), config, now)
        log.append((now, d.actions))
        serial, order = len(starts), {}  # allocated admissions numbered in action order
        for a in d.actions:
            if isinstance(a, Admit) and pending[a.workload_id].contract.allocated:
                order[a.workload_id] = serial
                serial += 1
            elif isinstance(a, Preempt):
                order[a.workload_id] = serial  # = its preemptor's number (admitted next)
        for a in d.actions:
            if isinstance(a, Preempt):
                r = running.pop(a.workload_id)  # KeyError: preempted something not running
                assert now >= r.protected_until, (a, r)
                w = pending[a.preemptor].contract if a.preemptor in pending else None
                assert w is not None and w.allocated, a
                events.append((now, w.budget, w.min_runtime_s, r.workload.contract.budget
                               if r.workload.contract.allocated else None, order[a.workload_id],
                               is_debug(w, config.policy.debug)))
                pending[a.workload_id] = funded[a.workload_id]
        for a in d.actions:
            if isinstance(a, Admit):
                w = as_run(pending.pop(a.workload_id), a.loan)  # KeyError: admitted something not pending
                c = w.contract
                assert not a.loan or config.policy.loans
                running[w.id] = Running(w, a.placement, now, now + c.min_runtime_s if c.allocated else now)
                if c.allocated:
                    starts.append((now, c.budget, order[w.id]))
        used = {n: 0 for n in cap}
        for r in running.values():
            for n, g in r.placement.assignments:
                used[n] += g
        assert all(used[n] <= cap[n] for n in cap), used
    return log, events, starts


SETTINGS = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])


# ping-pong needs a particular interleaving: many examples (about 10 s) so the check can fail
@settings(max_examples=800, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(histories())
def test_no_ping_pong_and_no_early_preemption_over_time(history):
    _, events, starts = replay(*history)
    for t, winner, m, loser, serial, debug in events:
        if loser is None or debug:
            continue
        pw, pl = TREE.path(winner), TREE.path(loser)
        side = next(a for a, b in zip(pw, pl) if a != b)  # winner's subtree where they split
        back = [e for e in events if e[1] == loser and e[3] == winner and t < e[0] <= t + m
                and not e[5]
                and not any(serial < s < e[4] and side in TREE.path(leaf) for _, leaf, s in starts)]
        assert not back, (f"{winner} preempted {loser} at t={t} (min runtime {m}); "
                          f"{loser} took GPUs back from {winner}: {back}")


@SETTINGS
@given(histories(), st.integers(0, 2**32 - 1))
def test_decisions_do_not_depend_on_input_order(history, seed):
    plain = replay(*history)[0]
    shuffled = replay(*history, shuffle=random.Random(seed))[0]
    assert plain == shuffled


@SETTINGS
@given(held_histories(), st.integers(0, 2**32 - 1))
def test_loans_keep_every_invariant_over_time(history, seed):
    """Loans (about 3 in 10 of these histories lend, 1 in 7 has a loan taken back): replay's checks
    (never preempted while protected, allocated preemptors only, capacity, actions on
    workloads in the right state) hold, and the decisions do not depend on input order."""
    plain = replay(*history)[0]
    assert replay(*history, shuffle=random.Random(seed))[0] == plain
