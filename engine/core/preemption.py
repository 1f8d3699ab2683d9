"""Preemption: which running workloads may be stopped to admit a pending one, and the cheapest set.

Who may preempt: only an ALLOCATED pending workload (charged to a leaf of the tree).
Unallocated work never preempts anything.

Who may be a victim of preemptor ``W`` (leaf ``Lw``):

* never a protected workload: one with ``now < protected_until`` (allocated work during its
  min runtime). Unallocated work has ``protected_until == started_at`` so it always qualifies;
* unallocated work (no budget, min runtime 0, or a budget that is not a leaf of the tree any
  more): always, and it is taken first (work whose budget left the tree while it ran keeps
  the protection it started with: it is a victim once that is over);
* allocated work past its min runtime whose leaf ``Lv`` ranks strictly lower than ``Lw``
  (higher rank number), **and** passes the anti-ping-pong rule.

Debug preemptors (``engine.core.queue`` rule 2: at most ``policy.debug.max_gpus`` GPUs, min
runtime at most ``policy.debug.max_min_runtime_s``) may also take allocated work past its min
runtime of ANY leaf, whatever the ranks, without the anti-ping-pong projection: a debug job
is protected 15 min at most and charged to its own budget, so it cannot keep the GPUs from a
higher-ranked leaf for long. One exception keeps debug jobs from trading GPUs among
themselves every 15 min: a running *debug* workload is taken by a debug preemptor only under
the ordinary rule (lower-ranked leaf, anti-ping-pong). Gaming does not pay: a long job
labelled debug is ordinary work of its leaf once its 15 min are over (any higher-ranked
workload preempts it), it cannot displace other debug work, each restart costs it its
checkpoint loss and restart overhead (a non-resumable one starts over), and all of its run
time is charged, lowering its leaf's rank.

Anti-ping-pong rule: project usage to the moment ``W``'s min runtime ends (``now + m``) and
require ``Lw`` to still be ordered before ``Lv`` in the Fair Tree then
(:func:`engine.core.fairshare.still_ranks_above`). The projection
(:mod:`engine.core.projection`) is conservative on both sides and counts every move already
made in this decision:

* ``Lw``'s side (each node on its path) is charged ``W``'s whole protected run
  ``gpus x m x billing weight`` plus ``m`` seconds of *all* allocated work running in that
  subtree after the moves so far (earlier admissions of this decision included): at worst it
  all keeps running;
* ``Lv``'s side is charged only what is certain: its protected runs, each until
  ``min(protected_until, now + m)`` (work past its min runtime may be preempted any time).

Otherwise, once ``W``'s min runtime is over, ``Lv`` would outrank ``Lw`` and take the GPUs
straight back, and the two would trade the GPUs forever, each paying a restart. Counting the
leaf's other running work matters: checking ``W`` alone let a leaf win ten preemptions in one
decision (or one per decision) that together reversed the ranks. With the rule, ``Lv`` can
only come back after the window has moved, its own certain usage was overestimated (work
ended early), or ``Lw`` started more work later on idle GPUs.

Cost of a victim = GPU-seconds of progress lost, plus the policy's min-runtime cap for each
GPU it holds past its first (:func:`victim_cost`). Progress lost: a non-resumable workload
loses its whole current run (``gpus x (now - started_at)``); a resumable one checkpoints
during the preemption grace period and loses at most that much (``gpus x min(run, grace)``).
The size term is what breaking a multi-GPU run costs the cluster: to run again the victim
needs all its GPUs free at once, while the GPUs it frees and does not give the preemptor go
to other work, protected up to the cap. Without it the cheapest victim of a 1-GPU job was
usually a resumable whole-node job (8 x grace lost), which then waited hours for a node again
(on the default experiment pretraining's 8-GPU jobs were broken by 1-GPU debug jobs, each
time waiting 1.5-4.4 h). With it a preemptor takes small victims first and breaks a
multi-GPU run only when the small ones would lose more progress than that (scenarios 77,
78); on the default experiment occupancy went from 98.1% to 99.6% and entitled GPU-hours
delivered from 88.7% to 90.5%. It orders victims only: who may be a victim is unchanged,
and a preemption's reason states the progress lost, not this cost.
Cost of a set = (whether it touches allocated work, sum of allocated victims' cost, sum of
unallocated victims' cost, count), compared in that order, so a set of unallocated victims
always beats one that touches allocated work, even allocated work that would lose nothing
(a 1-GPU resumable victim with no grace period costs 0).

Search (greedy, deterministic): victims are ordered unallocated first, then by cost, then
worst leaf rank, then id. A workload that fits on one node looks at every node big enough
and takes victims on that node in order until the node has room; a multi-node gang also
looks per topology group (see :mod:`engine.core.placement`) counting pod slots, and a
group wins over the best single node only when strictly cheaper (so a gang never preempts
allocated work to stay on one node when unallocated work elsewhere would do). Victims that
turn out unnecessary (overshoot) are dropped again, most expensive first. The cheapest
of these sets (node or group) wins, ties by name: a node's set is this greedy one, not
necessarily the cheapest subset of its victims. (Nodes are tried in name order; a busy
decision tries them cheapest lower bound first instead, stopping once no node left can be
cheaper, with the same answers: :mod:`engine.core.victim_index`.)
A one-node search that will fail is known before any node is tried: no node reaches the
workload's GPUs even with every eligible victim on it (:func:`_room_on_a_node`, a plain sum
per node; most failed searches of a busy walk are refused so, at a fraction of the cost).
"""

