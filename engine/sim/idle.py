"""Where did the GPUs go: every GPU-second of capacity, busy or idle, with the idle part by cause.

The simulator's state is piecewise constant between instants (event times), so the meter
classifies the state left after each instant (its events applied and its scheduling pass, if
any, run) and charges that classification for the time until the next instant. Buckets, in
GPU-seconds, summing exactly to capacity x horizon:

* ``busy``: GPUs of healthy nodes running work (the numerator of occupancy);
* ``unhealthy``: every GPU of a node between its failure and its repair, busy (draining) or
  not: out of service, outside occupancy's denominator;
* idle GPUs of healthy nodes, by cause:

  - ``no_work``: nothing is pending at all;
  - ``fragmentation``: work is pending but no pending shape fits in the free GPUs as they lie
    (e.g. 3 free GPUs on each of 8 nodes and only 4-GPU jobs queued, or a 64-GPU gang and free
    GPUs scattered over topology domains);
  - ``lag``: pending work would fit, but no scheduling pass has run since the GPUs came free
    (passes on a grid, or a wake-up the shell does not get);
  - ``reserved``: pending work would fit, and the last pass left it pending anyway: for the
    budget scheduler, free GPUs kept for a reservation's holder (work that would still be
    protected when the holder starts may not use them); for the monopoly baseline, GPUs of a
    team's quota that its own work does not fill (no other team may use them). The report
    calls it *held back by the scheduler*.

"Would fit" is a greedy fill of the free GPUs by the pending shapes (largest gangs first,
best-fit node, gangs inside one topology group as placement requires), counting the GPUs
the fill uses: an upper bound of what a pass could start, ignoring queue order. Lag and
reserved split it: the fillable GPUs measured right after the last pass were *held* by the
scheduler (``reserved``); anything fillable beyond that, since, is ``lag``.

Cost: the meter keeps the set of nodes with free GPUs and a count per pending shape
incrementally, so an instant with no idle GPU costs O(1), and otherwise O(idle nodes x
pending shapes). None of the following changes the answer: the fill is recomputed only when
free GPUs or pending counts changed since the last one, and not for a count that room, not
the count, bounded in the last fill and still does (a shape that placed fewer pieces than
were pending, pending at least as many as it placed: it places the same pieces on the same
nodes, so every later shape does too; in a full cluster most submissions are such); the
fill order of the shapes is kept
until a shape appears or disappears; a shape larger than all free GPUs, or whose pods are
larger than any node's free GPUs, is skipped at once (the shapes larger than all free GPUs
found by bisection, as a prefix of the order); the last shape of the fill only counts the pieces that fit (how many
GPUs it takes does not depend on which nodes it takes when no shape comes after it); and
within a fill, each cluster's nodes are listed once and each pod size's groups and their room
are summed once until a shape takes GPUs (gangs of one pod size and many pod counts share them).
"""

from __future__ import annotations

from bisect import bisect_left
from typing import Mapping

Shape = tuple[int, int, str | None]  # (gpus_per_pod, pods, cluster)
BUCKETS = ("busy", "no_work", "fragmentation", "lag", "reserved", "unhealthy")


