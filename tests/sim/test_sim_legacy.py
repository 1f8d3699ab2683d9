"""The legacy baseline's fast scan decides exactly what the plain rule says.

The rule (``engine.sim.baselines.legacy``): HIGH (funded) then LOW work, oldest first, one
greedy pass; a HIGH task within its team's cap runs non-preemptible and may preempt
preemptible work (youngest first) to start; anything else runs preemptible on idle GPUs.
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
from engine.sim.prepare import prepare_trace
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
