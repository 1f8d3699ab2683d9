"""Derived views of a :class:`~engine.views.state.ViewState`, as JSON-safe rows.

What the dashboard draws and the CLI tables print, computed in one place:

* :func:`tree_rows`: every budget node with its share, effective share, usage in the window
  (GPU-hours and fraction of all usage), the metric (usage fraction over effective share; 1.0
  on budget) and, for leaves, the Fair Tree rank and the level factors; plus GPUs running and
  workloads pending now in its subtree;
* :func:`queue_rows`: the pending queue in decision order with the metric that orders it
  (rank of the leaf, then priority, then submit time; unallocated work last); a workload whose
  contract was refused (``Workload.invalid``: a label that does not parse, a spec that cannot
  be read) has none in force, so its contract's terms (GPUs, shape, priority, min runtime,
  resumable) are ``None`` rather than the placeholder it is queued with;
* :func:`running_rows`: running workloads with protection and expected end;
* :func:`timeline`: the per-GPU timeline of the last ``hours`` (rows are GPUs, bars are runs);
* :func:`cluster_rows`: GPUs per cluster, busy, free, unhealthy;
* :func:`team_totals`: per leaf, delivered and entitled GPU-hours, as ``allot usage`` gives them.
"""

from __future__ import annotations

from typing import Any

from engine.core.explain import shape_text
from engine.views.codec import num
from engine.views.state import ViewState

TIMELINE_HOURS = 6.0


def tree_rows(state: ViewState) -> list[dict[str, Any]]:
    tree, ranks = state.config.tree, state.decision.ranks
    used = state.node_usage
    total = used[tree.root]
    running_gpus: dict[str | None, int] = {}
    for r in state.snapshot.running:
        leaf = r.workload.contract.budget if r.workload.contract.allocated else None
        running_gpus[leaf] = running_gpus.get(leaf, 0) + r.placement.gpus
    # pending work by the leaves it is charged to or asks for, as queue --team keeps it
    statuses = state.decision.statuses
    asks = [_team_leaves(statuses[w.id].leaf, w.contract) for w in state.snapshot.pending]
    sub = tree.leaves_under()
    rows = []
    for name in tree.walk():
        node = tree.nodes[name]
        eff = tree.effective_share(name)
        frac = used[name] / total if total > 0 else 0.0
        lr = ranks.get(name)
        metric = lr.metric if lr else (frac / eff if eff > 0 else (float("inf") if frac > 0 else 0.0))
        rows.append({
            "name": name, "parent": node.parent, "depth": tree.depth(name), "leaf": tree.is_leaf(name),
            "share_pct": node.share_pct, "effective": eff, "unallocated_pct": node.unallocated_pct,
            "usage_gpu_h": used[name] / 3600.0, "usage_fraction": frac, "metric": num(metric),
            "rank": lr.rank if lr else None,
            "levels": [[f.node, f.share, f.usage, num(f.fairshare)] for f in lr.levels] if lr else [],
            "running_gpus": sum(running_gpus.get(x, 0) for x in sub[name]),
            "pending": sum(1 for a in asks if not a.isdisjoint(sub[name])),
            "owners": list(node.owners), "principals": [str(p) for p in node.principals],
        })
    return rows


def _team_leaves(leaf: str | None, c) -> set[str]:
    """The leaves a pending workload counts for in a budget subtree: the one it is charged to
    (``leaf``) and the one its contract's label asks for (it may run unallocated)."""
    return {x for x in (leaf, c.requested_budget) if x is not None}


def queue_rows(state: ViewState, cluster: str | None = None, team: str | None = None) -> list[dict[str, Any]]:
    """Pending workloads in queue order (rejected ones last), filtered by cluster and subtree;
    ``cause``: why one still waits after the pass, in one word (``Decision.waiting``: no-room,
    pingpong, kept-off, reserved, holding, no-reservation, free-work), ``None`` for work the
    pass admits or rejects."""
    statuses, causes = state.decision.statuses, state.decision.waiting
    leaves = set(state.config.tree.leaves_under().get(team, ())) if team else None
    # waiting since it was last queued: submitted, or its last run (preempted) ended
    queued_at: dict[str, float] = {}
    for r in state.runs:
        if r.end is not None and r.end <= state.now:
            queued_at[r.workload] = max(queued_at.get(r.workload, r.end), r.end)
    rows = []
    for w in state.snapshot.pending:
        st = statuses[w.id]
        c = w.contract
        if cluster and c.cluster not in (None, cluster):
            continue
        if leaves is not None and leaves.isdisjoint(_team_leaves(st.leaf, c)):
            continue
        refused = w.invalid is not None  # (no contract in force: its terms are a placeholder's)
        rows.append({
            "id": w.id, "position": st.queue_position, "state": st.state, "leaf": st.leaf,
            "requested_budget": c.requested_budget or c.budget, "rank": st.rank, "metric": num(st.metric),
            "priority": None if refused else c.priority, "submitted_at": w.submitted_at,
            "wait_s": state.now - max(w.submitted_at, queued_at.get(w.id, w.submitted_at)),
            "gpus": None if refused else c.gpus, "shape": None if refused else shape_text(c),
            "cluster": c.cluster, "min_runtime_s": None if refused else c.min_runtime_s,
            "resumable": None if refused else c.resumable, "owner": w.owner,
            "reason": st.reason, "cause": causes.get(w.id),
        })
    rows.sort(key=lambda r: (r["position"] is None, r["position"] or 0, r["id"]))
    return rows


