"""Label selectors, field selectors and node-selector requirements, as the API server reads them.

Label selector strings (``labelSelector=``): comma-separated requirements, each one of
``k``, ``!k``, ``k=v``, ``k==v``, ``k!=v``, ``k in (a,b)``, ``k notin (a,b)``. As in Kubernetes,
``k!=v`` and ``k notin (...)`` also match objects that lack ``k``; an empty selector matches all.

Field selector strings (``fieldSelector=``): ``f=v``, ``f==v``, ``f!=v`` joined by commas, over
the fields the real API server indexes for each kind (:data:`FIELDS`); any other field is a
``400 BadRequest`` (``field label not supported``), exactly like the real server. Missing fields
read as ``""`` (so ``spec.nodeName=`` selects unscheduled pods), booleans as ``true``/``false``.

Structured selectors: ``metav1.LabelSelector`` dicts (matchLabels / matchExpressions with In,
NotIn, Exists, DoesNotExist) and ``NodeSelectorRequirement`` (adds Gt, Lt; ``matchFields`` on
``metadata.name``).
"""
from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from typing import Any

from .errors import bad_request

Requirement = tuple[str, str, tuple[str, ...]]  # (key, operator, values)

_SET_RE = re.compile(r"^\s*(?P<key>[^\s!=()]+)\s+(?P<op>in|notin)\s*\((?P<vals>[^)]*)\)\s*$")
_EQ_RE = re.compile(r"^\s*(?P<key>[^\s!=()]+)\s*(?P<op>==|=|!=)\s*(?P<val>[^\s!=(),]*)\s*$")
_EXISTS_RE = re.compile(r"^\s*(?P<neg>!?)\s*(?P<key>[^\s!=()]+)\s*$")


def _split_top_level(text: str) -> list[str]:
    """Split on commas that are not inside parentheses."""
    parts, depth, current = [], 0, []
    for char in text:
        if char == "(":
            depth += 1
        elif char == ")":
            depth -= 1
        if char == "," and depth == 0:
            parts.append("".join(current))
            current = []
        else:
            current.append(char)
    parts.append("".join(current))
    return [part for part in parts if part.strip()]


def parse_label_selector(text: str | None) -> list[Requirement]:
    """Parse a label selector string; raises a 400 ApiError on syntax errors."""
    requirements: list[Requirement] = []
    for part in _split_top_level(text or ""):
        if match := _SET_RE.match(part):
            values = tuple(v.strip() for v in match["vals"].split(",") if v.strip())
            requirements.append((match["key"], match["op"], values))
        elif match := _EQ_RE.match(part):
            op = "!=" if match["op"] == "!=" else "="
            requirements.append((match["key"], op, (match["val"],)))
        elif match := _EXISTS_RE.match(part):
            requirements.append((match["key"], "!exists" if match["neg"] else "exists", ()))
        else:
            raise bad_request(f"unable to parse requirement: {part.strip()!r}")
    return requirements


def match_requirements(requirements: list[Requirement], labels: Mapping[str, str] | None) -> bool:
    labels = labels or {}
    for key, op, values in requirements:
        present = key in labels
        value = labels.get(key)
        if op == "=":
            ok = present and value == values[0]
        elif op == "!=":
            ok = not present or value != values[0]
        elif op == "in":
            ok = present and value in values
        elif op == "notin":
            ok = not present or value not in values
        else:
            ok = present if op == "exists" else not present
        if not ok:
            return False
    return True


def match_label_selector_dict(selector: Mapping[str, Any] | None, labels: Mapping[str, str] | None) -> bool:
    """``metav1.LabelSelector``; an empty selector matches everything (as for PDBs)."""
    selector = selector or {}
    labels = labels or {}
    for key, value in (selector.get("matchLabels") or {}).items():
        if labels.get(key) != value:
            return False
    for expr in selector.get("matchExpressions") or []:
        key, op, values = expr["key"], expr["operator"], tuple(expr.get("values") or ())
        mapped = {"In": "in", "NotIn": "notin", "Exists": "exists", "DoesNotExist": "!exists"}.get(op)
        if mapped is None:
            raise bad_request(f"{op!r} is not a valid label selector operator")
        if not match_requirements([(key, mapped, values)], labels):
            return False
    return True


