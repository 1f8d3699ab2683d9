"""Usage over time: delivered, charged, demanded, entitled and allocated GPU-hours per leaf.

From a view state's runs and demand intervals, over ``[start, now)`` cut into equal bins
(the last one may be partial), per budget leaf:

* ``delivered``: GPU-hours its work ran (allocated or free), as the simulator's metrics count;
* ``charged``: billing-weighted GPU-hours charged to it (allocated runs only): what fair share
  counts;
* ``demand``: GPU-hours its work asked for (GPUs of every workload submitted and not finished);
* ``allocation``: its effective share of the capacity in the bin;
* ``entitled``: its allocation capped by its demand, with what others leave unused
  water-filled down the tree (:func:`engine.sim.entitlement.entitlement`).

Capacity (and so ``allocation``) is the configured GPUs of every cluster; ``entitled`` is
water-filled from the healthy part of it, as the report's is: for a simulated run, less its
nodes out of service from failure to repair (``meta["down"]``); a live state keeps no history
of node health, so all of it. Bins are chosen so there are at most ``max_bins``:
5 min, 15 min, 1 h, 2 h, 6 h, 12 h or 1 day. Values are GPU-hours per bin (not rates).
"""

from __future__ import annotations

import math
from typing import Any, Iterable

import numpy as np

from engine.sim.entitlement import entitlement, hourly_integral
from engine.views.state import ViewState

BIN_CHOICES = (300.0, 900.0, 3600.0, 7200.0, 21600.0, 43200.0, 86400.0)


def pick_bin(span_s: float, max_bins: int = 168) -> float:
    for b in BIN_CHOICES:
        if span_s / b <= max_bins:
            return b
    return BIN_CHOICES[-1]


def _integral(intervals: Iterable[tuple[float, float, float]], t0: float, bins: int,
              bin_s: float) -> np.ndarray:
    items = list(intervals)
    if not items:
        return np.zeros(bins)
    a = np.array([max(s, t0) - t0 for s, _, _ in items], float)
    b = np.array([max(e, t0) - t0 for _, e, _ in items], float)
    w = np.array([g for _, _, g in items], float)
    keep = b > a
    return hourly_integral(a[keep], b[keep], w[keep], bins, bin_s)


def usage_series(state: ViewState, *, span_s: float | None = None, max_bins: int = 168) -> dict[str, Any]:
    """The series above as a JSON-safe dict: ``{"start", "bin_s", "bins", "capacity": [...],
    "leaves": {leaf: {"delivered": [...], "charged": [...], "demand": [...],
    "allocation": [...], "entitled": [...]}}}``; ``span_s`` defaults to the lookback window
    (cut to the oldest data held)."""
    config, now = state.config, state.now
    span = config.policy.lookback_s if span_s is None else span_s
    start = max(now - span, _oldest(state))
    bin_s = pick_bin(max(now - start, 1.0), max_bins)
    start = now - math.ceil((now - start) / bin_s) * bin_s if now > start else now - bin_s
    bins = max(1, round((now - start) / bin_s))
    cap_gpus = sum(c.gpus for c in config.policy.clusters)
    capacity = np.full(bins, cap_gpus * bin_s / 3600.0)
    healthy = capacity - _integral(_down(state), start, bins, bin_s)  # what entitlement fills
    tree = config.tree
    leaves = tree.leaves()
    delivered: dict[str, list] = {leaf: [] for leaf in leaves}
    charged: dict[str, list] = {leaf: [] for leaf in leaves}
    for r in state.runs:
        if r.leaf in delivered:
            end = now if r.end is None else r.end
            delivered[r.leaf].append((r.start, end, r.gpu_count))
            if r.allocated:
                charged[r.leaf].append((r.start, end, r.gpu_count * r.weight))
    wanted = _wanted(state)
    demand = {leaf: _integral(wanted[leaf], start, bins, bin_s) for leaf in leaves}
    entitled = entitlement(tree, healthy, demand)
    out_leaves = {}
    for leaf in leaves:
        share = tree.effective_share(leaf)
        out_leaves[leaf] = {
            "delivered": _round(_integral(delivered[leaf], start, bins, bin_s)),
            "charged": _round(_integral(charged[leaf], start, bins, bin_s)),
            "demand": _round(demand[leaf]),
            "allocation": _round(capacity * share),
            "entitled": _round(entitled[leaf]),
        }
    return {"start": start, "bin_s": bin_s, "bins": bins, "capacity": _round(capacity),
            "leaves": out_leaves}


