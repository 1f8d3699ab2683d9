"""Run by ``test_core_compiled.py`` in a fresh interpreter: which core is loaded, and digests of
what it decides (every scenario file, and a simulated day and a half with gangs and node
failures), as one JSON line. Not a test module itself (no ``test_`` prefix)."""

from __future__ import annotations

import hashlib
import json
import sys
from collections.abc import Mapping
from pathlib import Path

import yaml

import engine.accel
import engine.core.decide
from engine.core.decide import decide
from engine.core.lazymaps import LazyMap, StatusMap
from engine.loader import load_config
from engine.sim.engine import SimOptions, simulate
from engine.sim.clusters import with_clusters
from engine.sim.prepare import prepare_trace
from engine.sim.synthetic import synthetic_trace
from tests.core.harness import build_scenario


def digest(value: object) -> str:
    return hashlib.sha256(repr(value).encode()).hexdigest()[:16]


def main() -> None:
    out: dict[str, object] = {"active": str(engine.accel.active()),
                              "decide_from": Path(engine.core.decide.__file__).name}
    scenarios = {}
    for path in sorted((Path(__file__).parent / "scenarios").glob("*.yaml")):
        snapshot, config, now = build_scenario(yaml.safe_load(path.read_text()))
        d = decide(snapshot, config, now)
        scenarios[path.stem] = digest((d.actions, sorted((k, repr(v)) for k, v in d.statuses.items()),
                                       sorted(d.ranks.items()), sorted(d.waiting.items()),
                                       sorted(d.reserved.items())))
    out["scenarios"] = scenarios
    cfg = with_clusters(load_config(), "h100:32")
    trace = prepare_trace(synthetic_trace(cfg, days=1.5, tasks=3000, demand_ratio_target=1.3, seed=4),
                          cfg, seed=4)
    # the legacy baseline first, in the same process, as `allot simulate --jobs 1` runs them: its
    # decisions' `waiting` is a plain dict, which the budget run's wait causes must tell apart
    # from the core's lazy map (a compiled Mapping subclass once shared Mapping's isinstance caches)
    legacy = simulate(cfg, trace, "legacy", options=SimOptions(cadence="interval", causes=True))
    res = simulate(cfg, trace, "budget", options=SimOptions(cadence="interval", causes=True))
    summary = {k: v for k, v in res.summary().items() if "wall" not in k and "decide_s" not in k}
    out["sim"] = {"passes": res.decide_calls, "summary": digest(json.dumps(summary, sort_keys=True)),
                  "events": digest(res.event_log), "segments": digest(res.segments),
                  "waiting": digest(sorted(res.waiting.items())), "legacy": digest(legacy.event_log),
                  "preempted": sum(1 for e in res.event_log if e[1] == "preempt")}
    out["abc"] = [isinstance({}, LazyMap), isinstance({}, StatusMap), issubclass(dict, Mapping),
                  isinstance(LazyMap(dict), Mapping)]
    json.dump(out, sys.stdout)


if __name__ == "__main__":
    main()
