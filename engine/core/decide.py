"""``decide(snapshot, config, now) -> Decision``: the one pure, deterministic scheduling step.

Both shells call this; what the simulator predicts is what the cluster does. Steps:

1. Rank every leaf (:mod:`engine.core.fairshare`, Fair Tree over ``snapshot.usage``).
2. Drain (:mod:`engine.core.drain`): cordon unhealthy nodes, evict their workloads once each
   reaches its min runtime, report empty unhealthy nodes drained.
3. Build the free-GPU pool of schedulable nodes (:mod:`engine.core.placement`) and the
   preemptible running work (:mod:`engine.core.preemption`).
4. Walk the queue once in order (:mod:`engine.core.queue`). For each workload:
   a. place it on free GPUs (packing; gangs all or nothing); a failed shape is remembered
      for the rest of the pass (free GPUs only shrink), so a large workload that cannot be
      placed does not block smaller ones behind it;
   b. else, if it is allocated, preempt the cheapest valid victim set (lower-ranked or
      unallocated, never protected, anti-ping-pong rule). A failed search is not repeated
      for a later workload of the same shape that ranks no better (its possible victims
      are, up to the anti-ping-pong check, a subset);
   c. else the first such allocated workload gets a reservation (:mod:`engine.core.reservation`),
      and from then on the reserved nodes only take work that will be preemptible by then.
   Workloads that can never fit (bigger than any node / topology group even when the whole
   cluster is empty and healthy) are rejected. Unallocated work only takes idle GPUs.
5. Every workload, running or pending, gets a status with the numbers that explain it, and
   ``ranks`` holds every leaf's :class:`LeafRank`.

Quick paths keep the common case cheap: no free GPU and nothing preemptible skips all
searches; "does not fit" and "no victims" are memoised per shape; statuses are built lazily.
"""

from __future__ import annotations

from typing import Callable

from engine.core.drain import drain
from engine.core.explain import StatusMap, leaf_text, placement_text, shape_text, when
from engine.core.fairshare import (outranked_after_charge, rank_leaves, still_ranks_above,
                                    subtree_leaves)
from engine.core.ledger import rollup_usage
from engine.core.placement import Pool, fit
from engine.core.preemption import Victim, find_victims, make_victim
from engine.core.queue import Entry, build_queue, charged_leaf
from engine.core.reservation import Reservation, earliest_start
from engine.core.types import (Action, Admit, Decision, Preempt, Reject, Snapshot, WorkloadStatus)
from engine.durations import format_duration
from engine.model import Config


