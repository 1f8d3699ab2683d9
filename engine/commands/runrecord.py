"""Run records: ``run.json`` beside a simulation's report, so that the view commands can show that
run at any instant (``allot explain JOB --report DIR --at 30h``).

A report says *that* a team got 49% of its entitlement; the views say *why*, for one job, with
the numbers of the pass. They need the run's state at a chosen time, which the report does not
hold (a state per pass would be gigabytes). A simulation is deterministic, so the record keeps
what reproduces it instead:

* ``allot simulate`` writes ``DIR/run.json`` for its budget run: the flags that shape the
  experiment (trace, window, warm-up, demand ratio, clusters, config root and revision,
  knobs, seed, cadence; :data:`SHAPING`), the default config root resolved;
* ``allot impact --out DIR`` writes ``DIR/base/run.json`` and ``DIR/head/run.json``, one per
  replay: the repository, both revisions as commit ids (a branch moves, a commit does not) and
  the replay's settings (:class:`~engine.impact.replay.ReplaySpec`);
* in both, relative paths are made absolute, so a record reads the same from any directory,
  and fingerprints of the run's configuration and prepared trace are kept, so a replay that
  would not be the recorded run (budgets edited since, a trace file replaced, or another
  version of the code preparing it otherwise: the record keeps the code's hash to say so) is
  refused rather than shown; and the run's horizon, to refuse an instant after its end at
  once.

:func:`replay` rebuilds the run's inputs through the code that built them
(:func:`~engine.commands.siminputs.build_experiment_inputs`,
:func:`~engine.impact.replay.prepare_replay`) and runs the budget scheduler alone up to the
instant asked for; the view state there (:func:`engine.views.simstate.state_from_sim`) is the
one that run's pass saw. Times are seconds of the run, as in ``allot simulate``'s
``tasks-*.csv`` (the warm-up included).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import math
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable

from engine.commands import read_json
from engine.errors import Problem, UserError
from engine.model import Config

if TYPE_CHECKING:
    from engine.sim.options import SimOptions

FILE = "run.json"
KIND = "allot-run"
VERSION = 1
# the flags of ``allot simulate`` that decide what its budget run is (the rest: output only)
SHAPING = ("trace", "trace_format", "columns", "mapping", "tree", "root", "rev", "set", "window",
           "days", "warmup", "demand_ratio", "cluster", "tasks", "seed", "cadence", "checkpoint_loss",
           "restart_overhead")
# what an ``allot impact`` replay is, beside its repository and revisions (ReplaySpec's fields)
REPLAY = ("trace", "days", "start_day", "mapping", "demand_ratio", "seed", "cadence")
SIDES = ("base", "head")
HINT = ("give the --out directory of `allot simulate` (or DIR/base, DIR/head of `allot impact "
        "--out DIR`): run.json is written there")


def fingerprint(config: Config, trace) -> dict[str, str]:
    """Hashes of the configuration (as the views' JSON, but for where it was read from: the
    same files elsewhere are the same configuration) and of the prepared trace's tasks and
    node failures (their reprs: frozen dataclasses of plain values)."""
    body = repr((trace.tasks, trace.failures))
    return {"config": fingerprint_config(config), "trace": hashlib.sha256(body.encode()).hexdigest()}


def fingerprint_config(config: Config) -> str:
    """:func:`fingerprint`'s hash of the configuration alone."""
    from engine.views.codec import config_to_dict

    text = json.dumps({k: v for k, v in config_to_dict(config).items() if k != "origin"}, sort_keys=True)
    return hashlib.sha256(text.encode()).hexdigest()


def _absolute(path: str | None) -> str | None:
    return str(Path(path).resolve()) if path else path


def _trace_ref(ref: str | None) -> str | None:
    """A trace reference as the record keeps it: a bundled name (or ``synthetic``) as it is,
    a file's path made absolute."""
    from engine.sim.importers import BUNDLED

    return ref if ref is None or ref in BUNDLED or ref == "synthetic" else _absolute(ref)


