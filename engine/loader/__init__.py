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
"""

from __future__ import annotations

from pathlib import Path
from types import MappingProxyType

from engine.errors import Problem, UserError
from engine.loader import budgets as _budgets
from engine.loader import policies as _policies
from engine.loader.schema import validate
from engine.loader.sources import Source, default_root, open_source, repo_root
from engine.loader.yamlread import Document, parse
from engine.model import BudgetTree, Config, TreeError

__all__ = ["load_config", "load_source", "default_root", "repo_root"]


def load_config(root: str | Path | None = None, rev: str | None = None) -> Config:
    """Load and validate the configuration at ``root`` (or its git revision ``rev``).

    ``root`` defaults to the current directory when it holds ``budgets/`` and ``policies/``,
    else to the repository this package lives in (the embedded default). With ``rev`` (a
    branch, tag, sha or ``HEAD~3``) the files are read from that commit of the repository
    containing ``root``, without touching its work tree; bare repositories work too.
    """
    return load_source(open_source(root, rev))


def _read_dir(source: Source, directory: str, kinds: tuple[str, ...],
              problems: list[Problem]) -> tuple[list[Document], list[str]]:
    """Parse and schema-check every YAML file of ``directory``; return the valid documents."""
    if not source.has_dir(directory):
        problems.append(Problem(directory, 0, 0, f"no {directory}/ directory in {source.origin}",
                                "give the directory (or repository) that holds budgets/ and policies/", "missing"))
        return [], []
    files = source.list_yaml(directory)
    docs: list[Document] = []
    for file in files:
        raw = source.read(file)
        if raw is None:  # pragma: no cover - listed files exist
            continue
        doc, found = parse(file, raw)
        if doc is not None:
            found = validate(doc, kinds)
        problems.extend(found)
        if doc is not None and not found:
            docs.append(doc)
    return docs, files


def load_source(source: Source) -> Config:
    """Load and validate the configuration read from ``source``."""
    problems: list[Problem] = []
    budget_docs, budget_files = _read_dir(source, "budgets", ("Budget",), problems)
    policy_docs, policy_files = _read_dir(source, "policies", ("Clusters", "SchedulingPolicy"), problems)
    nodes, files, found = _budgets.assemble(budget_docs, set(budget_files))
    problems.extend(found)
    if source.has_dir("budgets") and not budget_files:
        problems.append(Problem("budgets", 0, 0, "no budget files found under budgets/",
                                f"write the root of the tree in {_budgets.ROOT_FILE}", "missing"))
    clusters = [d for d in policy_docs if d.data["kind"] == "Clusters"]
    schedule = [d for d in policy_docs if d.data["kind"] == "SchedulingPolicy"]
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
                  files=MappingProxyType(dict(sorted(files.items()))))


