"""Semantic checks of the budget files, and their assembly into :class:`BudgetNode` objects.

The tree is written across several files (one per subtree, so each manager owns one file).
A child entry with ``file:`` *references* another file: the parent's file sets the child's
``name`` and ``share``, the referenced file's top node (same name) holds its owners and
children. The root file is the one no other file references (when several are unreferenced,
``root.yaml`` is taken as the root and the others are reported as orphans).

Checks (each reported with its location; all collected, none stops the others):

- references: the file exists, stays inside ``budgets/``, is referenced once, names match,
  and files never reference each other in a cycle; exactly one root file, no orphan files
  (judged only when every budget file could be read: a file with errors of its own hides its
  references, and what it references would be reported an orphan wrongly);
- names are unique across all files, and none is reserved (``0``: a budget label of ``0``
  means unallocated work; ``unfunded``: a trace mapping's word for unfunded work);
- shares: every non-top node has one; a top node has none (its parent's file sets it); the
  children's shares plus the parent's ``unallocated`` sum to 100 within :data:`TOLERANCE`;
- inner nodes have ``owners`` and no ``principals``; leaves have ``principals`` and no
  ``unallocated``; a reference carries only ``name``, ``share``, ``description``, ``file``.

Schema validation has already run: documents reaching here have the right shapes.
"""

from __future__ import annotations

import difflib
import posixpath
from dataclasses import dataclass, field
from typing import Any, Callable

import networkx as nx

from engine.errors import Problem
from engine.loader.yamlread import Document
from engine.model import BudgetNode, Principal, SourceRef

TOLERANCE = 1e-6
"""Largest accepted distance (in percentage points) between a sibling-share sum and 100."""

ROOT_FILE = "budgets/root.yaml"
_REF_ONLY = ("name", "share", "description", "file")
# names that mean "no budget" where a budget is named, so no job or trace could charge them
RESERVED = {"0": "a budget label of 0 means unallocated work",
            "unfunded": "a trace mapping that names it means unfunded work"}


@dataclass
class _Entry:
    """One node as written: its document, its path in the document and its data."""

    doc: Document
    path: tuple
    data: dict[str, Any]
    parent: "_Entry | None"
    children: list["_Entry"] = field(default_factory=list)

    @property
    def name(self) -> str:
        return self.data["name"]

    @property
    def is_ref(self) -> bool:
        return "file" in self.data

    def problem(self, message: str, hint: str = "", key: str | None = None, at_key: bool = False,
                code: str = "semantic") -> Problem:
        path = self.path + ((key,) if key else ("name",))
        return self.doc.problem(path, message, hint, key=at_key, code=code)

    def where(self) -> str:
        line, column = self.doc.loc(self.path + ("name",))
        return f"{self.doc.file}:{line}:{column}"


def _collect(doc: Document, data: dict, path: tuple, parent: _Entry | None) -> _Entry:
    entry = _Entry(doc, path, data, parent)
    for i, child in enumerate(data.get("children", [])):
        entry.children.append(_collect(doc, child, path + ("children", i), entry))
    return entry


def _target(file: str, entry: _Entry) -> str:
    """The path, from the top of the configuration, of the file a reference in ``file`` names."""
    return posixpath.normpath(posixpath.join(posixpath.dirname(file), entry.data["file"]))


def _walk(entry: _Entry):
    yield entry
    for child in entry.children:
        yield from _walk(child)


