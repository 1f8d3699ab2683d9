"""``allot simulate``: replay a trace through the budget scheduler beside a baseline.

With no arguments it is the README's main job on the embedded default (:data:`DEFAULT`):
this repo's ``budgets/`` and ``policies/``, 36 h of the bundled Philly trace (its days
42-43.5, 2017-10-16 10:30 to 10-17 22:30 UTC) after a 12 h warm-up, on the h100 cluster
resized to 24 nodes (192 GPUs), compressed so the window's offered GPU-time is 1.1x
capacity; the legacy scheduler beside the budget scheduler; a summary table on stdout and
the report in ``./allot-report/``, with ``run.json``, from which the view commands show the
budget run at any instant (``allot explain JOB --report allot-report --at TIME``).

Why this default: the brief's clusters ran with demand 2-3x capacity at all times, so the
default keeps demand above capacity in every measured hour (the report's "queued demand"
rows: about 3x on average, at least 1.1x in the lowest hour; no GPU-time idle for want of
work). Philly's days 42-43.5 are busy throughout; the warm-up (simulated, not measured) opens
the window on a full cluster, a standing queue and a charged ledger, as a running reconciler
finds them; 192 GPUs at 1.1x keep the run under a minute on a 2-core machine (it is
``decide()``-bound: about 9,000 passes). A longer replay is a flag away, e.g.
``--window 28d:35d --warmup 1d --cluster h100:40`` (a week on 320 GPUs, several minutes).

To weigh a knob before proposing it: ``--sweep placement.reservationShare=0.1,0.15,0.25`` runs
the budget scheduler once per value and prints the same table with a column per value
(:mod:`engine.commands.sweep`).
"""

from __future__ import annotations

import argparse
import json
import shlex
import sys
import time
from pathlib import Path

from engine import accel
from engine.commands import (days, non_negative, output_dir, remove_outputs, runrecord, seconds_arg,
                             seed, tasks)
from engine.commands.progress import Progress
from engine.commands.siminputs import (DEFAULT, SYNTHETIC_TASKS, build_experiment_inputs, sim_options,
                                       synthetic_shortfall)
