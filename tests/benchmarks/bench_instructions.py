"""Benchmark: CPU instructions per decide() pass, counted by valgrind, a figure that does not
move with the host's load (wall-clock timings here vary by up to 1.5x from hour to hour).

Captures real passes from a simulation (the exact inputs the simulator gave ``decide()``),
then runs them twice under ``valgrind --tool=callgrind``: once only loading them, once also
deciding; the difference divided by the passes is the figure. The same command on two
versions of the code compares them without the host's noise (the count repeats to within
about 1%: some caches are keyed by object address); the time per pass it prints is measured
outside valgrind, for scale only.

Cases:

* ``synthetic``: the 30-day synthetic benchmark of ``bench_sim.py`` (128 x 8 = 1,024 GPUs,
  100,000 jobs), passes on the 60-s grid from day ``--from-day`` (default 7: a steady state of
  about 300 pending and 80 running jobs);
* ``philly``: the impact replay's trace and cluster (``allot impact``'s default trace on
  1,024 GPUs, at its demand), from day ``--from-day``.

Passes run at the ``--cadence`` (default: ``interval`` for synthetic, as ``bench_sim.py``
measures it; ``watch`` for philly, as ``allot impact`` runs by default; ``bench_impact.py
--cadence interval`` and the CI workflow use ``interval``).

Run: ``python tests/benchmarks/bench_instructions.py [--case synthetic|philly]
[--cadence watch|interval] [--from-day D] [--passes N] [--every K]`` (takes every K-th pass
after day D, N of them).
"""

from __future__ import annotations

import argparse
import copyreg
import dataclasses
import os
import pickle
import re
import shutil
import subprocess
import sys
import tempfile
import time
import types
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from engine.core.decide import decide  # noqa: E402


def _proxy(d: dict) -> types.MappingProxyType:
    return types.MappingProxyType(d)


# the config's read-only mappings, so that the captured passes pickle
copyreg.pickle(types.MappingProxyType, lambda m: (_proxy, (dict(m),)))


class _Captured(Exception):
    """Stops the simulation once the passes are captured."""


def capture(case: str, from_day: float, passes: int, every: int,
            cadence: str | None = None) -> list[tuple]:
    from engine.loader import load_config
    from engine.sim import engine as sim_engine
    from engine.sim.engine import SimOptions, simulate
    from engine.sim.clusters import with_clusters
    from engine.sim.owners import load_mapping
    from engine.sim.prepare import capacity, compress, prepare_trace

    cfg = with_clusters(load_config(), "h100")
    if case == "synthetic":
        from engine.sim.synthetic import synthetic_trace
        trace = prepare_trace(synthetic_trace(cfg, days=30, tasks=100_000, demand_ratio_target=1.1,
                                              seed=1), cfg, seed=1)
        cadence = cadence or "interval"
    else:
        from engine.impact.replay import (DEFAULT_TRACE, ReplaySpec, bundled_mapping,
                                          load_replay_trace, window_for)
        spec = ReplaySpec(days=14)
        window, factor = window_for(load_replay_trace(spec), capacity(cfg), spec)
        trace = compress(prepare_trace(window, cfg, mapping=load_mapping(bundled_mapping(DEFAULT_TRACE)),
                                       seed=0), factor)
        cadence = cadence or "watch"
    kept: list[tuple] = []
    seen = [0]

    def keep(snapshot, config, now):
        if now >= from_day * 86400.0:
            seen[0] += 1
            if seen[0] % every == 0:
                kept.append((snapshot, config, now))
                if len(kept) >= passes:
                    raise _Captured
        return decide(snapshot, config, now)

    scheduler = dataclasses.replace(sim_engine.get_scheduler("budget"), decide=keep)
    try:
        simulate(cfg, trace, scheduler, options=SimOptions(cadence=cadence))
    except _Captured:
        pass
    return kept


def replay(path: str, count: int) -> None:
    """(In the child process under valgrind.) Load the passes; decide the first ``count``."""
    with open(path, "rb") as f:
        items = pickle.load(f)
    for snapshot, config, now in items[:count]:
        decide(snapshot, config, now)


def instructions(path: str, count: int) -> int:
    done = subprocess.run(
        ["valgrind", "--tool=callgrind", "--callgrind-out-file=/dev/null", sys.executable,
         __file__, "--replay", path, "--count", str(count)],
        capture_output=True, text=True, check=True)
    found = re.search(r"Collected\s*:\s*(\d+)", done.stderr)
    if found is None:
        raise SystemExit(f"valgrind printed no instruction count:\n{done.stderr[-2000:]}")
    return int(found.group(1))


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--case", default="synthetic", choices=["synthetic", "philly"])
    ap.add_argument("--cadence", choices=["watch", "interval"], default=None)
    ap.add_argument("--from-day", type=float, default=7.0)
    ap.add_argument("--passes", type=int, default=100)
    ap.add_argument("--every", type=int, default=3)
    ap.add_argument("--replay", help=argparse.SUPPRESS)
    ap.add_argument("--count", type=int, default=0, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if os.environ.get("PYTHONHASHSEED") != "0":  # the captured sets' order, too, run to run
        os.execve(sys.executable, [sys.executable, __file__, *sys.argv[1:]],
                  {**os.environ, "PYTHONHASHSEED": "0"})
    if args.replay:
        replay(args.replay, args.count)
        return
    if shutil.which("valgrind") is None:
        raise SystemExit("bench_instructions: needs valgrind (Debian: apt-get install valgrind)")
    t0 = time.perf_counter()
    items = capture(args.case, args.from_day, args.passes, args.every, args.cadence)
    if not items:
        raise SystemExit(f"no pass after day {args.from_day:g}: the run ended before it")
    pending = sum(len(s.pending) for s, _, _ in items) / len(items)
    running = sum(len(s.running) for s, _, _ in items) / len(items)
    print(f"{args.case}: {len(items)} passes captured from day {items[0][2] / 86400:.2f} to "
          f"{items[-1][2] / 86400:.2f} (one in {args.every}; {pending:.0f} pending and {running:.0f} "
          f"running per pass on average) in {time.perf_counter() - t0:.0f} s", flush=True)
    with tempfile.TemporaryDirectory() as tmp:
        path = str(Path(tmp) / "passes.pkl")
        with open(path, "wb") as f:
            pickle.dump(items, f)
        t0 = time.perf_counter()
        replay(path, len(items))
        wall = (time.perf_counter() - t0) / len(items)
        base, full = instructions(path, 0), instructions(path, len(items))
    per = (full - base) / len(items)
    print(f"{args.case}: {per / 1e6:.2f} M instructions per pass (valgrind; {full - base:,} over "
          f"{len(items)} passes), {1000 * wall:.2f} ms per pass (wall, this host, for scale)")


if __name__ == "__main__":
    main()
