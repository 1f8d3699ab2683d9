"""Statuses: every workload's state after a decision and why, built from the numbers the
decision pass (:mod:`engine.core.decide`) recorded. Built lazily (see
:class:`~engine.core.lazymaps.StatusMap`): the simulator reads few of them.
"""

from __future__ import annotations

from typing import Mapping, Protocol, Sequence, TypedDict

from engine.core.explain import leaf_text, placement_text, shape_text, when
from engine.core.ranksums import RankSums
from engine.core.queue import Entry, charged_leaf
from engine.core.holds import Holds
from engine.core.reservation import Reservation
from engine.core.types import Action, Admit, LeafRank, Preempt, Running, Workload, WorkloadStatus
from engine.durations import format_duration


class PassView(Protocol):
    """What the statuses read of a decision pass (:class:`engine.core.decide._Pass`): the
    numbers it recorded, never its search state."""

    @property
    def now(self) -> float: ...
    @property
    def n(self) -> int: ...  # leaves
    @property
    def ranks(self) -> Mapping[str, LeafRank]: ...
    @property
    def below(self) -> RankSums: ...  # victim GPUs per rank, as the pass left them
    @property
    def holds(self) -> Holds: ...
    @property
    def preempted(self) -> Mapping[str, tuple[str, str]]: ...  # victim -> (preemptor, reason)
    @property
    def draining(self) -> Mapping[str, str]: ...  # workload on an unhealthy node -> why
    @property
    def actions(self) -> Sequence[Action]: ...  # its admissions and preemptions
    @property
    def evictions(self) -> Sequence[Preempt]: ...  # of work on unhealthy nodes


class _Numbers(TypedDict):
    """The numbers of a workload's status common to its states (see :class:`WorkloadStatus`)."""

    workload_id: str
    leaf: str | None
    rank: int | None
    metric: float | None


class _PendingNumbers(_Numbers):
    queue_position: int


class _RunningNumbers(_Numbers):
    protected_until: float


def pending_status(p: PassView, e: Entry, pos: int, outcome, admitted) -> WorkloadStatus:
    """``outcome``: the queue walk's outcome per position (``pos`` counts from 1)."""
    w, c = e.workload, e.workload.contract
    kind, detail, free = outcome[pos - 1]
    lr = p.ranks.get(e.leaf) if e.leaf is not None else None
    base = _PendingNumbers(workload_id=w.id, leaf=e.leaf, queue_position=pos,
                           rank=lr.rank if lr else None, metric=lr.metric if lr else None)
    note = f"; {e.note}" if e.note else ""
    if kind == "admitted":
        act = admitted[w.id]
        return WorkloadStatus(state="admitted", reason=act.reason + note,
                              protected_until=p.now + c.min_runtime_s if e.leaf and not act.loan
                              else p.now, **base)
    needs = f"needs {shape_text(c)}, {free} GPUs free"
    res = p.holds.of(w.id) if kind == "holder" else None
    if res is not None and res.hold:
        free_on, cap, may, may_not, blockers, foreign, short = res.numbers
        nodes = ", ".join(res.placement.nodes)
        shown = ", ".join(blockers[:5]) + (", ..." if len(blockers) > 5 else "")
        blocked = why_no_victims(p, e, *detail[1:]) if isinstance(detail, tuple) else detail
        others = f", {foreign} by other tenants' pods" if foreign else ""
        why = (f"{needs}; {blocked}; holding {nodes} for it ({free_on} of {cap} GPUs free, {may} held by work "
               f"it may preempt, {may_not} held by work it may not preempt: {shown or 'none'}{others}): no "
               f"running work it may preempt ever frees enough GPUs, so only unallocated work may "
               f"start there meanwhile, and it starts once {short} more GPUs there "
               f"are free (as running work ends)")
    elif res is not None:
        why = (f"{needs}; reserved {placement_text(res.placement.assignments)}: enough GPUs become "
               f"preemptible {when(res.until, p.now)}; later work may use them only if preemptible by then")
    elif kind == "reserved-out":
        why = f"{needs}; {kept_off(p, e, detail)}"
    else:
        why = f"{needs}; {why_no_victims(p, e, *detail[1:]) if isinstance(detail, tuple) else detail}"
        if kind == "unreservable":
            why += ("; no reservation: no schedulable node (healthy, not cordoned) or topology "
                    "group left by the other reservations is big enough to hold it, even empty")
    return WorkloadStatus(state="pending", reason=f"waiting: {why}; {leaf_text(lr, p.n)}{note}", **base)


