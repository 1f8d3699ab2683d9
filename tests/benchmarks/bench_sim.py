"""Simulator benchmark: events per second and simulated days per wall-second.

Cases (targets on the 2-core machine: the 30-day run under 60 s and under 2 GB):

* ``synthetic30``: 30 days of the repo's h100 cluster (128 x 8 = 1,024 GPUs) with 100,000
  synthetic workloads (debug jobs, bursty teams, large gangs, node failures), offered demand
  1.1x capacity. The queue grows all month (9 pending on day 0, about 1,000 on day 29, many
  of them 64-256-GPU gangs), so the GPUs asked by queued and running work average about 28x
  capacity (``queued-demand=`` in the output): a stress case, far past the brief's 2-3x.
* ``philly``: the full Philly trace (82,247 jobs, 109 days) at its own rate on h100:48
  (384 GPUs, about its average demand).

Run: ``python tests/benchmarks/bench_sim.py [--case synthetic30|philly|all]
[--scheduler budget,legacy] [--time-limit SECONDS] [--cadence watch|interval] [--per-day]``.
``--per-day`` also prints, per simulated day, the passes, the decision's milliseconds per pass
and the pending and running workloads a pass saw on average (the timing adds a clock read per
pass). Each run stops after ``--time-limit``
wall seconds (default 600; 0 = none) and then reports honestly what it measured: the
simulated days it reached (``reached=``), ``TRUNCATED``, and the rates over that part.
Peak memory is the process's max RSS (so it covers every case run before it). Figures taken
while other work shares the CPUs are noisy.

The host's speed moves from day to day (2.4x between two days on the same machine type), so
the first line names the CPU and times a fixed reference of interpreted work (:func:`reference`,
best of 3): figures from two days compare through it.
"""

from __future__ import annotations

import argparse
import dataclasses
import gc
import os
import resource
import time

from engine.commands.buildcore import describe
from engine.loader import load_config
from engine.sim.engine import SimOptions, simulate
from engine.sim.schedulers import Scheduler, get_scheduler
from engine.sim.importers import load_trace
from engine.sim.clusters import with_clusters
from engine.sim.prepare import prepare_trace
from engine.sim.synthetic import synthetic_trace


class PerDay:
    """A scheduler's decisions timed and counted per simulated day."""

    def __init__(self, scheduler: Scheduler):
        self.rows: dict[int, list[float]] = {}  # day -> [passes, seconds, pending, running]
        inner = scheduler.decide

        def timed(snapshot, config, now):
            t0 = time.perf_counter()
            decision = inner(snapshot, config, now)
            row = self.rows.setdefault(int(now // 86400), [0, 0.0, 0, 0])
            row[0] += 1
            row[1] += time.perf_counter() - t0
            row[2] += len(snapshot.pending)
            row[3] += len(snapshot.running)
            return decision

        self.scheduler = dataclasses.replace(scheduler, decide=timed)

    def print(self) -> None:
        print(f"{'day':>5s} {'passes':>7s} {'ms/pass':>8s} {'pending':>8s} {'running':>8s}")
        for day, (n, secs, pending, running) in sorted(self.rows.items()):
            print(f"{day:5d} {n:7d} {1000 * secs / n:8.2f} {pending / n:8.0f} {running / n:8.0f}")


def reference() -> float:
    """Seconds (best of 3) of a fixed piece of interpreted work: dict, tuple and float
    operations such as a decision does, with no I/O and no allocation that survives."""
    best = float("inf")
    for _ in range(3):
        t0 = time.perf_counter()
        d: dict[int, float] = {}
        for i in range(400_000):
            k = i % 997
            d[k] = d.get(k, 0.0) + (i, k)[1] * 0.5
        best = min(best, time.perf_counter() - t0)
    return best


def cpu_model() -> str:
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    import platform

    return platform.processor() or platform.machine()


def run_case(name: str, config, trace, schedulers, limit: float | None,
             cadence: str = "watch", per_day: bool = False) -> None:
    days = trace.meta["horizon"] / 86400.0
    for sched in schedulers:
        timed = PerDay(get_scheduler(sched)) if per_day else None
        t0 = time.perf_counter()
        res = simulate(config, trace, timed.scheduler if timed else sched,
                       options=SimOptions(wall_limit_s=limit, cadence=cadence))
        wall = time.perf_counter() - t0
        rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0
        s = res.summary()
        reached = res.horizon / 86400.0
        print(f"{name:12s} {sched:8s} {cadence:8s} tasks={len(trace.tasks):7d} days={days:6.1f} "
              f"reached={reached:6.2f}{' TRUNCATED' if res.truncated else ''} "
              f"wall={wall:7.1f}s events={res.sim_events:8d} events/s={res.sim_events / wall:9.0f} "
              f"sim-days/s={reached / wall:6.3f} passes={res.decide_calls:6d} "
              f"decide={res.decide_s:6.1f}s ({1000 * res.decide_s / max(1, res.decide_calls):.2f} ms/pass) "
              f"peak-rss={rss:7.0f}MB occupancy={s['occupancy']:.3f} "
              f"debug-p90={s['waits']['by_class']['debug']['p90_s']}s "
              f"queued-demand={s['demand_ratio']['queued_mean']:.1f}x", flush=True)
        if timed:
            timed.print()
        del res, s  # the next run starts without this one's heap (its GC scans would count)
        gc.collect()


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--case", default="all", choices=["synthetic30", "philly", "all"])
    ap.add_argument("--scheduler", default="budget,legacy")
    ap.add_argument("--tasks", type=int, default=100_000)
    ap.add_argument("--time-limit", type=float, default=600.0,
                    help="wall seconds per run before it stops and reports what it reached (0: none)")
    ap.add_argument("--cadence", default="watch", choices=["watch", "interval", "event"],
                    help="when passes run (as `allot simulate --cadence`): watch = at every event, "
                         "as the reconciler runs them; interval = on the policy's interval grid")
    ap.add_argument("--per-day", action="store_true",
                    help="also print the passes, ms per pass, pending and running per simulated day")
    args = ap.parse_args()
    limit = args.time_limit or None
    schedulers = args.scheduler.split(",")
    print(f"host: {cpu_model()}, {os.cpu_count()} CPUs; reference work {reference() * 1000:.0f} ms "
          f"(best of 3); core: {describe()}", flush=True)
    base = load_config()
    if args.case in ("synthetic30", "all"):
        cfg = with_clusters(base, "h100")
        t0 = time.perf_counter()
        trace = prepare_trace(synthetic_trace(cfg, days=30, tasks=args.tasks, demand_ratio_target=1.1,
                                              seed=1), cfg, seed=1)
        print(f"synthetic30: trace built in {time.perf_counter() - t0:.1f}s "
              f"({len(trace.tasks)} tasks, {len(trace.failures)} node failures)", flush=True)
        run_case("synthetic30", cfg, trace, schedulers, limit, args.cadence, args.per_day)
    if args.case in ("philly", "all"):
        cfg = with_clusters(base, "h100:48")
        t0 = time.perf_counter()
        trace = prepare_trace(load_trace("philly"), cfg, mapping="traces/philly/mapping.yaml")
        trace = trace.with_meta(horizon=trace.span + 86400.0)
        print(f"philly: trace prepared in {time.perf_counter() - t0:.1f}s", flush=True)
        run_case("philly", cfg, trace, schedulers, limit, args.cadence, args.per_day)


if __name__ == "__main__":
    main()
