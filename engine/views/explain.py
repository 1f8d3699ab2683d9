"""``allot explain``: why a workload waits, runs or was preempted, in plain words with numbers.

An :class:`Explanation` is a list of :class:`Statement` s, each a sentence plus the numbers it
quotes (``numbers``), taken from the decision itself (:class:`~engine.core.types.Decision`
statuses, :class:`~engine.core.types.LeafRank` and its level factors) and from the snapshot
(free GPUs, protection ends). Tests check each statement's numbers against the decision.

Topics, in order: ``status`` (the core's own reason), ``contract`` (a workload whose contract
was refused, ``Workload.invalid``, has none in force: its placeholder's terms are not quoted),
``rank`` (the leaf's Fair Tree rank and metric), ``level`` (one per level of the leaf's path:
share S among siblings, usage U as a fraction of the parent's usage, fair share S/U), ``ahead``
(pending: who is ahead in the queue and at which level of the tree their budget beats this
one), ``threat`` (running: higher-ranked work waiting that may preempt it), ``protection``
(protected-until), ``room`` (pending: free GPUs, preemptible GPUs now, and when protected GPUs
become preemptible), ``preemption`` (what it preempts or what preempted it, and why),
``history`` (earlier events known to the shell) and ``change`` (what the user can change;
:mod:`engine.views.whatif`).
"""

from __future__ import annotations

import math
import re
from dataclasses import asdict, dataclass, field
from typing import Any

from engine.core.explain import shape_text, when
from engine.core.fairshare import sibling_factors
from engine.core.queue import charged_leaf, is_debug
from engine.core.types import Admit, LevelFactor, Preempt
from engine.durations import format_duration
from engine.views.codec import num
from engine.views.derived import cluster_rows
from engine.views.state import ViewState, fmt_num, fmt_pair
from engine.views.whatif import suggestions

MAX_AHEAD_LEAVES = 6
MAX_HISTORY = 8


@dataclass(frozen=True)
class Statement:
    topic: str
    text: str
    numbers: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Explanation:
    workload: str
    state: str
    statements: tuple[Statement, ...]

    def to_dict(self) -> dict[str, Any]:
        return {"workload": self.workload, "state": self.state,
                "statements": [{**asdict(s), "numbers": {k: num(v) if isinstance(v, float) else v
                                                         for k, v in s.numbers.items()}}
                               for s in self.statements]}

    def text(self) -> str:
        lines = [f"{self.workload}: {self.state}"]
        for s in self.statements:
            lines.append(f"  - {s.text}")
        return "\n".join(lines)


def _dur(seconds: float) -> str:
    return format_duration(round(max(0.0, seconds))) if math.isfinite(seconds) else "forever"


def _split(tree, a: str, b: str) -> tuple[str, str, str]:
    """Where the paths of leaves ``a`` and ``b`` part: (parent, a's child, b's child)."""
    pa, pb = tree.path(a), tree.path(b)
    d = 0
    while d < min(len(pa), len(pb)) and pa[d] == pb[d]:
        d += 1
    return pa[d - 1], pa[d], pb[d]


def _siblings(state: ViewState, node: str) -> list[LevelFactor]:
    """``node`` and its siblings in Fair Tree order, with their (S, U, S/U) as the core ranks
    them (:func:`~engine.core.fairshare.sibling_factors`)."""
    parent = state.config.tree.nodes[node].parent
    assert parent is not None  # callers pass level nodes and _split's children, never the root
    return sibling_factors(state.config.tree, parent, state.node_usage)


