"""Charging in the simulator: the usage ledger fed by each leaf's piecewise-constant rate.

A leaf's rate is the billing-weighted GPUs of its *allocated* running work (GPU-seconds charged
per second); it changes only when such work starts or stops. The ledger gets one charge per
leaf and constant-rate stretch (when the rate changes), and the open stretch is added to
``Ledger.usage(now)`` when a pass reads it (capped at the lookback window), so usage is exact
and reading it costs O(leaves), not O(running). Unallocated work is never charged: it has no
rate. ``charged`` totals every leaf's GPU-seconds since the start, for the report.
"""

from __future__ import annotations

from typing import Iterable

from engine.core.ledger import Ledger


class Charges:
    """The ledger plus the open constant-rate stretch of every leaf."""

    def __init__(self, leaves: Iterable[str], lookback_s: float):
        leaves = list(leaves)
        self.ledger = Ledger(leaves, lookback_s)
        self.rate: dict[str, float] = {}  # leaf -> billing-weighted GPUs charged per second
        self.since: dict[str, float] = {}  # leaf -> start of its current constant stretch
        self.charged: dict[str, float] = {leaf: 0.0 for leaf in leaves}  # GPU-s since the start

    def set_rate(self, leaf: str | None, now: float, delta: float) -> None:
        """Change ``leaf``'s rate by ``delta`` at ``now``, charging the stretch that ends."""
        assert leaf is not None, "only funded work is charged, and funded work has a leaf"
        r = self.rate.get(leaf, 0.0)
        since = self.since.get(leaf, now)
        if r > 0 and now > since:
            self.ledger.charge(leaf, since, now, r)
            self.charged[leaf] += r * (now - since)
        r += delta
        self.rate[leaf] = r if r >= 1e-9 else 0.0
        self.since[leaf] = now

    def charge_until(self, now: float) -> None:
        """Charge every open stretch up to ``now`` (the end of a run); rates stay as they are."""
        for leaf in list(self.rate):
            self.set_rate(leaf, now, 0.0)

    def usage(self, now: float) -> dict[str, float]:
        """``Ledger.usage(now)`` plus every leaf's open constant-rate stretch (exact)."""
        out = self.ledger.usage(now)
        lookback = self.ledger.lookback_s
        since = self.since
        for leaf, r in self.rate.items():
            if r > 0:
                open_s = now - since[leaf]
                out[leaf] = out.get(leaf, 0.0) + r * (open_s if open_s < lookback else lookback)
        return out

    def totals_at(self, when: float) -> dict[str, float]:
        """``charged`` as it stands at ``when`` (no later than now), open stretches included:
        what the warm-up charged when it ends there."""
        return {leaf: c + self.rate.get(leaf, 0.0) * (when - self.since.get(leaf, when))
                for leaf, c in self.charged.items()}
