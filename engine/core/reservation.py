"""Reservation and backfill: a large gang at the head of the queue must not starve.

Without a reservation, a 64-GPU gang that cannot be placed now would wait forever while small
jobs keep taking every GPU that frees up. So ALLOCATED non-debug workloads that can be placed
neither on free GPUs nor by preemption get reservations, in queue order (best-ranked first),
up to ``policy.reservations`` per decision, each on nodes no earlier reservation holds:

* Earliest start ``T``: running work that the holder could preempt (same victim rules as
  :mod:`engine.core.preemption`: unallocated, or lower-ranked allocated work passing the
  anti-ping-pong rule) becomes available to it at ``max(now, protected_until)``; higher-ranked
  work never (its end is unknown). Adding these GPUs in time order to the free ones, ``T`` is
  the first moment the gang has a valid placement (on one node, or a multi-pod gang inside
  one topology group; one node on a tie), and the reserved nodes are that placement's nodes.
  No finite ``T`` -> a drain hold instead (below); when no schedulable node or group could
  hold the shape even empty, neither, and the next allocated workload that cannot start tries.
* Backfill: work behind the holder may still start anywhere else, and on the reserved nodes
  only if it will be preemptible by the holder at ``T``: unallocated work, or allocated work
  whose min runtime ends by ``T`` (``now + min_runtime <= T``) and which the holder could
  preempt then (lower-ranked leaf, anti-ping-pong rule). The same applies to preemptions by
  later workloads: they may not land on reserved nodes unless they qualify.

**Drain hold** (when there is no finite ``T``): the blocked workload still gets the
reservation, as a *hold* (:func:`hold_nodes`) -- the classic drain-a-node-for-the-big-job
reservation. Typical holder: an 8-GPU job or a gang of an over-used team, which may preempt
nothing (all running work ranks higher or is its own), while single GPUs free up scattered
across nodes and small work backfills them, so no node ever empties (fragmentation).

* Where: the node (one node if the shape fits one node) or the set of nodes inside one
  placement group (multi-node gang) that is *short* the fewest GPUs: per chosen node, the
  GPUs its pods need minus its free GPUs and the GPUs of running work the holder may preempt
  (same rules as above, protected or not). A group's nodes are taken greedily, most such GPUs
  first (ties by name), each hosting as many pods as it can until the gang is covered. Ties:
  fewer GPUs short, then fewer nodes, then more GPUs free now (small work placed by best fit
  avoids the nodes with most free GPUs, so they drain best; with ``policy.loans`` GPUs of
  unallocated work count as free here, else the loans a hold attracts would move it to other
  nodes at the next pass: on the Helios gang window that cost 5 of 20 gang starts), then
  name. Only schedulable nodes count; if none can ever hold the shape there is no hold and
  the next workload tries.
* Hold: until the holder fits, only *unallocated* work may start on the held nodes (the
  holder preempts it at any time). Funded work may not, even of a lower-ranked leaf: it would
  start with a fresh min-runtime protection and push the holder's start back by up to the cap
  each time; before this rule a stream of 1-GPU jobs of the lowest-ranked team, each
  protected an hour, kept held nodes from ever emptying (on the default experiment, at 4
  reservations per decision, the rule raised entitled GPU-hours delivered from 82% to 86%
  and occupancy from 98.5% to 99.0%: held nodes fill sooner with their holders). Everything else goes elsewhere or waits,
  so as running work on the held nodes ends, free GPUs accumulate there until the holder
  fits. With ``policy.loans``, resumable funded work kept off only by reservations may use
  those GPUs meanwhile *on loan*, as unallocated work for that run (:mod:`engine.core.decide`,
  step d): the holder's start is not pushed back, since it preempts unallocated work at once. Debug workloads queue ahead of every holder and are placed before the holds are
  made, so a hold never delays them.
* Fair: holders are the best-ranked blocked non-debug allocated workloads (queue order).

Bound: ``policy.reservations`` reservations (timed or holds) per decision (0: none), on
disjoint nodes, and none after the reserved nodes hold ``policy.reservation_share`` of the
schedulable GPUs (the first is always made: a 64-GPU gang still drains its domain, but
eight of them cannot hold half the cluster, where only unallocated work could run), recomputed from scratch at every decision, so they move with the ranks (EASY
backfilling generalised to a reservation depth, like SLURM's backfill reserving for several
queued jobs). A workload kept off earlier reservations' nodes may get the next one elsewhere:
several whole-node jobs drain several nodes at once rather than one after another. Occupancy
cost of a hold: GPUs free on the held nodes that no work the holder could preempt takes stay
idle until the holder fits -- fewer than the holder's GPUs, on the nodes of one placement
(one node for a job that fits a node); unallocated work may use them meanwhile. A larger
depth starts large work sooner and idles more GPUs (measure it with ``allot simulate``). When
a holder changes (ranks move), the drain effort on its old nodes is lost (their free GPUs go
to others).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Mapping, Sequence

from engine.core.placement import Pool, fit
from engine.core.releases import Eligible, Release, Releases, single_node_starts
from engine.core.types import Placement


@dataclass(frozen=True)
class Reservation:
    holder: str
    leaf: str
    rank: int
    until: float  # the holder's earliest start; inf for a drain hold
    placement: Placement
    hold: bool = False  # a drain hold (no finite earliest start), see the module docstring
    # the holder's (GPU-seconds its protected run will charge, min runtime): for the backfill rule
    charge: tuple[float, float] = (0.0, 0.0)
    # a drain hold's numbers when it was made: (free, capacity, GPUs of work the holder may
    # preempt, GPUs of work it may not, ids of that work, GPUs of other tenants' pods, GPUs
    # short) on the held nodes
    numbers: tuple = ()
    nodes: frozenset[str] = field(init=False, compare=False, repr=False)  # the placement's nodes

    def __post_init__(self) -> None:
        object.__setattr__(self, "nodes", frozenset(self.placement.nodes))


def earliest_start(gpus_per_pod: int, pods: int, clusters: Sequence[str], pool: Pool,
                   releases: Sequence[Release], avoid: frozenset[str] = frozenset()
                   ) -> tuple[float, Placement] | None:
    """First time the gang can be placed if ``releases`` (sorted by time, id) free their GPUs,
    and the placement then, on nodes not in ``avoid``; None when never."""
    mine = Eligible(list(releases))
    singles = single_node_starts(gpus_per_pod * pods, clusters, pool, lambda: mine.by_node)
    return start_of(gpus_per_pod, pods, clusters, pool, mine, avoid, singles)


def start_of(gpus_per_pod: int, pods: int, clusters: Sequence[str], pool: Pool, mine: Eligible,
             avoid: frozenset[str], singles: Sequence[tuple[float, str]]
             ) -> tuple[float, Placement] | None:
    """:func:`earliest_start` for the releases ``mine``, given their one-node starts
    ``singles`` (:func:`~engine.core.releases.single_node_starts`)."""
    total = gpus_per_pod * pods
    # 1. one node: per big enough node, add the releases on it in time order until it fits;
    # the earliest (time, node) not avoided wins
    best = next((s for s in singles if s[1] not in avoid), None)
    single = None if best is None else (best[0], Placement(((best[1], total),)))
    if pods == 1:
        return single
    # 2. one group, unless one node is ready no later (the first moment wins; a tie goes to
    # the one node, as placement prefers it)
    group = _group_start(gpus_per_pod, pods, clusters, pool, mine, avoid)
    if single is not None and (group is None or single[0] <= group[0]):
        return single
    return group


def _group_start(gpus_per_pod: int, pods: int, clusters: Sequence[str], pool: Pool,
                 mine: Eligible, avoid: frozenset[str]) -> tuple[float, Placement] | None:
    """The earliest time and placement of a multi-pod gang inside one group (see below)."""
    # one group: every group's pod slots grow in ONE walk over the releases in time order
    # (a release adds its GPUs on each node of a group; a group stops growing once it has the
    # slots, at that release's time). The earliest (time, group key) to have the slots wins:
    # a group whose free GPUs give ``pods`` slots always has a placement (:func:`fit` fills
    # the slots), so the walk stops once the releases of the first time any group gets there
    # are counted (others may get there at that same time: the key breaks the tie), and no
    # walk is needed when some group has the slots already.
    # A group that does not have the slots even after every release (free plus ``later`` GPUs
    # per node) never stops growing: it is left out of the walk (no walk if none is left).
    # A group's free plus later GPUs over ``gpus_per_pod`` bound its slots (a sum of floors
    # is at most the floor of the sum, and avoided nodes only take slots away).
    free_of, later = pool.free, mine.later
    group_free, group_later = pool.group_free(), mine.group_later(pool.layout.group_of)
    groups: list[tuple[tuple[str, str], list[str]]] = []
    group_of: dict[str, int] = {}
    slots: list[int] = []
    for c in clusters:
        for key, members in pool.groups[c].items():
            if (group_free[key] + group_later.get(key, 0)) // gpus_per_pod < pods:
                continue
            names = [n for n in members if n not in avoid] if avoid else members
            have = ever = 0
            for n in names:
                f = free_of[n]
                have += f // gpus_per_pod
                ever += (f + later.get(n, 0)) // gpus_per_pod
            if ever < pods:
                continue
            for n in names:
                group_of[n] = len(groups)
            groups.append((key, names))
            slots.append(have)
    if not groups:
        return None
    free = dict(free_of)  # grows with the releases; only nodes in ``group_of`` are read
    ready = [i for i, s in enumerate(slots) if s >= pods]  # the groups with the slots
    when = -math.inf
    if not ready:
        stopped = [False] * len(groups)  # has the slots (it grows no more after that release)
        for t, _, on in mine.releases:
            if ready and t != when:
                break  # (every release of the first time with a winner is counted)
            for n, g in on:
                i = group_of.get(n)
                if i is None or stopped[i]:
                    continue
                f = free[n]
                slots[i] += (f + g) // gpus_per_pod - f // gpus_per_pod
                free[n] = f + g
                if slots[i] >= pods and i not in ready:
                    ready.append(i)
                    when = t
            for i in ready:
                stopped[i] = True
        if not ready:  # (not reached: every group left in the walk gets there at the end)
            return None
    i = min(ready, key=lambda i: groups[i][0])
    names = groups[i][1]
    placement = fit(gpus_per_pod, pods, free, names, {groups[i][0]: names})
    assert placement is not None  # (the group has the slots)
    return when, placement


def hold_nodes(gpus_per_pod: int, pods: int, clusters: Sequence[str], pool: Pool,
               mine: Eligible, avoid: frozenset[str] = frozenset(),
               spare: Mapping[str, int] | None = None) -> tuple[int, Placement] | None:
    """Nodes to hold for a gang with no finite earliest start (see the module docstring):
    ``(GPUs short, placement)``, where ``mine`` is the running work the holder may preempt
    (its GPUs per node, ``mine.later``, count once its protection ends); None when no
    schedulable node set can ever hold the shape. Nodes in ``avoid`` (held or reserved for
    another workload) are not used. ``spare``: GPUs of unallocated work per node, counted as
    free in the "more GPUs free now" tie-break (with ``policy.loans``: a loan on a held node
    then does not move the hold).

    Groups are scored in order of a lower bound of the GPUs they are short, the gang's GPUs
    less the group's free and later GPUs (however the gang's pods are spread, the chosen
    nodes give no more; avoided nodes only give less), and the search stops at the first
    group whose bound exceeds the best score's GPUs short: no later group can beat it.
    The best score is the same whatever the order (the group's key ends it)."""
    total = gpus_per_pod * pods
    best: tuple[tuple, Placement] | None = None
    free_of, node_of, later = pool.free, pool.nodes, mine.later
    # "free now" of the tie-break (shortness keeps pool.free: ``later`` counts the spare GPUs)
    now_free: Mapping[str, int] = free_of if not spare else {
        n: f + spare.get(n, 0) for n, f in free_of.items()}
    one: tuple[int, int, str] | None = None  # the best single node: (short, -free now, name)
    for c in clusters:
        if pool.max_node[c] < total:
            continue  # no node of this cluster is big enough
        for n in pool.clusters[c]:
            if node_of[n].gpus >= total and n not in avoid:
                short = total - free_of[n] - later.get(n, 0)
                if short < 0:
                    short = 0
                # (short, 1, -free now, name) compared, the 1 of every single node left out
                if one is None or short < one[0] or (short == one[0] and (-now_free[n], n) < one[1:]):
                    one = (short, -now_free[n], n)
    if one is not None:
        best = ((one[0], 1, one[1], one[2]), Placement(((one[2], total),)))
    if pods == 1:
        return None if best is None else (best[0][0], best[1])
    capacity, later_on = pool.layout.capacity, later.get
    group_free, group_later = pool.group_free(), mine.group_later(pool.layout.group_of)
    for c in clusters:
        for bound, key, names in sorted(
                (total - group_free[key] - group_later.get(key, 0), key, names)
                for key, names in pool.groups[c].items()):
            if best is not None and bound > best[0][0]:
                break  # (this group and every later one is short more GPUs than the best)
            if avoid:
                names = [n for n in names if n not in avoid]
            # every node taking all the pods it can: enough when the group has exactly the pod
            # slots the gang needs (then the greedy order below picks the same nodes and sums)
            chosen: list[tuple[str, int]] | None = None  # built only for a better score
            short, room, free, used = 0, 0, 0, 0
            for n in names:
                k = capacity[n] // gpus_per_pod
                if k > 0:
                    room += k
                    used += 1
                    f = free_of[n]
                    lack = k * gpus_per_pod - f - later_on(n, 0)
                    if lack > 0:
                        short += lack
                    free += now_free[n]
            if room < pods:
                continue
            if room > pods:  # the greedy order: most GPUs free now or freed later first
                order = sorted(names, key=lambda n: (-(free_of[n] + later_on(n, 0)), n))
                chosen = []
                short, left, free = 0, pods, 0
                for n in order:
                    k = min(left, capacity[n] // gpus_per_pod)
                    if k <= 0:
                        continue
                    chosen.append((n, k * gpus_per_pod))
                    short += max(0, k * gpus_per_pod - free_of[n] - later_on(n, 0))
                    free += now_free[n]
                    left -= k
                    if left == 0:
                        break
                used = len(chosen)
            score = (short, used, -free, "/".join(key))
            if best is None or score < best[0]:
                if chosen is None:
                    chosen = [(n, k * gpus_per_pod) for n in names
                              if (k := capacity[n] // gpus_per_pod) > 0]
                best = (score, Placement(tuple(sorted(chosen))))
    return None if best is None else (best[0][0], best[1])


def reservation_for(holder: str, leaf: str, rank: int, charge: tuple[float, float],
                    gpus_per_pod: int, pods: int, clusters: Sequence[str], pool: Pool,
                    releases: Releases, ok: frozenset[str], reserved: frozenset[str],
                    now: float, loans: bool = False) -> Reservation | None:
    """The reservation for ``holder`` (leaf, rank, the charge of its protected run), on nodes
    not in ``reserved``: timed at the earliest start the running work it may preempt (the
    ``releases`` of work not gone that is unallocated or of a leaf in ``ok``) gives it, else
    a drain hold with the numbers its status shows; None when there is neither. ``loans``
    (``policy.loans``): unallocated work counts as free in the hold's tie-break."""
    mine = releases.eligible(ok)
    singles = releases.single_node_starts(ok, gpus_per_pod * pods, clusters, pool)
    found = start_of(gpus_per_pod, pods, clusters, pool, mine, reserved, singles)
    if found is not None:
        return Reservation(holder, leaf, rank, max(now, found[0]), found[1], charge=charge)
    later = mine.later
    spare = releases.eligible(frozenset()).later if loans else None  # unallocated, per node
    hold = hold_nodes(gpus_per_pod, pods, clusters, pool, mine, reserved, spare)
    if hold is None:
        return None
    short, placement = hold
    nodes = placement.nodes
    ours, gone, on = mine.ids, releases.gone, releases.running_on()
    blockers = sorted({wid for n in nodes for wid in on.get(n, ()) if wid not in gone and wid not in ours})
    free = sum(pool.free[n] for n in nodes)
    cap = sum(pool.nodes[n].gpus for n in nodes)
    may = sum(later.get(n, 0) for n in nodes)
    foreign = sum(pool.nodes[n].foreign for n in nodes)  # (other tenants': never preemptible)
    return Reservation(holder, leaf, rank, math.inf, placement, hold=True, charge=charge,
                       numbers=(free, cap, may, cap - free - may - foreign, tuple(blockers),
                                foreign, short))