def _record(command: str, flags: dict[str, Any], config: Config, trace, horizon: float,
            **extra: Any) -> dict[str, Any]:
    from engine.views.statecache import code_hash

    return {"kind": KIND, "version": VERSION, "command": command, **extra, "flags": flags,
            "horizon_s": horizon, "fingerprint": fingerprint(config, trace), "code": code_hash()}


def record(args: argparse.Namespace, config: Config, trace, horizon: float) -> dict[str, Any]:
    """The record of the budget run of ``allot simulate`` with ``args`` (module docstring)."""
    from engine.loader.sources import default_root

    flags = {k: getattr(args, k) for k in SHAPING}
    flags.update(trace=_trace_ref(flags["trace"]), mapping=_absolute(flags["mapping"]),
                 root=str((Path(flags["root"]) if flags["root"] else default_root()).resolve()),
                 set=list(flags["set"]))
    return _record("simulate", flags, config, trace, horizon)


def impact_records(repo: str, revisions: tuple[str, str], spec, runs) -> dict[str, dict[str, Any]]:
    """The records of ``allot impact``'s two replays, by side: ``repo`` and the two commit ids,
    the :class:`~engine.impact.replay.ReplaySpec`, and ``runs`` (per side its config,
    prepared trace and horizon: ``ReplayImpact.runs``)."""
    flags = {k: getattr(spec, k) for k in REPLAY}
    flags.update(trace=_trace_ref(flags["trace"]), mapping=_absolute(flags["mapping"]),
                 repo=_absolute(repo), base=revisions[0], head=revisions[1])
    return {side: _record("impact", flags, config, trace, horizon, side=side)
            for side, (config, trace, horizon) in zip(SIDES, runs)}


def write(directory: str | Path, rec: dict[str, Any]) -> Path:
    path = Path(directory) / FILE
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(rec, indent=2, sort_keys=True) + "\n")
    return path


def read(directory: str | Path) -> dict[str, Any]:
    """The record in ``directory``, or the problem saying what is wrong with it."""
    path = Path(directory) / FILE
    rec = read_json(path, "run record", HINT)
    if not isinstance(rec, dict) or rec.get("kind") != KIND or not isinstance(rec.get("flags"), dict) \
            or rec.get("command") not in ("simulate", "impact"):
        raise UserError([Problem(str(path), 0, 0, "not a run record of allot simulate or allot impact",
                                 HINT)])
    if rec["command"] == "impact" and rec.get("side") not in SIDES:
        raise UserError([Problem(str(path), 0, 0, f"an impact run record of side {rec.get('side')!r}, "
                                 f"not base or head", HINT)])
    if rec.get("version") != VERSION:
        raise UserError([Problem(str(path), 0, 0, f"run record version {rec.get('version')!r}; this "
                                 f"allot reads version {VERSION}",
                                 f"run allot {rec['command']} again with this version")])
    where = "root" if rec["command"] == "simulate" else "repo"  # (the flag naming the configuration)
    horizon = rec.get("horizon_s")
    if not (isinstance(horizon, (int, float)) and not isinstance(horizon, bool) and horizon >= 0
            and math.isfinite(horizon)) or not isinstance(rec.get("fingerprint"), dict) \
            or not isinstance(rec["flags"].get(where), str):
        raise UserError([Problem(str(path), 0, 0, "the run record's fields are not as allot wrote them",
                                 f"run allot {rec['command']} again")])
    return rec


