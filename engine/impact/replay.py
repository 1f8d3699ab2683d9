"""Replay one trace under both revisions through the simulator and compare the outcomes.

The comparison is only meaningful if the two runs differ by nothing but the configuration,
so the trace is prepared once per side from the *same* owner-to-leaf mapping:

1. the trace is loaded (``--trace``: a bundled name such as ``philly`` or a file in the
   documented trace format; default :data:`DEFAULT_TRACE`, the simulator's default) from a
   start day: the one given, else for the default trace where the simulator's embedded
   experiment starts (day 28 of Philly), else past the trace's ramp-up (:func:`~engine.impact.window.ramp_up_day`;
   steps 1 and 2 are :mod:`engine.impact.window`);
2. ``days`` simulated days are cut (``days x factor`` days of trace time), their submit
   times compressed by ``factor`` so that those days offer ``demand_ratio`` times the *base*
   capacity (default 1.1 as in ``allot simulate``: queued demand then runs at 2-4x; see
   :func:`~engine.impact.window.window_for`); the head replays
   the same submissions, so a capacity change in the head shows as more or less headroom,
   not as a different workload;
3. the owner-to-leaf mapping is the one given (``--mapping``), else the bundled trace's own
   ``mapping.yaml`` when every leaf it names exists in the base tree (as ``allot simulate``),
   else derived from the window against the *base* tree
   (:func:`engine.sim.owners.derive_mapping`); owners whose leaf does not exist in the head
   run there as unfunded work (the report says so);
4. contracts are assigned per side with that side's policy (a min-runtime cap change changes
   the contracts, as it would in the cluster); the draws are keyed by task id, so a task keeps
   its resumable/unfunded coin flips on both sides.

Both runs use the budget scheduler (``engine.core.decide``) and the same seed. Teams are the
leaves of either tree; a team's "delivered" is the GPU-hours its jobs ran (funded or free)
and "entitled" its allocation capped hour by hour by its demand, both as
:mod:`engine.sim.metrics` computes them; its "waiting" is the GPU-hours its pending work
waited per cause (:mod:`engine.sim.causes`, read every
:data:`~engine.impact.runs.CAUSES_EVERY_S` in both runs). The two runs are independent and
deterministic, so they run in two forked processes when the machine has two cores
(:func:`engine.impact.runs.simulate_all`). Gainers/losers are teams whose delivered GPU-hours
moved by at least ``MIN_CHANGE_GPU_H``, sorted by the size of the move.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field, replace
from typing import Any, Callable, Mapping, Sequence

from engine.impact.runs import Job, Progress, RunOutcome, simulate_all
from engine.impact.window import (DEFAULT_TRACE, ReplaySpec, bundled_mapping, load_replay_trace,
                                  window_for)
from engine.model import Config
from engine.sim.trace import Trace

MIN_CHANGE_GPU_H = 0.05


@dataclass(frozen=True)
class Pair:
    """A value before (base) and after (head); ``None`` where it does not exist."""

    before: float | None
    after: float | None

    @property
    def delta(self) -> float | None:
        if self.before is None or self.after is None:
            return None
        return self.after - self.before


@dataclass(frozen=True)
class TeamImpact:
    team: str
    delivered: Pair  # GPU-hours charged to the team
    entitled: Pair  # GPU-hours of allocation capped by demand
    wait_p50: Pair  # seconds, the team's queue waits
    wait_p90: Pair
    preemptions: Pair
    # cause -> GPU-hours its pending work waited for it (engine.sim.causes), for every cause
    # some team waited for in either run: 0.0 where this team did not, None on a side without it
    waiting: Mapping[str, Pair] = field(default_factory=dict)
    # the team's job whose time queued grew most from base to head: (id, base s, head s)
    waited_longer: tuple[str, float, float] | None = None
    # a team the head removes: GPU-hours its jobs (the base's) still ran there, unfunded
    ran_unfunded: float | None = None

    @property
    def change(self) -> float:
        return (self.delivered.after or 0.0) - (self.delivered.before or 0.0)


@dataclass(frozen=True)
class ClassWaits:
    klass: str
    p50: Pair
    p90: Pair
    jobs: Pair


@dataclass(frozen=True)
class ReplayImpact:
    trace: str
    tasks: int
    horizon_s: float
    capacity_gpus: Pair
    demand_ratio: float | None
    teams: tuple[TeamImpact, ...]  # every team, biggest gain first, biggest loss last
    classes: tuple[ClassWaits, ...]
    overall: Mapping[str, Pair]  # occupancy, preemptions, delivered totals, waits...
    notes: tuple[str, ...] = ()
    wall_s: float = 0.0
    # what each run was, base then head: (config, prepared trace, horizon), for its run record
    # (engine.commands.runrecord); not part of the report
    runs: tuple[tuple[Config, Trace, float], ...] = field(default=(), compare=False, repr=False)

    @property
    def gainers(self) -> tuple[TeamImpact, ...]:
        return tuple(t for t in self.teams if t.change >= MIN_CHANGE_GPU_H)

    @property
    def losers(self) -> tuple[TeamImpact, ...]:
        return tuple(sorted((t for t in self.teams if t.change <= -MIN_CHANGE_GPU_H),
                            key=lambda t: (t.change, t.team)))

    def to_dict(self) -> dict[str, Any]:
        def pair(p: Pair) -> dict[str, float | None]:
            return {"before": p.before, "after": p.after, "delta": p.delta}

        return {
            "trace": self.trace, "tasks": self.tasks, "horizon_s": self.horizon_s,
            "capacity_gpus": pair(self.capacity_gpus), "demand_ratio": self.demand_ratio,
            "overall": {k: pair(v) for k, v in self.overall.items()},
            "teams": [{"team": t.team, "change_gpu_h": t.change, "delivered_gpu_h": pair(t.delivered),
                       "entitled_gpu_h": pair(t.entitled), "wait_p50_s": pair(t.wait_p50),
                       "wait_p90_s": pair(t.wait_p90), "preemptions": pair(t.preemptions),
                       "waiting_gpu_h": {c: pair(p) for c, p in t.waiting.items()},
                       "waited_longer": None if t.waited_longer is None else dict(
                           zip(("job", "queued_before_s", "queued_after_s"), t.waited_longer)),
                       "ran_unfunded_gpu_h": t.ran_unfunded}
                      for t in self.teams],
            "gainers": [t.team for t in self.gainers],
            "losers": [t.team for t in self.losers],
            "classes": [{"class": c.klass, "wait_p50_s": pair(c.p50), "wait_p90_s": pair(c.p90),
                         "jobs": pair(c.jobs)} for c in self.classes],
            "notes": list(self.notes), "wall_s": self.wall_s,
        }


# ------------------------------------------------------------------------------ running

def _fits(mapping: Mapping[str, str | None], config: Config) -> bool:
    """Whether every leaf a mapping names is a leaf of ``config``'s tree."""
    leaves = set(config.tree.leaves())
    return all(leaf is None or leaf in leaves for leaf in mapping.values())


