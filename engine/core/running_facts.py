"""What a decision derives from one running workload alone, remembered across decisions.

Every pass walks all running work (hundreds of workloads at simulator scale): the GPUs it
holds, its charged leaf, its charge rate for the anti-ping-pong projection, its release for
reservations. These depend only on the (frozen) :class:`~engine.core.types.Running`, the
budget tree and the billing weight of each node, and a shell passes the same ``Running``
objects decision after decision while they run, so :class:`RunningFacts` computes them once
per object.

``Facts`` of a running workload: ``(workload id, assignments, GPUs, charged leaf or None,
charge rate, its release entry)``, where the charged leaf is its budget when it is allocated (a budget
and a min runtime above 0) and a leaf of the tree (as :func:`~engine.core.queue.charged_leaf`
says), the charge rate is ``sum(gpus x node weight)`` in assignment order (the floats of
``_Pass.rate_of``), and the release entry is ``((protected_until, id, assignments), id,
charged leaf)`` (:class:`~engine.core.releases.Releases`: the entry of protected work).

A cache of a pure function: decisions do not depend on it. Objects are recognised by
identity (each remembered ``Running`` is kept alive, so its id is not reused meanwhile), for
one (tree, node weights) pair at a time (both compared by identity: a new tree or weights
start afresh). Bounded: cleared past ``limit`` entries.

:func:`survey` is a pass's one walk over running work, built from those facts: the GPUs used
per node, each workload's release entry, the charges for the projection, and the work past
its protection (the victims, with their GPUs per leaf and per rank).
"""

from __future__ import annotations

from typing import Iterable, Mapping, NamedTuple

from engine.core.types import LeafRank, Running
from engine.model import BudgetTree

Facts = tuple  # (workload id, assignments, GPUs, charged leaf or None, charge rate, release entry)


class RunningFacts:
    """:data:`Facts` per running workload (module docstring)."""

    def __init__(self, limit: int = 16384):
        self.limit = limit
        self._tree: BudgetTree | None = None
        # a placeholder no caller holds: the first :meth:`table` starts afresh (its tree is new)
        self._weights: Mapping[str, float] = {}
        self._leaves: frozenset[str] = frozenset()
        self.remembered: dict[int, tuple[Running, Facts]] = {}  # id -> (running, its facts)

    def table(self, tree: BudgetTree, node_weight: Mapping[str, float]
              ) -> dict[int, tuple[Running, Facts]]:
        """The remembered facts for ``tree`` and ``node_weight`` (a node's billing weight, 1.0
        when absent), by ``id(running)``; an entry counts only if its running *is* the one
        looked up. Read it, and call :meth:`facts` on a miss."""
        if tree is not self._tree or node_weight is not self._weights:
            self.remembered.clear()
            self._tree, self._weights = tree, node_weight
            self._leaves = frozenset(tree.leaves_under()[tree.root])
        elif len(self.remembered) >= self.limit:
            self.remembered.clear()
        return self.remembered

    def facts(self, r: Running) -> Facts:
        """Compute and remember ``r``'s facts (for the tree and weights of the last
        :meth:`table`)."""
        w, c = r.workload, r.workload.contract
        weight = self._weights
        assignments = r.placement.assignments
        gpus = 0
        rate = 0.0
        for n, g in assignments:
            gpus += g
            rate = rate + g * weight.get(n, 1.0)
        budget = c.budget
        leaf = budget if budget is not None and c.min_runtime_s > 0 and budget in self._leaves else None
        found = (w.id, assignments, gpus, leaf, rate, ((r.protected_until, w.id, assignments), w.id, leaf))
        self.remembered[id(r)] = (r, found)
        return found


class Survey(NamedTuple):
    """A pass's running work (evicted work left out), from :func:`survey`."""

    used: dict[str, int]  # GPUs used per node
    held: list[tuple[Running, str | None, tuple]]  # (running, charged leaf, release entry)
    charges: list[tuple[str, float, float]]  # (leaf, rate, protected seconds left)
    prey: list[tuple[Running, str | None, int]]  # past its protection: (running, leaf, rank)
    by_leaf: dict[str | None, int]  # the victims' GPUs per leaf (None: unallocated)
    at_rank: dict[int, int]  # the victims' GPUs per leaf rank (``unranked``: unallocated)
    held_gpus: int  # GPUs of all of it


def survey(facts: RunningFacts, running: Iterable[Running], tree: BudgetTree,
           node_weight: Mapping[str, float], evicted: set[str], ranks: Mapping[str, LeafRank],
           unranked: int, now: float) -> Survey:
    """One walk over ``running`` (the set-up's hot part), each workload's facts read from
    ``facts`` (computed on a miss); work in ``evicted`` is left out. A victim is work whose
    protection has ended by ``now``; unallocated victims count at rank ``unranked``."""
    used: dict[str, int] = {}
    held: list[tuple[Running, str | None, tuple]] = []
    charges: list[tuple[str, float, float]] = []
    prey: list[tuple[Running, str | None, int]] = []
    by_leaf: dict[str | None, int] = {}
    at_rank: dict[int, int] = {}
    held_gpus = 0
    table, add_held = facts.table(tree, node_weight), held.append
    for r in running:
        hit = table.get(id(r))
        wid, assignments, gpus, leaf, rate, entry = (
            hit[1] if hit is not None and hit[0] is r else facts.facts(r))
        if wid in evicted:
            continue
        for n, g in assignments:
            used[n] = used.get(n, 0) + g
        held_gpus += gpus
        add_held((r, leaf, entry))
        protected_until = r.protected_until
        if leaf is not None:
            charges.append((leaf, rate, protected_until - now))
        if now >= protected_until:  # preemptible: a victim (built when first searched)
            rank = ranks[leaf].rank if leaf is not None else unranked
            prey.append((r, leaf, rank))
            by_leaf[leaf] = by_leaf.get(leaf, 0) + gpus
            at_rank[rank] = at_rank.get(rank, 0) + gpus
    return Survey(used, held, charges, prey, by_leaf, at_rank, held_gpus)
