"""The legacy scheduler the brief replaces: HIGH/LOW priority and a per-team cap.

Rules (one pass, every call, pure):

* HIGH is funded work, LOW unfunded work (in the lab all funded work ended up HIGH).
  The queue is HIGH first, then LOW, oldest first within each, and is scanned greedily: a
  task that cannot start does not block later ones.
* Each team (budget leaf) may run at most ``cap = floor(effective share x healthy GPUs)``
  *non-preemptible* GPUs. A HIGH task that fits under its cap runs non-preemptible, to
  completion; to start it may preempt preemptible work (youngest first).
* A task over its cap (and all LOW work) runs *preemptible*, only on idle GPUs, and any
  non-preemptible start may preempt it (everyone opts in rather than wait; this is how the
  lab's old scheduler reached 98% occupancy). A preempted resumable task resumes; any other
  restarts from scratch.
* Unhealthy nodes are cordoned; preemptible work leaves them at once, non-preemptible work
  stays until it completes (the on-call toil of the brief).

The shell marks a run non-preemptible when its ``Admit.reason`` starts with
:data:`NON_PREEMPTIBLE` (``protected_until = inf``).
"""

from __future__ import annotations

import math

from engine.core.types import Admit, Decision, Preempt, Snapshot, Workload
from engine.model import Config
from engine.sim.baselines.placement import FreeMap, drain_actions
from engine.sim.schedulers import Scheduler

NON_PREEMPTIBLE = "non-preemptible"


def team_of(w: Workload) -> str | None:
    return w.contract.budget or w.contract.requested_budget


def caps(snapshot: Snapshot, config: Config) -> dict[str, int]:
    healthy = sum(n.gpus for n in snapshot.nodes if n.healthy)
    tree = config.tree
    return {leaf: math.floor(tree.effective_share(leaf) * healthy + 1e-9) for leaf in tree.leaves()}


def legacy_decide(snapshot: Snapshot, config: Config, now: float) -> Decision:
    policy = config.policy
    cap = caps(snapshot, config)
    preemptible = {r.workload.id: r for r in snapshot.running if r.protected_until <= now}
    actions, evicted = drain_actions(snapshot, set(preemptible), "preemptible work leaves at once")
    used: dict[str, int] = {}
    for r in snapshot.running:
        if r.workload.id not in preemptible:
            team = team_of(r.workload)
            used[team] = used.get(team, 0) + r.placement.gpus
    free = FreeMap(snapshot.nodes, (r for r in snapshot.running if r.workload.id not in evicted))
    victims = sorted((r for r in preemptible.values() if r.workload.id not in evicted),
                     key=lambda r: (-r.started_at, r.workload.id))
    victim_gpus = sum(r.placement.gpus for r in victims)
    high = [w for w in snapshot.pending if w.contract.allocated]
    low = [w for w in snapshot.pending if not w.contract.allocated]
    # shapes that found no place on free GPUs / not even with every preemptible run released:
    # free GPUs only shrink until a preemption (which clears the first memo), and free GPUs
    # plus preemptible ones only shrink all pass, so both verdicts stand (a pure speed-up)
    nofit: set[tuple] = set()
    novictims: set[tuple] = set()
    for w in high + low:
        if free.total == 0 and victim_gpus == 0:
            break
        c = w.contract
        shape = (c.gpus_per_pod, c.pods, c.cluster)
        team = team_of(w)
        within = c.allocated and used.get(team, 0) + c.gpus <= cap.get(team, 0)
        if within:
            placement = None if shape in nofit else free.place(c, policy)
            if placement is None:
                nofit.add(shape)
            chosen: list = []
            if placement is None and shape not in novictims and c.gpus <= free.total + victim_gpus:
                trial = free.copy()
                for r in victims:
                    trial.release(r)
                    chosen.append(r)
                    placement = trial.place(c, policy)
                    if placement is not None:
                        break
                if placement is None:
                    chosen = []
                    novictims.add(shape)
            if placement is None:
                continue
            if chosen:
                nofit.clear()  # released GPUs the placement leaves over are free for others
            for r in chosen:
                victims.remove(r)
                victim_gpus -= r.placement.gpus
                free.release(r)
                actions.append(Preempt(r.workload.id, w.id,
                                       f"preemptible; {w.id} runs within the {team} cap"))
            free.take(placement)
            used[team] = used.get(team, 0) + c.gpus
            actions.append(Admit(w.id, placement, f"{NON_PREEMPTIBLE}: HIGH within the {team} cap "
                                                  f"({used[team]}/{cap.get(team, 0)} GPUs)"))
        else:
            placement = None if shape in nofit else free.place(c, policy)
            if placement is None:
                nofit.add(shape)
                continue
            free.take(placement)
            kind = "LOW" if not c.allocated else f"HIGH over the {team} cap"
            actions.append(Admit(w.id, placement, f"preemptible: {kind} on idle GPUs"))
    return Decision(now, tuple(actions), {}, {})


def legacy_protection(workload: Workload, admit: Admit, now: float) -> float:
    return math.inf if admit.reason.startswith(NON_PREEMPTIBLE) else now


SCHEDULER = Scheduler("legacy", legacy_decide, legacy_protection,
                      "HIGH/LOW priority, per-team cap on non-preemptible GPUs, "
                      "opt-in preemptible work on idle GPUs", reevaluate=False)
