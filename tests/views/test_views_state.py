"""The view state: its JSON round trip rebuilds the same decision, and a simulation's state at
an instant is the simulator's state then (running GPUs, queue, usage charged)."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest
import yaml

from engine.loader import load_config
from engine.views.codec import config_from_dict, config_to_dict, snapshot_from_dict, snapshot_to_dict
from engine.core.statuses import WAIT_CAUSES
from engine.views.derived import cluster_rows, queue_rows, tree_rows
from engine.views.simstate import state_from_sim
from engine.views.state import ViewState
from tests.core.harness import build_scenario

SCENARIOS = sorted((Path(__file__).resolve().parents[1] / "core" / "scenarios").glob("*.yaml"))


@pytest.mark.parametrize("path", SCENARIOS[:12], ids=[p.stem for p in SCENARIOS[:12]])
def test_snapshot_and_config_survive_json(path):
    snapshot, config, now = build_scenario(yaml.safe_load(path.read_text()))
    snap2 = snapshot_from_dict(json.loads(json.dumps(snapshot_to_dict(snapshot))))
    assert snap2 == snapshot
    config2 = config_from_dict(json.loads(json.dumps(config_to_dict(config))))
    assert config2.policy == config.policy
    assert dict(config2.tree.nodes) == dict(config.tree.nodes)


def test_the_repository_config_survives_json():
    """Everything but source locations (file:line of each value) survives."""
    config = load_config()
    again = config_from_dict(json.loads(json.dumps(config_to_dict(config))))
    unsourced = replace(config.policy, source=None,
                        clusters=tuple(replace(c, source=None) for c in config.policy.clusters))
    assert again.policy == unsourced
    assert {k: (n.share_pct, n.parent, n.principals, n.unallocated_pct) for k, n in again.tree.nodes.items()} == \
        {k: (n.share_pct, n.parent, n.principals, n.unallocated_pct) for k, n in config.tree.nodes.items()}


def test_every_scheduling_knob_survives_json():
    """A knob left out of the JSON would be read back at its default, and a reader (explain,
    eta, the dashboard) would decide with another policy than the reconciler's; so every
    field of the policy is given a value other than its default, and must come back."""
    from dataclasses import fields

    from engine.model import Policy

    config = load_config()
    base = replace(config.policy, source=None,
                   clusters=tuple(replace(c, source=None) for c in config.policy.clusters))
    changed = {"lookback_s": 2 * 86400.0, "min_runtime_cap_s": 4 * 3600.0,
               "default_min_runtime_s": 600.0, "preemption_grace_s": 30.0,
               "scheduling_interval_s": 20.0, "gang_in_one_domain": False, "reservations": 3,
               "reservation_share": 0.4, "loans": True,
               "debug": replace(base.debug, max_gpus=2), "drain": replace(base.drain, drained_label="x"),
               "billing_weights": {"h100": 2.0}, "labels": replace(base.labels, budget="b"),
               "node_labels": replace(base.node_labels, domain="d"),
               "clusters": base.clusters[:1]}
    assert set(changed) == {f.name for f in fields(Policy)} - {"source"}  # (a new knob: add it)
    policy = replace(base, **changed)
    assert all(getattr(policy, k) != getattr(base, k) for k in changed)
    again = config_from_dict(json.loads(json.dumps(config_to_dict(replace(config, policy=policy)))))
    assert again.policy == policy


def test_state_json_rebuilds_the_same_decision(sim_state, state_file):
    again = ViewState.from_dict(json.loads(state_file.read_text()))
    assert again.snapshot == sim_state.snapshot
    assert again.now == sim_state.now
    assert again.decision.actions == sim_state.decision.actions
    assert dict(again.decision.statuses) == dict(sim_state.decision.statuses)
    assert again.decision.ranks == sim_state.decision.ranks
    assert again.runs == sim_state.runs and again.expected == sim_state.expected


def test_sim_state_at_the_end_is_the_simulators(sim_result, sim_state):
    recs = sim_result.tasks
    assert {r.workload.id for r in sim_state.snapshot.running} == \
        {k for k, r in recs.items() if r.state == "running"}
    assert {w.id for w in sim_state.snapshot.pending} == {k for k, r in recs.items() if r.state == "pending"}
    # the lookback (7 d) covers the whole run: usage is everything the simulator charged
    for leaf, used in sim_state.snapshot.usage.items():
        assert used == pytest.approx(sim_result.charged.get(leaf, 0.0), rel=1e-9, abs=1e-6)
    busy = sum(r.placement.gpus for r in sim_state.snapshot.running)
    assert sum(c["busy"] for c in cluster_rows(sim_state)) == busy


def test_sim_state_in_the_middle_matches_the_segments(sim_result):
    t = 4 * 3600.0 + 30.0
    state = state_from_sim(sim_result, at=t)
    covering = {s.task for s in sim_result.segments if s.start < t < s.end}
    assert {r.workload.id for r in state.snapshot.running} == covering
    for r in state.snapshot.running:
        seg = next(s for s in sim_result.segments if s.task == r.workload.id and s.start < t < s.end)
        assert r.started_at == seg.start and r.protected_until == seg.protected_until
        assert r.placement.gpus == seg.gpu_count
    submitted = {k for k, rec in sim_result.tasks.items() if rec.submit <= t}
    for w in state.snapshot.pending:
        assert w.id in submitted and w.id not in covering
    with pytest.raises(ValueError):
        state_from_sim(sim_result, at=sim_result.horizon + 1)


def test_derived_rows_follow_the_decision(sim_state):
    d = sim_state.decision
    rows = queue_rows(sim_state)
    positions = [r["position"] for r in rows if r["position"] is not None]
    assert positions == sorted(positions)
    for r in rows:
        assert r["rank"] == d.statuses[r["id"]].rank
        # why it waits, in a word, for pending work only (admitted and rejected work has none)
        assert r["cause"] == d.waiting.get(r["id"])
        assert (r["cause"] in WAIT_CAUSES) if r["state"] == "pending" else r["cause"] is None
    assert {r["state"] for r in rows} >= {"pending"}
    tree = {r["name"]: r for r in tree_rows(sim_state)}
    root = sim_state.config.tree.root
    assert tree[root]["running_gpus"] == sum(
        r.placement.gpus for r in sim_state.snapshot.running if r.workload.contract.allocated
        and r.workload.contract.budget in d.ranks)
    for leaf, lr in d.ranks.items():
        assert tree[leaf]["rank"] == lr.rank and tree[leaf]["usage_gpu_h"] == pytest.approx(lr.usage / 3600)
    team = sim_state.config.tree.children(root)[0]
    sub = queue_rows(sim_state, team=team)
    leaves = {x for x in sim_state.config.tree.leaves() if team in sim_state.config.tree.path(x)}
    assert all(r["leaf"] in leaves or r["requested_budget"] in leaves for r in sub)
