"""The simulator's pending queue, in the order a snapshot presents it: oldest first.

The order is by submission time, then id. Submissions arrive in that order (a trace's tasks
are sorted by ``(submit, id)`` and the loop submits them in heap order), so a submission is
appended; a requeued (preempted) workload goes back to its place by binary search. Keys and
workloads live in two parallel lists, so presenting the queue is one tuple copy and an
insertion or removal is a binary search plus a list move, never a re-sort: the cost of a
requeue no longer grows with the length of the queue times its log.

A trace built without :meth:`engine.sim.trace.Trace.of` may be unsorted. Then the queue stays
in arrival order until a requeue, after which it is sorted whole when next presented, as the
simulator always did; both ways present the same order whenever the arrivals are sorted.
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right

from engine.core.types import Workload


class PendingQueue:
    """Pending workloads; ``len()`` counts them, :meth:`items` presents them (module docstring)."""

    __slots__ = ("_keys", "_items", "_ordered", "_resort")

    def __init__(self) -> None:
        self._keys: list[tuple[float, str]] = []  # (submitted_at, id) of each item
        self._items: list[Workload] = []
        self._ordered = True  # the keys are sorted
        self._resort = False  # a requeue into an unordered queue: sort when next presented

    def __len__(self) -> int:
        return len(self._items)

    def submit(self, wl: Workload) -> None:
        """A new submission: at the end (arrival order)."""
        key = (wl.submitted_at, wl.id)
        if self._ordered and self._keys and key < self._keys[-1]:
            self._ordered = False
        self._keys.append(key)
        self._items.append(wl)

    def requeue(self, wl: Workload) -> None:
        """A preempted workload back in the queue, at its place by submission time and id."""
        key = (wl.submitted_at, wl.id)
        if self._ordered:
            i = bisect_right(self._keys, key)
            self._keys.insert(i, key)
            self._items.insert(i, wl)
        else:
            self._keys.append(key)
            self._items.append(wl)
            self._resort = True

    def remove(self, wl: Workload) -> None:
        """Take ``wl`` (pending) out of the queue: admitted or rejected."""
        key = (wl.submitted_at, wl.id)
        i = bisect_left(self._keys, key) if self._ordered else self._keys.index(key)
        if i == len(self._keys) or self._keys[i] != key:
            raise KeyError(wl.id)
        del self._keys[i]
        del self._items[i]

    def items(self) -> tuple[Workload, ...]:
        """The queue in presentation order."""
        if self._resort:
            order = sorted(range(len(self._keys)), key=self._keys.__getitem__)
            self._keys = [self._keys[i] for i in order]
            self._items = [self._items[i] for i in order]
            self._ordered, self._resort = True, False
        return tuple(self._items)
