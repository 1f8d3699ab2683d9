"""Metrics of one simulation run, and its stable JSON summary.

* **Queue wait** of a task: from submission to its *first* start. A task still queued at the
  horizon counts with its wait so far (``censored``: a lower bound), so a scheduler cannot look
  good by never starting work. Percentiles are numpy's linear interpolation. Classes: ``debug``,
  ``small``, ``large`` (gangs of 64 GPUs or more); teams are budget leaves (``(none)`` for
  work with no leaf).
* **Preemptions** and the **GPU-hours lost** to them (run time not kept as progress: the whole
  run for non-resumable work, the checkpoint loss and restart overhead for resumable work).
* **Occupancy**: busy GPU-time on healthy nodes over healthy GPU-time. **Unallocated share**:
  GPU-time of unallocated (free, uncharged) runs over all delivered GPU-time.
* **Entitlement** (``engine.sim.entitlement``): per team and hour, the allocation capped by
  demand; **delivered** is the GPU-time the team's work ran (allocated or free). A team has
  *enough demand* when its demand reached its nominal share of capacity in at least half of the
  hours; ``teams_at_95`` counts those teams delivered at least 95% of their entitlement.
* **Idle GPU-time by cause** (``idle``, measured by the loop, :mod:`engine.sim.idle`): the
  capacity's GPU-hours split into ``busy`` (healthy GPUs running work), ``no_work``,
  ``fragmentation``, ``lag``, ``reserved`` (idle healthy GPUs, by why) and ``unhealthy`` (nodes
  out of service), each with its share of capacity; ``busy / (capacity - unhealthy)`` is the
  occupancy.
* **Demand ratio**: ``offered`` is the trace's GPU-time inside the horizon over capacity;
  ``queued_mean`` the time-average of (GPUs asked by queued and running work) / capacity.

``SUMMARY_KEYS`` lists the top-level keys of ``summary``; they never change meaning.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from engine.sim.entitlement import entitlement, hourly_integral
from engine.sim.prepare import capacity as config_capacity, demand_ratio
from engine.sim.trace import CLASSES

SUMMARY_KEYS = ("scheduler", "horizon_s", "tasks", "waits", "preemptions", "gpu_hours",
                "occupancy", "unallocated_share", "demand_ratio", "entitlement", "teams",
                "drain", "decide_calls", "idle")
NO_LEAF = "(none)"


def _r(x: float, nd: int = 4) -> float:
    return float(round(float(x), nd))


def wait_stats(waits: list[float], censored: int) -> dict[str, Any]:
    if not waits:
        return {"n": 0, "censored": 0, "p50_s": None, "p90_s": None, "p99_s": None, "mean_s": None}
    arr = np.asarray(waits, float)
    p50, p90, p99 = np.percentile(arr, [50, 90, 99])
    return {"n": len(waits), "censored": censored, "p50_s": _r(p50, 1), "p90_s": _r(p90, 1),
            "p99_s": _r(p99, 1), "mean_s": _r(arr.mean(), 1)}


def idle_summary(idle: dict[str, float], capacity_gpu_s: float) -> dict[str, Any]:
    """GPU-hours and share of capacity per :data:`engine.sim.idle.BUCKETS` bucket."""
    from engine.sim.idle import BUCKETS

    return {k: {"gpu_h": _r(idle.get(k, 0.0) / 3600.0, 2),
                "share": _r(idle.get(k, 0.0) / capacity_gpu_s if capacity_gpu_s > 0 else 0.0)}
            for k in BUCKETS}


@dataclass
class Metrics:
    summary: dict[str, Any]
    hours: int
    capacity_h: np.ndarray  # healthy GPU-hours per hour
    delivered_h: dict[str, np.ndarray]  # per team
    entitled_h: dict[str, np.ndarray]
    demand_h: dict[str, np.ndarray]
    waits_by_class: dict[str, np.ndarray]


def _healthy_intervals(result) -> dict[str, list[tuple[float, float]]]:
    out: dict[str, list[tuple[float, float]]] = {}
    for node, failed, _empty, repaired in result.failures:
        out.setdefault(node, []).append((failed, result.horizon if repaired is None else repaired))
    return out


def compute_metrics(result) -> Metrics:
    horizon = result.horizon
    tree = result.config.tree
    hours = max(1, math.ceil(horizon / 3600.0 - 1e-9))
    cap_gpus = config_capacity(result.config)
    gpn = {f"{c.name}-n{i:04d}": c.gpus_per_node for c in result.config.policy.clusters
           for i in range(c.nodes)}
    down = _healthy_intervals(result)

    # -------------------------------------------------------------- waits
    groups: dict[tuple[str, str], list[float]] = {}
    cens: dict[tuple[str, str], int] = {}
    for rec in result.tasks.values():
        if rec.state == "rejected" and rec.first_start is None:
            continue
        w = rec.wait if rec.first_start is not None else horizon - rec.submit
        c = rec.first_start is None
        team = rec.leaf or NO_LEAF
        for key in (("all", ""), ("class", rec.klass), ("team", team)):
            groups.setdefault(key, []).append(w)
            cens[key] = cens.get(key, 0) + c
    waits = {"overall": wait_stats(groups.get(("all", ""), []), cens.get(("all", ""), 0)),
             "by_class": {k: wait_stats(groups.get(("class", k), []), cens.get(("class", k), 0))
                          for k in CLASSES},
             "by_team": {t: wait_stats(v, cens[("team", t)])
                         for (kind, t), v in sorted(groups.items()) if kind == "team"}}

    # -------------------------------------------------------------- GPU time
    segs = result.segments
    n = len(segs)
    s_start = np.fromiter((s.start for s in segs), float, n)
    s_end = np.fromiter((s.end for s in segs), float, n)
    s_gpus = np.fromiter((s.gpu_count for s in segs), float, n)
    s_alloc = np.fromiter((s.allocated for s in segs), bool, n)
    gpu_s = (s_end - s_start) * s_gpus
    delivered = float(gpu_s.sum())
    unalloc = float(gpu_s[~s_alloc].sum())
    busy_unhealthy = 0.0
    down_total = 0.0
    for node, spans in down.items():
        for a, b in spans:
            down_total += (b - a) * gpn.get(node, 0)
    if down:
        for s in segs:
            for node, idx in s.gpus:
                for a, b in down.get(node, ()):
                    busy_unhealthy += max(0.0, min(b, s.end) - max(a, s.start)) * len(idx)
    healthy_gpu_s = cap_gpus * horizon - down_total
    occupancy = (delivered - busy_unhealthy) / healthy_gpu_s if healthy_gpu_s > 0 else 0.0
    lost = sum(r.gpu_s_lost for r in result.tasks.values())
    preemptions = sum(r.preemptions for r in result.tasks.values())

    # -------------------------------------------------------------- hourly series
    down_s = np.array([a for sp in down.values() for a, _ in sp], float)
    down_e = np.array([b for sp in down.values() for _, b in sp], float)
    down_w = np.array([gpn.get(nd, 0) for nd, sp in down.items() for _ in sp], float)
    capacity_h = np.full(hours, cap_gpus * 1.0)
    capacity_h[-1] = cap_gpus * (horizon - (hours - 1) * 3600.0) / 3600.0
    capacity_h -= hourly_integral(down_s, down_e, down_w, hours)
    leaves = list(tree.leaves())
    seg_leaf = np.array([s.leaf or NO_LEAF for s in segs], object)
    recs = [r for r in result.tasks.values()]
    r_leaf = np.array([r.leaf or NO_LEAF for r in recs], object)
    r_sub = np.fromiter((r.submit for r in recs), float, len(recs))
    r_end = np.fromiter((horizon if r.end is None else r.end for r in recs), float, len(recs))
    r_gpus = np.fromiter((r.gpus for r in recs), float, len(recs))
    delivered_h, demand_h = {}, {}
    for leaf in leaves:
        m = seg_leaf == leaf
        delivered_h[leaf] = hourly_integral(s_start[m], s_end[m], s_gpus[m], hours)
        m = r_leaf == leaf
        demand_h[leaf] = hourly_integral(r_sub[m], r_end[m], r_gpus[m], hours)
    entitled_h = entitlement(tree, capacity_h, demand_h)
    teams: dict[str, Any] = {}
    ok = enough_n = 0
    worst = None
    ent_total = deliv_capped = 0.0
    for leaf in leaves:
        share = tree.effective_share(leaf)
        ent = float(entitled_h[leaf].sum())
        dlv = float(delivered_h[leaf].sum())
        enough = bool((demand_h[leaf] >= share * capacity_h - 1e-9).mean() >= 0.5) and share > 0
        ratio = dlv / ent if ent > 0 else None
        teams[leaf] = {"share": _r(share, 6), "demand_gpu_h": _r(demand_h[leaf].sum(), 2),
                       "entitled_gpu_h": _r(ent, 2), "delivered_gpu_h": _r(dlv, 2),
                       "charged_gpu_h": _r(result.charged.get(leaf, 0.0) / 3600.0, 2),
                       "ratio": None if ratio is None else _r(ratio), "enough_demand": enough}
        ent_total += ent
        deliv_capped += min(dlv, ent)
        if enough and ratio is not None:
            enough_n += 1
            ok += ratio >= 0.95
            worst = ratio if worst is None else min(worst, ratio)
    queued = sum(demand_h.values(), np.zeros(hours))
    summary = {
        "scheduler": result.scheduler,
        "horizon_s": _r(horizon, 3),
        "tasks": {"submitted": len(result.tasks),
                  "started": sum(r.first_start is not None for r in recs),
                  "completed": sum(r.state == "done" for r in recs),
                  "rejected": sum(r.state == "rejected" for r in recs),
                  "killed": sum(r.state == "killed" for r in recs)},
        "waits": waits,
        "preemptions": preemptions,
        "gpu_hours": {"capacity": _r(cap_gpus * horizon / 3600.0, 2),
                      "healthy": _r(healthy_gpu_s / 3600.0, 2),
                      "delivered": _r(delivered / 3600.0, 2),
                      "unallocated": _r(unalloc / 3600.0, 2),
                      "lost_to_preemption": _r(lost / 3600.0, 2),
                      "charged": _r(sum(result.charged.values()) / 3600.0, 2)},
        "occupancy": _r(occupancy),
        "unallocated_share": _r(unalloc / delivered if delivered else 0.0),
        "demand_ratio": {"offered": _r(demand_ratio(result.trace, cap_gpus)),
                         "queued_mean": _r(float((queued / np.maximum(capacity_h, 1e-9)).mean()))},
        "entitlement": {"entitled_gpu_h": _r(ent_total, 2),
                        "delivered_within_entitlement": _r(deliv_capped / ent_total if ent_total else 0.0),
                        "teams_with_enough_demand": enough_n, "teams_at_95": ok,
                        "worst_ratio": None if worst is None else _r(worst)},
        "teams": teams,
        "drain": {"failures": len(result.failures),
                  "mean_drain_s": _r(np.mean([e - f for _, f, e, _ in result.failures if e is not None])
                                     if any(e is not None for _, _, e, _ in result.failures) else 0.0, 1),
                  "repaired": sum(r is not None for *_, r in result.failures)},
        "decide_calls": result.decide_calls,
        "idle": idle_summary(result.idle, cap_gpus * horizon),
    }
    wbc = {k: np.asarray(groups.get(("class", k), []), float) for k in CLASSES}
    return Metrics(summary, hours, capacity_h, delivered_h, entitled_h, demand_h, wbc)
