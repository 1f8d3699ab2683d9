"""Preparing a trace for a configuration: owners to leaves, contracts, time compression.

Real traces know owners (a Philly virtual cluster, a Helios user) but not our budget leaves,
and they carry no scheduling contract. :func:`prepare_trace` fills both in, deterministically:

**Owner -> leaf.** A mapping ``{owner: leaf}``, a dict or a mapping file's path; without one,
one derived by demand (:mod:`engine.sim.owners`, which also derives a tree from the owners).

**Contracts** (:class:`ContractRules`, for tasks whose ``min_runtime``/``resumable`` are
unset). A funded task that asks for at most ``policy.debug.max_gpus`` GPUs and runs at most
``debug_max_runtime_s`` is a *debug* job with min runtime ``policy.debug.max_min_runtime_s``
(15 min). Every other task is *unfunded* (free, min runtime 0) with probability
``unfunded_share``; independently of that, every non-debug task is *resumable* with probability
``resumable_share`` (a free job may checkpoint too; always, with
``long_resumable``, when it runs longer than the min-runtime cap: work that outlives its
protection must checkpoint or it can never finish on a busy cluster); a funded resumable
task protects ``min(runtime, default_min_runtime, cap)``, a non-resumable one
``min(runtime, cap)`` (rounded up to a minute). The draws are a hash of ``(seed, task id)``,
so a task keeps its contract whatever window of the trace is replayed.
Classes (:func:`classify`): ``debug`` for a funded task of at most ``policy.debug.max_gpus``
GPUs whose min runtime (its own, or the one given above) is at most the debug cap (15 min),
whatever it runs; ``large`` for gangs of ``large_gpus`` (64) GPUs or more; ``small`` otherwise.

**Compression.** Dividing submit times by ``f`` multiplies demand by about ``f``.
:func:`demand_ratio` is the GPU-seconds the tasks would consume inside the horizon (each
runtime clipped at the horizon) over the capacity's GPU-seconds; :func:`compression_for_ratio`
finds ``f`` by bisection (the ratio is increasing in ``f``), and :func:`window_compression`
finds it for the first simulated days of a trace (the window of trace time grows with ``f``).
A window that offers little at its own rate (few or short jobs) needs a large factor, which
can squeeze it into seconds: :func:`prepare_trace` refuses a measured window compressed below
``MIN_MEASURED_S`` (an hour).
"""

from __future__ import annotations

import hashlib
import math
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Callable, Mapping

import numpy as np

from engine.errors import Problem, UserError, also_on, first_line
from engine.model import Config
from engine.sim.owners import derive_mapping, load_mapping
from engine.sim.trace import Task, Trace, replace_task

MIN_MEASURED_S = 3600.0  # the shortest measured window a demand ratio may compress a trace into


@dataclass(frozen=True)
class ContractRules:
    """How contracts are assigned to tasks that carry none (see the module docstring)."""

    debug_max_runtime_s: float = 900.0
    resumable_share: float = 0.5
    unfunded_share: float = 0.1
    large_gpus: int = 64
    long_resumable: bool = True


def _uniforms(seed: int, key: str) -> tuple[float, float]:
    digest = hashlib.blake2b(f"{seed}:{key}".encode(), digest_size=16).digest()
    a = int.from_bytes(digest[:8], "big") / 2.0**64
    b = int.from_bytes(digest[8:], "big") / 2.0**64
    return a, b


def classify(task: Task, config: Config, rules: ContractRules) -> str:
    debug = config.policy.debug
    if task.funded and task.gpus <= debug.max_gpus and (task.min_runtime or 0) <= debug.max_min_runtime_s:
        return "debug"
    return "large" if task.gpus >= rules.large_gpus else "small"


def assign_contract(task: Task, config: Config, rules: ContractRules, seed: int) -> Task:
    """The task with min_runtime, resumable and class filled in (kept when already set)."""
    pol = config.policy
    min_rt, resumable = task.min_runtime, task.resumable
    if min_rt is None or resumable is None:
        u_free, u_res = _uniforms(seed, task.id)
        is_debug = bool(task.leaf) and task.gpus <= pol.debug.max_gpus and \
            task.runtime <= rules.debug_max_runtime_s
        if resumable is None:
            resumable = (not is_debug) and (u_res < rules.resumable_share or (
                rules.long_resumable and task.runtime > pol.min_runtime_cap_s))
        if min_rt is None:
            if is_debug:
                min_rt = pol.debug.max_min_runtime_s
            elif not task.leaf or u_free < rules.unfunded_share:
                min_rt = 0.0
            else:
                want = min(task.runtime, pol.min_runtime_cap_s)
                if resumable:
                    want = min(want, pol.default_min_runtime_s)
                min_rt = max(60.0, math.ceil(want / 60.0) * 60.0)
                min_rt = min(min_rt, pol.min_runtime_cap_s)
    out = replace_task(task, min_runtime=min_rt, resumable=resumable)
    if out.klass is None:
        out = replace_task(out, klass=classify(out, config, rules))
    return out