from __future__ import annotations

from itertools import repeat
from typing import Mapping, Protocol, Sequence

from engine.core.placement import Pool, fit
from engine.core.types import Placement, Running
from engine.core.victim import Victim, set_cost
from engine.core.victim_index import VictimIndex, cheapest_node, take_on_node


class VictimsByNode(Protocol):
    """Preemptible running work per node, in :attr:`Victim.order`, read with ``get(node,
    default)``: a mapping node -> victims, or a :class:`~engine.core.victim_index.VictimIndex`."""

    def get(self, node: str, default: Sequence[Victim], /) -> Sequence[Victim]: ...


def make_victim(running: Running, leaf: str | None, rank: int, now: float, grace_s: float,
                debug: bool = False, size_s: float = 0.0) -> Victim:
    return victim_at(running, leaf, rank, victim_cost(
        running.placement.gpus, running.started_at, running.workload.contract.resumable, now,
        grace_s, size_s), debug)


def victim_cost(gpus: int, started_at: float, resumable: bool, now: float, grace_s: float,
                size_s: float) -> float:
    """What taking a victim costs (module docstring): the GPU-seconds of progress it loses
    (:func:`lost_after`) plus ``size_s`` for each GPU past its first (the policy's min-runtime
    cap: it needs all its GPUs free at once to run again)."""
    return lost_after(gpus, started_at, resumable, now, grace_s) + (gpus - 1) * size_s


def victim_at(running: Running, leaf: str | None, rank: int, cost: float,
              debug: bool = False) -> Victim:
    """:func:`make_victim` with its cost (:func:`progress_lost`) already known."""
    return Victim(running.workload.id, running, leaf, rank, cost, running.placement.gpus,
                  dict(running.placement.assignments), debug=debug)


def progress_lost(running: Running, now: float, grace_s: float) -> float:
    """GPU-seconds lost by preempting ``running`` now (see the module docstring)."""
    return lost_after(running.placement.gpus, running.started_at,
                      running.workload.contract.resumable, now, grace_s)


def lost_after(gpus: int, started_at: float, resumable: bool, now: float, grace_s: float) -> float:
    """:func:`progress_lost` from the numbers it reads: ``gpus`` GPUs running since
    ``started_at`` (before ``now``: nothing lost), a resumable run losing at most ``grace_s``."""
    elapsed = now - started_at
    if not elapsed > 0.0:  # (max(0.0, elapsed), without the call: hundreds a pass)
        elapsed = 0.0
    if resumable and grace_s < elapsed:  # (min(elapsed, grace_s))
        elapsed = grace_s
    return gpus * elapsed


_Best = tuple  # (score, placement, victims); score = (set_cost, 0 node / 1 group, name)


def _scan_nodes(total: int, clusters: Sequence[str], pool: Pool,
                by_node: VictimsByNode, ok: frozenset[str],
                exclude: frozenset[str], held: Mapping[str, int] | None,
                debug_ok: frozenset[str] | None) -> _Best | None:
    """The cheapest single node, trying every node in cluster and name order. Each node takes
    its eligible victims in order until it has room, then drops the overshoot; the node whose
    set then costs least wins, ties by name. (No node is given up part way: what it has taken
    before the overshoot is dropped may cost more than its final set, so it bounds nothing.)"""
    # a debug victim (allocated) is eligible for a debug preemptor only if its leaf is in
    # ``debug_ok``; checked inline below (filtering every node's list up front cost more)
    best: _Best | None = None
    free_of, node_of, victims_on = pool.free, pool.nodes, by_node.get
    held_on = held.get if held is not None else None
    for c in clusters:
        for n in pool.clusters[c]:
            if n in exclude or node_of[n].gpus < total:
                continue
            need = total - free_of[n]
            if held_on is not None and held_on(n, 0) < need:
                continue
            chosen, got = take_on_node(victims_on(n, ()), n, need, ok, debug_ok)
            if got < need:
                continue
            score = (set_cost(chosen), 0, n)
            if best is None or score < best[0]:
                best = (score, Placement(((n, total),)), chosen)
    return best


