"""The shipped budgets/ and policies/ (the embedded default) are valid and say what the brief says."""

from __future__ import annotations

import json
import re

import pytest

from engine.codeowners import CODEOWNERS_PATH, generate
from engine.loader import load_config, repo_root
from engine.model import Principal

REPO = repo_root()


@pytest.fixture(scope="module")
def config():
    return load_config(REPO)


def test_default_root_is_this_repository(config, monkeypatch, tmp_path):
    monkeypatch.chdir(tmp_path)  # no budgets/ here: falls back to the embedded default
    default = load_config()
    assert default.origin == str(REPO)
    assert default.tree.nodes == config.tree.nodes


def test_realistic_organisation(config):
    tree = config.tree
    programs = tree.children(tree.root)
    assert len(programs) >= 3
    assert 16 <= len(tree.leaves()) <= 20
    assert max(tree.depth(leaf) for leaf in tree.leaves()) >= 3
    for name in tree.walk():
        node = tree.nodes[name]
        if tree.is_leaf(name):
            assert node.principals, name
        else:
            assert node.owners, name
    assert len(set(config.files.values())) >= 5  # one file per program, plus a project's own file


def test_the_briefs_35_percent_example(config):
    tree = config.tree
    assert tree.path("pretraining") == ("lab", "frontier", "pretraining")
    assert tree.nodes["frontier"].share_pct == 50
    assert tree.nodes["pretraining"].share_pct == 70
    assert tree.effective_share("pretraining") == pytest.approx(0.35, abs=1e-12)


@pytest.mark.parametrize("leaf, expected", [
    ("pretraining", 0.50 * 0.70),
    ("long-context-training", 0.50 * 0.20 * 0.60),   # 6%
    ("vision", 0.30 * 0.35 * 0.50),                  # 5.25%, three files down
    ("theory", 0.15 * 0.10),                         # 1.5%
    ("onboarding", 0.05 * 0.20),                     # 1%
])
def test_hand_computed_effective_shares(config, leaf, expected):
    assert config.tree.effective_share(leaf) == pytest.approx(expected, abs=1e-12)


def test_science_states_its_unallocated_remainder(config):
    tree = config.tree
    assert tree.nodes["science"].unallocated_pct == 10
    assert sum(tree.effective_share(leaf) for leaf in tree.leaves()) == pytest.approx(0.985)


def test_principals_may_charge_several_leaves(config):
    core = Principal("group", "frontier-core")
    assert [l for l in config.tree.leaves() if core in config.tree.nodes[l].principals] == [
        "pretraining", "scaling-laws", "evals"]


def test_policy_knobs(config):
    policy = config.policy
    h100, b200 = policy.cluster("h100"), policy.cluster("b200")
    assert (h100.gpus, h100.nodes, h100.gpus_per_node, h100.nodes_per_domain, h100.domains) == (1024, 128, 8, 16, 8)
    assert (b200.gpus, b200.domains) == (88, 1)
    assert policy.lookback_s == 7 * 86400
    assert policy.min_runtime_cap_s == 8 * 3600
    assert policy.default_min_runtime_s == 3600
    assert (policy.debug.max_gpus, policy.debug.max_min_runtime_s) == (8, 900)
    assert policy.scheduling_interval_s == 60
    assert policy.preemption_grace_s == 120
    assert policy.billing_weight("h100") == 1.0 and policy.billing_weight("b200") == 1.6
    assert policy.gang_in_one_domain is True
    assert policy.reservations == 8 and policy.reservation_share == 0.25 and policy.loans is False
    assert policy.labels.budget == "allot.dev/budget"
    assert policy.drain.unhealthy_conditions == ("GPUUnhealthy",)


def test_every_yaml_file_has_its_schema_modeline():
    kinds = {"Budget": "budget", "Clusters": "clusters", "SchedulingPolicy": "scheduling-policy"}
    files = sorted((REPO / "budgets").glob("*.yaml")) + sorted((REPO / "policies").glob("*.yaml"))
    assert files
    for path in files:
        text = path.read_text(encoding="utf-8")
        kind = re.search(r"^kind: (\w+)$", text, re.M).group(1)
        assert text.startswith(f"# yaml-language-server: $schema=../schemas/{kinds[kind]}.schema.json\n"), path


def _fields(schema, where="#"):
    """Yield (location, subschema) for every property of every object in a schema."""
    if isinstance(schema, dict):
        for name, sub in schema.get("properties", {}).items():
            yield f"{where}/{name}", sub
        for key, sub in schema.items():
            if key in ("properties", "$defs"):
                for name, s in sub.items():
                    yield from _fields(s, f"{where}/{name}")
            elif isinstance(sub, dict):
                yield from _fields(sub, f"{where}/{key}")


@pytest.mark.parametrize("name", ["budget", "clusters", "scheduling-policy"])
def test_every_schema_field_has_a_description(name):
    schema = json.loads((REPO / "schemas" / f"{name}.schema.json").read_text())
    assert schema["$schema"] == "https://json-schema.org/draft/2020-12/schema"
    fields = list(_fields(schema))
    assert len(fields) > 5
    missing = [where for where, sub in fields if not sub.get("description")]
    assert missing == []


def test_committed_codeowners_is_up_to_date(config):
    committed = (REPO / CODEOWNERS_PATH).read_text(encoding="utf-8")
    assert committed == generate(config)
    assert "/budgets/frontier.yaml @allot-lab/frontier-pis" in committed.splitlines()
    assert "/policies/ @allot-lab/research-council" in committed.splitlines()


def test_the_readme_does_not_say_an_inner_node_in_its_parents_file_reviews_it(config):
    """CODEOWNERS goes by file: long-context, held in frontier.yaml, is reviewed by frontier's
    owners, not by its own (@theo-okafor); the README's budget file example said its owners
    were "who reviews it"."""
    text = generate(config)
    assert "@theo-okafor" not in text and config.files["long-context"] == "budgets/frontier.yaml"
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    line = next(x for x in readme.splitlines() if 'owners: ["@theo-okafor"]' in x)
    assert "who reviews it" not in line and "its own file" in line
    schema = json.loads((REPO / "schemas" / "budget.schema.json").read_text())
    assert "held in its parent's file is reviewed by that file's owners" in json.dumps(schema)
