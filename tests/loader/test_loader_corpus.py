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


def test_a_missing_reference_is_not_said_to_mean_its_own_file_or_one_already_referenced(base_copy):
    """``alpha.yaml`` references ``alpha2.yaml``, which does not exist: the closest file name is
    alpha.yaml itself (and root.yaml, already the root), and referencing either would make a
    cycle; the hint said "did you mean budgets/alpha.yaml?". It now says to create the file."""
    alpha = base_copy / "budgets" / "alpha.yaml"
    text = alpha.read_text()
    alpha.write_text(text.replace("      share: 30\n      principals:\n        - group: a2-people\n",
                                  "      share: 30\n      file: alpha2.yaml\n"))
    with pytest.raises(UserError) as err:
        load_config(base_copy)
    [problem] = err.value.problems
    assert problem.message == "referenced file budgets/alpha2.yaml does not exist"
    assert problem.hint == "create budgets/alpha2.yaml with the subtree 'a2'"


def _hints_for_beta_referencing(base_copy, ref: str) -> list[str]:
    """root.yaml's beta made to reference ``ref`` (a file that does not exist): the hints of
    the missing-reference problems."""
    root = base_copy / "budgets" / "root.yaml"
    text = root.read_text()
    start = text.index("    - name: beta\n")
    root.write_text(text[:start] + f"    - name: beta\n      share: 40\n      file: {ref}\n")
    with pytest.raises(UserError) as err:
        load_config(base_copy)
    return [p.hint for p in err.value.problems if p.code == "missing"]


def test_a_missing_reference_still_suggests_an_unreferenced_file(base_copy):
    (base_copy / "budgets" / "beta.yaml").write_text(
        'apiVersion: allot.dev/v1\nkind: Budget\nbudget:\n  name: beta\n  owners: ["@b"]\n'
        '  children:\n    - name: b1\n      share: 100\n      principals:\n        - namespace: b1\n')
    assert _hints_for_beta_referencing(base_copy, "betta.yaml") == ["did you mean budgets/beta.yaml?"]


def test_a_missing_reference_is_not_said_to_mean_a_file_another_node_references(base_copy):
    """root.yaml's beta references ``alpha1.yaml``, which does not exist: alpha.yaml is the
    closest name but alpha's subtree already, so it is no suggestion."""
    assert _hints_for_beta_referencing(base_copy, "alpha1.yaml") == [
        "create budgets/alpha1.yaml with the subtree 'beta'"]


def test_a_missing_reference_in_a_file_nothing_references_is_not_said_to_mean_that_file(base_copy):
    """gamma.yaml, referenced by no one, references ``gama.yaml``: its closest name is gamma.yaml
    itself, which it cannot mean (a cycle)."""
    (base_copy / "budgets" / "gamma.yaml").write_text(
        'apiVersion: allot.dev/v1\nkind: Budget\nbudget:\n  name: gamma\n  owners: ["@g"]\n'
        '  children:\n    - name: g1\n      share: 100\n      file: gama.yaml\n')
    with pytest.raises(UserError) as err:
        load_config(base_copy)
    missing = [p for p in err.value.problems if p.code == "missing"]
    assert [p.hint for p in missing] == ["create budgets/gama.yaml with the subtree 'g1'"]


def test_a_file_that_breaks_its_schema_is_left_out_of_its_own_rules_too_as_the_readme_says(base_copy):
    """A typo'd field in alpha.yaml hides that alpha's shares sum to 90 (its own rule, not one
    across files): the README said only the checks across files left such a file out."""
    from pathlib import Path

    alpha = base_copy / "budgets" / "alpha.yaml"
    alpha.write_text(alpha.read_text().replace("share: 30", "share: 20\n      descripton: typo"))
    with pytest.raises(UserError) as err:
        load_config(base_copy)
    assert [p.code for p in err.value.problems] == ["schema"]  # (the 90% is not reported yet)
    readme = (Path(__file__).resolve().parents[2] / "README.md").read_text()
    said = " ".join(readme[readme.index("### `allot validate`"):readme.index("### `allot tree`")].split())
    assert "left out of the later checks, those of its own content" in said
