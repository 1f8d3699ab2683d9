"""The run record of ``allot simulate``: ``run.json`` in its report directory, so that the view
commands can show its budget run at any instant (``allot explain JOB --report DIR --at 30h``).

A report says *that* a team got 49% of its entitlement; the views say *why*, for one job, with
the numbers of the pass. They need the run's state at a chosen time, which the report does not
hold (a state per pass would be gigabytes). A simulation is deterministic, so the record keeps
what reproduces it instead:

* the flags that shape the experiment (trace, window, warm-up, demand ratio, clusters, config
  root and revision, knobs, seed, cadence; :data:`SHAPING`), with relative paths made absolute
  and the default config root resolved, so the record reads the same from any directory;
* fingerprints of the configuration and of the prepared trace, so a replay that would not be
  the recorded run (budgets edited since, a trace file replaced) is refused rather than shown;
* the run's horizon, to refuse an instant after its end before simulating.

:func:`replay` rebuilds the inputs through the same :func:`~engine.commands.simulate.
build_experiment_inputs` and runs the budget scheduler alone up to the instant asked for; the
view state there (:func:`engine.views.simstate.state_from_sim`) is the one the run's pass saw.
Times are seconds of the run, as in the report's ``tasks-*.csv`` (the warm-up included).
"""

from __future__ import annotations

import argparse
import hashlib
import json
from pathlib import Path
from typing import Any, Callable

from engine.errors import Problem, UserError
from engine.model import Config

FILE = "run.json"
KIND = "allot-simulate-run"
VERSION = 1
# the flags of ``allot simulate`` that decide what its budget run is (the rest: output only)
SHAPING = ("trace", "trace_format", "columns", "mapping", "tree", "root", "rev", "set", "window",
           "days", "warmup", "demand_ratio", "cluster", "tasks", "seed", "cadence")
HINT = "give the --out directory of an `allot simulate` run (it writes run.json there)"


def fingerprint(config: Config, trace) -> dict[str, str]:
    """Hashes of the configuration (as the views' JSON) and of the prepared trace's tasks and
    node failures (their reprs: frozen dataclasses of plain values)."""
    from engine.views.codec import config_to_dict

    text = json.dumps(config_to_dict(config), sort_keys=True)
    body = repr((trace.tasks, trace.failures))
    return {"config": hashlib.sha256(text.encode()).hexdigest(),
            "trace": hashlib.sha256(body.encode()).hexdigest()}


def record(args: argparse.Namespace, config: Config, trace, horizon: float) -> dict[str, Any]:
    """The record of a run of ``allot simulate`` with ``args`` (module docstring)."""
    from engine.loader.sources import default_root
    from engine.sim.importers import BUNDLED

    flags = {k: getattr(args, k) for k in SHAPING}
    if flags["trace"] not in BUNDLED and flags["trace"] != "synthetic":
        flags["trace"] = str(Path(flags["trace"]).resolve())
    if flags["mapping"]:
        flags["mapping"] = str(Path(flags["mapping"]).resolve())
    flags["root"] = str((Path(flags["root"]) if flags["root"] else default_root()).resolve())
    flags["set"] = list(flags["set"])
    return {"kind": KIND, "version": VERSION, "flags": flags, "horizon_s": horizon,
            "fingerprint": fingerprint(config, trace)}


def write(out: str | Path, rec: dict[str, Any]) -> Path:
    path = Path(out) / FILE
    path.write_text(json.dumps(rec, indent=2, sort_keys=True) + "\n")
    return path


def read(directory: str | Path) -> dict[str, Any]:
    """The record in ``directory``, or the problem saying what is wrong with it."""
    path = Path(directory) / FILE
    try:
        rec = json.loads(path.read_text())
    except OSError as err:
        raise UserError([Problem(str(path), 0, 0, f"cannot read the run record: {err.strerror or err}",
                                 HINT)]) from None
    except json.JSONDecodeError as err:
        raise UserError([Problem(str(path), err.lineno, err.colno,
                                 f"not a run record: not JSON ({err.msg})", HINT)]) from None
    if not isinstance(rec, dict) or rec.get("kind") != KIND or not isinstance(rec.get("flags"), dict):
        raise UserError([Problem(str(path), 0, 0, "not a run record of allot simulate", HINT)])
    if rec.get("version") != VERSION:
        raise UserError([Problem(str(path), 0, 0, f"run record version {rec.get('version')!r}; this "
                                 f"allot reads version {VERSION}",
                                 "run allot simulate again with this version")])
    return rec


def replay(directory: str | Path, at: float | None,
           progress: Callable[[float, float], None] | None = None,
           rec: dict[str, Any] | None = None):
    """The budget run recorded in ``directory`` (its record ``rec`` when already read),
    simulated up to ``at`` (default: its end). Refused (:class:`UserError`) when ``at`` is past
    the run's end or when the inputs are no longer the recorded ones."""
    from engine.cli import build_parser
    from engine.commands.simulate import build_experiment_inputs
    from engine.sim.engine import SimOptions, simulate

    rec = read(directory) if rec is None else rec
    path = str(Path(directory) / FILE)
    horizon = float(rec.get("horizon_s") or 0.0)
    if at is not None and at > horizon:
        raise UserError([Problem("--at", 0, 0, f"time {at:g}s is after the end of the run ({horizon:g}s)",
                                 "lower --at (times are seconds of the run, as in its tasks-*.csv)")])
    args = build_parser().parse_args(["simulate"])
    unknown = sorted(set(rec["flags"]) - set(SHAPING))
    if unknown:
        raise UserError([Problem(path, 0, 0, f"unknown flag(s) {', '.join(unknown)} in the run record",
                                 "run allot simulate again with this version")])
    for k, v in rec["flags"].items():
        setattr(args, k, v)
    config, trace = build_experiment_inputs(args)
    now = fingerprint(config, trace)
    changed = [k for k in ("config", "trace") if now[k] != rec.get("fingerprint", {}).get(k)]
    if changed:
        where = {"config": f"the budgets and policies at {args.root}" + (f" (revision {args.rev})" if args.rev else ""),
                 "trace": f"the trace {args.trace}"}
        raise UserError([Problem(path, 0, 0, f"{where[k]} changed since this report was simulated, "
                                 f"so its run cannot be shown", "run allot simulate again")
                         for k in changed])
    return simulate(config, trace, "budget", seed=args.seed, horizon=at,
                    options=SimOptions(cadence=args.cadence), progress=progress)
