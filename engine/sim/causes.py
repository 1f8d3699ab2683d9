"""Why work waited: GPU-hours of pending work per team and cause, from the decisions.

After a pass the budget scheduler's :class:`~engine.core.types.Decision` says, in one word,
why each workload still waits (``Decision.waiting``,
:func:`engine.core.statuses.waiting_causes`: no room even with every victim it may take, the
anti-ping-pong rule, kept off reservations, holding a timed reservation or a drain hold, no
reservation possible, free work). The workload waits for that cause until the next reading,
so its GPUs times that time add to its team's count for the cause (its trace leaf, which its
contract requests whether funded or not, as the metrics count teams); only time in the
measured window counts (after a warm-up). A baseline scheduler gives no causes: its
counts stay empty.

Reading ``Decision.waiting`` makes the decision work out every pending workload's cause,
which costs about a tenth of a busy pass (0.36 of 3.4 ms with 900 workloads waiting; 0.9 of
8.5 ms with 2,100), so causes are read at most once per policy scheduling interval (60 s as shipped; every pass of the ``interval`` cadence). Between
readings, work the passes admit stops counting at once; work that arrives, or is requeued by
a preemption, counts from the next reading. Collected only when asked
(``SimOptions.causes``: on for ``allot simulate`` and its report and for both ``allot impact``
replays, off for the simulator benchmarks).
"""

from __future__ import annotations

from typing import Iterable, Sequence

from engine.core.explain import LazyMap
from engine.core.types import Action, Admit, Decision, Workload
from engine.sim.metrics import NO_LEAF


class WaitCauses:
    """GPU-seconds waited per team and cause (module docstring); ``every``: seconds between
    readings of the causes."""

    def __init__(self, measure_from: float, every: float):
        self.measure_from, self.every = measure_from, every
        self.gpu_s: dict[str, dict[str, float]] = {}
        self._since: float | None = None
        self._next = -float("inf")  # the next reading, at the first pass from then on
        self._of: dict[str, tuple[str, str, int]] = {}  # waiting workload -> (team, cause, GPUs)
        self._sums: dict[tuple[str, str], int] = {}  # (team, cause) -> GPUs waiting

    def after_pass(self, now: float, pending: Iterable[Workload], decision: Decision) -> None:
        """A pass at ``now`` on ``pending`` made ``decision`` (its actions applied)."""
        self.until(now)
        if now >= self._next:
            self._next = now + self.every
            waiting = decision.waiting
            get = (waiting.plain() if isinstance(waiting, LazyMap) else waiting).get
            self._of = {w.id: (w.contract.requested_budget or NO_LEAF, cause, w.contract.gpus)
                        for w in pending if (cause := get(w.id)) is not None}
            sums: dict[tuple[str, str], int] = {}
            for team, cause, gpus in self._of.values():
                sums[(team, cause)] = sums.get((team, cause), 0) + gpus
            self._sums = sums
        else:
            self._started(decision.actions)

    def _started(self, actions: Sequence[Action]) -> None:
        for a in actions:
            if isinstance(a, Admit):
                gone = self._of.pop(a.workload_id, None)
                if gone is not None:
                    self._sums[gone[:2]] -= gone[2]

    def until(self, t: float) -> None:
        """Count the waiting since the last pass up to ``t`` (the next pass or the horizon)."""
        if self._since is not None:
            start = max(self._since, self.measure_from)
            if t > start:
                for (team, cause), gpus in self._sums.items():
                    if gpus:
                        mine = self.gpu_s.setdefault(team, {})
                        mine[cause] = mine.get(cause, 0.0) + gpus * (t - start)
        self._since = t
