"""``decide(snapshot, config, now) -> Decision``: the one pure, deterministic scheduling step.

Both shells call this; what the simulator predicts is what the cluster does. Steps:

1. Rank every leaf (:mod:`engine.core.fairshare`, Fair Tree over ``snapshot.usage``).
2. Drain (:mod:`engine.core.drain`): cordon unhealthy nodes, evict their workloads once each
   reaches its min runtime, report empty unhealthy nodes drained.
3. Build the free-GPU pool of schedulable nodes (:mod:`engine.core.placement`) and the
   preemptible running work (:mod:`engine.core.preemption`).
4. Walk the queue once in order (:mod:`engine.core.queue`). For each workload:
   a. place it on free GPUs (packing; gangs all or nothing); a failed shape is remembered
      until the next preemption of the pass (free GPUs only shrink until a preemption may
      leave some over, :mod:`engine.core.walk_memo`), so a large workload that cannot be
      placed does not block smaller ones behind it;
   b. else, if it is allocated, preempt the cheapest valid victim set (lower-ranked or
      unallocated, never protected, anti-ping-pong rule projected over all moves of this
      decision (:mod:`engine.core.eligibility`); a debug workload may take unprotected work
      of any leaf, see :mod:`engine.core.queue` and :mod:`engine.core.preemption`). A
      failed search is not repeated for a later workload of the same gang that may use no
      more nodes and take no more victims, until a preemption (free GPUs and victims only
      shrink between preemptions; a preemption may leave GPUs free);
   c. else, while fewer than ``policy.reservations`` exist and they hold less than
      ``policy.reservation_share`` of the GPUs, such an allocated non-debug
      workload gets a reservation (:mod:`engine.core.reservation`) on nodes no earlier one
      holds: timed, at its finite earliest start, or else a drain hold on the node(s) short
      the fewest GPUs; one that no free node set can ever hold gets none and the next one
      tries (failures memoised like b). From then on each reservation's nodes only take work
      its holder could preempt (by then, for a timed one).
   d. else, with ``policy.loans``, a resumable allocated non-debug workload kept off only by
      reservations may start on their GPUs *on loan* (``Admit.loan``): for that run it is
      unallocated work (not charged, unprotected, preempted first, so every holder may take
      the GPUs back), and funded again once requeued.
   Workloads that can never fit (bigger than any node / topology group even when the whole
   cluster is empty and healthy) are rejected. Unallocated work only takes idle GPUs.
5. Every workload, running or pending, gets a status with the numbers that explain it, and
   ``ranks`` holds every leaf's :class:`LeafRank`.

Quick paths and caches keep the common case cheap without changing a result: the package's
docstring (:mod:`engine.core`) lists them.
"""

from __future__ import annotations

from functools import partial
from typing import Sequence

from engine.core.drain import drain
from engine.core.explain import admit_reason, leaf_text, preempt_reason
from engine.core.lazymaps import LazyMap, StatusMap
from engine.core.fairshare import rank_leaves
from engine.core.ledger import rollup_usage
from engine.core.eligibility import Eligibility
from engine.core.placement import Layouts, Pool
from engine.core.preemption import Victim, find_victims, progress_lost
from engine.core.projection import Projection
from engine.core.ranksums import RankSums
from engine.core.queue import Entry, build_queue, near_numbers, queue_shapes
from engine.core.releases import Releases
from engine.core.holds import NOT_KEPT, Holds
from engine.core.reservation import reservation_for
from engine.core.running_facts import RunningFacts, survey
from engine.core.statuses import PassView, status_index, waiting_causes
from engine.core.types import Action, Admit, Decision, Placement, Preempt, Reject, Snapshot
from engine.core.verdicts import ShapeVerdicts
from engine.core.victim_cache import VictimCache
from engine.core.victim_index import VictimIndex
from engine.core.walk_memo import WalkMemos
from engine.model import Config


