"""The schedulers a simulation can run, behind one small interface.

A :class:`Scheduler` is a pure decision function ``(snapshot, config, now) -> Decision`` plus
the rule the shell uses to set ``Running.protected_until`` when it applies an ``Admit``
(the reconciler applies the same rule for the budget scheduler: allocated work is protected
for its min runtime, unallocated work never). Names: ``budget`` (``engine.core.decide``),
``legacy`` and ``monopoly`` (``engine.sim.baselines``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from engine.core.types import Admit, Decision, Snapshot, Workload
from engine.errors import Problem, UserError
from engine.model import Config

DecideFn = Callable[[Snapshot, Config, float], Decision]
ProtectFn = Callable[[Workload, Admit, float], float]


def contract_protection(workload: Workload, admit: Admit, now: float) -> float:
    """Allocated work is protected for its min runtime; unallocated work is preemptible at once."""
    c = workload.contract
    return now + c.min_runtime_s if c.allocated else now


@dataclass(frozen=True)
class Scheduler:
    name: str
    decide: DecideFn
    protect: ProtectFn = contract_protection
    description: str = ""
    reevaluate: bool = True  # re-run every interval while work is pending (ranks move)
    uses_usage: bool = True  # reads Snapshot.usage (the baselines do not: the shell skips it)


NAMES = ("budget", "legacy", "monopoly")


def get_scheduler(name: str | Scheduler) -> Scheduler:
    if isinstance(name, Scheduler):
        return name
    if name == "budget":
        from engine.core.decide import decide

        return Scheduler("budget", decide, contract_protection,
                         "budgets of GPU time: hierarchical fair share with scheduling contracts")
    if name == "legacy":
        from engine.sim.baselines.legacy import legacy_decide, legacy_protection

        return Scheduler("legacy", legacy_decide, legacy_protection,
                         "HIGH/LOW priority, per-team cap on non-preemptible GPUs, "
                         "opt-in preemptible work on idle GPUs", reevaluate=False, uses_usage=False)
    if name == "monopoly":
        from engine.sim.baselines.monopoly import monopoly_decide, monopoly_protection

        return Scheduler("monopoly", monopoly_decide, monopoly_protection,
                         "static per-team GPU quotas in proportion to effective shares",
                         reevaluate=False, uses_usage=False)
    raise UserError([Problem("<command line>", 0, 0, f"unknown scheduler {name!r}",
                             f"choose from {', '.join(NAMES)}")])
