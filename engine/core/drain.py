"""Automatic draining of unhealthy nodes.

For every node with ``healthy == False``:

* ``Cordon`` it unless it is already cordoned: it takes no new work (cordoned healthy nodes
  take no new work either, but are not drained);
* each workload running on it (on any of its nodes, for a multi-node gang) is evicted with
  ``Preempt(preemptor=None)`` as soon as ``now >= protected_until``, i.e. once its min runtime
  is over; a protected workload is never evicted early. Unallocated work has no min runtime
  and is evicted at once when ``policy.drain.evict_unallocated_immediately``; when that is
  false it is left to finish by itself (the node drains when it ends);
* when nothing runs on it any more (in the snapshot: no workload, and no other tenants' pods,
  ``NodeState.foreign``, which Allot does not evict), it is reported ``MarkDrained`` so
  repair automation can take it. Evictions decided now show up as drained at the next
  decision, once the shell has stopped them.
"""

from __future__ import annotations

from typing import Sequence

from engine.core.types import Cordon, MarkDrained, NodeState, Preempt, Running
from engine.durations import format_duration
from engine.model import DrainPolicy


def drain(nodes: Sequence[NodeState], running: Sequence[Running], policy: DrainPolicy, now: float
          ) -> tuple[list[Cordon | MarkDrained], list[Preempt], dict[str, str]]:
    """Node actions, eviction actions, and for workloads kept on unhealthy nodes why/until when."""
    sick = {n.name for n in nodes if not n.healthy}
    node_actions: list[Cordon | MarkDrained] = []
    evictions: list[Preempt] = []
    kept: dict[str, str] = {}
    if not sick:
        return node_actions, evictions, kept
    occupied: set[str] = set()
    # (the few workloads on an unhealthy node, by id: a simulator passes hundreds each pass)
    touching = [r for r in running if not sick.isdisjoint(r.placement.nodes)]
    for r in sorted(touching, key=lambda r: r.workload.id):
        on = sorted(n for n in r.placement.nodes if n in sick)
        occupied.update(on)
        where = f"node{'s' if len(on) > 1 else ''} {', '.join(on)} unhealthy"
        c = r.workload.contract
        if now < r.protected_until:
            left = format_duration(r.protected_until - now)
            kept[r.workload.id] = (f"draining: {where}; evicted when its min runtime ends in {left} "
                                   f"(at t={r.protected_until:.0f})")
        elif not c.allocated and not policy.evict_unallocated_immediately:
            kept[r.workload.id] = f"draining: {where}; unallocated work is left to finish by policy"
        else:
            why = ("unallocated work is evicted at once" if not c.allocated else
                   f"its min runtime ended at t={r.protected_until:.0f}")
            evictions.append(Preempt(r.workload.id, None, f"drain: {where}; {why}",
                                     requeue=True))
    for n in sorted((n for n in nodes if n.name in sick), key=lambda n: n.name):
        if not n.cordoned:
            node_actions.append(Cordon(n.name, "unhealthy: takes no new work; its workloads are "
                                               "evicted as each reaches its min runtime"))
        if n.name not in occupied and not n.foreign:
            node_actions.append(MarkDrained(n.name, "unhealthy and empty: ready for repair"))
    return node_actions, evictions, kept