def running_rows(state: ViewState) -> list[dict[str, Any]]:
    statuses = state.decision.statuses
    rows = []
    for r in state.snapshot.running:
        st = statuses[r.workload.id]
        c = r.workload.contract
        rows.append({
            "id": r.workload.id, "state": st.state, "leaf": st.leaf, "rank": st.rank,
            "metric": num(st.metric), "gpus": r.placement.gpus, "shape": shape_text(c),
            "placement": [[n, g] for n, g in r.placement.assignments], "started_at": r.started_at,
            "protected_until": num(r.protected_until), "expected_end": num(state.expected.get(r.workload.id)),
            "reason": st.reason, "owner": r.workload.owner,
        })
    rows.sort(key=lambda x: (x["leaf"] or "~", x["id"]))
    return rows


def cluster_rows(state: ViewState) -> list[dict[str, Any]]:
    busy: dict[str, int] = {}
    for r in state.snapshot.running:
        for n, g in r.placement.assignments:
            busy[n] = busy.get(n, 0) + g
    out: dict[str, dict[str, Any]] = {}
    for node in state.snapshot.nodes:
        row = out.setdefault(node.cluster, {"name": node.cluster, "nodes": 0, "gpus": 0, "busy": 0,
                                            "free": 0, "unhealthy_nodes": 0})
        row["nodes"] += 1
        row["gpus"] += node.gpus
        used = busy.get(node.name, 0) + node.foreign  # (other tenants' pods: busy too)
        row["busy"] += used
        if node.healthy and not node.cordoned:
            row["free"] += max(0, node.gpus - used)
        else:
            row["unhealthy_nodes"] += 1
    return [out[k] for k in sorted(out)]


def timeline(state: ViewState, hours: float = TIMELINE_HOURS) -> dict[str, Any]:
    """Rows ``[node, gpu index]`` of every GPU and bars ``[row, workload, leaf, start, end,
    allocated, preempted, protected_until]`` of runs overlapping the last ``hours``."""
    start = state.now - hours * 3600.0
    rows: list[list] = []
    index: dict[tuple[str, int], int] = {}
    for n in state.snapshot.nodes:
        for g in range(n.gpus):
            index[(n.name, g)] = len(rows)
            rows.append([n.name, g])
    bars = []
    for r in state.runs:
        end = state.now if r.end is None else r.end
        if end < start:
            continue
        for node, idx in r.gpus:
            for g in idx:
                row = index.get((node, g))
                if row is not None:
                    bars.append([row, r.workload, r.leaf, max(r.start, start), end, r.allocated,
                                 r.preempted, num(r.protected_until)])
    unhealthy = [n.name for n in state.snapshot.nodes if not n.healthy]
    return {"start": start, "end": state.now, "rows": rows, "bars": bars, "unhealthy": unhealthy}


def document(state: ViewState) -> dict[str, Any]:
    """The state's JSON (:meth:`ViewState.to_dict`) with its derived views under ``views``:
    what the dashboard and ``allot queue --full`` serve (``ViewState.from_dict`` reads it back,
    ignoring the views)."""
    return {**state.to_dict(), "views": derived_views(state)}


def team_totals(state: ViewState) -> dict[str, Any]:
    """Per leaf, delivered and entitled GPU-hours as ``allot usage`` totals them (entitlement
    water-filled hour by hour from :func:`~engine.views.series.totals_start`, as the report's;
    summing the series' bins would give other figures): ``{"start", "leaves": {leaf:
    {"delivered", "entitled"}}}``."""
    from engine.views.series import delivered_since, hourly_entitled, totals_start

    start = totals_start(state)
    delivered, entitled = delivered_since(state, start), hourly_entitled(state)
    return {"start": start, "leaves": {leaf: {"delivered": delivered[leaf], "entitled": entitled[leaf]}
                                       for leaf in state.config.tree.leaves()}}


def derived_views(state: ViewState) -> dict[str, Any]:
    from engine.views.series import usage_series

    return {
        "totals": team_totals(state),
        "clusters": cluster_rows(state),
        "tree": tree_rows(state),
        "queue": queue_rows(state),
        "running": running_rows(state),
        "timeline": timeline(state),
        "series": usage_series(state),
        "leaf_count": len(state.decision.ranks),
    }
