"""Trace owners and budget leaves: which leaf a trace owner's work is charged to.

Real traces know owners (a Philly virtual cluster, a Helios user), not our budget leaves.
A mapping ``{owner: leaf}`` says it: a dict, or a YAML mapping file as shipped in
``traces/*/mapping-*.yaml`` (:func:`load_mapping`: ``owners: {owner: leaf}`` plus an optional
``default:`` leaf, or ``default: unfunded``). Without one, :func:`derive_mapping` assigns
owners to the tree's leaves greedily by demand: owners in decreasing GPU-time order each go to
the leaf whose target (effective share x total demand) has the most room left (ties: leaf
name). To replay a trace under its own tree instead, :func:`derive_tree` builds one leaf per
owner (named by :func:`leaf_names`) with equal or demand-proportional shares.
:func:`engine.sim.prepare.prepare_trace` applies the mapping.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Collection, Iterable

from engine.errors import Problem, UserError
from engine.model import BudgetNode, BudgetTree
from engine.sim.trace import Trace

UNFUNDED = "unfunded"


def load_mapping(path: str | Path, leaves: Collection[str] | None = None) -> dict[str, str | None]:
    """Read a mapping file: ``owners: {owner: leaf}``, optional ``default: <leaf>|unfunded``
    (and the notes ``trace:`` and ``description:``, which the bundled mappings use). The
    default is returned under the key ``"*"``; ``unfunded`` maps to ``None``. Read as the
    configuration's YAML is (duplicate owners and other traps refused), and every problem at
    once, at its line: unknown fields, values that are not a leaf's name, and, given
    ``leaves``, names that are not leaves of the tree (used by the trace or not)."""
    from engine.loader.yamlread import parse

    path = Path(path)
    hint = "write owners: {<trace owner>: <budget leaf>}, optionally default: <leaf>|unfunded"
    try:
        raw = path.read_bytes()
    except OSError as err:
        raise UserError([Problem(str(path), 0, 0, f"cannot read the mapping: {err.strerror or err}",
                                 "give the path of a mapping file (--mapping)")]) from None
    doc, refused = parse(str(path), raw)
    if doc is None:
        raise UserError(refused)
    data = doc.data
    if not isinstance(data, dict) or not isinstance(data.get("owners"), dict):
        raise UserError([doc.problem(("owners",), "a mapping file needs an 'owners' mapping", hint)])
    problems = refused + [doc.problem((k,), f"unknown field {k!r} in the mapping", hint + " (and trace: "
                                      "or description: as notes)", key=True)
                          for k in data if k not in ("owners", "default", "trace", "description")]
    out: dict[str, str | None] = {}
    named: list[tuple[tuple, str, object]] = [(("owners", owner), str(owner), leaf)
                                              for owner, leaf in data["owners"].items()]
    if "default" in data:
        named.append((("default",), "*", data["default"]))
    for where, owner, leaf in named:
        if leaf is not None and not isinstance(leaf, str):
            problems.append(doc.problem(where, f"{'.'.join(map(str, where))} must be a leaf's name or "
                                        f"{UNFUNDED}, got {leaf!r}", hint))
        elif leaf not in (None, UNFUNDED) and leaves is not None and leaf not in leaves:
            problems.append(doc.problem(where, f"{leaf!r} is not a leaf of the budget tree",
                                        f"leaves are: {', '.join(sorted(leaves))}"))
        else:
            out[owner] = None if leaf in (None, UNFUNDED) else leaf
    if problems:
        raise UserError(problems)
    return out


def owner_demand(trace: Trace) -> dict[str, float]:
    """GPU-seconds submitted per owner."""
    out: dict[str, float] = {}
    for t in trace.tasks:
        out[t.owner] = out.get(t.owner, 0.0) + t.gpus * t.runtime
    return out


def derive_mapping(trace: Trace, tree: BudgetTree) -> dict[str, str | None]:
    """Owners to leaves, greedily by demand against effective shares (module docstring)."""
    demand = owner_demand(trace)
    total = sum(demand.values()) or 1.0
    room = {leaf: tree.effective_share(leaf) * total for leaf in tree.leaves()}
    out: dict[str, str | None] = {}
    for owner in sorted(demand, key=lambda o: (-demand[o], o)):
        leaf = max(sorted(room), key=lambda l: room[l])
        out[owner] = leaf
        room[leaf] -= demand[owner]
    return out


_SAFE = re.compile(r"[^a-z0-9-]+")


def leaf_name(owner: str) -> str:
    """A budget-node name for a trace owner (lower case, [a-z0-9-], starting with a letter)."""
    name = _SAFE.sub("-", owner.lower()).strip("-") or "owner"
    return name if name[0].isalpha() else f"t-{name}"


ROOT_NAME = "trace"  # the root of a derived tree


def leaf_names(owners: Iterable[str]) -> dict[str, str]:
    """Owner -> a distinct leaf name (:func:`leaf_name`): owners whose names clash ("Team A",
    "team-a"), or clash with the root's, get ``-2``, ``-3``... in sorted owner order."""
    taken = {ROOT_NAME}
    out: dict[str, str] = {}
    for owner in sorted(set(owners)):
        base = name = leaf_name(owner)
        k = 1
        while name in taken:
            k += 1
            name = f"{base}-{k}"
        taken.add(name)
        out[owner] = name
    return out


def derive_tree(trace: Trace, shares: str = "equal") -> BudgetTree:
    """A one-level tree with a leaf per owner (named by :func:`leaf_names`): ``equal`` shares
    or ``demand`` (proportional to submitted GPU-seconds). Map owners with
    ``leaf_names(trace.owners())``."""
    demand = owner_demand(trace)
    owners = sorted(demand)
    if not owners:
        raise UserError([Problem(trace.name, 0, 0, "cannot derive a budget tree from an empty trace")])
    if shares == "demand":
        total = sum(demand.values()) or 1.0
        pct = [100.0 * demand[o] / total for o in owners]
    elif shares == "equal":
        pct = [100.0 / len(owners)] * len(owners)
    else:
        raise ValueError(f"shares must be 'equal' or 'demand', got {shares!r}")
    pct[-1] = 100.0 - sum(pct[:-1])
    names = leaf_names(owners)
    nodes = [BudgetNode(ROOT_NAME, None, 100.0, description=f"derived from trace {trace.name}")]
    nodes += [BudgetNode(names[o], ROOT_NAME, max(0.0, p), description=f"trace owner {o}")
              for o, p in zip(owners, pct)]
    return BudgetTree.build(nodes)