class _Pass:
    """State of one decision pass (kept private: ``decide`` is the API)."""

    def __init__(self, snapshot: Snapshot, config: Config, now: float):
        self.now = now
        self.tree, self.policy = config.tree, config.policy
        self.used_tree = rollup_usage(self.tree, snapshot.usage)
        self.ranks = rank_leaves(self.tree, snapshot.usage, self.used_tree)
        self.n = len(self.ranks)
        self.weights = {c.name: self.policy.billing_weight(c.gpu_type) for c in self.policy.clusters}
        layout = _LAYOUTS.get(snapshot.nodes, self.policy.gang_in_one_domain)
        self.node_actions, self.evictions, self.draining = drain(
            snapshot.nodes, snapshot.running, self.policy.drain, now) if layout.unhealthy else ([], [], {})
        evicted = {p.workload_id for p in self.evictions}
        # one pass over running work (the set-up's hot part), from each one's facts
        self.node_weight = layout.node_weights(self.weights)  # read-only
        seen = survey(_FACTS, snapshot.running, self.tree, self.node_weight, evicted, self.ranks,
                      self.n + 1, now)
        self.held = seen.held  # (r, leaf, entry): Releases
        self.below = below = RankSums(self.n + 1, seen.at_rank)  # alive victim GPUs per rank (as they go)
        self.pool = Pool(snapshot.nodes, seen.used, self.policy.gang_in_one_domain, layout)
        self.proj = Projection(self.tree)
        # GPUs x whole billing weights: whole rates whose sums are exact in any order
        whole = seen.held_gpus < 2 ** 32 and all(float(w).is_integer() and 0 <= w <= 1024
                                            for w in self.weights.values())
        self.proj.add_all(seen.charges, whole)
        self._prey = seen.prey
        self._index: VictimIndex | None = None  # the victims, indexed on the first search
        self.gpus_by_leaf = seen.by_leaf
        self.gone: set[str] = set(evicted)  # preempted in this decision
        self.rules: Eligibility = Eligibility(  # who may preempt whom, with its per-pass caches
            self.tree, self.used_tree, self.proj, self.ranks, self.weights, self.pool.cluster_names,
            seen.by_leaf, below)
        self.all_leaves = self.rules.all_leaves  # what a debug workload may preempt
        self._texts: dict[str | None, str] = {}  # leaf_text per leaf, for admit's reasons
        self.actions: list[Action] = []
        self.preempted: dict[str, tuple[str, str]] = {}  # victim id -> (preemptor, reason)
        self.holds: Holds = Holds(  # the reservations of the pass
            self.policy.reservations, self.policy.reservation_share, layout.capacity,
            layout.total, self.rules, self.proj, now)
        self._releases: Releases | None = None  # running work as releases, for reservations
        self.state = 0  # admissions and reservations so far (see ``run``)

    # ------------------------------------------------------------------ victim rules

    @property
    def by_node(self) -> VictimIndex:
        """The alive victims per node, in victim order, built on the first victim search
        (many passes search none): until then no victim is gone."""
        if self._index is None:
            self._index = VictimIndex(_VICTIMS.victims(
                self._prey, self.now, self.policy.preemption_grace_s, self.policy.debug,
                self.policy.min_runtime_cap_s))
        return self._index

    def rate_of(self, assignments) -> float:
        """Billing-weighted GPUs held (GPU-seconds charged per second)."""
        return sum(g * self.node_weight.get(n, 1.0) for n, g in assignments)

    # ------------------------------------------------------------------ the pass

    def admit(self, e: Entry, placement, victims: list[Victim], loan: bool = False) -> None:
        """Admit ``e`` on ``placement`` after preempting ``victims``; ``loan``: as free work
        on reserved GPUs (step d of the module docstring: no charge projected)."""
        w = e.workload
        texts = self._texts  # leaf -> leaf_text (ranks are fixed for the pass)
        mine = texts.get(e.leaf)
        if mine is None:
            mine = texts[e.leaf] = leaf_text(self.ranks.get(e.leaf) if e.leaf else None, self.n)
        for v in victims:
            self.gone.add(v.id)
            theirs = None
            if v.leaf is not None:
                # only work charged to a leaf (which has its rank, queue.Entry) finds victims (step)
                assert e.rank is not None
                self.proj.remove(v.leaf, self.rate_of(v.on))
                theirs = texts.get(v.leaf)
                if theirs is None:
                    theirs = texts[v.leaf] = leaf_text(self.ranks.get(v.leaf), self.n)
            reason = preempt_reason(w.id, mine, e.debug, e.leaf, e.rank, theirs,
                                    v.running.protected_until, self.now,
                                    progress_lost(v.running, self.now, self.policy.preemption_grace_s))
            self.actions.append(Preempt(v.id, w.id, reason, requeue=True))
            self.preempted[v.id] = (w.id, reason)
            for n, g in v.on:
                self.pool.give(n, g)
            self.by_node.remove(v)
            self.rules.victim_gone(v.leaf, v.rank, v.gpus)
        self.pool.take(placement)
        if self._index is not None:  # (else built later, from the pool as it is then)
            for n, _ in placement.assignments:
                self._index.changed(n)
        holders = [r.holder for r in self.holds.items if r.nodes & set(placement.nodes)] if loan else None
        if not loan and e.leaf is not None:  # (a loan: never with victims, never charged)
            self.proj.add(e.leaf, self.rate_of(placement.assignments), w.contract.min_runtime_s)
        self.actions.append(Admit(w.id, placement, admit_reason(
            placement.assignments, [v.id for v in victims], holders, mine), loan))

    def run(self, entries: list[Entry]) -> list[tuple[str, object, int]]:
        """Walk the queue once; outcome per workload, in queue order: (kind, detail, free GPUs
        it saw); a failed search leaves its numbers as detail (the words are built on demand).
        An outcome depends on the workload's :attr:`~engine.core.queue.Entry.alike` contract and
        on the pass's state, which changes only when a workload is admitted or gets a
        reservation (``self.state`` counts those): a workload alike an earlier one, with no
        change since, gets that one's outcome without a second walk (long queues of alike jobs),
        and so does one alike but for its min runtime, in some cases (``WalkMemos.kept_out``)."""
        outcome: list[tuple[str, object, int]] = []
        add = outcome.append
        self.start_walk()
        seen: dict[int, tuple[str, object, int]] = {}  # outcomes in the current state
        near_of = self.near_of
        state, step, get, get_out = self.state, self.step, seen.get, self.memo.kept_out.get
        starting = self.holds.starting_before_end
        for e in entries:
            key = e.same  # (Entry.alike's number; a loan depends on the resumable flag too)
            hit = get(key)
            if hit is not None:
                add(hit)
                continue
            out = get_out(near_of[key])
            if out is not None and out[0] == state and out[1] == starting(e):
                got = out[2]
            else:
                got = step(e)
            add(got)
            if self.state == state:
                seen[key] = got
            else:
                state = self.state
                seen.clear()
        return outcome

    def start_walk(self) -> None:
        """What :meth:`run` keeps for the walk, before the first :meth:`step`."""
        self.memo = WalkMemos()  # its failures, until a preemption
        self.quick = not self._prey and all(f == 0 for f in self.pool.free.values())
        # (without loans a turn reads no resumable flag: work alike but for it shares a number)
        self.near_of: list[int] = near_numbers(self.policy.loans)

    def why_unshown(self, e: Entry) -> bool:
        """Kept off some nodes, does ``e``'s walk end ``reserved-out`` unless it is admitted, its
        search's why unshown? So when no reservation may be added and no loan is tried."""
        return not e.debug and not self.holds.may_add() and not (
            self.policy.loans and e.workload.contract.resumable)

    def room_with(self, gang: tuple, clusters: Sequence[str], exclude: frozenset[str],
                  every: frozenset[str], free: int) -> bool:
        """Would a victim search for ``gang`` find room with every victim of the leaves in
        ``every`` eligible (the anti-ping-pong rule set aside)? Only then is that rule why a
        workload waits (its status and the ``pingpong`` cause); a failure is remembered as
        the walk's other failed searches are. ``free``: the GPUs free in ``clusters`` (the
        caller's step has them)."""
        memo, key = self.memo, (gang, exclude, every)
        if memo.room.get(key) == self.state:  # (found in this state of the walk)
            return True
        if self.victims_for(gang, clusters, exclude, every, None, free) is None:
            return False
        memo.room[key] = self.state
        return True

    def victims_for(self, gang: tuple, clusters: Sequence[str], exclude: frozenset[str],
                    every: frozenset[str], dok: frozenset[str] | None, free: int
                    ) -> tuple[Placement, list[Victim]] | None:
        """:func:`~engine.core.preemption.find_victims` for ``gang`` (victims of the leaves in
        ``every``; a debug workload's ``dok``), behind the walk's memo: None without a search
        when a search it covers failed earlier in the walk or when ``free`` GPUs with every
        such victim's are too few; a failed search is remembered."""
        memo = self.memo
        if memo.failed_before(gang, exclude, every, dok):
            return None
        gpus_per_pod, pods, _ = gang
        found = None
        if free + self.rules.preemptible_upper(every) >= gpus_per_pod * pods:
            found = find_victims(gpus_per_pod, pods, clusters, self.pool, self.by_node, every,
                                 exclude, None, dok)
        if found is None:
            memo.search_failed(gang, exclude, every, dok)
        return found

    def fails_for_all_below(self, e: Entry, rank: int, clusters: Sequence[str],
                            exclude: frozenset[str], shape: tuple) -> bool:
        """Would a victim search for ``e`` fail with every victim ranked below ``rank``
        eligible? Then so does its search under the anti-ping-pong rule, which is not asked
        (the costly part of a busy walk). Remembered for the shape, ranks no better. Asked only
        where no status shows the rule's exclusions (:meth:`why_unshown`; a shape that keeps
        off nodes then keeps them off for the rest of the walk)."""
        memo, key = self.memo, (shape, rank)
        if memo.roomy.get(key) == self.state:
            return False
        c = e.workload.contract
        gang, every = (c.gpus_per_pod, c.pods, c.cluster), self.rules.victims_below(rank)
        if not memo.failed_before(gang, exclude, every, None) and self.by_node.room_below(
                rank, c.gpus_per_pod, c.pods, clusters, self.pool, exclude):
            memo.roomy[key] = self.state
            return False
        memo.search_failed(gang, exclude, every, None)
        memo.maxfail[shape] = rank
        return True

    def step(self, e: Entry) -> tuple[str, object, int]:
        """One workload of the walk (see :meth:`run`): admit it, find it victims, reserve
        for it, or say why it waits."""
        memo, quick = self.memo, self.quick
        nofit, maxfail = memo.nofit, memo.maxfail
        c = e.workload.contract
        clusters = self.pool.cluster_names(c.cluster)
        free = 0 if quick else self.pool.free_in(clusters)
        holds = self.holds
        if quick and (e.leaf is None or not holds.may_add()):
            return ("wait", "no free GPU and nothing preemptible", 0)
        kept = holds.kept_off(e) if holds.items else NOT_KEPT  # (nodes, why: for reserved-out)
        exclude = kept[0]
        shape = (c.gpus_per_pod, c.pods, c.cluster, exclude)
        if not quick and shape not in nofit:
            placement = self.pool.place(c.gpus_per_pod, c.pods, c.cluster, exclude)
            if placement is not None:
                self.admit(e, placement, [])
                self.state += 1
                return ("admitted", "", free)
            nofit.add(shape)
        if e.leaf is None:
            return ("wait", "unallocated work only runs on idle GPUs and never preempts", free)
        assert e.rank is not None  # work charged to a leaf has its rank (queue.Entry)
        unshown = bool(exclude) and not quick and self.why_unshown(e)
        if unshown and maxfail.get(shape, e.rank + 1) <= e.rank:
            got = ("reserved-out", kept[1], free)  # (the end of the walk below, in short)
            memo.kept_out[self.near_of[e.same]] = (self.state, holds.starting_before_end(e), got)
            return got
        # a debug workload outranks all running work for preemption (rank 0, every leaf)
        rank, charge = (0 if e.debug else e.rank), self.rules.charge_of(e)
        why: object = "no free GPU and nothing preemptible"
        if not quick:
            why = ("search", (), charge, 0.0)
            if not e.debug and maxfail.get(shape, rank + 1) <= rank:
                pass
            elif free + self.below.above(rank) < c.gpus:  # not even with every victim allowed
                maxfail[shape] = rank
            elif unshown and self.fails_for_all_below(e, rank, clusters, exclude, shape):
                pass
            else:
                # a debug workload may take any leaf's work, but debug work only by the
                # ordinary rule (``dok``: the leaves that rule allows); only leaves with
                # victims matter to the search (``vok``: those the rule allows)
                dok = self.rules.ok_victim_leaves(e.leaf, e.rank, charge) if e.debug else None
                vok = self.all_leaves if e.debug else self.rules.ok_victim_leaves(e.leaf, rank, charge)
                novictims = memo.novictims
                blocked = novictims.get((shape, vok, dok))
                if blocked is None:
                    found = self.victims_for((c.gpus_per_pod, c.pods, c.cluster), clusters,
                                             exclude, vok, dok, free)
                    if found is not None:
                        self.admit(e, found[0], found[1])
                        self.state += 1
                        memo.preempted()  # it may leave GPUs free that others can use
                        return ("admitted", "", free)
                    blocked = novictims[(shape, vok, dok)] = tuple(sorted(
                        self.rules.victims_below(rank) - vok))
                    if not blocked and not e.debug:  # no victim excluded: rank-wide failure
                        maxfail[shape] = rank
                if blocked and not e.debug and not self.room_with(
                        (c.gpus_per_pod, c.pods, c.cluster), clusters, exclude,
                        self.rules.victims_below(rank), free):
                    blocked = ()  # (the rule excluded victims that would not make room either)
                    maxfail[shape] = rank
                # (what the leaf's running work adds: shown only beside excluded leaves, and
                # 0.0 without them, as when a shortcut above ends the search)
                why = ("search", blocked, charge,
                       self.proj.rate.get(e.leaf, 0.0) * charge[1] if blocked else 0.0)
        if holds.may_add() and not e.debug:
            # (no "free + running GPUs < its GPUs" shortcut: a drain hold needs no release)
            # (every leaf the rule allows: protected work that ends in time counts too)
            ok = self.rules.ok_leaves(e.leaf, rank, charge)
            if (shape, ok) not in memo.noreserve:
                if self.reserve(e, clusters, charge, ok):
                    return ("holder", why, free)
                memo.noreserve.add((shape, ok))  # more nodes reserved later: still none
            if not exclude:
                return ("unreservable", why, free)
        if exclude and self.policy.loans and c.resumable and not e.debug and not quick:
            anywhere = (c.gpus_per_pod, c.pods, c.cluster, frozenset[str]())  # held nodes too
            placement = None if anywhere in nofit else self.pool.place(*anywhere)
            if placement is not None:
                self.admit(e, placement, [], loan=True)
                self.state += 1
                return ("admitted", "", free)
            nofit.add(anywhere)
        if exclude:
            return ("reserved-out", kept[1], free)  # (as it stands at its turn)
        return ("wait", why, free)

    def reserve(self, e: Entry, clusters: Sequence[str], charge: tuple[float, float],
                ok: frozenset[str]) -> bool:
        """Reserve for ``e`` (see :func:`~engine.core.reservation.reservation_for`); False
        when there is no reservation to make."""
        # only called by step for work charged to a leaf, which has its rank (queue.Entry)
        assert e.leaf is not None and e.rank is not None
        c = e.workload.contract
        if self._releases is None:  # sorted once per pass, on the first reservation
            self._releases = Releases(self.held, self.gone, self.now)
        res = reservation_for(e.workload.id, e.leaf, e.rank, charge, c.gpus_per_pod, c.pods,
                              clusters, self.pool, self._releases, ok, self.holds.nodes, self.now,
                              self.policy.loans)
        if res is None:
            return False
        self.holds.add(res)
        self.state += 1
        return True


