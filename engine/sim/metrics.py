"""Metrics of one simulation run, and its stable JSON summary.

* **Queue wait** of a task: from submission to its *first* start. A task still queued at the
  horizon counts with its wait so far (``censored``: a lower bound), so a scheduler cannot look
  good by never starting work. Percentiles are numpy's linear interpolation. Classes: ``debug``,
  ``small``, ``large`` (gangs of 64 GPUs or more); teams are budget leaves (``(none)`` for
  work with no leaf).
* **Preemptions** and the **GPU-hours lost** to them (run time not kept as progress: the whole
  run for non-resumable work, the checkpoint loss and restart overhead for resumable work).
  With a warm-up these are the preemptions made in the measured window, each with all the
  progress it cost, run time before the window included: the figure is the cost of the
  window's preemptions, not GPU-time spent in the window. ``preemptions_of_charged`` and
  ``gpu_hours.lost_of_charged`` are the part of them that hit runs charged to a budget: the
  rest is unallocated work, which runs on GPUs no funded work wants and is preempted first by
  design (on the 7-day synthetic trace, 88% of the GPU-hours lost).
* **Occupancy**: busy GPU-time on healthy nodes over healthy GPU-time. **Unallocated share**:
  GPU-time of unallocated (free, uncharged) runs over all delivered GPU-time; of it,
  ``gpu_hours.on_loan`` is funded work that ran on loan (``policy.loans``).
* **Entitlement** (``engine.sim.entitlement``): per team and hour, the allocation capped by
  demand; **delivered** is the GPU-time the team's work ran (allocated or free). A team has
  *enough demand* when its demand reached its nominal share of capacity in at least half of the
  hours; ``teams_at_95`` counts those teams delivered at least 95% of their entitlement, and
  ``worst_ratio`` / ``worst_team`` name the one of them with the smallest share delivered
  (the first in leaf order on a tie; None without such a team).
* **Drain** (``drain``): node failures in the measured window; ``mean_drain_s``, the mean time
  from a failure to its node being empty, over the failures whose node emptied before the
  horizon (one still draining then has no drain time: its ``failures`` record says ``None``);
  ``repaired``, how many nodes came back.
* **Why work waited** (``teams.<team>.waiting_gpu_h``, with ``SimOptions.causes``,
  :mod:`engine.sim.causes`): GPU-hours the team's pending work waited, per cause its status
  gave after each pass (``no-room``, ``pingpong``, ``kept-off``, ``reserved``, ``holding``,
  ``no-reservation``, ``free-work``); empty for a baseline or when not collected.
* **Idle GPU-time by cause** (``idle``, measured by the loop, :mod:`engine.sim.idle`): the
  capacity's GPU-hours split into ``busy`` (healthy GPUs running work), ``no_work``,
  ``fragmentation``, ``lag``, ``reserved`` (idle healthy GPUs, by why) and ``unhealthy`` (nodes
  out of service), each with its share of capacity; ``busy / (capacity - unhealthy)`` is the
  occupancy.
* **Demand ratio**: ``offered`` is the GPU-time the window's submissions would use inside it
  (if started at once) over capacity; ``queued_mean`` / ``queued_min`` the mean and the lowest
  hourly value of (GPUs asked by queued and running work, funded, free or of no team) /
  healthy capacity, and ``hours_below_capacity`` the share of hours where that was below 1
  (demand did not fill the cluster: no scheduler could keep it full then). An hour with no
  healthy GPU is no sample, nor is a last hour shorter than 30 minutes.
* **Measured window**: with a warm-up (:func:`engine.sim.prepare.cut`) every figure covers
  ``measured_s = [measure_from, horizon]`` only: waits of tasks submitted in it, GPU-time,
  demand, charges, preemptions and idle time inside it; hour 0 of the series is its start.

``SUMMARY_KEYS`` lists the top-level keys of ``summary``; they never change meaning.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from engine.core.statuses import NO_TEAM
from engine.sim.entitlement import entitlement, hourly_integral
from engine.sim.prepare import capacity as config_capacity
from engine.sim.trace import CLASSES

if TYPE_CHECKING:
    from engine.model import Config

SUMMARY_KEYS = ("scheduler", "horizon_s", "measured_s", "tasks", "waits", "preemptions",
                "preemptions_of_charged", "gpu_hours",
                "occupancy", "unallocated_share", "demand_ratio", "entitlement", "teams",
                "drain", "decide_calls", "idle")


def _r(x: float, nd: int = 4) -> float:
    return float(round(float(x), nd))


def wait_stats(waits: list[float], censored: int) -> dict[str, Any]:
    if not waits:
        return {"n": 0, "censored": 0, "p50_s": None, "p90_s": None, "p99_s": None, "mean_s": None}
    arr = np.asarray(waits, float)
    p50, p90, p99 = np.percentile(arr, [50, 90, 99])
    return {"n": len(waits), "censored": censored, "p50_s": _r(p50, 1), "p90_s": _r(p90, 1),
            "p99_s": _r(p99, 1), "mean_s": _r(arr.mean(), 1)}


def score_teams(leaves: list[str], shares: list[float], capacity_h: np.ndarray,
                demand_h: dict, entitled_h: dict, delivered_h: dict) -> tuple[dict[str, Any], tuple]:
    """Per team (hourly GPU-hours in): its share, demand, entitlement, delivery, ratio and
    whether it had *enough demand* (demand at least its share of capacity in at least half the
    hours, a share above 0); and (entitled total, delivered within entitlement, teams with
    enough demand, of them at least 95% delivered (0.95 itself counts), the worst ratio among
    them, its team: the first in leaf order on a tie)."""
    teams: dict[str, Any] = {}
    ok = enough_n = 0
    worst: float | None = None
    worst_team: str | None = None
    ent_total = deliv_capped = 0.0
    for leaf, share in zip(leaves, shares):
        ent = float(entitled_h[leaf].sum())
        dlv = float(delivered_h[leaf].sum())
        enough = bool((demand_h[leaf] >= share * capacity_h - 1e-9).mean() >= 0.5) and share > 0
        ratio = dlv / ent if ent > 0 else None
        teams[leaf] = {"share": _r(share, 6), "demand_gpu_h": _r(demand_h[leaf].sum(), 2),
                       "entitled_gpu_h": _r(ent, 2), "delivered_gpu_h": _r(dlv, 2),
                       "ratio": None if ratio is None else _r(ratio), "enough_demand": enough}
        ent_total += ent
        deliv_capped += min(dlv, ent)
        if enough and ratio is not None:
            enough_n += 1
            ok += ratio >= 0.95
            if worst is None or ratio < worst:
                worst, worst_team = ratio, leaf
    return teams, (ent_total, deliv_capped, enough_n, ok, worst, worst_team)


def sampled_hours(capacity_h: np.ndarray, span: float) -> np.ndarray:
    """Which hours of a ``span`` (seconds) are samples of queued demand: not an hour with no
    healthy GPU, nor a last hour shorter than 30 minutes."""
    full = capacity_h > 1e-9
    full[-1] = full[-1] and span - (len(capacity_h) - 1) * 3600.0 >= 1800.0
    return full


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


def node_gpus(config: Config) -> dict[str, int]:
    """GPUs per node of the configuration's clusters, by node name."""
    return {n: c.gpus_per_node for c in config.policy.clusters for n in c.node_names()}


