"""Placement: where whole GPUs for a workload (a gang of pods) can go, packing to limit fragmentation.

A workload asks for ``pods`` pods of ``gpus_per_pod`` whole GPUs each; a pod never spans
nodes. Rules, in order:

1. **One node if it can**: if some node has ``pods * gpus_per_pod`` free GPUs, the workload
   goes on the *best-fit* node: the one with the fewest free GPUs that still fit (ties by node
   name). Packing small work into already-used nodes keeps whole nodes free for gangs.
   Across clusters (a workload that names none) the same best-fit score picks the cluster.
2. **Otherwise a multi-node gang is placed inside one group**: one topology domain
   (``(cluster, domain)``) when ``policy.gang_in_one_domain``, else one cluster. A group can
   host the gang iff the sum over its nodes of ``free // gpus_per_pod`` (pod slots) reaches
   ``pods``. Among groups that can, the best fit wins: fewest nodes used, then least free
   GPUs left over in the group, then group name. Inside the group nodes with the most slots
   are taken first, and the last part goes to the smallest node that holds it.
3. All or nothing: either every pod gets a place or the workload gets no placement.
4. A workload that could not be placed even on the whole cluster empty and healthy (bigger
   than any node, domain or cluster) is rejected (:mod:`engine.core.verdicts`); with no node
   of its cluster in view yet it waits instead.

``Pool`` holds the free GPUs of schedulable nodes (healthy and not cordoned) during one
decision; it is mutated as the decision admits and preempts work.
"""

from __future__ import annotations

from bisect import insort
from typing import AbstractSet, Iterable, Mapping, Sequence

from engine.core.types import NodeState, Placement

GroupKey = tuple[str, str]  # (cluster, domain) -- domain "" when grouping by cluster


def fit(gpus_per_pod: int, pods: int, free: Mapping[str, int], names: Sequence[str],
        groups: Mapping[GroupKey, Sequence[str]], capacity: Mapping[str, int] | None = None
        ) -> Placement | None:
    """Best placement of the gang on ``names`` (and, for multi-node gangs, inside one of
    ``groups``, restricted to ``names``) given ``free`` GPUs per node, or None."""
    total = gpus_per_pod * pods
    best: tuple[int, str] | None = None
    for n in names:
        f = free[n]
        if f >= total and (best is None or (f, n) < best):
            best = (f, n)
    if best is not None:
        return Placement(((best[1], total),))
    if pods == 1:
        return None
    return fit_groups(gpus_per_pod, pods, free, groups, allowed=set(names))


def fit_groups(gpus_per_pod: int, pods: int, free: Mapping[str, int],
               groups: Mapping[GroupKey, Sequence[str]], allowed: AbstractSet[str] | None = None,
               exclude: AbstractSet[str] = frozenset()) -> Placement | None:
    """:func:`fit`'s placement of a multi-node gang inside one of ``groups``, on the nodes in
    ``allowed`` (None: all) not in ``exclude``: the group with fewest nodes used, then least
    free GPUs left over, then name."""
    found = scored_fit_groups(gpus_per_pod, pods, free, groups, allowed, exclude)
    return None if found is None else found[1]


