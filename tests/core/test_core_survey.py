"""A pass's one walk over running work (:func:`engine.core.running_facts.survey`)."""

from __future__ import annotations

from engine.core.running_facts import RunningFacts, survey
from engine.core.types import Contract, LeafRank, Placement, Running, Workload
from engine.model import BudgetNode, BudgetTree

TREE = BudgetTree.build([BudgetNode("r", None, 100), BudgetNode("A", "r", 50), BudgetNode("B", "r", 50)])
RANKS = {"A": LeafRank("A", 1, 0.0, 0.5, 0.0), "B": LeafRank("B", 2, 0.0, 0.5, 0.0)}
UNRANKED = 3


def running(wid: str, budget: str | None, placement: dict[str, int], protected_until: float) -> Running:
    c = Contract(budget, 3600.0 if budget else 0.0, gpus_per_pod=sum(placement.values()))
    return Running(Workload(wid, c, 0.0), Placement(tuple(sorted(placement.items()))), 0.0,
                   protected_until)


def test_survey_counts_running_work_its_charges_and_its_victims():
    now = 1000.0
    work = [running("a-old", "A", {"n1": 4}, 500.0),       # past its protection: a victim
            running("a-new", "A", {"n1": 2, "n2": 2}, 2000.0),  # protected; n2 bills 2x
            running("free", None, {"n2": 1}, 0.0),          # unallocated: a victim, no charge
            running("b-edge", "B", {"n3": 8}, now)]         # protection ends now: a victim
    seen = survey(RunningFacts(), work, TREE, {"n2": 2.0}, set(), RANKS, UNRANKED, now)
    assert seen.used == {"n1": 6, "n2": 3, "n3": 8}
    assert seen.held_gpus == 4 + 4 + 1 + 8
    assert [(r.workload.id, leaf) for r, leaf, _ in seen.held] == [
        ("a-old", "A"), ("a-new", "A"), ("free", None), ("b-edge", "B")]
    assert seen.charges == [("A", 4.0, -500.0), ("A", 2.0 + 2 * 2.0, 1000.0), ("B", 8.0, 0.0)]
    assert [(r.workload.id, leaf, rank) for r, leaf, rank in seen.prey] == [
        ("a-old", "A", 1), ("free", None, UNRANKED), ("b-edge", "B", 2)]
    assert seen.by_leaf == {"A": 4, None: 1, "B": 8}
    assert seen.at_rank == {1: 4, UNRANKED: 1, 2: 8}


def test_evicted_work_is_left_out_of_everything():
    now = 1000.0
    work = [running("gone", "A", {"n1": 4}, 500.0), running("kept", "B", {"n2": 2}, 500.0)]
    facts = RunningFacts()
    for _ in range(2):  # (computed, then read from the remembered facts)
        seen = survey(facts, work, TREE, {}, {"gone"}, RANKS, UNRANKED, now)
        assert seen.used == {"n2": 2} and seen.held_gpus == 2
        assert [r.workload.id for r, _, _ in seen.held] == ["kept"]
        assert seen.charges == [("B", 2.0, -500.0)]
        assert [r.workload.id for r, _, _ in seen.prey] == ["kept"]
        assert seen.by_leaf == {"B": 2} and seen.at_rank == {2: 2}