def explain(state: ViewState, query: str) -> Explanation:
    """Explain workload ``query`` (an id, or a unique suffix of one); raise
    :class:`~engine.views.state.NotFound`."""
    wid = state.one(query)
    d = state.decision
    if wid not in d.statuses:
        return _finished(state, wid)
    st = d.statuses[wid]
    item = state.workloads[wid]
    running = item if hasattr(item, "placement") else None
    w = running.workload if running else item
    cause = d.waiting.get(wid)  # why it still waits, in one word (pending work only)
    out: list[Statement] = [Statement("status", f"{st.state.capitalize()}"
                                      f"{f' ({cause})' if cause else ''}: {st.reason}.", {
        "state": st.state, "queue_position": st.queue_position, "rank": st.rank, "metric": st.metric,
        "protected_until": st.protected_until, "preemptor": st.preemptor, "cause": cause})]
    leaf, note = charged_leaf(w, d.ranks)
    if st.state == "rejected":
        leaf, note = None, w.invalid or st.reason
    out.append(_contract(state, w, leaf, note, refused=st.state == "rejected"))
    n = len(d.ranks)
    if leaf is not None:
        r = d.ranks[leaf]
        total = state.node_usage[state.config.tree.root]
        frac = r.usage / total if total > 0 else 0.0
        out.append(Statement("rank", (
            f"Budget {leaf} ranks {r.rank} of {n}: it was charged {r.usage / 3600:.1f} GPU-h in the "
            f"last {_dur(state.config.policy.lookback_s)}, a fraction {frac:.3f} of all charged usage, "
            f"against an effective share of {r.share:.3f}; metric {fmt_num(r.metric)} "
            f"(1.00 = on budget, below = under-served, served first)."),
            {"leaf": leaf, "rank": r.rank, "leaves": n, "usage_gpu_s": r.usage, "usage_fraction": frac,
             "share": r.share, "metric": r.metric}))
        for depth, f in enumerate(r.levels, 1):
            parent = state.config.tree.nodes[f.node].parent
            order = [s.node for s in _siblings(state, f.node)]  # (Fair Tree order)
            out.append(Statement("level", (
                f"Level {depth}: {f.node} among the {len(order)} children of {parent}: share "
                f"S={f.share:.3f}, usage U={f.usage:.3f} of {parent}'s usage, fair share "
                f"S/U={fmt_num(f.fairshare)}; served {order.index(f.node) + 1} of {len(order)}."),
                {"level": depth, "node": f.node, "share": f.share, "usage": f.usage,
                 "fairshare": f.fairshare, "order": order.index(f.node) + 1}))
        out += _above_share(state, w, leaf, r.share)
    if running is None and st.state == "pending":
        out += _ahead(state, w, leaf, st)
        out += _room(state, w, leaf)
    if running is not None:
        out += _protection(state, running, leaf)
    out += _preemption(state, wid)
    out += _history(state, wid)
    for text, numbers in suggestions(state, wid):
        out.append(Statement("change", text, numbers))
    return Explanation(wid, st.state, tuple(out))


def _contract(state: ViewState, w, leaf: str | None, note: str, refused: bool = False) -> Statement:
    c = w.contract
    if w.invalid is not None:  # (its contract was refused: it has none, only a placeholder)
        return Statement("contract", (
            f"Contract: refused, never admitted as it is: {note}; it has no contract in force "
            f"(no shape, min runtime, resumable or priority is read from it while it is "
            f"refused); submitted {when(w.submitted_at, state.now)}."),
            {"gpus": None, "min_runtime_s": None, "priority": None, "leaf": None,
             "submitted_at": w.submitted_at})
    if refused:  # (not free work: it never runs as it is)
        money = f"refused, never admitted as it is: {note}"
    elif leaf is None:
        money = f"unallocated (free, never charged, preemptible at any time): {note}"
    else:
        money = (f"charged to budget {leaf}, protected for its min runtime of "
                 f"{_dur(c.min_runtime_s)}")
    text = (f"Contract: {shape_text(c)}, {money}; {'resumable' if c.resumable else 'not resumable'}, "
            f"priority {c.priority} (orders work within its budget only); submitted "
            f"{when(w.submitted_at, state.now)}.")
    return Statement("contract", text, {"gpus": c.gpus, "min_runtime_s": c.min_runtime_s,
                                        "priority": c.priority, "leaf": leaf,
                                        "submitted_at": w.submitted_at})


