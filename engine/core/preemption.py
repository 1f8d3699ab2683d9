"""Preemption: which running workloads may be stopped to admit a pending one, and the cheapest set.

Who may preempt: only an ALLOCATED pending workload (charged to a leaf of the tree).
Unallocated work never preempts anything.

Who may be a victim of preemptor ``W`` (leaf ``Lw``):

* never a protected workload: one with ``now < protected_until`` (allocated work during its
  min runtime). Unallocated work has ``protected_until == started_at`` so it always qualifies;
* unallocated work (no budget, min runtime 0, or a budget that is not a leaf of the tree any
  more): always, and it is taken first;
* allocated work past its min runtime whose leaf ``Lv`` ranks strictly lower than ``Lw``
  (higher rank number), **and** passes the anti-ping-pong rule.

Anti-ping-pong rule: charge ``Lw`` with what ``W`` will certainly cost it, its whole protected
run ``gpus x min_runtime x billing weight``; ``Lw`` must still be ordered before ``Lv`` in the
Fair Tree after that charge (:func:`engine.core.fairshare.still_ranks_above`). Otherwise, once
``W``'s min runtime is over, ``Lv`` would outrank ``Lw`` and take the GPUs straight back, and
the two would trade the GPUs forever, each paying a restart. With the rule, ``Lv`` can only
come back after the window has moved or ``Lw`` has used more than its share.

Cost of a victim = GPU-seconds of progress lost: a non-resumable workload loses its whole
current run (``gpus x (now - started_at)``); a resumable one checkpoints during the
preemption grace period and loses at most that much (``gpus x min(run, grace)``).
Cost of a set = (sum of allocated victims' cost, sum of unallocated victims' cost, count),
compared in that order, so a set of unallocated victims always beats one that touches
allocated work.

Search (greedy, deterministic): victims are ordered unallocated first, then by cost, then
worst leaf rank, then id. A workload that fits on one node looks at every node big enough
and takes victims on that node in order until the node has room; a multi-node gang does the
same per topology group (see :mod:`engine.core.placement`) counting pod slots. Victims that
turn out unnecessary (overshoot) are dropped again, most expensive first. The cheapest
(node or group) wins, ties by name.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Iterable, Mapping, Sequence

from engine.core.placement import Pool, fit
from engine.core.types import Placement, Running


@dataclass(frozen=True)
class Victim:
    """A running workload that could be preempted (it is not protected right now)."""

    id: str
    running: Running
    leaf: str | None  # the tree leaf it is charged to; None when unallocated
    rank: int  # its leaf's rank; (number of leaves + 1) when unallocated
    cost: float  # GPU-seconds of progress lost if preempted now
    gpus: int = 0  # GPUs it holds (set by ``make_victim``)
    per_node: Mapping[str, int] = field(default_factory=dict, compare=False, hash=False)

    @property
    def order(self) -> tuple:
        return (self.leaf is not None, self.cost, -self.rank, self.id)

    @property
    def on(self) -> tuple[tuple[str, int], ...]:
        return self.running.placement.assignments


def make_victim(running: Running, leaf: str | None, rank: int, now: float, grace_s: float) -> Victim:
    return Victim(running.workload.id, running, leaf, rank, progress_lost(running, now, grace_s),
                  running.placement.gpus, dict(running.placement.assignments))


def progress_lost(running: Running, now: float, grace_s: float) -> float:
    """GPU-seconds lost by preempting ``running`` now (see the module docstring)."""
    elapsed = max(0.0, now - running.started_at)
    if running.workload.contract.resumable:
        elapsed = min(elapsed, grace_s)
    return running.placement.gpus * elapsed


def set_cost(victims: Iterable[Victim]) -> tuple[float, float, int]:
    alloc = unalloc = 0.0
    n = 0
    for v in victims:
        n += 1
        if v.leaf is None:
            unalloc += v.cost
        else:
            alloc += v.cost
    return (alloc, unalloc, n)


def find_victims(gpus_per_pod: int, pods: int, clusters: Sequence[str], pool: Pool,
                 by_node: Mapping[str, Sequence[Victim]], ok: frozenset[str],
                 exclude: frozenset[str] = frozenset()) -> tuple[Placement, list[Victim]] | None:
    """Cheapest set of victims whose GPUs, with the free ones, give the gang a valid placement;
    None when no set does. ``by_node`` lists preemptible running work per node in
    :attr:`Victim.order`; a victim is eligible when unallocated or its leaf is in ``ok``."""
    total = gpus_per_pod * pods
    best: tuple[tuple, Placement, list[Victim]] | None = None
    bound: tuple[float, float] | None = None
    # 1. one node if it can
    for c in clusters:
        for n in pool.clusters[c]:
            if n in exclude or pool.nodes[n].gpus < total:
                continue
            need = total - pool.free[n]
            chosen: list[Victim] = []
            got = 0
            alloc = unalloc = 0.0
            for v in by_node.get(n, ()):
                if got >= need:
                    break
                if v.leaf is None:
                    unalloc += v.cost
                elif v.leaf in ok:
                    alloc += v.cost
                else:
                    continue
                if bound is not None and (alloc, unalloc) > bound:
                    break  # already dearer than the best node: costs only grow
                chosen.append(v)
                got += v.per_node[n]
            if got < need:
                continue
            for v in reversed(chosen[:]):  # drop overshoot, most expensive first
                g = v.per_node[n]
                if got - g >= need:
                    chosen.remove(v)
                    got -= g
            score = (set_cost(chosen), n)
            if best is None or score < best[0]:
                best = (score, Placement(((n, total),)), chosen)
                bound = score[0][:2]
    if best is not None or pods == 1:
        return None if best is None else (best[1], best[2])
    # 2. a multi-node gang inside one group
    for c in clusters:
        for key, members in sorted(pool.groups[c].items()):
            names = [n for n in members if n not in exclude]
            inside = set(names)
            free = {n: pool.free[n] for n in names}
            slots = sum(f // gpus_per_pod for f in free.values())
            chosen = []
            candidates = sorted({v.id: v for n in names for v in by_node.get(n, ())
                                 if v.leaf is None or v.leaf in ok}.values(), key=lambda v: v.order)
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
            score = (set_cost(chosen), key)
            if best is None or score < best[0]:
                best = (score, placement, chosen)
    return None if best is None else (best[1], best[2])