def replay(directory: str | Path, at: float | None,
           progress: Callable[[float, float], None] | None = None,
           rec: dict[str, Any] | None = None, root: str | None = None, scheduler: Any = "budget"):
    """The budget run recorded in ``directory`` (its record ``rec`` when already read),
    simulated up to ``at`` (default: its end). ``root``: where the run's configuration is
    now, when not where it was recorded (a CI run's artifact read in a local clone): the
    config root of ``allot simulate``, the repository of ``allot impact``. Refused
    (:class:`UserError`) when ``at`` is past the run's end or when the inputs are no longer
    the recorded ones. ``scheduler``: the budget scheduler, or one wrapping it (to record its
    decisions)."""
    from engine.sim.engine import simulate

    rec = read(directory) if rec is None else rec
    path = str(Path(directory) / FILE)
    horizon = float(rec.get("horizon_s") or 0.0)
    if at is not None and at > horizon:
        raise UserError([Problem("--at", 0, 0, f"time {at:g}s is after the end of the run ({horizon:g}s)",
                                 "lower --at (times are seconds of the run, as in its tasks-*.csv)")])
    known = SHAPING if rec["command"] == "simulate" else (*REPLAY, "repo", "base", "head")
    unknown = sorted(set(rec["flags"]) - set(known))
    if unknown:
        raise UserError([Problem(path, 0, 0, f"unknown flag(s) {', '.join(unknown)} in the run record",
                                 f"run allot {rec['command']} again with this version")])
    key = "root" if rec["command"] == "simulate" else "repo"  # (the flag naming the configuration)
    if root is not None:  # (where the configuration is now)
        rec = {**rec, "flags": {**rec["flags"], key: str(Path(root).resolve())}}
    if not Path(rec["flags"][key]).exists():
        what = "configuration" if key == "root" else "repository"
        raise UserError([Problem(path, 0, 0, f"the run's {what} {rec['flags'][key]} is not there (was the "
                                 f"run recorded on another machine?)",
                                 "give where it is now with --config DIR"
                                 + (" (a clone holding both commits)" if key == "repo" else ""))])
    try:
        config, trace, seed, options, where = (_simulate_inputs if rec["command"] == "simulate"
                                               else _impact_inputs)(rec)
    except (TypeError, ValueError, KeyError, AttributeError) as err:  # (a record edited by hand)
        raise UserError([Problem(path, 0, 0, f"the run record's flags are not as allot wrote them ({err})",
                                 f"run allot {rec['command']} again")]) from None
    now = fingerprint(config, trace)
    changed = [k for k in ("config", "trace") if now[k] != rec.get("fingerprint", {}).get(k)]
    if changed:
        from engine.views.statecache import code_hash

        other = ("" if rec.get("code") == code_hash() else
                 " (or this allot's code, which prepares the run, is not the code that wrote the record)")
        raise UserError([Problem(path, 0, 0, f"{where[k]} changed since this report was simulated{other}, "
                                 f"so its run cannot be shown", f"run allot {rec['command']} again")
                         for k in changed])
    return simulate(config, trace, scheduler, seed=seed, horizon=at, options=options)


def sources(rec: dict[str, Any], root: str | None = None) -> dict[str, Any]:
    """What the recorded run's inputs read outside the record, as they are now, cheaply: the
    configuration's fingerprint for ``allot simulate`` (its files can be edited, and ``--rev``
    may name a branch that moved; an ``allot impact`` record names commits, which cannot
    change), and a hash of the trace and mapping files it names. Part of the key under which
    the views keep a state of the run (:mod:`engine.views.source`), so that a kept state is
    never shown for inputs that changed: the replay then refuses, saying what changed. Values
    that cannot be read give None (the replay says why)."""
    from engine.commands.siminputs import load_with_settings

    flags = rec.get("flags", {})
    out: dict[str, Any] = {}
    for name, path in _input_files(rec).items():
        out[name] = hashlib.sha256(path.read_bytes()).hexdigest()
    if rec.get("command") == "simulate":
        try:
            config = load_with_settings(root or flags.get("root"), flags.get("rev"), flags.get("set") or [])
            out["config"] = fingerprint_config(config)
        except (UserError, TypeError, ValueError, OSError):
            out["config"] = None
    return out