def out_of_service(result) -> list[tuple[str, float, float]]:
    """Each node failure of ``result`` as (node, failed at, back at: its repair, or the
    horizon when it was not repaired by then), in the order of ``result.failures``: the
    nodes the healthy capacity leaves out."""
    return [(node, failed, result.horizon if repaired is None else repaired)
            for node, failed, _empty, repaired in result.failures]


def _healthy_intervals(result, lo: float) -> dict[str, list[tuple[float, float]]]:
    """Per node, its out-of-service intervals clipped to the measured window [lo, horizon]."""
    out: dict[str, list[tuple[float, float]]] = {}
    for node, failed, back in out_of_service(result):
        a, b = max(failed, lo), back
        if b > a:
            out.setdefault(node, []).append((a, b))
    return out


def compute_metrics(result) -> Metrics:
    """Metrics over the measured window ``[result.measure_from, result.horizon]``: a warm-up
    before it (:func:`engine.sim.prepare.cut`) fills the cluster, the queue and the ledger but is
    not measured: its tasks' waits are not counted, GPU-time and demand are clipped to the
    window, and hour 0 of the series starts at ``measure_from``."""
    horizon = result.horizon
    lo = float(getattr(result, "measure_from", 0.0) or 0.0)
    span = horizon - lo
    tree = result.config.tree
    hours = max(1, math.ceil(span / 3600.0 - 1e-9))
    cap_gpus = config_capacity(result.config)
    gpn = node_gpus(result.config)
    down = _healthy_intervals(result, lo)
    recs = [r for r in result.tasks.values() if r.submit >= lo]  # submitted in the window

    # -------------------------------------------------------------- waits
    groups: dict[tuple[str, str], list[float]] = {("all", ""): []}
    cens: dict[tuple[str, str], int] = {("all", ""): 0}
    every = groups[("all", "")]
    for rec in recs:
        started = rec.first_start
        if started is None:
            if rec.state == "rejected":
                continue
            w, c = horizon - rec.submit, 1
        else:
            w, c = started - rec.submit, 0  # rec.wait
        every.append(w)
        cens[("all", "")] += c
        for key in (("class", rec.klass), ("team", rec.leaf or NO_TEAM)):
            if key in groups:
                groups[key].append(w)
                cens[key] += c
            else:
                groups[key] = [w]
                cens[key] = c
    waits = {"overall": wait_stats(groups.get(("all", ""), []), cens.get(("all", ""), 0)),
             "by_class": {k: wait_stats(groups.get(("class", k), []), cens.get(("class", k), 0))
                          for k in CLASSES},
             "by_team": {t: wait_stats(v, cens[("team", t)])
                         for (kind, t), v in sorted(groups.items()) if kind == "team"}}

    # -------------------------------------------------------------- GPU time
    segs = [s for s in result.segments if s.end > lo]
    n = len(segs)
    s_start = np.fromiter((max(s.start, lo) for s in segs), float, n)
    s_end = np.fromiter((s.end for s in segs), float, n)
    s_gpus = np.fromiter((s.gpu_count for s in segs), float, n)
    s_alloc = np.fromiter((s.allocated for s in segs), bool, n)
    gpu_s = (s_end - s_start) * s_gpus
    delivered = float(gpu_s.sum())
    unalloc = float(gpu_s[~s_alloc].sum())
    tasks = result.tasks  # funded work running unallocated: on loan (policy.loans)
    lent = np.fromiter((not s.allocated and tasks[s.task].funded for s in segs), bool, n)
    on_loan = float(gpu_s[lent].sum())
    busy_unhealthy = 0.0
    down_total = 0.0
    for node, spans in down.items():
        for a, b in spans:
            down_total += (b - a) * gpn.get(node, 0)
    if down:
        for s in segs:
            for node, idx in s.gpus:
                for a, b in down.get(node, ()):
                    busy_unhealthy += max(0.0, min(b, s.end) - max(a, s.start, lo)) * len(idx)
    healthy_gpu_s = cap_gpus * span - down_total
    occupancy = (delivered - busy_unhealthy) / healthy_gpu_s if healthy_gpu_s > 0 else 0.0
    plog = [(x, charged) for t, x, charged in getattr(result, "preempt_log", None) or () if t >= lo]
    if not plog and lo == 0:  # no preemption in the log, or a result built without one:
        # per-task totals (a funded task's runs counted as charged: loans aside, they are)
        plog = [(r.gpu_s_lost / r.preemptions, r.funded) for r in result.tasks.values()
                for _ in range(r.preemptions)]
    lost, preemptions = sum(x for x, _ in plog), len(plog)
    lost_charged = sum(x for x, charged in plog if charged)

    # -------------------------------------------------------------- hourly series
    down_s = np.array([a - lo for sp in down.values() for a, _ in sp], float)
    down_e = np.array([b - lo for sp in down.values() for _, b in sp], float)
    down_w = np.array([gpn.get(nd, 0) for nd, sp in down.items() for _ in sp], float)
    capacity_h = np.full(hours, cap_gpus * 1.0)
    capacity_h[-1] = cap_gpus * (span - (hours - 1) * 3600.0) / 3600.0
    capacity_h -= hourly_integral(down_s, down_e, down_w, hours)
    leaves = list(tree.leaves())
    seg_at = _positions([s.leaf or NO_TEAM for s in segs])
    live = [r for r in result.tasks.values() if r.end is None or r.end > lo]  # demand in window
    r_at = _positions([r.leaf or NO_TEAM for r in live])
    r_sub = np.fromiter((max(r.submit, lo) - lo for r in live), float, len(live))
    r_end = np.fromiter((horizon - lo if r.end is None else r.end - lo for r in live), float, len(live))
    r_gpus = np.fromiter((r.gpus for r in live), float, len(live))
    delivered_h, demand_h = {}, {}
    nowhere = np.zeros(0, np.intp)
    for leaf in leaves:
        m = seg_at.get(leaf, nowhere)
        delivered_h[leaf] = hourly_integral(s_start[m] - lo, s_end[m] - lo, s_gpus[m], hours)
        m = r_at.get(leaf, nowhere)
        demand_h[leaf] = hourly_integral(r_sub[m], r_end[m], r_gpus[m], hours)
    entitled_h = entitlement(tree, capacity_h, demand_h)
    before = getattr(result, "charged_before", None) or {}
    charged = {leaf: c - before.get(leaf, 0.0) for leaf, c in result.charged.items()}
    waiting = getattr(result, "waiting", None) or {}  # team -> cause -> GPU-s (engine.sim.causes)
    teams, score = score_teams(leaves, [tree.effective_share(leaf) for leaf in leaves], capacity_h,
                               demand_h, entitled_h, delivered_h)
    for leaf in leaves:
        teams[leaf]["charged_gpu_h"] = _r(charged.get(leaf, 0.0) / 3600.0, 2)
        teams[leaf]["waiting_gpu_h"] = {cause: _r(gpu_s / 3600.0, 2) for cause, gpu_s
                                        in sorted(waiting.get(leaf, {}).items())}
    ent_total, deliv_capped, enough_n, ok, worst, worst_team = score
    queued = hourly_integral(r_sub, r_end, r_gpus, hours)  # all work, with a leaf or not
    fails = [f for f in result.failures if f[1] >= lo]
    full = sampled_hours(capacity_h, span)
    qratio = (queued[full] / capacity_h[full]) if full.any() else np.zeros(1)
    summary = {
        "scheduler": result.scheduler,
        "horizon_s": _r(horizon, 3),
        "measured_s": [_r(lo, 3), _r(horizon, 3)],
        "tasks": {"submitted": len(recs),
                  "started": sum(r.first_start is not None for r in recs),
                  "completed": sum(r.state == "done" for r in recs),
                  "rejected": sum(r.state == "rejected" for r in recs),
                  "killed": sum(r.state == "killed" for r in recs)},
        "waits": waits,
        "preemptions": preemptions,
        "preemptions_of_charged": sum(1 for _, charged in plog if charged),
        "gpu_hours": {"capacity": _r(cap_gpus * span / 3600.0, 2),
                      "healthy": _r(healthy_gpu_s / 3600.0, 2),
                      "delivered": _r(delivered / 3600.0, 2),
                      "unallocated": _r(unalloc / 3600.0, 2),
                      "on_loan": _r(on_loan / 3600.0, 2),
                      "lost_to_preemption": _r(lost / 3600.0, 2),
                      "lost_of_charged": _r(lost_charged / 3600.0, 2),
                      "charged": _r(sum(charged.values()) / 3600.0, 2)},
        "occupancy": _r(occupancy),
        "unallocated_share": _r(unalloc / delivered if delivered else 0.0),
        "demand_ratio": {"offered": _r(_offered(result.trace, lo, horizon, cap_gpus)),
                         "queued_mean": _r(float(qratio.mean())),
                         "queued_min": _r(float(qratio.min())),
                         "hours_below_capacity": _r(float((qratio < 1.0 - 1e-9).mean()))},
        "entitlement": {"entitled_gpu_h": _r(ent_total, 2),
                        "delivered_within_entitlement": _r(deliv_capped / ent_total if ent_total else 0.0),
                        "teams_with_enough_demand": enough_n, "teams_at_95": ok,
                        "worst_ratio": None if worst is None else _r(worst),
                        "worst_team": worst_team},
        "teams": teams,
        "drain": {"failures": len(fails),
                  "mean_drain_s": _r(np.mean([e - f for _, f, e, _ in fails if e is not None])
                                     if any(e is not None for _, _, e, _ in fails) else 0.0, 1),
                  "repaired": sum(r is not None for *_, r in fails)},
        "decide_calls": result.decide_calls,
        "idle": idle_summary(result.idle, cap_gpus * span),
    }
    wbc = {k: np.asarray(groups.get(("class", k), []), float) for k in CLASSES}
    return Metrics(summary, hours, capacity_h, delivered_h, entitled_h, demand_h, wbc)


def _positions(keys: list[str]) -> dict[str, np.ndarray]:
    """Per key, the ascending positions where it occurs in ``keys``: selects what the mask
    ``np.array(keys) == key`` selects, in one pass for all keys."""
    out: dict[str, list[int]] = {}
    for i, key in enumerate(keys):
        if key in out:
            out[key].append(i)
        else:
            out[key] = [i]
    return {key: np.asarray(at, np.intp) for key, at in out.items()}


def _offered(trace, lo: float, horizon: float, cap_gpus: int) -> float:
    """GPU-time the window's submissions would use inside it if started at once, over capacity
    (:func:`engine.sim.prepare.demand_ratio`, restricted to the measured window ``[lo,
    horizon)`` of the run: the run's horizon, which a caller may set shorter than the trace's)."""
    span = horizon - lo
    if span <= 0 or cap_gpus <= 0:
        return 0.0
    return sum(t.gpus * min(t.runtime, horizon - t.submit) for t in trace.tasks
               if lo <= t.submit < horizon) / (span * cap_gpus)
