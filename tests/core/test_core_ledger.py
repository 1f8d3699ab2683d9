"""The usage ledger: exact sliding-window integrals, folding, persistence and merging."""

from __future__ import annotations

import json
import math
import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from engine.core.ledger import Ledger
from engine.model import BudgetNode, BudgetTree


def brute(charges, leaf, now, lookback):
    return sum(r * max(0.0, min(e, now) - max(s, now - lookback)) for l, s, e, r in charges if l == leaf)


def test_partial_intervals_are_exact():
    led = Ledger(["a"], lookback_s=1000, bucket_s=300)
    led.charge("a", 0, 100, gpus=2)          # 200 GPU-s, all before the window at now=1050
    led.charge("a", 40, 140, gpus=1)          # 100 GPU-s; window (50, 1050] keeps 90 of it
    led.charge("a", 1000, 1100, gpus=4, weight=1.5)  # future part ignored: 50 s x 6 = 300
    assert led.usage(1050)["a"] == pytest.approx(2 * 50 + 90 + 300)


def test_continued_charges_cancel_breakpoints():
    led = Ledger(["a"], lookback_s=86400)
    for t in range(0, 3600, 10):  # a simulator charging one 8-GPU job at every event
        led.charge("a", t, t + 10, gpus=8)
    assert sum(len(b) for b in led._buckets.values()) == 2  # only start and end remain
    assert led.usage(3600)["a"] == pytest.approx(8 * 3600)


def test_window_slides_and_folds_old_buckets():
    led = Ledger(["a", "b"], lookback_s=600, bucket_s=60)
    led.charge("a", 0, 10_000, gpus=1)
    led.charge("b", 100, 200, gpus=3)
    assert led.usage(700) == {"a": 600.0, "b": pytest.approx(3 * 100)}
    assert led.usage(5000) == {"a": 600.0, "b": 0.0}
    with pytest.raises(ValueError, match="before the ledger horizon"):
        led.usage(1000)


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.sampled_from("abc"), st.floats(0, 5000), st.floats(0, 2000),
                          st.integers(1, 8), st.sampled_from([1.0, 1.5])), max_size=40),
       st.lists(st.floats(0, 3000), min_size=1, max_size=5))
def test_matches_brute_force_at_increasing_times(jobs, steps):
    lookback = 1800.0
    led = Ledger("abc", lookback_s=lookback, bucket_s=120)
    charges = []
    for leaf, start, length, gpus, w in jobs:
        led.charge(leaf, start, start + length, gpus, w)
        charges.append((leaf, start, start + length, gpus * w))
    now = 0.0
    for step in steps:
        now += step
        got = led.usage(now)
        for leaf in "abc":
            assert got[leaf] == pytest.approx(brute(charges, leaf, now, lookback), rel=1e-9, abs=1e-6)


def test_charge_many_equals_charges():
    rnd = random.Random(3)
    one, many = Ledger(["a", "b"], 3600), Ledger(["a", "b"], 3600)
    rows = [(rnd.choice("ab"), t, t + 30, rnd.randint(1, 8), 1.0) for t in range(0, 7200, 30) for _ in range(3)]
    for row in rows:
        one.charge(*row)
    many.charge_many(*zip(*rows))
    assert many.usage(7200) == pytest.approx(one.usage(7200))


def test_json_round_trip_and_merge():
    a, b = Ledger(["x"], 3600, 60), Ledger(["y"], 3600, 60)
    a.charge("x", 1_700_000_000, 1_700_003_000, 4)
    b.charge("y", 1_700_001_000, 1_700_002_000, 2)
    b.charge("x", 1_700_002_000, 1_700_002_500, 1)
    restored = Ledger.from_dict(json.loads(json.dumps(a.to_dict())))
    assert restored.usage(1_700_003_600) == a.usage(1_700_003_600)
    a.merge(b)
    assert a.usage(1_700_003_600) == pytest.approx({"x": 4 * 3000 + 500, "y": 2000})


def test_rollup_sums_subtrees():
    tree = BudgetTree.build([BudgetNode("root", None, 100), BudgetNode("P", "root", 100),
                             BudgetNode("a", "P", 50), BudgetNode("b", "P", 50)])
    led = Ledger(["a", "b"], 3600)
    led.charge("a", 0, 100, 1)
    led.charge("b", 0, 100, 2)
    led.charge("gone", 0, 100, 5)  # a leaf no longer in the tree: reported by usage, not rolled up
    assert led.rollup(tree, 100) == {"a": 100.0, "b": 200.0, "P": 300.0, "root": 300.0}
    assert led.usage(100)["gone"] == 500.0


def _numpy_usage(led: Ledger, now: float) -> dict[str, float]:
    """The reference: the same sums over numpy arrays (``usage`` before it summed plain
    floats), after ``usage(now)`` folded what it folds."""
    import numpy as np

    if led.origin is None:
        return {leaf: 0.0 for leaf in led.leaves}
    n, b = len(led.leaves), now - led.origin
    a = b - led.lookback_s
    if b < led._tmax:
        out = led._slow(a, b, n)
    else:
        out = np.asarray(led._base) * (b - a) + b * np.asarray(led._s) - np.asarray(led._m)
        for k in range(math.floor(led.horizon / led.bucket_s), math.floor(a / led.bucket_s) + 1):
            if k in led._buckets:
                idx, ts, ds = led._arrays(k)
                mask = ts <= a
                if mask.any():
                    out += np.bincount(idx[mask], weights=ds[mask] * (ts[mask] - a), minlength=n)
    return dict(zip(led.leaves, np.maximum(out, 0.0).tolist()))


def test_usage_in_plain_floats_is_the_numpy_sum_to_the_bit():
    """Continued charges (as the simulator makes them), charges into the future, windows
    whose start falls among kept breakpoints: every answer is bit for bit the numpy one."""
    rnd = random.Random(7)
    corrected = 0
    for _ in range(40):
        leaves = [f"l{i}" for i in range(rnd.choice([1, 3, 17]))]
        led = Ledger(leaves, lookback_s=rnd.choice([900.0, 3600.0]), bucket_s=rnd.choice([60.0, 300.0]))
        now, open_since = 1_700_000_000.0 + rnd.random() * 1000, {}
        for _ in range(300):
            now += rnd.choice([0.0, 7.5, 30.0, 61.25, 400.0])
            leaf = rnd.choice(leaves)
            if rnd.random() < 0.6:  # a stretch at a constant rate ends: charged up to now
                start = open_since.get(leaf, now - 120.0)
                led.charge(leaf, start, now, rnd.choice([1, 2, 8]), rnd.choice([1.0, 1.6]))
                open_since[leaf] = now
            elif rnd.random() < 0.2:  # a charge that ends later (the slow path)
                led.charge(leaf, now, now + rnd.choice([10.0, 500.0]), 1)
            got = led.usage(now)
            want = _numpy_usage(led, now)
            assert got == want and [math.copysign(1, x) for x in got.values()] == [
                math.copysign(1, x) for x in want.values()]
            a = now - (led.origin or 0.0) - led.lookback_s
            corrected += any(t <= a for bucket in led._buckets.values() for _, t in bucket)
    assert corrected > 100  # windows started among kept breakpoints
