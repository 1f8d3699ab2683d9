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
    plus every min-runtime expiry). ``checkpoint_loss_s``: the progress a preempted resumable
    run loses (since its last checkpoint); ``restart_overhead_s``: what every run after the
    first spends before it makes progress again (``allot simulate --checkpoint-loss
    --restart-overhead``)."""

    checkpoint_loss_s: float = 300.0
    restart_overhead_s: float = 120.0
    cadence: str = "watch"
    # benchmarks only: stop after this many wall-clock seconds, the horizon cut to the
    # instant reached (``SimResult.truncated``); a cut run is not reproducible
    wall_limit_s: float | None = None
    # count why pending work waits, per team and cause (:mod:`engine.sim.causes`; each
    # reading costs about a quarter of a busy pass, so off unless asked: ``allot simulate`` and
    # ``allot impact`` ask), read every ``causes_every_s`` seconds at most (None: the
    # policy's scheduling interval)
    causes: bool = False
    causes_every_s: float | None = None

    def __post_init__(self) -> None:
        for name in ("checkpoint_loss_s", "restart_overhead_s"):
            value = getattr(self, name)
            if not 0 <= value < float("inf"):
                raise ValueError(f"{name} must be a number of seconds >= 0, got {value!r}")
        if self.causes_every_s is not None and not self.causes_every_s > 0:
            raise ValueError(f"causes_every_s must be > 0, got {self.causes_every_s!r}")
        if self.cadence not in CADENCES:
            raise ValueError(f"cadence must be one of {', '.join(CADENCES)}, got {self.cadence!r}")
