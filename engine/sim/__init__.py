"""The simulator: replay a trace of workloads through a scheduler, event by event.

A shell around the pure decision core, like the reconciler: it builds a
:class:`~engine.core.types.Snapshot` at every schedulable moment, calls a scheduler function
``(snapshot, config, now) -> Decision`` (``engine.core.decide.decide`` or a baseline), and
applies the actions exactly as the reconciler would. Everything is deterministic: the same
config, trace and seed give byte-identical reports.

Public API (stable; the impact and dashboard commands code against it)
-----------------------------------------------------------------------

Traces (``engine.sim.trace``, ``engine.sim.importers``)::

    Task(id, submit, pods, gpus_per_pod, runtime, owner, leaf=None, min_runtime=None,
         resumable=None, priority=0, klass=None, cluster=None,
         line=0)                                                   # frozen; times in seconds
        .gpus -> int                                               # pods * gpus_per_pod
        .funded -> bool                                            # leaf set and min_runtime > 0
    NodeFailure(time, node, repair_s, line=0)                      # node name "h100-n0003"
                                       # (line: of the file it was read from; problems found later say it)
    Trace(tasks, failures=(), name="", meta={})                    # frozen, tasks sorted by (submit, id)
        .span -> float, .owners() -> tuple[str, ...], .window(start, end) -> Trace
    load_trace(path_or_name, *, fmt=None, columns=None) -> Trace   # "philly", "helios", a
        # .csv/.csv.gz/.jsonl/.yaml/.json path in the documented format (schemas/trace.schema.json),
        # or ("generic" fmt) any CSV with a column mapping {field: column}
    save_trace(trace, path)                                        # .csv or .jsonl

Preparing a trace for a config (``engine.sim.prepare``; owners to leaves: ``engine.sim.owners``)::

    prepare_trace(trace, config, *, mapping=None, rules=ContractRules(),
                  demand_ratio_target=None, seed=0) -> Trace
        # owner -> leaf (mapping dict / mapping file path / derived), contracts for tasks
        # without them, time compression to reach the offered demand ratio on config's capacity.
    ContractRules(debug_max_runtime_s=900, resumable_share=0.5, unfunded_share=0.1,
                  large_gpus=64, long_resumable=True)
    placed_and_prepared(trace, config, **how) -> Trace             # prepare_trace, refused (with
        # its own problems) when the trace names a cluster or node the config lacks
    load_mapping(path) -> dict[owner, leaf|None];  derive_mapping(trace, tree) -> dict
    derive_tree(trace, shares="equal"|"demand") -> BudgetTree      # one leaf per owner (leaf_names)
    compression_for_ratio(trace, capacity_gpus, ratio) -> float;  demand_ratio(trace, gpus)
    with_clusters(config, "h100:40,b200") -> Config                # restrict / resize clusters
    cut(trace, start, end, warmup=0.0) -> Trace                    # window [start, end) of the
        # trace plus `warmup` seconds before it, simulated but not measured (meta["measure_from"]);
        # prepare_trace's demand ratio is then the measured window's, compression scales both
    horizon_of(trace) -> float                                     # meta["horizon"] or derived
    synthetic_trace(config, *, days=7, tasks=5000, demand_ratio_target=1.2, seed=0,
                    debug_share=0.3, large_share=0.01, failures_per_node_day=0.01) -> Trace

Running (``engine.sim.engine``, ``engine.sim.experiment``)::

    simulate(config, trace, scheduler="budget"|"legacy"|"monopoly"|Scheduler, *, seed=0,
             horizon=None, options=SimOptions(), progress=None) -> SimResult
        # trace must be prepared (every task has min_runtime and resumable set).
        # progress: callable(sim_now, horizon) or None.
    SimOptions(checkpoint_loss_s=300, restart_overhead_s=120, cadence="watch"|"interval"|"event",
               wall_limit_s=None, causes=False, causes_every_s=None)
        # watch (default): passes as the reconciler runs them (engine.sim.engine docstring)
        # wall_limit_s (benchmarks): stop after that many wall seconds, horizon = where it got
        # causes: count why pending work waits, per team and cause (engine.sim.causes):
        #   SimResult.waiting, summary teams.<team>.waiting_gpu_h, the report's "Why work
        #   waited" and waiting.png; read every causes_every_s (None: the policy's interval)
    run_experiment(config, trace, schedulers=("budget", "legacy"), seed=0, ...,
                   parallel=False) -> Experiment
        # Experiment.results: dict[name, SimResult]; .summary() -> dict (stable keys)
        # parallel: one forked worker per scheduler where it can (engine.sim.forked), same results
    write_report(experiment, outdir, pictures=True, parallel=False, asks=None) -> list[Path]
        # summary.json, report.md, tasks-<scheduler>.csv, gantt.png, usage.png, waits.png,
        # waiting.png (with causes); parallel: the pictures drawn in forked workers, same bytes
    engine.sim.report.text_table(summary) / markdown(summary) / summary_rows(summary)
    engine.sim.plots.plot_gantt(results, path, (start, end)), plot_usage, plot_waits, plot_waiting

Results (``engine.sim.result``, ``engine.sim.metrics``)::

    SimResult
        .scheduler: str, .horizon: float, .config, .trace
        .tasks: dict[id, TaskRecord]      # submit, first_start, end, state, waits, preemptions,
                                          # segments, gpu_s_lost, klass, leaf, funded
        .segments: list[Segment]          # one run of a task on GPUs: task, start, end,
                                          # gpus ((node, (gpu indices...)), ...), protected_until,
                                          # allocated, preempted (ended by preemption), leaf
        .events: list[Event]              # (time, kind, task|node, detail): submit, start,
                                          # preempt, complete, reject, fail, repair, cordon, drained
        .event_log: list[tuple]           # the same lines as plain tuples (as the run keeps them)
        .decide_calls: int, .wall_s: float
        .measure_from: float              # end of the warm-up (0 without); metrics cover
                                          # [measure_from, horizon]; .charged_before: charges
                                          # of the warm-up; .preempt_log: (time, GPU-s lost, charged run)
        .truncated: bool                  # stopped by SimOptions.wall_limit_s
        .metrics() -> Metrics             # cached
        .summary() -> dict                # stable keys, see engine.sim.metrics.SUMMARY_KEYS
        .decide_s: seconds inside the scheduler, .sim_events: events processed
        .idle: GPU-seconds per bucket of engine.sim.idle.BUCKETS (busy, no_work,
               fragmentation, lag, reserved, unhealthy), summing to capacity x horizon
    Metrics (.summary dict, .hours, .capacity_h, .delivered_h/.entitled_h/.demand_h per team
        as hourly numpy arrays of GPU-hours, .waits_by_class): waits (overall / per class / per team: p50, p90, p99, n, censored),
        preemptions, gpu_hours_lost, occupancy, unallocated_share, per team entitled vs delivered
        GPU-hours, teams_at_95, hourly series (capacity, delivered and entitled per team),
        measured_s ([start, end] of the measured window), demand_ratio (offered, queued_mean,
        queued_min, hours_below_capacity).

Command: ``allot simulate`` (``engine.commands.simulate``).
"""

from __future__ import annotations

from engine.sim.apply import SimulationError  # noqa: E402
from engine.sim.engine import SimOptions, simulate  # noqa: E402
from engine.sim.experiment import Experiment, run_experiment  # noqa: E402
from engine.sim.importers import load_trace  # noqa: E402
from engine.sim.clusters import with_clusters  # noqa: E402
from engine.sim.owners import derive_mapping, derive_tree, load_mapping  # noqa: E402
from engine.sim.prepare import (ContractRules, compression_for_ratio, cut, demand_ratio,  # noqa: E402
                                prepare_trace)
from engine.sim.result import Event, Segment, SimResult, TaskRecord  # noqa: E402
from engine.sim.schedulers import Scheduler, get_scheduler  # noqa: E402
from engine.sim.synthetic import synthetic_trace  # noqa: E402
from engine.sim.trace import NodeFailure, Task, Trace, save_trace  # noqa: E402


def write_report(experiment, outdir, pictures: bool = True, parallel: bool = False, asks=None):
    """See :func:`engine.sim.report.write_report` (imported lazily: it loads matplotlib)."""
    from engine.sim.report import write_report as _write

    return _write(experiment, outdir, pictures=pictures, parallel=parallel, asks=asks)
