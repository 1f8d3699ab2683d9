"""Experiments: one prepared trace, several schedulers, one comparable summary.

``run_experiment`` runs each scheduler on the same config and trace (same seed, same options)
and keeps the results side by side; ``Experiment.summary()`` is the JSON the report writes:
``{"experiment": {...what was run...}, "schedulers": {name: SimResult.summary()}}``.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any, Callable, Sequence

from engine.model import Config
from engine.sim.engine import SimOptions, simulate
from engine.sim.prepare import capacity
from engine.sim.result import SimResult
from engine.sim.schedulers import Scheduler
from engine.sim.trace import Trace


@dataclass
class Experiment:
    config: Config
    trace: Trace
    results: dict[str, SimResult]
    seed: int = 0
    options: SimOptions = field(default_factory=SimOptions)
    gantt_window: tuple[float, float] | None = None

    def describe(self) -> dict[str, Any]:
        meta = self.trace.meta
        pol = self.config.policy
        return {
            "trace": self.trace.name,
            "tasks": len(self.trace.tasks),
            "node_failures": len(self.trace.failures),
            "window_s": list(meta["window"]) if meta.get("window") else None,
            "warmup_s": float(meta.get("warmup", 0.0)),
            "compression": meta.get("compression", 1.0),
            "horizon_s": round(float(next(iter(self.results.values())).horizon), 3)
            if self.results else None,
            "config": {"origin": self.config.origin, "revision": self.config.revision,
                       "overrides": list(self.config.overrides),
                       "leaves": len(self.config.tree.leaves()),
                       "clusters": {c.name: {"nodes": c.nodes, "gpus": c.gpus, "gpu_type": c.gpu_type}
                                    for c in pol.clusters},
                       "gpus": capacity(self.config),
                       "lookback_s": pol.lookback_s, "min_runtime_cap_s": pol.min_runtime_cap_s,
                       "scheduling_interval_s": pol.scheduling_interval_s,
                       "reservations": pol.reservations, "reservation_share": pol.reservation_share,
                       "loans": pol.loans},
            "seed": self.seed,
            "options": {"checkpoint_loss_s": self.options.checkpoint_loss_s,
                        "restart_overhead_s": self.options.restart_overhead_s,
                        "cadence": self.options.cadence, "causes": self.options.causes},
            "schedulers": list(self.results),
        }

    def summary(self) -> dict[str, Any]:
        return {"experiment": self.describe(),
                "schedulers": {name: r.summary() for name, r in self.results.items()}}


def run_experiment(config: Config, trace: Trace,
                   schedulers: Sequence[str | Scheduler] = ("budget", "legacy"), *, seed: int = 0,
                   options: SimOptions = SimOptions(), horizon: float | None = None,
                   progress: Callable[[str, float, float], None] | None = None,
                   parallel: bool = False) -> Experiment:
    """Run every scheduler on ``trace`` (prepared). ``progress(name, now, horizon)``.

    ``parallel``: each scheduler in its own forked worker process where the machine allows
    (:func:`engine.sim.forked.run_forked`; the runs are independent and deterministic, so the
    results are the same as one after the other, which is what happens where it cannot fork).
    A worker computes its run's metrics and sends the result back without the configuration
    and trace (not picklable; the same objects here), which are put back."""
    from engine.sim.forked import run_all

    names = [s if isinstance(s, str) else s.name for s in schedulers]

    def run(sched: str | Scheduler, report: Callable[[float, float], None] | None) -> SimResult:
        return simulate(config, trace, sched, seed=seed, horizon=horizon, options=options,
                        progress=report)

    got = run_all([_detached(run, s) for s in schedulers],
                  (lambda i, now, end: progress(names[i], now, end)) if progress else None, parallel)
    results = {n: replace(r, config=config, trace=trace) for n, r in zip(names, got)}
    return Experiment(config, trace, results, seed, options)


def _detached(run: Callable[[str | Scheduler, Callable[[float, float], None] | None], SimResult],
              sched: str | Scheduler) -> Callable[[Callable[[float, float], None]], SimResult]:
    """``sched``'s run for a forked worker: its metrics computed there, and the result sent
    back without the configuration and trace (:func:`run_experiment`; one after the other,
    the same, the two put back just as well)."""
    def go(report: Callable[[float, float], None]) -> SimResult:
        result = run(sched, report)
        result.metrics()
        return replace(result, config=None, trace=None)  # type: ignore[arg-type]  # (put back)

    return go
