"""The typed, frozen model of a validated configuration: the budget tree and the policy.

Everything downstream of the loader (the decision core, the simulator, the reconciler, the
reports) sees only these objects, never a raw YAML dict. They are built by
``engine.loader`` after schema and semantic validation, or directly (tests, trace-derived
trees) through :func:`BudgetTree.build`, which runs the same structural checks.

Units: durations are seconds (``float``); shares are percentages of the parent as written by
managers (``share_pct``), and fractions of the whole cluster when "effective".
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property
from types import MappingProxyType
from typing import Iterable, Literal, Mapping

import networkx as nx

PrincipalKind = Literal["namespace", "group", "user"]


@dataclass(frozen=True)
class SourceRef:
    """Where a value was written: file path relative to the config root, 1-based line/column."""

    file: str
    line: int = 0
    column: int = 0

    def __str__(self) -> str:
        return f"{self.file}:{self.line}:{self.column}"


@dataclass(frozen=True)
class Principal:
    """Who may charge a leaf: a Kubernetes namespace, a group, or a user."""

    kind: PrincipalKind
    name: str

    def __str__(self) -> str:
        return f"{self.kind}:{self.name}"


@dataclass(frozen=True)
class BudgetNode:
    """One node of the budget tree.

    ``share_pct`` is the node's percentage of its parent (the root has 100). Non-leaf nodes
    carry ``owners`` (people or groups who review changes to the subtree); leaves carry
    ``principals`` (who may charge the leaf).
    """

    name: str
    parent: str | None
    share_pct: float
    owners: tuple[str, ...] = ()
    principals: tuple[Principal, ...] = ()
    description: str = ""
    source: SourceRef | None = None
    # Percentage of this node's budget deliberately given to no child (written ``unallocated:``
    # in YAML). Children's shares plus this sum to 100; that time is nobody's entitlement.
    unallocated_pct: float = 0.0


class TreeError(ValueError):
    """Raised by :meth:`BudgetTree.build` when nodes do not form one valid tree.

    The loader never lets this escape: it runs the semantic checks first and reports each
    problem with its location. Programmatic builders (tests, trace-derived trees) see it.
    """


@dataclass(frozen=True)
class BudgetTree:
    """The validated budget hierarchy.

    ``graph`` is a frozen ``networkx.DiGraph`` with edges parent -> child and the node objects
    under the ``node`` attribute. Children are always iterated in name order, which makes every
    traversal (and so every decision) deterministic.
    """

    nodes: Mapping[str, BudgetNode]
    root: str
    graph: nx.DiGraph = field(repr=False, compare=False)
    _children: Mapping[str, tuple[str, ...]] = field(repr=False, compare=False)
    _effective: Mapping[str, float] = field(repr=False, compare=False)

    @staticmethod
    def build(nodes: Iterable[BudgetNode]) -> "BudgetTree":
        """Build a tree from nodes; raise :class:`TreeError` on structural problems.

        Checks: unique names, exactly one root, parents exist, no cycles, all nodes reachable,
        sibling shares plus the parent's ``unallocated_pct`` sum to 100 (within 1e-6), shares in
        [0, 100].
        """
        by_name: dict[str, BudgetNode] = {}
        for node in nodes:
            if node.name in by_name:
                raise TreeError(f"duplicate node name {node.name!r}")
            by_name[node.name] = node
        roots = [n.name for n in by_name.values() if n.parent is None]
        if len(roots) != 1:
            raise TreeError(f"expected exactly one root, found {len(roots)}: {sorted(roots)}")
        graph = nx.DiGraph()
        for node in by_name.values():
            graph.add_node(node.name, node=node)
        for node in by_name.values():
            if node.parent is not None:
                if node.parent not in by_name:
                    raise TreeError(f"node {node.name!r} has unknown parent {node.parent!r}")
                graph.add_edge(node.parent, node.name)
        if not nx.is_directed_acyclic_graph(graph):
            cycle = nx.find_cycle(graph)
            raise TreeError(f"cycle in budget tree: {' -> '.join(a for a, _ in cycle)}")
        root = roots[0]
        reachable = nx.descendants(graph, root) | {root}
        if len(reachable) != len(by_name):
            raise TreeError(f"nodes not reachable from root: {sorted(set(by_name) - reachable)}")
        children = {n: tuple(sorted(graph.successors(n))) for n in by_name}
        for parent, kids in children.items():
            if kids:
                total = sum(by_name[k].share_pct for k in kids) + by_name[parent].unallocated_pct
                if abs(total - 100.0) > 1e-6:
                    raise TreeError(f"children of {parent!r} (plus unallocated) sum to {total}%, not 100%")
            for k in kids:
                if not 0.0 <= by_name[k].share_pct <= 100.0:
                    raise TreeError(f"share of {k!r} out of range: {by_name[k].share_pct}")
        effective: dict[str, float] = {root: 1.0}
        for name in nx.topological_sort(graph):
            for k in children[name]:
                effective[k] = effective[name] * by_name[k].share_pct / 100.0
        return BudgetTree(
            nodes=MappingProxyType(dict(sorted(by_name.items()))),
            root=root,
            graph=nx.freeze(graph),
            _children=MappingProxyType(children),
            _effective=MappingProxyType(effective),
        )

    def children(self, name: str) -> tuple[str, ...]:
        """Children of ``name`` in name order (empty for a leaf)."""
        return self._children[name]

    def is_leaf(self, name: str) -> bool:
        return not self._children[name]

    def leaves(self) -> tuple[str, ...]:
        """All leaves, in depth-first name order."""
        return tuple(n for n in self.walk() if self.is_leaf(n))

    def walk(self) -> tuple[str, ...]:
        """All node names, depth-first pre-order, children in name order."""
        return self._walk

    def path(self, name: str) -> tuple[str, ...]:
        """Names from the root down to ``name`` inclusive."""
        path = self._paths.get(name)
        if path is None:
            out = [name]
            while (parent := self.nodes[out[-1]].parent) is not None:
                out.append(parent)
            path = self._paths[name] = tuple(reversed(out))
        return path

    def bottom_up(self) -> tuple[tuple[str, tuple[str, ...]], ...]:
        """``(name, children)`` for every node, children before parents (reversed :meth:`walk`):
        the order in which to roll values up the tree."""
        return self._bottom_up

    def leaves_under(self) -> Mapping[str, tuple[str, ...]]:
        """Each node's leaves, in depth-first name order (a leaf: itself)."""
        return self._leaves_under

    def sibling_shares(self, parent: str) -> tuple[float, ...]:
        """Each child's share normalised among its siblings, in :meth:`children` order:
        ``share_pct / sum(share_pct of the children)`` (0.0 for all when that sum is 0)."""
        return self._sibling_shares[parent]

    def sibling_total(self, parent: str) -> float:
        """The sum of the ``share_pct`` of ``parent``'s children (0.0 for a leaf)."""
        return self._sibling_totals[parent]

    # Derived structures, computed on first use and kept on the (frozen, immutable) tree:
    # ``cached_property`` stores them in the instance dict, outside the dataclass fields, so
    # equality, hashing and repr are unchanged. Shared: callers must not mutate them.

    @cached_property
    def _walk(self) -> tuple[str, ...]:
        out: list[str] = []
        stack = [self.root]
        while stack:
            name = stack.pop()
            out.append(name)
            stack.extend(reversed(self._children[name]))
        return tuple(out)

    @cached_property
    def _paths(self) -> dict[str, tuple[str, ...]]:
        return {}

    @cached_property
    def _bottom_up(self) -> tuple[tuple[str, tuple[str, ...]], ...]:
        return tuple((name, self._children[name]) for name in reversed(self._walk))

    @cached_property
    def _leaves_under(self) -> dict[str, tuple[str, ...]]:
        out: dict[str, tuple[str, ...]] = {}
        for name, kids in self._bottom_up:
            out[name] = tuple(x for k in kids for x in out[k]) if kids else (name,)
        return out

    @cached_property
    def _sibling_totals(self) -> dict[str, float]:
        return {parent: sum(self.nodes[k].share_pct for k in kids)
                for parent, kids in self._children.items()}

    @cached_property
    def _sibling_shares(self) -> dict[str, tuple[float, ...]]:
        out: dict[str, tuple[float, ...]] = {}
        for parent, kids in self._children.items():
            total = self._sibling_totals[parent]
            out[parent] = tuple(self.nodes[k].share_pct / total if total > 0 else 0.0 for k in kids)
        return out

    def depth(self, name: str) -> int:
        return len(self.path(name)) - 1

    def effective_share(self, name: str) -> float:
        """Fraction (0..1) of the whole capacity: product of shares down the path."""
        return self._effective[name]