def _ahead(state: ViewState, w, leaf: str | None, st) -> list[Statement]:
    d = state.decision
    pos = st.queue_position or 0
    ahead = [x for x in state.snapshot.pending
             if (q := d.statuses[x.id].queue_position) is not None and q < pos]
    if not ahead:
        return [Statement("ahead", "Nothing is ahead of it in the queue.", {"ahead": 0})]
    gpus = sum(x.contract.gpus for x in ahead)
    out = [Statement("ahead", f"{len(ahead)} workloads ({gpus} GPUs) are ahead of it in the queue.",
                     {"ahead": len(ahead), "ahead_gpus": gpus})]
    groups: dict[str | None, list] = {}
    for x in ahead:
        groups.setdefault(d.statuses[x.id].leaf, []).append(x)
    if leaf is None:
        out.append(Statement("ahead", "Unallocated work is queued after all allocated work; among "
                             "unallocated work the earlier submission goes first.",
                             {"allocated_ahead": sum(len(v) for k, v in groups.items() if k)}))
        return out
    tree = state.config.tree
    rule = state.config.policy.debug
    if not is_debug(w.contract, rule):  # debug workloads queue ahead of all other allocated work
        dbg = [x for x in ahead if d.statuses[x.id].leaf and is_debug(x.contract, rule)]
        if dbg:
            out.append(Statement("ahead", f"{len(dbg)} of them are debug workloads (at most "
                                 f"{rule.max_gpus} GPUs, min runtime at most "
                                 f"{format_duration(rule.max_min_runtime_s)}), which queue ahead of all other "
                                 f"allocated work.", {"debug_ahead": len(dbg)}))
            ids = {x.id for x in dbg}
            groups = {k: [x for x in v if x.id not in ids] for k, v in groups.items()}
            groups = {k: v for k, v in groups.items() if v}
    mine = groups.pop(leaf, [])
    if mine:
        out.append(Statement("ahead", f"{len(mine)} of them charge the same budget {leaf} and go first by "
                             f"higher priority or earlier submission.", {"same_budget": len(mine)}))
    # unallocated work queues after all allocated work (engine.core.queue), so none is ahead
    # of work charged to a leaf
    assert None not in groups
    others = sorted((k for k in groups if k is not None), key=lambda k: d.ranks[k].rank)
    for other in others[:MAX_AHEAD_LEAVES]:
        r = d.ranks[other]
        parent, a, b = _split(tree, leaf, other)
        level = {f.node: f for f in _siblings(state, a)}  # (a and b: siblings under parent)
        sa, ua, fa = level[a].share, level[a].usage, level[a].fairshare
        sb, ub, fb = level[b].share, level[b].usage, level[b].fairshare
        theirs, ours = fmt_pair(fb, fa)
        out.append(Statement("ahead", (
            f"{len(groups[other])} of budget {other} (rank {r.rank}, metric {fmt_num(r.metric)}): under "
            f"{parent}, {b} has fair share S/U={theirs} (S={sb:.3f}, U={ub:.3f}) against "
            f"{ours} for {a} (S={sa:.3f}, U={ua:.3f})"
            + (", tie broken by share then usage" if fa == fb else "") + "."),
            {"budget": other, "count": len(groups[other]), "rank": r.rank, "metric": r.metric,
             "at": parent, "their_node": b, "their_fairshare": fb, "our_node": a, "our_fairshare": fa}))
    if len(others) > MAX_AHEAD_LEAVES:
        out.append(Statement("ahead", f"... and work of {len(others) - MAX_AHEAD_LEAVES} more budgets.",
                             {"more_budgets": len(others) - MAX_AHEAD_LEAVES}))
    return out