def assemble(docs: list[Document], all_files: set[str],
             describe: Callable[[str], str | None] = lambda path: None,
             ) -> tuple[list[BudgetNode], dict[str, str], list[Problem]]:
    """Check the budget documents; return the nodes, node -> defining file, and the problems.

    ``docs`` are the schema-valid Budget documents; ``all_files`` every budget file present
    (including those with errors already reported, so a reference to them is not "missing");
    ``describe`` says what a referenced path that is no file is (``Source.describe``).
    """
    problems: list[Problem] = []
    tops = {doc.file: _collect(doc, doc.data["budget"], ("budget",), None) for doc in docs}

    # 1. File references.
    graph = nx.DiGraph()
    graph.add_nodes_from(tops)
    ref_of: dict[str, _Entry] = {}  # referenced file -> the reference entry
    # what a reference to a missing file may have meant: a file nothing else references, not
    # the referencing file itself nor the root (either would be a cycle)
    targets = {_target(file, e) for file, top in tops.items() for e in _walk(top) if e.is_ref}
    for file, top in tops.items():
        for entry in _walk(top):
            if not entry.is_ref:
                continue
            target = _target(file, entry)
            if not target.startswith("budgets/"):
                problems.append(entry.problem(f"file reference {entry.data['file']!r} leaves budgets/",
                                              "reference a file inside budgets/", key="file"))
                continue
            if target not in all_files:
                close = difflib.get_close_matches(target, sorted(all_files - targets - {file, ROOT_FILE}), n=1)
                hint = f"did you mean {close[0]}?" if close else f"create {target} with the subtree {entry.name!r}"
                what = describe(target)
                if what is not None:
                    holds = f"the file that holds the subtree {entry.name!r}"
                    fix = (f"reference {holds} (a file inside the directory?)"
                           if what == "a directory" else
                           f"point the link at {holds}, or reference that file")
                    problems.append(entry.problem(f"referenced file {target} is {what}, not a file",
                                                  fix, key="file", code="missing"))
                    continue
                problems.append(entry.problem(f"referenced file {target} does not exist", hint,
                                              key="file", code="missing"))
                continue
            if target not in tops:
                continue  # exists but invalid: its own problems are already reported
            if target in ref_of:
                first = ref_of[target]
                problems.append(entry.problem(
                    f"{target} is already referenced at {first.doc.file}:{first.doc.loc(first.path + ('file',))[0]}",
                    "a subtree has exactly one parent; remove one of the references", key="file"))
                continue
            ref_of[target] = entry
            graph.add_edge(file, target)
            top_name = tops[target].name
            if top_name != entry.name:
                problems.append(entry.problem(
                    f"reference names {entry.name!r} but {target} defines {top_name!r}",
                    f"use the same name in both files (name: {top_name})"))
    in_cycle: set[str] = set()
    for cycle in sorted(nx.simple_cycles(graph), key=lambda c: sorted(c)):
        start = min(cycle)
        ordered = cycle[cycle.index(start):] + cycle[:cycle.index(start)]
        in_cycle.update(cycle)
        ref = ref_of[ordered[1 % len(ordered)]]
        problems.append(ref.problem(f"budget files reference each other in a cycle: "
                                    f"{' -> '.join(ordered + [start])}",
                                    "a subtree cannot contain its own ancestor; remove one reference",
                                    key="file", code="cycle"))

    # 2. Exactly one root file; everything else reachable from it. Not judged while a budget
    # file has errors of its own (already reported): its references are unknown, so a file it
    # references would be reported an orphan, or its subtrees as extra roots, wrongly.
    partial = bool(all_files - set(tops))
    unreferenced = sorted(f for f in tops if f not in ref_of)
    root_file: str | None = None
    if len(unreferenced) == 1:
        root_file = unreferenced[0]
    elif ROOT_FILE in unreferenced:
        root_file = ROOT_FILE
    if tops and not unreferenced and not partial:
        problems.append(Problem("budgets", 0, 0, "no root budget file: every budget file is referenced by another",
                                "the root file is the one no other file references; break the cycle", "cycle"))
    for file in unreferenced:
        if file == root_file or partial:
            continue
        top = tops[file]
        others = ", ".join(f for f in unreferenced if f != file)
        if root_file:
            message = f"orphan subtree {top.name!r}: no budget file references {file}"
            hint = f"reference it from its parent's file with 'file:' and a share, or delete {file}"
        else:
            message = f"{len(unreferenced)} root budget files (referenced by no other file): {file} and {others}"
            hint = f"keep one root (by convention {ROOT_FILE}) and reference the others from their parents"
        problems.append(top.problem(message, hint, code="orphan"))
    reachable = nx.descendants(graph, root_file) | {root_file} if root_file else set()
    reachable -= in_cycle

    # 3. Names unique across every file (references are not definitions).
    seen: dict[str, _Entry] = {}
    for file, top in sorted(tops.items(), key=lambda item: (item[0] != root_file, item[0])):
        for entry in _walk(top):
            if entry.is_ref:
                continue
            if entry.name in RESERVED:
                problems.append(entry.problem(f"budget name {entry.name!r} is reserved: {RESERVED[entry.name]}",
                                              "choose another name", code="reserved"))
            if entry.name in seen:
                problems.append(entry.problem(f"budget name {entry.name!r} is already defined at {seen[entry.name].where()}",
                                              "names are unique across all budget files; rename one", code="duplicate"))
            else:
                seen[entry.name] = entry

    # 4. Per-node rules.
    for file, top in sorted(tops.items()):
        for entry in _walk(top):
            problems.extend(_node_problems(entry, file == root_file))

    # 5. Nodes of the reachable files.
    nodes: list[BudgetNode] = []
    files: dict[str, str] = {}
    for file in sorted(reachable):
        top = tops[file]
        parent_ref = ref_of.get(file)
        for entry in _walk(top):
            if entry.is_ref:
                continue
            if entry is top:
                parent = parent_ref.parent.name if parent_ref and parent_ref.parent else None
                share = parent_ref.data.get("share", 0.0) if parent_ref else 100.0
                description = entry.data.get("description") or (parent_ref.data.get("description", "") if parent_ref else "")
            else:
                parent = entry.parent.name if entry.parent else None
                share = entry.data.get("share", 0.0)
                description = entry.data.get("description", "")
            line, column = entry.doc.loc(entry.path + ("name",))
            nodes.append(BudgetNode(
                name=entry.name,
                parent=parent,
                share_pct=float(share),
                owners=tuple(entry.data.get("owners", ())),
                principals=tuple(Principal(kind, value) for p in entry.data.get("principals", ())
                                 for kind, value in p.items()),
                description=description,
                source=SourceRef(file, line, column),
                unallocated_pct=float(entry.data.get("unallocated", 0.0)),
            ))
            files[entry.name] = file
    return nodes, files, problems


