"""Queue order: who is considered first for free GPUs and for preemption.

Rules:

1. Workloads whose contract was refused (``Workload.invalid``) or whose shape is impossible
   (fewer than one pod or one GPU per pod) are rejected with the reason; they never queue.
2. **Debug workloads** come first: allocated work that matches ``policy.debug`` (at most
   ``max_gpus`` GPUs in total and a min runtime of at most ``max_min_runtime_s``, 15 min),
   among themselves by leaf rank, priority, submit time, id as in rule 3. A debug job fits
   almost anywhere and holds its GPUs protected for minutes at most, so serving it first
   costs the rest of the queue little and gives researchers the one-to-two-minute start that
   makes "run it and see whether it crashes" a practice. It may also preempt more widely
   (:mod:`engine.core.preemption`). Gaming the rule does not pay: a long job labelled debug
   is protected for 15 min only, then any higher-ranked work may preempt it (and any debug
   job of a higher-ranked leaf: debug jobs take one another's GPUs only by the ordinary
   rule), each restart costs it its checkpoint loss and restart overhead (a non-resumable one
   starts over), and every minute it runs is charged to its own budget, so it ranks lower
   next time. The rule only ever helps a workload *start*: once running, a debug job past its
   min runtime is ordinary work of its leaf.
3. Other allocated work (charged to a leaf of the current budget tree) comes next, ordered by its
   leaf's Fair Tree rank (1 first), then priority (higher first; priority only ever orders
   work of one leaf because the rank is compared before it), then submit time (earlier
   first), then workload id.
4. Unallocated work (no budget, min runtime 0, a budget the submitter may not charge, or a
   budget that no longer exists in the tree) comes after all allocated work, ordered by
   submit time then id. Priority does not apply to it: it belongs to no leaf.
"""

from __future__ import annotations

from bisect import bisect_left, insort
from collections import Counter
from itertools import chain, compress, count, islice
from operator import is_not, itemgetter
from typing import Iterable, Iterator, Mapping, NamedTuple, Sequence

from engine.core.types import Contract, LeafRank, Workload
from engine.model import DebugRule


class Entry(NamedTuple):
    """A queued workload with what ordering needs: its charged leaf (None = unallocated) and
    that leaf's rank number, its sort ``key`` (an immutable tuple: cheap to build for
    thousands of workloads) and whether it is a debug workload (rule 2). It holds numbers
    and names only, so it stays valid for later decisions while the leaf's rank number does
    (:class:`KnownEntries`); the rank's metric is in the decision's ``ranks``."""

    workload: Workload
    leaf: str | None
    rank: int | None  # the leaf's rank number: None exactly when ``leaf`` is
    note: str
    key: tuple
    debug: bool = False
    # what the outcome of its turn in the queue walk depends on besides the pass's state:
    # (leaf, debug, GPUs per pod, pods, cluster, min runtime, resumable); see decide.run
    alike: tuple = ()
    # a number for ``alike``: equal for equal tuples among the entries of one queue (a
    # cheaper dict key than the tuple; :class:`KnownEntries`)
    same: int = 0


def alike(leaf: str | None, debug: bool, c: Contract) -> tuple:
    """:attr:`Entry.alike` of a workload of contract ``c`` charged to ``leaf``."""
    return (leaf, debug, *shape_of(c), c.min_runtime_s, c.resumable)


def is_debug(c: Contract, rule: DebugRule) -> bool:
    """Does an allocated contract match the debug rule (few GPUs, short min runtime)?"""
    return c.allocated and c.gpus <= rule.max_gpus and c.min_runtime_s <= rule.max_min_runtime_s


def charged_leaf(workload: Workload, ranks: Mapping[str, LeafRank]) -> tuple[str | None, str]:
    """The leaf ``workload`` is charged to in this tree, or None and why not."""
    c = workload.contract
    if not c.allocated:
        return None, c.note or ("runs unallocated: min runtime 0" if c.budget is not None
                                else "runs unallocated: no budget")
    if c.budget not in ranks:
        return None, f"runs unallocated: budget {c.budget!r} is not a leaf of the current budget tree"
    return c.budget, ""


