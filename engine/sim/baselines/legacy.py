"""The legacy scheduler the brief replaces: HIGH/LOW priority and a per-team cap.

Rules (one pass, every call, pure):

* HIGH is funded work, LOW unfunded work (in the lab all funded work ended up HIGH).
  The queue is HIGH first, then LOW, oldest first within each, and is scanned greedily: a
  task that cannot start does not block later ones.
* Each team (budget leaf) may run at most ``cap = floor(effective share x healthy GPUs)``
  *non-preemptible* GPUs. A HIGH task that fits under its cap runs non-preemptible, to
  completion; to start it may preempt preemptible work: runs are released youngest first
  until it can be placed, and of those only the runs on its placement's nodes that it needs
  are preempted (:func:`needed`: the oldest released are spared first).
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

import bisect
import heapq
import math
from typing import Mapping

from engine.core.types import Admit, Decision, Placement, Preempt, Running, Snapshot, Workload
from engine.model import Config
from engine.sim.baselines.placement import FreeMap, drain_actions, layout_of

NON_PREEMPTIBLE = "non-preemptible"


def team_of(w: Workload) -> str | None:
    return w.contract.budget or w.contract.requested_budget


_CAPS: dict[int, tuple[Config, int, dict[str | None, int]]] = {}  # keys: leaves (team_of)


def caps(snapshot: Snapshot, config: Config) -> dict[str | None, int]:
    """Per team, ``floor(effective share x healthy GPUs)`` (memoised per config and count)."""
    healthy = layout_of(snapshot.nodes).healthy_gpus
    hit = _CAPS.get(id(config))
    if hit is not None and hit[0] is config and hit[1] == healthy:
        return hit[2]
    tree = config.tree
    out: dict[str | None, int] = {leaf: math.floor(tree.effective_share(leaf) * healthy + 1e-9)
                                  for leaf in tree.leaves()}
    if len(_CAPS) > 64:
        _CAPS.clear()
    _CAPS[id(config)] = (config, healthy, out)
    return out


def legacy_decide(snapshot: Snapshot, config: Config, now: float) -> Decision:
    policy = config.policy
    cap = caps(snapshot, config)
    running = snapshot.running
    preemptible: list = []
    ids: set[str] = set()
    used: dict[str | None, int] = {}  # per team_of (None: no budget named)
    for r in running:  # one pass: preemptible runs, and non-preemptible GPUs per team
        if r.protected_until <= now:
            preemptible.append(r)
            ids.add(r.workload.id)
        else:
            team = team_of(r.workload)
            used[team] = used.get(team, 0) + r.placement.gpus
    actions, evicted = drain_actions(snapshot, ids, "preemptible work leaves at once")
    if evicted:
        running = tuple(r for r in running if r.workload.id not in evicted)
        preemptible = [r for r in preemptible if r.workload.id not in evicted]
    free = FreeMap(snapshot.nodes, running)
    victims = sorted(preemptible, key=lambda r: (-r.started_at, r.workload.id))
    victim_gpus = sum(r.placement.gpus for r in victims)
    # The queue: HIGH then LOW, oldest first (snapshot order), scanned greedily. Memos, a pure
    # speed-up: ``nofit`` = shapes that found no place on free GPUs (free GPUs only shrink
    # until a preemption, which clears it); ``novictims`` = shapes that found none even with
    # every preemptible run released (free plus preemptible GPUs only shrink all pass).
    # Tasks are grouped by (team, HIGH?, shape); a group is *dead* when its next task can
    # only be skipped: its shape is in ``nofit`` and it may not preempt (LOW, over its team's
    # cap, which only tightens as the pass admits) or its shape is in ``novictims``. The scan
    # merges the groups' queues by position and parks dead groups (revived when ``nofit`` is
    # cleared), so a pass costs O(queue) to group plus O(started + groups), not a full
    # placement attempt per waiting task.
    groups: dict[tuple, list[Workload]] = {}
    position: dict[tuple, list[int]] = {}  # queue positions of each group's tasks
    n_pending = len(snapshot.pending)
    for i, w in enumerate(snapshot.pending):
        c = w.contract
        key = (team_of(w), c.allocated, c.gpus_per_pod, c.pods, c.cluster)
        g = groups.get(key)
        if g is None:
            groups[key] = g = []
            position[key] = []
        g.append(w)
        position[key].append(i if c.allocated else i + n_pending)  # HIGH before LOW
    nofit: set[tuple] = set()
    novictims: set[tuple] = set()

    def dead(key: tuple) -> bool:
        team, allocated, gpp, pods, cluster = key
        shape = (gpp, pods, cluster)
        if shape not in nofit:
            return False
        return (shape in novictims or not allocated
                or used.get(team, 0) + gpp * pods > cap.get(team, 0))

    heap = [(position[k][0], k, 0) for k in groups]
    heapq.heapify(heap)
    parked: dict[tuple, int] = {}  # dead group -> index of the task it parked on
    while heap:
        if free.total == 0 and victim_gpus == 0:
            break
        pos, key, j = heapq.heappop(heap)
        if dead(key):
            parked[key] = j
            continue
        w = groups[key][j]
        if j + 1 < len(groups[key]):
            heapq.heappush(heap, (position[key][j + 1], key, j + 1))
        c = w.contract
        shape = (c.gpus_per_pod, c.pods, c.cluster)
        team = key[0]
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
            if placement is None:
                novictims.add(shape)  # free + preemptible GPUs never grow back this pass
                continue
            if chosen:
                chosen = needed(chosen, placement, free.free)
                nofit.clear()  # released GPUs the placement leaves over are free for others
                for k in parked:  # its tasks up to here were skipped: resume after ``pos``
                    jj = bisect.bisect_right(position[k], pos)
                    if jj < len(position[k]):
                        heapq.heappush(heap, (position[k][jj], k, jj))
                parked.clear()
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


def needed(released: list[Running], placement: Placement, free: Mapping[str, int]) -> list[Running]:
    """Of the runs ``released`` (in release order) to make room for ``placement``, those it
    needs: runs with GPUs on its nodes, less any that the nodes can spare (``free``: GPUs free
    before the release), tried oldest released first, so the youngest are the ones taken."""
    want = dict(placement.assignments)
    mine = [r for r in released if any(n in want for n, _ in r.placement.assignments)]
    room = {n: free.get(n, 0) for n in want}
    for r in mine:
        for n, g in r.placement.assignments:
            if n in room:
                room[n] += g
    spared: set[str] = set()
    for r in reversed(mine):
        on = [(n, g) for n, g in r.placement.assignments if n in want]
        if all(room[n] - g >= want[n] for n, g in on):
            for n, g in on:
                room[n] -= g
            spared.add(r.workload.id)
    return [r for r in mine if r.workload.id not in spared]


def legacy_protection(workload: Workload, admit: Admit, now: float) -> float:
    return math.inf if admit.reason.startswith(NON_PREEMPTIBLE) else now
