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
from typing import TypedDict

from engine import accel
from engine.commands import (days, non_negative, output_dir, remove_outputs, runrecord, seconds_arg,
                             seed, tasks)
from engine.commands.progress import ProgressLine, bar
from engine.durations import approx_duration, parse_duration
from engine.errors import Problem, UserError


class Defaults(TypedDict):
    """The embedded default experiment's settings (see :data:`DEFAULT`)."""

    trace: str
    window: str
    warmup: str
    cluster: str
    demand_ratio: float
    baseline: str


# The embedded default experiment (each value is also a flag's default).
DEFAULT: Defaults = {
    "trace": "philly",
    "window": "42d:43d12h",     # 36 h of Philly (2017-10-16 10:30 to 10-17 22:30 UTC), busy all along
    "warmup": "12h",            # + the 12 h before it, simulated but not measured
    "cluster": "h100:24",       # 192 H100 GPUs (one 16-node InfiniBand block + 8 nodes)
    "demand_ratio": 1.1,        # offered GPU-time / capacity over the window
    "baseline": "legacy",
}


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
                   help="repository with budgets/ and policies/ [the current directory when it "
                        "has both, else the embedded default]")
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


def _duration(flag: str, text: str, hint: str) -> float:
    """``text`` (a flag's duration; ``0`` or empty: 0) in seconds, or its problem."""
    try:
        return parse_duration(text) if text not in ("", "0") else 0.0
    except ValueError as err:
        raise UserError([Problem(flag, 0, 0, str(err), hint)]) from None


def _window(text: str) -> tuple[float, float | None]:
    start, sep, end = text.partition(":")
    try:
        a = parse_duration(start) if start else 0.0
        b = parse_duration(end) if end else None
    except ValueError as err:
        raise UserError([Problem("--window", 0, 0, str(err), "write START:END, e.g. 28d:42d")]) from None
    if not sep or (b is not None and b <= a):
        raise UserError([Problem("--window", 0, 0, f"bad window {text!r}", "write START:END with END > START")])
    return a, b


def knob_values(settings: list[str], flag: str = "--set") -> dict[str, object]:
    """``--set KNOB=VALUE`` flags as {knob: value}, each value read as YAML (``true``, ``0.1``,
    ``7d``), as it would be in the file; problems name ``flag``."""
    import yaml

    out: dict[str, object] = {}
    problems: list[Problem] = []
    for item in settings:
        key, sep, text = item.partition("=")
        if not sep or not key.strip():
            problems.append(Problem(flag, 0, 0, f"{item!r} is not KNOB=VALUE",
                                    f"write e.g. {flag} placement.loans=true", "usage"))
            continue
        try:
            out[key.strip()] = yaml.safe_load(text)
        except yaml.YAMLError:
            problems.append(Problem(flag, 0, 0, f"{item!r}: the value is not YAML",
                                    "quote it the way the policy file would", "usage"))
    if problems:
        raise UserError(problems)
    return out


SYNTHETIC_TASKS = 20000  # --tasks of a synthetic trace


def _check_trace_flags(args: argparse.Namespace) -> list[Problem]:
    """A flag that does nothing for the chosen trace is a mistake to report, not to ignore: the
    problems."""
    if args.trace == "synthetic":
        given = [flag for flag, value in (("--window", args.window), ("--warmup", args.warmup),
                                          ("--mapping", args.mapping), ("--columns", args.columns),
                                          ("--trace-format", args.trace_format))
                 if value is not None] + (["--tree"] if args.tree != "repo" else [])
        hint = "drop it; a synthetic trace is generated for the config's leaves (--days, --tasks)"
        if args.demand_ratio == 0:  # ("keep the trace's rate": a generated trace has none)
            return [Problem("--demand-ratio", 0, 0, "0 keeps a trace's own rate, and a synthetic "
                            "trace has none: it is generated to offer a ratio",
                            "give a ratio above 0 (1.1 when not given)", "usage")]
    else:
        given = ["--tasks"] if args.tasks is not None else []
        hint = "drop it, or use --trace synthetic"
    problems = [Problem(flag, 0, 0, f"does not apply to --trace {args.trace}", hint, "usage")
                for flag in given]
    if args.trace != "synthetic":
        if args.columns is not None and args.trace_format not in (None, "generic"):
            problems.append(Problem("--columns", 0, 0, f"does not apply to --trace-format {args.trace_format}",
                                    "--columns maps the columns of a generic CSV: drop it, or use "
                                    "--trace-format generic", "usage"))
        elif args.columns is not None and args.trace in bundled_traces() and args.trace_format is None:
            problems.append(Problem("--columns", 0, 0, f"does not apply to the bundled trace {args.trace}",
                                    "--columns maps the columns of your own CSV: drop it", "usage"))
        if args.mapping is not None and args.tree != "repo":
            problems.append(Problem("--mapping", 0, 0, f"does not apply with --tree {args.tree}",
                                    "a derived tree has a leaf per trace owner, each owner mapped to its "
                                    "own: drop --mapping, or use --tree repo", "usage"))
    return problems


