"""The reservations of one decision pass, and the backfill rule they impose.

:func:`~engine.core.reservation.reservation_for` makes one reservation; :class:`Holds` keeps
those of the pass in queue order, on disjoint nodes, bounded by ``policy.reservations`` and
``policy.reservation_share``, and answers for each later workload which reserved nodes it may
not use now and why (:meth:`Holds.kept_off`, :meth:`Holds.blocker`): a drain hold takes only
unallocated work; a timed reservation takes work its holder could preempt when it starts
(ranked below it, protected no longer than its start, allowed by the anti-ping-pong rule).
The rules and their reasons are in :mod:`engine.core.reservation`'s docstring.
"""

from __future__ import annotations

from bisect import bisect_left, insort
from typing import TYPE_CHECKING, Mapping

from engine.core.reservation import Reservation

if TYPE_CHECKING:
    from engine.core.eligibility import Eligibility
    from engine.core.projection import Projection
    from engine.core.queue import Entry


class Holds:
    """The reservations of one decision pass, in queue order on disjoint nodes, bounded by
    ``policy.reservations`` and ``policy.reservation_share`` (module docstring), and the
    backfill rule they impose on the workloads walked after them."""

    def __init__(self, limit: int, share: float, capacity: Mapping[str, int], total: int,
                 rules: Eligibility, proj: Projection, now: float):
        self.items: list[Reservation] = []  # in queue order
        self.nodes: frozenset[str] = frozenset()  # every reserved node
        self.gpus = 0  # GPUs of the reserved nodes
        self.limit, self.cap = limit, share * total  # no reservation past either
        self._capacity, self._rules, self._proj, self._now = capacity, rules, proj, now
        self._kept: dict[tuple, tuple[frozenset[str], tuple[tuple[Reservation, str], ...]]] = {}
        # the earliest starts of the timed reservations so far, ascending (the others are
        # drain holds; see kept_off)
        self._untils: list[float] = []

    def may_add(self) -> bool:
        """Another reservation? Fewer than ``policy.reservations`` so far, and their nodes
        hold less than ``policy.reservation_share`` of the schedulable GPUs."""
        return len(self.items) < self.limit and self.gpus < self.cap

    def add(self, res: Reservation) -> None:
        self.items.append(res)
        if not res.hold:
            insort(self._untils, res.until)
        self.nodes = self.nodes | res.nodes
        self.gpus += sum(self._capacity[n] for n in res.nodes)

    def of(self, holder: str) -> Reservation | None:
        return next((r for r in self.items if r.holder == holder), None)

    def blocker(self, e: Entry, res: Reservation) -> str | None:
        """Why ``e`` may not use ``res``'s nodes now, or None when it may (the holder could
        preempt it by then; module docstring): ``hold`` (a drain hold takes only unallocated
        work), ``rank`` (``e`` does not rank below the holder), ``protected`` (its min runtime
        would outlast the holder's start) or ``pingpong`` (the anti-ping-pong rule would forbid
        the holder to preempt it)."""
        if e.leaf is None:
            return None
        if res.hold:
            return "hold"
        assert e.rank is not None  # work charged to a leaf has its rank (queue.Entry)
        if e.rank <= res.rank:
            return "rank"
        if self._now + e.workload.contract.min_runtime_s > res.until:
            return "protected"
        if not self._rules.pingpong_ok(res.leaf, e.leaf, *res.charge):
            return "pingpong"
        return None

    def starting_before_end(self, e: Entry) -> int:
        """How many timed reservations start before ``e``'s protection would end (the only way
        its min runtime enters :meth:`kept_off`)."""
        untils = self._untils
        return bisect_left(untils, self._now + e.workload.contract.min_runtime_s) if untils else 0

    def kept_off(self, e: Entry) -> tuple[frozenset[str], tuple[tuple[Reservation, str], ...]]:
        """The reserved nodes ``e`` may not use now, and each reservation that keeps it off
        them with :meth:`blocker`'s why (for its status as it stands at ``e``'s turn: later
        admissions move the projection)."""
        # (``e`` funded) the answer depends on the leaf (and so its rank), the reservations so
        # far, the anti-ping-pong projection and, through the min runtime, only on which timed
        # reservations would start before ``e``'s protection ends (:meth:`blocker`'s
        # ``protected``): those whose start is below ``now + min runtime``, the first ``k`` of
        # them in start order, ``k`` found by bisection (``now + min runtime`` grows with the
        # min runtime, so no other set is possible: :meth:`starting_before_end`).
        # Remembered per pass under exactly that key, so work of one leaf with many different
        # min runtimes shares a few answers; while every reservation is a drain hold, on the
        # reservations alone (a hold keeps off all funded work, whatever its leaf and min runtime)
        if e.leaf is None:
            return NOT_KEPT
        key = ((e.leaf, self.starting_before_end(e), len(self.items), self._proj.version)
               if self._untils else (len(self.items),))
        found = self._kept.get(key)
        if found is None:
            nodes: frozenset[str] = frozenset()
            why = []
            for res in self.items:
                code = self.blocker(e, res)
                if code is not None:
                    nodes = nodes | res.nodes
                    why.append((res, code))
            found = self._kept[key] = (nodes, tuple(why))
        return found


NOT_KEPT: tuple[frozenset[str], tuple[tuple[Reservation, str], ...]] = (frozenset(), ())