def totals_start(state: ViewState) -> float:
    """Where the per-team totals (:func:`hourly_entitled`, :func:`delivered_since`) start: the
    lookback window, cut to the run's start (a simulated run starts at 0, as the report's hours
    do; a live state at its oldest data) and, for a run with a warm-up, to the warm-up's end
    (``meta["measure_from"]``), where the report's measured window starts, once the state is
    past it."""
    now = state.now
    start = max(now - state.config.policy.lookback_s, 0.0 if state.source == "sim" else _oldest(state))
    measured = float(state.meta.get("measure_from") or 0.0) if state.source == "sim" else 0.0
    return max(start, measured) if measured < now else start


def hourly_entitled(state: ViewState) -> dict[str, float]:
    """Per leaf, the GPU-hours it was entitled to from :func:`totals_start` to the state's
    instant, water-filled hour by hour from that start as the simulator's report does
    (:mod:`engine.sim.entitlement`; water-filling is not linear in the bin, so the series'
    finer bins would give other totals); the last hour may be short."""
    config, now, tree = state.config, state.now, state.config.tree
    start = totals_start(state)
    if now <= start:
        return {leaf: 0.0 for leaf in tree.leaves()}
    bins = math.ceil((now - start) / 3600.0 - 1e-9)
    cap_gpus = sum(c.gpus for c in config.policy.clusters)
    capacity = np.full(bins, float(cap_gpus))
    capacity[-1] = cap_gpus * (now - start - (bins - 1) * 3600.0) / 3600.0
    capacity -= _integral(_down(state), start, bins, 3600.0)
    wanted = _wanted(state)
    demand = {leaf: _integral(wanted[leaf], start, bins, 3600.0) for leaf in wanted}
    return {leaf: float(v.sum()) for leaf, v in entitlement(tree, capacity, demand).items()}


def delivered_since(state: ViewState, start: float) -> dict[str, float]:
    """Per leaf, the GPU-hours its work ran (allocated or free) from ``start`` to the state's
    instant, as the report's delivered GPU-hours count them."""
    out = {leaf: 0.0 for leaf in state.config.tree.leaves()}
    for r in state.runs:
        if r.leaf in out:
            end = state.now if r.end is None else min(r.end, state.now)
            out[r.leaf] += max(0.0, end - max(r.start, start)) * r.gpu_count / 3600.0
    return out


def _oldest(state: ViewState) -> float:
    """The start of the oldest run or demand the state holds (its instant when none)."""
    return min([r.start for r in state.runs] + [d.start for d in state.demand] + [state.now])


def _down(state: ViewState) -> list[tuple[float, float, float]]:
    """Nodes out of service as (start, end, GPUs), up to the state's instant: a simulated run's
    failures to their repairs (``meta["down"]``), as the report's healthy capacity leaves them
    out; none for a live state, which keeps no history of node health."""
    return [(float(a), min(float(b), state.now), float(g))
            for _node, g, a, b in state.meta.get("down") or () if min(float(b), state.now) > float(a)]


def _wanted(state: ViewState) -> dict[str, list[tuple[float, float, float]]]:
    """Per leaf, its demand as (start, end, GPUs) intervals (open ones end now)."""
    wanted: dict[str, list] = {leaf: [] for leaf in state.config.tree.leaves()}
    for d in state.demand:
        if d.leaf in wanted:
            wanted[d.leaf].append((d.start, state.now if d.end is None else d.end, d.gpus))
    return wanted


def subtree_series(series: dict[str, Any], leaves: Iterable[str]) -> dict[str, list[float]]:
    """Sum the per-leaf series of ``leaves`` (a subtree) key by key."""
    leaves = list(leaves)
    bins = series["bins"]
    out = {}
    for key in ("delivered", "charged", "demand", "allocation", "entitled"):
        total = np.zeros(bins)
        for leaf in leaves:
            total += np.asarray(series["leaves"][leaf][key], float)
        out[key] = _round(total)
    return out


def _round(a: np.ndarray) -> list[float]:
    return [round(float(x), 4) for x in a]
