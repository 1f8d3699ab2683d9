"""The structural diff: which nodes a change adds, removes or moves, how each affected leaf's
share of its parent and effective share move (also in GPUs per cluster), owner and principal
changes, and policy knob changes."""

from __future__ import annotations

from dataclasses import replace

import pytest

from engine.impact.diff import diff_configs, flatten_policy
from engine.model import BudgetNode, BudgetTree, Cluster, Config, DebugRule, Policy, Principal

CLUSTERS = (Cluster("h100", "h100", 128, 8, 16), Cluster("b200", "b200", 11, 8, 11))


def config(nodes, policy: Policy | None = None) -> Config:
    return Config(BudgetTree.build(nodes), policy or Policy(clusters=CLUSTERS))


def org(a1=60.0, a2=40.0, b_owner="@b-lead", extra=()):
    ns = (Principal("namespace", "x"),)
    return [
        BudgetNode("lab", None, 100.0, owners=("@council",)),
        BudgetNode("a", "lab", 50.0, owners=("@a-lead",)),
        BudgetNode("b", "lab", 50.0, owners=(b_owner,)),
        BudgetNode("a1", "a", a1, principals=ns),
        BudgetNode("a2", "a", a2, principals=ns),
        BudgetNode("b1", "b", 100.0, principals=ns),
        *extra,
    ]


def test_identical_configs_have_an_empty_diff():
    assert diff_configs(config(org()), config(org())).empty


def test_moving_ten_points_between_siblings_lists_both_leaves_with_gpus():
    diff = diff_configs(config(org()), config(org(a1=50.0, a2=50.0)))
    assert not (diff.added or diff.removed or diff.moved or diff.owners or diff.policy)
    assert [c.name for c in diff.leaves] == ["a1", "a2"]  # equal |delta|: name order
    a1, a2 = diff.leaves
    assert (a1.share_before, a1.share_after) == (60.0, 50.0)
    assert a1.effective_before == pytest.approx(0.30) and a1.effective_after == pytest.approx(0.25)
    assert a2.effective_delta == pytest.approx(+0.05)
    # 1,024 H100 and 88 B200 GPUs: 30% -> 25% is 307.2 -> 256 H100 GPUs
    assert a1.gpus_before["h100"] == pytest.approx(307.2)
    assert a1.gpus_after["h100"] == pytest.approx(256.0)
    assert a2.gpus_after["b200"] == pytest.approx(22.0)
    assert a1.status == a2.status == "changed"


def test_a_change_high_in_the_tree_affects_every_leaf_below_it():
    base = org()
    head = [replace(n, share_pct=70.0) if n.name == "a" else
            replace(n, share_pct=30.0) if n.name == "b" else n for n in org()]
    diff = diff_configs(config(base), config(head))
    assert {c.name for c in diff.leaves} == {"a1", "a2", "b1"}
    b1 = next(c for c in diff.leaves if c.name == "b1")
    assert (b1.share_before, b1.share_after) == (100.0, 100.0)
    assert b1.effective_delta == pytest.approx(-0.20)
    assert diff.leaves[0].name == "b1"  # largest change first
    assert {(i.name, i.share_before, i.share_after) for i in diff.inner} == {
        ("a", 50.0, 70.0), ("b", 50.0, 30.0)}


def test_added_removed_and_moved_nodes():
    ns = (Principal("group", "g"),)
    base = org(extra=(BudgetNode("b2", "b", 0.0, principals=ns),))
    head = [n for n in org(a1=50.0, extra=(BudgetNode("b2", "a", 10.0, principals=ns),
                                            BudgetNode("b3", "b", 0.0, principals=ns)))]
    diff = diff_configs(config(base), config(head))
    assert diff.added == ("b3",) and diff.removed == ()
    assert [(m.name, m.parent_before, m.parent_after) for m in diff.moved] == [("b2", "b", "a")]
    b2 = next(c for c in diff.leaves if c.name == "b2")
    assert b2.status == "moved" and b2.effective_after == pytest.approx(0.05)
    b3 = next(c for c in diff.leaves if c.name == "b3")
    assert b3.status == "added" and b3.share_before is None and b3.gpus_before == {}
    removed = diff_configs(config(head), config(base))
    assert removed.removed == ("b3",)
    assert next(c for c in removed.leaves if c.name == "b3").status == "removed"


def test_owner_and_principal_changes():
    head = [replace(n, principals=(Principal("namespace", "y"),)) if n.name == "b1" else n
            for n in org(b_owner="@new-lead")]
    diff = diff_configs(config(org()), config(head))
    assert [(o.name, o.before, o.after) for o in diff.owners] == [("b", ("@b-lead",), ("@new-lead",))]
    assert [(p.name, p.before, p.after) for p in diff.principals] == [
        ("b1", ("namespace:x",), ("namespace:y",))]
    assert diff.leaves == ()


def test_policy_knob_changes_are_listed_by_dotted_key():
    head_policy = Policy(clusters=(replace(CLUSTERS[0], nodes=64), CLUSTERS[1]),
                         lookback_s=3 * 86400.0, debug=DebugRule(max_gpus=4))
    diff = diff_configs(config(org()), config(org(), head_policy))
    assert [(k.key, k.before, k.after) for k in diff.policy] == [
        ("clusters.h100.nodes", 128, 64),
        ("debug.max_gpus", 8, 4),
        ("lookback_s", 7 * 86400.0, 3 * 86400.0),
    ]
    # effective shares are unchanged, so no leaf is listed: the GPUs move with the cluster
    assert diff.leaves == ()


def test_flattened_policy_covers_nested_knobs_and_skips_sources():
    flat = flatten_policy(Policy(clusters=CLUSTERS, billing_weights={"b200": 2.0}))
    assert flat["min_runtime_cap_s"] == 8 * 3600.0
    assert flat["billing_weights.b200"] == 2.0
    assert flat["labels.budget"] == "allot.dev/budget"
    assert flat["clusters.b200.gpus_per_node"] == 8
    assert not any(k == "source" or k.endswith(".source") for k in flat)
    assert flat["node_labels.gpu_resource"] == "nvidia.com/gpu"


def test_diff_is_json_safe():
    import json
    diff = diff_configs(config(org()), config(org(a1=50.0, a2=50.0)))
    doc = json.loads(json.dumps(diff.to_dict()))
    assert doc["leaves"][0]["gpus_after"]["h100"] == pytest.approx(256.0)


def test_a_change_of_principals_only_is_named_in_the_verdict():
    # a pull request that only changes who may charge a leaf: the verdict said "." (nothing)
    from engine.impact.report import render_markdown

    head = [replace(n, principals=(Principal("namespace", "y"),)) if n.name == "b1" else n
            for n in org()]
    diff = diff_configs(config(org()), config(head))
    verdict = render_markdown("a" * 40, "b" * 40, diff, None).splitlines()[2]
    assert verdict == "1 principal change."
