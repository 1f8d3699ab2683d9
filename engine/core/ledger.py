"""The usage ledger: charged, billing-weighted GPU-seconds per leaf over a sliding lookback window.

What it answers: ``usage(now)[leaf]`` = the integral over ``(now - lookback, now]`` of the
rate at which ``leaf`` was charged, where each ``charge(leaf, start, end, gpus, weight)``
adds a constant rate of ``gpus * weight`` on ``[start, end)``. Only allocated work is ever
charged (the shells call ``charge`` for allocated work only; unallocated work is free).

How partial intervals are exact
-------------------------------
A leaf's charge rate is a step function. The ledger stores its *breakpoints*: a charge adds
``+r`` at ``start`` and ``-r`` at ``end``. With breakpoints ``(t_i, d_i)`` the exact integral
over ``(a, b]`` (every ``t_i <= b``) is::

    sum_{t_i <= a} d_i * (b - a)  +  sum_{a < t_i <= b} d_i * (b - t_i)

which needs no approximation wherever ``a`` falls. Three things make this cheap:

* breakpoints live in a dict per time bucket (``bucket_s``) keyed by ``(leaf, t)``; a charge
  that continues where the previous one ended (``[t0, t1]`` then ``[t1, t2]``, how the
  simulator charges at every event) cancels the breakpoint at ``t1`` in O(1), so memory is
  proportional to real rate changes (job starts/stops), not to the number of charges;
* running per-leaf sums ``S = sum d_i`` and ``M = sum d_i * t_i`` over kept breakpoints give
  ``sum d_i * (b - t_i) = b*S - M`` in O(leaves), in plain floats (for a few dozen leaves
  numpy's conversions cost more than the sums: 100 µs a read, against a few µs); only
  breakpoints in the few buckets at or before ``a`` are corrected one by one (numpy serves
  the rare window that ends before some breakpoint, a charge made into the future);
* buckets that fall entirely before the window are *folded*: their breakpoints are added to
  a per-leaf ``base`` rate (the rate in force at the ``horizon``) and dropped. This is exact
  for every later window; a window starting before the horizon raises ``ValueError``.

Times are stored relative to ``origin`` (the first bucket charged) so that epoch-second
clocks keep full float precision in ``M``. Leaves charged but not given to the constructor
are added on first use; ``usage`` reports every known leaf (0.0 when unused).
"""

from __future__ import annotations

import math
from typing import Iterable, Mapping

import numpy as np

from engine.model import BudgetTree