_FACTS = RunningFacts()  # what each running workload alone gives, across decisions
_VERDICTS = ShapeVerdicts()  # "can this shape ever fit this layout?", across decisions
_LAYOUTS: Layouts = Layouts()  # static node layout per nodes tuple, across decisions
_VICTIMS = VictimCache()  # the victims of running work past its protection, across decisions


def decide(snapshot: Snapshot, config: Config, now: float) -> Decision:
    """The scheduling decision for ``snapshot`` at time ``now`` (pure, deterministic)."""
    p = _Pass(snapshot, config, now)
    entries, rejects = build_queue(snapshot.pending, p.ranks, p.policy.debug)
    kept, never = _VERDICTS.split(entries, snapshot.nodes, p.pool, p.policy.gang_in_one_domain,
                                  queue_shapes(entries))
    rejects = sorted([*rejects, *never], key=lambda r: r[0].id)
    outcome = p.run(kept)
    actions: list[Action] = [*p.node_actions, *p.evictions, *(Reject(w.id, why) for w, why in rejects), *p.actions]
    view: PassView = p  # what the statuses may read of the pass (mypy checks it conforms)
    index = partial(status_index, view, rejects, kept, outcome, snapshot.running)
    return Decision(now=now, actions=tuple(actions), statuses=StatusMap(index), ranks=p.ranks,
                    waiting=LazyMap(lambda: waiting_causes(view, kept, outcome)),
                    reserved={r.holder: (tuple(sorted(r.nodes)), r.until, r.numbers[-1] if r.hold else 0)
                              for r in p.holds.items})