def _num(value: float) -> str:
    """A percentage for messages: exact enough to show a 1e-6 difference, no float noise."""
    return f"{value:.10g}"


def _node_problems(entry: _Entry, is_root_top: bool) -> list[Problem]:
    """Rules that concern one node (and the sum of its children's shares)."""
    out: list[Problem] = []
    data = entry.data
    name = entry.name
    top = entry.parent is None
    if top and "share" in data:
        if is_root_top:
            out.append(entry.problem(f"the root {name!r} has no share (it is 100% of all GPU time)",
                                     "remove 'share' here", key="share", at_key=True))
        else:
            out.append(entry.problem(f"share of {name!r} is set where its parent's file references it",
                                     "remove 'share' here and change it in the parent's file", key="share", at_key=True))
    if entry.parent is not None and "share" not in data:
        out.append(entry.problem(f"{name!r} has no share", f"add 'share:' (a percentage of {entry.parent.name!r})"))
    if entry.is_ref:
        for key in data:
            if key not in _REF_ONLY:
                out.append(entry.problem(f"{key!r} of {name!r} belongs in the referenced file {data['file']}",
                                         f"a reference carries only {', '.join(_REF_ONLY)}", key=key, at_key=True))
        return out
    children = entry.children
    if children:
        if not data.get("owners"):
            out.append(entry.problem(f"{name!r} has children but no owners",
                                     "add 'owners:' with the GitHub users or teams who review this subtree",
                                     code="owners"))
        if "principals" in data:
            out.append(entry.problem(f"{name!r} has children, so it cannot have principals (only leaves are charged)",
                                     "move the principals to a leaf", key="principals", at_key=True))
        shares = [c.data.get("share") for c in children]
        numbers = [float(s) for s in shares if isinstance(s, (int, float))]
        if len(numbers) == len(shares):  # every share is a number
            unallocated = float(data.get("unallocated", 0.0))
            total = sum(numbers) + unallocated
            if abs(total - 100.0) > TOLERANCE:
                terms = " + ".join(f"{c.name} {_num(c.data['share'])}" for c in children)
                if unallocated:
                    terms += f" + unallocated {_num(unallocated)}"
                missing = round(100.0 - total, 9)  # (far below the tolerance: no float noise in the hint)
                if missing > 0:
                    hint = (f"raise the shares by {_num(missing)} in total, or state the remainder "
                            f"with 'unallocated: {_num(unallocated + missing)}'")
                elif unallocated:  # (the part given to no child is one of the terms to lower)
                    less = round(unallocated + missing, 9)
                    hint = (f"lower the shares by {_num(-missing)} in total, or 'unallocated' to "
                            f"{_num(less)}" if less >= 0 else
                            f"lower the shares by {_num(-missing)} in total, or remove "
                            f"'unallocated' and lower them by {_num(-less)}")
                else:
                    hint = f"lower the shares by {_num(-missing)} in total"
                out.append(entry.problem(f"shares of the children of {name!r} sum to {_num(total)}%, not 100% ({terms})",
                                         hint, key="children", at_key=True, code="shares"))
    else:
        if not data.get("principals"):
            out.append(entry.problem(f"leaf {name!r} has no principals, so nobody can charge it",
                                     "add 'principals:' (namespace, group or user entries)", code="principals"))
        if "unallocated" in data:
            out.append(entry.problem(f"leaf {name!r} has 'unallocated' but no children",
                                     "'unallocated' is the part of a node given to no child; remove it",
                                     key="unallocated", at_key=True))
    return out