def _room_on_a_node(total: int, clusters: Sequence[str], pool: Pool, index: VictimIndex,
                    ok: frozenset[str], exclude: frozenset[str],
                    debug_ok: frozenset[str] | None) -> bool:
    """Does some node of ``clusters``, not in ``exclude`` and big enough, reach ``total`` GPUs
    with its free GPUs and those of every victim on it that is eligible (as in
    :func:`~engine.core.victim_index.take_on_node`)? False exactly when the one-node search
    fails: it takes eligible victims only, whatever their cost."""
    free_of, node_of, held, on = pool.free, pool.nodes, index.held, index.on
    for c in clusters:
        if pool.max_node.get(c, 0) < total:
            continue
        for n in pool.clusters[c]:
            got = free_of[n]
            if got >= total:
                if n not in exclude and node_of[n].gpus >= total:
                    return True
                continue
            if got + held.get(n, 0) < total or n in exclude or node_of[n].gpus < total:
                continue
            for v in on[n]:
                if v.leaf is None or (v.leaf in ok and (
                        debug_ok is None or not v.debug or v.leaf in debug_ok)):
                    got += v.per_node[n]
                    if got >= total:
                        return True
    return False


def find_victims(gpus_per_pod: int, pods: int, clusters: Sequence[str], pool: Pool,
                 by_node: VictimsByNode, ok: frozenset[str],
                 exclude: frozenset[str] = frozenset(), held: Mapping[str, int] | None = None,
                 debug_ok: frozenset[str] | None = None) -> tuple[Placement, list[Victim]] | None:
    """Cheapest set of victims whose GPUs, with the free ones, give the gang a valid placement;
    None when no set does. ``by_node`` lists preemptible running work per node in
    :attr:`Victim.order`; a victim is eligible when unallocated or its leaf is in ``ok``.
    ``held`` (optional) bounds the GPUs all victims hold per node, to skip hopeless nodes.
    ``debug_ok`` (a debug preemptor): a debug victim is eligible only if its leaf is in it.
    With a :class:`~engine.core.victim_index.VictimIndex` as ``by_node`` (it knows what
    victims hold; ``held`` is then not used) the one-node part visits nodes cheapest bound
    first (:func:`~engine.core.victim_index.cheapest_node`): same answer, far fewer nodes."""
    total = gpus_per_pod * pods
    # 1. one node if it can
    best: _Best | None
    index = by_node if isinstance(by_node, VictimIndex) else None
    if pods == 1 and index is not None and not _room_on_a_node(
            total, clusters, pool, index, ok, exclude, debug_ok):
        return None  # (the search below would try every node and fail, at a higher cost)
    if index is not None:
        held = index.held
    if all(pool.max_node.get(c, 0) < total for c in clusters):
        best = None  # no node is that big
    elif index is not None and index.worth_sorting(tuple(clusters), total):
        best = cheapest_node(total, clusters, pool, index, ok, exclude, debug_ok)
    else:
        best = _scan_nodes(total, clusters, pool, by_node, ok, exclude, held, debug_ok)
    if pods == 1:
        return None if best is None else (best[1], best[2])
    # 2. a multi-node gang inside one group (taken only if strictly cheaper than one node)
    group_free = pool.group_free()
    for c in clusters:
        for key, members in sorted(pool.groups[c].items()):
            # the group's free and victims' GPUs bound its pod slots (a sum of floors is at
            # most the floor of the sum; excluded nodes only take slots away)
            if held is not None and (group_free[key] + (
                    index.held_in(key, members) if index is not None
                    else sum(map(held.get, members, repeat(0))))) // gpus_per_pod < pods:
                continue
            names = [n for n in members if n not in exclude]
            if held is not None and sum((pool.free[n] + held.get(n, 0)) // gpus_per_pod
                                        for n in names) < pods:
                continue
            inside = set(names)
            free = {n: pool.free[n] for n in names}
            slots = sum(f // gpus_per_pod for f in free.values())
            chosen = []
            candidates = sorted({v.id: v for n in names for v in by_node.get(n, ())
                                 if v.leaf is None or (v.leaf in ok and (
                                     debug_ok is None or not v.debug or v.leaf in debug_ok))
                                 }.values(), key=lambda v: v.order)
            for v in candidates:
                if slots >= pods:
                    break
                chosen.append(v)
                for n, g in v.on:
                    if n in inside:
                        slots += (free[n] + g) // gpus_per_pod - free[n] // gpus_per_pod
                        free[n] += g
            if slots < pods:
                continue
            for v in reversed(chosen[:]):
                trial = dict(free)
                for n, g in v.on:
                    if n in inside:
                        trial[n] -= g
                if sum(f // gpus_per_pod for f in trial.values()) >= pods:
                    chosen.remove(v)
                    free = trial
            placement = fit(gpus_per_pod, pods, free, names, {key: names})
            if placement is None:
                continue
            score = (set_cost(chosen), 1, key)
            if best is None or score < best[0]:
                best = (score, placement, chosen)
    return None if best is None else (best[1], best[2])