class _Pass:
    """State of one decision pass (kept private: ``decide`` is the API)."""

    def __init__(self, snapshot: Snapshot, config: Config, now: float):
        self.now = now
        self.tree, self.policy = config.tree, config.policy
        self.ranks = rank_leaves(self.tree, snapshot.usage)
        self.n = len(self.ranks)
        self.used_tree = rollup_usage(self.tree, snapshot.usage)
        self.weights = {c.name: self.policy.billing_weight(c.gpu_type) for c in self.policy.clusters}
        self.node_actions, self.evictions, self.draining = drain(
            snapshot.nodes, snapshot.running, self.policy.drain, now)
        evicted = {p.workload_id for p in self.evictions}
        used: dict[str, int] = {}
        for r in snapshot.running:
            if r.workload.id not in evicted:
                for n, g in r.placement.assignments:
                    used[n] = used.get(n, 0) + g
        self.pool = Pool(snapshot.nodes, used, self.policy.gang_in_one_domain)
        self.full = {n: s.gpus for n, s in self.pool.all_nodes.items()}
        self.running = [r for r in snapshot.running if r.workload.id not in evicted]
        victims = []
        for r in self.running:
            if now < r.protected_until:
                continue
            leaf, _ = charged_leaf(r.workload, self.ranks)
            rank = self.ranks[leaf].rank if leaf is not None else self.n + 1
            victims.append(make_victim(r, leaf, rank, now, self.policy.preemption_grace_s))
        self.victims = sorted(victims, key=lambda v: v.order)
        self.by_node: dict[str, list[Victim]] = {}  # alive victims per node, in victim order
        self.gpus_by_leaf: dict[str | None, int] = {}  # alive victim GPUs per leaf (None: unallocated)
        for v in self.victims:
            for n, _ in v.on:
                self.by_node.setdefault(n, []).append(v)
            self.gpus_by_leaf[v.leaf] = self.gpus_by_leaf.get(v.leaf, 0) + v.gpus
        self.gone: set[str] = set(evicted)  # preempted in this decision
        self._pingpong: dict[tuple[str, str, float], bool] = {}
        self._ok: dict[tuple[str, float], frozenset[str]] = {}
        self._under: dict[str, tuple[str, ...]] | None = None
        self.actions: list[Action] = []
        self.preempted: dict[str, tuple[str, str]] = {}  # victim id -> (preemptor, reason)
        self.reservation: Reservation | None = None
        self.tried_reservation = False
        self.holder_charge = 0.0

    # ------------------------------------------------------------------ victim rules

    def pingpong_ok(self, winner: str, loser: str, extra: float) -> bool:
        key = (winner, loser, extra)
        ok = self._pingpong.get(key)
        if ok is None:
            ok = self._pingpong[key] = still_ranks_above(self.tree, self.used_tree, winner, loser, extra)
        return ok

    def may_preempt(self, leaf: str, rank: int, extra: float, v_leaf: str | None, v_rank: int) -> bool:
        return v_leaf is None or (v_rank > rank and self.pingpong_ok(leaf, v_leaf, extra))

    def charge_of(self, e: Entry) -> float:
        """GPU-seconds a workload's protected run will charge its leaf (anti-ping-pong)."""
        c = e.workload.contract
        clusters = self.pool.cluster_names(c.cluster) or sorted(self.weights)
        weight = max((self.weights.get(x, 1.0) for x in clusters), default=1.0)
        return c.gpus * c.min_runtime_s * weight

    def ok_leaves(self, leaf: str, rank: int, extra: float) -> frozenset[str]:
        """Leaves whose work past its min runtime a workload of ``leaf`` (charging ``extra``)
        may preempt: ranked lower and passing the anti-ping-pong rule."""
        key = (leaf, extra)
        ok = self._ok.get(key)
        if ok is None:
            if self._under is None:
                self._under = subtree_leaves(self.tree)
            ok = self._ok[key] = outranked_after_charge(self.tree, self.used_tree, leaf, extra, self._under)
        return ok

    def preemptible_upper(self, ok: frozenset[str]) -> int:
        """Upper bound of the GPUs preemption could free for a workload allowed ``ok`` leaves."""
        return self.gpus_by_leaf.get(None, 0) + sum(self.gpus_by_leaf.get(x, 0) for x in ok)

    def backfill_ok(self, e: Entry) -> bool:
        """May ``e`` use the reserved nodes? Only if the holder could preempt it by then."""
        res = self.reservation
        if res is None or e.leaf is None:
            return True
        c = e.workload.contract
        return (self.now + c.min_runtime_s <= res.until and
                self.may_preempt(res.leaf, res.rank, self.holder_charge, e.leaf, e.rank.rank))

    # ------------------------------------------------------------------ the pass

    def admit(self, e: Entry, placement, victims: list[Victim]) -> None:
        w = e.workload
        for v in victims:
            self.gone.add(v.id)
            lr = self.ranks.get(v.leaf) if v.leaf else None
            why = ("unallocated work is preempted first" if v.leaf is None else
                   f"{leaf_text(lr, self.n)} ranks below {e.leaf} (rank {e.rank.rank}) and "
                   f"its min runtime ended {when(v.running.protected_until, self.now)}")
            reason = (f"preempted for {w.id} ({leaf_text(e.rank, self.n)}): {why}; "
                      f"progress lost {v.cost / 3600:.2f} GPU-h")
            self.actions.append(Preempt(v.id, w.id, reason, requeue=True))
            self.preempted[v.id] = (w.id, reason)
            for n, g in v.on:
                self.pool.give(n, g)
                self.by_node[n].remove(v)
            self.gpus_by_leaf[v.leaf] -= v.gpus
        self.pool.take(placement)
        how = (f" after preempting {len(victims)} workload(s) ({', '.join(v.id for v in victims)})"
               if victims else "")
        self.actions.append(Admit(w.id, placement, f"admitted on {placement_text(placement.assignments)}"
                                  f"{how}: {leaf_text(e.rank, self.n)}"))

    def run(self, entries: list[Entry]) -> dict[str, tuple[str, str, int]]:
        """Walk the queue once; outcome per workload: (kind, detail, free GPUs it saw)."""
        outcome: dict[str, tuple[str, str, int]] = {}
        nofit: set[tuple] = set()
        novictims: dict[tuple, tuple[int, str]] = {}
        quick = not self.victims and all(f == 0 for f in self.pool.free.values())
        for e in entries:
            w, c = e.workload, e.workload.contract
            clusters = self.pool.cluster_names(c.cluster)
            free = 0 if quick else self.pool.free_in(clusters)
            if quick and (e.leaf is None or self.tried_reservation):
                outcome[w.id] = ("wait", "no free GPU and nothing preemptible", 0)
                continue
            exclude = frozenset() if self.backfill_ok(e) else self.reservation.nodes
            shape = (c.gpus_per_pod, c.pods, c.cluster, bool(exclude))
            if not quick and shape not in nofit:
                placement = self.pool.place(c.gpus_per_pod, c.pods, c.cluster, exclude)
                if placement is not None:
                    self.admit(e, placement, [])
                    outcome[w.id] = ("admitted", "", free)
                    continue
                nofit.add(shape)
            if e.leaf is None:
                outcome[w.id] = ("wait", "unallocated work only runs on idle GPUs and never preempts", free)
                continue
            rank = e.rank.rank
            extra = self.charge_of(e)
            why = "no lower-ranked work past its min runtime to preempt"
            failed = novictims.get(shape)
            if failed is not None and failed[0] <= rank:
                why = failed[1]
            elif not quick:
                ok = self.ok_leaves(e.leaf, rank, extra)
                found = None
                if free + self.preemptible_upper(ok) >= c.gpus:
                    found = find_victims(c.gpus_per_pod, c.pods, clusters, self.pool, self.by_node, ok,
                                         exclude)
                if found is not None:
                    self.admit(e, found[0], found[1])
                    outcome[w.id] = ("admitted", "", free)
                    nofit.clear()  # preemption may leave GPUs free that others can use
                    continue
                blocked = sorted(x for x, r in self.ranks.items()
                                 if r.rank > rank and x not in ok and self.gpus_by_leaf.get(x, 0) > 0)
                if blocked:
                    shown = ", ".join(blocked[:5]) + (", ..." if len(blocked) > 5 else "")
                    why = (f"lower-ranked work of {shown} is past its min runtime, "
                           f"but the anti-ping-pong rule forbids preempting it: after charging this "
                           f"workload's protected run ({extra / 3600:.1f} GPU-h) budget {e.leaf} would "
                           f"no longer rank above them")
                elif self.gpus_by_leaf.get(None, 0) or any(self.gpus_by_leaf.get(x, 0) for x in ok):
                    why = "preempting all lower-ranked or unallocated work past its min runtime would not make room"
                novictims[shape] = (rank, why)
            if exclude:
                outcome[w.id] = ("reserved-out", "", free)
                continue
            if not self.tried_reservation:
                self.tried_reservation = True
                self.reserve(e, clusters, extra)
                if self.reservation is not None:
                    outcome[w.id] = ("holder", "", free)
                    continue
            outcome[w.id] = ("wait", why if not quick else "no free GPU and nothing preemptible", free)
        return outcome

    def reserve(self, e: Entry, clusters: list[str], extra: float) -> None:
        c = e.workload.contract
        releases = []
        for r in self.running:
            if r.workload.id in self.gone:
                continue
            leaf, _ = charged_leaf(r.workload, self.ranks)
            rank = self.ranks[leaf].rank if leaf is not None else self.n + 1
            if self.may_preempt(e.leaf, e.rank.rank, extra, leaf, rank):
                releases.append((max(self.now, r.protected_until), r.workload.id, r.placement.assignments))
        releases.sort()
        found = earliest_start(c.gpus_per_pod, c.pods, clusters, self.pool, releases)
        if found is not None:
            self.holder_charge = extra
            self.reservation = Reservation(e.workload.id, e.leaf, e.rank.rank,
                                           max(self.now, found[0]), found[1])


