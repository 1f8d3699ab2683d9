"""The synthetic generator makes what its docstring promises (``engine.sim.synthetic``): its
mix of debug jobs, small work and large gangs with their runtime ranges, the offered load asked
for, bursty teams, node failures, and the same trace for the same seed."""

from __future__ import annotations

from collections import Counter

import pytest

from engine.loader import load_config
from engine.sim.clusters import with_clusters
from engine.sim.prepare import capacity, demand_ratio, prepare_trace
from engine.sim.synthetic import synthetic_trace


@pytest.fixture(scope="module")
def config():
    return with_clusters(load_config(), "h100:32")  # 256 GPUs, topology domains of 128 GPUs


@pytest.mark.parametrize("tasks", [1500, 5000])  # runtimes stretched (x > 1) and squeezed (x < 1)
def test_the_mix_keeps_its_ranges_at_the_offered_load_asked(config, tasks):
    trace = synthetic_trace(config, days=7, tasks=tasks, demand_ratio_target=1.1, seed=2)
    scale = trace.meta["runtime_scale"]
    assert (scale > 1) == (tasks == 1500)
    assert demand_ratio(trace, capacity(config)) == pytest.approx(1.1, rel=1e-3)
    assert trace.meta["offered"] == pytest.approx(1.1, rel=1e-3)
    kinds = Counter(t.klass for t in trace.tasks)
    assert kinds["debug"] / tasks == pytest.approx(0.3, abs=0.03)
    for t in trace.tasks:
        if t.klass == "debug":
            assert 60 <= t.runtime <= 900 and 1 <= t.gpus <= 8
        elif t.klass == "large":
            assert 2 * 3600 <= t.runtime <= 24 * 3600 and t.gpus in (64, 128) and t.gpus_per_pod == 8
        else:
            assert 960 <= t.runtime <= 3 * 86400 and t.gpus <= 32
    # small work stays small work when contracts are assigned: never short enough to get a
    # debug contract (a min runtime of at most 15 min, non-resumable), which queues first
    prepared = prepare_trace(trace, config, seed=2)
    assert all(t.min_runtime == 0 or t.min_runtime > 900 for t in prepared.tasks if t.klass != "debug")

def test_a_load_the_ranges_cannot_give_is_the_nearest_and_said(config):
    crowded = synthetic_trace(config, days=7, tasks=20000, demand_ratio_target=1.1, seed=0)
    assert crowded.meta["offered"] > 1.5  # 20,000 tasks at their shortest runtimes
    assert all(t.runtime >= 960 for t in crowded.tasks if t.klass == "small")
    assert demand_ratio(crowded, capacity(config)) == pytest.approx(crowded.meta["offered"], rel=1e-3)
    sparse = synthetic_trace(config, days=7, tasks=50, demand_ratio_target=1.1, seed=0)
    assert sparse.meta["offered"] < 1.1
    assert all(t.runtime <= 3 * 86400 for t in sparse.tasks)


def test_teams_burst_nodes_fail_and_a_seed_gives_the_same_trace(config):
    trace = synthetic_trace(config, days=14, tasks=6000, seed=4, failures_per_node_day=0.05)
    per_day = Counter((int(t.submit // 86400), t.owner) for t in trace.tasks)
    pretraining = [per_day[(d, "pretraining")] for d in range(14)]
    assert max(pretraining) > 3 * min(pretraining)  # on days and off days
    assert trace.failures and all(2 * 3600 <= f.repair_s <= 8 * 3600 for f in trace.failures)
    assert len(trace.failures) == pytest.approx(0.05 * 14 * 32, rel=0.5)
    again = synthetic_trace(config, days=14, tasks=6000, seed=4, failures_per_node_day=0.05)
    assert (again.tasks, again.failures, again.meta) == (trace.tasks, trace.failures, trace.meta)
    assert synthetic_trace(config, days=14, tasks=6000, seed=5).tasks != trace.tasks


def test_allot_simulate_says_when_the_load_asked_is_out_of_reach(config):
    from argparse import Namespace

    from engine.commands.siminputs import synthetic_shortfall

    crowded = synthetic_trace(config, days=7, tasks=20000, demand_ratio_target=1.1, seed=0)
    note = synthetic_shortfall(crowded.meta, Namespace(demand_ratio=None, tasks=20000))
    assert note.startswith(f"the synthetic trace offers {crowded.meta['offered']:.2f}x the capacity, "
                           "not the 1.1x asked: its 20000 tasks at their shortest runtimes")
    fine = synthetic_trace(config, days=7, tasks=5000, demand_ratio_target=1.1, seed=0)
    assert synthetic_shortfall(fine.meta, Namespace(demand_ratio=None, tasks=5000)) == ""
