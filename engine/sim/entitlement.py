"""Entitlement: each team's allocation, capped hour by hour by its demand.

For every hour ``h`` the healthy capacity ``C_h`` (GPU-hours) is divided down the budget tree
by *hierarchical weighted water-filling*: at a node with capacity ``X``, each child ``c``
receives ``min(D_c, lambda * s_c)`` where ``D_c`` is the demand of its subtree in that hour,
``s_c`` its share, and ``lambda`` the largest value with the sum not above
``X * (1 - unallocated_pct/100)``. So a child that wants less than its share keeps only what it
wants and the rest goes to its *siblings* in proportion to their shares (then, if the whole
subtree is satisfied, back up to the parent's siblings); the part a manager left
``unallocated`` is nobody's entitlement. Children's allocations then recurse. A node with an
``unallocated`` part wants, at its parent, its subtree's demand ``/ (1 - unallocated_pct/100)``:
what it must be given for its children to get their demand once that part is kept back (so a
team on an idle cluster is entitled to all it asks, not 90% of it under a 10% part).

A team's demand in an hour is the GPU-hours its work asked for: the GPUs of every task
submitted and not yet finished (queued or running), integrated over the hour. Zero demand
gives zero entitlement; zero share gives zero entitlement (even with demand).
"""

from __future__ import annotations

from typing import Mapping

import numpy as np

from engine.model import BudgetTree


def waterfill(capacity: np.ndarray, demand: np.ndarray, shares: np.ndarray) -> np.ndarray:
    """Split ``capacity`` (H,) among k children with ``demand`` (k, H) by weights ``shares`` (k,).

    Returns (k, H) allocations: ``min(demand, lambda_h * share)`` with ``sum <= capacity``.
    """
    k, hours = demand.shape
    alloc = np.zeros((k, hours))
    active = (shares[:, None] > 0) & (demand > 0)
    left = capacity.astype(float).copy()
    for _ in range(k + 1):
        weight = (shares[:, None] * active).sum(axis=0)
        with np.errstate(divide="ignore", invalid="ignore"):
            lam = np.where(weight > 0, left / weight, 0.0)
        offer = lam[None, :] * shares[:, None] * active
        need = demand - alloc
        sat = active & (need <= offer + 1e-12)
        if not sat.any():
            alloc += offer
            break
        give = np.where(sat, need, 0.0)
        alloc += give
        left = left - give.sum(axis=0)
        active &= ~sat
        if not active.any():
            break
    return alloc


def entitlement(tree: BudgetTree, capacity: np.ndarray,
                demand: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
    """Per leaf, the hourly entitled GPU-hours (arrays of the capacity's length)."""
    hours = len(capacity)
    zero = np.zeros(hours)
    sub: dict[str, np.ndarray] = {}
    keep: dict[str, float] = {}  # per inner node, the part of what it gets its children share
    for name in reversed(tree.walk()):
        kids = tree.children(name)
        if not kids:
            sub[name] = demand.get(name, zero)
            continue
        # what the node must be given for its children to get their demand once its
        # unallocated part is kept back (all of it: nothing they can use)
        keep[name] = 1.0 - tree.nodes[name].unallocated_pct / 100.0
        wanted = sum((sub[c] for c in kids), zero)
        sub[name] = wanted / keep[name] if keep[name] > 0 else zero
    out: dict[str, np.ndarray] = {}
    stack = [(tree.root, capacity.astype(float))]
    while stack:
        name, cap = stack.pop()
        kids = tree.children(name)
        if not kids:
            out[name] = cap
            continue
        usable = cap * keep[name]
        d = np.vstack([sub[c] for c in kids])
        s = np.array([tree.nodes[c].share_pct for c in kids], float)
        alloc = waterfill(usable, d, s)
        for i, c in enumerate(kids):
            stack.append((c, alloc[i]))
    return out


def hourly_integral(starts: np.ndarray, ends: np.ndarray, weights: np.ndarray,
                    hours: int, bin_s: float = 3600.0) -> np.ndarray:
    """Integral of ``sum_i weights_i * [starts_i <= t < ends_i]`` over each bin, in weight-hours.

    Exact for partial overlaps: with ``G(x) = sum_i w_i * clip(x - a_i, 0, b_i - a_i)`` the bin
    ``[e_k, e_k+1)`` gets ``G(e_k+1) - G(e_k)``; G at all edges comes from sorted starts/ends
    and cumulative sums."""
    edges = np.arange(hours + 1) * bin_s
    if len(starts) == 0:
        return np.zeros(hours)

    def ramp(points: np.ndarray) -> np.ndarray:
        order = np.argsort(points, kind="stable")
        p, w = points[order], weights[order]
        cw = np.concatenate([[0.0], np.cumsum(w)])
        cwp = np.concatenate([[0.0], np.cumsum(w * p)])
        idx = np.searchsorted(p, edges, side="left")
        return cw[idx] * edges - cwp[idx]

    g = ramp(starts) - ramp(ends)
    return np.diff(g) / 3600.0