@dataclass(frozen=True)
class Prepared:
    """The two replays' inputs (steps 1-4 of the module docstring): the trace as loaded, the
    compression factor, the (config, prepared trace, seed, cadence) of base and head, and
    the notes the report prints about them."""

    raw: Trace
    factor: float
    jobs: tuple[Job, Job]
    notes: tuple[str, ...]


def run_replay(base: Config, head: Config, spec: ReplaySpec = ReplaySpec(),
               log: Callable[[str], None] | None = None,
               progress: Progress | None = None) -> ReplayImpact:
    """Simulate the same trace under ``base`` and ``head`` and compare (module docstring);
    ``progress([base, head])``: the fraction of each replay done (:func:`simulate_all`)."""
    from engine.sim.prepare import capacity

    say = log or (lambda _m: None)
    started = time.perf_counter()
    prepared = prepare_replay(base, head, spec)
    for which, (cfg, trace, _, _) in zip(("base", "head"), prepared.jobs):
        say(f"allot impact: simulating {which} ({len(trace.tasks):,} jobs, "
            f"{trace.meta.get('horizon', trace.span) / 86400.0:.1f} days, {capacity(cfg):,} GPUs)")
    b, h = simulate_all(list(prepared.jobs), parallel=spec.parallel, progress=progress)
    notes = list(prepared.notes)
    if spec.cadence != "watch":
        notes.append(f"passes on the policy's {spec.cadence} grid (--cadence {spec.cadence}), not at "
                     "every event as the reconciler runs them: waits include up to one interval "
                     "of pass latency")
    if prepared.factor != 1.0:
        notes.append(f"submissions compressed {prepared.factor:.3g}× to reach demand "
                     f"{spec.demand_ratio:g}× the base capacity")
    impact = compare(b, h, trace_name=prepared.raw.name or str(spec.trace),
                     demand_ratio=spec.demand_ratio, notes=tuple(notes),
                     wall_s=time.perf_counter() - started)
    return replace(impact, runs=tuple((cfg, trace, out.horizon_s)
                                      for (cfg, trace, _, _), out in zip(prepared.jobs, (b, h))))