# ---------------------------------------------------------------------------- compression


def horizon_of(trace: Trace) -> float:
    """The simulated horizon: ``meta['horizon']`` if set (a window's length, or what a
    generator chose), else when the last task would end if it started at once, at most one
    day after the last submission."""
    if trace.meta.get("horizon"):
        return float(trace.meta["horizon"])
    if not trace.tasks:
        return 0.0
    return min(max(t.submit + t.runtime for t in trace.tasks), trace.span + 86400.0)


def _arrays(trace: Trace) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    sub = np.fromiter((t.submit for t in trace.tasks), float, len(trace.tasks))
    run = np.fromiter((t.runtime for t in trace.tasks), float, len(trace.tasks))
    gpus = np.fromiter((t.gpus for t in trace.tasks), float, len(trace.tasks))
    return sub, run, gpus


def _ratio_of(trace: Trace, capacity_gpus: int) -> Callable[[float], float]:
    """``factor -> demand ratio`` over arrays built once (the bisection calls it ~60 times)."""
    horizon = horizon_of(trace)
    if not trace.tasks or horizon <= 0 or capacity_gpus <= 0:
        return lambda factor: 0.0
    sub, run, gpus = _arrays(trace)
    room = np.maximum(horizon - sub, 0.0)
    scale = horizon * capacity_gpus

    def ratio(factor: float) -> float:
        return float((gpus * np.minimum(run * factor, room)).sum() / scale)
    return ratio


def demand_ratio(trace: Trace, capacity_gpus: int, factor: float = 1.0) -> float:
    """Demand inside the horizon over capacity, after compressing time by ``factor``."""
    return _ratio_of(trace, capacity_gpus)(factor)


def compression_for_ratio(trace: Trace, capacity_gpus: int, ratio: float) -> float:
    """The factor ``f`` with ``demand_ratio(trace, capacity, f) == ratio`` (bisection)."""
    return _solve(_ratio_of(trace, capacity_gpus), ratio, trace.name)


def window_compression(trace: Trace, capacity_gpus: int, seconds: float, ratio: float) -> float:
    """The factor ``f`` such that the trace's first ``seconds x f`` of submissions, compressed
    by ``f`` into a horizon of ``seconds``, offer ``ratio`` times the capacity (each runtime
    clipped at that horizon): the window's own demand, when a replay asks for a number of
    simulated days rather than a window of trace time. A larger ``f`` takes more of the
    trace and moves every submission earlier, so the demand only grows with it (bisection)."""
    if not trace.tasks or seconds <= 0 or capacity_gpus <= 0:
        return _solve(lambda factor: 0.0, ratio, trace.name)
    sub, run, gpus = _arrays(trace)
    scale = seconds * capacity_gpus

    def at(factor: float) -> float:
        room = seconds - sub / factor  # simulated time left after each submission
        return float((gpus * np.minimum(run, np.maximum(room, 0.0))).sum() / scale)
    return _solve(at, ratio, trace.name)


def _solve(at: Callable[[float], float], ratio: float, name: str) -> float:
    """The factor where the increasing ``at`` reaches ``ratio`` (bisection, 6 digits)."""
    most = at(1e6)
    name = name or "the trace"
    if most < ratio:
        if most <= 0:
            raise UserError([Problem(name, 0, 0, "the window holds no GPU work to replay",
                                     "choose a part of the trace with jobs in it")])
        raise UserError([Problem(name, 0, 0, f"trace cannot reach demand ratio {ratio:g} (at most "
                                 f"{most:.3g} however compressed)",
                                 "lower --demand-ratio, replay a longer window, or simulate fewer GPUs")])
    lo, hi = 1e-4, 1e6
    for _ in range(200):
        mid = math.sqrt(lo * hi)
        if at(mid) < ratio:
            lo = mid
        else:
            hi = mid
        if hi / lo < 1 + 1e-9:
            break
    return float(f"{hi:.6g}")


def compress(trace: Trace, factor: float) -> Trace:
    """Submit and failure times divided by ``factor``; runtimes unchanged (the end of a
    warm-up, ``meta["measure_from"]``, too)."""
    horizon = horizon_of(trace) / factor
    tasks = [replace_task(t, submit=t.submit / factor) for t in trace.tasks]
    fails = [replace(f, time=f.time / factor) for f in trace.failures]
    meta = {**trace.meta, "horizon": horizon,
            "compression": float(trace.meta.get("compression", 1.0)) * factor}
    if trace.meta.get("measure_from"):
        meta["measure_from"] = float(trace.meta["measure_from"]) / factor
    return Trace.of(tasks, fails, trace.name, meta)


