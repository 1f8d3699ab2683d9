"""Policy as code: load ``budgets/`` and ``policies/`` into a validated :class:`Config`.

Pipeline, per file then across files (every stage runs on whatever the previous stages let
through, so one run reports *all* problems):

1. source: a directory, or a git revision read through pygit2 (:mod:`.sources`);
2. safe, line-aware YAML parsing (:mod:`.yamlread`);
3. JSON Schema 2020-12 validation, by ``kind`` (:mod:`.schema`);
4. semantic checks and assembly: the budget tree (:mod:`.budgets`), the policy
   (:mod:`.policies`);
5. :meth:`BudgetTree.build` into the frozen tree and its networkx graph.

Any problem raises :class:`engine.errors.UserError` carrying every problem found, each with
``file:line:column``. No user mistake (bad YAML, unknown revision, missing directory) escapes
as another exception.

``overrides`` (``allot simulate --set placement.loans=true``): knobs of the scheduling policy
replaced after parsing and before validation, so a value set on the command line passes every
check a value in the file does; an unknown knob is a problem of its own. The config records
them (:attr:`Config.overrides`).
"""

from __future__ import annotations

import json
from pathlib import Path
from types import MappingProxyType
from typing import Any, Mapping

from engine.errors import Problem, UserError
from engine.loader import budgets as _budgets
from engine.loader import policies as _policies
from engine.loader.schema import validate, validator_for
from engine.loader.sources import Source, default_root, open_source, repo_root
from engine.loader.yamlread import Document, parse
from engine.model import BudgetTree, Config, TreeError

__all__ = ["load_config", "load_source", "default_root", "repo_root", "policy_places"]


def load_config(root: str | Path | None = None, rev: str | None = None,
                overrides: Mapping[str, Any] | None = None) -> Config:
    """Load and validate the configuration at ``root`` (or its git revision ``rev``).

    ``root`` defaults to the current directory or its nearest parent that holds ``budgets/``
    and ``policies/`` (:func:`~engine.loader.sources.default_root`), else to the repository
    this package lives in (the embedded default). With ``rev`` (a
    branch, tag, sha or ``HEAD~3``) the files are read from that commit of the repository
    containing ``root``, without touching its work tree; bare repositories work too.
    """
    return load_source(open_source(root, rev), overrides)


def _read_dir(source: Source, directory: str, kinds: tuple[str, ...], problems: list[Problem],
              overrides: Mapping[str, Any] | None = None) -> tuple[list[Document], list[str]]:
    """Parse and schema-check every YAML file of ``directory``; return the valid documents."""
    if not source.has_dir(directory):
        problems.append(Problem(directory, 0, 0, f"no {directory}/ directory in {source.origin}",
                                "give the directory (or repository) that holds budgets/ and policies/", "missing"))
        return [], []
    files = source.list_yaml(directory)
    docs: list[Document] = []
    for file in list(files):
        raw = source.read(file)
        if raw is None:  # (a link that leads nowhere, a directory, an unreadable file)
            if directory == "budgets" and file != _budgets.ROOT_FILE:
                files.remove(file)  # (a file: reference to it says what it is; else no budget file)
                continue
            what = source.describe(file) or "not a file"
            problems.append(Problem(file, 0, 0, f"not a readable YAML file: {what}",
                                    "make it a YAML file, or remove it", "unreadable"))
            continue
        doc, found = parse(file, raw)
        if doc is not None and overrides and isinstance(doc.data, dict) \
                and doc.data.get("kind") == "SchedulingPolicy":
            _override(doc.data, overrides)
        if doc is not None:  # (with duplicate keys: checked too, so every problem shows at once)
            found = found + validate(doc, kinds)
        problems.extend(found)
        if doc is not None and not found:
            docs.append(doc)
    return docs, files


