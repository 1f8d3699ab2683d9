"""Scheduling scenarios as data: every file in ``scenarios/`` is one specification of decide().

Each file states budgets, nodes, running and pending work, usage and ``now``, and what
decide() must conclude: the exact set of actions, statuses (state, queue position, preemptor,
words the reason must contain) and leaf ranks / metrics (ranks computed by hand in comments).
"""

from __future__ import annotations

import math
from pathlib import Path

import pytest
import yaml

from engine.core.decide import decide
from tests.core.harness import build_scenario, render

SCENARIOS = sorted((Path(__file__).parent / "scenarios").glob("*.yaml"))


def test_there_are_enough_scenarios():
    assert len(SCENARIOS) >= 25


@pytest.mark.parametrize("path", SCENARIOS, ids=[p.stem for p in SCENARIOS])
def test_scenario(path: Path):
    data = yaml.safe_load(path.read_text())
    snapshot, config, now = build_scenario(data)
    decision = decide(snapshot, config, now)
    expect = data["expect"]
    got = [render(a) for a in decision.actions]
    if "actions" in expect:
        want = list(expect["actions"] or [])
        if expect.get("ordered"):
            assert got == want
        else:
            assert sorted(got) == sorted(want), f"actions: {got}"
    every = {w.id for w in snapshot.pending} | {r.workload.id for r in snapshot.running}
    assert set(decision.statuses) == every
    assert set(decision.ranks) == set(config.tree.leaves())
    for wid, fields in (expect.get("statuses") or {}).items():
        status = decision.statuses[wid]
        for key, value in fields.items():
            if key == "reason_contains":
                for words in ([value] if isinstance(value, str) else value):
                    assert words in status.reason, f"{wid}: {words!r} not in {status.reason!r}"
            elif key == "reason_lacks":
                for words in ([value] if isinstance(value, str) else value):
                    assert words not in status.reason, f"{wid}: {words!r} in {status.reason!r}"
            elif isinstance(value, float):
                assert getattr(status, key) == pytest.approx(value, rel=1e-6), (wid, key)
            else:
                assert getattr(status, key) == value, (wid, key, status)
    for wid, cause in (expect.get("waiting") or {}).items():  # why it waits, in one word
        assert decision.waiting.get(wid) == cause, (wid, dict(decision.waiting))
    for leaf, rank in (expect.get("ranks") or {}).items():
        assert decision.ranks[leaf].rank == rank, (leaf, decision.ranks[leaf])
    for leaf, metric in (expect.get("metrics") or {}).items():
        got_metric = decision.ranks[leaf].metric
        if metric == "inf":
            assert math.isinf(got_metric)
        else:
            assert got_metric == pytest.approx(float(metric), rel=1e-6, abs=1e-9), leaf
    for leaf, levels in (expect.get("levels") or {}).items():
        got_levels = decision.ranks[leaf].levels
        assert [lv.node for lv in got_levels] == [lv[0] for lv in levels]
        for lv, (node, share, usage, fs) in zip(got_levels, levels):
            assert lv.share == pytest.approx(share, rel=1e-6)
            assert lv.usage == pytest.approx(usage, rel=1e-6)
            if fs == "inf":
                assert math.isinf(lv.fairshare)
            else:
                assert lv.fairshare == pytest.approx(fs, rel=1e-6)
