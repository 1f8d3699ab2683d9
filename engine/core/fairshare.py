"""Hierarchical fair share: rank every leaf of the budget tree by SLURM Fair Tree semantics.

Definition (exact)
------------------
Usage is rolled up the tree: an inner node's usage is the sum of its leaves' charged
GPU-seconds over the lookback window. At every inner node, its children (siblings) are
ordered by their *level fair share*::

    S  = share_pct / sum(share_pct of the siblings)       (normalised share among siblings)
    U  = usage(node) / usage(parent)                       (fraction of the parent's usage)
    LF = S / U                                             (level fair share; higher = served first)

The tree is then walked depth-first, visiting children in that order, and leaves are ranked
1, 2, 3, ... in visit order. A whole under-served subtree is therefore served before any
leaf of an over-served sibling subtree, whatever happens deeper down: exactly SLURM's Fair
Tree (https://slurm.schedmd.com/fair_tree.html), with one simplification: SLURM merges the
children of siblings whose LF ties; here ties are broken deterministically (below).

Edge cases
----------
* Zero usage (``U = 0``) with a positive share: ``LF = inf``: the node is served first.
  A parent with zero usage gives ``U = 0`` to all its children, so they are all ``inf``
  and order by the tie rule, i.e. by share.
* Zero share (``S = 0``): ``LF = 0`` whatever the usage (a 0% budget is entitled to nothing):
  served after every positive-share sibling.
* Ties (equal LF, including several ``inf``): higher share first, then lower usage, then
  node name (alphabetical). Every rank is unique and the order is fully deterministic.
* Leaves with no demand are ranked like any other (rank is a property of budgets and usage,
  not of the queue); they simply have nothing waiting to be ordered. Their usage still counts
  in their parents' usage, as in SLURM.
* Usage of names that are not leaves of the tree is ignored.

What users see
--------------
``LeafRank.metric`` = (leaf usage / total usage) / (leaf effective share): 1.0 = on budget,
below 1 = under-served, above 1 = over-served; 0 when nothing was used at all; ``inf`` for a
0% leaf that used something. ``LeafRank.levels`` carries ``(node, S, U, LF)`` for every level
from the top of the tree down to the leaf, so the rank can be explained with its numbers.
"""

from __future__ import annotations

import math
from bisect import bisect_left, bisect_right
from operator import itemgetter
from typing import Iterable, Mapping, Sequence

from engine.core.ledger import rollup_usage
from engine.core.types import LeafRank, LevelFactor
from engine.model import BudgetTree


def level_fairshare(share: float, usage_fraction: float) -> float:
    """``S / U`` with the edge cases above: ``0`` when ``S == 0``, ``inf`` when ``U == 0``."""
    if share <= 0.0:
        return 0.0
    if usage_fraction <= 0.0:
        return math.inf
    return share / usage_fraction


def _shown_scale(parent_usage: float, total_pct: float) -> float:
    """The factor from a sibling's ``share_pct / usage`` to its ``S / U`` (``parent usage /
    sum of the siblings' share_pct``); 0 when the parent used nothing (then every ``U`` is 0)."""
    return parent_usage / total_pct if parent_usage > 0 and total_pct > 0 else 0.0


def _shown_lf(key: float, scale: float) -> float:
    """``S / U`` from ``share_pct / usage`` (``key``): the same order and ties, since all
    siblings are scaled alike (``inf`` stays ``inf``: no usage, or a parent that used nothing)."""
    if key == math.inf or key == 0.0:
        return key
    return key * scale if scale > 0 else math.inf


def _sibling_factors(tree: BudgetTree, parent: str, used: Mapping[str, float]
                     ) -> list[tuple[tuple, LevelFactor]]:
    """``parent``'s children as ``(sort key, LevelFactor)`` in Fair Tree order: LF first
    (higher first), then share (higher first), then usage, then name (unique).

    The key compares ``share_pct / usage``, the LF up to the factors all siblings share
    (``sum of their share_pct`` and the parent's usage), as :func:`still_ranks_above` and
    :func:`outranked_after_charge` do: one division of the inputs, so two siblings whose LF
    are equal (``1 / 1`` and ``3 / 3``) tie exactly and the tie rule decides, and the three
    functions order siblings alike. (``S / U`` computed from normalised values rounds
    several times and could split such a tie either way.) The LevelFactor keeps the
    normalised ``S``, ``U`` and ``LF`` for the explanation."""
    parent_usage = used[parent]
    keyed = []
    new = tuple.__new__  # (a LevelFactor without the named tuple's Python-level __new__)
    nodes = tree.nodes
    kids = tree.children(parent)
    scale = _shown_scale(parent_usage, tree.sibling_total(parent))
    for k, s in zip(kids, tree.sibling_shares(parent)):  # S: normalised share
        usage = used[k]
        u = usage / parent_usage if parent_usage > 0 else 0.0
        pct = nodes[k].share_pct
        f = level_fairshare(pct, usage)
        keyed.append(((-f, -pct, usage, k), new(LevelFactor, (k, s, u, _shown_lf(f, scale)))))
    keyed.sort(key=itemgetter(0))
    return keyed


