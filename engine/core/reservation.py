"""Reservation and backfill: a large gang at the head of the queue must not starve.

Without a reservation, a 64-GPU gang that cannot be placed now would wait forever while small
jobs keep taking every GPU that frees up. So the first ALLOCATED workload in queue order that
can be placed neither on free GPUs nor by preemption gets a reservation:

* Earliest start ``T``: running work that the holder could preempt (same victim rules as
  :mod:`engine.core.preemption`: unallocated, or lower-ranked allocated work passing the
  anti-ping-pong rule) becomes available to it at ``max(now, protected_until)``; higher-ranked
  work never (its end is unknown). Adding these GPUs in time order to the free ones, ``T`` is
  the first moment the gang has a valid placement (one node if it can, else one topology
  group), and the reserved nodes are that placement's nodes. No finite ``T`` -> no reservation
  for it, and the next allocated workload that cannot start tries (its victims may differ).
* Backfill: work behind the holder may still start anywhere else, and on the reserved nodes
  only if it will be preemptible by the holder at ``T``: unallocated work, or allocated work
  whose min runtime ends by ``T`` (``now + min_runtime <= T``) and which the holder could
  preempt then (lower-ranked leaf, anti-ping-pong rule). The same applies to preemptions by
  later workloads: they may not land on reserved nodes unless they qualify.

Only one reservation is made per decision (EASY backfilling); it is recomputed from scratch
at every decision, so it moves with the ranks.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Sequence

from engine.core.placement import Pool, fit
from engine.core.types import Placement


@dataclass(frozen=True)
class Reservation:
    holder: str
    leaf: str
    rank: int
    until: float
    placement: Placement

    @property
    def nodes(self) -> frozenset[str]:
        return frozenset(self.placement.nodes)


Release = tuple[float, str, tuple[tuple[str, int], ...]]  # (time, workload id, assignments)


def earliest_start(gpus_per_pod: int, pods: int, clusters: Sequence[str], pool: Pool,
                   releases: Sequence[Release]) -> tuple[float, Placement] | None:
    """First time the gang can be placed if ``releases`` (sorted by time, id) free their GPUs,
    and the placement then; None when never."""
    total = gpus_per_pod * pods
    best: tuple[tuple, Placement] | None = None
    by_node: dict[str, list[Release]] = {}
    for rel in releases:
        for n, _ in rel[2]:
            by_node.setdefault(n, []).append(rel)
    for c in clusters:
        for n in pool.clusters[c]:
            if pool.nodes[n].gpus < total:
                continue
            free = pool.free[n]
            when = -math.inf if free >= total else math.inf
            for t, _, on in by_node.get(n, ()):
                if free >= total:
                    break
                free += dict(on)[n]
                if free >= total:
                    when = t
            if when < math.inf and (best is None or (when, n) < best[0]):
                best = ((when, n), Placement(((n, total),)))
    if best is not None or pods == 1:
        return None if best is None else (best[0][0], best[1])
    for c in clusters:
        for key, names in sorted(pool.groups[c].items()):
            free = {n: pool.free[n] for n in names}
            slots = sum(f // gpus_per_pod for f in free.values())
            when = -math.inf if slots >= pods else math.inf
            seen: set[str] = set()
            rels = sorted({r[1]: r for n in names for r in by_node.get(n, ())}.values())
            for t, wid, on in rels:
                if slots >= pods:
                    break
                if wid in seen:
                    continue
                seen.add(wid)
                for n, g in on:
                    if n in free:
                        slots += (free[n] + g) // gpus_per_pod - free[n] // gpus_per_pod
                        free[n] += g
                if slots >= pods:
                    when = t
            if when == math.inf:
                continue
            placement = fit(gpus_per_pod, pods, free, names, {key: names})
            if placement is not None and (best is None or (when, key) < best[0]):
                best = ((when, key), placement)
    return None if best is None else (best[0][0], best[1])
