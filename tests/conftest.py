"""Every test keeps simulated view states in its own directory (``engine.views.statecache``):
none reads a state another test (or a user's earlier run) kept.

The suite tests the sources as they are: a compiled core the user built (``allot build-core``,
:mod:`engine.accel`) is not loaded unless ``ALLOT_CORE`` is set otherwise (white-box tests
replace functions inside the core, which compiled calls do not see);
``tests/core/test_core_compiled.py`` builds its own and compares it with the interpreted one."""

from __future__ import annotations

import os

import pytest

os.environ.setdefault("ALLOT_CORE", "python")  # (read at ``import engine``, after this file)


@pytest.fixture(autouse=True)
def _own_state_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("ALLOT_CACHE_DIR", str(tmp_path / "allot-cache"))
