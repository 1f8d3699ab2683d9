"""The preemptible running work of one decision pass (:class:`Victim`), indexed for the search.

:func:`engine.core.preemption.find_victims` looks for the node where making room for a
workload of ``T`` GPUs costs least. Trying every node for every pending workload was most
of the time of a busy decision (hundreds of searches over every node), so this index also
keeps, per (cluster, ``T``), the nodes sorted by a **lower bound** of that cost, and
:func:`cheapest_node` visits nodes cheapest bound first and stops as soon as the next bound
is no better than the best set found (its docstring says why the answer is the one of
trying every node in name order). The index lives for one pass, and the search answers the
same with or without it; only each node's sums are kept across decisions, for the same
victims (:class:`KeptSums`).

Costs compare as in the search: ``((touches allocated work, allocated cost, unallocated
cost, count), 0, node)`` (:func:`~engine.core.victim.set_cost`, then the node name). A
node with ``free`` GPUs needs ``need = T - free`` more; with ``need <= 0`` its cost is
``((0, 0.0, 0.0, 0), 0, node)``. Otherwise the bound looks at *every* victim still on the
node (the preemptor may only take some of them, so the bound holds whichever it may take).
Let ``k`` be the fewest of them whose GPUs on the node reach ``need`` (largest first): any
set that makes room has at least ``k`` victims. Victims are kept in
:attr:`~engine.core.preemption.Victim.order` (unallocated first, then by cost), so with
``nu`` unallocated ones:

* ``nu >= k``: ``(0, 0.0, sum of the k cheapest unallocated costs, k)``: a set of
  unallocated victims only costs at least that, and a set with an allocated one more (it
  touches allocated work);
* ``nu < k`` (no unallocated victim included): ``(1, sum of the k - nu cheapest allocated
  costs, 0.0, k)``: at least ``k - nu`` of the set are allocated.

Sums are taken in victim order from ``0.0``, as the search sums a set, so each bound is a
float no larger than the cost of any set that makes room (adding a non-negative float never
decreases a sum, whatever the rounding). Nodes that cannot make room even with every victim
(free plus held GPUs below ``T``) are left out.

The index is told of every change to a node: a victim gone (:meth:`VictimIndex.remove`) or
its free GPUs changed (:meth:`VictimIndex.changed`); sorted lists catch up lazily, on their
next use, for the nodes changed since.
"""

from __future__ import annotations

from bisect import bisect_left, insort
from itertools import accumulate
from typing import TYPE_CHECKING, Iterable, Sequence

from engine.core.types import Placement
from engine.core.victim import Victim, set_cost

if TYPE_CHECKING:
    from engine.core.placement import Pool

Bound = tuple  # ((allocated cost, unallocated cost, count), 0, node)
SORT_AFTER = 3  # searches of one size in a pass before its nodes are sorted


