"""What a simulation run produces: per-task records, GPU segments, the event log.

A :class:`Segment` is one uninterrupted run of a task on specific GPUs (the bars of the
Gantt); a task that is preempted and admitted again has several. ``protected_until`` is when
the run became preemptible (the segment's start for unallocated work, ``inf`` for work a
baseline never preempts); ``preempted`` says the run ended by preemption (the red edge).
A :class:`TaskRecord` sums a task's life: its first wait (the queue wait the metrics report),
its total time queued, preemptions and the GPU-seconds they wasted.

``SimResult.summary()`` is the stable, JSON-safe dictionary of
:func:`engine.sim.metrics.compute_metrics`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

from engine.model import Config
from engine.sim.options import SimOptions
from engine.sim.trace import Trace

TaskState = Literal["pending", "running", "done", "rejected", "killed"]


@dataclass(frozen=True, slots=True)
class Segment:
    task: str
    leaf: str | None
    start: float
    end: float
    gpus: tuple[tuple[str, tuple[int, ...]], ...]
    protected_until: float
    allocated: bool
    preempted: bool

    @property
    def gpu_count(self) -> int:
        return sum(len(idx) for _, idx in self.gpus)


@dataclass(frozen=True, slots=True)
class Event:
    """One line of the event log: ``kind`` is submit, start, preempt, complete, reject, kill,
    fail, repair, cordon or drained; ``subject`` a task id or node name."""

    time: float
    kind: str
    subject: str
    detail: str = ""


@dataclass(frozen=True, slots=True)
class TaskRecord:
    id: str
    owner: str
    leaf: str | None
    klass: str
    gpus: int
    funded: bool
    submit: float
    first_start: float | None
    end: float | None
    state: TaskState
    queued_s: float
    preemptions: int
    gpu_s_lost: float
    runs: int

    @property
    def wait(self) -> float | None:
        """Seconds from submission to first start (None if it never started)."""
        return None if self.first_start is None else self.first_start - self.submit


@dataclass
class SimResult:
    scheduler: str
    config: Config
    trace: Trace
    horizon: float
    tasks: dict[str, TaskRecord]
    segments: list[Segment]
    # the event log as plain (time, kind, subject, detail) tuples, as the run writes it: a long
    # run's hundreds of thousands of lines cost no object construction and, being tuples of
    # floats and strings, drop out of the garbage collector's scans; ``events`` reads them
    event_log: list[tuple[float, str, str, str]]
    failures: list[tuple[str, float, float | None, float | None]]  # node, failed, drained, repaired
    charged: dict[str, float]  # billing-weighted GPU-seconds per leaf
    decide_calls: int = 0
    sim_events: int = 0
    wall_s: float = 0.0
    decide_s: float = 0.0
    idle: dict[str, float] = field(default_factory=dict)  # GPU-seconds per engine.sim.idle bucket
    measure_from: float = 0.0  # end of the warm-up: metrics cover [measure_from, horizon]
    charged_before: dict[str, float] = field(default_factory=dict)  # charged during the warm-up
    # (time, GPU-s lost, whether the run was charged to a budget)
    preempt_log: list[tuple[float, float, bool]] = field(default_factory=list)
    truncated: bool = False  # stopped early by SimOptions.wall_limit_s (horizon = where it got)
    # team -> cause -> GPU-seconds waited (engine.sim.causes; empty unless SimOptions.causes)
    waiting: dict[str, dict[str, float]] = field(default_factory=dict)
    # the options it ran with: when its passes ran (a forecast from it runs so) and what a
    # preemption cost (a view's remaining runtimes are reckoned so)
    options: SimOptions = field(default_factory=SimOptions)
    _metrics: Any = field(default=None, repr=False)
    _events: list[Event] | None = field(default=None, repr=False, compare=False)

    @property
    def events(self) -> list[Event]:
        """The event log, in the order of the run (made from :attr:`event_log` once)."""
        if self._events is None:
            self._events = [Event(*line) for line in self.event_log]
        return self._events

    def metrics(self):  # -> engine.sim.metrics.Metrics
        if self._metrics is None:
            from engine.sim.metrics import compute_metrics

            self._metrics = compute_metrics(self)
        return self._metrics

    def summary(self) -> dict[str, Any]:
        return self.metrics().summary