def _input_files(rec: dict[str, Any]) -> dict[str, Path]:
    """The trace and mapping files a recorded run read, by flag: the files its flags name,
    or, for a bundled trace (by name, or the default one when none is named), the bundled
    file and, with no ``--mapping`` (and the budget tree of the repository, not derived),
    the ``mapping.yaml`` beside it, which the run read without a flag naming it."""
    from engine.impact.window import DEFAULT_TRACE
    from engine.sim.importers import BUNDLED

    flags = rec.get("flags", {})
    found: dict[str, Path] = {}
    trace, mapping = flags.get("trace"), flags.get("mapping")
    if trace is None:
        trace = DEFAULT_TRACE  # (the default of simulate and impact alike)
    if isinstance(trace, str) and trace in BUNDLED and not flags.get("trace_format"):
        found["trace"] = BUNDLED[trace][1]
        if mapping is None and flags.get("tree", "repo") == "repo":
            found["mapping"] = BUNDLED[trace][1].parent / "mapping.yaml"
    elif isinstance(trace, str) and Path(trace).is_file():
        found["trace"] = Path(trace)
    if isinstance(mapping, str) and Path(mapping).is_file():
        found["mapping"] = Path(mapping)
    return {name: path for name, path in found.items() if path.is_file()}


def _simulate_inputs(rec: dict[str, Any]) -> tuple[Config, Any, int, SimOptions, dict[str, str]]:
    """(config, prepared trace, seed, simulator options, what each fingerprint stands for) of
    an ``allot simulate`` record, built as that command built them."""
    from engine.cli import build_parser
    from engine.commands.siminputs import build_experiment_inputs, sim_options

    parser = build_parser()
    args = parser.parse_args(["simulate"])
    _check_flags(rec["flags"], parser)
    for k, v in rec["flags"].items():
        setattr(args, k, v)
    config, trace = build_experiment_inputs(args)
    where = {"config": f"the budgets and policies at {args.root}" + (f" (revision {args.rev})" if args.rev else ""),
             "trace": f"the trace {args.trace}"}
    return config, trace, args.seed, sim_options(args), where


def _check_flags(flags: dict[str, Any], parser: argparse.ArgumentParser) -> None:
    """Each recorded flag as ``allot simulate`` would have parsed it (its choices, its type's
    checks), else ``ValueError`` naming it: a record edited by hand says so, not that the trace
    changed."""
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    actions = {a.dest: a for a in sub.choices["simulate"]._actions}
    for key, value in flags.items():
        action = actions.get(key)
        if action is None or value is None or key in ("trace", "mapping", "root"):
            continue  # (made absolute when recorded: checked when read)
        values = value if isinstance(action, argparse._AppendAction) else [value]
        if not isinstance(values, list):
            raise ValueError(f"flag {key!r} must be a list, got {value!r}")
        for v in values:
            if action.choices is not None and v not in action.choices:
                raise ValueError(f"flag {key!r} must be one of {', '.join(map(str, action.choices))}, "
                                 f"got {v!r}")
            if action.type is None:
                if not isinstance(v, str):
                    raise ValueError(f"flag {key!r} must be a string, got {v!r}")
            elif isinstance(v, bool) or not isinstance(v, (str, int, float)):
                raise ValueError(f"flag {key!r} must be a number, got {v!r}")
            else:
                try:
                    action.type(str(v))
                except argparse.ArgumentTypeError as err:
                    raise ValueError(f"flag {key!r}: {err}") from None


def _impact_inputs(rec: dict[str, Any]) -> tuple[Config, Any, int, SimOptions, dict[str, str]]:
    """The same for one side of an ``allot impact`` record (both revisions are loaded: the
    head's trace depends on the base tree, see :func:`~engine.impact.replay.prepare_replay`)."""
    from engine.impact.replay import DEFAULT_TRACE, ReplaySpec, prepare_replay
    from engine.loader import load_config
    from engine.sim.options import SimOptions

    f = rec["flags"]
    base, head = load_config(f["repo"], f["base"]), load_config(f["repo"], f["head"])
    spec = ReplaySpec(**{k: f[k] for k in REPLAY}, parallel=False)
    side = SIDES.index(rec["side"])  # (checked by read)
    config, trace, seed, cadence = prepare_replay(base, head, spec).jobs[side]
    where = {"config": f"revision {f[rec['side']]} of {f['repo']}",
             "trace": f"the trace {f['trace'] or DEFAULT_TRACE}"}
    return config, trace, seed, SimOptions(cadence=cadence), where