from engine.errors import Problem, UserError


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("simulate", help="replay a trace: budget scheduler vs baselines, with a report",
                       description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--trace", default=DEFAULT["trace"],
                   help="bundled trace (philly, helios), 'synthetic', or a trace file "
                        "(.csv/.csv.gz/.jsonl/.yaml in schemas/trace.schema.json) [%(default)s]")
    p.add_argument("--trace-format", choices=["allot", "philly", "helios", "generic"],
                   help="read --trace as this format (generic needs --columns)")
    p.add_argument("--columns", help="generic CSV column mapping: field=column,... "
                                     "(submit, runtime, owner, gpus or pods/gpus_per_pod; optional id, "
                                     "leaf, min_runtime, resumable, priority, class)")
    p.add_argument("--mapping", help="owner -> leaf mapping file (default: the bundled trace's "
                                     "mapping.yaml, else derived by demand)")
    p.add_argument("--tree", choices=["repo", "equal", "demand"], default="repo",
                   help="budget tree: the repo's, or one leaf per trace owner with equal or "
                        "demand-proportional shares [%(default)s]")
    p.add_argument("--root", default=None,
                   help="repository with budgets/ and policies/ [the current directory or its "
                        "nearest parent that has both, else the embedded default]")
    p.add_argument("--rev", help="git revision of --root to load the config from (default: work tree)")
    p.add_argument("--set", action="append", default=[], metavar="KNOB=VALUE",
                   help="replace a knob of policies/scheduling.yaml for this run, e.g. "
                        "placement.loans=true or placement.reservationShare=0.1 (repeatable; "
                        "checked like the file)")
    p.add_argument("--baseline", default=None,
                   help=f"comma-separated baselines run beside the budget scheduler: legacy, "
                        f"monopoly, or none [{DEFAULT['baseline']}]")
    p.add_argument("--sweep", action="append", default=[], metavar="KNOB=V1,V2,...",
                   help="run the budget scheduler once per value of a knob of "
                        "policies/scheduling.yaml (each checked like --set) and compare them in "
                        "one table, e.g. placement.reservationShare=0.1,0.15,0.25; repeated: every "
                        "combination. Writes sweep.json, sweep.md and sweep.png to --out "
                        "[allot-sweep]")
    p.add_argument("--window", default=None,
                   help=f"START:END of the trace to replay, as durations from its start "
                        f"(e.g. 28d:42d) [{DEFAULT['window']} for the default trace]")
    p.add_argument("--days", type=days, help="replay this many days from the window start "
                                                    "(a synthetic trace: its length, 7 by default)")
    p.add_argument("--warmup", default=None,
                   help=f"also replay this much of the trace before the window, unmeasured, so the "
                        f"window opens on a full cluster, a standing queue and a charged ledger "
                        f"[{DEFAULT['warmup']} for the default trace, else 0]")
    p.add_argument("--demand-ratio", type=non_negative, default=None,
                   help=f"compress time so offered demand / capacity is this "
                        f"[{DEFAULT['demand_ratio']}; 0 keeps the trace's own rate]")
    p.add_argument("--cluster", default=None,
                   help=f"clusters to simulate: name or name:nodes, comma-separated "
                        f"[{DEFAULT['cluster']} for bundled traces; the config's otherwise]")
    p.add_argument("--tasks", type=tasks, default=None, help=f"tasks of a synthetic trace [{SYNTHETIC_TASKS}]")
    p.add_argument("--cadence", choices=["watch", "interval", "event"], default="watch",
                   help="when passes run: watch = as the reconciler (at every submission, completion "
                        "and node change, plus a resync one interval after the last pass while work "
                        "waits); interval = only on the policy's interval grid; event = watch plus "
                        "every min-runtime expiry [%(default)s]")
    p.add_argument("--checkpoint-loss", type=seconds_arg, default=300.0, metavar="DURATION",
                   help="progress a preempted resumable job loses (its work since its last "
                        "checkpoint), e.g. 5m or 0 [5m]")
    p.add_argument("--restart-overhead", type=seconds_arg, default=120.0, metavar="DURATION",
                   help="time every run of a job after its first spends before it makes progress "
                        "again (loading, warm-up) [2m]")
    p.add_argument("--out", default=None, help="report directory [allot-report]")
    p.add_argument("--no-pictures", action="store_true", help="skip the PNGs")
    p.add_argument("--seed", type=seed, default=0, help="seed for contracts and synthetic traces [%(default)s]")
    p.add_argument("--format", choices=["text", "json"], default="text",
                   help="stdout: summary table or the JSON summary [%(default)s]")
    p.add_argument("--progress", action="store_true", help="show progress on stderr even when not a TTY")
    p.add_argument("--jobs", type=int, choices=(1, 2), default=2,
                   help="2: the budget scheduler and the baselines in parallel worker processes "
                        "where the machine has the cores; 1: one after the other (same results) "
                        "[%(default)s]")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from engine.sim.experiment import run_experiment
    from engine.sim.report import REPORT_FILES, short_teams, text_table, write_report
    from engine.sim.schedulers import NAMES

    if args.sweep:
        from engine.commands import sweep

        return sweep.run(args)
    args.out = args.out or "allot-report"
    args.baseline = args.baseline or DEFAULT["baseline"]
    baselines = [b.strip() for b in args.baseline.split(",") if b.strip() and b.strip() != "none"]
    bad = [b for b in baselines if b not in NAMES or b == "budget"]
    refused = [Problem("--baseline", 0, 0, f"unknown baseline(s) {', '.join(bad)}",
                       "choose from legacy, monopoly, none")] if bad else []
    t0 = time.monotonic()
    try:
        config, trace = build_experiment_inputs(args)
    except UserError as err:  # (with a bad --baseline: every problem at once)
        raise UserError(refused + list(err.problems)) from None
    if refused:
        raise UserError(refused)
    output_dir("--out", args.out)  # before the simulation; not made when the inputs are refused
    names = ["budget", *baselines]
    progress = Progress(args.progress or sys.stderr.isatty(), names)
    exp = run_experiment(config, trace, names, seed=args.seed,
                         options=sim_options(args, causes=True), progress=progress,
                         parallel=args.jobs > 1)
    progress.finish()
    summary = exp.summary()
    asks = short_teams(exp.results["budget"], summary["schedulers"]["budget"])  # (report.md's too)
    remove_outputs(Path(args.out), REPORT_FILES)  # (the directory holds this run's report only)
    paths = write_report(exp, args.out, pictures=not args.no_pictures, parallel=args.jobs > 1,
                         asks=asks)
    paths.append(runrecord.write(args.out, runrecord.record(args, config, trace,
                                                            exp.results["budget"].horizon)))
    if args.format == "json":
        print(json.dumps(summary, indent=2, sort_keys=True))
    else:
        d = summary["experiment"]
        first = next(iter(summary["schedulers"].values()))
        lo, hi = first["measured_s"]
        warm = (f", the first {lo / 3600:.1f} h a warm-up (not measured)" if lo > 0 else "")
        print(f"{d['trace']}: {d['tasks']} tasks, {d['config']['gpus']} GPUs, "
              f"{hi / 86400:.2f} simulated days{warm}, time compression x{d['compression']:.3g}")
        short = synthetic_shortfall(trace.meta, args)
        if short:
            print(f"note: {short}", file=sys.stderr)
        print(text_table(summary))
        walls = ", ".join(f"{n} {r.wall_s:.1f}s ({r.decide_calls} passes, "
                          f"{1000 * r.decide_s / max(1, r.decide_calls):.1f} ms each)"
                          for n, r in exp.results.items())
        core = "; compiled core (allot build-core)" if accel.active() is not None else ""
        print(f"wall: {time.monotonic() - t0:.1f}s total; {walls}{core}")
        print(f"report: {Path(args.out) / 'report.md'} ({len(paths)} files); why a job of the budget "
              f"run waited: allot explain JOB --report {shlex.quote(args.out)} [--at TIME]")
        named = [(a, a.job) for a in asks if a.job is not None and a.at is not None]
        if named:  # (the worst team's; report.md has them all)
            a, job = named[0]
            print(f"{a.leaf} got {100 * a.ratio:.1f}% of its entitlement; ask why its job {job.id} "
                  f"waited: allot explain {job.id} --report {shlex.quote(args.out)} --at {a.at} (or "
                  f"--timeline); report.md has one such job per team short ({len(named)})")
    return 0