def _funded_in(mapping: dict[str, str | None] | None, leaves: set[str], side: str,
               notes: list[str]) -> dict[str, str | None] | None:
    """``mapping`` for one side's replay: an owner mapped to a leaf not in ``leaves`` runs
    unfunded (a note says so)."""
    if mapping is None:
        return None
    outside = sorted({leaf for leaf in mapping.values() if leaf and leaf not in leaves})
    if not outside:
        return mapping
    notes.append(f"work mapped to {', '.join(outside)} (not a leaf in the {side}) runs "
                 f"unfunded in the {side} replay")
    return {o: (None if leaf in outside else leaf) for o, leaf in mapping.items()}


def prepare_replay(base: Config, head: Config, spec: ReplaySpec) -> Prepared:
    """The inputs of both replays (steps 1-4 of the module docstring)."""
    from engine.sim.owners import derive_mapping, load_mapping
    from engine.sim.prepare import capacity, compress, prepare_trace

    raw = load_replay_trace(spec)
    window, factor = window_for(raw, capacity(base), spec)
    notes = []
    bundled = bundled_mapping(spec.trace or DEFAULT_TRACE)
    if spec.mapping:  # (naming leaves of either tree: a leaf the head adds may be mapped to)
        mapping = load_mapping(spec.mapping, leaves=set(base.tree.leaves()) | set(head.tree.leaves()))
        notes.append(f"trace owners mapped to leaves by {spec.mapping}")
    elif bundled and _fits(mapping := load_mapping(bundled), base):
        notes.append(f"trace owners mapped to leaves by the bundled {bundled.parent.name}/{bundled.name}")
    elif any(t.leaf is None for t in window.tasks):
        mapping = derive_mapping(window, base.tree)
        notes.append("trace owners mapped to leaves by demand against the base tree")
    else:
        mapping = None
    head_leaves = set(head.tree.leaves())
    # each side: work the mapping puts on a leaf that side lacks runs unfunded there
    mapping, head_mapping = (_funded_in(mapping, set(base.tree.leaves()), "base", notes),
                             _funded_in(mapping, head_leaves, "head", notes))
    head_window = window
    explicit_gone = sorted({t.leaf for t in window.tasks if t.leaf} - head_leaves)
    if explicit_gone:  # the trace names leaves the head removed: that work runs unfunded
        head_window = Trace.of((replace(t, leaf=None, min_runtime=0.0)
                                if t.leaf in explicit_gone else t for t in window.tasks),
                               window.failures, window.name, window.meta)
        head_mapping = {**(head_mapping or {}), "*": None}
        notes.append(f"jobs of {', '.join(explicit_gone)} (not a leaf in the head) run "
                     "unfunded in the head replay")
    if spec.days and raw.span < spec.days * 86400.0 * factor:
        notes.append(f"the trace ends early: its submissions cover "
                     f"{raw.span / 86400.0 / factor:.2f} of the {spec.days:g} simulated days")
    jobs = []
    for cfg, win, m in ((base, window, mapping), (head, head_window, head_mapping)):
        trace = prepare_trace(win, cfg, mapping=m, seed=spec.seed)
        if factor != 1.0:
            trace = compress(trace, factor)
        jobs.append((cfg, trace, spec.seed, spec.cadence))
    return Prepared(raw, factor, (jobs[0], jobs[1]), tuple(notes))