def capacity(config: Config) -> int:
    return sum(c.gpus for c in config.policy.clusters)


def prepare_trace(trace: Trace, config: Config, *, mapping: Mapping[str, str | None] | str | Path
                  | None = None, rules: ContractRules = ContractRules(),
                  demand_ratio_target: float | None = None, seed: int = 0) -> Trace:
    """Map owners to leaves, assign contracts, compress to ``demand_ratio_target``."""
    tree = config.tree
    if isinstance(mapping, (str, Path)):
        mapping = load_mapping(mapping, tree.leaves())
    needs_map = any(t.leaf is None for t in trace.tasks)
    if mapping is None and needs_map:
        mapping = derive_mapping(trace, tree)
    leaves = set(tree.leaves())
    unmapped: dict[str, list[int]] = {}  # owner -> the lines of its tasks (said once, at the first)
    unknown: dict[str, list[int]] = {}  # leaf -> the same
    tasks = []
    for t in trace.tasks:
        leaf = t.leaf
        if leaf is None and mapping is not None:
            if t.owner in mapping:
                leaf = mapping[t.owner]
            elif "*" in mapping:
                leaf = mapping["*"]
            else:
                unmapped.setdefault(t.owner, []).append(t.line)
        if leaf is not None and leaf not in leaves:
            unknown.setdefault(leaf, []).append(t.line)
            continue
        if leaf != t.leaf:
            t = replace_task(t, leaf=leaf)
        tasks.append(assign_contract(t, config, rules, seed))
    where = str(trace.meta.get("source", trace.name))
    problems = [Problem(where, first_line(lines), 0, f"trace owner {owner!r} is not in the mapping"
                        f"{also_on(lines)}", "add it under owners:, or set default: <leaf>|unfunded")
                for owner, lines in unmapped.items()]
    problems += [Problem(where, first_line(lines), 0, f"leaf {leaf!r} is not a leaf of the budget tree"
                         f"{also_on(lines)}", f"leaves are: {', '.join(sorted(leaves))}")
                 for leaf, lines in unknown.items()]
    if problems:
        raise UserError(problems)
    out = Trace.of(tasks, trace.failures, trace.name,
                   {**trace.meta, "horizon": horizon_of(trace), "seed": seed})
    if demand_ratio_target is not None:
        basis = out  # the ratio is the measured window's: a warm-up before it does not count
        start = float(out.meta.get("measure_from") or 0.0)
        if start:
            basis = out.window(start, horizon_of(out))
        factor = compression_for_ratio(basis, capacity(config), demand_ratio_target)
        left = (horizon_of(out) - start) / factor
        if left < MIN_MEASURED_S:  # (a window that offers little: squeezed into minutes)
            raise UserError([Problem("--demand-ratio", 0, 0, (
                f"to offer {demand_ratio_target:g}x the capacity, the window of {trace.name} would be "
                f"compressed x{factor:.3g}, into {left:.0f} s of simulated time"),
                "replay a longer window (--days, --window), or lower --demand-ratio (0: the trace's "
                "own rate), or use a smaller --cluster", "usage")])
        out = compress(out, factor)
    return out


def placed_and_prepared(trace: Trace, config: Config, **how: Any) -> Trace:
    """``trace`` prepared for ``config`` (:func:`prepare_trace`, with ``how``), once nothing in
    it names a place the configuration lacks (:func:`~engine.sim.clusters.unknown_places`):
    the problems of both at once."""
    from engine.sim.clusters import unknown_places

    problems = unknown_places(trace, config)
    try:
        prepared = prepare_trace(trace, config, **how)
    except UserError as err:
        problems += err.problems
    if problems:
        raise UserError(problems)
    return prepared


def cut(trace: Trace, start: float, end: float | None, warmup: float = 0.0) -> Trace:
    """The window ``[start, end)`` of ``trace`` (seconds from its start), preceded by a
    *warm-up* of ``warmup`` seconds of the trace before it (clipped at the trace's start).

    The warm-up is simulated like the rest, so the measured window opens on a cluster that is
    already full, a queue already standing and a ledger already charged, as a reconciler that
    has been running finds them; the metrics (:func:`engine.sim.metrics.compute_metrics`)
    cover only ``[meta["measure_from"], horizon)``. Times are shifted so the warm-up starts at
    0; a window cut without warm-up is ``Trace.window``."""
    lead = min(max(0.0, warmup), start)
    out = trace.window(start - lead, end)
    if lead > 0:
        out = out.with_meta(measure_from=lead, window=[start, end], warmup=lead)
    return out
