"""A victim: running work a preemptor could take, not protected right now, with what
choosing it costs (:func:`~engine.core.preemption.make_victim` builds it; the victims of a
pass are indexed by :mod:`engine.core.victim_index` and kept across decisions by
:mod:`engine.core.victim_cache`)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Iterable, Mapping

from engine.core.types import Running


@dataclass(frozen=True)
class Victim:
    """A running workload that could be preempted (it is not protected right now)."""

    id: str
    running: Running
    leaf: str | None  # the tree leaf it is charged to; None when unallocated
    rank: int  # its leaf's rank; (number of leaves + 1) when unallocated
    cost: float  # progress lost if preempted now (GPU-s) + a size term (preemption.victim_cost)
    gpus: int = 0  # GPUs it holds (set by ``make_victim``)
    per_node: Mapping[str, int] = field(default_factory=dict, compare=False, hash=False)
    debug: bool = False  # a debug workload (only the ordinary rule lets a debug preemptor take it)

    @property
    def order(self) -> tuple:
        return (self.leaf is not None, self.cost, -self.rank, self.id)

    @property
    def on(self) -> tuple[tuple[str, int], ...]:
        return self.running.placement.assignments

    def costing(self, cost: float) -> Victim:
        """This victim costing ``cost`` (``make_victim`` at a later time, same leaf and rank):
        fields copied, not passed through ``__init__`` (hundreds are re-costed a pass), unless
        the class is compiled (:mod:`engine.accel`: a native class has no ``__dict__``)."""
        if not _COPYABLE:
            return Victim(self.id, self.running, self.leaf, self.rank, cost, self.gpus,
                          self.per_node, self.debug)
        twin = object.__new__(Victim)
        fields = twin.__dict__
        fields.update(self.__dict__)
        fields["cost"] = cost
        return twin


# an interpreted dataclass's instances keep their fields in a __dict__; compiled, not
_COPYABLE = "__dict__" in dir(Victim)


def set_cost(victims: Iterable[Victim]) -> tuple[int, float, float, int]:
    """(1 if the set touches allocated work else 0, allocated cost, unallocated cost, count)."""
    alloc = unalloc = 0.0
    n = touched = 0
    for v in victims:
        n += 1
        if v.leaf is None:
            unalloc += v.cost
        else:
            alloc += v.cost
            touched = 1
    return (touched, alloc, unalloc, n)
