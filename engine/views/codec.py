"""JSON codec for what ``decide()`` needs: a :class:`Config` and a :class:`Snapshot`.

The view state carries the exact inputs of the last decision, so any reader (the CLI talking
to a reconciler over HTTP, the dashboard, a test) can rebuild them and call ``decide()``
itself: decide is pure and deterministic, so the rebuilt decision is the reconciler's, number
for number, and "what if" questions (fewer GPUs, another budget) are answered by deciding
again on a modified copy rather than by guessing.

Round trip: ``config_from_dict(config_to_dict(c))`` gives a config whose tree, clusters and
scheduling knobs equal ``c``'s (source locations are dropped; ``files`` is kept).
``snapshot_from_dict(snapshot_to_dict(s)) == s`` exactly (floats survive JSON; ``inf``
is written as the string ``"inf"``).
"""

from __future__ import annotations

import math
import typing
from dataclasses import asdict, fields, is_dataclass
from types import MappingProxyType, NoneType, UnionType
from typing import Any, Mapping

from engine.core.types import Contract, NodeState, Placement, Running, Snapshot, Workload
from engine.model import (BudgetNode, BudgetTree, Cluster, Config, ContractLabels, DebugRule,
                          DrainPolicy, NodeLabels, Policy, Principal)


def num(x: float | None) -> float | str | None:
    """A float for JSON: ``inf``/``-inf``/``nan`` become strings (JSON has no such numbers)."""
    if x is None:
        return None
    x = float(x)
    if math.isfinite(x):
        return x
    return "nan" if math.isnan(x) else ("inf" if x > 0 else "-inf")


def unnum(x: Any) -> float | None:
    return None if x is None else float(x)


def checked(obj: Any, where: str) -> Any:
    """``obj``, a dataclass decoded from JSON, once each field holds what its type hint says
    (recursively: nested dataclasses, tuples, optional values; an int is a float, a bool is
    not a number); else ``ValueError`` naming the field, e.g. ``snapshot.nodes[0].gpus must be
    an int, got '8'``. A state file edited by hand then reads as a clear problem, not as a
    traceback deep in a view."""
    hints = _hints(type(obj))
    for f in fields(obj):
        _check(getattr(obj, f.name), hints[f.name], f"{where}.{f.name}")
    return obj


_HINTS: dict[type, dict[str, Any]] = {}


def _hints(cls: type) -> dict[str, Any]:
    found = _HINTS.get(cls)
    if found is None:
        found = _HINTS[cls] = typing.get_type_hints(cls)
    return found


def _check(value: Any, hint: Any, where: str) -> None:
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if hint is Any:
        return
    if origin in (typing.Union, UnionType):
        if value is None and NoneType in args:
            return
        problems = []
        for arg in (a for a in args if a is not NoneType):
            try:
                _check(value, arg, where)
                return
            except ValueError as err:
                problems.append(str(err))
        raise ValueError(problems[0])
    if origin is typing.Literal:
        if value not in args:
            raise ValueError(f"{where} must be one of {', '.join(map(repr, args))}, got {value!r}")
        return
    if origin is tuple:
        if not isinstance(value, tuple):
            raise ValueError(f"{where} must be a list, got {value!r}")
        items = args[:1] * len(value) if len(args) == 2 and args[1] is Ellipsis else args
        if len(items) != len(value):
            raise ValueError(f"{where} must have {len(items)} items, got {len(value)}")
        for i, (item, arg) in enumerate(zip(value, items)):
            _check(item, arg, f"{where}[{i}]")
        return
    if origin is not None:  # (a mapping: built by the decoder itself)
        return
    if is_dataclass(hint):
        checked(value, where)
        return
    if hint is float:
        ok = isinstance(value, (int, float)) and not isinstance(value, bool) and not math.isnan(value)
    elif hint is int:
        ok = isinstance(value, int) and not isinstance(value, bool)
    else:
        ok = isinstance(value, hint)
    if not ok:
        raise ValueError(f"{where} must be {'an' if hint is int else 'a'} {hint.__name__}, got {value!r}")


# ---------------------------------------------------------------------------- config


def config_to_dict(config: Config) -> dict[str, Any]:
    tree, pol = config.tree, config.policy
    return {
        "origin": config.origin,
        "revision": config.revision,
        "files": dict(config.files),
        "tree": [{"name": n.name, "parent": n.parent, "share_pct": n.share_pct,
                  "unallocated_pct": n.unallocated_pct, "owners": list(n.owners),
                  "principals": [[p.kind, p.name] for p in n.principals],
                  "description": n.description}
                 for n in (tree.nodes[name] for name in tree.walk())],
        "policy": {
            "clusters": [{"name": c.name, "gpu_type": c.gpu_type, "nodes": c.nodes,
                          "gpus_per_node": c.gpus_per_node, "nodes_per_domain": c.nodes_per_domain}
                         for c in pol.clusters],
            "lookback_s": pol.lookback_s,
            "min_runtime_cap_s": pol.min_runtime_cap_s,
            "default_min_runtime_s": pol.default_min_runtime_s,
            "debug": asdict(pol.debug),
            "drain": {k: (list(v) if isinstance(v, tuple) else v) for k, v in asdict(pol.drain).items()},
            "preemption_grace_s": pol.preemption_grace_s,
            "scheduling_interval_s": pol.scheduling_interval_s,
            "billing_weights": dict(pol.billing_weights),
            "gang_in_one_domain": pol.gang_in_one_domain,
            "reservations": pol.reservations,
            "reservation_share": pol.reservation_share,
            "loans": pol.loans,
            "labels": asdict(pol.labels),
            "node_labels": asdict(pol.node_labels),
        },
    }


