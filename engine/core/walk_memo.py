"""What one queue walk remembers of its failures, so that later workloads skip hopeless work.

The walk (:meth:`engine.core.decide._Pass.step`) tries, for each workload, a placement on
free GPUs, then a victim search, then a reservation. Within one walk, free GPUs and victims
only shrink (admissions take GPUs; reservations only keep more workloads off more nodes)
until a preemption, which may leave GPUs free that no workload could use before (a victim
holding more GPUs than its preemptor takes). So a failure stays a failure until the next
preemption, and every memo of a failed placement or search is dropped then
(:meth:`WalkMemos.preempted`). A reservation that could not be made stays impossible: whether
one can be made depends on node capacity and the nodes not yet reserved, never on free GPUs.

One memo is tied to the walk's state instead. A busy queue holds work of one leaf and shape
with many min runtimes. Once no more reservations may be made, most of it ends its turn
``reserved-out`` before any victim search (the step's ``maxfail`` line), and that outcome
depends on the min runtime only through :meth:`~engine.core.holds.Holds.kept_off`,
i.e. through how many timed reservations start before its protection ends. ``kept_out``
keeps it per :func:`~engine.core.queue.near_numbers` (alike but for the min runtime and,
without ``policy.loans``, the resumable flag, which a turn then does not read) with
that count and the walk's state (admissions and reservations so far), and it holds while
both are the same: in one state the free GPUs, the reservations and the projection are the
same, a shape found not to fit stays so, and ``maxfail`` only lowers.

Each memo changes no result: it only skips a placement, search or reservation that would
fail, or (``roomy`` and ``room``, tied to the walk's state so that they lapse at the next
admission) a room check or a search that would say again that victims might or do make
room. ``tests/core/test_core_walk_memo_reference.py`` checks it: the same actions,
reservations, statuses and wait causes as a walk that remembers nothing. Edge cases: a gang's key
includes its cluster (None: any), a shape's key its kept-off nodes (different nodes,
different answer); an empty set of eligible leaves is a set like any other (unallocated
victims stay eligible).
"""

from __future__ import annotations


class WalkMemos:
    """The failures of one queue walk (module docstring)."""

    def __init__(self) -> None:
        # shapes (GPUs per pod, pods, cluster, kept-off nodes) that found no free placement
        self.nofit: set[tuple] = set()
        # (shape, eligible leaves, debug leaves) whose search failed -> lower-ranked leaves with
        # victims that the anti-ping-pong rule excluded then (for the status)
        self.novictims: dict[tuple, tuple[str, ...]] = {}
        # shape -> rank: failed with every victim ranked below ``rank`` eligible, so every
        # later workload of that shape ranking no better fails too
        self.maxfail: dict[tuple, int] = {}
        # (shape, leaves the rule allows) with no reservation to make (kept across preemptions)
        self.noreserve: set[tuple] = set()
        # gang (GPUs per pod, pods, cluster) -> (kept-off nodes, eligible leaves, debug leaves)
        # of each failed search: see failed_before
        self.failed: dict[tuple, list[tuple[frozenset, frozenset, frozenset | None]]] = {}
        # (shape, rank) -> the walk's state (admissions and reservations so far) when victims
        # ranked below ``rank`` might have made room (``VictimIndex.room_below``): they still
        # might while nothing was admitted (this one spares asking again)
        self.roomy: dict[tuple, int] = {}
        # (gang, kept-off nodes, leaves) -> the walk's state when a search with those leaves'
        # victims found room (``_Pass.room_with``): it still does while nothing was admitted
        self.room: dict[tuple, int] = {}
        # near number -> (the walk's state, timed reservations starting before the workload's
        # protection ends, outcome) of a turn that ended reserved-out before a victim search
        self.kept_out: dict[int, tuple[int, int, tuple[str, object, int]]] = {}

    def failed_before(self, gang: tuple, exclude: frozenset[str], vok: frozenset[str],
                      dok: frozenset[str] | None) -> bool:
        """Did a search for the same gang fail since the last preemption with at least these
        nodes (kept off no more: ``exclude`` contains its kept-off nodes) and at least these
        eligible victims (its leaves contain ``vok``, its debug leaves contain ``dok``, None
        being every leaf)? Then this one fails too: a search fails exactly when no node, and
        no group with every eligible victim on it taken, has room
        (:func:`~engine.core.preemption.find_victims`)."""
        for kept, leaves, debug in self.failed.get(gang, ()):
            if (kept <= exclude and vok <= leaves
                    and (debug is None or (dok is not None and dok <= debug))):
                return True
        return False

    def search_failed(self, gang: tuple, exclude: frozenset[str], vok: frozenset[str],
                      dok: frozenset[str] | None) -> None:
        """Remember a failed search (see :meth:`failed_before`)."""
        self.failed.setdefault(gang, []).append((exclude, vok, dok))

    def preempted(self) -> None:
        """A preemption: what failed before may not fail now."""
        self.nofit.clear()
        self.novictims.clear()
        self.maxfail.clear()
        self.failed.clear()