def _above_share(state: ViewState, w, leaf: str, share: float) -> list[Statement]:
    """A workload larger than its budget's share of the cluster (its effective share of all
    GPUs): whenever it runs its budget uses more than its share, so its rank falls while it
    runs, and it can start only where that many GPUs come free at once."""
    capacity = sum(n.gpus for n in state.snapshot.nodes)
    gpus = w.contract.gpus
    if not capacity or gpus <= share * capacity:
        return []
    return [Statement("size", (
        f"Its {gpus} GPUs are more than budget {leaf}'s share of the cluster ({share:.3f} of "
        f"{capacity} GPUs = {share * capacity:.1f}): while it runs the budget is charged faster "
        f"than its share accrues, so its rank falls, and it can start only where {gpus} GPUs come free at once."),
        {"gpus": gpus, "share_gpus": share * capacity, "capacity": capacity})]


def _free_by_cluster(state: ViewState) -> dict[str, int]:
    """Free GPUs per cluster with a node that takes work (:func:`~engine.views.derived.cluster_rows`)."""
    return {r["name"]: r["free"] for r in cluster_rows(state) if r["nodes"] > r["unhealthy_nodes"]}


def _room(state: ViewState, w, leaf: str | None) -> list[Statement]:
    d, c, now = state.decision, w.contract, state.now
    free = _free_by_cluster(state)
    clusters = [c.cluster] if c.cluster else sorted(free) or []
    nfree = sum(free.get(x, 0) for x in clusters)
    my_rank = d.ranks[leaf].rank if leaf else None
    now_gpus = later_gpus = never = own = 0
    release: list[float] = []
    for r in state.snapshot.running:
        on = {state_node_cluster(state, n) for n, _ in r.placement.assignments}
        if not on & set(clusters):
            continue
        rl, _ = charged_leaf(r.workload, d.ranks)
        lower = rl is None or (my_rank is not None and d.ranks[rl].rank > my_rank)
        if leaf is not None and rl == leaf:
            own += r.placement.gpus  # (its own budget's work: neither higher-ranked nor a victim)
        elif leaf is None or not lower:
            never += r.placement.gpus
        elif now >= r.protected_until:
            now_gpus += r.placement.gpus
        else:
            later_gpus += r.placement.gpus
            release.append(r.protected_until)
    where = f"cluster {c.cluster}" if c.cluster else "all clusters"
    text = f"It needs {c.gpus} GPUs; {nfree} are free on {where}"
    if leaf is None:
        text += "; unallocated work only uses idle GPUs and never preempts."
    else:
        text += (f"; {now_gpus} GPUs run lower-ranked or unallocated work past its min runtime "
                 f"(preemptible for it now); {later_gpus} more are protected")
        text += f" (the first become preemptible {when(min(release), now)})" if release else ""
        text += f"; {never} run higher-ranked work it may not preempt"
        text += f"; {own} run its own budget's work." if own else "."
    return [Statement("room", text, {"needed": c.gpus, "free": nfree, "preemptible_now": now_gpus,
                                     "protected": later_gpus, "next_release": min(release) if release else None,
                                     "higher_ranked": never, "own_budget": own})]


def state_node_cluster(state: ViewState, node: str) -> str:
    cache = state.__dict__.setdefault("_node_cluster", {n.name: n.cluster for n in state.snapshot.nodes})
    return cache.get(node, "")


