"""The anti-ping-pong rule for one decision, answered fast.

:mod:`engine.core.preemption` states the rule: a preemptor's leaf, charged its whole
protected run plus what its running work adds (``ahead``), must still sort before the
victim's leaf, charged only its certain usage (``behind``), at the level where their paths
split (:func:`~engine.core.fairshare.still_ranks_above`); the leaves that pass, for one
preemptor, are :func:`~engine.core.fairshare.outranked_after_charge`. A busy decision asks
this hundreds of times while every admission and preemption moves the projection, so
:class:`PingPongLeaves` answers from a :class:`~engine.core.fairshare.ChargeOrder` that
follows the projection instead of recomputing every sibling's key each time, or, for a min
runtime asked about only a few times (a busy queue has a hundred distinct ones), from each
path's siblings sorted once per decision by their keys with nothing charged, and the largest
of their keys charged in full, kept while the projection stays, which settles most questions
without looking at any sibling (:meth:`PingPongLeaves._tops`). Its answers
are those of the two functions, from the same floats; nothing is kept across decisions.
"""

from __future__ import annotations

import math
from bisect import bisect_right
from typing import Mapping

from engine.core.fairshare import ChargeOrder, level_fairshare, still_ranks_above
from engine.core.projection import Projection
from engine.model import BudgetTree