def _never_fits(p: _Pass, c) -> str | None:
    """Why the workload could not fit even on an empty, healthy cluster (None if it could)."""
    clusters = [c.cluster] if c.cluster else sorted({n.cluster for n in p.pool.all_nodes.values()})
    if not any(s.cluster in clusters for s in p.pool.all_nodes.values()):
        return None  # no nodes seen (yet): wait rather than reject on a partial view
    for cl in clusters:
        names = [n for n, s in p.pool.all_nodes.items() if s.cluster == cl]
        groups: dict[tuple[str, str], list[str]] = {}
        for n in names:
            s = p.pool.all_nodes[n]
            groups.setdefault((cl, s.domain if p.policy.gang_in_one_domain else ""), []).append(n)
        if fit(c.gpus_per_pod, c.pods, p.full, names, groups) is not None:
            return None
    scope = "topology domain" if p.policy.gang_in_one_domain else "cluster"
    return (f"needs {shape_text(c)}, more than any node or {scope} holds even when empty; "
            f"split it or ask for fewer GPUs")


def decide(snapshot: Snapshot, config: Config, now: float) -> Decision:
    """The scheduling decision for ``snapshot`` at time ``now`` (pure, deterministic)."""
    p = _Pass(snapshot, config, now)
    entries, rejects = build_queue(snapshot.pending, p.ranks)
    memo: dict[tuple, str | None] = {}
    kept: list[Entry] = []
    for e in entries:
        c = e.workload.contract
        key = (c.gpus_per_pod, c.pods, c.cluster)
        if key not in memo:
            memo[key] = _never_fits(p, c)
        if memo[key] is None:
            kept.append(e)
        else:
            rejects.append((e.workload, memo[key]))
    rejects.sort(key=lambda r: r[0].id)
    outcome = p.run(kept)
    actions: list[Action] = [*p.node_actions, *p.evictions]
    actions += [Reject(w.id, reason) for w, reason in rejects]
    actions += p.actions
    admitted = {a.workload_id: a for a in p.actions if isinstance(a, Admit)}
    thunks: dict[str, Callable[[], WorkloadStatus]] = {}
    for w, reason in rejects:
        thunks[w.id] = (lambda w=w, reason=reason: WorkloadStatus(w.id, "rejected", reason))
    for pos, e in enumerate(kept, 1):
        thunks[e.workload.id] = (lambda e=e, pos=pos: _pending_status(p, e, pos, outcome, admitted))
    evictions = {a.workload_id: a for a in p.evictions}
    for r in snapshot.running:
        thunks[r.workload.id] = (lambda r=r: _running_status(p, r, evictions))
    return Decision(now=now, actions=tuple(actions), statuses=StatusMap(thunks), ranks=p.ranks)