class KnownEntries:
    """Each pending workload's queue entry across decisions, while what it depends on stays.
    A valid workload that asks for no allocation (no budget or min runtime 0) has one entry
    whatever the tree. One that asks for an allocation keeps its parts (budget, debug shape,
    priority, submit time, id, :attr:`Entry.alike`) and its entry for the rank number its
    budget had when the entry was made: a shell queues the same workload objects decision
    after decision, and a leaf's rank number seldom moves from one to the next (when it
    does, the entry is made again from the parts; a budget that is not a leaf of the tree
    gets a fresh unallocated entry each time). Valid for one debug rule at a time (other
    bounds start afresh). Workloads are recognised by identity (each remembered one is kept
    alive, so its id is not reused meanwhile). Bounded: cleared past ``limit`` workloads. A
    cache of a pure function: decisions do not depend on it."""

    def __init__(self, limit: int = 65536):
        self.limit = limit
        self.bounds: tuple[int, float] | None = None  # the debug rule's (max GPUs, max min runtime)
        # id -> [workload, parts (None: asks for no allocation), rank number, entry]
        self.remembered: dict[int, list] = {}
        self.numbers: dict[tuple, int] = {}  # Entry.alike -> Entry.same, while remembered
        # Entry.same -> a number for its alike tuple without the min runtime, and one without
        # the resumable flag either (near_numbers)
        self.nears: list[int] = []
        self.nears_any: list[int] = []
        self._near: dict[tuple, int] = {}
        self._near_any: dict[tuple, int] = {}
        self.epoch = 0  # clears so far
        self.last: _Last | None = None  # the previous queue (build_queue)

    def table(self, bounds: tuple[int, float]) -> dict[int, list]:
        """The remembered workloads for the debug rule's ``bounds``; read it by
        ``id(workload)`` (a row counts only if its workload *is* the one looked up)."""
        if bounds != self.bounds or len(self.remembered) >= self.limit:
            self.remembered.clear()
            self.numbers.clear()  # (no entry made with the old numbers is kept)
            self.nears.clear()
            self.nears_any.clear()
            self._near.clear()
            self._near_any.clear()
            self.bounds = bounds
            self.epoch += 1
            self.last = None
        return self.remembered

    def number(self, alike: tuple) -> int:
        """:attr:`Entry.same` for ``alike``."""
        found = self.numbers.get(alike)
        if found is None:
            found = self.numbers[alike] = len(self.numbers)
            near = (*alike[:5], *alike[6:])  # (Entry.alike's item 5 is the min runtime)
            self.nears.append(self._near.setdefault(near, len(self._near)))
            self.nears_any.append(self._near_any.setdefault(alike[:5], len(self._near_any)))
        return found


def near_numbers(resumable: bool = True) -> list[int]:
    """Per :attr:`Entry.same` of the entries :func:`build_queue` made, a number for its
    ``alike`` tuple without the min runtime: equal for work of one leaf, shape, debug flag and
    resumable flag; with ``resumable`` False, equal whatever the resumable flag too.
    (:meth:`engine.core.decide._Pass.run` uses it for the outcomes that depend on the min
    runtime only through the reservations that keep a workload off their nodes; without
    ``policy.loans`` a turn of the walk does not read the resumable flag.)"""
    return _KNOWN.nears if resumable else _KNOWN.nears_any


_KNOWN = KnownEntries()


class _Last(NamedTuple):
    """The previous queue :func:`build_queue` made, to update when few workloads changed."""

    bounds: tuple[int, float]
    rank_of: dict[str, int]
    epoch: int  # KnownEntries.epoch then (its rows are those entries' rows)
    ids: set[int]  # id of every workload queued or rejected
    funded: list[Entry]  # sorted by key
    unallocated: list[Entry]  # sorted by key
    rejects: list[tuple[Workload, str]]
    shapes: dict[tuple, int]  # queued entries per shape (Entry.alike[2:5]): queue_shapes
    queue: list[Entry]  # the list returned (funded + unallocated), recognised by identity
    pending: tuple[Workload, ...]  # the workloads it was made of, in the order given (no repeats)


