"""``explain`` against the core's scenario files: every statement's numbers are the numbers the
decision used (status fields, the leaf's rank and metric, each level's S, U and S/U, the budgets
ahead and the level where they win, the victims), and the text quotes them."""

from __future__ import annotations

import math
import re
from dataclasses import replace
from pathlib import Path

import pytest
import yaml

from engine.core.decide import decide
from engine.core.types import Preempt, Snapshot
from engine.views.explain import explain
from engine.views.state import ViewState, fmt_num, fmt_pair
from tests.core.harness import build_scenario

SCENARIOS = sorted((Path(__file__).resolve().parents[1] / "core" / "scenarios").glob("*.yaml"))


def _state(path: Path) -> ViewState:
    snapshot, config, now = build_scenario(yaml.safe_load(path.read_text()))
    return ViewState("scenario", now, config, snapshot)


def _same(a, b) -> bool:
    if isinstance(a, float) and isinstance(b, float) and math.isinf(a) and math.isinf(b):
        return True
    return a == b


def test_there_are_scenarios_to_check():
    assert len(SCENARIOS) >= 25


@pytest.mark.parametrize("path", SCENARIOS, ids=[p.stem for p in SCENARIOS])
def test_every_statement_matches_the_decision(path: Path):
    state = _state(path)
    d = decide(state.snapshot, state.config, state.now)
    assert d.actions == state.decision.actions
    for wid, st in d.statuses.items():
        exp = explain(state, wid)
        assert exp.state == st.state
        by_topic: dict[str, list] = {}
        for s in exp.statements:
            by_topic.setdefault(s.topic, []).append(s)
        status = by_topic["status"][0]
        for key in ("state", "queue_position", "rank", "metric", "protected_until", "preemptor"):
            assert _same(status.numbers[key], getattr(st, key)), (wid, key)
        assert st.reason in status.text
        cause = d.waiting.get(wid)  # why pending work still waits, in one word; else none
        assert status.numbers["cause"] == cause and (cause is None) == (st.state != "pending")
        assert status.text.startswith(f"Pending ({cause}): " if cause else f"{st.state.capitalize()}: ")
        if st.leaf is None or st.state == "rejected":
            assert "rank" not in by_topic or st.leaf is not None
            continue
        lr = d.ranks[st.leaf]
        rank = by_topic["rank"][0]
        assert rank.numbers["rank"] == lr.rank == st.rank
        assert rank.numbers["metric"] == lr.metric and rank.numbers["share"] == lr.share
        assert rank.numbers["usage_gpu_s"] == lr.usage
        assert f"ranks {lr.rank} of {len(d.ranks)}" in rank.text
        assert f"metric {fmt_num(lr.metric)}" in rank.text
        # a workload larger than its budget's share of the cluster is told so, and only then
        item = state.workloads[wid]
        gpus = getattr(item, "workload", item).contract.gpus
        capacity = sum(n.gpus for n in state.snapshot.nodes)
        sizes = by_topic.get("size", [])
        assert len(sizes) == (gpus > lr.share * capacity), (wid, gpus, lr.share, capacity)
        for s in sizes:
            assert s.numbers == {"gpus": gpus, "share_gpus": lr.share * capacity, "capacity": capacity}
            assert s.text.startswith(f"Its {gpus} GPUs are more than budget {st.leaf}'s share of the "
                                     f"cluster ({lr.share:.3f} of {capacity} GPUs = ")
        levels = by_topic["level"]
        assert len(levels) == len(lr.levels)
        for s, f in zip(levels, lr.levels):
            assert (s.numbers["node"], s.numbers["share"], s.numbers["usage"]) == (f.node, f.share, f.usage)
            assert _same(s.numbers["fairshare"], f.fairshare)
            assert f"S={f.share:.3f}" in s.text and f"U={f.usage:.3f}" in s.text
            assert f"S/U={fmt_num(f.fairshare)}" in s.text
        for s in by_topic.get("ahead", []):
            if "budget" not in s.numbers:
                continue
            other = d.ranks[s.numbers["budget"]]
            assert other.rank == s.numbers["rank"] < lr.rank  # only better-ranked budgets are ahead
            theirs = next(f for f in other.levels if f.node == s.numbers["their_node"])
            ours = next(f for f in lr.levels if f.node == s.numbers["our_node"])
            assert _same(theirs.fairshare, s.numbers["their_fairshare"])
            assert _same(ours.fairshare, s.numbers["our_fairshare"])
            assert (theirs.fairshare, ) >= (ours.fairshare, )  # the level where they win
            # and a reader sees it: the numbers as printed differ, or the text says it is a tie
            shown = re.search(r"S/U=(\S+) \(S=.*\) against (\S+) for", s.text)
            assert shown and (shown[1] != shown[2]) == (theirs.fairshare != ours.fairshare), s.text
        for s in by_topic.get("preemption", []):
            if "victim" in s.numbers:
                assert any(isinstance(a, Preempt) and a.workload_id == s.numbers["victim"]
                           and a.preemptor == wid for a in d.actions)


