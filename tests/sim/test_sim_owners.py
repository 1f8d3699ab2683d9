"""Trace owners to budget leaves (:mod:`engine.sim.owners`): a mapping file, checked whole at
its lines; a derived mapping and derived trees (equal or demand-proportional shares); owners
whose names clash get distinct leaves."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from engine.errors import UserError
from engine.sim.owners import derive_mapping, derive_tree, leaf_names, load_mapping
from engine.sim.prepare import prepare_trace
from engine.sim.trace import Task, Trace
from tests.sim.conftest import tiny_config


def test_mapping_file_and_derived_mapping(tmp_path):
    cfg = tiny_config(shares=(75.0, 25.0))
    trace = Trace.of([Task("1", 0, 1, 1, 300.0, "big"), Task("2", 0, 1, 1, 100.0, "small"),
                      Task("3", 0, 1, 1, 10.0, "tiny")])
    assert derive_mapping(trace, cfg.tree) == {"big": "a", "small": "b", "tiny": "a"}
    path = tmp_path / "m.yaml"
    path.write_text("owners:\n  big: b\ndefault: unfunded\n")
    prepared = prepare_trace(trace, cfg, mapping=load_mapping(path))
    assert [(t.owner, t.leaf) for t in prepared.tasks] == [("big", "b"), ("small", None), ("tiny", None)]
    with pytest.raises(UserError, match="not in the mapping"):
        prepare_trace(trace, cfg, mapping={"big": "a"})
    with pytest.raises(UserError, match="not a leaf"):
        prepare_trace(trace, cfg, mapping={"big": "zz", "small": "a", "tiny": "a"})


def test_derived_trees():
    trace = Trace.of([Task("1", 0, 1, 1, 300.0, "Big Team"), Task("2", 0, 1, 1, 100.0, "42")])
    equal = derive_tree(trace, "equal")
    assert equal.leaves() == ("big-team", "t-42")
    assert equal.effective_share("big-team") == pytest.approx(0.5)
    assert derive_tree(trace, "demand").effective_share("big-team") == pytest.approx(0.75)


def test_owners_whose_names_clash_get_distinct_leaves():
    # "Team A" and "team-a" both read team-a; an owner named like the derived root, too
    trace = Trace.of([Task(str(i), 0, 1, 1, 100.0, o) for i, o in enumerate(["Team A", "team-a", "trace"])])
    names = leaf_names(trace.owners())
    assert names == {"Team A": "team-a", "team-a": "team-a-2", "trace": "trace-2"}
    tree = derive_tree(trace, "equal")
    assert sorted(tree.leaves()) == sorted(names.values())
    prepared = prepare_trace(trace, replace(tiny_config(), tree=tree), mapping=names)
    assert sorted(t.leaf for t in prepared.tasks) == ["team-a", "team-a-2", "trace-2"]


def test_a_mapping_file_is_checked_whole_at_its_lines(tmp_path):
    """Every problem of a mapping at once, at its line, used by the trace or not: unknown
    fields, an owner given twice, values that are not names, names that are not leaves."""
    m = tmp_path / "m.yaml"
    m.write_text("owners:\n  a: x\n  b: [y]\n  c: unfunded\n  a: z\ndefault: nope\nextra: 1\n")
    with pytest.raises(UserError) as err:
        load_mapping(m, ["x", "z"])
    assert sorted((p.line, p.message) for p in err.value.problems) == [  # (a duplicate hides nothing)
        (3, "owners.b must be a leaf's name or unfunded, got ['y']"),
        (5, "duplicate key 'a' (first written on line 2)"), (6, "'nope' is not a leaf of the budget tree"),
        (7, "unknown field 'extra' in the mapping")]
    m.write_text("owners:\n  a: x\n  b: [y]\n  c: unfunded\ndefault: nope\nextra: 1\n")
    with pytest.raises(UserError) as err:
        load_mapping(m, ["x", "z"])
    assert sorted((p.line, p.message) for p in err.value.problems) == [
        (3, "owners.b must be a leaf's name or unfunded, got ['y']"), (5, "'nope' is not a leaf of the budget tree"),
        (6, "unknown field 'extra' in the mapping")]
    m.write_text("trace: mine\nowners: {a: x, c: unfunded}\ndefault: z\n")
    assert load_mapping(m, ["x", "z"]) == {"a": "x", "c": None, "*": "z"}
    from engine.loader import load_config  # the bundled mappings, against the repository's tree
    leaves = load_config().tree.leaves()
    for name in ("philly", "helios"):
        assert load_mapping(Path(__file__).parents[2] / "traces" / name / "mapping.yaml", leaves)


def test_a_mapping_file_that_cannot_be_read_says_where_and_why(tmp_path):
    with pytest.raises(UserError) as err:
        load_mapping(tmp_path / "none.yaml")
    assert str(err.value.problems[0]) == (f"{tmp_path / 'none.yaml'}: cannot read the mapping: No such file "
                                          f"or directory; give the path of a mapping file (--mapping)")
    bad = tmp_path / "bad.yaml"
    bad.write_text("owners: [1,2")
    with pytest.raises(UserError) as err:
        load_mapping(bad)
    (problem,) = err.value.problems
    assert (problem.line, problem.column) == (1, 13)  # where YAML gave up, not 0:0
    assert problem.message.startswith("invalid YAML: expected ',' or ']', but got '<stream end>'")
