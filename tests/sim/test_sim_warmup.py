"""A warm-up before the measured window: simulated like the rest, measured not at all.

The golden scenario of ``test_sim_golden`` (one 4-GPU node, leaves a and b at 50%) with the
first 500 s declared a warm-up (``meta["measure_from"] = 500``): A1 (submitted at 0) belongs
to the warm-up, B1 (submitted at 600) to the window. The run itself is unchanged (B1 waits
3000 s, A1 is preempted at 3600 and ends at 9420); the figures cover [500, 12000] only:

* waits: B1's alone (3000 s); the window's one task;
* GPU-time: A1 500-3600 and 5400-9420, B1 3600-5400 = 4 x (3100 + 1800 + 4020) = 35,680
  GPU-s of 4 x 11,500 = 46,000: occupancy 0.775652; 4 x 2,580 GPU-s with no work at all;
* charged in the window: a = 4 x (3100 + 4020), b = 4 x 1800; the warm-up's 4 x 500 to a is
  set aside (``charged_before``);
* the preemption at 3600 (1,200 GPU-s lost) is inside the window.
"""

from __future__ import annotations

import pytest

from engine.sim.engine import SimOptions, simulate
from engine.sim.prepare import compress, cut, prepare_trace
from engine.sim.synthetic import synthetic_trace
from engine.sim.trace import Task, Trace
from tests.sim.conftest import tiny_config
from tests.sim.test_sim_golden import TRACE


def test_metrics_cover_only_the_measured_window():
    trace = TRACE.with_meta(measure_from=500.0)
    res = simulate(tiny_config(), trace, "budget")
    assert res.measure_from == 500.0
    assert (res.tasks["A1"].end, res.tasks["B1"].wait) == (9420.0, 3000.0)  # same run
    assert res.charged_before == {"a": 4 * 500.0, "b": 0.0}
    s = res.summary()
    assert s["measured_s"] == [500.0, 12000.0]
    assert s["tasks"]["submitted"] == 1
    assert s["waits"]["overall"]["n"] == 1 and s["waits"]["overall"]["p50_s"] == 3000.0
    assert s["occupancy"] == pytest.approx(35680 / 46000, abs=1e-4)
    assert s["gpu_hours"]["capacity"] == pytest.approx(46000 / 3600, abs=1e-2)
    assert s["idle"]["busy"]["gpu_h"] == pytest.approx(35680 / 3600, abs=1e-2)
    assert s["idle"]["no_work"]["gpu_h"] == pytest.approx(4 * 2580 / 3600, abs=1e-2)
    assert s["teams"]["a"]["charged_gpu_h"] == pytest.approx(4 * 7120 / 3600, abs=1e-2)
    assert s["teams"]["b"]["charged_gpu_h"] == pytest.approx(4 * 1800 / 3600, abs=1e-2)
    assert s["preemptions"] == 1
    assert s["gpu_hours"]["lost_to_preemption"] == pytest.approx(1200 / 3600, abs=1e-2)
    # hour 0 of the series starts at the window: 11,500 s = 3.19 h -> 4 bins
    m = res.metrics()
    assert m.hours == 4 and m.capacity_h.sum() == pytest.approx(4 * 11500 / 3600)
    assert sum(v.sum() for v in m.delivered_h.values()) == pytest.approx(35680 / 3600)


def test_without_a_warm_up_nothing_changes():
    a = simulate(tiny_config(), TRACE, "budget").summary()
    b = simulate(tiny_config(), TRACE.with_meta(measure_from=0.0), "budget").summary()
    assert a == b and a["measured_s"] == [0.0, 12000.0] and a["tasks"]["submitted"] == 2


def test_cut_prepends_the_warm_up_and_compression_scales_it():
    tasks = [Task(f"t{i}", 3600.0 * i, 1, 1, 1800.0, "o", leaf="a", min_runtime=600.0,
                  resumable=True, klass="small") for i in range(10)]
    trace = Trace.of(tasks, meta={})
    out = cut(trace, 5 * 3600.0, 8 * 3600.0, 2 * 3600.0)
    assert [t.id for t in out.tasks] == ["t3", "t4", "t5", "t6", "t7"]
    assert out.tasks[0].submit == 0.0
    assert (out.meta["measure_from"], out.meta["horizon"]) == (7200.0, 18000.0)
    assert cut(trace, 3600.0, None, 7200.0).meta["measure_from"] == 3600.0  # clipped at 0
    half = compress(out, 2.0)
    assert (half.meta["measure_from"], half.meta["horizon"]) == (3600.0, 9000.0)
    assert "measure_from" not in out.window(0.0, 3600.0).meta


def test_the_demand_ratio_is_reached_on_the_measured_window():
    config = tiny_config(nodes=2)
    tasks = [Task(f"w{i}", 60.0 * i, 1, 1, 600.0, "o", leaf="a") for i in range(60)]  # warm-up burst
    tasks += [Task(f"m{i}", 3600.0 + 600.0 * i, 1, 1, 600.0, "o", leaf="a") for i in range(12)]
    raw = Trace.of(tasks, meta={"horizon": 3 * 3600.0, "measure_from": 3600.0})
    prepared = prepare_trace(raw, config, demand_ratio_target=0.2)  # (x1.6: above an hour left)
    lo, hi = prepared.meta["measure_from"], prepared.meta["horizon"]
    used = sum(t.gpus * min(t.runtime, hi - t.submit) for t in prepared.tasks if t.submit >= lo)
    assert used / ((hi - lo) * 8) == pytest.approx(0.2, rel=1e-3)


def test_a_wall_clock_limit_cuts_the_run_where_it_got_and_says_so():
    config = tiny_config(nodes=4, gpus_per_node=8)
    trace = prepare_trace(synthetic_trace(config, days=2, tasks=1500, demand_ratio_target=1.2,
                                          seed=2, failures_per_node_day=0.0), config, seed=2)
    full = simulate(config, trace, "legacy")
    cut_run = simulate(config, trace, "legacy", options=SimOptions(wall_limit_s=1e-9))
    assert not full.truncated and cut_run.truncated
    assert 0 < cut_run.horizon < full.horizon
    assert cut_run.sim_events < full.sim_events
    s = cut_run.summary()  # the truncated run is measured up to where it got
    assert s["horizon_s"] == pytest.approx(cut_run.horizon, abs=1e-3)
    assert all(seg.end <= cut_run.horizon for seg in cut_run.segments)
