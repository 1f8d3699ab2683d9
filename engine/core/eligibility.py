"""Who a workload may preempt, within one decision pass (the rule, and its per-pass caches).

A workload of leaf ``L`` at rank ``r`` may preempt running work past its min runtime when
that work is unallocated (charged to nobody), or when its leaf ``V`` ranks below ``r`` now
*and* the anti-ping-pong rule holds: charged for its own protected run (``charge``: the
GPU-seconds it would add over its min runtime ``m``, at the dearest billing weight it may land
on), ``L`` would still rank above ``V`` at the end of ``m``, counting every move of this
decision so far (:mod:`engine.core.pingpong` over the pass's
:class:`~engine.core.projection.Projection`). A debug workload uses rank 0 (it outranks every
leaf); see :mod:`engine.core.queue`.

Edge cases: ranks are 1..n, each leaf once, so "below rank 0" is every leaf and "below rank n"
is none; a leaf with no running work past its min runtime adds 0 to the upper bound.

Caches (none changes an answer): anti-ping-pong answers and sets until the projection moves
(its ``version``: an admission or a preemption), the upper bound of preemptible GPUs per set of
leaves until a victim goes (:meth:`Eligibility.victim_gone`), the charge per contract shape,
the leaves below each rank.
"""

from __future__ import annotations

from itertools import repeat
from typing import Callable, Mapping

from engine.core.types import LeafRank
from engine.core.pingpong import PingPongLeaves
from engine.core.projection import Projection
from engine.core.ranksums import RankSums
from engine.core.queue import Entry
from engine.model import BudgetTree


class Eligibility:
    """The preemption-eligibility rule for one pass. ``gpus_by_leaf`` and ``below`` are the
    pass's live counts of victim GPUs (per leaf, None for unallocated; per rank), updated by
    :meth:`victim_gone` as victims go."""

    def __init__(self, tree: BudgetTree, used_tree: Mapping[str, float], proj: Projection,
                 ranks: Mapping[str, LeafRank], weights: Mapping[str, float],
                 cluster_names: Callable[[str | None], tuple[str, ...]],
                 gpus_by_leaf: dict[str | None, int], below: RankSums):
        self.proj, self.ranks, self.weights = proj, ranks, weights
        self.cluster_names = cluster_names
        self.gpus_by_leaf, self.below = gpus_by_leaf, below
        self.all_leaves = frozenset(ranks)  # what a debug workload may preempt
        self._allowed = PingPongLeaves(tree, used_tree, proj)
        self._pingpong: dict[tuple, bool] = {}
        self._ok: dict[tuple, frozenset[str]] = {}  # ok_leaves per (leaf, rank, charge)
        self._version = proj.version
        self._weight: dict[str | None, float] = {}
        self._upper: dict[frozenset, tuple[int, int]] = {}
        self._charge: dict[tuple, tuple[float, float]] = {}  # charge_of per contract shape
        self._lower: dict[int, frozenset[str]] = {}
        self._by_rank: tuple[str, ...] | None = None
        self._gone_version = 0  # bumped whenever a victim is preempted
        self._victims_below: dict[int, tuple[int, frozenset[str]]] = {}

    def victim_gone(self, leaf: str | None, rank: int, gpus: int) -> None:
        """A victim (of ``leaf`` at ``rank``, holding ``gpus``) was preempted: the live counts
        drop and upper bounds are stale."""
        self.gpus_by_leaf[leaf] -= gpus
        self.below.add(rank, -gpus)
        self._gone_version += 1

    def _fresh(self) -> None:
        """Drop anti-ping-pong caches once the projection moved (an admission or preemption)."""
        if self._version != self.proj.version:
            self._version = self.proj.version
            self._pingpong.clear()
            self._ok.clear()

    def pingpong_ok(self, winner: str, loser: str, extra: float, m: float) -> bool:
        self._fresh()
        key = (winner, loser, extra, m)
        ok = self._pingpong.get(key)
        if ok is None:
            ok = self._pingpong[key] = self._allowed.still_above(winner, loser, extra, m)
        return ok

    def charge_of(self, e: Entry) -> tuple[float, float]:
        """GPU-seconds a workload's protected run will charge its leaf (at the dearest billing
        weight it may land on), and its min runtime."""
        c = e.workload.contract
        key = (c.gpus, c.min_runtime_s, c.cluster)
        hit = self._charge.get(key)
        if hit is not None:
            return hit
        weight = self._weight.get(c.cluster)
        if weight is None:
            clusters = self.cluster_names(c.cluster) or sorted(self.weights)
            weight = self._weight[c.cluster] = max((self.weights.get(x, 1.0) for x in clusters),
                                                   default=1.0)
        hit = self._charge[key] = (c.gpus * c.min_runtime_s * weight, c.min_runtime_s)
        return hit

    def ok_leaves(self, leaf: str, rank: int, charge: tuple[float, float]) -> frozenset[str]:
        """Leaves whose work past its min runtime a workload of ``leaf`` (``charge``) may
        preempt: ranked lower now and passing the anti-ping-pong rule (remembered until the
        projection moves: a step that searched for victims asks again to reserve)."""
        self._fresh()
        key = (leaf, rank, charge)
        found = self._ok.get(key)
        if found is None:
            found = self._ok[key] = self._allowed.leaves(leaf, charge, self.lower(rank))
        return found

    def ok_victim_leaves(self, leaf: str, rank: int, charge: tuple[float, float]) -> frozenset[str]:
        """``ok_leaves(leaf, rank, charge)`` among the leaves with work past its min runtime
        now (all a victim search looks at); no anti-ping-pong test at all when no leaf ranked
        below ``rank`` has such work."""
        below = self.victims_below(rank)
        if not below:
            return below
        return self.ok_leaves(leaf, rank, charge) & below

    def victims_below(self, rank: int) -> frozenset[str]:
        """Leaves ranked below ``rank`` with work past its min runtime now (kept until a
        victim goes)."""
        hit = self._victims_below.get(rank)
        if hit is None or hit[0] != self._gone_version:
            held = self.gpus_by_leaf
            hit = self._victims_below[rank] = (self._gone_version, frozenset(
                [x for x in self.lower(rank) if held.get(x, 0) > 0]))
        return hit[1]

    def preemptible_upper(self, ok: frozenset[str]) -> int:
        """Upper bound of the GPUs preemption could free for a workload allowed ``ok`` leaves
        (cached per set until a victim goes; every leaf: all victims' GPUs)."""
        if ok is self.all_leaves:
            return self.below.total
        hit = self._upper.get(ok)
        if hit is None or hit[0] != self._gone_version:
            held = self.gpus_by_leaf.get
            hit = self._upper[ok] = (self._gone_version,
                                     held(None, 0) + sum(map(held, ok, repeat(0))))
        return hit[1]

    def lower(self, rank: int) -> frozenset[str]:
        """Leaves ranked strictly below ``rank`` (rank 0: every leaf)."""
        found = self._lower.get(rank)
        if found is None:
            if self._by_rank is None:  # leaves in rank order (ranks are 1..n, each once)
                self._by_rank = tuple(sorted(self.ranks, key=lambda x: self.ranks[x].rank))
            found = self._lower[rank] = frozenset(self._by_rank[max(0, rank):])
        return found
