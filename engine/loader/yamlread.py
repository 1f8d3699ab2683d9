"""Safe, line-aware YAML reading: bytes in, plain data plus the location of every key and value out.

Why not ``yaml.safe_load``: it silently keeps the last of duplicate keys, expands aliases
without limit (the "billion laughs" bomb), turns ``2024-01-01`` into a date and forgets where
each value was written. Here the text is *composed* into PyYAML's node graph (which keeps
marks) and then constructed by hand:

- the file must be UTF-8 (a BOM is tolerated); the first bad byte is reported with its line;
- exactly one document; an empty (or comment-only) file is an error;
- duplicate keys in a mapping are errors at the second key, naming the first one's line;
- keys must be strings; merge keys (``<<``) and explicit non-core tags are refused;
- aliases are allowed, but the expanded document may hold at most :data:`MAX_NODES` nodes
  (counting every alias expansion, checked on the event stream before anything is built and
  reported at the alias that crosses the limit), and recursive aliases are refused;
- scalars keep their YAML 1.1 core types (str, int, float, bool, null); timestamps stay
  strings; ``.nan`` and infinities are refused (they would slip through range checks).

The result is a :class:`Document`: ``data`` (JSON-compatible values) and ``locations``
mapping each path (a tuple of keys and list indices) to a :class:`Loc` with the 1-based
line/column of the key (for mapping entries) and of the value. Problems come back as
:class:`engine.errors.Problem` objects; this module never raises for bad input.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import yaml
from yaml.nodes import MappingNode, Node, ScalarNode, SequenceNode

from engine.errors import Problem

MAX_NODES = 100_000
"""Largest number of nodes a document may expand to (aliases counted each time they are used)."""

MAX_DEPTH = 64
"""Deepest nesting of mappings and lists a document may have (a budget file nests two levels
per level of its tree); deeper documents are refused before anything recurses into them."""

MAX_BYTES = 4 * 1024 * 1024
"""Largest file accepted; policy files are a few kilobytes."""

Path_ = tuple[str | int, ...]

_CORE_TAGS = {
    "tag:yaml.org,2002:str",
    "tag:yaml.org,2002:int",
    "tag:yaml.org,2002:float",
    "tag:yaml.org,2002:bool",
    "tag:yaml.org,2002:null",
    "tag:yaml.org,2002:timestamp",
    "tag:yaml.org,2002:map",
    "tag:yaml.org,2002:seq",
}


@dataclass(frozen=True)
class Loc:
    """Where a value was written: ``line``/``column`` of the value, ``key_line``/``key_column``
    of its key when it is a mapping entry (else equal to the value's)."""

    line: int
    column: int
    key_line: int
    key_column: int


@dataclass
class Document:
    """A parsed file: ``data`` and the location of every path in it."""

    file: str
    data: Any
    locations: dict[Path_, Loc] = field(default_factory=dict)

    def loc(self, path: Path_, key: bool = False) -> tuple[int, int]:
        """(line, column) of ``path`` (its key when ``key``), or of its closest written ancestor."""
        probe = tuple(path)
        while probe not in self.locations and probe:
            probe = probe[:-1]
        found = self.locations.get(probe)
        if found is None:
            return (1, 1)
        if key and probe == tuple(path):
            return (found.key_line, found.key_column)
        return (found.line, found.column)

    def problem(self, path: Path_, message: str, hint: str = "", key: bool = False, code: str = "invalid") -> Problem:
        line, column = self.loc(path, key=key)
        return Problem(self.file, line, column, message, hint, code)


class _Refused(Exception):
    """Internal: stop constructing this document and report ``problem``."""

    def __init__(self, problem: Problem):
        super().__init__(problem.message)
        self.problem = problem


def _pos(node: Node) -> tuple[int, int]:
    return node.start_mark.line + 1, node.start_mark.column + 1


def decode(file: str, raw: bytes) -> tuple[str | None, list[Problem]]:
    """Bytes to text, refusing non-UTF-8 with the line/column of the first bad byte."""
    if len(raw) > MAX_BYTES:
        return None, [Problem(file, 1, 1, f"file is {len(raw)} bytes, larger than the {MAX_BYTES} accepted",
                              "split it into one file per subtree", "too-large")]
    try:
        return raw.decode("utf-8-sig"), []
    except UnicodeDecodeError as err:
        offset = err.start
        line = raw.count(b"\n", 0, offset) + 1
        column = offset - (raw.rfind(b"\n", 0, offset) + 1) + 1
        byte = raw[offset:offset + 1].hex()
        return None, [Problem(file, line, column, f"file is not valid UTF-8 (byte 0x{byte})",
                              "save the file as UTF-8", "encoding")]


def yaml_problem(file: str, err: yaml.YAMLError) -> Problem:
    """What PyYAML refused, where (its mark) and what to check: for any YAML the user wrote
    (config files, trace mapping files, YAML traces)."""
    if not isinstance(err, yaml.MarkedYAMLError):  # pragma: no cover - text input is always marked
        return Problem(file, 1, 1, f"invalid YAML: {err}", "", "yaml")
    mark = err.problem_mark or err.context_mark
    line, column = (mark.line + 1, mark.column + 1) if mark else (1, 1)
    what = err.problem or "unreadable YAML"
    context = f" ({err.context})" if err.context else ""
    hint = "check indentation, quoting and brackets near here"
    if "'\\t'" in what:
        hint = "indent with spaces, not tabs"
    return Problem(file, line, column, f"invalid YAML: {what}{context}", hint, "yaml")


def parse(file: str, raw: bytes) -> tuple[Document | None, list[Problem]]:
    """Parse one YAML file; return the document (None when it cannot be read) and its problems.
    A duplicate key is a problem that leaves a document (its first value kept), so the
    document's other problems are found in the same run; a caller uses such a document to
    report them, never as valid."""
    text, problems = decode(file, raw)
    if text is None:
        return None, problems
    try:
        bomb = _expansion_problem(file, text)
        if bomb is not None:
            return None, [bomb]
        roots = list(yaml.compose_all(text, Loader=yaml.SafeLoader))
    except yaml.YAMLError as err:
        return None, [yaml_problem(file, err)]
    except RecursionError:  # (the parser recurses per level: hundreds of levels exhaust it)
        return None, [_too_deep(file, 1, 1)]
    roots = [r for r in roots if r is not None]
    if not roots:
        return None, [Problem(file, 1, 1, "file is empty (no YAML document)",
                              "write the document, starting with 'apiVersion: allot.dev/v1', or delete the file",
                              "empty")]
    if len(roots) > 1:
        line, column = _pos(roots[1])
        return None, [Problem(file, line, column, "file holds more than one YAML document",
                              "keep one document per file (remove the '---' separator)", "yaml")]
    doc = Document(file, None)
    builder = _Builder(doc)
    try:
        doc.data = builder.build(roots[0], ())
    except _Refused as refused:
        return None, [refused.problem]
    return doc, builder.problems


def _too_deep(file: str, line: int, column: int) -> Problem:
    return Problem(file, line, column, f"the document nests more than {MAX_DEPTH} levels deep",
                   "flatten it: no file of budgets or policies needs more (a deep budget tree "
                   "goes into several files, each a subtree)", "yaml")


def _expansion_problem(file: str, text: str) -> Problem | None:
    """Refuse alias bombs and recursive aliases from the event stream, at the offending alias.

    Every node costs 1; an alias costs the expanded size of the node it names. Sizes are
    known when an anchored node ends, so an alias to a node still open is recursive.
    """
    sizes: dict[str, int] = {}
    stack: list[list] = [[None, 0]]  # open collections: [anchor, expanded size so far]
    total = 0
    for event in yaml.parse(text, Loader=yaml.SafeLoader):
        if isinstance(event, yaml.AliasEvent):
            if event.anchor not in sizes:
                line, column = event.start_mark.line + 1, event.start_mark.column + 1
                return Problem(file, line, column, f"recursive alias *{event.anchor}: a node contains itself",
                               "remove the alias that refers to its own ancestor", "alias-bomb")
            cost = sizes[event.anchor]
        elif isinstance(event, (yaml.ScalarEvent, yaml.SequenceStartEvent, yaml.MappingStartEvent)):
            cost = 1
        elif isinstance(event, (yaml.SequenceEndEvent, yaml.MappingEndEvent)):
            anchor, size = stack.pop()
            if anchor is not None:
                sizes[anchor] = size
            stack[-1][1] += size
            continue
        else:
            continue
        total += cost
        if total > MAX_NODES:
            line, column = event.start_mark.line + 1, event.start_mark.column + 1
            return Problem(file, line, column, f"aliases expand the document beyond {MAX_NODES} nodes (alias bomb)",
                           "write the values out instead of nesting aliases", "alias-bomb")
        if isinstance(event, (yaml.SequenceStartEvent, yaml.MappingStartEvent)):
            stack.append([event.anchor, 1])
        else:
            stack[-1][1] += cost
            if isinstance(event, yaml.ScalarEvent) and event.anchor is not None:
                sizes[event.anchor] = 1
    return None


def field_name(path: tuple) -> str:
    """``('budget', 'children', 0, 'share')`` -> ``budget.children[0].share``."""
    out = ""
    for part in path:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out or "document"


class _Builder:
    """Constructs plain values from composed nodes, recording locations and counting expansion."""

    def __init__(self, doc: Document):
        self.doc = doc
        self.count = 0
        self.active: set[int] = set()
        self.problems: list[Problem] = []
        self.scalars = yaml.SafeLoader("")

    def fail(self, node: Node, message: str, hint: str = "", code: str = "yaml") -> _Refused:
        line, column = _pos(node)
        return _Refused(Problem(self.doc.file, line, column, message, hint, code))

    def build(self, node: Node, path: Path_, key_node: Node | None = None) -> Any:
        self.count += 1
        if self.count > MAX_NODES:
            raise self.fail(node, f"document expands to more than {MAX_NODES} nodes (alias bomb?)",
                            "write the values out instead of nesting aliases", "alias-bomb")
        line, column = _pos(node)
        key_line, key_column = _pos(key_node) if key_node is not None else (line, column)
        self.doc.locations.setdefault(path, Loc(line, column, key_line, key_column))
        if node.tag not in _CORE_TAGS:
            tag = node.tag.replace("tag:yaml.org,2002:", "!!")
            raise self.fail(node, f"tag {tag!r} is not allowed", "remove the explicit tag")
        if isinstance(node, ScalarNode):
            return self.scalar(node, path)
        if id(node) in self.active:
            raise self.fail(node, "recursive alias: a node contains itself",
                            "remove the alias that refers to its own ancestor", "alias-bomb")
        if len(path) >= MAX_DEPTH:
            raise _Refused(_too_deep(self.doc.file, line, column))
        self.active.add(id(node))
        try:
            if isinstance(node, SequenceNode):
                return [self.build(item, path + (i,)) for i, item in enumerate(node.value)]
            if isinstance(node, MappingNode):
                return self.mapping(node, path)
            raise self.fail(node, "unsupported YAML node")  # pragma: no cover
        finally:
            self.active.discard(id(node))

    def scalar(self, node: ScalarNode, path: Path_) -> Any:
        if node.tag == "tag:yaml.org,2002:timestamp":
            return node.value
        value = self.scalars.construct_object(node)
        if isinstance(value, float) and not math.isfinite(value):
            raise self.fail(node, f"{field_name(path)}: {node.value!r} is not a finite number",
                            "write a finite number", "invalid")
        return value

    def mapping(self, node: MappingNode, path: Path_) -> dict[str, Any]:
        out: dict[str, Any] = {}
        first: dict[str, Node] = {}
        for key_node, value_node in node.value:
            if key_node.tag == "tag:yaml.org,2002:merge":
                raise self.fail(key_node, "merge keys ('<<') are not supported", "write the keys out")
            if not isinstance(key_node, ScalarNode) or key_node.tag != "tag:yaml.org,2002:str":
                shown = key_node.value if isinstance(key_node, ScalarNode) else "a collection"
                raise self.fail(key_node, f"mapping key {shown!r} is not a string", "quote the key", "invalid")
            key = key_node.value
            if key in first:
                line, column = _pos(key_node)
                prev = first[key].start_mark.line + 1
                self.problems.append(Problem(self.doc.file, line, column,
                                             f"duplicate key {key!r} (first written on line {prev})",
                                             "keep one of them", "duplicate-key"))
                continue
            first[key] = key_node
            out[key] = self.build(value_node, path + (key,), key_node)
        return out
