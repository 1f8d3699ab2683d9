"""The decision core is pure: no Kubernetes, git, clock, filesystem or network import.

Checked on the source (AST) of every module in ``engine/core``, including indirect imports
of other ``engine`` modules that the core pulls in (they must be pure too).
"""

from __future__ import annotations

import ast
from pathlib import Path

import engine

FORBIDDEN = {"kubernetes", "pygit2", "git", "time", "datetime", "os", "pathlib", "io", "socket",
             "shutil", "subprocess", "tempfile", "glob", "urllib", "http", "requests", "random"}
ROOT = Path(engine.__file__).parent


def _imports(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(), filename=str(path))
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module)
        elif isinstance(node, ast.Call) and getattr(node.func, "id", "") == "__import__":
            names.add("<dynamic __import__>")
    return names


def _module_file(name: str) -> Path | None:
    rel = Path(*name.split(".")[1:])
    for candidate in (ROOT / rel.with_suffix(".py"), ROOT / rel / "__init__.py"):
        if candidate.exists():
            return candidate
    return None


def test_core_imports_nothing_impure():
    todo = sorted((ROOT / "core").glob("*.py"))
    assert len(todo) >= 8
    seen: set[Path] = set()
    problems = []
    while todo:
        path = todo.pop()
        if path in seen:
            continue
        seen.add(path)
        for name in _imports(path):
            top = name.split(".")[0]
            if top in FORBIDDEN or name.startswith("<"):
                problems.append(f"{path.relative_to(ROOT)} imports {name}")
            elif top == "engine" and (target := _module_file(name)) is not None:
                todo.append(target)
    assert not problems, problems


def test_the_checker_catches_a_forbidden_import(tmp_path):
    bad = tmp_path / "bad.py"
    bad.write_text("import os\nfrom kubernetes import client\nimport time as clock\n")
    assert {"os", "kubernetes", "time"} <= _imports(bad)