def scored_fit_groups(gpus_per_pod: int, pods: int, free: Mapping[str, int],
                      groups: Mapping[GroupKey, Sequence[str]],
                      allowed: AbstractSet[str] | None = None,
                      exclude: AbstractSet[str] = frozenset()) -> tuple[tuple, Placement] | None:
    """:func:`fit_groups` with the winner's score ``(nodes used, free GPUs left over in the
    group, group key)``, by which groups of several clusters compare too."""
    total = gpus_per_pod * pods
    choice: tuple[tuple, list[tuple[str, int]]] | None = None
    for key in sorted(groups):
        if allowed is not None:
            slots = [(free[n] // gpus_per_pod, n) for n in groups[key] if n in allowed]
        elif exclude:
            slots = [(free[n] // gpus_per_pod, n) for n in groups[key] if n not in exclude]
        else:
            slots = [(free[n] // gpus_per_pod, n) for n in groups[key]]
        have = sum(s for s, _ in slots)
        if have < pods:
            continue
        chosen = _fill(slots, pods)
        leftover = sum(free[n] for _, n in slots) - total
        score = (len(chosen), leftover, key)
        if choice is None or score < choice[0]:
            choice = (score, chosen)
    if choice is None:
        return None
    return choice[0], Placement(tuple(sorted((n, k * gpus_per_pod) for n, k in choice[1])))


def _fill(slots: list[tuple[int, str]], pods: int) -> list[tuple[str, int]]:
    """Pods per node: largest nodes first, the remainder on the smallest node that holds it
    (``slots`` hold at least ``pods``)."""
    avail = sorted((s for s in slots if s[0] > 0), key=lambda s: (-s[0], s[1]))
    chosen: list[tuple[str, int]] = []
    remaining = pods
    i = 0
    while avail[i][0] < remaining:  # (no node from here on holds the rest: take the largest)
        s, n = avail[i]
        chosen.append((n, s))
        remaining -= s
        i += 1
    # the nodes from i on that hold the rest come first (most slots first, then by name): the
    # smallest of them is the last one's slots, and the first node with those slots by name
    j = i
    while j + 1 < len(avail) and avail[j + 1][0] >= remaining:
        j += 1
    while j > i and avail[j - 1][0] == avail[j][0]:
        j -= 1
    chosen.append((avail[j][1], remaining))
    return chosen


class Layout:
    """The static part of a :class:`Pool`: every node by name, the schedulable ones (healthy
    and not cordoned) with their capacity, and their clusters and placement groups, all in
    node-name order. Built from a ``nodes`` tuple alone; read-only once built (pools share it,
    see :class:`Layouts`)."""

    def __init__(self, nodes: Iterable[NodeState], gang_in_one_domain: bool):
        self.all_nodes: dict[str, NodeState] = {}
        self.nodes: dict[str, NodeState] = {}
        self.capacity: dict[str, int] = {}  # schedulable node -> GPUs
        self.idle: dict[str, int] = {}  # schedulable node -> free GPUs when nothing runs
        self.clusters: dict[str, list[str]] = {}
        self.groups: dict[str, dict[GroupKey, list[str]]] = {}
        self.group_of: dict[str, GroupKey] = {}  # schedulable node -> its placement group
        self.unhealthy = False  # some node to drain (see :mod:`engine.core.drain`)
        for node in sorted(nodes, key=lambda n: n.name):
            self.all_nodes[node.name] = node
            self.unhealthy = self.unhealthy or not node.healthy
            if not node.healthy or node.cordoned:
                continue
            self.nodes[node.name] = node
            self.capacity[node.name] = node.gpus
            self.idle[node.name] = max(0, node.gpus - node.foreign)
            self.clusters.setdefault(node.cluster, []).append(node.name)
            key = (node.cluster, node.domain if gang_in_one_domain else "")
            self.groups.setdefault(node.cluster, {}).setdefault(key, []).append(node.name)
            self.group_of[node.name] = key
        self.max_node = {c: max(self.nodes[n].gpus for n in ns) for c, ns in self.clusters.items()}
        self.total = sum(self.capacity.values())  # GPUs of all schedulable nodes
        self.names: dict[str | None, tuple[str, ...]] = {None: tuple(sorted(self.clusters))}
        self.names.update((c, (c,)) for c in self.clusters)
        self._weights: dict[tuple, dict[str, float]] = {}

    def node_weights(self, weights: Mapping[str, float]) -> dict[str, float]:
        """Billing weight of every node (by its cluster's entry in ``weights``, else 1.0);
        remembered per ``weights`` (read-only)."""
        key = tuple(weights.items())
        found = self._weights.get(key)
        if found is None:
            if len(self._weights) >= 16:
                self._weights.clear()
            found = self._weights[key] = {n: weights.get(s.cluster, 1.0)
                                          for n, s in self.all_nodes.items()}
        return found


class Layouts:
    """:class:`Layout` per ``(nodes, gang_in_one_domain)``, across decisions: a layout depends
    on nothing else and nodes change rarely, so a decision only computes free GPUs. The last
    ``nodes`` tuple is recognised by identity (a shell that reuses its tuple pays nothing), others
    by value. Bounded: cleared past ``limit`` entries. A cache of a pure function: decisions do
    not depend on it."""

    def __init__(self, limit: int = 64):
        self.limit = limit
        self._last: tuple[tuple, bool, Layout] | None = None  # (nodes, gang_in_one_domain, layout)
        self._layouts: dict[tuple, Layout] = {}

    def get(self, nodes: tuple[NodeState, ...], gang_in_one_domain: bool) -> Layout:
        last = self._last
        if last is not None and last[0] is nodes and last[1] == gang_in_one_domain:
            return last[2]
        nodes = tuple(nodes)  # (a tuple stays itself: only an immutable one is remembered)
        key = (nodes, gang_in_one_domain)
        layout = self._layouts.get(key)
        if layout is None:
            if len(self._layouts) >= self.limit:
                self._layouts.clear()
            layout = self._layouts[key] = Layout(nodes, gang_in_one_domain)
        self._last = (nodes, gang_in_one_domain, layout)
        return layout


class Pool:
    """Free GPUs of schedulable nodes during one decision (see the module docstring). The
    static node layout comes from ``layout`` when given (it must be ``Layout(nodes,
    gang_in_one_domain)``, e.g. from :class:`Layouts`); only free GPUs are computed here."""

    def __init__(self, nodes: Iterable[NodeState], used: Mapping[str, int], gang_in_one_domain: bool,
                 layout: Layout | None = None):
        if layout is None:
            layout = Layout(nodes, gang_in_one_domain)
        self.layout = layout
        # shared, read-only: the pool only ever changes ``free`` and ``cluster_free``
        self.nodes, self.all_nodes = layout.nodes, layout.all_nodes
        self.clusters, self.groups, self.max_node = layout.clusters, layout.groups, layout.max_node
        self._names = layout.names
        free = self.free = dict(layout.idle)  # (other tenants' GPUs are never free)
        for n, g in used.items():
            if n in free:
                f = free[n] - g
                free[n] = f if f > 0 else 0
        self.cluster_free = {c: sum(map(free.__getitem__, ns)) for c, ns in self.clusters.items()}
        self.version = 0  # changes whenever free GPUs do (callers key caches on it)
        # free GPUs per placement group and the most free on one node per cluster, each made on
        # first use and then kept up to date by take and give
        self._group_free: dict[GroupKey, int] | None = None
        self._max_free: dict[str, int] = {}  # (a cluster whose node with most free took GPUs: left out)
        # cluster -> free GPUs -> its nodes with that many free (none for 0), by name: best_node
        self._by_free: dict[str, dict[int, list[str]]] = {}

    def cluster_names(self, cluster: str | None) -> tuple[str, ...]:
        """Clusters a workload may use: the one it names, or every cluster (name order)."""
        return self._names.get(cluster, ())

    def free_in(self, clusters: Sequence[str]) -> int:
        if len(clusters) == 1:
            return self.cluster_free[clusters[0]]
        return sum(self.cluster_free[c] for c in clusters)

    def place(self, gpus_per_pod: int, pods: int, cluster: str | None,
              exclude: frozenset[str] = frozenset()) -> Placement | None:
        """Best placement in the current free GPUs (see :func:`fit`), avoiding ``exclude``.
        A cluster is skipped when it has fewer free GPUs than the gang, or no node with a
        pod's GPUs free (every placement puts a pod on some node: :meth:`most_free`)."""
        total = gpus_per_pod * pods
        best: tuple[tuple, Placement] | None = None
        for c in self.cluster_names(cluster):
            if self.cluster_free[c] < total:
                continue
            most = self.most_free(c)
            if most < gpus_per_pod:
                continue
            # :func:`fit` on the cluster's nodes not in ``exclude``: one node first (the best
            # fit, from the nodes kept by free GPUs), else one group; across clusters by the
            # same scores: (1, free GPUs left on the node, node name) for one node, (nodes
            # used, free GPUs left in the group, group key) for a group
            found: tuple[tuple, Placement] | None = None
            if most >= total:
                node = self.best_node(c, total, exclude)
                if node is not None:
                    found = ((1, self.free[node] - total, node), Placement(((node, total),)))
            if found is None and pods > 1:
                found = scored_fit_groups(gpus_per_pod, pods, self.free, self.groups[c],
                                          exclude=exclude)
            if found is not None and (best is None or found[0] < best[0]):
                best = found
        return None if best is None else best[1]

    def most_free(self, cluster: str) -> int:
        """The most free GPUs on one node of ``cluster`` (a walk's failed placements ask it many
        times between two admissions: kept, and dropped only when a node with that many takes
        GPUs)."""
        found = self._max_free.get(cluster)
        if found is None:
            found = self._max_free[cluster] = max(map(self.free.__getitem__, self.clusters[cluster]),
                                                  default=0)
        return found

    def best_node(self, cluster: str, total: int, exclude: AbstractSet[str] = frozenset()
                  ) -> str | None:
        """The node of ``cluster`` not in ``exclude`` with the fewest free GPUs that are at
        least ``total`` (ties by name): :func:`fit`'s one-node placement, from the nodes kept
        by free GPUs (made on first use, then kept up to date by take and give)."""
        by_free = self._by_free.get(cluster)
        if by_free is None:
            by_free = self._by_free[cluster] = {}
            free = self.free
            for n in self.clusters[cluster]:  # (in name order)
                if free[n] > 0:
                    by_free.setdefault(free[n], []).append(n)
        for f in sorted(by_free):
            if f >= total:
                for n in by_free[f]:
                    if n not in exclude:
                        return n
        return None

    def _moved(self, cluster: str, node: str, old: int, new: int) -> None:
        """``node``'s free GPUs went from ``old`` to ``new``: its place in :meth:`best_node`'s lists."""
        by_free = self._by_free.get(cluster)
        if by_free is None:
            return
        if old > 0:
            names = by_free[old]
            names.remove(node)
            if not names:
                del by_free[old]
        if new > 0:
            insort(by_free.setdefault(new, []), node)

    def group_free(self) -> dict[GroupKey, int]:
        """Free GPUs per placement group (read-only for the caller)."""
        if self._group_free is None:
            get = self.free.__getitem__
            self._group_free = {key: sum(map(get, names)) for groups in self.groups.values()
                                for key, names in groups.items()}
        return self._group_free

    def take(self, placement: Placement) -> None:
        self.version += 1
        free, most, groups = self.free, self._max_free, self._group_free
        for n, g in placement.assignments:
            c = self.nodes[n].cluster
            if most.get(c) == free[n]:
                del most[c]
            self._moved(c, n, free[n], free[n] - g)
            free[n] -= g
            self.cluster_free[c] -= g
            if groups is not None:
                groups[self.layout.group_of[n]] -= g

    def give(self, node: str, gpus: int) -> None:
        """Return ``gpus`` on ``node`` to the pool (ignored for nodes that take no work)."""
        if node in self.nodes:
            self.version += 1
            c = self.nodes[node].cluster
            self._moved(c, node, self.free[node], self.free[node] + gpus)
            f = self.free[node] = self.free[node] + gpus
            self.cluster_free[c] += gpus
            if c in self._max_free and f > self._max_free[c]:
                self._max_free[c] = f
            if self._group_free is not None:
                self._group_free[self.layout.group_of[node]] += gpus
