"""JSON Schema (2020-12) validation of parsed documents, with every error placed at its line.

The schemas in ``schemas/`` are the single description of the file formats (editors use them
through the ``yaml-language-server`` modeline). Each document is dispatched on its ``kind``
to :data:`KIND_SCHEMAS`; every schema error becomes a :class:`~engine.errors.Problem` at the
offending key (unknown fields, bad keys) or value (wrong type, out of range), with a message
written for a person rather than jsonschema's default text.
"""

from __future__ import annotations

import difflib
import json
import re
from dataclasses import replace
from functools import lru_cache
from typing import Any

from jsonschema import Draft202012Validator
from jsonschema.exceptions import ValidationError

from engine.durations import parse_duration
from engine.errors import Problem, UserError
from engine.loader.yamlread import Document, field_name
from engine.resources import repo_root

SCHEMA_DIR = repo_root() / "schemas"

KIND_SCHEMAS: dict[str, str] = {
    "Budget": "budget.schema.json",
    "Clusters": "clusters.schema.json",
    "SchedulingPolicy": "scheduling-policy.schema.json",
}
"""Document kind -> schema file name under ``schemas/``."""


@lru_cache(maxsize=None)
def validator_for(kind: str) -> Draft202012Validator:
    """The (cached) validator of ``kind``; the schema itself is checked once here."""
    path = SCHEMA_DIR / KIND_SCHEMAS[kind]
    if not path.is_file():
        raise UserError([Problem(str(path), 0, 0, "the JSON Schemas of Allot are missing",
                                 "reinstall Allot from its repository (pip install . or pip install -e .): "
                                 "the schemas/ directory travels with it", "install")])
    schema = json.loads(path.read_text(encoding="utf-8"))
    Draft202012Validator.check_schema(schema)
    return Draft202012Validator(schema)