def compare(base: RunOutcome, head: RunOutcome, *, trace_name: str,
            demand_ratio: float | None = None, notes: tuple[str, ...] = (),
            wall_s: float = 0.0) -> ReplayImpact:
    """The per-team and cluster-wide comparison of the base and head runs."""
    sb, sh = base.summary, head.summary
    pre_b, pre_h = base.preemptions, head.preemptions
    teams = []
    causes = _causes(sb, sh)
    longer = _waited_longer(base, head)
    gone = _ran_unfunded(base, head, set(sb["teams"]) - set(sh["teams"]))
    for team in sorted(set(sb["teams"]) | set(sh["teams"])):
        tb, th = sb["teams"].get(team), sh["teams"].get(team)
        wb, wh = sb["waits"]["by_team"].get(team, {}), sh["waits"]["by_team"].get(team, {})
        teams.append(TeamImpact(
            team=team,
            delivered=Pair(_get(tb, "delivered_gpu_h"), _get(th, "delivered_gpu_h")),
            entitled=Pair(_get(tb, "entitled_gpu_h"), _get(th, "entitled_gpu_h")),
            wait_p50=Pair(wb.get("p50_s"), wh.get("p50_s")),
            wait_p90=Pair(wb.get("p90_s"), wh.get("p90_s")),
            preemptions=Pair(pre_b.get(team, 0) if tb else None, pre_h.get(team, 0) if th else None),
            waiting=_waiting(tb, th, causes), waited_longer=longer.get(team),
            ran_unfunded=gone.get(team)))
    teams.sort(key=lambda t: (-t.change, t.team))
    classes = []
    for klass in sb["waits"]["by_class"]:
        cb, ch = sb["waits"]["by_class"][klass], sh["waits"]["by_class"].get(klass, {})
        if cb.get("n") or ch.get("n"):
            classes.append(ClassWaits(klass, Pair(cb.get("p50_s"), ch.get("p50_s")),
                                      Pair(cb.get("p90_s"), ch.get("p90_s")),
                                      Pair(cb.get("n"), ch.get("n"))))

    def both(fn) -> Pair:
        return Pair(fn(sb), fn(sh))

    overall = {
        "offered_demand": both(lambda s: s["demand_ratio"]["offered"]),
        "queued_demand": both(lambda s: s["demand_ratio"]["queued_mean"]),
        "occupancy": both(lambda s: s["occupancy"]),
        "unallocated_share": both(lambda s: s["unallocated_share"]),
        "on_loan_gpu_h": both(lambda s: s["gpu_hours"].get("on_loan", 0.0)),  # policy.loans
        "delivered_gpu_h": both(lambda s: s["gpu_hours"]["delivered"]),
        "entitled_delivered": both(lambda s: s["entitlement"]["delivered_within_entitlement"]),
        "teams_at_95": both(lambda s: s["entitlement"]["teams_at_95"]),
        "preemptions": both(lambda s: s["preemptions"]),
        "preemptions_of_charged": both(lambda s: s["preemptions_of_charged"]),
        "gpu_hours_lost": both(lambda s: s["gpu_hours"]["lost_to_preemption"]),
        "gpu_hours_lost_of_charged": both(lambda s: s["gpu_hours"]["lost_of_charged"]),
        "wait_p50": both(lambda s: s["waits"]["overall"]["p50_s"]),
        "wait_p90": both(lambda s: s["waits"]["overall"]["p90_s"]),
        "debug_wait_p90": both(lambda s: s["waits"]["by_class"].get("debug", {}).get("p90_s")),
    }
    return ReplayImpact(
        trace=trace_name, tasks=base.tasks, horizon_s=base.horizon_s,
        capacity_gpus=Pair(base.capacity_gpus, head.capacity_gpus),
        demand_ratio=demand_ratio, teams=tuple(teams), classes=tuple(classes), overall=overall,
        notes=notes, wall_s=wall_s)


def _ran_unfunded(base: RunOutcome, head: RunOutcome, removed: set[str]) -> dict[str, float]:
    """Per team of ``removed`` (leaves the head lacks): the GPU-hours its jobs, as the base
    charged them, ran in the head (unfunded there: their leaf is gone)."""
    out = {team: 0.0 for team in removed}
    for job, (leaf, _) in base.queued.items():
        if leaf in out:
            out[leaf] += head.ran.get(job, 0.0)
    return {team: round(gpu_h, 2) for team, gpu_h in out.items()}


def _waited_longer(base: RunOutcome, head: RunOutcome) -> dict[str, tuple[str, float, float]]:
    """Per team, its job in both runs whose time queued grew most in the head (ties: the
    smaller id), when one grew by a second or more."""
    best: dict[str, tuple[tuple[float, str], float, float]] = {}
    for job, (leaf, after) in head.queued.items():
        was = base.queued.get(job)
        if leaf is None or was is None or after - was[1] < 1.0:
            continue
        key = (was[1] - after, job)  # (the most grown first, then the smaller id)
        if leaf not in best or key < best[leaf][0]:
            best[leaf] = (key, was[1], after)
    return {leaf: (key[1], before, after) for leaf, (key, before, after) in best.items()}


def _get(team: Mapping[str, Any] | None, key: str) -> float | None:
    return None if team is None else team.get(key)


def _waiting(before: Mapping[str, Any] | None, after: Mapping[str, Any] | None,
             causes: Sequence[str]) -> dict[str, Pair]:
    """Cause -> GPU-hours waited before/after for each of ``causes``: 0.0 where a side that
    has the team gave none of it, ``None`` where the side has no such team."""
    wb = (before or {}).get("waiting_gpu_h") or {}
    wa = (after or {}).get("waiting_gpu_h") or {}
    return {c: Pair(None if before is None else wb.get(c, 0.0),
                    None if after is None else wa.get(c, 0.0)) for c in causes}


def _causes(*summaries: Mapping[str, Any]) -> tuple[str, ...]:
    """Every cause some team waited for in either run, in :data:`WAIT_CAUSES` order (none when
    the runs collected no causes)."""
    from engine.core.statuses import WAIT_CAUSES

    given = {c for s in summaries for t in s["teams"].values() for c in t.get("waiting_gpu_h") or ()}
    return tuple(c for c in WAIT_CAUSES if c in given)