def test_the_worked_fair_tree_example_reads_with_its_hand_computed_numbers():
    state = _state(next(p for p in SCENARIOS if p.stem.startswith("02_")))
    text = explain(state, "bgen-1").text()
    assert "Budget b-gen ranks 4 of 5" in text
    assert "Level 1: bio among the 3 children of root: share S=0.300, usage U=0.300" in text
    assert "Level 2: b-gen among the 2 children of bio: share S=0.200, usage U=0.667" in text
    assert "S/U=0.30" in text
    chem = explain(state, "chem-1").text()
    # chem waits behind b-gen although b-gen's metric (3.33) is worse: Fair Tree decides at the
    # top level first, where bio (S/U 1.00) is served before chem (S/U 1.00) on its larger share
    assert "1 of budget b-gen (rank 4, metric 3.33): under root, bio has fair share S/U=1.00" in chem


def test_a_preempted_workload_names_its_preemptor_and_the_preemptor_its_victim():
    state = _state(next(p for p in SCENARIOS if p.stem.startswith("19_")))
    victim = explain(state, "b-run")
    assert victim.state == "preempted"
    assert any(s.topic == "preemption" and s.numbers.get("preemptor") == "a-job" for s in victim.statements)
    winner = explain(state, "a-job")
    assert any(s.topic == "preemption" and s.numbers.get("victim") == "b-run" for s in winner.statements)