def describe(value: Any) -> str:
    """A short description of a value's type and content for messages."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return f"boolean {str(value).lower()}"
    if isinstance(value, (int, float)):
        return f"number {value!r}"
    if isinstance(value, str):
        return f"string {value!r}"
    if isinstance(value, list):
        return "a list"
    return "a mapping"


_TYPE_WORDS = {"object": "a mapping", "array": "a list", "string": "a string", "integer": "an integer",
               "number": "a number", "boolean": "true or false", "null": "null"}


def validate(doc: Document, expected: tuple[str, ...]) -> list[Problem]:
    """Schema problems of ``doc``, which must be one of the ``expected`` kinds."""
    data = doc.data
    wanted = " or ".join(expected)
    if not isinstance(data, dict):
        return [doc.problem((), f"the document is {describe(data)}, not a mapping",
                            f"start the file with 'apiVersion: allot.dev/v1' and 'kind: {wanted}'")]
    kind = data.get("kind")
    if kind is None:
        return [doc.problem((), "missing required field 'kind'", f"add 'kind: {wanted}'", code="schema")]
    if kind not in expected:
        where = {"Budget": "budgets/", "Clusters": "policies/", "SchedulingPolicy": "policies/"}.get(kind)
        hint = f"files here hold kind {wanted}"
        if where:
            hint += f"; a {kind} belongs under {where}"
        return [doc.problem(("kind",), f"unexpected kind {kind!r}", hint, code="schema")]
    errors = sorted(validator_for(kind).iter_errors(data), key=lambda e: list(map(str, e.absolute_path)))
    problems: list[Problem] = []
    for error in errors:
        hint = _first_sentence(error.schema.get("description", "")) if isinstance(error.schema, dict) else ""
        problems.extend(p if p.hint or not hint else replace(p, hint=hint) for p in _problems(doc, error))
    return list(dict.fromkeys(problems))  # (one value can break two rules in the same words)


def _first_sentence(text: str) -> str:
    """The first sentence of a schema description, used as the hint of a problem."""
    head = re.split(r"\.\s+(?=[A-Z])", text)[0].strip().rstrip(".")  # (not at "e.g. `7d`")
    if not head:
        return ""
    # lower-case the first letter as a hint reads mid-line, unless it starts an acronym (GPUs)
    return head if head[1:2].isupper() else head[0].lower() + head[1:]


def _problems(doc: Document, error: ValidationError) -> list[Problem]:
    path = tuple(error.absolute_path)
    name = field_name(path)
    value = error.instance
    rule = error.validator
    schema = error.schema if isinstance(error.schema, dict) else {}
    arg = error.validator_value
    if rule == "additionalProperties" and isinstance(value, dict):
        allowed = sorted(schema.get("properties", {}))
        out = []
        for key in value:
            if key in allowed:
                continue
            close = difflib.get_close_matches(key, allowed, n=1)
            hint = f"did you mean {close[0]!r}?" if close else f"allowed fields: {', '.join(allowed)}"
            if not allowed:
                hint = "remove it"
            out.append(doc.problem(path + (key,), f"unknown field {key!r} in {name}", hint, key=True,
                                   code="schema"))
        if out:
            return out
    if rule == "required" and isinstance(value, dict):
        return [doc.problem(path, f"missing required field {req!r} in {name}",
                            f"add '{req}:'", code="schema") for req in arg if req not in value]
    if schema.get("title") == "Duration" and rule in ("type", "minimum", "maximum"):
        # (a number: only a bare 0 is a duration; parse_duration says what else is wrong)
        try:
            parse_duration(value)
            reason, hint = f"{value!r} is not a valid duration", ""
        except ValueError as err:
            reason, _, hint = str(err).partition("; ")
        return [doc.problem(path, f"{name}: {reason}", hint or "write e.g. '7d', '8h', '15m', '90s' or '1h30m'",
                            code="schema")]
    if rule == "type":
        words = " or ".join(_TYPE_WORDS.get(t, t) for t in ([arg] if isinstance(arg, str) else arg))
        return [doc.problem(path, f"{name} must be {words}, got {describe(value)}", code="schema")]
    if rule == "const":
        return [doc.problem(path, f"{name} must be {arg!r}, got {describe(value)}", f"write '{path[-1]}: {arg}'"
                            if path and isinstance(path[-1], str) else f"write {arg}", code="schema")]
    if rule == "enum":
        return [doc.problem(path, f"{name} must be one of {', '.join(map(repr, arg))}, got {describe(value)}",
                            code="schema")]
    if rule in ("minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum"):
        bound = {"minimum": ">=", "maximum": "<=", "exclusiveMinimum": ">", "exclusiveMaximum": "<"}[rule]
        return [doc.problem(path, f"{name} is {value!r}, must be {bound} {arg!r}", code="range")]
    if rule == "pattern" and isinstance(value, str):
        title = schema.get("title", "")
        if title == "Duration":
            reason, hint = f"{value!r} is not a valid duration", ""
            try:
                parse_duration(value)
            except ValueError as err:
                reason, _, hint = str(err).partition("; ")
            return [doc.problem(path, f"{name}: {reason}", hint or "write e.g. '7d', '8h', '15m', '90s' or '1h30m'",
                                code="schema")]
        what = title.lower() if title else "value"
        return [doc.problem(path, f"{name} {value!r} is not a valid {what}", code="schema")]
    if rule in ("minItems", "maxItems"):
        word = "at least" if rule == "minItems" else "at most"
        return [doc.problem(path, f"{name} must have {word} {arg} item{'s' if arg != 1 else ''}",
                            code="schema")]
    if rule in ("minProperties", "maxProperties"):
        keys = sorted(schema.get("properties", {}))
        if keys and schema.get("minProperties") == 1 and schema.get("maxProperties") == 1:
            return [doc.problem(path, f"{name} must have exactly one of {', '.join(keys)}", code="schema")]
        return [doc.problem(path, f"{name}: {error.message}", code="schema")]
    if rule == "uniqueItems":
        return [doc.problem(path, f"{name} lists the same item twice", "remove the repeat", code="schema")]
    if rule in ("minLength", "maxLength"):
        word = "at least" if rule == "minLength" else "at most"
        return [doc.problem(path, f"{name} must be {word} {arg} characters long", code="schema")]
    if rule == "propertyNames" and isinstance(value, dict):
        bad = [k for k in value if list(Draft202012Validator(arg).iter_errors(k))]
        return [doc.problem(path + (k,), f"key {k!r} in {name} is not a valid name",
                            "use lowercase letters, digits and '-'", key=True, code="schema") for k in bad]
    return [doc.problem(path, f"{name}: {error.message}", code="schema")]
