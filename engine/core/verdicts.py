"""Shapes that can never fit: a workload bigger than any node, topology domain or cluster of
its layout even when every node is empty and healthy is rejected rather than left waiting.

:func:`never_fits` gives the verdict (with the words the user reads) from the whole layout;
:class:`ShapeVerdicts` remembers it per node layout and shape across decisions, so a pass
re-fits only shapes it has not seen on this layout. With no node of the workload's cluster in
view yet the verdict is None (wait rather than reject on a partial view).
"""

from __future__ import annotations

from typing import Iterable

from engine.core.explain import shape_text
from engine.core.placement import Pool, fit
from engine.core.queue import Entry
from engine.core.types import Contract, NodeState, Workload


def never_fits(pool: Pool, gang_in_one_domain: bool, c: Contract) -> str | None:
    """Why the workload could not fit even on an empty, healthy cluster (None if it could)."""
    clusters = [c.cluster] if c.cluster else sorted({n.cluster for n in pool.all_nodes.values()})
    if not any(s.cluster in clusters for s in pool.all_nodes.values()):
        return None  # no nodes seen (yet): wait rather than reject on a partial view
    full = {n: s.gpus for n, s in pool.all_nodes.items()}
    for cl in clusters:
        names = [n for n, s in pool.all_nodes.items() if s.cluster == cl]
        groups: dict[tuple[str, str], list[str]] = {}
        for n in names:
            s = pool.all_nodes[n]
            groups.setdefault((cl, s.domain if gang_in_one_domain else ""), []).append(n)
        if fit(c.gpus_per_pod, c.pods, full, names, groups) is not None:
            return None
    scope = "topology domain" if gang_in_one_domain else "cluster"
    return (f"needs {shape_text(c)}, more than any node or {scope} holds even when empty; "
            f"split it or ask for fewer GPUs")


class ShapeVerdicts:
    """:func:`never_fits` remembered per node *layout* (every node's name, cluster, GPUs and
    domain, health aside) and shape, across decisions: the verdict depends on nothing else, and
    a cluster's layout changes rarely, so a decision re-fits only shapes it has not seen on this
    layout. Layouts are interned (the last ``nodes`` tuple is recognised by identity, so a
    shell that reuses its tuple pays nothing per decision). Bounded: cleared past ``limit``
    entries. A cache of a pure function: decisions do not depend on it."""

    def __init__(self, limit: int = 4096):
        self.limit = limit
        self._last: tuple | None = None
        self._last_id = -1
        self._ids: dict[tuple, int] = {}
        self._verdicts: dict[tuple, str | None] = {}

    def layout(self, nodes: tuple[NodeState, ...]) -> int:
        if nodes is self._last:
            return self._last_id
        key = tuple(sorted((n.name, n.cluster, n.gpus, n.domain) for n in nodes))
        lid = self._ids.get(key)
        if lid is None:
            if len(self._ids) >= self.limit:
                self._ids.clear()
                self._verdicts.clear()
            lid = self._ids[key] = len(self._ids)
        self._last, self._last_id = nodes, lid
        return lid

    def verdict(self, nodes: tuple[NodeState, ...], pool: Pool, gang_in_one_domain: bool,
                c: Contract) -> str | None:
        key = (self.layout(nodes), gang_in_one_domain, c.gpus_per_pod, c.pods, c.cluster)
        try:
            return self._verdicts[key]
        except KeyError:
            if len(self._verdicts) >= self.limit:
                self._verdicts.clear()
            v = self._verdicts[key] = never_fits(pool, gang_in_one_domain, c)
            return v

    def split(self, entries: list[Entry], nodes: tuple[NodeState, ...], pool: Pool,
              gang_in_one_domain: bool, shapes: Iterable[tuple] | None = None
              ) -> tuple[list[Entry], list[tuple[Workload, str]]]:
        """``entries`` that may fit some day, and the others with the verdict. Asked once per
        shape and cluster (items 2 to 4 of :attr:`~engine.core.queue.Entry.alike`;
        ``shapes``: those of ``entries``, when the caller knows them); the entries are walked
        one by one only when a shape is new on this layout or some are rejected."""
        if shapes is None:
            shapes = {e.alike[2:5] for e in entries}
        lid, verdicts = self.layout(nodes), self._verdicts
        memo: dict[tuple, str | None] = {}
        for shape in shapes:
            try:
                memo[shape] = verdicts[(lid, gang_in_one_domain, *shape)]
            except KeyError:  # first seen on this layout: asked with one entry's contract
                e = next(e for e in entries if e.alike[2:5] == shape)
                memo[shape] = self.verdict(nodes, pool, gang_in_one_domain, e.workload.contract)
        if all(verdict is None for verdict in memo.values()):
            return entries, []
        kept: list[Entry] = []
        rejects: list[tuple[Workload, str]] = []
        for e in entries:
            verdict = memo[e.alike[2:5]]
            if verdict is None:
                kept.append(e)
            else:
                rejects.append((e.workload, verdict))
        return kept, rejects
