"""Releases: the running work of one decision pass as GPUs a reservation holder may count on.

A reservation (:mod:`engine.core.reservation`) looks at the running work its holder may
preempt (unallocated, or charged to a leaf in the holder's ``ok`` set) and not preempted in
this decision yet: each such workload *releases* its GPUs at ``max(now, protected_until)``.
:func:`~engine.core.reservation.earliest_start` reads these releases sorted by
``(time, workload id)``; a drain hold reads the GPUs they hold per node and which workloads
run on the held nodes.

A pass may make several reservations (``policy.reservations``) over hundreds of running
workloads, so :class:`Releases` sorts every running workload's release ONCE per pass; the
releases of one holder are those, in the same order, that pass the holder's filter (a
filtered sorted list is the sorted filtered list: the same tuples in the same order). What
is derived from one filter (the list, the releases per node, the GPUs per node, the ids)
is remembered for the pass under ``(ok, number of workloads gone)``: workloads only ever
leave during a pass (``gone`` only grows), so that pair names one list. Earliest single
node starts are remembered as well, per shape, while the pool's free GPUs stay the same
(:attr:`~engine.core.placement.Pool.version`). Nothing is kept across decisions (the
entry of each protected workload, ``((protected_until, id, assignments), id, charged
leaf)``, comes ready-made from :mod:`engine.core.running_facts`).
"""

from __future__ import annotations

import math
from operator import itemgetter
from typing import AbstractSet, Callable, Mapping, Sequence

from engine.core.placement import Pool
from engine.core.types import Running

Release = tuple[float, str, tuple[tuple[str, int], ...]]  # (time, workload id, assignments)
Entry = tuple[Release, str, "str | None"]  # (release, workload id, charged leaf)


class Eligible:
    """The releases one holder may count on (see the module docstring), and what the
    reservation derives from them, each built on first use."""

    __slots__ = ("releases", "_by_node", "_later", "_ids", "_group_later")

    def __init__(self, releases: list[Release]):
        self.releases = releases  # sorted by (time, workload id)
        self._by_node: dict[str, list[Release]] | None = None
        self._later: dict[str, int] | None = None
        self._ids: frozenset[str] | None = None
        self._group_later: dict | None = None

    @property
    def by_node(self) -> dict[str, list[Release]]:
        """The releases on each node, in release order (a release is listed once per
        assignment on the node)."""
        if self._by_node is None:
            by_node: dict[str, list[Release]] = {}
            for rel in self.releases:
                for n, _ in rel[2]:
                    by_node.setdefault(n, []).append(rel)
            self._by_node = by_node
        return self._by_node

    @property
    def later(self) -> dict[str, int]:
        """GPUs the releases free per node."""
        if self._later is None:
            later: dict[str, int] = {}
            for _, _, on in self.releases:
                for n, g in on:
                    later[n] = later.get(n, 0) + g
            self._later = later
        return self._later

    def group_later(self, group_of: Mapping[str, tuple[str, str]]) -> dict[tuple[str, str], int]:
        """GPUs the releases free per placement group (``group_of``: node -> group, one
        layout per pass)."""
        if self._group_later is None:
            out: dict[tuple[str, str], int] = {}
            for n, g in self.later.items():
                key = group_of.get(n)
                if key is not None:
                    out[key] = out.get(key, 0) + g
            self._group_later = out
        return self._group_later

    @property
    def ids(self) -> frozenset[str]:
        if self._ids is None:
            self._ids = frozenset(wid for _, wid, _ in self.releases)
        return self._ids


class Releases:
    """Every running workload of a pass as a release, sorted once (module docstring).
    ``held``: ``(running, charged leaf or None, entry)`` for the running work of the pass,
    where the entry is ``((protected_until, id, assignments), id, charged leaf)``;
    ``gone``: the pass's set of workloads preempted or evicted so far (read, not copied)."""

    def __init__(self, held: Sequence[tuple[Running, str | None, Entry]], gone: AbstractSet[str],
                 now: float):
        self.gone = gone
        # entries sorted by the release alone, as a holder's releases are; work past its
        # protection releases now
        self._all = sorted((e if e[0][0] > now else ((now, e[1], e[0][2]), e[1], e[2])
                            for _, _, e in held), key=itemgetter(0))
        self._held = held
        self._on_node: dict[str, list[str]] | None = None
        self._eligible: dict[tuple[frozenset[str], int], Eligible] = {}
        self._singles: dict[tuple, tuple[int, list[tuple[float, str]]]] = {}

    def eligible(self, ok: frozenset[str]) -> Eligible:
        """The releases of running work not gone that is unallocated or charged to a leaf in
        ``ok``, in ``(time, id)`` order."""
        gone = self.gone
        key = (ok, len(gone))
        found = self._eligible.get(key)
        if found is None:
            found = self._eligible[key] = Eligible(
                [rel for rel, wid, lf in self._all
                 if wid not in gone and (lf is None or lf in ok)])
        return found

    def running_on(self) -> dict[str, list[str]]:
        """Ids of the running work of the pass per node (gone or not)."""
        if self._on_node is None:
            on_node: dict[str, list[str]] = {}
            for _, _, ((_, wid, assignments), _, _) in self._held:
                for n, _ in assignments:
                    on_node.setdefault(n, []).append(wid)
            self._on_node = on_node
        return self._on_node

    def single_node_starts(self, ok: frozenset[str], total: int, clusters: Sequence[str],
                           pool: Pool) -> list[tuple[float, str]]:
        """:func:`single_node_starts` for the releases of ``ok``, remembered while the pool's
        free GPUs and the releases stay the same."""
        key = (ok, len(self.gone), total, tuple(clusters))
        hit = self._singles.get(key)
        if hit is not None and hit[0] == pool.version:
            return hit[1]
        starts = single_node_starts(total, clusters, pool, lambda: self.eligible(ok).by_node)
        self._singles[key] = (pool.version, starts)
        return starts


def single_node_starts(total: int, clusters: Sequence[str], pool: Pool,
                       by_node: Callable[[], Mapping[str, Sequence[Release]]]
                       ) -> list[tuple[float, str]]:
    """``(time, node)`` ascending: for every node of ``clusters`` with at least ``total``
    GPUs, the first time its free GPUs plus the releases on it (``by_node()``, each node's in
    release order; asked only if some node is big enough) reach ``total`` (``-inf``: free
    already); nodes that never get there are left out."""
    starts: list[tuple[float, str]] = []
    on: Mapping[str, Sequence[Release]] | None = None
    for c in clusters:
        if pool.max_node[c] < total:
            continue  # no node of this cluster is big enough
        if on is None:
            on = by_node()
        free_of, node_of = pool.free, pool.nodes
        for n in pool.clusters[c]:
            if node_of[n].gpus >= total:
                when = node_start(free_of[n], total, n, on.get(n, ()))
                if when < math.inf:
                    starts.append((when, n))
    starts.sort()
    return starts


def node_start(free: int, total: int, node: str, releases: Sequence[Release]) -> float:
    """When ``node``, with ``free`` GPUs free now, has ``total`` free if ``releases`` (the
    releases on it, in order) free theirs: ``-inf`` if it has now, ``inf`` if never."""
    if free >= total:
        return -math.inf
    for t, _, on in releases:
        for n, g in on:  # (its GPUs on this node: a release is listed on its own nodes only)
            if n == node:
                free += g
        if free >= total:
            return t
    return math.inf