def sibling_factors(tree: BudgetTree, parent: str, used: Mapping[str, float]) -> list[LevelFactor]:
    """``parent``'s children's :class:`LevelFactor` in Fair Tree order (first served first),
    from the rolled-up ``used``: what :func:`rank_leaves` walks, for an explanation."""
    return [f for _, f in _sibling_factors(tree, parent, used)]


def rank_leaves(tree: BudgetTree, usage: Mapping[str, float],
                used: Mapping[str, float] | None = None) -> dict[str, LeafRank]:
    """Rank every leaf of ``tree`` (1 = served first) from charged usage per leaf. ``used``:
    ``rollup_usage(tree, usage)`` when the caller already has it (saves recomputing it)."""
    if used is None:
        used = rollup_usage(tree, usage)
    total = used[tree.root]
    ranks: dict[str, LeafRank] = {}
    new = tuple.__new__  # (a LeafRank without the named tuple's Python-level __new__)
    # depth-first walk; the stack carries the chain of LevelFactors from the top down
    stack: list[tuple[str, tuple[LevelFactor, ...]]] = [(tree.root, ())]
    while stack:
        name, levels = stack.pop()
        if not tree.children(name):
            share = tree.effective_share(name)
            fraction = used[name] / total if total > 0 else 0.0
            if share > 0:
                metric = fraction / share
            else:
                metric = math.inf if fraction > 0 else 0.0
            ranks[name] = new(LeafRank, (name, len(ranks) + 1, used[name], share, metric, levels))
            continue
        for _, factor in reversed(_sibling_factors(tree, name, used)):
            stack.append((factor.node, levels + (factor,)))
    return ranks


def still_ranks_above(tree: BudgetTree, usage: Mapping[str, float], winner: str, loser: str,
                      extra: float, ahead: Mapping[str, float] | None = None,
                      behind: Mapping[str, float] | None = None) -> bool:
    """Would leaf ``winner`` still be ordered before leaf ``loser`` if ``extra`` GPU-seconds
    were charged to ``winner``? (The anti-ping-pong test of preemption.)

    Fair Tree orders two leaves where their paths split: at their lowest common ancestor P,
    by the level fair share of P's children ``cw`` (containing ``winner``) and ``cl``. Both
    have the same parent, so ``S/U`` compares as ``S_cw / usage(cw)`` vs ``S_cl / usage(cl)``
    (the parent usage cancels); charging ``extra`` to ``winner`` adds it to ``usage(cw)``
    only. Ties use the same rule as :func:`rank_leaves` (share, then usage, then name).
    ``usage`` must be the rolled-up usage of every node. Optional projections (rolled up,
    GPU-seconds per node): ``ahead`` is added to the winner's side (``cw``), ``behind`` to
    the loser's side (``cl``); absent nodes add nothing.
    """
    if winner == loser:
        return False
    pw, pl = tree.path(winner), tree.path(loser)
    depth = 0
    while depth < min(len(pw), len(pl)) and pw[depth] == pl[depth]:
        depth += 1
    cw, cl = pw[depth], pl[depth]
    sw, sl = tree.nodes[cw].share_pct, tree.nodes[cl].share_pct
    uw = usage.get(cw, 0.0) + extra + (ahead.get(cw, 0.0) if ahead else 0.0)
    ul = usage.get(cl, 0.0) + (behind.get(cl, 0.0) if behind else 0.0)
    fw, fl = level_fairshare(sw, uw), level_fairshare(sl, ul)
    return (-fw, -sw, uw, cw) < (-fl, -sl, ul, cl)


def outranked_after_charge(tree: BudgetTree, usage: Mapping[str, float], winner: str, extra: float,
                           leaves_under: Mapping[str, tuple[str, ...]],
                           ahead: Mapping[str, float] | None = None,
                           behind: Mapping[str, float] | None = None,
                           behind_max: Mapping[str, float] | None = None) -> frozenset[str]:
    """Every leaf ``L`` such that ``still_ranks_above(tree, usage, winner, L, extra, ahead,
    behind)``, in O(depth x siblings): at each level of ``winner``'s path, a sibling subtree
    is taken whole when the path node, charged ``extra`` (and ``ahead``), still sorts before
    it (charged ``behind``). ``usage`` is the rolled-up usage; ``leaves_under`` maps each
    node to the leaves of its subtree. Without ``behind``, charging only raises the path
    node's sort key, so these leaves also rank below ``winner`` now; ``behind`` can lift a
    sibling that ranks above ``winner`` now, so callers that need "ranks lower now" too
    must check it.

    ``behind_max`` (optional) bounds ``behind`` from above, node by node, as floats (0 <=
    behind <= behind_max). A sibling's sort key only grows with its charge, so the test is
    settled without looking ``behind`` up when it holds with no charge or fails with the
    bound; only the others read ``behind`` (where a projection sums it on first lookup, this
    spares most sums: the same answer)."""
    out: list[str] = []
    path = tree.path(winner)
    for depth in range(1, len(path)):
        mine = path[depth]
        sm = tree.nodes[mine].share_pct
        um = usage.get(mine, 0.0) + extra + (ahead.get(mine, 0.0) if ahead else 0.0)
        key = (-level_fairshare(sm, um), -sm, um, mine)
        for sib in tree.children(path[depth - 1]):
            if sib == mine:
                continue
            ss = tree.nodes[sib].share_pct
            us = usage.get(sib, 0.0)
            if not key < (-level_fairshare(ss, us), -ss, us, sib):  # (no charge behind)
                if not behind:
                    continue
                if behind_max is not None:
                    top = us + behind_max.get(sib, 0.0)
                    if not key < (-level_fairshare(ss, top), -ss, top, sib):
                        continue
                us += behind.get(sib, 0.0)
                if not key < (-level_fairshare(ss, us), -ss, us, sib):
                    continue
            out.extend(leaves_under[sib])
    return frozenset(out)


