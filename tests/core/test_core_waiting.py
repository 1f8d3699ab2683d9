"""``Decision.waiting`` says in one word what each waiting workload's status says in full.

For every pending workload of random busy worlds (with and without loans, reservations,
victims past their min runtime) and a hand-built one with a loan: it is in ``waiting``
exactly when its status is pending, and its cause matches the words of its status reason.
"""

from __future__ import annotations

import collections
import random

from engine.core.decide import decide
from engine.core.statuses import WAIT_CAUSES
from engine.core.types import Contract, Workload

from .test_core_victim_caches import _busy_world
from .test_core_walk_shortcuts import _loan_world, _walk_world

# words of the status reason that each cause's workloads show (one of them)
SAYS = {
    "holding": ("; holding ",),
    "reserved": ("enough GPUs become preemptible",),
    "kept-off": ("reserved for", "held for"),
    "no-reservation": ("no reservation:",),
    "pingpong": ("the anti-ping-pong rule forbids preempting it",),
    "free-work": ("unallocated work only runs on idle GPUs", "unallocated (free, never charged"),
    "no-room": ("would not make room", "to preempt", "nothing preemptible"),
}


def test_every_waiting_workload_has_the_cause_its_status_gives():
    seen: collections.Counter[str] = collections.Counter()
    worlds = [(_busy_world if seed % 2 else _walk_world)(random.Random(seed)) for seed in range(60)]
    for world in [*worlds, _loan_world(), _unreservable_world()]:
        d = decide(*world)
        pending = {wid for wid, st in d.statuses.items() if st.state == "pending"}
        assert set(d.waiting) == pending
        for wid, cause in d.waiting.items():
            assert cause in WAIT_CAUSES
            reason = d.statuses[wid].reason
            assert any(words in reason for words in SAYS[cause]), (cause, reason)
            if cause in ("holding", "reserved"):  # the holders' causes are told apart
                other = "reserved" if cause == "holding" else "holding"
                assert not any(words in reason for words in SAYS[other]), (cause, reason)
            seen[cause] += 1
    assert set(seen) == set(WAIT_CAUSES), seen


def _unreservable_world():
    """Two nodes of one domain, both full of protected work. Y (leaf A, ranked first) gets a
    timed reservation on n0, whose work of leaf C (ranked last) it may preempt in 2 h. X (leaf
    B, a 2 x 8 GPU gang, 10 min min runtime) may still use n0 (it would be preemptible by
    then), but no reservation for it can avoid n0: no-reservation. U asks for no allocation."""
    from engine.core.types import NodeState, Placement, Running, Snapshot
    from engine.model import BudgetNode, BudgetTree, Cluster, Config, Policy

    tree = BudgetTree.build([BudgetNode("root", None, 100), BudgetNode("A", "root", 34),
                             BudgetNode("B", "root", 33), BudgetNode("C", "root", 33)])
    nodes = (NodeState("n0", "c", 8, "d0"), NodeState("n1", "c", 8, "d0"))
    now = 50_000.0
    running = [Running(Workload("z", Contract("C", 7200.0, gpus_per_pod=8), 0.0),
                       Placement((("n0", 8),)), now - 60.0, now + 7200.0),
               Running(Workload("w", Contract("A", 7200.0, gpus_per_pod=8), 0.0),
                       Placement((("n1", 8),)), now - 60.0, now + 3 * 3600.0)]
    pending = [Workload("y", Contract("A", 3600.0, gpus_per_pod=8), 1.0),
               Workload("x", Contract("B", 600.0, gpus_per_pod=8, pods=2), 2.0),
               Workload("u", Contract(None, 0.0, gpus_per_pod=1), 3.0)]
    policy = Policy(clusters=(Cluster("c", "gpu", 2, 8, 2),), reservations=2, reservation_share=1.0)
    usage = {"A": 0.0, "B": 500_000.0, "C": 1_000_000.0}
    return Snapshot(nodes, tuple(running), tuple(pending), usage), Config(tree, policy), now
