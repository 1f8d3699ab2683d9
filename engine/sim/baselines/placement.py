"""A small gang placer for the baselines: whole GPUs, all pods or none, best fit.

Free GPUs are counted per node for healthy, uncordoned nodes only. A one-pod task goes to the
node with the fewest free GPUs that still fits it (best fit keeps whole nodes free for gangs;
ties: node name). A multi-pod gang goes, when ``policy.gang_in_one_domain``, inside one
topology domain: the domain that fits it with the least room to spare (ties: domain name),
pods packed onto the nodes with the most free GPUs first. Several pods may share a node.
A task whose contract names a cluster is only placed there.

What depends on the nodes alone (which are schedulable, their GPUs, which are unhealthy) is
computed once per node tuple by :func:`layout_of`: the simulator rebuilds its node tuple only
when a node changes, so a pass costs O(running) to count free GPUs, not O(nodes + running).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable, Mapping

from engine.core.types import Contract, NodeState, Placement, Running, Snapshot
from engine.model import Policy


@dataclass(frozen=True)
class NodeLayout:
    """What the baselines need from the nodes alone: the schedulable (healthy, uncordoned)
    nodes by name with their GPUs (in node order), their total and largest node, the GPUs of
    healthy nodes, and the names of unhealthy nodes."""

    info: Mapping[str, NodeState]
    capacity: Mapping[str, int]
    total: int
    max_node: int
    healthy_gpus: int
    unhealthy: frozenset[str]


_LAYOUTS: dict[int, tuple[tuple[NodeState, ...], NodeLayout]] = {}
_MAX_LAYOUTS = 8


def layout_of(nodes: Iterable[NodeState]) -> NodeLayout:
    """The :class:`NodeLayout` of ``nodes``. A pure function; for a tuple (immutable, as in
    a snapshot) the answer is memoised by identity, holding the tuple so its id stays
    unique, at most ``_MAX_LAYOUTS`` tuples (decisions never depend on the memo)."""
    if isinstance(nodes, tuple):
        hit = _LAYOUTS.get(id(nodes))
        if hit is not None and hit[0] is nodes:
            return hit[1]
    else:
        nodes = tuple(nodes)
    info: dict[str, NodeState] = {}
    capacity: dict[str, int] = {}
    for n in nodes:
        if n.healthy and not n.cordoned:
            info[n.name] = n
            capacity[n.name] = n.gpus
    out = NodeLayout(info, capacity, sum(capacity.values()),
                     max((n.gpus for n in info.values()), default=0),
                     sum(n.gpus for n in nodes if n.healthy),
                     frozenset(n.name for n in nodes if not n.healthy))
    if len(_LAYOUTS) >= _MAX_LAYOUTS:
        _LAYOUTS.clear()
    _LAYOUTS[id(nodes)] = (nodes, out)
    return out


class FreeMap:
    """Free GPUs per schedulable node, with what placement needs to answer quickly."""

    def __init__(self, nodes: Iterable[NodeState], running: Iterable[Running]):
        layout = layout_of(nodes)
        self.info: Mapping[str, NodeState] = layout.info  # shared, never written
        free = self.free = dict(layout.capacity)
        total = layout.total
        for r in running:
            for node, g in r.placement.assignments:
                if node in free:
                    free[node] -= g
                    total -= g
        self.total = total
        self.max_node = layout.max_node

    def copy(self) -> "FreeMap":
        other = FreeMap.__new__(FreeMap)
        other.info, other.free = self.info, dict(self.free)
        other.total, other.max_node = self.total, self.max_node
        return other

    def release(self, running: Running) -> None:
        for node, g in running.placement.assignments:
            if node in self.free:
                self.free[node] += g
                self.total += g

    def take(self, placement: Placement) -> None:
        for node, g in placement.assignments:
            self.free[node] -= g
            self.total -= g

    def place(self, contract: Contract, policy: Policy) -> Placement | None:
        need, gpp, pods = contract.gpus, contract.gpus_per_pod, contract.pods
        if need > self.total or gpp > self.max_node:
            return None
        if pods == 1:
            best, best_free = None, None
            for name, f in self.free.items():
                if f >= gpp and (best_free is None or f < best_free or
                                 (f == best_free and name < best)):
                    if contract.cluster and self.info[name].cluster != contract.cluster:
                        continue
                    best, best_free = name, f
                    if f == gpp:
                        break
            return None if best is None else Placement(((best, gpp),))
        groups: dict[tuple[str, str], list[str]] = {}
        for name, f in self.free.items():
            if f >= gpp:
                n = self.info[name]
                if contract.cluster and n.cluster != contract.cluster:
                    continue
                key = (n.cluster, n.domain if policy.gang_in_one_domain else "")
                groups.setdefault(key, []).append(name)
        best_key, best_room = None, None
        for key in sorted(groups):
            room = sum(self.free[n] // gpp for n in groups[key])
            if room >= pods and (best_room is None or room < best_room):
                best_key, best_room = key, room
        if best_key is None:
            return None
        left = pods
        out: dict[str, int] = {}
        for name in sorted(groups[best_key], key=lambda n: (-self.free[n], n)):
            k = min(left, self.free[name] // gpp)
            if k:
                out[name] = k * gpp
                left -= k
            if not left:
                break
        return Placement(tuple(sorted(out.items())))


def drain_actions(snapshot: Snapshot, evictable: set[str], reason: str) -> tuple[list, set[str]]:
    """Baseline draining: cordon unhealthy nodes, evict ``evictable`` work on them, mark empty
    unhealthy nodes drained. Returns (actions, ids evicted)."""
    from engine.core.types import Cordon, MarkDrained, Preempt

    actions: list = []
    evicted: set[str] = set()
    bad = layout_of(snapshot.nodes).unhealthy
    if not bad:
        return actions, evicted
    busy: dict[str, set[str]] = {n: set() for n in bad}
    for r in snapshot.running:
        for node, _ in r.placement.assignments:
            if node in bad:
                busy[node].add(r.workload.id)
    for n in snapshot.nodes:
        if n.name in bad and not n.cordoned:
            actions.append(Cordon(n.name, "node unhealthy"))
    for node in sorted(bad):
        for wid in sorted(busy[node]):
            if wid in evictable and wid not in evicted:
                evicted.add(wid)
                actions.append(Preempt(wid, None, f"drain {node}: {reason}"))
        if not busy[node] - evicted:
            actions.append(MarkDrained(node, "no workloads left"))
    return actions, evicted