class VictimIndex:
    """Alive victims per node (in victim order), the GPUs they hold per node, and the nodes
    of a cluster sorted by the lower bound of the cost of making room (module docstring).
    Reads like a mapping node -> victims (``get``)."""

    def __init__(self, victims: Iterable[Victim]):
        """``victims`` in :attr:`~engine.core.preemption.Victim.order`."""
        self.on: dict[str, list[Victim]] = {}
        self.held: dict[str, int] = {}  # GPUs alive victims hold per node
        # alive victims: unallocated ones, and per leaf, non-debug and debug ones
        self.unallocated = 0
        self.plain: dict[str, int] = {}
        self.debug: dict[str, int] = {}
        on, held, plain, debug = self.on, self.held, self.plain, self.debug
        for v in victims:
            for n, g in v.on:
                on.setdefault(n, []).append(v)
                held[n] = held.get(n, 0) + g
            if v.leaf is None:
                self.unallocated += 1
            else:
                alive = debug if v.debug else plain
                alive[v.leaf] = alive.get(v.leaf, 0) + 1
        self._log: list[str] = []  # nodes changed, in order (sorted lists replay it)
        self._sums: dict[str, _NodeSums] = {}  # per node, dropped when its victims change
        self._sorted: dict[tuple[str, int], _Sorted] = {}
        self._searches: dict[tuple, int] = {}  # (clusters, total) -> searches so far
        self._group_held: dict[object, int] = {}  # node group -> GPUs victims hold in it
        # room_below's bound per (cluster, GPUs per pod, kept-off nodes): [log position,
        # [[slots, names] per group], group -> its row] (see _group_slots)
        self._slots: dict[tuple, list] = {}

    def held_in(self, group: object, members: Sequence[str]) -> int:
        """GPUs alive victims hold on the nodes ``members`` of node group ``group`` (kept
        until a victim goes)."""
        found = self._group_held.get(group)
        if found is None:
            held = self.held.get
            found = self._group_held[group] = sum(held(n, 0) for n in members)
        return found

    def get(self, node: str, default: Sequence[Victim] = ()) -> Sequence[Victim]:
        return self.on.get(node, default)

    def remove(self, victim: Victim) -> None:
        """``victim`` was preempted: it leaves every node it ran on."""
        for n, g in victim.on:
            on = self.on[n]
            del on[next(i for i, v in enumerate(on) if v is victim)]  # (no field-wise ==)
            self.held[n] -= g
            self._sums.pop(n, None)
            self._log.append(n)
        self._group_held.clear()
        if victim.leaf is None:
            self.unallocated -= 1
        else:
            alive = self.debug if victim.debug else self.plain
            alive[victim.leaf] -= 1
            if not alive[victim.leaf]:
                del alive[victim.leaf]

    def worth_sorting(self, clusters: tuple[str, ...], total: int) -> bool:
        """Count a search for ``total`` GPUs on one node of ``clusters``: True from the
        :data:`SORT_AFTER`-th on. Sorting a cluster's nodes costs about what a few plain scans
        do, so passes with few searches of a size (most simulator passes) never sort."""
        key = (clusters, total)
        n = self._searches[key] = self._searches.get(key, 0) + 1
        return n >= SORT_AFTER

    def any_eligible(self, ok: frozenset[str], debug_ok: frozenset[str] | None) -> bool:
        """Is some victim left that a preemptor allowed ``ok`` (and ``debug_ok``, see
        :func:`~engine.core.preemption.find_victims`) may take? (Set operations only.)"""
        if self.unallocated or not ok.isdisjoint(self.plain):
            return True
        if debug_ok is None:
            return not ok.isdisjoint(self.debug)
        return not ok.isdisjoint(debug_ok.intersection(self.debug))

    def room_below(self, rank: int, gpus_per_pod: int, pods: int, clusters: Sequence[str],
                   pool: Pool, exclude: frozenset[str]) -> bool:
        """Could the gang find room, on one node or (several pods) inside one node group, of
        ``clusters`` and not in ``exclude``, by taking *every* victim ranked below ``rank``
        (unallocated ones too)? False: :func:`~engine.core.preemption.find_victims` fails
        for it (no debug rule) with any eligible leaves ranked below ``rank``: it places a
        gang only so and takes only eligible victims. True: it may still fail (a group's slots
        are counted, its placement not tried; the search takes only the leaves it is allowed)."""
        total, free, held, on = gpus_per_pod * pods, pool.free, self.held, self.on
        nodes = pool.nodes

        def room(n: str) -> int:  # free GPUs plus those of the victims below ``rank``
            if not held.get(n):
                return free[n]
            return free[n] + sum([v.per_node[n] for v in on[n] if v.rank > rank])

        for c in clusters:
            if pool.max_node.get(c, 0) >= total:
                for n in pool.clusters[c]:
                    if (free[n] + held.get(n, 0) >= total and n not in exclude
                            and nodes[n].gpus >= total and room(n) >= total):
                        return True
            if pods > 1:
                for slots, names in self._group_slots(pool, c, gpus_per_pod, exclude):
                    # (first with every victim, whatever its rank: a bound needing no rank test)
                    if slots >= pods and sum([room(n) // gpus_per_pod for n in names]) >= pods:
                        return True
        return False

    def _group_slots(self, pool: Pool, cluster: str, gpus_per_pod: int, exclude: frozenset[str]
                     ) -> list[list]:
        """Per node group of ``cluster``: ``[pods of gpus_per_pod with every victim taken, its
        nodes not in exclude]``, up to date with the free GPUs and the victims. Made once per
        (cluster, GPUs per pod, kept-off nodes) in a pass; after that only the groups of the
        nodes changed since (this index's log: every change to the pool's free GPUs and to
        the victims, once the index exists, is logged) are summed again."""
        free, held, log = pool.free, self.held, self._log

        def slots(names: list[str]) -> int:
            return sum([(free[n] + held.get(n, 0)) // gpus_per_pod for n in names])

        key = (cluster, gpus_per_pod, exclude)
        found = self._slots.get(key)
        if found is None:
            rows: dict[tuple | None, list] = {}  # group -> its row (.get(None): no such group)
            for group, members in pool.groups[cluster].items():
                names = [n for n in members if n not in exclude]
                rows[group] = [slots(names), names]
            found = self._slots[key] = [len(log), list(rows.values()), rows]
        elif found[0] < len(log):
            rows, group_of = found[2], pool.layout.group_of
            for changed in {group_of.get(n) for n in log[found[0]:]}:
                row = rows.get(changed)
                if row is not None:
                    row[0] = slots(row[1])
            found[0] = len(log)
        return found[1]

    def changed(self, node: str) -> None:
        """``node``'s free GPUs changed."""
        self._log.append(node)

    def bound(self, node: str, need: int) -> Bound | None:
        """The lower bound for ``node`` needing ``need`` more GPUs; None if its victims
        cannot free that many."""
        if need <= 0:
            return ((0, 0.0, 0.0, 0), 0, node)
        if self.held.get(node, 0) < need:
            return None
        sums = self._sums.get(node)
        if sums is None:
            sums = self._sums[node] = _KEPT.sums(node, self.on.get(node, ()))
        return sums.bound(need, node)

    def sorted_bounds(self, pool: Pool, cluster: str, total: int) -> list[Bound]:
        """Bounds of ``cluster``'s nodes for a workload of ``total`` GPUs on one node,
        ascending (nodes smaller than ``total`` or that cannot make room left out)."""
        key = (cluster, total)
        s = self._sorted.get(key)
        if s is None:
            s = self._sorted[key] = _Sorted(self, pool, cluster, total)
        elif s.seen < len(self._log):
            s.catch_up(self, pool)
        return s.bounds


class _NodeSums:
    """What the bounds of one node need: unallocated count, running sums of costs
    (unallocated, allocated) and of the largest GPU counts on the node."""

    __slots__ = ("nu", "unalloc", "alloc", "reach")

    def __init__(self, victims: Sequence[Victim], node: str):
        # running sums from 0.0 in victim order, as the search sums a set
        self.unalloc = list(accumulate([v.cost for v in victims if v.leaf is None], initial=0.0))
        self.alloc = list(accumulate([v.cost for v in victims if v.leaf is not None], initial=0.0))
        self.nu = len(self.unalloc) - 1
        gpus = sorted([v.per_node[node] for v in victims], reverse=True)
        self.reach = list(accumulate(gpus, initial=0))  # GPUs of the j largest victims

    def bound(self, need: int, node: str) -> Bound | None:
        reach = self.reach
        if reach[-1] < need:
            return None
        k = bisect_left(reach, need)  # fewest victims whose GPUs reach ``need``
        nu = self.nu
        if nu >= k:
            return ((0, 0.0, self.unalloc[k], k), 0, node)
        return ((1, self.alloc[k - nu], 0.0, k), 0, node)


class KeptSums:
    """The last :class:`_NodeSums` of each node, with the victims they were made of, across
    decisions: from one pass to the next most nodes hold the same victims (the same records,
    see :mod:`engine.core.victim_cache`), whose sums are then the same. A cache of a pure
    function of the victims: equal victims (same id, running workload, leaf, rank, cost) give
    equal sums, so decisions do not depend on it. Bounded: cleared past ``limit`` nodes."""

    def __init__(self, limit: int = 65536):
        self.limit = limit
        self.kept: dict[str, tuple[tuple[Victim, ...], _NodeSums]] = {}

    def sums(self, node: str, victims: Sequence[Victim]) -> _NodeSums:
        """The sums of ``victims`` (in victim order) on ``node``."""
        mine = tuple(victims)
        hit = self.kept.get(node)
        if hit is not None and hit[0] == mine:
            return hit[1]
        if len(self.kept) >= self.limit:
            self.kept.clear()
        found = _NodeSums(mine, node)
        self.kept[node] = (mine, found)
        return found


_KEPT = KeptSums()


class _Sorted:
    """One (cluster, total): the bounds of its nodes, sorted, as of ``seen`` log entries."""

    __slots__ = ("total", "members", "bounds", "of", "seen")

    def __init__(self, index: VictimIndex, pool: Pool, cluster: str, total: int):
        self.total = total
        self.members = frozenset(n for n in pool.clusters.get(cluster, ())
                                 if pool.nodes[n].gpus >= total)
        self.of: dict[str, Bound | None] = {
            n: index.bound(n, total - pool.free[n]) for n in self.members}
        self.bounds: list[Bound] = sorted(b for b in self.of.values() if b is not None)
        self.seen: int = len(index._log)

    def catch_up(self, index: VictimIndex, pool: Pool) -> None:
        bounds, of, members = self.bounds, self.of, self.members
        for n in set(index._log[self.seen:]):
            if n not in members:
                continue
            old = of[n]
            if old is not None:
                del bounds[bisect_left(bounds, old)]
            new = of[n] = index.bound(n, self.total - pool.free[n])
            if new is not None:
                insort(bounds, new)
        self.seen = len(index._log)


def take_on_node(victims: Iterable[Victim], n: str, need: int, ok: frozenset[str],
                 debug_ok: frozenset[str] | None) -> tuple[list[Victim], int]:
    """Eligible victims on node ``n``, in victim order, until they hold ``need`` GPUs there,
    then those that turn out unnecessary (overshoot) dropped again, most expensive first:
    ``(chosen, GPUs they hold there)``, fewer than ``need`` when the node cannot make room.
    Eligible: unallocated, or a leaf in ``ok`` (a debug victim only if its leaf is also in
    ``debug_ok``, when given)."""
    chosen: list[Victim] = []
    got = 0
    for v in victims:
        if got >= need:
            break
        if v.leaf is None or (v.leaf in ok and (debug_ok is None or not v.debug
                                                or v.leaf in debug_ok)):
            chosen.append(v)
            got += v.per_node[n]
    if got >= need and len(chosen) > 1:  # (one victim is never overshoot)
        for v in reversed(chosen[:]):
            g = v.per_node[n]
            if got - g >= need:
                chosen.remove(v)
                got -= g
    return chosen, got


def cheapest_node(total: int, clusters: Sequence[str], pool: Pool, index: VictimIndex,
                  ok: frozenset[str], exclude: frozenset[str],
                  debug_ok: frozenset[str] | None) -> tuple | None:
    """The answer of :func:`engine.core.preemption._scan_nodes` (the cheapest single node
    for ``total`` GPUs, as ``(score, placement, victims)``), trying nodes by ascending lower
    bound and stopping at the first bound no better than the best node found: the node whose
    set is cheapest (ties by name, so unique). A node's score ``(cost, 0, name)`` is at least
    its bound ``(lower bound, 0, name)``, so no node from that first bound on can beat the
    best: the scan, which computes every node's set, answers the same node and set."""
    best: tuple | None = None  # (score, victims)
    free_of, victims_on = pool.free, index.on.get
    # with no victim it may take, only a node with room already will do (they come first)
    takes = index.any_eligible(ok, debug_ok)
    for c in clusters:
        for bound in index.sorted_bounds(pool, c, total):
            if best is not None and bound >= best[0]:
                break
            n = bound[2]
            if n in exclude:
                continue
            need = total - free_of[n]
            if need > 0 and not takes:
                break
            chosen, got = take_on_node(victims_on(n, ()), n, need, ok, debug_ok)
            if got < need:
                continue
            score = (set_cost(chosen), 0, n)
            if best is None or score < best[0]:
                best = (score, chosen)
    if best is None:
        return None
    score, chosen = best
    return (score, Placement(((score[2], total),)), chosen)
