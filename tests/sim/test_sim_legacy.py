"""The legacy baseline's fast scan decides exactly what the plain rule says.

The rule (``engine.sim.baselines.legacy``): HIGH (funded) then LOW work, oldest first, one
greedy pass; a HIGH task within its team's cap runs non-preemptible and may preempt
preemptible work (youngest first, only what its placement needs) to start; anything else runs
preemptible on idle GPUs.
``reference`` below is that rule written as a plain loop (a placement attempt per waiting
task). The shipped scan groups the queue and skips groups that cannot start; on every pass of
a busy run with gangs, caps and preemptions, both must return the same actions.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from engine.core.types import Admit, Decision, Preempt
from engine.sim.baselines import legacy
from engine.sim.baselines.placement import FreeMap, drain_actions
from engine.sim.engine import simulate
from engine.sim.schedulers import get_scheduler
from engine.sim.owners import derive_tree
from engine.sim.prepare import prepare_trace
from engine.sim.trace import Task, Trace
from engine.sim.synthetic import synthetic_trace
from engine.loader import load_config
from engine.sim.clusters import with_clusters


ROOT = Path(__file__).parents[2]


def reference(snapshot, config, now):
    cap = legacy.caps(snapshot, config)
    preemptible = {r.workload.id: r for r in snapshot.running if r.protected_until <= now}
    actions, evicted = drain_actions(snapshot, set(preemptible), "preemptible work leaves at once")
    used: dict = {}
    for r in snapshot.running:
        if r.workload.id not in preemptible:
            t = legacy.team_of(r.workload)
            used[t] = used.get(t, 0) + r.placement.gpus
    free = FreeMap(snapshot.nodes, (r for r in snapshot.running if r.workload.id not in evicted))
    victims = sorted((r for r in preemptible.values() if r.workload.id not in evicted),
                     key=lambda r: (-r.started_at, r.workload.id))
    queue = ([w for w in snapshot.pending if w.contract.allocated]
             + [w for w in snapshot.pending if not w.contract.allocated])
    for w in queue:
        c, team = w.contract, legacy.team_of(w)
        if c.allocated and used.get(team, 0) + c.gpus <= cap.get(team, 0):
            placement, chosen = free.place(c, config.policy), []
            if placement is None:
                trial = free.copy()
                for r in victims:
                    trial.release(r)
                    chosen.append(r)
                    placement = trial.place(c, config.policy)
                    if placement is not None:
                        break
            if placement is None:
                continue
            for r in list(reversed(chosen)):  # spare what the placement does not need
                trial = free.copy()
                for x in chosen:
                    if x is not r:
                        trial.release(x)
                if all(trial.free.get(n, 0) >= g for n, g in placement.assignments):
                    chosen.remove(r)
            for r in chosen:
                victims.remove(r)
                free.release(r)
                actions.append(Preempt(r.workload.id, w.id,
                                       f"preemptible; {w.id} runs within the {team} cap"))
            free.take(placement)
            used[team] = used.get(team, 0) + c.gpus
            actions.append(Admit(w.id, placement, f"{legacy.NON_PREEMPTIBLE}: HIGH within the "
                                                  f"{team} cap ({used[team]}/{cap.get(team, 0)} GPUs)"))
        else:
            placement = free.place(c, config.policy)
            if placement is not None:
                free.take(placement)
                kind = "LOW" if not c.allocated else f"HIGH over the {team} cap"
                actions.append(Admit(w.id, placement, f"preemptible: {kind} on idle GPUs"))
    return Decision(now, tuple(actions), {}, {})


def test_the_fast_scan_equals_the_plain_rule_on_every_pass():
    config = with_clusters(load_config(ROOT), "h100:16")  # 17 teams, 128 GPUs, gangs
    trace = prepare_trace(synthetic_trace(config, days=1, tasks=1500, demand_ratio_target=1.5,
                                          seed=3), config, seed=3)
    passes = {"n": 0, "acting": 0, "preempting": 0}

    def both(snapshot, cfg, now):
        want = reference(snapshot, cfg, now)
        got = legacy.legacy_decide(snapshot, cfg, now)
        assert got.actions == want.actions, f"pass at {now}"
        passes["n"] += 1
        passes["acting"] += bool(got.actions)
        passes["preempting"] += any(isinstance(a, Preempt) for a in got.actions)
        return got

    simulate(config, trace, replace(get_scheduler("legacy"), decide=both))
    assert passes["n"] > 500 and passes["acting"] > 100 and passes["preempting"] > 5, passes


def test_a_start_within_the_cap_preempts_only_the_runs_its_placement_needs():
    # two 8-GPU nodes, teams x and y at 50% (caps of 8 GPUs): x1 (7 GPUs, within x's cap)
    # and the LOW task z3 (1 GPU) fill n0; x2 (8 GPUs, over x's cap) runs preemptible on n1.
    # y1 (8 GPUs, within y's cap) needs a whole node: only x2's, on n1. z3, the youngest run,
    # is released first by the scan but is on n0, which y1 does not use: it keeps running.
    def task(i, submit, gpus, owner, min_runtime=3600.0):
        return Task(id=i, submit=submit, pods=1, gpus_per_pod=gpus, runtime=36000.0, owner=owner,
                    min_runtime=min_runtime, resumable=False)

    funded = [task("x1", 0, 7, "x"), task("x2", 1, 8, "x"), task("y1", 3, 8, "y")]
    config = replace(with_clusters(load_config(ROOT), "h100:2"),
                     tree=derive_tree(Trace.of(funded), "equal"))
    trace = prepare_trace(Trace.of([*funded, task("z3", 2, 1, "z", 0.0)], name="t",
                                   meta={"horizon": 100000}),
                          config, mapping={"x": "x", "y": "y", "z": None})
    result = simulate(config, trace, "legacy")
    at_y1 = [(e.kind, e.subject) for e in result.events if e.time == 3]
    assert at_y1 == [("submit", "y1"), ("preempt", "x2"), ("start", "y1")]
    # (z3 goes later, when x1 ends and x2, now within x's cap, needs all of n0)
    assert [(e.time, e.detail.split(":")[0]) for e in result.events
            if e.kind == "preempt" and e.subject == "z3"] == [(36000.0, "by x2")]