class PingPongLeaves:
    """For one decision: the leaves whose work past its min runtime a preemptor of a given
    leaf and charge may take under the anti-ping-pong rule, i.e.
    ``outranked_after_charge(tree, usage, leaf, extra, leaves_under, proj.ahead(m),
    proj.behind(m)) & lower`` (``lower``: the leaves ranked below the preemptor), as the
    projection moves.

    The first few questions at a min runtime ``m`` test the siblings of the preemptor's path
    as that function does, skipping those that sort after it with nothing charged. From the
    :data:`ORDER_AFTER`-th on (a busy decision asks hundreds), a
    :class:`~engine.core.fairshare.ChargeOrder` for ``m`` keeps the siblings sorted and is
    told of the protected runs added since it last looked (only they change ``behind``);
    its sets are cached by what they are made of (leaf, ``lower``, siblings taken at each
    level), so equal sets are the same object. Both give the same sets."""

    def __init__(self, tree: BudgetTree, usage: Mapping[str, float], proj: Projection):
        self.tree, self.usage, self.proj = tree, usage, proj
        self._under: Mapping[str, tuple[str, ...]] = {}
        self._all: frozenset[str] = frozenset()  # every leaf
        self._calls: dict[float, int] = {}  # m -> questions so far
        self._orders: dict[float, ChargeOrder] = {}
        self._seen: dict[float, int] = {}  # m -> protected runs its order has been told of
        self._sets: dict[tuple, frozenset[str]] = {}  # (leaf, lower, levels) -> the leaves
        self._levels: dict[tuple, tuple] = {}  # (leaf, extra, m) -> (projection version, levels)
        self._plain: dict[str, tuple] = {}  # leaf -> its path's siblings, uncharged (_static)
        self._taken: dict[tuple, frozenset[str]] = {}  # (leaf, lower, siblings taken) -> leaves
        self._tops_of: dict[str, tuple[int, tuple]] = {}  # leaf -> (projection version, _tops)

    def _order(self, m: float) -> ChargeOrder | None:
        """Count a question at ``m``; from the :data:`ORDER_AFTER`-th on, its order, up to date."""
        if not self._under:
            self._under = self.tree.leaves_under()
            self._all = frozenset(self._under[self.tree.root])
        proj = self.proj
        order = self._orders.get(m)
        if order is None:
            calls = self._calls[m] = self._calls.get(m, 0) + 1
            if calls < ORDER_AFTER:
                return None
            order = ChargeOrder(self.tree, self.usage, proj.behind(m), proj.rate, m)
            self._orders[m] = order
            self._seen[m] = len(proj.protected)
        elif self._seen[m] != len(proj.protected):
            order.changed([path for path, _, _ in proj.protected[self._seen[m]:]])
            self._seen[m] = len(proj.protected)
        return order

    def leaves(self, leaf: str, charge: tuple[float, float],
               lower: frozenset[str]) -> frozenset[str]:
        """The leaves of ``lower`` a preemptor of ``leaf`` may take; ``charge`` = (GPU-seconds
        its protected run charges, its min runtime)."""
        extra, m = charge
        order = self._order(m)
        if order is None:
            return self._few_leaves(leaf, extra, m, lower)
        return self._sorted_leaves(order, leaf, extra, m, lower)

    def _static(self, leaf: str) -> tuple[tuple[str, float, float, list[tuple], list[tuple]], ...]:
        """Per level of ``leaf``'s path: (path node, its share, its usage, its siblings' sort
        keys with nothing charged, ascending, and (key, share, usage) in the same order). The
        usage is the pass's, so these hold for the whole decision."""
        found = self._plain.get(leaf)
        if found is None:
            tree, usage = self.tree, self.usage
            path, levels = tree.path(leaf), []
            for depth in range(1, len(path)):
                mine = path[depth]
                sibs = []
                for sib in tree.children(path[depth - 1]):
                    if sib != mine:
                        ss, us = tree.nodes[sib].share_pct, usage.get(sib, 0.0)
                        sibs.append(((-level_fairshare(ss, us), -ss, us, sib), ss, us))
                sibs.sort()  # (keys differ: they end with the name)
                levels.append((mine, tree.nodes[mine].share_pct, usage.get(mine, 0.0),
                               [k for k, _, _ in sibs], sibs))
            found = self._plain[leaf] = tuple(levels)
        return found

    def _tops(self, leaf: str) -> tuple[tuple[list, list], ...]:
        """Per level of ``leaf``'s path (as :meth:`_static`): each sibling's sort key charged
        its bound (every protected run in full, whatever ``m``), and ``tops[i]``, the largest
        of the first ``i`` of them (None for none). While the projection stays, these hold for
        every charge and min runtime asked about."""
        hit = self._tops_of.get(leaf)
        version = self.proj.version
        if hit is not None and hit[0] == version:
            return hit[1]
        bound = self.proj.behind(math.inf)
        out = []
        for _, _, _, _, sibs in self._static(leaf):
            keys: list[tuple] = []
            tops: list = [None]
            best: tuple | None = None
            for (_, _, _, sib), ss, us in sibs:
                top = us + bound.get(sib, 0.0)
                key = (-level_fairshare(ss, top), -ss, top, sib)
                keys.append(key)
                if best is None or key > best:
                    best = key
                tops.append(best)
            out.append((keys, tops))
        found = tuple(out)
        self._tops_of[leaf] = (version, found)
        return found

    def _few_leaves(self, leaf: str, extra: float, m: float,
                    lower: frozenset[str]) -> frozenset[str]:
        """``outranked_after_charge(...) & lower`` (see :meth:`leaves`), from the siblings'
        uncharged keys sorted once per pass: a sibling whose key with nothing charged sorts
        after the charged path node's is taken without looking at its charge (charges only
        raise a key); the others are tested as that function tests them, bound first (the
        bound keys: :meth:`_tops`, kept while the projection stays). When the charged path
        node's key is no smaller than every one of those bound keys, none passes its bound
        test and none is looked at (most questions of a busy walk)."""
        rate = self.proj.rate
        behind: Mapping[str, float] | None = None
        taken: list[str] = []
        for (mine, sm, used, keys, sibs), (bounds, tops) in zip(self._static(leaf),
                                                                self._tops(leaf)):
            r = rate.get(mine)
            um = used + extra + (r * m if r is not None else 0.0)
            key = (-level_fairshare(sm, um), -sm, um, mine)
            after = bisect_right(keys, key)
            if after and key < tops[after]:
                if behind is None:
                    behind = self.proj.behind(m)
                for i in range(after):
                    if not key < bounds[i]:
                        continue
                    (_, _, _, sib), ss, us = sibs[i]
                    us += behind.get(sib, 0.0)
                    if key < (-level_fairshare(ss, us), -ss, us, sib):
                        taken.append(sib)
            taken.extend(k[3] for k in keys[after:])
        asked = (leaf, lower, tuple(taken))
        found = self._taken.get(asked)
        if found is None:
            under = self._under
            found = self._taken[asked] = frozenset(x for sib in taken for x in under[sib]) & lower
        return found

    def still_above(self, winner: str, loser: str, extra: float, m: float) -> bool:
        """``still_ranks_above(tree, usage, winner, loser, extra, proj.ahead(m), proj.behind(m))``,
        the test of one pair (where their paths split), i.e. ``loser`` is among the leaves
        :meth:`leaves` gives with every leaf ranked lower."""
        order = self._order(m)
        if order is None:
            return still_ranks_above(self.tree, self.usage, winner, loser, extra,
                                     self.proj.ahead(m), self.proj.behind(m))
        return loser in self._sorted_leaves(order, winner, extra, m, self._all)

    def _sorted_leaves(self, order: ChargeOrder, leaf: str, extra: float, m: float,
                       lower: frozenset[str]) -> frozenset[str]:
        asked = (leaf, extra, m)
        hit = self._levels.get(asked)
        if hit is not None and hit[0] == self.proj.version:
            levels = hit[1]
        else:
            levels = order.outranked(leaf, extra)
            self._levels[asked] = (self.proj.version, levels)
        key = (leaf, lower, levels)
        found = self._sets.get(key)
        if found is None:
            path, under = self.proj._path(leaf), self._under
            out: list[str] = []
            for depth, siblings in enumerate(levels, 1):
                for sib in siblings:
                    if sib != path[depth]:
                        out.extend(under[sib])
            found = self._sets[key] = frozenset(out) & lower
        return found


ORDER_AFTER = 4  # questions at one min runtime in a decision before its siblings are kept sorted
