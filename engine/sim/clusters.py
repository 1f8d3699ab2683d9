"""The clusters a replay runs on: the configuration's, resized or restricted for a run
(``--cluster h100:24``), and what of a trace cannot mean anything on them (tasks pinned to a
cluster the configuration lacks, failures of nodes it lacks).

Node names in the simulator are ``{cluster}-n{index:04d}`` (:class:`engine.model.Cluster`).
"""

from __future__ import annotations

from engine.errors import Problem, UserError, also_on, first_line
from engine.model import Config
from engine.sim.trace import Task, Trace

MAX_NODES = 100_000  # the most nodes --cluster may give a cluster (as a clusters file may)


def with_clusters(config: Config, spec: str | None) -> Config:
    """``config`` restricted/resized to ``spec``: comma-separated ``name`` or ``name:nodes``
    (``h100:20`` keeps h100's node type and topology with 20 nodes; unnamed clusters are
    dropped). ``None`` or empty keeps the config's clusters."""
    from dataclasses import replace as _replace

    if not spec:
        return config
    problems = []
    clusters = []
    seen: set[str] = set()
    for part in spec.split(","):
        name, _, nodes = part.strip().partition(":")
        if name in seen:
            problems.append(Problem("--cluster", 0, 0, f"cluster {name!r} given twice",
                                    "give each cluster once, e.g. h100:20,b200:4"))
            continue
        seen.add(name)
        try:
            base = config.policy.cluster(name)
        except KeyError:
            problems.append(Problem("--cluster", 0, 0, f"unknown cluster {name!r}",
                                    f"clusters: {', '.join(c.name for c in config.policy.clusters)}"))
            continue
        if nodes:
            if not nodes.isdigit() or not 1 <= int(nodes) <= MAX_NODES:
                problems.append(Problem("--cluster", 0, 0, f"bad node count {nodes!r} for {name}",
                                        f"write name:nodes with 1 to {MAX_NODES:,} nodes, e.g. h100:20"))
                continue
            base = _replace(base, nodes=int(nodes), nodes_per_domain=min(base.nodes_per_domain,
                                                                          int(nodes)))
        clusters.append(base)
    if problems:
        raise UserError(problems)
    return _replace(config, policy=_replace(config.policy, clusters=tuple(clusters)))


def unknown_places(trace: Trace, config: Config) -> list[Problem]:
    """Tasks pinned to a cluster the configuration does not have (they would wait for the
    whole run) and node failures of nodes it does not have (they would never happen), one
    problem per name, at the first line of the trace naming it: what a replay on these
    clusters cannot mean."""
    where = str(trace.meta.get("source", trace.name))
    clusters = {c.name: c for c in config.policy.clusters}
    problems: list[Problem] = []
    pinned: dict[str, list[Task]] = {}
    for t in trace.tasks:
        if t.cluster is not None and t.cluster not in clusters:
            pinned.setdefault(t.cluster, []).append(t)
    for name, tasks in pinned.items():
        lines = [t.line for t in tasks]
        at = first_line(lines)  # (once: asked per task it was quadratic in the pinned tasks)
        first = next((t for t in tasks if t.line == at), tasks[0])
        problems.append(Problem(where, first.line, 0, f"{len(tasks)} task(s) ({first.id}, ...) name cluster "
                                f"{name!r}, which the configuration does not have{also_on(lines)}",
                                f"clusters: {', '.join(clusters)}; fix the trace's cluster field, or "
                                f"keep that cluster (--cluster)"))
    nodes = {n for c in clusters.values() for n in c.node_names()}
    failed: dict[str, list[int]] = {}  # a node the configuration lacks -> the lines failing it
    for f in trace.failures:
        if f.node not in nodes:
            failed.setdefault(f.node, []).append(f.line)
    for name, lines in sorted(failed.items()):
        problems.append(Problem(where, first_line(lines), 0, f"a node failure names node {name!r}, which "
                                f"the configuration does not have{also_on(lines)}",
                                "nodes are named {cluster}-n0000, {cluster}-n0001, ... up to each "
                                "cluster's node count"))
    return problems