def build_queue(pending: Iterable[Workload], ranks: Mapping[str, LeafRank],
                debug: DebugRule | None = None) -> tuple[list[Entry], list[tuple[Workload, str]]]:
    """Queue entries in order, and the workloads to reject with their reasons. ``debug``:
    the policy's debug rule (None: no workload is a debug workload).

    A shell queues nearly the same workloads decision after decision: when the debug rule
    and every leaf's rank number are those of the previous call and at most
    :data:`FEW_CHANGES` workloads came or went, the previous queue is updated (the gone ones
    removed, the new ones inserted by key) instead of made and sorted again; same result.
    Its entries are counted per shape as it changes (:func:`queue_shapes`), so the "can never
    fit" check (:meth:`~engine.core.verdicts.ShapeVerdicts.split`) walks no entry while every
    shape may fit."""
    bounds = (debug.max_gpus, debug.max_min_runtime_s) if debug is not None else (-1, -1.0)
    known = _KNOWN.table(bounds)
    rank_of = {leaf: lr.rank for leaf, lr in ranks.items()}
    last = _KNOWN.last
    if (last is not None and last.epoch == _KNOWN.epoch and last.bounds == bounds
            and last.rank_of == rank_of and isinstance(pending, (tuple, list))):
        diff = _difference(last, pending)
        if diff is not None and len(diff[0]) + len(diff[1]) <= FEW_CHANGES:
            gone, new, came = diff
            ids = last.ids  # (updated in place: the previous queue's record is replaced)
            ids -= gone
            ids |= new
            funded, unallocated = last.funded.copy(), last.unallocated.copy()
            rejects = last.rejects
            shapes = last.shapes  # (updated in place: the previous queue's record is replaced)
            if gone:
                rejects = [r for r in rejects if id(r[0]) not in gone]
                for wid in gone:
                    row = known.get(wid)
                    if row is None:  # (a rejected workload: never remembered)
                        continue
                    parts = row[1]
                    if parts is not None and rank_of.get(parts[0]) is not None:
                        lst, key = funded, row[3].key
                    else:  # unallocated: asks for none, or its budget is not a leaf
                        lst, key = unallocated, unallocated_key(row[0])
                    i = bisect_left(lst, key, key=itemgetter(4))
                    assert lst[i].workload is row[0]  # (keys are unique: they end with the id)
                    del lst[i]
                    _count(shapes, shape_of(row[0].contract), -1)
            if new:
                more, more_unallocated, more_rejects = _entries(came, ranks, rank_of, known, bounds)
                for e in more:
                    insort(funded, e, key=itemgetter(4))
                    _count(shapes, e.alike[2:5], 1)
                for e in more_unallocated:
                    insort(unallocated, e, key=itemgetter(4))
                    _count(shapes, e.alike[2:5], 1)
                if more_rejects:
                    rejects = sorted(rejects + more_rejects, key=lambda r: r[0].id)
            queue = funded + unallocated
            _KNOWN.last = _Last(bounds, rank_of, _KNOWN.epoch, ids, funded, unallocated, rejects,
                                shapes, queue, tuple(pending))
            return queue, list(rejects)
    funded, unallocated, rejects = _entries(pending, ranks, rank_of, known, bounds)
    funded.sort(key=itemgetter(4))
    unallocated.sort(key=itemgetter(4))
    rejects.sort(key=lambda r: r[0].id)
    queue = funded + unallocated
    if isinstance(pending, (tuple, list)):
        ids = set(map(id, pending))
        _KNOWN.last = None  # (a workload queued twice: the next queue is made afresh too)
        if len(ids) == len(pending):
            shapes = dict(Counter([e.alike[2:5] for e in queue]))
            _KNOWN.last = _Last(bounds, rank_of, _KNOWN.epoch, ids, funded, unallocated, rejects,
                                shapes, queue, tuple(pending))
    return queue, list(rejects)


