"""The preemptible running work of a pass as victims in victim order, remembered across decisions.

Every pass that searches for victims turns all running work past its protection into
:class:`~engine.core.victim.Victim` records (what
:func:`~engine.core.preemption.make_victim` builds) and sorts them in victim order
(unallocated first, then by cost, then worst leaf rank, then id). At simulator scale that is
hundreds of records per pass, and from one pass to the next almost all of them are the same:
the same running workload, charged to the same leaf at the same rank, costing the same (a
resumable workload past its checkpoint grace period loses ``gpus x grace`` however long it
has run). :class:`VictimCache` keeps the last record of each running workload with its sort
key and the numbers its cost is computed from (GPUs, start of its run, resumable:
:func:`~engine.core.preemption.lost_after`), and rebuilds a record only when its leaf or
rank moved; when only its cost did (the loss grows while a run goes on: all of it for work
that starts over, up to the grace period for resumable work), the record is copied with the
new cost (:meth:`~engine.core.victim.Victim.costing`).

A cache of a pure function: the list is the one ``make_victim`` and a sort would give (same
fields, same order; a record is rebuilt from the cost already computed to compare it), so
decisions do not depend on it. Objects are recognised by identity
(each remembered ``Running`` is kept alive, so its id is not reused meanwhile), for one debug
rule, grace period and min-runtime cap (the cost's size term) at a time (a new one starts
afresh). Bounded: cleared past ``limit``
entries.
"""

from __future__ import annotations

from typing import Iterable

from engine.core.preemption import victim_at, victim_cost
from engine.core.queue import is_debug
from engine.core.types import Running
from engine.core.victim import Victim
from engine.model import DebugRule


class VictimCache:
    """Victims per running workload, with their sort keys (module docstring)."""

    def __init__(self, limit: int = 16384):
        self.limit = limit
        self._rule: tuple[DebugRule, float, float] | None = None
        # id(running) -> (running, its last victim, that victim's sort key, and what its cost
        # is computed from: GPUs, start of its run, resumable)
        self.remembered: dict[int, tuple[Running, Victim, tuple, int, float, bool]] = {}

    def victims(self, prey: Iterable[tuple[Running, str | None, int]], now: float,
                grace_s: float, rule: DebugRule, size_s: float = 0.0) -> list[Victim]:
        """``prey`` ((running, charged leaf or None, its leaf's rank) of the work past its
        protection) as victims at ``now``, in victim order. A running workload is a debug
        victim when it is charged to a leaf and its contract matches ``rule``."""
        if self._rule != (rule, grace_s, size_s) or len(self.remembered) >= self.limit:
            self.remembered.clear()
            self._rule = (rule, grace_s, size_s)
        remembered = self.remembered
        keyed: list[tuple[tuple, Victim]] = []
        add = keyed.append
        for r, leaf, rank in prey:
            hit = remembered.get(id(r))
            if hit is not None and hit[0] is r:
                v, gpus, started, resumable = hit[1], hit[3], hit[4], hit[5]
                cost = victim_cost(gpus, started, resumable, now, grace_s, size_s)
                same = v.rank == rank and v.leaf == leaf
                if same and v.cost == cost:
                    add((hit[2], v))
                    continue
            else:
                gpus, started = r.placement.gpus, r.started_at
                resumable = r.workload.contract.resumable
                cost = victim_cost(gpus, started, resumable, now, grace_s, size_s)
                same = False
            if same:  # only the cost moved (the loss grows while the run goes on): a copy
                v = v.costing(cost)
            else:
                v = victim_at(r, leaf, rank, cost,
                              leaf is not None and is_debug(r.workload.contract, rule))
            key = (leaf is not None, cost, -rank, v.id)
            remembered[id(r)] = (r, v, key, gpus, started, resumable)
            add((key, v))
        keyed.sort()  # (keys differ: ids are unique among running work)
        return [v for _, v in keyed]