class Ledger:
    """Charged GPU-seconds per leaf; see the module docstring for the exact algorithm."""

    def __init__(self, leaves: Iterable[str], lookback_s: float, bucket_s: float = 300.0):
        if lookback_s <= 0 or bucket_s <= 0:
            raise ValueError("lookback_s and bucket_s must be positive")
        self.lookback_s = float(lookback_s)
        self.bucket_s = float(bucket_s)
        self.leaves: list[str] = []
        self._index: dict[str, int] = {}
        self._base: list[float] = []  # rate in force at the horizon (folded breakpoints)
        self._s: list[float] = []  # sum of kept breakpoint deltas
        self._m: list[float] = []  # sum of kept delta * relative time
        self._buckets: dict[int, dict[tuple[int, float], float]] = {}
        self._cache: dict[int, tuple[np.ndarray, np.ndarray, np.ndarray]] = {}
        self.origin: float | None = None
        self.horizon: float = -math.inf  # relative time; breakpoints <= horizon are folded
        self._tmax: float = -math.inf  # latest kept breakpoint (relative)
        self._kmin: int | None = None  # no bucket index below this one exists
        for leaf in leaves:
            self._leaf(leaf)

    # ------------------------------------------------------------------ charging

    def _leaf(self, leaf: str) -> int:
        i = self._index.get(leaf)
        if i is None:
            i = self._index[leaf] = len(self.leaves)
            self.leaves.append(leaf)
            self._base.append(0.0)
            self._s.append(0.0)
            self._m.append(0.0)
        return i

    def _point(self, i: int, t: float, d: float) -> None:
        """Add breakpoint delta ``d`` at relative time ``t`` for leaf index ``i``."""
        if t <= self.horizon:
            self._base[i] += d  # already folded: only the rate after the horizon matters
            return
        k = math.floor(t / self.bucket_s)
        bucket = self._buckets.get(k)
        if bucket is None:
            bucket = self._buckets[k] = {}
            if self._kmin is None or k < self._kmin:
                self._kmin = k
        key = (i, t)
        new = bucket.get(key, 0.0) + d
        if new == 0.0:
            bucket.pop(key, None)
        else:
            bucket[key] = new
        self._cache.pop(k, None)
        self._s[i] += d
        self._m[i] += d * t
        if t > self._tmax:
            self._tmax = t

    def charge(self, leaf: str, start: float, end: float, gpus: float, weight: float = 1.0) -> None:
        """Charge ``gpus * weight`` GPU-seconds per second to ``leaf`` over ``[start, end)``."""
        if end < start:
            raise ValueError(f"charge interval ends before it starts: [{start}, {end}]")
        rate = float(gpus) * float(weight)
        if not (math.isfinite(rate) and math.isfinite(start) and math.isfinite(end)):
            raise ValueError(f"charge of {gpus} GPUs x {weight} over [{start}, {end}] is not finite")
        if rate == 0.0 or end == start:
            return
        if rate < 0:
            raise ValueError(f"negative charge rate {rate}")
        if self.origin is None:
            self.origin = math.floor(start / self.bucket_s) * self.bucket_s
        i = self._leaf(leaf)
        self._point(i, start - self.origin, rate)
        self._point(i, end - self.origin, -rate)

    def charge_many(self, leaves: Iterable[str], starts: Iterable[float], ends: Iterable[float],
                    gpus: Iterable[float], weights: Iterable[float] | None = None) -> None:
        """Charge many intervals at once (same meaning as repeated :meth:`charge`). Charges that
        share a leaf and a start or end time are summed first, so a simulator that charges
        every running workload over the same ``[prev_event, now]`` costs O(leaves) updates."""
        leaves = list(leaves)
        if not leaves:
            return
        s = np.asarray(list(starts), dtype=float)
        e = np.asarray(list(ends), dtype=float)
        r = np.asarray(list(gpus), dtype=float)
        if weights is not None:
            r = r * np.asarray(list(weights), dtype=float)
        if np.any(e < s) or np.any(r < 0):
            raise ValueError("charge_many: an interval ends before it starts or has a negative rate")
        sums: dict[tuple[str, float], float] = {}
        for leaf, a, b, rate in zip(leaves, s.tolist(), e.tolist(), r.tolist()):
            if rate == 0.0 or a == b:
                continue
            sums[(leaf, a)] = sums.get((leaf, a), 0.0) + rate
            sums[(leaf, b)] = sums.get((leaf, b), 0.0) - rate
        if not sums:
            return
        if self.origin is None:
            self.origin = math.floor(min(t for _, t in sums) / self.bucket_s) * self.bucket_s
        for (leaf, t), d in sums.items():
            if d != 0.0:
                self._point(self._leaf(leaf), t - self.origin, d)

    # ------------------------------------------------------------------ querying

    def _fold(self, upto: float) -> None:
        """Fold every bucket that ends at or before relative time ``upto`` into ``base``."""
        last = math.floor(upto / self.bucket_s)  # buckets with index < last end by upto
        if self._kmin is not None and self._kmin < last:
            for k in range(self._kmin, last) if last - self._kmin < 4 * len(self._buckets) + 8 \
                    else sorted(k for k in self._buckets if k < last):
                bucket = self._buckets.pop(k, None)
                if bucket is None:
                    continue
                for (i, t), d in bucket.items():
                    self._base[i] += d
                    self._s[i] -= d
                    self._m[i] -= d * t
                self._cache.pop(k, None)
            self._kmin = last
        new = last * self.bucket_s
        if new > self.horizon:
            self.horizon = new

    def _arrays(self, k: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        cached = self._cache.get(k)
        if cached is None:
            items = self._buckets.get(k, {})
            idx = np.fromiter((i for i, _ in items), dtype=np.int64, count=len(items))
            ts = np.fromiter((t for _, t in items), dtype=float, count=len(items))
            ds = np.fromiter(items.values(), dtype=float, count=len(items))
            cached = self._cache[k] = (idx, ts, ds)
        return cached

    def usage(self, now: float) -> dict[str, float]:
        """Charged GPU-seconds per known leaf in ``(now - lookback, now]``, exact.

        Folds buckets that ended a full bucket before the window start (a side effect that
        changes nothing for this or any later window)."""
        n = len(self.leaves)
        if self.origin is None:
            return {leaf: 0.0 for leaf in self.leaves}
        b = now - self.origin
        a = b - self.lookback_s
        if a < self.horizon:
            raise ValueError(f"window starts before the ledger horizon "
                             f"({a + self.origin} < {self.horizon + self.origin})")
        self._fold(a - self.bucket_s)
        if b < self._tmax:
            out = self._slow(a, b, n).tolist()
        else:
            # per leaf, in plain floats (for a few dozen leaves numpy's conversions cost more
            # than the sums): base * (b - a) + b * S - M, left to right, then the corrections,
            # in the order of each bucket's breakpoints, each bucket's sums added at once
            w = b - a
            base, s, m = self._base, self._s, self._m
            out = [base[i] * w + b * s[i] - m[i] for i in range(n)]
            # breakpoints at or before a count at the rate (b - a), not (b - t): correct them
            for k in range(math.floor(self.horizon / self.bucket_s), math.floor(a / self.bucket_s) + 1):
                bucket = self._buckets.get(k)
                if not bucket:
                    continue
                fix: list[float] | None = None
                for (i, t), d in bucket.items():
                    if t <= a:
                        if fix is None:
                            fix = [0.0] * n
                        fix[i] += d * (t - a)
                if fix is not None:
                    out = [x + y for x, y in zip(out, fix)]
        # float rounding never yields negative usage (a NaN, which no charge makes, stays)
        return {leaf: x if x >= 0.0 or x != x else 0.0 for leaf, x in zip(self.leaves, out)}

    def _slow(self, a: float, b: float, n: int) -> np.ndarray:
        """Exact integral when some breakpoints lie after ``b`` (charges into the future)."""
        out = np.asarray(self._base, dtype=float) * (b - a)
        for k in self._buckets:
            idx, ts, ds = self._arrays(k)
            span = np.clip(b - np.maximum(ts, a), 0.0, None)
            out += np.bincount(idx, weights=ds * span, minlength=n)
        return out

    def rollup(self, tree: BudgetTree, now: float) -> dict[str, float]:
        """Usage of every tree node: a leaf's own usage, an inner node the sum of its subtree.
        Charged leaves unknown to ``tree`` are left out."""
        return rollup_usage(tree, self.usage(now))

    # ------------------------------------------------------------------ persistence

    def to_dict(self) -> dict:
        """A JSON-safe dict (floats, strings, lists) that :meth:`from_dict` restores exactly."""
        events = sorted(
            [self.leaves[i], t, d] for bucket in self._buckets.values() for (i, t), d in bucket.items()
        )
        return {
            "version": 1,
            "lookback_s": self.lookback_s,
            "bucket_s": self.bucket_s,
            "origin": self.origin,
            "horizon": None if self.horizon == -math.inf else self.horizon,
            "leaves": list(self.leaves),
            "base": list(self._base),
            "breakpoints": events,
        }

    @staticmethod
    def from_dict(d: Mapping) -> "Ledger":
        def finite(x: object) -> float:  # (a ledger edited by hand: ValueError, not NaN kept)
            value = float(x)  # type: ignore[arg-type]
            if not math.isfinite(value):
                raise ValueError(f"ledger value {x!r} is not finite")
            return value

        ledger = Ledger([str(leaf) for leaf in d["leaves"]], finite(d["lookback_s"]),
                        finite(d.get("bucket_s", 300.0)))
        origin = d.get("origin")
        ledger.origin = None if origin is None else finite(origin)
        horizon = d.get("horizon")
        ledger.horizon = -math.inf if horizon is None else finite(horizon)
        for leaf, base in zip(d["leaves"], d.get("base", [])):
            ledger._base[ledger._index[str(leaf)]] = finite(base)
        for leaf, t, delta in d.get("breakpoints", []):
            ledger._point(ledger._leaf(str(leaf)), finite(t), finite(delta))
        return ledger

    def merge(self, other: "Ledger") -> None:
        """Add ``other``'s charges into this ledger (e.g. two clusters' ledgers). Both are first
        folded to the later horizon, so the result is exact for windows after it."""
        if other.bucket_s != self.bucket_s:
            raise ValueError(f"cannot merge ledgers with buckets of {other.bucket_s}s and {self.bucket_s}s")
        if other.origin is None:
            return
        if self.origin is None:
            self.origin = other.origin
        shift = other.origin - self.origin
        horizon = max(self.horizon, other.horizon + shift)
        if horizon > -math.inf:
            self._fold(horizon)
        for i, leaf in enumerate(other.leaves):
            j = self._leaf(leaf)
            self._base[j] += other._base[i]  # other's rate at its horizon <= ours: still exact
        for bucket in other._buckets.values():
            for (i, t), d in bucket.items():
                self._point(self._leaf(other.leaves[i]), t + shift, d)


def rollup_usage(tree: BudgetTree, usage: Mapping[str, float]) -> dict[str, float]:
    """Usage of every node of ``tree``: leaves from ``usage`` (missing = 0), inner nodes summed."""
    out: dict[str, float] = {}
    get = usage.get
    for name, kids in tree.bottom_up():  # children before parents
        out[name] = sum(map(out.__getitem__, kids)) if kids else float(get(name, 0.0))
    return out