def bundled_traces() -> tuple[str, ...]:
    from engine.sim.importers import BUNDLED

    return tuple(BUNDLED)


_COLUMN_FIELDS = ("submit", "runtime", "owner", "gpus", "pods", "gpus_per_pod", "id", "leaf",
                  "min_runtime", "resumable", "priority", "class")


def column_mapping(text: str) -> dict[str, str]:
    """``--columns field=column,...`` read, every entry checked (each problem said once)."""
    out: dict[str, str] = {}
    problems = []
    for entry in (e.strip() for e in text.split(",")):
        field, eq, column = entry.partition("=")
        field, column = field.strip(), column.strip()
        if not eq or not field or not column:
            problems.append(Problem("--columns", 0, 0, f"{entry!r} is not FIELD=COLUMN",
                                    "e.g. --columns submit=ts,runtime=duration,gpus=num_gpus,owner=vc", "usage"))
        elif field not in _COLUMN_FIELDS:
            problems.append(Problem("--columns", 0, 0, f"unknown field {field!r}",
                                    f"the fields: {', '.join(_COLUMN_FIELDS)}", "usage"))
        elif field in out:
            problems.append(Problem("--columns", 0, 0, f"field {field!r} is mapped twice",
                                    "map each field to one column", "usage"))
        else:
            out[field] = column
    if problems:
        raise UserError(problems)
    return out


def knob_problems(flag: str, point: list[tuple[str, str]], overrides: dict[str, object],
                  root: str | None, rev: str | None) -> list[Problem]:
    """The problems of the configuration with ``overrides`` (the knobs of ``point``, as
    ``KNOB``, ``VALUE`` texts, set), each said of ``flag`` and those values rather than of the
    policy file, which holds another value: ``--set placement.loans=maybe: placement.loans
    must be true or false, got string 'maybe' (the knob is at policies/scheduling.yaml:38)``.
    An unknown knob is said as it is. None when the configuration loads."""
    from engine.loader import load_config

    try:
        load_config(root, rev=rev, overrides=overrides)
    except UserError as err:
        where = ", ".join(f"{k}={v}" for k, v in point)
        return [Problem(flag, 0, 0, (p.message if p.code == "unknown-knob" else f"{where}: {p.message}")
                        + (f" (the knob is at {p.file}:{p.line})" if p.line else ""), p.hint, p.code)
                for p in err.problems]
    return []


def load_with_settings(root: str | None, rev: str | None, settings: list[str]):
    """The configuration at ``root`` (``rev``) with ``--set`` ``settings``: the files' own
    problems as they are, then every refused setting at once, each said of ``--set``
    (:func:`knob_problems`), first each setting alone, then all together (a rule may relate
    two knobs)."""
    from engine.loader import load_config

    if not settings:
        return load_config(root, rev=rev)
    values = knob_values(settings)
    try:
        return load_config(root, rev=rev, overrides=values)
    except UserError:
        pass
    load_config(root, rev=rev)  # (the files' own problems, as they are)
    point = [(item.partition("=")[0].strip(), item.partition("=")[2]) for item in settings]
    problems: list[Problem] = []
    for (k, v), item in zip(point, settings):
        problems += [p for p in knob_problems("--set", [(k, v)], knob_values([item]), root, rev)
                     if p not in problems]
    raise UserError(problems or knob_problems("--set", point, values, root, rev))