def why_no_victims(p: PassView, e: Entry, blocked: tuple[str, ...], charge: tuple[float, float],
                   running: float) -> str:
    """Why no victim set was found: ``blocked`` lists the lower-ranked leaves whose work
    past its min runtime the anti-ping-pong rule excluded at the search; ``running`` is
    what the leaf's running work adds over the workload's min runtime (GPU-s)."""
    rank = _search_rank(e)
    blocked = _ranked_below(p, rank, blocked)
    if blocked:
        extra, m = charge
        shown = ", ".join(blocked[:5]) + (", ..." if len(blocked) > 5 else "")
        return (f"lower-ranked work of {shown} is past its min runtime, but the anti-ping-pong "
                f"rule forbids preempting it: by the end of this workload's min runtime "
                f"({format_duration(m)}) budget {e.leaf} would be charged {extra / 3600:.1f} GPU-h "
                f"for it plus {running / 3600:.1f} GPU-h for its running work, and would no "
                f"longer rank above them")
    if p.below.above(rank):
        return ("preempting all unallocated work and all work past its min runtime that a debug "
                "workload may take (any budget's, but debug work only of budgets ranked below its "
                "own) would not make "
                "room" if e.debug else "preempting all lower-ranked or unallocated work past its "
                "min runtime would not make room")
    return ("no work past its min runtime that a debug workload may take (debug work only of "
            "budgets ranked below its own) to preempt" if e.debug else
            "no lower-ranked work past its min runtime to preempt")


def _search_rank(e: Entry) -> int:
    """The rank ``e`` searched for victims at: its leaf's, 0 for a debug workload (it outranks
    every leaf)."""
    assert e.rank is not None  # only work charged to a leaf searches for victims (decide's step)
    return 0 if e.debug else e.rank


def _ranked_below(p: PassView, rank: int, leaves: tuple[str, ...]) -> tuple[str, ...]:
    """The ``leaves`` ranked below ``rank``."""
    return tuple(x for x in leaves if p.ranks[x].rank > rank)


# the team (budget leaf) label of work charged to none, wherever work is counted per team:
# the simulator's metrics and report, the reconciler's metrics, the Gantt legend
NO_TEAM = "(none)"

# the words of :func:`waiting_causes`, in the order a report shows them
WAIT_CAUSES = ("no-room", "pingpong", "kept-off", "reserved", "holding", "no-reservation",
               "free-work")


def waiting_causes(p: PassView, entries: Sequence[Entry],
                   outcome: Sequence[tuple[str, object, int]]) -> dict[str, str]:
    """Pending workload id -> why it still waits after the pass, in one word: the kind of its
    status's reason. ``no-room``: no free GPUs fit it, and preempting all the work it may
    preempt would not make room (or nothing is preemptible); ``pingpong``: lower-ranked work
    past its min runtime would, but the anti-ping-pong rule forbids it; ``kept-off``: kept off
    the nodes reserved for better-ranked work; ``reserved``: it holds a timed reservation;
    ``holding``: it holds nodes as a drain hold; ``no-reservation``: no room, and no
    schedulable node or group that the other reservations leave is big enough to hold it
    even empty (the others unhealthy, cordoned or reserved), so no reservation or hold can
    be made for a reservation; ``free-work``: unallocated
    work, which only takes idle GPUs. Admitted workloads are not in it; rejected ones neither."""
    causes: dict[str, str] = {}
    for e, (kind, detail, _) in zip(entries, outcome):
        if kind == "admitted":
            continue
        wid = e.workload.id
        if kind == "holder":
            res = p.holds.of(wid)
            cause = "holding" if res is not None and res.hold else "reserved"
        elif kind == "reserved-out":
            cause = "kept-off"
        elif kind == "unreservable":
            cause = "no-reservation"
        elif e.leaf is None:
            cause = "free-work"
        elif isinstance(detail, tuple) and _ranked_below(p, _search_rank(e), detail[1]):
            cause = "pingpong"
        else:
            cause = "no-room"
        causes[wid] = cause
    return causes


def kept_off(p: PassView, e: Entry, kept: tuple[tuple[Reservation, str], ...]) -> str:
    """Why ``e`` may not use reserved nodes, with the numbers: each reservation that kept it off
    when its turn came, and why then (:meth:`~engine.core.holds.Holds.kept_off`);
    reservations made later, by work behind it, played no part and are not named. Drain holds
    share one explanation, at the first one's place: several holds (large gangs) would
    otherwise repeat it for each."""
    holds = [res for res, why in kept if why == "hold"]
    parts = [_kept_off(p, e, res, why) for res, why in kept if why != "hold"]
    if holds:
        first = next(i for i, (_, why) in enumerate(kept) if why == "hold")
        parts.insert(first, _held(e, holds))
    return "; ".join(parts)