def test_what_you_can_change_is_checked_by_deciding_again():
    """A job too big for the free GPUs is told the smaller shape that would start, and that shape
    really is admitted by decide()."""
    state = _state(next(p for p in SCENARIOS if p.stem.startswith("16_")))
    for w in state.snapshot.pending:
        if state.decision.statuses[w.id].state != "pending":
            continue
        for s in explain(state, w.id).statements:
            if s.topic == "change" and s.numbers.get("change") == "gpus" and s.numbers["admitted"]:
                gpus = s.numbers["gpus"]
                c = w.contract
                pods, gpp = (gpus // c.gpus_per_pod, c.gpus_per_pod) if gpus >= c.gpus_per_pod else (1, gpus)
                changed = replace(w, contract=replace(c, pods=pods, gpus_per_pod=gpp))
                snap = Snapshot(state.snapshot.nodes, state.snapshot.running,
                                tuple(changed if x.id == w.id else x for x in state.snapshot.pending),
                                state.snapshot.usage)
                assert decide(snap, state.config, state.now).statuses[w.id].state == "admitted"


def test_two_numbers_read_side_by_side_differ_when_they_differ():
    assert fmt_pair(1.0014755, 1.0007775) == ("1.0015", "1.0008")  # not 1.00 against 1.00
    assert fmt_pair(0.5, 0.25) == ("0.50", "0.25")
    assert fmt_pair(1.0, 1.0) == ("1.00", "1.00")  # a tie stays short
    assert fmt_pair(float("inf"), 2.0) == ("inf", "2.00")
    assert fmt_pair(1.0, 1.0 + 1e-12) == ("1.000000", "1.000000")  # at most 6 decimals


def test_a_level_won_by_a_hair_reads_with_the_digits_that_decide_it():
    """The worked Fair Tree example with chem's usage a hair lower: chem now wins the top
    level, by S/U 1.0018 against 0.9998: it reads 1.002 against 1.000 (at two decimals both
    would read 1.00, and the text would not say why chem goes first)."""
    data = yaml.safe_load(next(p for p in SCENARIOS if p.stem.startswith("02_")).read_text())
    data["usage"]["chem"] = 99.8
    snapshot, config, now = build_scenario(data)
    state = ViewState("scenario", now, config, snapshot)
    assert state.decision.statuses["bgen-1"].state == "pending"
    text = explain(state, "bgen-1").text()
    assert "under root, chem has fair share S/U=1.002 (S=0.100, U=0.100) against 1.000 for bio" in text


def test_the_room_statement_counts_its_own_budget_apart_and_shapes_tried_are_named():
    """A job of budget a waits behind a's own running work on a full node: those GPUs are its
    budget's, not higher-ranked work; a 6-pod gang tries 3, 1, then halves GPUs per pod: the
    smallest shape tried is named."""
    data = {"budgets": {"a": 50, "b": 50}, "nodes": [{"name": f"n{i}"} for i in range(1, 7)],
            "now": 100, "usage": {"a": 0, "b": 10 ** 7},
            "running": [{"id": "own", "budget": "a", "min": "8h", "gpus": 8, "at": {"n1": 8}, "started": 0}]
            + [{"id": f"theirs{i}", "budget": "b", "min": "8h", "gpus": 8, "at": {f"n{i}": 8},
                "started": 0} for i in range(2, 7)],
            "pending": [{"id": "gang", "budget": "a", "min": "1h", "gpus": 8, "pods": 6, "submitted": 50}]}
    snapshot, config, now = build_scenario(data)
    got = explain(ViewState("scenario", now, config, snapshot), "gang")
    room = next(s for s in got.statements if s.topic == "room")
    assert room.numbers["own_budget"] == 8 and room.numbers["higher_ranked"] == 0
    assert "8 run its own budget's work" in room.text
    change = next(s for s in got.statements if s.topic == "change" and s.numbers.get("change") == "gpus")
    assert "no shape down to 2 GPU(s) would start now (tried halving 4 times)" in change.text


def test_times_in_an_earlier_preemption_s_reason_are_said_from_now():
    from engine.views.explain import _restated

    reason = ("budget B rank 2/2 ranks below A (rank 1) and its min runtime ended t=4577 "
              "(3h29m23s ago); estimated progress lost 0.5 GPU-h")
    assert _restated(reason, 43200.0) == reason.replace("t=4577 (3h29m23s ago)", "t=4577 (10h43m43s ago)")
    assert _restated("protected until t=50000 (in 1h)", 43200.0) == "protected until t=50000 (in 1h53m20s)"


def test_the_size_statement_counts_every_node_and_a_gang_s_gpus_with_its_numbers():
    """The "size" statement compares a workload's GPUs (all pods) with its budget's effective
    share of every GPU of the snapshot, unhealthy nodes included (the oracle of
    test_every_statement_matches_the_decision). Budget a: share 0.34 of 4 nodes x 8 = 32 GPUs
    = 10.88 GPUs (n4 is unhealthy; the 24 healthy GPUs would give 8.16). A gang of 2 x 6 = 12
    GPUs is above it and told so with the numbers, 10.88 shown as 10.9; a gang of 2 x 5 = 10
    GPUs is not (it would be on the healthy GPUs alone)."""
    data = {"budgets": {"a": 34, "b": 66},
            "nodes": [{"name": f"n{i}"} for i in range(1, 4)] + [{"name": "n4", "healthy": False}],
            "now": 100, "usage": {"a": 0, "b": 10 ** 6},
            "running": [{"id": "theirs", "budget": "b", "min": "8h", "gpus": 8, "pods": 3,
                         "at": {"n1": 8, "n2": 8, "n3": 8}, "started": 0}],
            "pending": [{"id": "big", "budget": "a", "min": "1h", "gpus": 6, "pods": 2, "submitted": 50},
                        {"id": "fits", "budget": "a", "min": "1h", "gpus": 5, "pods": 2, "submitted": 60}]}
    snapshot, config, now = build_scenario(data)
    state = ViewState("scenario", now, config, snapshot)
    big = [s for s in explain(state, "big").statements if s.topic == "size"]
    assert [s.text for s in big] == [
        "Its 12 GPUs are more than budget a's share of the cluster (0.340 of 32 GPUs = 10.9): while "
        "it runs the budget is charged faster than its share accrues, so its rank falls, and it can "
        "start only where 12 GPUs come free at once."]
    assert big[0].numbers == {"gpus": 12, "share_gpus": pytest.approx(10.88), "capacity": 32}
    assert not [s for s in explain(state, "fits").statements if s.topic == "size"]


def test_no_size_statement_without_gpus_in_the_snapshot():
    """With no node (capacity 0) there is no share of the cluster to compare with: no workload
    is said to be above it (0.34 x 0 GPUs would call every workload too large)."""
    data = {"budgets": {"a": 34, "b": 66}, "nodes": [], "now": 100,
            "pending": [{"id": "job", "budget": "a", "min": "1h", "gpus": 6, "submitted": 50}]}
    snapshot, config, now = build_scenario(data)
    got = explain(ViewState("scenario", now, config, snapshot), "job")
    assert "rank" in [s.topic for s in got.statements]  # (it is charged to a ranked budget)
    assert "size" not in [s.topic for s in got.statements]