def build_experiment_inputs(args: argparse.Namespace, overrides: dict[str, object] | None = None):
    """(config, prepared trace) from the parsed flags (``overrides``: the knobs set, instead
    of ``--set``'s)."""
    from dataclasses import replace

    from engine.loader import load_config
    from engine.sim.importers import BUNDLED, load_trace
    from engine.sim.clusters import unknown_places, with_clusters
    from engine.sim.prepare import cut, derive_tree, leaf_names, prepare_trace
    from engine.sim.synthetic import synthetic_trace

    # every flag checked before any is refused, so one run shows all their problems
    problems = _check_trace_flags(args)

    def gathered(check):
        try:
            return check()
        except UserError as err:
            problems.extend(err.problems)
            return None

    config = gathered(lambda: load_with_settings(args.root, args.rev, args.set) if overrides is None
                      else load_config(args.root, rev=args.rev, overrides=overrides))
    bundled = args.trace in BUNDLED and not args.trace_format
    cluster = args.cluster if args.cluster is not None else (DEFAULT["cluster"] if bundled else None)
    if config is not None:
        config = gathered(lambda: with_clusters(config, cluster))
    window = args.window if args.window is not None else (
        DEFAULT["window"] if args.trace == DEFAULT["trace"] and not args.trace_format else None)
    ratio = args.demand_ratio if args.demand_ratio is not None else DEFAULT["demand_ratio"]
    if args.trace != "synthetic":
        columns = gathered(lambda: column_mapping(args.columns) if args.columns else None)
        warmup = args.warmup if args.warmup is not None else (
            DEFAULT["warmup"] if args.trace == DEFAULT["trace"] and not args.trace_format else "0")
        lead = gathered(lambda: _duration("--warmup", warmup, "write a duration, e.g. 2d or 36h")) or 0.0
        bounds = gathered(lambda: _window(window)) if window else (0.0, None)
        if args.mapping is not None and not Path(args.mapping).is_file():
            problems.append(Problem(args.mapping, 0, 0, "no mapping file here",
                                    "give the path of a mapping file (--mapping): owners: {<trace owner>: "
                                    "<budget leaf>}", "missing"))
    if problems or config is None:
        raise UserError(problems)
    if args.trace == "synthetic":
        days = args.days or 7.0
        trace = synthetic_trace(config, days=days, tasks=args.tasks or SYNTHETIC_TASKS,
                                demand_ratio_target=ratio,
                                seed=args.seed)
        return config, prepare_trace(trace, config, seed=args.seed)
    trace = load_trace(args.trace, fmt=args.trace_format, columns=columns)
    span = trace.span
    if window or args.days or lead:
        a, b = bounds
        if args.days:
            b = a + args.days * 86400.0
        trace = cut(trace, a, b, lead)
    if not trace.tasks:
        if window or args.days or lead:
            problem = Problem(str(args.trace), 0, 0, "the part of the trace replayed (--window, --days) "
                              "holds no GPU work", f"choose a part with jobs in it: the trace's jobs are "
                              f"submitted over its first {approx_duration(span)}", "empty")
        else:
            problem = Problem(str(args.trace), 0, 0, "the trace holds no GPU work to replay",
                              "give a trace with jobs in it", "empty")
        raise UserError([problem])
    mapping = args.mapping
    if args.tree != "repo":
        tree = derive_tree(trace, args.tree)
        config = replace(config, tree=tree, origin=f"{config.origin} (tree derived: {args.tree})")
        mapping = leaf_names(trace.owners())
    elif mapping is None and bundled:
        mapping = str(BUNDLED[args.trace][1].parent / "mapping.yaml")
    problems = unknown_places(trace, config)
    if problems:
        raise UserError(problems)
    return config, prepare_trace(trace, config, mapping=mapping, seed=args.seed,
                                 demand_ratio_target=ratio or None)


class Progress:
    """One progress line on stderr (:class:`ProgressLine`) with a bar per scheduler run, in the
    order ``names``, whether the runs go one after the other or side by side; the line ends
    once every run has reached its horizon."""

    def __init__(self, enabled: bool, names: list[str]):
        self.enabled = enabled
        self.line = ProgressLine()
        self.at: dict[str, tuple[float, float]] = {n: (0.0, 0.0) for n in names}
        self.ended = False

    def __call__(self, name: str, now: float, end: float) -> None:
        if not self.enabled or self.ended:
            return
        self.at[name] = (now, end)
        self._draw(all(e and t >= e for t, e in self.at.values()))

    def finish(self) -> None:
        """End the line once the runs are over, if the last reports did not (a run whose
        horizon is 0 never reports progress past its start)."""
        if self.enabled and not self.ended:
            self._draw(True)

    def _draw(self, final: bool) -> None:
        parts = []
        for n, (t, e) in self.at.items():
            frac = min(1.0, t / e) if e else (1.0 if t else 0.0)
            parts.append(f"{n} {bar(frac, 20)} day {t / 86400:.2f}")
        self.line.draw("  ".join(parts), final=final)
        self.ended = final


def synthetic_shortfall(meta: dict, args: argparse.Namespace) -> str:
    """Why a synthetic trace offers another load than asked (its runtimes are held to their
    ranges, :mod:`engine.sim.synthetic`), or ""."""
    if meta.get("generator") != "synthetic" or "offered" not in meta:
        return ""
    want = args.demand_ratio if args.demand_ratio is not None else DEFAULT["demand_ratio"]
    got = float(meta["offered"])
    if abs(got - want) <= 0.01 * want:
        return ""
    if got > want:
        why = ("at their shortest runtimes (small work 16 min, large gangs 2 h) offer that much; "
               "ask for fewer --tasks or more --days")
    else:
        why = ("at their longest runtimes (small work 3 days, large gangs 24 h) offer only that; "
               "ask for more --tasks")
    return (f"the synthetic trace offers {got:.2f}x the capacity, not the {want:g}x asked: "
            f"its {args.tasks or SYNTHETIC_TASKS} tasks {why}")


def sim_options(args: argparse.Namespace, **more):
    """The simulator's options the flags give (cadence, what a preemption costs)."""
    from engine.sim.options import SimOptions

    return SimOptions(cadence=args.cadence, checkpoint_loss_s=args.checkpoint_loss,
                      restart_overhead_s=args.restart_overhead, **more)


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
