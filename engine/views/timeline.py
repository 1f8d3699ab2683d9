"""One job's timeline: what the scheduler said of it at every pass of a simulated run.

``allot explain JOB`` shows a job at one instant. A job that waited 43 hours went through many
states on the way: admitted, preempted, holding a drain hold on one node then another, kept
off others' reservations. ``allot explain JOB --timeline`` replays the run (the embedded
default, ``--trace`` or a report's ``--report``: the passes before a saved or live state are
not kept, so not ``--state``/``--url``) with the budget scheduler wrapped by a
:class:`Recorder`, which reads the job's status after every pass in which it is queued or
running, and folds the passes into :class:`Span` s: consecutive passes with the same state,
cause of waiting (:attr:`~engine.core.types.Decision.waiting`), nodes (those reserved for it,
or those it runs on), kind of reservation and, while it runs, protection. A span's budget
rank may move inside it (its best and worst are kept); its reason, and a drain hold's GPUs
short of work it may preempt, are those of its first pass. A drain hold that moves between
nodes shows as one span per move, each with how short its nodes were.

The recorder only reads decisions; the run is the same with or without it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import Any

from engine.core.decide import decide
from engine.core.types import Admit, Decision, Snapshot
from engine.model import Config
from engine.sim.schedulers import Scheduler, get_scheduler


@dataclass(frozen=True)
class Span:
    start: float  # the first pass of the span
    last: float  # its last pass
    passes: int
    state: str  # the status's state: pending, admitted, running, preempted, ...
    cause: str | None  # why it waits, in one word (pending)
    nodes: tuple[str, ...]  # reserved for it (pending), or where it runs (admitted, running)
    until: float | None  # its reservation's earliest start (inf: a drain hold); None: none
    protected: bool  # running within its min runtime
    ranks: tuple[int, int] | None  # its budget's best and worst rank over the span
    reason: str  # the status at the span's first pass
    short: int = 0  # a drain hold's GPUs short (of work it may preempt) at the first pass

    def key(self) -> tuple:
        return (self.state, self.cause, self.nodes, self.until is None,
                self.until == math.inf, self.protected)

    def to_dict(self) -> dict[str, Any]:
        return {"start": self.start, "last": self.last, "passes": self.passes, "state": self.state,
                "cause": self.cause, "nodes": list(self.nodes),
                "until": None if self.until is None or self.until == math.inf else self.until,
                "hold": self.until == math.inf, "protected": self.protected,
                "ranks": list(self.ranks) if self.ranks else None, "short": self.short,
                "reason": self.reason}


class Recorder:
    """The budget scheduler's ``decide``, recording ``job``'s status after each pass."""

    def __init__(self, job: str):
        self.job = job
        self.spans: list[Span] = []
        self.gone_at: float | None = None  # the first pass that no longer had it: it ended

    def scheduler(self) -> Scheduler:
        return replace(get_scheduler("budget"), decide=self)

    def __call__(self, snapshot: Snapshot, config: Config, now: float) -> Decision:
        d = decide(snapshot, config, now)
        status = d.statuses.get(self.job)
        if status is None:
            if self.spans and self.gone_at is None:
                self.gone_at = now
            return d
        nodes: tuple[str, ...] = ()
        until, short = None, 0
        if self.job in d.reserved:
            nodes, until, short = d.reserved[self.job]
        elif status.state == "admitted":
            nodes = next(tuple(sorted(a.placement.nodes)) for a in d.actions
                         if isinstance(a, Admit) and a.workload_id == self.job)
        else:
            nodes = next((tuple(sorted(r.placement.nodes)) for r in snapshot.running
                          if r.workload.id == self.job), ())
        protected = status.state == "running" and status.protected_until is not None \
            and now < status.protected_until
        rank = status.rank
        span = Span(now, now, 1, status.state, d.waiting.get(self.job), nodes, until, protected,
                    (rank, rank) if rank is not None else None, status.reason, short)
        last = self.spans[-1] if self.spans else None
        if last is not None and last.key() == span.key():
            ranks = last.ranks
            if rank is not None:
                ranks = (min(rank, ranks[0]), max(rank, ranks[1])) if ranks else (rank, rank)
            self.spans[-1] = replace(last, last=now, passes=last.passes + 1, ranks=ranks)
        else:
            self.spans.append(span)
        return d


def text(job: str, spans: list[Span], end: float, keep: int = 25) -> list[str]:
    """The timeline as lines: a header, then one line per span (start, how long until the next
    span, or until ``end`` for the last: when the job finished, or the state's time; state,
    cause, rank, nodes or the reason's start); past ``2 * keep`` spans, the first and last
    ``keep`` with a line counting the others."""
    from engine.durations import approx_duration

    if not spans:
        return [f"{job}: no pass saw it queued or running"]
    passes = sum(s.passes for s in spans)
    lasted = [(spans[i + 1].start if i + 1 < len(spans) else max(s.last, end)) - s.start
              for i, s in enumerate(spans)]
    out = [f"{job}: {len(spans)} span(s) over {passes:,} passes, t={spans[0].start:.0f} to "
           f"t={max(spans[-1].last, end):.0f}; a span is passes with the same state, cause and nodes",
           "  time by state and cause: " + digest(spans, lasted),
           f"  {'START':<10} {'LASTED':>9}  {'STATE':<20} {'CAUSE':<13} {'RANK':<6} WHERE / WHY"]
    rows = []
    for s, took in zip(spans, lasted):
        rank = "" if s.ranks is None else (f"{s.ranks[0]}" if s.ranks[0] == s.ranks[1]
                                           else f"{s.ranks[0]}-{s.ranks[1]}")
        state = s.state + (" (protected)" if s.protected else "")
        if s.nodes:
            where = ", ".join(s.nodes)
            if s.until == math.inf:
                where = f"drain hold on {where} ({s.short} GPU{'s' if s.short != 1 else ''} short)"
            elif s.until is not None:
                where = f"reserved {where} from t={s.until:.0f}"
        else:
            where = s.reason.removeprefix("waiting: ")
            where = where if len(where) <= 100 else where[:99] + "…"
        rows.append(f"  t={s.start:<8.0f} {approx_duration(took):>9}  {state:<20} "
                    f"{s.cause or '-':<13} {rank:<6} {where}")
    if len(rows) > 2 * keep:
        rows = [*rows[:keep], f"  ... {len(rows) - 2 * keep} more span(s) (--format json lists all) ...",
                *rows[-keep:]]
    return out + rows


def digest(spans: list[Span], lasted: list[float]) -> str:
    """Time per (state, cause), longest first, with its spans and the distinct nodes they
    held or ran on: "pending/holding 30.2 h (431 spans on 24 nodes), ..."."""
    from engine.durations import approx_duration

    total: dict[str, list] = {}
    for s, took in zip(spans, lasted):
        name = s.state + (f"/{s.cause}" if s.cause else "")
        t = total.setdefault(name, [0.0, 0, set()])
        t[0] += took
        t[1] += 1
        t[2].update(s.nodes)
    return ", ".join(f"{name} {approx_duration(t[0])} ({t[1]} span{'s' if t[1] > 1 else ''}"
                     + (f" on {len(t[2])} node{'s' if len(t[2]) > 1 else ''})" if t[2] else ")")
                     for name, t in sorted(total.items(), key=lambda kv: (-kv[1][0], kv[0])))