@dataclass(frozen=True)
class Cluster:
    """A GPU cluster: ``nodes`` x ``gpus_per_node`` GPUs of one type.

    ``nodes_per_domain`` groups consecutive nodes into topology domains (an NVLink or
    InfiniBand block); a multi-node gang is placed inside one domain when the policy asks.
    Node names in the simulator are ``{name}-n{index:04d}``, domains ``{name}-d{index:03d}``.
    """

    name: str
    gpu_type: str
    nodes: int
    gpus_per_node: int
    nodes_per_domain: int
    source: SourceRef | None = None

    @property
    def gpus(self) -> int:
        return self.nodes * self.gpus_per_node

    @property
    def domains(self) -> int:
        return self.nodes // self.nodes_per_domain

    def node_name(self, index: int) -> str:
        """The simulator's name of node ``index`` of this cluster (class docstring)."""
        return f"{self.name}-n{index:04d}"

    def node_names(self) -> list[str]:
        """The simulator's names of all its nodes, in index order."""
        return [self.node_name(i) for i in range(self.nodes)]


@dataclass(frozen=True)
class DebugRule:
    """A workload is a *debug* workload when it asks for at most ``max_gpus`` GPUs in total
    and a min runtime of at most ``max_min_runtime_s``."""

    max_gpus: int = 8
    max_min_runtime_s: float = 900.0


