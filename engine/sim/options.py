"""The simulator's options: when scheduling passes run, and what a preemption costs.

The cadences are described in :mod:`engine.sim.engine`; the costs are applied by
:mod:`engine.sim.apply`.
"""

from __future__ import annotations

from dataclasses import dataclass

CADENCES = ("watch", "interval", "event")


@dataclass(frozen=True)
class SimOptions:
    """``cadence``: when scheduling passes run (module docstring): ``watch`` (what the
    reconciler does), ``interval`` (the policy's interval grid only) or ``event`` (``watch``
    plus every min-runtime expiry)."""

    checkpoint_loss_s: float = 300.0
    restart_overhead_s: float = 120.0
    cadence: str = "watch"
    # benchmarks only: stop after this many wall-clock seconds, the horizon cut to the
    # instant reached (``SimResult.truncated``); a cut run is not reproducible
    wall_limit_s: float | None = None
    # count why pending work waits, per team and cause (:mod:`engine.sim.causes`; costs a
    # little per pass, so off unless asked: ``allot simulate`` asks)
    causes: bool = False

    def __post_init__(self) -> None:
        if self.cadence not in CADENCES:
            raise ValueError(f"cadence must be one of {', '.join(CADENCES)}, got {self.cadence!r}")