def config_from_dict(d: Mapping[str, Any]) -> Config:
    nodes = [BudgetNode(name=n["name"], parent=n["parent"], share_pct=float(n["share_pct"]),
                        owners=tuple(n.get("owners") or ()),
                        principals=tuple(Principal(k, v) for k, v in n.get("principals") or ()),
                        description=n.get("description", ""),
                        unallocated_pct=float(n.get("unallocated_pct", 0.0)))
             for n in d["tree"]]
    p = d["policy"]
    drain = dict(p.get("drain") or {})
    if "unhealthy_conditions" in drain:
        drain["unhealthy_conditions"] = tuple(drain["unhealthy_conditions"])
    policy = Policy(
        clusters=tuple(Cluster(c["name"], c["gpu_type"], int(c["nodes"]), int(c["gpus_per_node"]),
                               int(c["nodes_per_domain"])) for c in p["clusters"]),
        lookback_s=float(p["lookback_s"]),
        min_runtime_cap_s=float(p["min_runtime_cap_s"]),
        default_min_runtime_s=float(p["default_min_runtime_s"]),
        debug=DebugRule(**p.get("debug", {})),
        drain=DrainPolicy(**drain),
        preemption_grace_s=float(p["preemption_grace_s"]),
        scheduling_interval_s=float(p["scheduling_interval_s"]),
        billing_weights=MappingProxyType({k: float(v) for k, v in p.get("billing_weights", {}).items()}),
        gang_in_one_domain=bool(p["gang_in_one_domain"]),
        # (absent from states written before these knobs were carried: their defaults)
        reservations=int(p.get("reservations", Policy.reservations)),
        reservation_share=float(p.get("reservation_share", Policy.reservation_share)),
        loans=bool(p.get("loans", Policy.loans)),
        labels=ContractLabels(**p.get("labels", {})),
        node_labels=NodeLabels(**p.get("node_labels", {})),
    )
    for i, n in enumerate(nodes):
        checked(n, f"config.tree[{i}]")
    checked(policy, "config.policy")
    return Config(tree=BudgetTree.build(nodes), policy=policy, origin=d.get("origin", ""),
                  revision=d.get("revision"), files=MappingProxyType(dict(d.get("files") or {})))


# ---------------------------------------------------------------------------- snapshot


def contract_to_dict(c: Contract) -> dict[str, Any]:
    return asdict(c)


def workload_to_dict(w: Workload) -> dict[str, Any]:
    return {"id": w.id, "contract": contract_to_dict(w.contract), "submitted_at": w.submitted_at,
            "owner": w.owner, "invalid": w.invalid}


def workload_from_dict(d: Mapping[str, Any]) -> Workload:
    return Workload(id=d["id"], contract=Contract(**d["contract"]), submitted_at=float(d["submitted_at"]),
                    owner=d.get("owner", ""), invalid=d.get("invalid"))


def running_to_dict(r: Running) -> dict[str, Any]:
    return {"workload": workload_to_dict(r.workload),
            "placement": [[n, g] for n, g in r.placement.assignments],
            "started_at": r.started_at, "protected_until": num(r.protected_until)}


def running_from_dict(d: Mapping[str, Any]) -> Running:
    return Running(workload=workload_from_dict(d["workload"]),
                   placement=Placement(tuple((str(n), int(g)) for n, g in d["placement"])),
                   started_at=float(d["started_at"]), protected_until=float(d["protected_until"]))


def snapshot_to_dict(s: Snapshot) -> dict[str, Any]:
    return {
        "nodes": [asdict(n) for n in s.nodes],
        "running": [running_to_dict(r) for r in s.running],
        "pending": [workload_to_dict(w) for w in s.pending],
        "usage": {k: float(v) for k, v in s.usage.items()},
    }


def snapshot_from_dict(d: Mapping[str, Any]) -> Snapshot:
    """The snapshot of ``d``, each field checked (:func:`checked`), GPU counts not negative."""
    nodes = tuple(checked(NodeState(**n), f"snapshot.nodes[{i}]") for i, n in enumerate(d["nodes"]))
    running = tuple(checked(running_from_dict(r), f"snapshot.running[{i}]")
                    for i, r in enumerate(d["running"]))
    pending = tuple(checked(workload_from_dict(w), f"snapshot.pending[{i}]")
                    for i, w in enumerate(d["pending"]))
    for i, n in enumerate(nodes):
        if n.gpus < 0 or n.foreign < 0:
            raise ValueError(f"snapshot.nodes[{i}] ({n.name}) has a negative GPU count")
    return Snapshot(nodes=nodes, running=running, pending=pending,
                    usage=MappingProxyType({k: float(v) for k, v in d.get("usage", {}).items()}))
