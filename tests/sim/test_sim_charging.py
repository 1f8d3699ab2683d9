"""Charging in the simulator (engine.sim.charging): rates per leaf, exact usage with the open
stretch, the lookback cap, totals at the end of the warm-up."""

from __future__ import annotations

import pytest

from engine.sim.charging import Charges


def test_rates_charge_the_ledger_per_constant_stretch_and_usage_adds_the_open_one():
    c = Charges(["a", "b"], lookback_s=1000.0)
    c.set_rate("a", 0.0, 8.0)      # 8 GPUs from t=0
    c.set_rate("a", 100.0, -4.0)   # 4 of them end at t=100: 800 GPU-s charged
    assert c.charged == {"a": 800.0, "b": 0.0}
    assert c.usage(150.0) == pytest.approx({"a": 800.0 + 4.0 * 50.0, "b": 0.0})
    c.charge_until(200.0)
    assert c.charged["a"] == pytest.approx(800.0 + 400.0)
    assert c.usage(200.0)["a"] == pytest.approx(1200.0)  # nothing counted twice


def test_the_open_stretch_counts_at_most_the_lookback_window():
    c = Charges(["a"], lookback_s=100.0)
    c.set_rate("a", 0.0, 2.0)
    assert c.usage(50.0)["a"] == pytest.approx(100.0)
    assert c.usage(500.0)["a"] == pytest.approx(200.0)  # 2 GPUs x the 100-s window


def test_totals_at_the_end_of_the_warm_up_include_the_open_stretch():
    c = Charges(["a", "b"], lookback_s=1000.0)
    c.set_rate("a", 0.0, 1.0)
    c.set_rate("b", 10.0, 3.0)
    c.set_rate("b", 20.0, -3.0)
    assert c.totals_at(50.0) == pytest.approx({"a": 50.0, "b": 30.0})


def test_unfunded_work_has_no_leaf_and_is_never_charged():
    c = Charges(["a"], lookback_s=1000.0)
    with pytest.raises(AssertionError):
        c.set_rate(None, 0.0, 1.0)
