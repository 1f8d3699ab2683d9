"""Static per-team monopolies: each team owns a fixed number of GPUs and nobody else's.

A team's quota is its effective share of the healthy GPUs, apportioned by largest remainder
(ties: leaf name), so quotas sum to the capacity minus any share the tree leaves unallocated.
Each team's queue is scanned oldest first, greedily; a task starts when it fits in the team's
remaining quota and a placement exists. Nothing is ever preempted (``protected_until = inf``);
work on unhealthy nodes runs to completion. Work with no budget at all never runs.
"""

from __future__ import annotations

import math

from engine.core.types import Admit, Decision, Snapshot, Workload
from engine.model import Config
from engine.sim.baselines.legacy import team_of
from engine.sim.baselines.placement import FreeMap, drain_actions


def quotas(snapshot: Snapshot, config: Config) -> dict[str, int]:
    healthy = sum(n.gpus for n in snapshot.nodes if n.healthy)
    tree = config.tree
    exact = {leaf: tree.effective_share(leaf) * healthy for leaf in tree.leaves()}
    out = {leaf: math.floor(v + 1e-9) for leaf, v in exact.items()}
    spare = math.floor(sum(exact.values()) + 1e-9) - sum(out.values())
    for leaf in sorted(exact, key=lambda l: (-(exact[l] - out[l]), l))[:max(0, spare)]:
        out[leaf] += 1
    return out


def monopoly_decide(snapshot: Snapshot, config: Config, now: float) -> Decision:
    quota = quotas(snapshot, config)
    actions, _ = drain_actions(snapshot, set(), "monopolies are never preempted")
    used: dict[str | None, int] = {}  # per team_of (None: no budget named)
    for r in snapshot.running:
        team = team_of(r.workload)
        used[team] = used.get(team, 0) + r.placement.gpus
    free = FreeMap(snapshot.nodes, snapshot.running)
    for w in snapshot.pending:
        if free.total == 0:
            break
        team = team_of(w)
        if team is None or used.get(team, 0) + w.contract.gpus > quota.get(team, 0):
            continue
        placement = free.place(w.contract, config.policy)
        if placement is None:
            continue
        free.take(placement)
        used[team] = used.get(team, 0) + w.contract.gpus
        actions.append(Admit(w.id, placement, f"monopoly of {team}: {used[team]}/{quota[team]} GPUs"))
    return Decision(now, tuple(actions), {}, {})


def monopoly_protection(workload: Workload, admit: Admit, now: float) -> float:
    return math.inf