def _difference(last: _Last, pending: tuple[Workload, ...] | list[Workload]
                ) -> tuple[set[int], set[int], list[Workload]] | None:
    """The ids of the workloads of ``last`` no longer in ``pending`` and of those new in it,
    and the new ones in the order given; None when ``pending`` holds a workload twice (then
    the queue is made afresh).

    A shell presents nearly the same sequence each time: :func:`_aligned` finds the few
    differences by identity, scanning in C between them, without hashing every workload's
    id; when the sequences do not align (reordered, many changes), the id sets of both are
    compared (same answer)."""
    aligned = _aligned(last.pending, pending, FEW_CHANGES)
    if aligned is not None:
        out, came = aligned
        new = set(map(id, came))
        # each put in once, none queued before (else moved, or queued twice: the sets decide)
        if len(new) == len(came) and last.ids.isdisjoint(new):
            return set(map(id, out)), new, came
    ids = set(map(id, pending))
    if len(ids) != len(pending):
        return None
    gone, new = last.ids - ids, ids - last.ids
    return gone, new, [w for w in pending if id(w) in new] if new else []


def _aligned(old: Sequence[object], new: Sequence[object], limit: int, window: int = 8
             ) -> tuple[list, list] | None:
    """``new`` as ``old`` with items taken out (``out``) and put in (``came``), matched by
    identity in order: at a difference, a match within ``window`` places further on either
    side says which items were taken out or put in, else both items differ. None past
    ``limit`` differences. Exact whatever it finds: items it does not list are the same
    objects in the same order (a moved item is listed on both sides)."""
    out: list = []
    came: list = []
    i = j = 0
    n_old, n_new = len(old), len(new)
    # iterators at old[i] and new[j], kept from one difference to the next (so the items
    # before are not skipped again): an item read at a difference but still to compare
    # is put back in front (chain), the items passed over are consumed (islice)
    at_old: Iterator = iter(old)
    at_new: Iterator = iter(new)
    while True:
        # the first k with old[i + k] not new[j + k] (a C loop; both items of it are read)
        k = next(compress(count(), map(is_not, at_old, at_new)), None)
        if k is None:  # the shorter one ended: the rest of the longer one differs
            m = min(n_old - i, n_new - j)
            out.extend(old[i + m:])
            came.extend(new[j + m:])
            return (out, came) if len(out) + len(came) <= limit else None
        i, j = i + k, j + k
        a, b = old[i], new[j]
        for d in range(1, window + 1):
            if i + d < n_old and old[i + d] is b:
                out.extend(old[i:i + d])
                i += d
                next(islice(at_old, d - 1, d - 1), None)  # (to old[i]; new[j] still to compare)
                at_new = chain((b,), at_new)
                break
            if j + d < n_new and new[j + d] is a:
                came.extend(new[j:j + d])
                j += d
                next(islice(at_new, d - 1, d - 1), None)
                at_old = chain((a,), at_old)
                break
        else:
            out.append(a)
            came.append(b)
            i, j = i + 1, j + 1
        if len(out) + len(came) > limit:
            return None


def queue_shapes(entries: list[Entry]) -> Iterable[tuple]:
    """The distinct shapes ``(GPUs per pod, pods, cluster)`` of ``entries`` (items 2 to 4 of
    :attr:`Entry.alike`). For the list :func:`build_queue` last returned (recognised by
    identity and length: a caller does not change it), from its counts per shape kept
    beside it and updated with the queue, without a walk over the entries; else worked out
    from the entries."""
    last = _KNOWN.last
    if (last is not None and last.queue is entries and len(entries) == len(last.funded) + len(
            last.unallocated) and last.epoch == _KNOWN.epoch):
        return tuple(last.shapes)
    return {e.alike[2:5] for e in entries}


