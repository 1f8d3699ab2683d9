"""Build core inputs from compact scenario data (YAML) and render decisions compactly.

Budgets: a nested mapping under an implicit root ``root``; a number is a leaf's share (percent
of its parent), a mapping is an inner node with ``share`` and its children, e.g.
``{A: {share: 50, A1: 70, A2: 30}, B: 50}``. Every leaf gets principal ``namespace:<leaf>``.

Workloads: ``{id, budget, min, gpus, pods, resumable, priority, submitted, cluster, invalid}``;
running ones add ``at: {node: gpus}``, ``started`` and optionally ``protected_until``
(default: started + min for allocated work, started for unallocated work).
Nodes: ``{name, gpus, domain, cluster, healthy, cordoned}`` (cluster ``c``, domain ``d0``).
Actions render as ``admit ID n1:8+n2:8`` / ``preempt ID by P`` / ``preempt ID drain`` /
``reject ID`` / ``cordon N`` / ``drained N``.
"""

from __future__ import annotations

from typing import Any, Mapping

from engine.core.types import (Admit, Contract, Cordon, MarkDrained, NodeState, Placement, Preempt,
                               Reject, Running, Snapshot, Workload)
from engine.durations import parse_duration
from engine.model import BudgetNode, BudgetTree, Cluster, Config, Policy, Principal


def build_tree(spec: Mapping[str, Any]) -> BudgetTree:
    nodes = [BudgetNode("root", None, 100.0)]

    def add(parent: str, children: Mapping[str, Any]) -> None:
        for name, value in children.items():
            if isinstance(value, Mapping):
                nodes.append(BudgetNode(name, parent, float(value["share"])))
                add(name, {k: v for k, v in value.items() if k != "share"})
            else:
                nodes.append(BudgetNode(name, parent, float(value),
                                        principals=(Principal("namespace", name),)))

    add("root", spec)
    return BudgetTree.build(nodes)


def _seconds(value: Any) -> float:
    if value is None:
        return 3600.0
    if isinstance(value, (int, float)):
        return float(value)
    return parse_duration(str(value))


def build_workload(spec: Mapping[str, Any]) -> Workload:
    c = Contract(budget=spec.get("budget"), min_runtime_s=_seconds(spec.get("min")),
                 resumable=bool(spec.get("resumable", True)), priority=int(spec.get("priority", 0)),
                 gpus_per_pod=int(spec.get("gpus", 1)), pods=int(spec.get("pods", 1)),
                 cluster=spec.get("cluster"))
    return Workload(id=str(spec["id"]), contract=c, submitted_at=float(spec.get("submitted", 0)),
                    invalid=spec.get("invalid"))


def build_running(spec: Mapping[str, Any]) -> Running:
    w = build_workload(spec)
    started = float(spec.get("started", 0))
    default = started + w.contract.min_runtime_s if w.contract.allocated else started
    placement = Placement(tuple(sorted((str(n), int(g)) for n, g in spec["at"].items())))
    return Running(w, placement, started, float(spec.get("protected_until", default)))


def build_nodes(spec: list) -> tuple[NodeState, ...]:
    return tuple(NodeState(name=n["name"], cluster=n.get("cluster", "c"), gpus=int(n.get("gpus", 8)),
                           domain=n.get("domain", "d0"), healthy=bool(n.get("healthy", True)),
                           cordoned=bool(n.get("cordoned", False)),
                           foreign=int(n.get("foreign", 0))) for n in spec)


def build_config(data: Mapping[str, Any], nodes: tuple[NodeState, ...]) -> Config:
    tree = build_tree(data["budgets"])
    pol = dict(data.get("policy") or {})
    clusters = []
    for name in sorted({n.cluster for n in nodes}):
        mine = [n for n in nodes if n.cluster == name]
        gtype = (pol.get("gpu_types") or {}).get(name, "gpu")
        clusters.append(Cluster(name, gtype, len(mine), max(n.gpus for n in mine), len(mine)))
    kwargs: dict[str, Any] = {}
    for key in ("min_runtime_cap", "default_min_runtime", "lookback", "preemption_grace"):
        if key in pol:
            kwargs[f"{key}_s"] = _seconds(pol[key])
    if "gang_in_one_domain" in pol:
        kwargs["gang_in_one_domain"] = bool(pol["gang_in_one_domain"])
    if "reservations" in pol:
        kwargs["reservations"] = int(pol["reservations"])
    if "reservation_share" in pol:
        kwargs["reservation_share"] = float(pol["reservation_share"])
    if "loans" in pol:
        kwargs["loans"] = bool(pol["loans"])
    if "billing_weights" in pol:
        kwargs["billing_weights"] = dict(pol["billing_weights"])
    policy = Policy(clusters=tuple(clusters), **kwargs)
    if "evict_unallocated_immediately" in pol:
        from engine.model import DrainPolicy
        policy = Policy(clusters=tuple(clusters), drain=DrainPolicy(
            evict_unallocated_immediately=bool(pol["evict_unallocated_immediately"])), **kwargs)
    return Config(tree=tree, policy=policy)


def build_scenario(data: Mapping[str, Any]) -> tuple[Snapshot, Config, float]:
    nodes = build_nodes(data["nodes"])
    config = build_config(data, nodes)
    usage = {k: float(v) for k, v in (data.get("usage") or {}).items()}
    snap = Snapshot(nodes=nodes, running=tuple(build_running(r) for r in data.get("running") or ()),
                    pending=tuple(build_workload(w) for w in data.get("pending") or ()), usage=usage)
    return snap, config, float(data.get("now", 0))


def render(action: Any) -> str:
    if isinstance(action, Admit):
        return f"{'loan' if action.loan else 'admit'} {action.workload_id} " + "+".join(f"{n}:{g}" for n, g in action.placement.assignments)
    if isinstance(action, Preempt):
        return f"preempt {action.workload_id} " + (f"by {action.preemptor}" if action.preemptor else "drain")
    if isinstance(action, Reject):
        return f"reject {action.workload_id}"
    if isinstance(action, Cordon):
        return f"cordon {action.node}"
    if isinstance(action, MarkDrained):
        return f"drained {action.node}"
    raise TypeError(action)
