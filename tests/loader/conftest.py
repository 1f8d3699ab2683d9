"""Fixtures for the loader tests: the small baseline config and the malformed-input corpus.

A corpus case is a directory ``corpus/<case>/`` with ``files/`` (files laid over the baseline
``base/``, same relative paths) and ``case.yaml``: ``description``, optional ``remove`` (paths
deleted from the baseline first) and ``problems``, the exact expected list of
``{at: file:line:column, message: ...}`` in the order they are reported.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
import yaml

HERE = Path(__file__).resolve().parent
BASE = HERE / "base"
CORPUS = HERE / "corpus"


def corpus_cases() -> list[str]:
    return sorted(p.name for p in CORPUS.iterdir() if (p / "case.yaml").is_file())


def read_case(name: str) -> dict:
    return yaml.safe_load((CORPUS / name / "case.yaml").read_text(encoding="utf-8"))


def materialize(name: str, target: Path) -> Path:
    """Build the case's configuration directory under ``target`` and return it."""
    shutil.copytree(BASE, target)
    case = read_case(name)
    for rel in case.get("remove", []):
        path = target / rel
        if path.is_dir():
            shutil.rmtree(path)
        elif path.exists():
            path.unlink()
    files = CORPUS / name / "files"
    if files.is_dir():
        for src in files.rglob("*"):
            if src.is_file():
                dest = target / src.relative_to(files)
                dest.parent.mkdir(parents=True, exist_ok=True)
                shutil.copyfile(src, dest)
    return target


@pytest.fixture
def base_copy(tmp_path: Path) -> Path:
    """A writable copy of the valid baseline configuration."""
    return materialize_base(tmp_path / "config")


def materialize_base(target: Path) -> Path:
    shutil.copytree(BASE, target)
    return target
