"""The budget tree as people read it: share of parent, effective share, and GPUs per cluster.

A node's *effective share* is the product of the shares on its path from the root (the
brief's example: a program at 50% of the lab and a project at 70% of the program is entitled
to 35% of all GPU time). Its *GPUs* on a cluster are that fraction of the cluster's GPUs, an
average over the lookback window, not a fixed set of devices (fractions are kept).

A node with ``unallocated`` gets an extra ``(unallocated)`` row in the text table: that part
of its budget is nobody's entitlement and serves free, preemptible work.
"""

from __future__ import annotations

from typing import Any

from engine.model import Cluster, Config


def tree_rows(config: Config, clusters: tuple[Cluster, ...] | None = None) -> list[dict[str, Any]]:
    """One JSON-safe dict per node, depth-first in name order."""
    tree = config.tree
    chosen = config.policy.clusters if clusters is None else clusters
    rows: list[dict[str, Any]] = []
    for name in tree.walk():
        node = tree.nodes[name]
        effective = tree.effective_share(name)
        rows.append({
            "name": name,
            "parent": node.parent,
            "depth": tree.depth(name),
            "leaf": tree.is_leaf(name),
            "share_pct": node.share_pct,
            "effective_pct": round(effective * 100.0, 9),
            "unallocated_pct": node.unallocated_pct,
            "gpus": {c.name: round(effective * c.gpus, 6) for c in chosen},
            "owners": list(node.owners),
            "principals": [str(p) for p in node.principals],
            "file": config.files.get(name, node.source.file if node.source else ""),
        })
    return rows


def tree_json(config: Config, clusters: tuple[Cluster, ...] | None = None) -> dict[str, Any]:
    """The whole view as one JSON-safe document."""
    chosen = config.policy.clusters if clusters is None else clusters
    return {
        "origin": config.origin,
        "revision": config.revision,
        "root": config.tree.root,
        "clusters": [{"name": c.name, "gpu_type": c.gpu_type, "gpus": c.gpus} for c in chosen],
        "nodes": tree_rows(config, chosen),
    }


def _pct(value: float) -> str:
    return f"{value:.4f}".rstrip("0").rstrip(".") + "%"


def tree_table(config: Config, clusters: tuple[Cluster, ...] | None = None) -> str:
    """An indented, aligned text table of the tree."""
    chosen = config.policy.clusters if clusters is None else clusters
    header = ["BUDGET", "SHARE", "EFFECTIVE"] + [f"{c.name.upper()} GPUS" for c in chosen] + ["OWNERS / PRINCIPALS"]
    lines: list[list[str]] = [header]
    for row in tree_rows(config, chosen):
        who = row["owners"] + row["principals"] if row["leaf"] else row["owners"]
        lines.append(["  " * row["depth"] + row["name"], _pct(row["share_pct"]), _pct(row["effective_pct"])]
                     + [f"{row['gpus'][c.name]:.1f}" for c in chosen] + [", ".join(who)])
        if row["unallocated_pct"]:
            part = row["effective_pct"] * row["unallocated_pct"] / 100.0
            lines.append(["  " * (row["depth"] + 1) + "(unallocated)", _pct(row["unallocated_pct"]), _pct(part)]
                         + [f"{part / 100.0 * c.gpus:.1f}" for c in chosen] + ["free, preemptible work"])
    widths = [max(len(line[i]) for line in lines) for i in range(len(header))]
    out = []
    for line in lines:
        cells = [line[0].ljust(widths[0])] + [cell.rjust(widths[i]) for i, cell in enumerate(line[1:-1], 1)]
        out.append("  ".join(cells + [line[-1]]).rstrip())
    leaves = config.tree.leaves()
    funded = sum(config.tree.effective_share(leaf) for leaf in leaves) * 100.0
    revision = f" at {config.revision[:12]}" if config.revision else ""
    out.append("")
    out.append(f"{len(config.tree.nodes)} budgets, {len(leaves)} leaves; leaves hold {funded:.4g}% of GPU time"
               f" (the rest is unallocated){revision}" if funded < 100.0 - 1e-9 else
               f"{len(config.tree.nodes)} budgets, {len(leaves)} leaves; leaves hold 100% of GPU time{revision}")
    return "\n".join(out)