def load_source(source: Source, overrides: Mapping[str, Any] | None = None) -> Config:
    """Load and validate the configuration read from ``source`` (with ``overrides``: module
    docstring)."""
    overrides = overrides or {}
    knobs = {k: v for k, v in overrides.items() if _is_knob(k)}  # set in the policy document
    problems: list[Problem] = [_unknown_knob(k) for k in overrides if k not in knobs]
    budget_docs, budget_files = _read_dir(source, "budgets", ("Budget",), problems)
    policy_docs, policy_files = _read_dir(source, "policies", ("Clusters", "SchedulingPolicy"),
                                          problems, knobs)
    nodes, files, found = _budgets.assemble(budget_docs, set(budget_files), source.describe)
    problems.extend(found)
    if source.has_dir("budgets") and not budget_files:
        problems.append(Problem("budgets", 0, 0, "no budget files found under budgets/",
                                f"write the root of the tree in {_budgets.ROOT_FILE}", "missing"))
    clusters = [d for d in policy_docs if d.data["kind"] == "Clusters"]
    schedule = [d for d in policy_docs if d.data["kind"] == "SchedulingPolicy"]
    if knobs and not schedule and not problems:  # nothing to set them in
        problems.append(Problem("--set", 0, 0, "no scheduling policy to set knobs in",
                                "write policies/scheduling.yaml (kind SchedulingPolicy)", "missing"))
    bad = len(policy_files) - len(policy_docs) if source.has_dir("policies") else 1
    policy, found = _policies.assemble(clusters, schedule, bad)
    problems.extend(found)
    if problems or policy is None:
        raise UserError(problems)
    try:
        tree = BudgetTree.build(nodes)
    except TreeError as err:  # pragma: no cover - the semantic checks above catch these first
        raise UserError([Problem("budgets", 0, 0, str(err), "", "tree")]) from None
    return Config(tree=tree, policy=policy, origin=source.origin, revision=source.revision,
                  files=MappingProxyType(dict(sorted(files.items()))),
                  overrides=tuple(f"{k}={json.dumps(v)}" for k, v in knobs.items()))


def policy_places(root: str | Path | None, rev: str | None,
                  keys: list[str]) -> dict[str, tuple[Any, str, int]]:
    """The values the scheduling policy file at ``root`` (``rev``) writes for the dotted
    ``keys`` (``placement.loans``), as parsed, each with where: (value, file, line); a key the
    file leaves out (its default applies) is not in the result. For showing which of several
    values is the file's: the file is assumed valid (:func:`load_config` checks it)."""
    source = open_source(root, rev)
    found: dict[str, tuple[Any, str, int]] = {}
    for file in source.list_yaml("policies") if source.has_dir("policies") else []:
        doc, refused = parse(file, source.read(file) or b"")
        if doc is None or refused or not isinstance(doc.data, dict) or doc.data.get("kind") != "SchedulingPolicy":
            continue
        for key in keys:
            node: Any = doc.data
            for part in key.split("."):
                node = node.get(part) if isinstance(node, dict) else None
            if node is not None:
                found[key] = (node, file, doc.loc(tuple(key.split(".")))[0])
    return found


def _is_knob(key: str) -> bool:
    """Is the dotted ``key`` a leaf of the scheduling policy's schema (``placement.loans``)?"""
    node: Any = validator_for("SchedulingPolicy").schema
    for part in key.split("."):
        props = node.get("properties") if isinstance(node, dict) else None
        entry = node.get("additionalProperties") if isinstance(node, dict) else None
        if props and part in props and part not in ("apiVersion", "kind"):
            node = props[part]
        elif not props and isinstance(entry, dict):  # an entry of a map (billing.weights.b200)
            node = entry
        else:
            return False
    return node.get("type") != "object"


def _unknown_knob(key: str) -> Problem:
    return Problem("--set", 0, 0, f"{key!r} is not a knob of the scheduling policy",
                   "name a setting of policies/scheduling.yaml by its path, e.g. placement.loans "
                   "or fairShare.lookback", "unknown-knob")


def _override(data: dict, knobs: Mapping[str, Any]) -> None:
    """Set each dotted knob (checked by :func:`_is_knob`) in the parsed policy ``data``."""
    for key, value in knobs.items():
        *path, last = key.split(".")
        node = data
        for part in path:
            if not isinstance(node.get(part), dict):
                node[part] = {}
            node = node[part]
        node[last] = value