def match_node_requirement(expr: Mapping[str, Any], value: str | None) -> bool:
    """One NodeSelectorRequirement against a label (or field) value; None means absent."""
    op, values = expr["operator"], list(expr.get("values") or [])
    if op == "In":
        return value is not None and value in values
    if op == "NotIn":
        return value is None or value not in values
    if op == "Exists":
        return value is not None
    if op == "DoesNotExist":
        return value is None
    if op in ("Gt", "Lt"):
        try:
            number, bound = int(value or ""), int(values[0])
        except (ValueError, IndexError):
            return False
        return number > bound if op == "Gt" else number < bound
    raise bad_request(f"{op!r} is not a valid node selector operator")


def match_node_selector_term(term: Mapping[str, Any], node: Mapping[str, Any]) -> bool:
    """A NodeSelectorTerm: all matchExpressions (labels) and matchFields (name) must hold."""
    labels = node.get("metadata", {}).get("labels") or {}
    expressions = term.get("matchExpressions") or []
    fields = term.get("matchFields") or []
    if not expressions and not fields:
        return False  # an empty term matches no objects (API semantics)
    for expr in expressions:
        if not match_node_requirement(expr, labels.get(expr["key"])):
            return False
    for expr in fields:
        if expr["key"] != "metadata.name":
            return False
        if not match_node_requirement(expr, node.get("metadata", {}).get("name")):
            return False
    return True


_ALIASES = {"source": "source.component"}


def _dig(obj: Mapping[str, Any], dotted: str) -> str:
    dotted = _ALIASES.get(dotted, dotted)
    value: Any = obj
    for part in dotted.split("."):
        value = value.get(part) if isinstance(value, Mapping) else None
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


_COMMON = ("metadata.name", "metadata.namespace")
FIELDS: dict[str, tuple[str, ...]] = {
    "Pod": _COMMON + ("spec.nodeName", "spec.restartPolicy", "spec.schedulerName",
                      "spec.serviceAccountName", "spec.hostNetwork", "status.phase", "status.podIP",
                      "status.nominatedNodeName"),
    "Node": _COMMON + ("spec.unschedulable",),
    "Namespace": _COMMON + ("status.phase",),
    "Job": _COMMON + ("status.successful",),
    "Event": _COMMON + ("involvedObject.kind", "involvedObject.namespace", "involvedObject.name",
                        "involvedObject.uid", "involvedObject.apiVersion",
                        "involvedObject.resourceVersion", "involvedObject.fieldPath", "reason",
                        "reportingComponent", "source", "type", "regarding.kind",
                        "regarding.namespace", "regarding.name", "regarding.uid",
                        "reportingController"),
}


def parse_field_selector(text: str | None, kind: str) -> Callable[[Mapping[str, Any]], bool]:
    """Compile a field selector for ``kind``; raises a 400 ApiError on unsupported fields."""
    allowed = FIELDS.get(kind, _COMMON)
    checks: list[tuple[str, bool, str]] = []
    for part in _split_top_level(text or ""):
        match = re.match(r"^\s*([^=!\s]+)\s*(==|=|!=)\s*(.*?)\s*$", part)
        if not match:
            raise bad_request(f"invalid selector: {part.strip()!r}; can't understand")
        field, op, value = match.groups()
        if field not in allowed:
            raise bad_request(f'field label not supported: {field}')
        checks.append((field, op == "!=", value))

    def matches(obj: Mapping[str, Any]) -> bool:
        for field, negate, value in checks:
            if (_dig(obj, field) == value) == negate:
                return False
        return True

    return matches
