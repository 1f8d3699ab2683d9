"""The package type-checks: ``mypy engine`` with the settings in pyproject.toml finds nothing.

The annotations are part of the documentation (frozen, typed models; the core never sees a raw
dict), so they are checked like the rest of it."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

api = pytest.importorskip("mypy.api", reason="mypy is in the test extras: pip install -e '.[test]'")

ROOT = Path(__file__).resolve().parents[1]


def test_the_engine_package_type_checks():
    cwd = os.getcwd()
    os.chdir(ROOT)  # pyproject.toml's [tool.mypy] and the .mypy_cache (git-ignored) live here
    try:
        out, err, status = api.run(["engine"])
    finally:
        os.chdir(cwd)
    assert status == 0, out + err
