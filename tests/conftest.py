"""Every test keeps simulated view states in its own directory (``engine.views.statecache``):
none reads a state another test (or a user's earlier run) kept."""

from __future__ import annotations

import pytest


@pytest.fixture(autouse=True)
def _own_state_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("ALLOT_CACHE_DIR", str(tmp_path / "allot-cache"))