class IdleMeter:
    """Accumulates :data:`BUCKETS` over time (see the module docstring)."""

    def __init__(self, node_cluster: Mapping[str, str], node_group: Mapping[str, str],
                 node_gpus: Mapping[str, int]):
        self.cluster = dict(node_cluster)
        self.group = dict(node_group)  # node -> placement group (cluster/domain) for gangs
        self.gpus = dict(node_gpus)
        self.capacity = sum(self.gpus.values())
        self.free: dict[str, int] = dict(self.gpus)  # free GPUs of healthy nodes with any free
        self.unhealthy: set[str] = set()
        self.idle = self.capacity  # free GPUs on healthy nodes
        self.out = 0  # GPUs of unhealthy nodes
        self.shapes: dict[Shape, int] = {}
        self.pending = 0
        self.totals = dict.fromkeys(BUCKETS, 0.0)
        self.rates = dict.fromkeys(BUCKETS, 0.0)
        self.rates["no_work"] = float(self.capacity)
        self.held = 0
        self.since = 0.0
        self._order: list[Shape] | None = None  # fill order of the placeable shapes
        self._sizes: list[int] = []  # minus each one's GPUs, in that order (ascending)
        self._version = 0  # bumped by every change of free GPUs or pending counts that may
        # change the fill (add_pending)
        self._filled: tuple[int, int] = (-1, 0)  # (version, fillable()) of the last fill
        # shape -> (pieces it placed, fewer than were pending) in the last fill, for the shapes
        # that placed any (the others placed none although pending: room bounded them)
        self._placed: dict[Shape, tuple[int, bool]] = {}

    # ---------------------------------------------------------------- state changes

    def set_free(self, node: str, free: int) -> None:
        if node in self.unhealthy:
            return
        old = self.free.get(node, 0)
        if free == old:
            return
        self._version += 1
        self.idle += free - old
        if free > 0:
            self.free[node] = free
        else:
            self.free.pop(node, None)

    def set_health(self, node: str, healthy: bool, free: int) -> None:
        if healthy and node in self.unhealthy:
            self.unhealthy.discard(node)
            self.out -= self.gpus[node]
            self.set_free(node, free)
        elif not healthy and node not in self.unhealthy:
            self.set_free(node, 0)
            self.unhealthy.add(node)
            self.out += self.gpus[node]

    def add_pending(self, shape: Shape, n: int = 1) -> None:
        old = self.shapes.get(shape, 0)
        k = old + n
        if k:
            self.shapes[shape] = k
        else:
            del self.shapes[shape]
        if not old or not k:
            self._order = None  # a shape appeared or disappeared
        self.pending += n
        if self._filled[0] == self._version:  # the last fill stands: does it still?
            if shape[0] < 1 or shape[1] < 1:
                return  # never filled
            got = self._placed.get(shape)
            if got is None:
                if old:  # pending at the fill (else its arrival since would have refilled),
                    return  # it placed none: room bounded it, and still does
            elif got[1] and got[0] <= k:
                return  # room, not count, bounded the shape then and still does
        self._version += 1

    # ---------------------------------------------------------------- time

    def advance(self, now: float) -> None:
        """Charge the current classification up to ``now``."""
        dt = now - self.since
        if dt > 0:
            for k, r in self.rates.items():
                if r:
                    self.totals[k] += r * dt
            self.since = now

    def classify(self, after_pass: bool) -> None:
        """Classify the state as it now stands; ``after_pass``: a pass just ran on it."""
        r = self.rates
        r["unhealthy"] = float(self.out)
        r["busy"] = float(self.capacity - self.out - self.idle)
        r["no_work"] = r["fragmentation"] = r["lag"] = r["reserved"] = 0.0
        if self.idle == 0:
            if after_pass:
                self.held = 0
            return
        if not self.pending:
            r["no_work"] = float(self.idle)
            if after_pass:
                self.held = 0
            return
        fillable = self.fillable()
        r["fragmentation"] = float(self.idle - fillable)
        if after_pass:
            self.held = fillable
        held = min(fillable, self.held)
        r["reserved"] = float(held)
        r["lag"] = float(fillable - held)

    def fillable(self) -> int:
        """GPUs a greedy fill of the free GPUs by the pending shapes would use: the shapes
        largest first (then fewer pods, then cluster name), each as many times as pending."""
        if self._filled[0] == self._version:
            return self._filled[1]
        order = self._order
        if order is None:
            order = self._order = sorted((k for k in self.shapes if k[0] >= 1 and k[1] >= 1),
                                         key=lambda k: (-k[0] * k[1], k[1], k[2] or ""))
            self._sizes = [-k[0] * k[1] for k in order]
        used = 0
        self._placed = {}
        if order:  # else only impossible shapes are pending: the next pass rejects them
            used = self._fill(order, self._placed)
        self._filled = (self._version, used)
        return used

    def _fill(self, order: list[Shape], placed_of: dict[Shape, tuple[int, bool]]) -> int:
        """The greedy fill of :meth:`fillable`; ``placed_of`` receives, for each shape that took
        GPUs, the pieces (pods or gangs) it placed and whether they were fewer than pending."""
        free = dict(self.free)
        used = 0
        smallest = order[-1][0] * order[-1][1]
        last = len(order) - 1
        most = max(free.values(), default=0)  # no node has more free GPUs, now or later
        # within one fill the nodes with free GPUs stay the same (their free GPUs only fall):
        # each cluster's are listed once, and each pod size's groups and rooms are kept until
        # a shape takes GPUs (``placed`` counts those)
        by_cluster: dict[str | None, list[str]] = {}
        rooms: dict[tuple[int, str | None], tuple[int, tuple]] = {}
        placed = 0
        # the shapes larger than every free GPU come first (the order is by size): skip them
        for i in range(bisect_left(self._sizes, -self.idle), len(order)):
            shape = order[i]
            gpp, pods, cluster = shape
            if self.idle - used < smallest:
                break
            total = gpp * pods
            if self.idle - used < total or gpp > most:
                continue  # does not fit: uses no GPUs
            count = self.shapes[shape]
            nodes = by_cluster.get(cluster)
            if nodes is None:
                nodes = by_cluster[cluster] = (sorted(free) if cluster is None else  # (by name)
                                               sorted(n for n in free if self.cluster[n] == cluster))
            if pods == 1 and i == last:  # nothing fills after it: count the pieces only
                pieces = min(count, sum(free[n] // total for n in nodes))
                if pieces:
                    placed_of[shape] = (pieces, pieces < count)
                    used += total * pieces
                continue
            if pods == 1 or len(nodes) == 0:
                took = _fill_single(free, nodes, total, count)
            else:
                kept = rooms.get((gpp, cluster))
                if kept is None or kept[0] != placed:
                    kept = rooms[(gpp, cluster)] = (placed, _group_rooms(free, nodes, self.group, gpp))
                took = _fill_gang(free, kept[1], gpp, pods, count, i == last)
            if took:
                used += took
                placed += 1
                placed_of[shape] = (took // total, took < total * count)
        return used

    def reset(self) -> None:
        """Forget the GPU-time accumulated so far (the end of a warm-up)."""
        self.totals = dict.fromkeys(BUCKETS, 0.0)

    def summary(self) -> dict[str, float]:
        return dict(self.totals)


def _fill_single(free: dict[str, int], nodes: list[str], g: int, count: int) -> int:
    """Place up to ``count`` single-node pieces of ``g`` GPUs, best fit (fewest free GPUs
    first, then name: ``nodes`` come in name order and the sort keeps it among equals);
    GPUs used."""
    used = 0
    for n in sorted(nodes, key=free.__getitem__):
        if count == 0:
            break
        f = free[n]
        k = min(count, f // g)
        if k:
            count -= k
            used += k * g
            free[n] = f - k * g
    return used


def _group_rooms(free: Mapping[str, int], nodes: list[str], group: Mapping[str, str],
                 gpp: int) -> tuple[list[str], dict[str, list[str]], dict[str, int]]:
    """The groups of ``nodes`` in name order, with their nodes having ``gpp`` GPUs free and
    each group's *room*: how many pods of ``gpp`` GPUs its free GPUs hold (the sum of
    ``free // gpp``)."""
    groups: dict[str, list[str]] = {}
    rooms: dict[str, int] = {}
    for n in nodes:
        f = free[n]
        if f >= gpp:
            g = group[n]
            if g in groups:
                groups[g].append(n)
                rooms[g] += f // gpp
            else:
                groups[g] = [n]
                rooms[g] = f // gpp
    return sorted(groups), groups, rooms


def _fill_gang(free: dict[str, int], grouped: tuple[list[str], dict[str, list[str]], dict[str, int]],
               gpp: int, pods: int, count: int, count_only: bool = False) -> int:
    """Place up to ``count`` gangs of ``pods`` x ``gpp`` GPUs, each inside one group (groups
    in name order, a gang's pods on the group's nodes with the most free GPUs first), given
    the groups and rooms of :func:`_group_rooms` for the current ``free``.

    A gang takes exactly ``pods`` of a group's room, so a group holds ``room // pods`` gangs
    whichever nodes they land on. ``count_only`` (no fill comes after this one): count the
    gangs, leave ``free`` as it is."""
    keys, groups, rooms = grouped
    used = 0
    for key in keys:
        room = rooms[key]
        if room < pods:
            continue
        if count_only:
            k = min(count, room // pods)
            used += k * pods * gpp
            count -= k
            if count == 0:
                break
            continue
        members = groups[key]
        while count and room >= pods:
            room -= pods
            need = pods
            for n in sorted(members, key=lambda n: (-free[n], n)):
                k = min(need, free[n] // gpp)
                free[n] -= k * gpp
                need -= k
                if need == 0:
                    break
            used += pods * gpp
            count -= 1
        if count == 0:
            break
    return used
