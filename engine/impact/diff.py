"""The structural diff of two validated configurations: what a pull request changes, in shares
and in GPUs.

Nodes are matched by name (names are unique across the tree and are what jobs put in their
budget label, so a renamed node is a removal plus an addition). For the tree:

- ``added`` / ``removed``: names present on one side only;
- ``moved``: names on both sides whose parent changed;
- ``leaves``: every leaf (on either side) whose share of its parent or effective share
  changed, including added and removed leaves (the missing side is ``None``), with the
  effective share expressed in GPUs of each cluster of that side's policy. A leaf changes
  effective share when any ancestor's share or ``unallocated`` changed, so a change high in
  the tree lists every leaf under it. Differences below ``EPS`` (1e-9 of the cluster) are
  float noise from the products and are ignored;
- ``inner``: inner nodes whose share of parent or ``unallocated`` percentage changed;
- ``owners`` / ``principals``: who reviews a subtree and who may charge a leaf, before/after.

For the policy, every knob is flattened to a dotted key (``lookback_s``, ``debug.max_gpus``,
``clusters.h100.nodes``, ``billing_weights.h100``...) and the keys whose values differ are
listed; a cluster added or removed shows as its keys going from/to ``None``.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any, Mapping

from engine.model import BudgetTree, Config, Policy

EPS = 1e-9


@dataclass(frozen=True)
class LeafChange:
    """One affected leaf. Shares: ``share_*`` in percent of the parent, ``effective_*`` as a
    fraction of the whole (0..1), ``gpus_*`` as ``{cluster: GPUs}``. ``None``: absent."""

    name: str
    parent_before: str | None
    parent_after: str | None
    share_before: float | None
    share_after: float | None
    effective_before: float | None
    effective_after: float | None
    gpus_before: Mapping[str, float]
    gpus_after: Mapping[str, float]

    @property
    def effective_delta(self) -> float:
        return (self.effective_after or 0.0) - (self.effective_before or 0.0)

    @property
    def status(self) -> str:
        if self.share_before is None:
            return "added"
        if self.share_after is None:
            return "removed"
        if self.parent_before != self.parent_after:
            return "moved"
        return "changed"


@dataclass(frozen=True)
class InnerChange:
    name: str
    share_before: float | None
    share_after: float | None
    unallocated_before: float | None
    unallocated_after: float | None


@dataclass(frozen=True)
class Move:
    name: str
    parent_before: str | None
    parent_after: str | None


@dataclass(frozen=True)
class ListChange:
    """Owners of a node or principals of a leaf, before and after (sorted)."""

    name: str
    before: tuple[str, ...]
    after: tuple[str, ...]


@dataclass(frozen=True)
class KnobChange:
    key: str
    before: Any
    after: Any


@dataclass(frozen=True)
class ConfigDiff:
    added: tuple[str, ...]
    removed: tuple[str, ...]
    moved: tuple[Move, ...]
    leaves: tuple[LeafChange, ...]
    inner: tuple[InnerChange, ...]
    owners: tuple[ListChange, ...]
    principals: tuple[ListChange, ...]
    policy: tuple[KnobChange, ...]

    @property
    def empty(self) -> bool:
        return not (self.added or self.removed or self.moved or self.leaves or self.inner
                    or self.owners or self.principals or self.policy)

    def to_dict(self) -> dict[str, Any]:
        return _jsonable(dataclasses.asdict(self))


def cluster_gpus(policy: Policy, effective: float | None) -> dict[str, float]:
    """An effective share in GPUs of each cluster (empty when the node is absent)."""
    if effective is None:
        return {}
    return {c.name: effective * c.gpus for c in policy.clusters}


def diff_configs(base: Config, head: Config) -> ConfigDiff:
    """Everything that differs between ``base`` and ``head`` (see the module docstring)."""
    bt, ht = base.tree, head.tree
    before, after = set(bt.nodes), set(ht.nodes)
    both = sorted(before & after)
    moved = tuple(Move(n, bt.nodes[n].parent, ht.nodes[n].parent) for n in both
                  if bt.nodes[n].parent != ht.nodes[n].parent)
    leaves = []
    for name in sorted(_leaves(bt) | _leaves(ht)):
        change = _leaf_change(name, base, head)
        if change is not None:
            leaves.append(change)
    leaves.sort(key=lambda c: (-abs(c.effective_delta), c.name))
    inner = []
    for name in both:
        if bt.is_leaf(name) and ht.is_leaf(name):
            continue
        b, h = bt.nodes[name], ht.nodes[name]
        if abs(b.share_pct - h.share_pct) > EPS or abs(b.unallocated_pct - h.unallocated_pct) > EPS:
            inner.append(InnerChange(name, b.share_pct, h.share_pct, b.unallocated_pct,
                                     h.unallocated_pct))
    owners = tuple(ListChange(n, tuple(sorted(bt.nodes[n].owners)), tuple(sorted(ht.nodes[n].owners)))
                   for n in both if sorted(bt.nodes[n].owners) != sorted(ht.nodes[n].owners))
    principals = tuple(
        ListChange(n, _principals(bt, n), _principals(ht, n)) for n in both
        if _principals(bt, n) != _principals(ht, n))
    return ConfigDiff(
        added=tuple(sorted(after - before)), removed=tuple(sorted(before - after)),
        moved=moved, leaves=tuple(leaves), inner=tuple(inner), owners=owners,
        principals=principals, policy=diff_policy(base.policy, head.policy))


def diff_policy(base: Policy, head: Policy) -> tuple[KnobChange, ...]:
    b, h = flatten_policy(base), flatten_policy(head)
    return tuple(KnobChange(k, b.get(k), h.get(k)) for k in sorted(set(b) | set(h))
                 if b.get(k) != h.get(k))


def flatten_policy(policy: Policy) -> dict[str, Any]:
    """Every knob of ``policy`` under a dotted key; ``source`` locations are left out."""
    out: dict[str, Any] = {}
    _flatten(policy, "", out)
    return out


# ------------------------------------------------------------------------------ helpers

def _leaves(tree: BudgetTree) -> set[str]:
    return {n for n in tree.nodes if tree.is_leaf(n)}


def _principals(tree: BudgetTree, name: str) -> tuple[str, ...]:
    return tuple(sorted(str(p) for p in tree.nodes[name].principals))


def _leaf_change(name: str, base: Config, head: Config) -> LeafChange | None:
    def side(cfg: Config) -> tuple[str | None, float | None, float | None]:
        tree = cfg.tree
        if name not in tree.nodes or not tree.is_leaf(name):
            return None, None, None
        return tree.nodes[name].parent, tree.nodes[name].share_pct, tree.effective_share(name)

    pb, sb, eb = side(base)
    ph, sh, eh = side(head)
    if sb is None and sh is None:
        return None
    if sb is not None and sh is not None and pb == ph and abs(sb - sh) <= EPS \
            and abs((eb or 0.0) - (eh or 0.0)) <= EPS:
        return None
    return LeafChange(name, pb, ph, sb, sh, eb, eh, cluster_gpus(base.policy, eb),
                      cluster_gpus(head.policy, eh))


def _flatten(value: Any, prefix: str, out: dict[str, Any]) -> None:
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        for f in dataclasses.fields(value):
            if f.name == "source":
                continue
            _flatten(getattr(value, f.name), f"{prefix}{f.name}.", out)
        return
    key = prefix[:-1]
    if key == "clusters":
        for cluster in value:
            _flatten(cluster, f"clusters.{cluster.name}.", out)
        return
    if isinstance(value, Mapping):
        for k in sorted(value):
            _flatten(value[k], f"{prefix}{k}.", out)
        return
    if isinstance(value, (list, tuple)):
        value = list(value)
    out[key] = value


def _jsonable(value: Any) -> Any:
    if isinstance(value, Mapping):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_jsonable(v) for v in value]
    if isinstance(value, float) and value != value:
        return None
    return value
