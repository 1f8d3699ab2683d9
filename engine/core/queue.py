"""Queue order: who is considered first for free GPUs and for preemption.

Rules:

1. Workloads whose contract was refused (``Workload.invalid``) or whose shape is impossible
   (fewer than one pod or one GPU per pod) are rejected with the reason; they never queue.
2. Allocated work (charged to a leaf of the current budget tree) comes first, ordered by its
   leaf's Fair Tree rank (1 first), then priority (higher first; priority only ever orders
   work of one leaf because the rank is compared before it), then submit time (earlier
   first), then workload id.
3. Unallocated work (no budget, min runtime 0, a budget the submitter may not charge, or a
   budget that no longer exists in the tree) comes after all allocated work, ordered by
   submit time then id. Priority does not apply to it: it belongs to no leaf.
"""

from __future__ import annotations

from operator import itemgetter
from typing import Iterable, Mapping, NamedTuple

from engine.core.types import LeafRank, Workload


class Entry(NamedTuple):
    """A queued workload with what ordering needs: its charged leaf (None = unallocated) and
    its sort ``key`` (an immutable tuple: cheap to build for thousands of workloads)."""

    workload: Workload
    leaf: str | None
    rank: LeafRank | None
    note: str
    key: tuple


def charged_leaf(workload: Workload, ranks: Mapping[str, LeafRank]) -> tuple[str | None, str]:
    """The leaf ``workload`` is charged to in this tree, or None and why not."""
    c = workload.contract
    if not c.allocated:
        return None, c.note or ("runs unallocated: min runtime 0" if c.budget is not None
                                else "runs unallocated: no budget")
    if c.budget not in ranks:
        return None, f"runs unallocated: budget {c.budget!r} is not a leaf of the current budget tree"
    return c.budget, ""


def build_queue(pending: Iterable[Workload], ranks: Mapping[str, LeafRank]
                ) -> tuple[list[Entry], list[tuple[Workload, str]]]:
    """Queue entries in order, and the workloads to reject with their reasons."""
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
            entries.append(Entry(w, c.budget, lr, "", (0, lr.rank, -c.priority, w.submitted_at, w.id)))
        else:
            leaf, note = charged_leaf(w, ranks)
            entries.append(Entry(w, None, None, note, (1, 0, 0, w.submitted_at, w.id)))
    entries.sort(key=itemgetter(4))
    rejects.sort(key=lambda r: r[0].id)
    return entries, rejects
