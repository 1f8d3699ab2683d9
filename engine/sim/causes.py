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

Reading the causes costs about a quarter of a busy pass: working out every pending
workload's cause (``Decision.waiting``) and summing their GPUs per team and cause, 0.3 and
0.4 ms against a 2.6 ms pass with 900 workloads waiting, 0.5 and 0.8 ms against 5.3 ms with
2,100 (captured passes, this host; the sums cost 0.5 and 1.4 ms before they were made
leaner). So causes are read at most once every ``every``
seconds: the policy's scheduling interval for ``allot simulate`` (60 s as shipped; every
pass of the ``interval`` cadence), 5 minutes for the ``allot impact`` replays
(``SimOptions.causes_every_s``). Between readings, work the passes admit stops counting at
once; work that arrives, or is requeued by a preemption, counts from the next reading.
Collected only when asked (``SimOptions.causes``: on for ``allot simulate`` and its report
and for both ``allot impact`` replays, off for the simulator benchmarks).
"""

from __future__ import annotations

from typing import Iterable, Mapping, Sequence

from engine.core.lazymaps import LazyMap
from engine.core.statuses import NO_TEAM
from engine.core.types import Action, Admit, Decision, Workload


class WaitCauses:
    """GPU-seconds waited per team and cause (module docstring); ``every``: seconds between
    readings of the causes."""

    def __init__(self, measure_from: float, every: float):
        self.measure_from, self.every = measure_from, every
        self.gpu_s: dict[str, dict[str, float]] = {}
        self._since: float | None = None
        self._next = -float("inf")  # the next reading, at the first pass from then on
        self._team: dict[str, tuple[str, int]] = {}  # workload -> (team, GPUs): they never change
        self._causes: Mapping[str, str] = {}  # the last reading: waiting workload -> cause
        self._gone: set[str] = set()  # admitted since the last reading
        self._sums: dict[tuple[str, str], int] = {}  # (team, cause) -> GPUs waiting

    def after_pass(self, now: float, pending: Iterable[Workload], decision: Decision) -> None:
        """A pass at ``now`` on ``pending`` made ``decision`` (its actions applied)."""
        self.until(now)
        if now >= self._next:
            self._next = now + self.every
            waiting = decision.waiting
            causes = waiting.plain() if isinstance(waiting, LazyMap) else waiting
            get, team_of = causes.get, self._team
            sums: dict[tuple[str, str], int] = {}
            for w in pending:  # (a loop per pending workload at each reading: kept lean)
                cause = get(w.id)
                if cause is not None:
                    team, gpus = team_of.get(w.id) or self._learn(w)
                    key = (team, cause)
                    sums[key] = sums.get(key, 0) + gpus
            self._causes, self._gone, self._sums = causes, set(), sums
        else:
            self._started(decision.actions)

    def _learn(self, w: Workload) -> tuple[str, int]:
        c = w.contract
        got = self._team[w.id] = (c.requested_budget or NO_TEAM, c.gpus)
        return got

    def _started(self, actions: Sequence[Action]) -> None:
        for a in actions:
            if isinstance(a, Admit):
                wid = a.workload_id
                cause = self._causes.get(wid)
                if cause is not None and wid not in self._gone:
                    self._gone.add(wid)  # (requeued and admitted again: counted once)
                    team, gpus = self._team[wid]
                    self._sums[(team, cause)] -= gpus

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