def _held(e: Entry, holds: list[Reservation]) -> str:
    """The drain holds that keep ``e`` off, and why that rule (:mod:`engine.core.reservation`)."""
    where = ", ".join(f"{', '.join(sorted(r.nodes))} {'is' if len(r.nodes) == 1 else 'are'} held "
                      f"for {r.holder} (budget {r.leaf} rank {r.rank})" for r in holds)
    tail = (f"funded work would be protected by its min runtime, "
            f"{format_duration(e.workload.contract.min_runtime_s)} for this one, and delay")
    if len(holds) == 1:
        return (f"{where}, which no running work it may preempt can make room for, so it waits for "
                f"running work there to end; only unallocated work may start there meanwhile "
                f"({tail} it)")
    return (f"{where}; for none of them can running work its holder may preempt make room, so "
            f"each holder waits for running work there to end; only unallocated work may start "
            f"on them meanwhile ({tail} them)")


def _kept_off(p: PassView, e: Entry, res: Reservation, code: str) -> str:
    assert e.rank is not None  # unallocated work may always use reserved nodes (Holds.blocker)
    c = e.workload.contract
    nodes = sorted(res.nodes)
    if code == "rank":
        why = f"budget {e.leaf} rank {e.rank} does not rank below {res.holder}'s (rank {res.rank})"
    elif code == "protected":
        why = (f"this workload's min runtime ({format_duration(c.min_runtime_s)}) would still "
               f"protect it then")
    else:  # pingpong
        why = (f"the anti-ping-pong rule would forbid it: by the end of {res.holder}'s min runtime "
               f"budget {e.leaf} (rank {e.rank}) would rank above budget {res.leaf} again")
    return (f"the free GPUs on {', '.join(nodes)} are reserved for {res.holder} until "
            f"{when(res.until, p.now)} and {why}")


def running_status(p: PassView, r, evictions) -> WorkloadStatus:
    wid = r.workload.id
    leaf, note = charged_leaf(r.workload, p.ranks)
    lr = p.ranks.get(leaf) if leaf else None
    base = _RunningNumbers(workload_id=wid, leaf=leaf, rank=lr.rank if lr else None,
                           metric=lr.metric if lr else None, protected_until=r.protected_until)
    if wid in evictions:
        return WorkloadStatus(state="preempted", reason=evictions[wid].reason, **base)
    if wid in p.preempted:
        by, reason = p.preempted[wid]
        return WorkloadStatus(state="preempted", reason=reason, preemptor=by, **base)
    where = placement_text(r.placement.assignments)
    if wid in p.draining:
        why = p.draining[wid]
    elif p.now < r.protected_until and leaf is None:  # (its budget left the tree as it ran)
        return WorkloadStatus(state="running", reason=(
            f"running on {where}: protected by the min runtime it started with until "
            f"{when(r.protected_until, p.now)}, then preemptible at any time by allocated work; "
            f"{note} (not charged)"), **base)
    elif p.now < r.protected_until:
        why = f"protected by its min runtime until {when(r.protected_until, p.now)}"
    elif leaf is None:
        why = f"preemptible at any time by allocated work ({note})"
    else:
        why = (f"past its min runtime (since {when(r.protected_until, p.now)}); keeps running while "
               f"no higher-ranked work needs its GPUs")
    return WorkloadStatus(state="running", reason=f"running on {where}: {why}; {leaf_text(lr, p.n)}", **base)


def status_index(p: PassView, rejects: Sequence[tuple[Workload, str]], kept: Sequence[Entry],
                 outcome, running: Sequence[Running]) -> dict[str, tuple]:
    """id -> (builder, *arguments) for every workload of the pass, rejected, pending or
    running: a status is built on first access (:class:`~engine.core.lazymaps.StatusMap`); the
    index itself is made when the statuses are first read (the simulator reads none)."""
    admitted = {a.workload_id: a for a in p.actions if isinstance(a, Admit)}
    index: dict[str, tuple] = {w.id: (WorkloadStatus, w.id, "rejected", reason)
                               for w, reason in rejects}
    index.update({e.workload.id: (pending_status, p, e, pos, outcome, admitted)
                  for pos, e in enumerate(kept, 1)})
    evictions = {a.workload_id: a for a in p.evictions}
    index.update({r.workload.id: (running_status, p, r, evictions) for r in running})
    return index
