"""Semantic rules that accept input (the corpus covers the refusals): tolerance, remainders,
defaults, file references, and the root resolution."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from engine.errors import UserError
from engine.loader import load_config

from .conftest import BASE


def _edit(path: Path, old: str, new: str) -> None:
    text = path.read_text()
    assert old in text
    path.write_text(text.replace(old, new, 1))


def test_shares_within_tolerance_are_accepted(base_copy):
    alpha = base_copy / "budgets" / "alpha.yaml"
    _edit(alpha, "share: 70", "share: 69.9999999")  # sum 99.9999999: within 1e-6 of 100
    _edit(alpha, "share: 30", "share: 30.0000000")
    assert load_config(base_copy).tree.nodes["a1"].share_pct == pytest.approx(69.9999999)


def test_a_bare_zero_is_a_duration_quoted_or_not(base_copy):
    policy = base_copy / "policies" / "scheduling.yaml"
    _edit(policy, "billing:", "preemption:\n  gracePeriod: 0\ndebug:\n  maxMinRuntime: '0'\nbilling:")
    config = load_config(base_copy)
    assert config.policy.preemption_grace_s == 0.0 and config.policy.debug.max_min_runtime_s == 0.0


def test_thirds_sum_to_100_within_tolerance(base_copy):
    alpha = base_copy / "budgets" / "alpha.yaml"
    _edit(alpha, "share: 70", "share: 33.3333333")
    _edit(alpha, "share: 30", "share: 66.6666667")
    load_config(base_copy)


def test_just_outside_tolerance_is_refused(base_copy):
    _edit(base_copy / "budgets" / "alpha.yaml", "share: 70", "share: 69.99999")
    with pytest.raises(UserError) as err:
        load_config(base_copy)
    assert "sum to 99.99999%" in err.value.problems[0].message
    assert err.value.problems[0].hint.startswith("raise the shares by 1e-05 in total")
    _edit(base_copy / "budgets" / "alpha.yaml", "share: 69.99999", "share: 70.000002")
    with pytest.raises(UserError) as err:
        load_config(base_copy)
    assert err.value.problems[0].hint == "lower the shares by 2e-06 in total"  # (no float noise)


def test_explicit_unallocated_remainder(base_copy):
    alpha = base_copy / "budgets" / "alpha.yaml"
    _edit(alpha, "share: 30", "share: 20")
    _edit(alpha, '  owners: ["@org/alpha"]\n', '  owners: ["@org/alpha"]\n  unallocated: 10\n')
    tree = load_config(base_copy).tree
    assert tree.nodes["alpha"].unallocated_pct == 10
    assert tree.effective_share("a2") == pytest.approx(0.6 * 0.2)
    assert sum(tree.effective_share(l) for l in tree.leaves()) == pytest.approx(0.94)


@pytest.mark.parametrize("share, hint", [
    ("25", "lower the shares by 5 in total, or 'unallocated' to 5"),
    ("35", "lower the shares by 15 in total, or remove 'unallocated' and lower them by 5"),
    # the shares alone sum to 100: the unallocated part is all the excess
    ("30", "lower the shares by 10 in total, or 'unallocated' to 0"),
])
def test_shares_over_100_with_an_unallocated_part_say_either_may_be_lowered(base_copy, share, hint):
    alpha = base_copy / "budgets" / "alpha.yaml"
    _edit(alpha, "share: 30", f"share: {share}")
    _edit(alpha, '  owners: ["@org/alpha"]\n', '  owners: ["@org/alpha"]\n  unallocated: 10\n')
    with pytest.raises(UserError) as err:
        load_config(base_copy)
    assert err.value.problems[0].hint == hint


def test_zero_share_leaf_is_allowed(base_copy):
    root = base_copy / "budgets" / "root.yaml"
    _edit(root, "share: 60", "share: 100")
    _edit(root, "      share: 40\n", "      share: 0\n")
    assert load_config(base_copy).tree.effective_share("b1") == 0.0


def test_policy_sections_default_when_absent(base_copy):
    (base_copy / "policies" / "scheduling.yaml").write_text("apiVersion: allot.dev/v1\nkind: SchedulingPolicy\n")
    policy = load_config(base_copy).policy
    assert (policy.lookback_s, policy.min_runtime_cap_s, policy.default_min_runtime_s) == (604800, 28800, 3600)
    assert policy.billing_weight("h100") == 1.0
    assert policy.cluster("small").domains == 2


def test_nodes_per_domain_defaults_to_one_domain(base_copy):
    _edit(base_copy / "policies" / "clusters.yaml", "    nodesPerDomain: 2\n", "")
    assert load_config(base_copy).policy.cluster("small").domains == 1


def test_references_in_subdirectories_and_yml(base_copy):
    budgets = base_copy / "budgets"
    (budgets / "programs").mkdir()
    shutil.move(budgets / "alpha.yaml", budgets / "programs" / "alpha.yml")
    _edit(budgets / "root.yaml", "file: alpha.yaml", "file: programs/alpha.yml")
    config = load_config(base_copy)
    assert config.files["a1"] == "budgets/programs/alpha.yml"
    assert config.files["alpha"] == "budgets/programs/alpha.yml"
    assert config.files["b1"] == "budgets/root.yaml"


def test_source_locations_are_kept(base_copy):
    tree = load_config(base_copy).tree
    assert str(tree.nodes["a2"].source) == "budgets/alpha.yaml:12:13"
    assert tree.nodes["alpha"].parent == "org" and tree.nodes["alpha"].share_pct == 60


def test_current_directory_is_the_default_root(base_copy, monkeypatch):
    monkeypatch.chdir(base_copy)
    config = load_config()
    assert config.tree.root == "org"
    assert config.origin == str(base_copy)


def test_the_nearest_directory_holding_budgets_and_policies_is_the_default_root(base_copy, monkeypatch):
    """From inside a configuration nested in another (a copy under ``examples/``), the nearest
    one is meant; a directory holding only ``budgets/`` or only ``policies/`` is none."""
    nested = base_copy / "examples" / "lab"
    shutil.copytree(base_copy / "budgets", nested / "budgets")
    shutil.copytree(base_copy / "policies", nested / "policies")
    _edit(nested / "budgets" / "root.yaml", "name: org", "name: lab")
    (nested / "budgets" / "deeper").mkdir()
    monkeypatch.chdir(nested / "budgets" / "deeper")
    assert load_config().origin == str(nested)
    monkeypatch.chdir(nested)
    assert load_config().tree.root == "lab"
    half = base_copy / "half"
    (half / "policies").mkdir(parents=True)
    monkeypatch.chdir(half)
    assert load_config().origin == str(base_copy)


@pytest.mark.parametrize("sub", ["budgets", "policies", "budgets/deeper"])
def test_a_subdirectory_finds_the_repository_around_it(base_copy, monkeypatch, sub):
    # a manager working in budgets/ means the repository around it, not the embedded default
    (base_copy / sub).mkdir(parents=True, exist_ok=True)
    monkeypatch.chdir(base_copy / sub)
    config = load_config()
    assert config.tree.root == "org"
    assert config.origin == str(base_copy)


@pytest.mark.parametrize("where", ["missing", "file"])
def test_bad_root_paths_are_user_errors(tmp_path, where):
    target = tmp_path / "x"
    if where == "file":
        target.write_text("")
    with pytest.raises(UserError) as err:
        load_config(target)
    assert err.value.problems[0].file == str(target)


def test_whole_base_is_untouched_by_loading(base_copy):
    before = {p: p.read_bytes() for p in base_copy.rglob("*") if p.is_file()}
    load_config(base_copy)
    assert before == {p: p.read_bytes() for p in base_copy.rglob("*") if p.is_file()}
    assert (BASE / "budgets" / "root.yaml").is_file()


def test_a_schema_description_gives_its_whole_first_sentence_as_the_hint():
    from engine.loader.schema import _first_sentence

    assert _first_sentence("A duration: parts, e.g. `7d`, `8h`; units w, d. More here.") == \
        "a duration: parts, e.g. `7d`, `8h`; units w, d"
    assert _first_sentence("") == ""


def test_a_schema_hint_reads_mid_line_but_keeps_an_acronym():
    from engine.loader.schema import _first_sentence

    assert _first_sentence("Nodes in the cluster. More words.") == "nodes in the cluster"
    assert _first_sentence("GPUs per node, e.g. 8. Whole numbers.") == "GPUs per node, e.g. 8"
