"""The malformed-input corpus: every case reports exactly the expected problems, at their places.

Each directory under ``corpus/`` overlays a few files on the valid baseline ``base/`` (see
``conftest.py``); ``case.yaml`` stores the exact ``file:line:column`` and message of every
problem the loader must report, all in one run. A user error never escapes as any exception
other than :class:`UserError`, and every problem says what to do (a hint).
"""

from __future__ import annotations

import json

import pytest

from engine.cli import main
from engine.errors import UserError
from engine.loader import load_config

from .conftest import corpus_cases, materialize, read_case


def test_corpus_is_large_enough():
    assert len(corpus_cases()) >= 30


@pytest.mark.parametrize("name", corpus_cases())
def test_corpus_case_reports_exact_problems(name, tmp_path):
    root = materialize(name, tmp_path / "config")
    expected = read_case(name)["problems"]
    with pytest.raises(UserError) as err:
        load_config(root)
    got = [{"at": f"{p.file}:{p.line}:{p.column}", "message": p.message.replace(str(root), "<root>")}
           for p in err.value.problems]
    assert got == expected
    assert all(p.hint for p in err.value.problems), "every problem says what to do"


def test_baseline_itself_is_valid(base_copy):
    config = load_config(base_copy)
    assert config.tree.root == "org"
    assert config.tree.effective_share("a1") == pytest.approx(0.42)


def test_several_errors_reach_the_cli_as_text_and_json(tmp_path, capsys):
    root = materialize("several-errors-at-once", tmp_path / "config")
    assert main(["validate", str(root)]) == 1
    captured = capsys.readouterr()
    lines = captured.err.strip().splitlines()
    assert lines[0] == "budgets/alpha.yaml:9:7: unknown field 'sharre' in budget.children[0]; did you mean 'share'?"
    assert lines[-1] == "4 problems found"
    assert "Traceback" not in captured.err and captured.out == ""

    assert main(["validate", str(root), "--format", "json"]) == 1
    report = json.loads(capsys.readouterr().out)
    assert report["ok"] is False
    assert [(p["file"], p["line"], p["column"]) for p in report["problems"]] == [
        ("budgets/alpha.yaml", 9, 7), ("budgets/root.yaml", 8, 3),
        ("policies/clusters.yaml", 9, 21), ("policies/scheduling.yaml", 7, 18)]
    assert all(p["hint"] for p in report["problems"])