def shape_of(c: Contract) -> tuple[int, int, str | None]:
    """A contract's shape, ``(GPUs per pod, pods, cluster)``: items 2 to 4 of
    :attr:`Entry.alike`, and what the simulator's idle meter counts pending work by."""
    return (c.gpus_per_pod, c.pods, c.cluster)


def _count(counts: dict[tuple, int], shape: tuple, n: int) -> None:
    """Add ``n`` to ``counts[shape]``, dropping a shape whose count reaches 0."""
    k = counts.get(shape, 0) + n
    if k:
        counts[shape] = k
    else:
        del counts[shape]


def unallocated_key(w: Workload) -> tuple:
    """The sort key of unallocated work (rule 4: after all allocated work, by submit time)."""
    return (2, 0, 0, w.submitted_at, w.id)


FEW_CHANGES = 64  # workloads come or gone since the previous queue, for an update (build_queue)


def _entries(pending: Iterable[Workload], ranks: Mapping[str, LeafRank], rank_of: dict[str, int],
             known: dict[int, list], bounds: tuple[int, float]
             ) -> tuple[list[Entry], list[Entry], list[tuple[Workload, str]]]:
    """The entries of ``pending``, funded and unallocated (unsorted), and its rejects."""
    dmax_gpus, dmax_min = bounds
    dnote = (f"debug workload (at most {dmax_gpus} GPUs, min runtime at most "
             f"{dmax_min / 60:g} min): queued ahead of other allocated work")
    entries: list[Entry] = []
    unallocated: list[Entry] = []  # rule 4: always after allocated work, so sorted on its own
    rejects: list[tuple[Workload, str]] = []
    add, add_unallocated = entries.append, unallocated.append
    entry = tuple.__new__  # Entry(...) without the named tuple's Python-level __new__
    number = _KNOWN.number
    for w in pending:
        row = known.get(id(w))
        if row is None or row[0] is not w:  # not seen before: check it
            c = w.contract
            if w.invalid:
                rejects.append((w, w.invalid))
                continue
            gpus_per_pod, pods = c.gpus_per_pod, c.pods
            if gpus_per_pod < 1 or pods < 1:
                rejects.append((w, f"asks for {pods} pods x {gpus_per_pod} GPUs; "
                                   f"both must be at least 1"))
                continue
            asked = c.budget
            if asked is None or c.min_runtime_s <= 0:  # asks for no allocation (not c.allocated)
                leaf, note = charged_leaf(w, {})  # unallocated whatever the tree
                same = alike(None, False, c)
                row = known[id(w)] = [w, None, None, Entry(
                    w, None, None, note, unallocated_key(w), False, same, number(same))]
            else:
                debug_shape = gpus_per_pod * pods <= dmax_gpus and c.min_runtime_s <= dmax_min
                same = alike(asked, debug_shape, c)
                row = known[id(w)] = [w, (asked, debug_shape, -c.priority, w.submitted_at, w.id,
                                          same, number(same)), None, None]
        parts = row[1]
        if parts is None:  # asks for no allocation
            add_unallocated(row[3])
            continue
        rank = rank_of.get(parts[0])
        if rank is not None and rank == row[2]:  # (its entry for this rank number)
            add(row[3])
            continue
        budget, debug_shape, neg_priority, submitted, wid, same, same_number = parts
        if rank is None:  # its budget is not a leaf of this tree: unallocated, the note says why
            leaf, note = charged_leaf(w, ranks)
            same = alike(None, False, w.contract)
            add_unallocated(entry(Entry, (w, None, None, note, unallocated_key(w), False,
                                          same, number(same))))
            continue
        e = entry(Entry, (w, budget, rank, dnote if debug_shape else "",
                          (0 if debug_shape else 1, rank, neg_priority, submitted, wid),
                          debug_shape, same, same_number))
        row[2], row[3] = rank, e
        add(e)
    return entries, unallocated, rejects
