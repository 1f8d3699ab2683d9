"""``allot validate [PATH] [--rev REV] [--format text|json]``: check budgets and policies.

Loads the configuration exactly as every other command does (:func:`engine.loader.load_config`)
and prints a one-line summary; on problems the CLI prints every one of them as
``file:line:column: message; hint`` (or JSON) and exits 1.
"""

from __future__ import annotations

import argparse
import json

from engine.loader import load_config


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "validate",
        help="check budgets/ and policies/ (all problems at once)",
        description="Validate budgets/ and policies/: YAML, schema and semantic checks. "
                    "Exit 0 when valid, 1 with every problem listed otherwise.",
    )
    add_source_arguments(parser)
    parser.set_defaults(func=run)


def add_source_arguments(parser: argparse.ArgumentParser) -> None:
    """PATH, --rev and --format, shared by the commands that load a configuration."""
    parser.add_argument("path", nargs="?", default=None, metavar="PATH",
                        help="directory (or git repository with --rev) holding budgets/ and policies/; "
                             "default: the current directory if it has them, else the embedded default")
    parser.add_argument("--rev", default=None, metavar="REV",
                        help="read the files from this git revision (branch, tag, sha, HEAD~3) "
                             "without touching the work tree")
    parser.add_argument("--format", choices=("text", "json"), default="text",
                        help="output format (json for bots; problems then go to stdout as JSON)")


def summary(config) -> dict:
    """The facts printed on success."""
    tree = config.tree
    return {
        "ok": True,
        "origin": config.origin,
        "revision": config.revision,
        "nodes": len(tree.nodes),
        "leaves": len(tree.leaves()),
        "files": len(set(config.files.values())),
        "clusters": [{"name": c.name, "gpu_type": c.gpu_type, "gpus": c.gpus} for c in config.policy.clusters],
    }


def run(args: argparse.Namespace) -> int:
    config = load_config(args.path, args.rev)
    facts = summary(config)
    if args.format == "json":
        print(json.dumps(facts, indent=2))
        return 0
    clusters = ", ".join(f"{c['name']} {c['gpus']} GPUs" for c in facts["clusters"])
    where = f"revision {facts['revision']}" if facts["revision"] else facts["origin"]
    print(f"OK: {facts['nodes']} nodes, {facts['leaves']} leaves in {facts['files']} budget files; "
          f"{len(facts['clusters'])} clusters ({clusters}); {where}")
    return 0
