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
   is protected for 15 min only, then any higher-ranked work (or any debug job) may preempt
   it, each restart costs it its checkpoint loss and restart overhead (a non-resumable one
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

from operator import itemgetter
from typing import Iterable, Mapping, NamedTuple

from engine.core.types import Contract, LeafRank, Workload
from engine.model import DebugRule


class Entry(NamedTuple):
    """A queued workload with what ordering needs: its charged leaf (None = unallocated), its
    sort ``key`` (an immutable tuple: cheap to build for thousands of workloads) and whether
    it is a debug workload (rule 2)."""

    workload: Workload
    leaf: str | None
    rank: LeafRank | None
    note: str
    key: tuple
    debug: bool = False


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


def build_queue(pending: Iterable[Workload], ranks: Mapping[str, LeafRank],
                debug: DebugRule | None = None) -> tuple[list[Entry], list[tuple[Workload, str]]]:
    """Queue entries in order, and the workloads to reject with their reasons. ``debug``:
    the policy's debug rule (None: no workload is a debug workload)."""
    dmax_gpus = debug.max_gpus if debug is not None else -1
    dmax_min = debug.max_min_runtime_s if debug is not None else -1.0
    dnote = (f"debug workload (at most {dmax_gpus} GPUs, min runtime at most "
             f"{dmax_min / 60:g} min): queued ahead of other allocated work")
    entries: list[Entry] = []
    rejects: list[tuple[Workload, str]] = []
    for w in pending:
        c = w.contract
        if w.invalid:
            rejects.append((w, w.invalid))
            continue
        if c.gpus_per_pod < 1 or c.pods < 1:
            rejects.append((w, f"asks for {c.pods} pods x {c.gpus_per_pod} GPUs; "
                               f"both must be at least 1"))
            continue
        if c.min_runtime_s > 0 and c.budget is not None and c.budget in ranks:  # allocated
            lr = ranks[c.budget]
            if c.gpus_per_pod * c.pods <= dmax_gpus and c.min_runtime_s <= dmax_min:
                entries.append(Entry(w, c.budget, lr, dnote,
                                     (0, lr.rank, -c.priority, w.submitted_at, w.id), True))
            else:
                entries.append(Entry(w, c.budget, lr, "", (1, lr.rank, -c.priority, w.submitted_at, w.id)))
        else:
            leaf, note = charged_leaf(w, ranks)
            entries.append(Entry(w, None, None, note, (2, 0, 0, w.submitted_at, w.id)))
    entries.sort(key=itemgetter(4))
    rejects.sort(key=lambda r: r[0].id)
    return entries, rejects