@dataclass(frozen=True)
class DrainPolicy:
    """What happens on unhealthy nodes.

    ``unhealthy_conditions``: node condition types that mark a node unhealthy when True (Ready
    when False is always unhealthy). ``maintenance_taint``/``maintenance_label``: taint key or
    label key that marks a node for maintenance. ``evict_unallocated_immediately``: evict free
    (unallocated) work at once rather than waiting. ``drained_label``: label put on an emptied
    node so repair automation can take it.
    """

    unhealthy_conditions: tuple[str, ...] = ("GPUUnhealthy",)
    maintenance_taint: str = "allot.dev/maintenance"
    maintenance_label: str = "allot.dev/maintenance"
    evict_unallocated_immediately: bool = True
    drained_label: str = "allot.dev/drained"


@dataclass(frozen=True)
class ContractLabels:
    """Names of the labels/annotations that carry a workload's scheduling contract."""

    budget: str = "allot.dev/budget"
    min_runtime: str = "allot.dev/min-runtime"
    resumable: str = "allot.dev/resumable"
    priority: str = "allot.dev/priority"
    gpus_per_pod: str = "allot.dev/gpus-per-pod"
    pods: str = "allot.dev/pods"
    cluster: str = "allot.dev/cluster"


@dataclass(frozen=True)
class NodeLabels:
    """Names of the Kubernetes node labels the reconciler reads."""

    cluster: str = "allot.dev/cluster"
    domain: str = "allot.dev/topology-domain"
    gpu_resource: str = "nvidia.com/gpu"


@dataclass(frozen=True)
class Policy:
    """All scheduling knobs, validated. See ``policies/*.yaml`` for each knob's documentation."""

    clusters: tuple[Cluster, ...]
    lookback_s: float = 7 * 86400.0
    min_runtime_cap_s: float = 8 * 3600.0
    default_min_runtime_s: float = 3600.0
    debug: DebugRule = DebugRule()
    drain: DrainPolicy = DrainPolicy()
    preemption_grace_s: float = 120.0
    scheduling_interval_s: float = 60.0
    billing_weights: Mapping[str, float] = field(default_factory=lambda: MappingProxyType({}))
    gang_in_one_domain: bool = True
    reservations: int = 8  # reservations (timed or drain holds) per decision, in queue order
    reservation_share: float = 0.25  # no further reservation once reserved nodes hold this share
    loans: bool = False  # resumable funded work may run on reserved GPUs as free work
    labels: ContractLabels = ContractLabels()
    node_labels: NodeLabels = NodeLabels()
    source: SourceRef | None = None

    def cluster(self, name: str) -> Cluster:
        for c in self.clusters:
            if c.name == name:
                return c
        raise KeyError(name)

    def billing_weight(self, gpu_type: str) -> float:
        """Charge per GPU-second of ``gpu_type`` (1.0 when the type is not listed)."""
        return float(self.billing_weights.get(gpu_type, 1.0))


@dataclass(frozen=True)
class Config:
    """A validated configuration: the budget tree, the policy, and where it came from."""

    tree: BudgetTree
    policy: Policy
    origin: str = ""  # a directory path or "<repo>@<commit sha>"
    revision: str | None = None  # the commit sha when loaded from git
    files: Mapping[str, str] = field(default_factory=lambda: MappingProxyType({}))  # node -> file
    overrides: tuple[str, ...] = ()  # knobs set on the command line, ``key=value`` (the loader)
