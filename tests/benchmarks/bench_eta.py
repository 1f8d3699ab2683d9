"""How good is ``allot eta``? Forecast start vs the simulator's actual start, on a replayed trace.

The repository's budgets and policy run a seeded synthetic trace (``--days`` days, demand
``--demand`` x capacity) to well past its last submission. At several instants the state is
taken (:func:`engine.views.simstate.state_from_sim`) and every pending workload's start is
forecast (:func:`engine.views.forecast.forecast`, simulating forward with the queue as it
stands); the actual start is the first run the full simulation gives it at or after that
instant. Errors are ``actual - forecast`` (positive: it started later than forecast), mostly
from work submitted after the forecast that outranks it (the forecast assumes no new
submissions). A control run with no submissions after the instant must have zero error.

Run: ``python tests/benchmarks/bench_eta.py [--days 1] [--tasks 1200] [--demand 2.0]``.
Prints figures; asserts nothing about time (the machine may be shared).
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from engine.loader import load_config  # noqa: E402
from engine.sim.engine import simulate  # noqa: E402
from engine.sim.prepare import prepare_trace  # noqa: E402
from engine.sim.synthetic import synthetic_trace  # noqa: E402
from engine.sim.trace import Trace  # noqa: E402
from engine.views.forecast import forecast  # noqa: E402
from engine.views.simstate import state_from_sim  # noqa: E402


def first_starts(result, at: float) -> dict[str, float]:
    out: dict[str, float] = {}
    for s in result.segments:
        if s.start >= at:
            out[s.task] = min(out.get(s.task, s.start), s.start)
    return out


def compare(result, at: float, klass: dict[str, str]) -> dict:
    state = state_from_sim(result, at=at)
    t0 = time.perf_counter()
    fc = forecast(state, horizon_s=result.horizon - at - 1)
    wall = time.perf_counter() - t0
    actual = first_starts(result, at)
    rows = []
    for wid, start in fc.starts.items():
        rows.append((wid, klass.get(wid, "?"), start, actual.get(wid)))
    return {"at": at, "pending": len(rows), "wall_s": wall, "passes": fc.passes, "rows": rows}


def stats(rows) -> str:
    both = [(a - f, f) for _, _, f, a in rows if f is not None and a is not None]
    only_f = sum(1 for _, _, f, a in rows if f is not None and a is None)
    only_a = sum(1 for _, _, f, a in rows if f is None and a is not None)
    if not both:
        return f"n=0 (forecast only {only_f}, actual only {only_a})"
    err = np.array([e for e, _ in both])
    ab = np.abs(err)
    return (f"n={len(both)}  |err| median {np.median(ab) / 60:.1f} min, p90 {np.percentile(ab, 90) / 60:.1f} min, "
            f"max {ab.max() / 3600:.1f} h; bias (actual-forecast) mean {err.mean() / 60:+.1f} min; "
            f"exact {np.mean(ab == 0):.0%}, within 5 min {np.mean(ab <= 300):.0%}, within 1 h {np.mean(ab <= 3600):.0%}; "
            f"started later than forecast {np.mean(err > 0):.0%}, earlier {np.mean(err < 0):.0%}; "
            f"forecast but not started by the end {only_f}, started but not forecast {only_a}")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--days", type=float, default=1.0)
    ap.add_argument("--tasks", type=int, default=1200)
    ap.add_argument("--demand", type=float, default=2.0)
    ap.add_argument("--seed", type=int, default=7)
    args = ap.parse_args()
    config = load_config()
    trace = prepare_trace(synthetic_trace(config, days=args.days, tasks=args.tasks,
                                          demand_ratio_target=args.demand, seed=args.seed), config,
                          seed=args.seed)
    klass = {t.id: t.klass or "small" for t in trace.tasks}
    horizon = args.days * 86400 * 1.5
    t0 = time.perf_counter()
    result = simulate(config, trace, horizon=horizon)
    print(f"trace: synthetic {args.days:g} d, {len(trace.tasks)} tasks, demand {args.demand:g}x of "
          f"{sum(c.gpus for c in config.policy.clusters)} GPUs; simulated to {horizon / 3600:.0f} h "
          f"in {time.perf_counter() - t0:.1f} s")
    everything = []
    for frac in (0.3, 0.5, 0.7, 0.9):
        at = round(args.days * 86400 * frac / 60) * 60
        c = compare(result, at, klass)
        everything += c["rows"]
        print(f"t={at / 3600:5.1f} h: {c['pending']:4d} pending, forecast in {c['wall_s']:.1f} s "
              f"({c['passes']} passes): {stats(c['rows'])}")
    print(f"all instants: {stats(everything)}")
    for k in ("debug", "small", "large"):
        sub = [r for r in everything if r[1] == k]
        if sub:
            print(f"  {k:5s}: {stats(sub)}")
    # control: nothing submitted after the instant -> the forecast must be exact
    at = round(args.days * 86400 * 0.5 / 60) * 60
    early = Trace.of([t for t in trace.tasks if t.submit < at], trace.failures, trace.name, dict(trace.meta))
    ctrl = simulate(config, early, horizon=horizon)
    # node failures after the instant are not forecast either: compare only before the first one
    c = compare(ctrl, at, klass)
    later_fail = min((f.time for f in trace.failures if f.time >= at), default=horizon)
    rows = [r for r in c["rows"] if r[3] is None or r[3] < later_fail]
    print(f"control (no submissions after t={at / 3600:.1f} h, starts before the next node failure at "
          f"t={later_fail / 3600:.1f} h): {stats(rows)}")


if __name__ == "__main__":
    main()
