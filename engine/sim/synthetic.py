"""A seeded synthetic trace for what the real traces lack: debug jobs, bursty teams, large
gangs and node failures, on any configuration.

* Submissions are a Poisson process over ``days`` (``tasks`` in total, sorted).
* Teams are the config's leaves. Each team is *on* or *off* each day (a two-state Markov chain:
  an on day stays on with probability 0.8, an off day turns on with 0.4); a submission picks
  its team in proportion to ``effective share x (1 if on else burst_low)``, so teams burst and
  go quiet like seasonal research does.
* Mix: ``debug_share`` debug jobs (1-8 GPUs, 1-15 min), ``large_share`` large gangs (64, 128
  or 256 GPUs in 8-GPU pods, 2-24 h, never more than one topology domain holds), the rest small work (1, 2, 4 or 8 GPUs, or 16/32-GPU
  gangs; log-normal runtime, median 1 h, at most 3 days).
* Non-debug runtimes are scaled by one factor so the offered load (GPU-time inside the
  horizon over capacity) is ``demand_ratio``, then held to their ranges (small work 16 min to
  3 days, above the debug limit of 15 min so it never reads as debug work; large gangs 2-24 h),
  the factor found with the ranges applied (bisection: the load only grows with it). When the
  ranges cannot give that load (too many or too few tasks for the capacity), the nearest is
  taken; ``meta['offered']`` is the load reached.
* Node failures: each node fails as a Poisson process of ``failures_per_node_day``; repairs
  take 2-8 h once the node is drained.

Contracts are left to :func:`engine.sim.prepare.prepare_trace` (tasks carry leaf and class).
"""

from __future__ import annotations

import numpy as np

from engine.model import Config
from engine.sim.prepare import capacity
from engine.sim.trace import NodeFailure, Task, Trace

# the runtime ranges (seconds) non-debug work keeps at any offered load (module docstring)
SMALL_RUNTIME = (960.0, 3 * 86400.0)  # above the 15-min debug limit: never read as debug work
LARGE_RUNTIME = (2 * 3600.0, 24 * 3600.0)


def synthetic_trace(config: Config, *, days: float = 7.0, tasks: int = 5000,
                    demand_ratio_target: float = 1.2, seed: int = 0, debug_share: float = 0.3,
                    large_share: float = 0.01, burst_low: float = 0.15,
                    failures_per_node_day: float = 0.01) -> Trace:
    rng = np.random.Generator(np.random.PCG64(seed))
    horizon = days * 86400.0
    leaves = list(config.tree.leaves())
    shares = np.array([config.tree.effective_share(l) for l in leaves])
    ndays = int(np.ceil(days))
    on = np.ones((ndays, len(leaves)), bool)
    for d in range(1, ndays):
        stay = rng.random(len(leaves))
        on[d] = np.where(on[d - 1], stay < 0.8, stay < 0.4)
    submit = np.sort(rng.random(tasks) * horizon)
    day = np.minimum((submit // 86400).astype(int), ndays - 1)
    weights = shares[None, :] * np.where(on, 1.0, burst_low)
    cum = np.cumsum(weights, axis=1)
    pick = (rng.random(tasks)[:, None] * cum[day, -1:] > cum[day]).sum(axis=1)
    kind = rng.random(tasks)
    is_debug = kind < debug_share
    is_large = (~is_debug) & (kind > 1.0 - large_share)
    gpus = rng.choice([1, 1, 1, 2, 4, 8, 8, 16, 32], size=tasks)
    gpus = np.where(is_debug, rng.choice([1, 1, 2, 4, 8], size=tasks), gpus)
    biggest = max(c.gpus_per_node * (c.nodes_per_domain if config.policy.gang_in_one_domain
                                      else c.nodes) for c in config.policy.clusters)
    sizes = [g for g in (64, 64, 128, 256) if g <= biggest] or [biggest]
    gpus = np.where(is_large, rng.choice(sizes, size=tasks), gpus)
    runtime = np.minimum(np.exp(rng.normal(np.log(3600.0), 1.2, size=tasks)), SMALL_RUNTIME[1])
    runtime = np.where(is_large, rng.uniform(*LARGE_RUNTIME, size=tasks), runtime)
    debug_rt = np.round(rng.uniform(60.0, 900.0, size=tasks))
    cap = capacity(config)
    low = np.where(is_large, LARGE_RUNTIME[0], SMALL_RUNTIME[0])
    high = np.where(is_large, LARGE_RUNTIME[1], SMALL_RUNTIME[1])
    starts = np.round(submit, 3)
    room = np.maximum(horizon - starts, 0.0)

    def runtimes(scale: float) -> np.ndarray:
        return np.where(is_debug, debug_rt, np.round(np.clip(runtime * scale, low, high)))

    def offered(scale: float) -> float:
        return float((gpus * np.minimum(runtimes(scale), room)).sum() / (horizon * cap)) if cap else 0.0

    # the factor, by bisection on its logarithm (the load is non-decreasing in it)
    lo, hi = -12.0, 12.0
    for _ in range(80):
        mid = (lo + hi) / 2
        if offered(float(np.exp(mid))) < demand_ratio_target:
            lo = mid
        else:
            hi = mid
    scale = float(np.exp(hi))
    if abs(offered(float(np.exp(lo))) - demand_ratio_target) < abs(offered(scale) - demand_ratio_target):
        scale = float(np.exp(lo))
    final = runtimes(scale)

    out = []
    for i in range(tasks):
        g = int(gpus[i])
        pods, gpp = (1, g) if g <= 8 else (g // 8, 8)
        klass = "debug" if is_debug[i] else "large" if g >= 64 else "small"
        out.append(Task(id=f"syn-{i:06d}", submit=float(starts[i]), pods=pods, gpus_per_pod=gpp,
                        runtime=float(final[i]), owner=leaves[pick[i]], leaf=leaves[pick[i]],
                        klass=klass))
    fails = []
    if failures_per_node_day > 0:
        for c in config.policy.clusters:
            for n in range(c.nodes):
                t = rng.exponential(1.0 / failures_per_node_day) * 86400.0
                while t < horizon:
                    fails.append(NodeFailure(float(round(t, 3)), c.node_name(n),
                                             float(round(rng.uniform(2, 8) * 3600.0))))
                    t += rng.exponential(1.0 / failures_per_node_day) * 86400.0
    return Trace.of(out, fails, "synthetic",
                    {"horizon": horizon, "seed": seed, "generator": "synthetic",
                     "runtime_scale": round(scale, 6), "offered": round(offered(scale), 6)})
