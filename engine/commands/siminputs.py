"""What an ``allot simulate`` run is made of, read from its flags: the embedded default
(:data:`DEFAULT`), the configuration with ``--set`` knobs, the trace (bundled, a file, or
synthetic) cut to its window and prepared, and the simulator's options. Every flag is checked
before any is refused, so one run shows all their problems; a flag that does nothing for the
chosen trace is refused, not ignored. ``allot simulate``, ``--sweep`` and the view commands'
replays of a recorded run (:mod:`engine.commands.runrecord`) build their inputs here, so a
replay is the run it records."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING, TypedDict

from engine.durations import approx_duration, parse_duration
from engine.errors import Problem, UserError

if TYPE_CHECKING:
    from engine.sim.options import SimOptions


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


def _check_trace_flags(args: argparse.Namespace, bundled: bool) -> list[Problem]:
    """A flag that does nothing for the chosen trace (``bundled``: a bundled one, by name) is a
    mistake to report, not to ignore: the problems."""
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
        return [Problem(flag, 0, 0, f"does not apply to --trace {args.trace}", hint, "usage")
                for flag in given]
    problems = [Problem("--tasks", 0, 0, f"does not apply to --trace {args.trace}",
                        "drop it, or use --trace synthetic", "usage")] if args.tasks is not None else []
    if args.columns is not None and args.trace_format not in (None, "generic"):
        problems.append(Problem("--columns", 0, 0, f"does not apply to --trace-format {args.trace_format}",
                                "--columns maps the columns of a generic CSV: drop it, or use "
                                "--trace-format generic", "usage"))
    elif args.columns is not None and bundled:
        problems.append(Problem("--columns", 0, 0, f"does not apply to the bundled trace {args.trace}",
                                "--columns maps the columns of your own CSV: drop it", "usage"))
    if args.mapping is not None and args.tree != "repo":
        problems.append(Problem("--mapping", 0, 0, f"does not apply with --tree {args.tree}",
                                "a derived tree has a leaf per trace owner, each owner mapped to its "
                                "own: drop --mapping, or use --tree repo", "usage"))
    return problems


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
    from engine.sim.clusters import with_clusters
    from engine.sim.owners import derive_tree, leaf_names
    from engine.sim.prepare import cut, placed_and_prepared, prepare_trace
    from engine.sim.synthetic import synthetic_trace

    # every flag checked before any is refused, so one run shows all their problems
    bundled = args.trace in BUNDLED and not args.trace_format
    problems = _check_trace_flags(args, bundled)

    def gathered(check):
        try:
            return check()
        except UserError as err:
            problems.extend(err.problems)
            return None

    config = gathered(lambda: load_with_settings(args.root, args.rev, args.set) if overrides is None
                      else load_config(args.root, rev=args.rev, overrides=overrides))
    cluster = args.cluster if args.cluster is not None else (DEFAULT["cluster"] if bundled else None)
    if config is not None:
        config = gathered(lambda: with_clusters(config, cluster))
    default_trace = args.trace == DEFAULT["trace"] and not args.trace_format  # (its window, warm-up)
    window = args.window if args.window is not None else (DEFAULT["window"] if default_trace else None)
    ratio = args.demand_ratio if args.demand_ratio is not None else DEFAULT["demand_ratio"]
    if args.trace != "synthetic":
        columns = gathered(lambda: column_mapping(args.columns) if args.columns else None)
        warmup = args.warmup if args.warmup is not None else (DEFAULT["warmup"] if default_trace else "0")
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
    cut_out = bool(window or args.days or lead)  # (a part of the trace is replayed)
    if cut_out:
        a, b = bounds
        if args.days:
            b = a + args.days * 86400.0
        trace = cut(trace, a, b, lead)
    if not trace.tasks:
        if cut_out:
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
    return config, placed_and_prepared(trace, config, mapping=mapping, seed=args.seed,
                                       demand_ratio_target=ratio or None)


def synthetic_shortfall(meta: dict, args: argparse.Namespace) -> str:
    """Why a synthetic trace offers another load than asked (its runtimes are held to their
    ranges, :mod:`engine.sim.synthetic`), or ""."""
    if meta.get("generator") != "synthetic" or "offered" not in meta:
        return ""
    want = args.demand_ratio if args.demand_ratio is not None else DEFAULT["demand_ratio"]
    got = float(meta["offered"])
    if abs(got - want) <= 0.01 * want:
        return ""
    from engine.sim.synthetic import LARGE_RUNTIME, SMALL_RUNTIME

    if got > want:
        why = (f"at their shortest runtimes (small work {SMALL_RUNTIME[0] / 60:g} min, large gangs "
               f"{LARGE_RUNTIME[0] / 3600:g} h) offer that much; ask for fewer --tasks or more --days")
    else:
        why = (f"at their longest runtimes (small work {SMALL_RUNTIME[1] / 86400:g} days, large gangs "
               f"{LARGE_RUNTIME[1] / 3600:g} h) offer only that; ask for more --tasks")
    return (f"the synthetic trace offers {got:.2f}x the capacity, not the {want:g}x asked: "
            f"its {args.tasks or SYNTHETIC_TASKS} tasks {why}")


def sim_options(args: argparse.Namespace, **more) -> SimOptions:
    """The simulator's options the flags give (cadence, what a preemption costs)."""
    from engine.sim.options import SimOptions

    return SimOptions(cadence=args.cadence, checkpoint_loss_s=args.checkpoint_loss,
                      restart_overhead_s=args.restart_overhead, **more)