def _protection(state: ViewState, r, leaf: str | None) -> list[Statement]:
    d, now = state.decision, state.now
    until = r.protected_until
    if leaf is None:
        text = "Never protected: unallocated work is preempted first whenever allocated work needs GPUs."
    elif now < until:
        text = (f"Protected by its min runtime until {when(until, now)}; after that, work of a higher-"
                f"ranked budget may preempt it if it needs these GPUs.")
    else:
        text = (f"Past its min runtime since {when(until, now)}: it keeps running while no higher-"
                f"ranked work needs its GPUs.")
    out = [Statement("protection", text, {"protected_until": until, "started_at": r.started_at})]
    my_rank = d.ranks[leaf].rank if leaf else len(d.ranks) + 1
    threats = [x for x in state.snapshot.pending if d.statuses[x.id].leaf is not None
               and (rank := d.statuses[x.id].rank) is not None and rank < my_rank]
    if threats:
        gpus = sum(x.contract.gpus for x in threats)
        out.append(Statement("threat", f"{len(threats)} waiting workloads ({gpus} GPUs) belong to budgets "
                             f"ranked above {'it' if leaf is None else leaf}.",
                             {"waiting": len(threats), "gpus": gpus}))
    exp = state.expected.get(r.workload.id)
    if exp is not None:
        out.append(Statement("protection", f"Expected to finish {when(exp, now)} ({state.meta.get('expected', 'as declared')}).",
                             {"expected_end": exp}))
    return out


def _preemption(state: ViewState, wid: str) -> list[Statement]:
    out = []
    for a in state.decision.actions:
        if isinstance(a, Preempt) and a.preemptor == wid:
            out.append(Statement("preemption", f"To start it, the scheduler preempts {a.workload_id}: {a.reason}.",
                                 {"victim": a.workload_id}))
        elif isinstance(a, Preempt) and a.workload_id == wid:
            by = f"for {a.preemptor}" if a.preemptor else "by a drain"
            out.append(Statement("preemption", f"It is preempted now {by}: {a.reason}.",
                                 {"preemptor": a.preemptor}))
        elif isinstance(a, Admit) and a.workload_id == wid:
            out.append(Statement("preemption", f"It starts now: {a.reason}.", {"gpus": a.placement.gpus}))
    return out


_WHEN = re.compile(r"t=(-?\d+) \((?:now|in [^()]*|[^()]* ago)\)")


def _restated(reason: str, now: float) -> str:
    """A reason written at an earlier pass, its times (``t=1234 (20m ago)``) said from ``now``."""
    return _WHEN.sub(lambda m: when(float(m.group(1)), now), reason)


def _history(state: ViewState, wid: str) -> list[Statement]:
    events = state.history.get(wid, [])
    out = []
    preempts = [e for e in events if e[1] == "preempt"]
    if len(preempts) > MAX_HISTORY:
        out.append(Statement("history", f"Preempted {len(preempts)} times; the last {MAX_HISTORY}:",
                             {"preemptions": len(preempts)}))
    for t, _kind, detail in preempts[-MAX_HISTORY:]:
        if detail.startswith("by ") and ": " in detail:  # the simulator's "by X: <reason>"
            detail = detail.split(": ", 1)[1]
        out.append(Statement("history", f"Preempted {when(t, state.now)}: {_restated(detail, state.now)}.",
                             {"time": t}))
    starts = [e for e in events if e[1] == "start"]
    if starts:
        out.append(Statement("history", f"Started {len(starts)} time(s); last {when(starts[-1][0], state.now)}.",
                             {"starts": len(starts), "last_start": starts[-1][0]}))
    return out


def _finished(state: ViewState, wid: str) -> Explanation:
    f = state.finished.get(wid)
    if f is None:
        return Explanation(wid, "unknown", tuple(Statement("history", f"{when(t, state.now)}: {k} {d}".strip(),
                                                           {"time": t})
                                                 for t, k, d in state.history.get(wid, [])))
    text = (f"{f['state'].capitalize()} {when(f['end'], state.now)}; submitted {when(f['submit'], state.now)}"
            + (f", first started {when(f['first_start'], state.now)}" if f.get("first_start") is not None else "")
            + f", preempted {f.get('preemptions', 0)} time(s).")
    return Explanation(wid, f["state"], (Statement("status", text, {"end": f["end"], "submit": f["submit"]}),
                                         *_history(state, wid)))
