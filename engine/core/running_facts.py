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
"""

from __future__ import annotations

from typing import Mapping

from engine.core.types import Running
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
