"""Build real git repositories for the impact tests with pygit2, commits made in memory (no
work tree needed, so bare repositories work too)."""

from __future__ import annotations

from pathlib import Path
from typing import Mapping

import pygit2

ROOT = Path(__file__).resolve().parents[2]
SIG = pygit2.Signature("Allot Test", "test@allot.invalid", 1_700_000_000, 0)


def shipped_files() -> dict[str, bytes]:
    """The repository's own budgets/ and policies/ YAML files, by relative path."""
    out = {}
    for folder in ("budgets", "policies"):
        for path in sorted((ROOT / folder).rglob("*.y*ml")):
            out[path.relative_to(ROOT).as_posix()] = path.read_bytes()
    return out


def _tree(repo: pygit2.Repository, files: Mapping[str, bytes]) -> pygit2.Oid:
    here: dict[str, bytes] = {}
    sub: dict[str, dict[str, bytes]] = {}
    for path, data in files.items():
        head, _, rest = path.partition("/")
        if rest:
            sub.setdefault(head, {})[rest] = data
        else:
            here[head] = data
    builder = repo.TreeBuilder()
    for name, data in sorted(here.items()):
        builder.insert(name, repo.create_blob(data), pygit2.GIT_FILEMODE_BLOB)
    for name, content in sorted(sub.items()):
        builder.insert(name, _tree(repo, content), pygit2.GIT_FILEMODE_TREE)
    return builder.write()


def commit(repo: pygit2.Repository, files: Mapping[str, bytes], message: str,
           ref: str = "refs/heads/main") -> str:
    """Commit exactly ``files`` (the whole tree) on ``ref``; returns the commit sha."""
    try:
        parents = [repo.references[ref].target]
    except KeyError:
        parents = []
    oid = repo.create_commit(ref, SIG, SIG, message, _tree(repo, files), parents)
    return str(oid)


def replace_in(files: Mapping[str, bytes], path: str, old: str, new: str) -> dict[str, bytes]:
    text = files[path].decode("utf-8")
    assert text.count(old) == 1, f"{old!r} must occur once in {path}"
    return {**files, path: text.replace(old, new).encode("utf-8")}