class ChargeOrder:
    """:func:`outranked_after_charge` for many winners and charges while the ``behind`` side
    changes a little at a time (one decision's anti-ping-pong checks, for one projection
    horizon ``seconds``; ``ahead`` is ``rate x seconds`` per node).

    The children of each inner node are kept sorted by their sort key with ``behind`` added,
    so the siblings a charged path node still sorts before are a suffix of that order, found
    by bisection; a child's key is recomputed only after :meth:`changed` names it. The keys
    are the tuples :func:`outranked_after_charge` compares, from the same floats, so
    :meth:`outranked` gives the same sets: for each level of the winner's path from the top,
    the names of the siblings taken whole there (the path node's own name may be among them
    and is to be left out). ``behind`` and ``rate`` are read, not copied: call
    :meth:`changed` with the path of every leaf whose ``behind`` charge changed (each node on
    the path may have) before the next call."""

    def __init__(self, tree: BudgetTree, usage: Mapping[str, float], behind: Mapping[str, float],
                 rate: Mapping[str, float], seconds: float):
        self.tree, self.usage, self.behind = tree, usage, behind
        self.rate, self.seconds = rate, seconds
        # winner -> per level: (parent, path node, its share, its usage)
        self._steps: dict[str, tuple[tuple[str, str, float, float], ...]] = {}
        # parent -> (children's keys ascending, their names in the same order, key per child)
        self._sorted: dict[str, tuple[list[tuple], list[str], dict[str, tuple]]] = {}

    def _key(self, node: str) -> tuple:
        share = self.tree.nodes[node].share_pct
        used = self.usage.get(node, 0.0) + (self.behind.get(node, 0.0) if self.behind else 0.0)
        return (-level_fairshare(share, used), -share, used, node)

    def _children(self, parent: str) -> tuple[list[tuple], list[str], dict[str, tuple]]:
        key_of = {k: self._key(k) for k in self.tree.children(parent)}
        keys = sorted(key_of.values())
        found = self._sorted[parent] = (keys, [k[3] for k in keys], key_of)
        return found

    def changed(self, paths: Iterable[Sequence[str]]) -> None:
        """The ``behind`` charge of the nodes on each of ``paths`` (root first) may have changed."""
        moved = {(path[d - 1], path[d]) for path in paths for d in range(1, len(path))}
        for parent, child in moved:
            found = self._sorted.get(parent)
            if found is None:
                continue  # sorted when first needed
            keys, names, key_of = found
            i = bisect_left(keys, key_of[child])
            del keys[i], names[i]
            new = key_of[child] = self._key(child)
            i = bisect_left(keys, new)
            keys.insert(i, new)
            names.insert(i, child)

    def outranked(self, winner: str, extra: float) -> tuple[tuple[str, ...], ...]:
        """Per level of ``winner``'s path, the siblings its path node, charged ``extra`` and
        ``ahead``, still sorts before (its own name possibly among them)."""
        steps = self._steps.get(winner)
        if steps is None:
            path, nodes = self.tree.path(winner), self.tree.nodes
            steps = self._steps[winner] = tuple(
                (path[d - 1], path[d], nodes[path[d]].share_pct, self.usage.get(path[d], 0.0))
                for d in range(1, len(path)))
        rate, seconds, lists = self.rate, self.seconds, self._sorted
        out = []
        for parent, mine, share, used in steps:
            r = rate.get(mine)
            charged = used + extra + (r * seconds if r is not None else 0.0)
            keys, names, _ = lists.get(parent) or self._children(parent)
            key = (-level_fairshare(share, charged), -share, charged, mine)
            out.append(tuple(names[bisect_right(keys, key):]))
        return tuple(out)


def subtree_leaves(tree: BudgetTree) -> dict[str, tuple[str, ...]]:
    """Each node's leaves, in depth-first name order (a copy of the tree's own
    :meth:`~engine.model.BudgetTree.leaves_under`)."""
    return dict(tree.leaves_under())