def _pending_status(p: _Pass, e: Entry, pos: int, outcome, admitted) -> WorkloadStatus:
    w, c = e.workload, e.workload.contract
    kind, detail, free = outcome[w.id]
    lr = e.rank
    base = dict(workload_id=w.id, leaf=e.leaf, queue_position=pos,
                rank=lr.rank if lr else None, metric=lr.metric if lr else None)
    note = f"; {e.note}" if e.note else ""
    if kind == "admitted":
        return WorkloadStatus(state="admitted", reason=admitted[w.id].reason + note,
                              protected_until=p.now + c.min_runtime_s if e.leaf else p.now, **base)
    needs = f"needs {shape_text(c)}, {free} GPUs free"
    res = p.reservation
    if kind == "holder":
        why = (f"{needs}; reserved {placement_text(res.placement.assignments)}: enough GPUs become "
               f"preemptible {when(res.until, p.now)}; later work may use them only if preemptible by then")
    elif kind == "reserved-out":
        why = (f"{needs}; the free GPUs on {', '.join(sorted(res.nodes))} are reserved for {res.holder} "
               f"until {when(res.until, p.now)} and this workload's min runtime "
               f"({format_duration(c.min_runtime_s)}) would still protect it then")
    else:
        why = f"{needs}; {detail}"
    return WorkloadStatus(state="pending", reason=f"waiting: {why}; {leaf_text(lr, p.n)}{note}", **base)


def _running_status(p: _Pass, r, evictions) -> WorkloadStatus:
    wid = r.workload.id
    leaf, note = charged_leaf(r.workload, p.ranks)
    lr = p.ranks.get(leaf) if leaf else None
    base = dict(workload_id=wid, leaf=leaf, rank=lr.rank if lr else None,
                metric=lr.metric if lr else None, protected_until=r.protected_until)
    if wid in evictions:
        return WorkloadStatus(state="preempted", reason=evictions[wid].reason, **base)
    if wid in p.preempted:
        by, reason = p.preempted[wid]
        return WorkloadStatus(state="preempted", reason=reason, preemptor=by, **base)
    where = placement_text(r.placement.assignments)
    if wid in p.draining:
        why = p.draining[wid]
    elif p.now < r.protected_until:
        why = f"protected by its min runtime until {when(r.protected_until, p.now)}"
    elif leaf is None:
        why = f"preemptible at any time by allocated work ({note})"
    else:
        why = (f"past its min runtime (since {when(r.protected_until, p.now)}); keeps running while "
               f"no higher-ranked work needs its GPUs")
    return WorkloadStatus(state="running", reason=f"running on {where}: {why}; {leaf_text(lr, p.n)}", **base)
