"""Properties of whole simulated runs (hypothesis): the core and the shell together.

Random small clusters and traces (funded and free work, gangs, resumable or not, min runtimes
from none to an hour, node failures and repairs), under the budget scheduler with or without
loans, or a baseline (legacy, monopoly), at the watch or interval cadence. Every run must
keep the contract the README promises:

* capacity is never exceeded: no GPU runs two segments at once, and no run starts on a node
  between its failure and its repair;
* a gang is all or nothing: every run holds exactly the task's GPUs;
* a protected run is never preempted: a preempted segment ends at or after its protection;
* free work is never charged, funded work exactly for its allocated runs (loans included:
  a run on loan is unallocated, and only with ``policy.loans``);
* the same inputs give the same run.
"""

from __future__ import annotations

import dataclasses

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from engine.sim.engine import SimOptions, simulate
from engine.sim.trace import NodeFailure, Task, Trace
from tests.sim.conftest import tiny_config


@st.composite
def runs(draw):
    nodes = draw(st.integers(1, 3))
    gpn = draw(st.sampled_from([4, 8]))
    tasks = []
    held = draw(st.booleans())
    if held:  # reservations on purpose (budget scheduler, loans on; about half the runs lend):
        # a's protected work fills every node but one GPU of the first; b's whole-node job
        # reserves that node, and b's small work, kept off it with nowhere else to go, waits
        # there or runs there on loan
        for i in range(nodes):
            tasks.append(Task(f"a{i}", 0.0, 1, gpn - 1 if i == 0 else gpn, 7200.0, "u", leaf="a",
                              min_runtime=3600.0, resumable=False, klass="small"))
        tasks.append(Task("big", 60.0, 1, gpn, 3600.0, "u", leaf="b", min_runtime=3600.0,
                          resumable=True, klass="small"))
        for i in range(draw(st.integers(1, 3))):
            tasks.append(Task(f"s{i}", 120.0 + i, 1, 1, 7200.0, "u", leaf="b", min_runtime=3600.0,
                              resumable=draw(st.booleans()), klass="small"))
    for k in range(draw(st.integers(1, 14))):
        gpp = draw(st.sampled_from([1, 2, gpn // 2, gpn]))
        pods = draw(st.integers(1, min(2, nodes)))
        tasks.append(Task(f"t{k:02d}", float(draw(st.integers(0, 7200))), pods, gpp,
                          float(draw(st.sampled_from([60, 600, 3600, 7200]))), "u",
                          leaf=draw(st.sampled_from(["a", "b", None])),
                          min_runtime=float(draw(st.sampled_from([0, 600, 3600]))),
                          resumable=draw(st.booleans()), klass="small"))
    a_share = draw(st.sampled_from([50.0, 80.0]))
    base = tiny_config(nodes=nodes, gpus_per_node=gpn, shares=(a_share, 100.0 - a_share))
    config = dataclasses.replace(base, policy=dataclasses.replace(
        base.policy, loans=held or draw(st.booleans()),
        reservations=draw(st.integers(1 if held else 0, 2))))
    failures = [NodeFailure(float(draw(st.integers(0, 4 * 3600))), f"c-n{draw(st.integers(0, nodes - 1)):04d}",
                            float(draw(st.sampled_from([600, 3600])))) for _ in range(draw(st.integers(0, 2)))]
    trace = Trace.of(tasks, failures, meta={"horizon": 12 * 3600.0})
    cadence = draw(st.sampled_from(["watch", "interval"]))
    scheduler = "budget" if held else draw(st.sampled_from(["budget", "legacy", "monopoly"]))
    return config, trace, SimOptions(cadence=cadence), scheduler


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(runs())
def test_a_simulated_run_keeps_the_contract(run):
    config, trace, options, scheduler = run
    res = simulate(config, trace, scheduler, options=options)
    tasks = {t.id: t for t in trace.tasks}

    busy: dict[tuple[str, int], list[tuple[float, float]]] = {}
    charged = {leaf: 0.0 for leaf in res.charged}
    for s in res.segments:
        t = tasks[s.task]
        assert s.gpu_count == t.gpus, s  # gangs: all or nothing
        for node, idx in s.gpus:
            for i in idx:
                busy.setdefault((node, i), []).append((s.start, s.end))
        if s.preempted:
            assert s.end >= s.protected_until, s  # never preempted while protected
        if s.allocated:
            assert t.funded, s  # free work never runs allocated
            charged[s.leaf] += (s.end - s.start) * s.gpu_count
        elif t.funded:  # a funded task running unallocated: on loan
            assert scheduler == "budget" and config.policy.loans and t.resumable, s
            assert s.protected_until == s.start, s
    for node, failed, _drained, repaired in res.failures:  # no start on an unhealthy node
        down_until = res.horizon if repaired is None else repaired
        assert not any(failed <= s.start < down_until for s in res.segments
                       if node in dict(s.gpus)), (node, failed, repaired)
    for spans in busy.values():  # capacity: one run per GPU at a time
        spans.sort()
        assert all(a_end <= b_start for (_, a_end), (b_start, _) in zip(spans, spans[1:])), spans
    assert res.charged == pytest.approx(charged, abs=1e-6)  # exactly the allocated runs

    again = simulate(config, trace, scheduler, options=options)
    assert (again.segments, again.events, again.charged) == (res.segments, res.events, res.charged)
