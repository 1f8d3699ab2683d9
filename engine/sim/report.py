"""Writing an experiment's report: ``summary.json``, ``report.md`` and the PNGs.

``summary.json`` is :meth:`Experiment.summary` with sorted keys: byte-identical for the same
inputs and seed (no wall-clock figures in it). ``report.md`` explains how to read each
number and, for each team with enough demand that got less than 95% of its entitlement, names
the job that waited longest and the ``allot explain ... --report`` command that shows why;
``tasks-<scheduler>.csv`` lists every task's wait and preemptions for further study.
"""

from __future__ import annotations

import csv
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

from engine.core.statuses import WAIT_CAUSES
from engine.durations import approx_duration, format_duration
from engine.sim.experiment import Experiment
from engine.sim.forked import run_forked
from engine.sim.prepare import capacity
from engine.sim.plots import gantt_window, plot_gantt, plot_usage, plot_waiting, plot_waits
from engine.sim.result import SimResult, TaskRecord


IDLE_LABELS = (("lag", "scheduling lag"), ("reserved", "held back by the scheduler"),
               ("fragmentation", "fragmentation"), ("no_work", "no pending work"),
               ("unhealthy", "unhealthy nodes"))


def pct(x: float | None) -> str:
    return "-" if x is None else f"{100 * x:.1f}%"


def summary_rows(summary: dict[str, Any]) -> list[tuple[str, list[str]]]:
    """The headline table: (measure, one value per scheduler)."""
    scheds = summary["schedulers"]
    rows: list[tuple[str, list[str]]] = []

    def add(label: str, get) -> None:
        rows.append((label, [get(s) for s in scheds.values()]))

    add("p50 queue wait, all", lambda s: approx_duration(s["waits"]["overall"]["p50_s"]))
    add("p90 queue wait, all", lambda s: approx_duration(s["waits"]["overall"]["p90_s"]))
    for k in ("debug", "small", "large"):
        add(f"p90 queue wait, {k}", lambda s, k=k: approx_duration(s["waits"]["by_class"][k]["p90_s"]))
    add("p99 queue wait, debug", lambda s: approx_duration(s["waits"]["by_class"]["debug"]["p99_s"]))
    add("never started (censored)", lambda s: str(s["waits"]["overall"]["censored"]))
    add("occupancy of healthy GPUs", lambda s: pct(s["occupancy"]))
    for key, label in IDLE_LABELS:
        add(f"  idle: {label}", lambda s, key=key: pct(s["idle"][key]["share"]))
    add("unallocated share of delivered", lambda s: pct(s["unallocated_share"]))
    if any(s["gpu_hours"].get("on_loan") for s in scheds.values()):  # policy.loans
        add("  of it funded work on loan", lambda s: f"{s['gpu_hours'].get('on_loan', 0.0):.0f} GPU-h")
    add("entitled GPU-h delivered", lambda s: pct(s["entitlement"]["delivered_within_entitlement"]))
    add("teams >= 95% of entitlement", lambda s: f"{s['entitlement']['teams_at_95']} of "
                                                f"{s['entitlement']['teams_with_enough_demand']}")
    add("worst team (enough demand)", lambda s: pct(s["entitlement"]["worst_ratio"]) + (
        f" ({s['entitlement']['worst_team']})" if s["entitlement"].get("worst_team") else ""))
    add("preemptions", lambda s: str(s["preemptions"]))
    add("  of runs charged to a budget", lambda s: str(s["preemptions_of_charged"]))
    add("GPU-h lost to preemption", lambda s: f"{s['gpu_hours']['lost_to_preemption']:.0f}")
    add("  of runs charged to a budget", lambda s: f"{s['gpu_hours']['lost_of_charged']:.0f}")
    add("queued demand / capacity", lambda s: f"{s['demand_ratio']['queued_mean']:.2f}x")
    add("  lowest hour", lambda s: f"{s['demand_ratio'].get('queued_min', 0.0):.2f}x")
    add("scheduling passes", lambda s: str(s["decide_calls"]))
    return rows


def text_table(summary: dict[str, Any]) -> str:
    names = list(summary["schedulers"])
    rows = summary_rows(summary)
    w0 = max(len(r[0]) for r in rows)
    widths = [max(len(n), *(len(r[1][i]) for r in rows)) for i, n in enumerate(names)]
    lines = [" " * w0 + "  " + "  ".join(n.rjust(w) for n, w in zip(names, widths))]
    for label, vals in rows:
        lines.append(label.ljust(w0) + "  " + "  ".join(v.rjust(w) for v, w in zip(vals, widths)))
    return "\n".join(lines)


def first_measured(summary: dict[str, Any]) -> float:
    """Where the measured window starts (0 without a warm-up)."""
    for s in summary["schedulers"].values():
        return float(s.get("measured_s", [0.0])[0])
    return 0.0


def _window_text(window: list[float] | None) -> str:
    """``[3628800.0, 3758400.0]`` -> ``42d to 43d12h of the trace`` (as ``--window`` is written)."""
    if not window:
        return "the whole trace"
    a, b = window
    return f"{format_duration(round(a))} to {format_duration(round(b))} of the trace"


def markdown(summary: dict[str, Any], pictures: bool = True) -> str:
    """The Markdown report of ``summary`` (``pictures``: the PNGs are beside it)."""
    exp = summary["experiment"]
    names = list(summary["schedulers"])
    cfg = exp["config"]
    out = [f"# Simulation report: {exp['trace']}", "",
           f"- Trace: **{exp['trace']}**, {exp['tasks']} tasks, {exp['node_failures']} node failures,"
           f" window {_window_text(exp['window_s'])}, time compression"
           f" x{exp['compression']:g}, simulated horizon {approx_duration(exp['horizon_s'])}"
           + (f", of which the first {approx_duration(first_measured(summary))} are a warm-up of"
              f" {approx_duration(exp.get('warmup_s') or 0.0)} of trace before the window: simulated (it"
              f" fills the cluster, the queue and the ledger) but not measured."
              if first_measured(summary) else "."),
           f"- Config: {cfg['origin'] or '(in memory)'}"
           f"{' @ ' + cfg['revision'][:12] if cfg['revision'] else ''}, {cfg['leaves']} budget leaves, "
           + ", ".join(f"{n} {c['nodes']}x{c['gpus'] // max(1, c['nodes'])} {c['gpu_type']}"
                       for n, c in cfg["clusters"].items()) + f" ({cfg['gpus']} GPUs)"
           + (f"; set on the command line: {', '.join(cfg['overrides'])}." if cfg.get("overrides") else "."),
           f"- Lookback {approx_duration(cfg['lookback_s'])}, min-runtime cap {approx_duration(cfg['min_runtime_cap_s'])},"
           f" scheduling pass every {approx_duration(cfg['scheduling_interval_s'])};"
           f" up to {cfg['reservations']} reservations a pass on at most"
           f" {100 * cfg['reservation_share']:g}% of the GPUs, loans {'on' if cfg['loans'] else 'off'};"
           f" seed {exp['seed']};"
           f" checkpoint loss {approx_duration(exp['options']['checkpoint_loss_s'])},"
           f" restart overhead {approx_duration(exp['options']['restart_overhead_s'])}.", "",
           "## Headline", "", "| measure | " + " | ".join(names) + " |",
           "|---|" + "---|" * len(names)]
    for label, vals in summary_rows(summary):
        out.append(f"| {label} | " + " | ".join(vals) + " |")
    out += ["", "## Teams", "",
            "Entitled = the team's share, capped hour by hour by its demand (unused share goes to "
            "siblings first, by share). Delivered = GPU-hours its work ran (charged or free). "
            "`*` = enough demand (demand at least its share in half the hours)."
            + (f" The entitlement and `*` are the {names[0]} run's; a team's demand counts its "
               "queued work, so each scheduler has its own entitlement: the percentage beside a "
               "delivery is of that scheduler's, written with it where it differs (`of N`)."
               if len(names) > 1 else ""), "",
            f"| team | share | {names[0] + ' ' if len(names) > 1 else ''}entitled GPU-h | "
            + " | ".join(f"{n} delivered" for n in names)
            + " | " + " | ".join(f"{n} p90 wait" for n in names) + " |",
            "|---|---|---|" + "---|" * (2 * len(names))]
    first = summary["schedulers"][names[0]]
    for leaf, t in first["teams"].items():
        cells = []
        for n in names:
            tt = summary["schedulers"][n]["teams"][leaf]
            own = (f" of {tt['entitled_gpu_h']:.0f}"
                   if f"{tt['entitled_gpu_h']:.0f}" != f"{t['entitled_gpu_h']:.0f}" else "")
            cells.append(f"{tt['delivered_gpu_h']:.0f} ({pct(tt['ratio'])}{own})")
        waits = [approx_duration(summary["schedulers"][n]["waits"]["by_team"].get(leaf, {}).get("p90_s"))
                 for n in names]
        mark = "*" if t["enough_demand"] else ""
        out.append(f"| {leaf}{mark} | {pct(t['share'])} | {t['entitled_gpu_h']:.0f} | "
                   + " | ".join(cells) + " | " + " | ".join(waits) + " |")
    out += _waiting_table(summary, names)
    out += ["", "## How to read it", "",
            "- **Queue wait** is submission to first start; tasks never started count with their "
            "wait so far at the horizon (`never started`), so percentiles are lower bounds then.",
            "- **debug**: funded, at most the policy's debug GPUs and min runtime; **large**: gangs "
            "of 64 GPUs or more; **small**: the rest.",
            "- **Occupancy** counts healthy GPUs only; **unallocated share** is free, uncharged work.",
            "- **Why work waited**: *no-room* (preempting all the work it may preempt would not make "
            "room), *pingpong* (lower-ranked work would, but the anti-ping-pong rule forbids it), "
            "*kept-off* (kept off nodes reserved for better-ranked work), *reserved* / *holding* "
            "(it holds a timed reservation / a drain hold), *no-reservation* (no schedulable node or "
            "group is big enough to hold it, even empty), *free-work* (unallocated work waits for "
            "idle GPUs).",
            "- **Idle** rows split capacity that did no work, as shares of all GPU-time: *scheduling "
            "lag* (pending work would fit but no pass has run since the GPUs came free), *held back "
            "by the scheduler* (pending work would fit and the last pass kept it off: the budget "
            "scheduler's GPUs kept for a large job's reservation, monopoly's GPUs of a team's quota "
            "that its own work does not fill), *fragmentation* (work is pending but no pending shape fits "
            "the free GPUs as they lie), *no pending work*, *unhealthy nodes* (out of service, "
            "outside occupancy).",
            "- **GPU-h lost** is run time thrown away by preemption (whole runs of non-resumable "
            "work; checkpoint loss and restart overhead of resumable work). *Of runs charged to "
            "a budget*: the part of the preemptions and of the loss that hit funded work as it ran "
            "charged; the rest hit unallocated work, which runs free on GPUs nobody's budget "
            "wants and is preempted first by design.",
            "- Pictures: `gantt.png` (one row per GPU, hue = team, hatched = preemptible, red = "
            "preempted), `usage.png` (delivered vs entitled per team), `waits.png` (wait CDFs)"
            + (", `waiting.png` (why work waited, per team and cause)" if any(
                t.get("waiting_gpu_h") for s in summary["schedulers"].values()
                for t in s["teams"].values()) else "") + "." if pictures else
            "- Pictures: none (`--no-pictures`).", ""]
    return "\n".join(out)


# what a report directory holds (write_report and the run record beside it, runrecord.write)
REPORT_FILES = ("summary.json", "report.md", "run.json", "tasks-*.csv", "gantt.png", "usage.png",
                "waits.png", "waiting.png")


def write_report(exp: Experiment, outdir: str | Path, pictures: bool = True,
                 parallel: bool = False, asks: list[Ask] | None = None) -> list[Path]:
    """``summary.json``, ``report.md``, ``tasks-<scheduler>.csv`` and, with ``pictures``, the
    PNGs (:mod:`engine.sim.plots`) into ``outdir``; the paths written. ``parallel``: the
    pictures drawn in forked worker processes where the machine allows
    (:func:`engine.sim.forked.run_forked`; the same bytes). ``asks``: :func:`short_teams` of
    the budget run, when the caller has them already."""
    out = Path(outdir)
    out.mkdir(parents=True, exist_ok=True)
    summary = exp.summary()
    paths = []
    p = out / "summary.json"
    p.write_text(json.dumps(summary, indent=2, sort_keys=True) + "\n", encoding="utf-8")
    paths.append(p)
    p = out / "report.md"
    if asks is None:
        budget = exp.results.get("budget")
        asks = short_teams(budget, summary["schedulers"]["budget"]) if budget is not None else []
    p.write_text(markdown(summary, pictures and bool(exp.results)) + "\n".join(_short_teams(asks)),
                 encoding="utf-8")
    paths.append(p)
    for name, res in exp.results.items():
        p = out / f"tasks-{name}.csv"
        with open(p, "w", encoding="utf-8", newline="") as fh:
            w = csv.writer(fh, lineterminator="\n")
            w.writerow(["id", "leaf", "class", "gpus", "funded", "submit", "first_start", "end",
                        "state", "wait_s", "queued_s", "preemptions", "gpu_s_lost"])
            for rec in sorted(res.tasks.values(), key=lambda r: (r.submit, r.id)):
                w.writerow([rec.id, rec.leaf or "", rec.klass, rec.gpus, int(rec.funded),
                            round(rec.submit, 3),
                            "" if rec.first_start is None else round(rec.first_start, 3),
                            "" if rec.end is None else round(rec.end, 3), rec.state,
                            "" if rec.wait is None else round(rec.wait, 3), round(rec.queued_s, 3),
                            rec.preemptions, round(rec.gpu_s_lost, 3)])
        paths.append(p)
    if pictures and exp.results:
        results = list(exp.results.values())
        window = exp.gantt_window or gantt_window(results[0])
        # (every result's metrics, which the drawings read, were computed by exp.summary()
        # above, before any drawing is forked)
        draw: list[Callable[[Any], Path | None]] = [
            lambda _: plot_gantt(results, out / "gantt.png", window),
            lambda _: plot_usage(results, out / "usage.png"),
            lambda _: plot_waits(results, out / "waits.png"),
            lambda _: plot_waiting(results, out / "waiting.png")]
        drawn = run_forked(draw) if parallel else None
        if drawn is None:
            drawn = [d(None) for d in draw]
        paths += [p for p in drawn if p is not None]
    return paths


def _waiting_table(summary: dict, names: list[str]) -> list[str]:
    """"Why work waited": per scheduler that gave causes (the budget scheduler, with
    ``SimOptions.causes``), GPU-hours waited per team and cause; nothing when none did."""
    out: list[str] = []
    for n in names:
        teams = summary["schedulers"][n]["teams"]
        rows = {leaf: t["waiting_gpu_h"] for leaf, t in teams.items() if t.get("waiting_gpu_h")}
        if not rows:
            continue
        causes = [c for c in WAIT_CAUSES if any(c in r for r in rows.values())]
        out += ["", f"## Why work waited ({n})", "",
                "GPU-hours of pending work by the cause its status gave after each pass "
                "(see How to read it).", "",
                "| team | " + " | ".join(causes) + " | total |", "|---|" + "---|" * (len(causes) + 1)]
        for leaf, r in rows.items():
            mark = "*" if teams[leaf]["enough_demand"] else ""
            out.append(f"| {leaf}{mark} | " + " | ".join(f"{r.get(c, 0.0):.0f}" for c in causes)
                       + f" | {sum(r.values()):.0f} |")
    return out


@dataclass(frozen=True)
class Ask:
    """A team that fell short and the job to ask about (:func:`short_teams`)."""

    leaf: str
    ratio: float  # delivered / entitled
    job: TaskRecord | None  # its funded job that waited the most GPU-hours; None: none waited
    at: int | None  # the middle of that job's longest wait in the measured window; None: outside
    share_gpus: float = 0.0  # the team's effective share of the run's capacity, in GPUs
    capacity: int = 0  # the run's GPUs


def short_teams(result: SimResult, summary: dict[str, Any]) -> list[Ask]:
    """Each team with enough demand below 95% of its entitlement under the budget scheduler
    (``summary``: its run's summary), worst first, with its funded job that waited the most
    GPU-hours (ties: the larger id) and the instant to ask why: the middle of that job's
    longest wait (between its submission, runs and requeues) inside the measured window."""
    short = sorted((t["ratio"], leaf) for leaf, t in summary["teams"].items()
                   if t["enough_demand"] and t["ratio"] is not None and t["ratio"] < 0.95)
    lo, hi = summary["measured_s"]
    segments: dict[str, list] = {}
    for seg in result.segments if short else ():
        segments.setdefault(seg.task, []).append(seg)
    asks = []
    cap = capacity(result.config)
    for ratio, leaf in short:
        jobs = [r for r in result.tasks.values() if r.leaf == leaf and r.funded and r.queued_s > 0]
        share = summary["teams"][leaf]["share"] * cap
        if not jobs:
            asks.append(Ask(leaf, ratio, None, None, share, cap))
            continue
        job = max(jobs, key=lambda r: (r.gpus * r.queued_s, r.id))
        waits: list[tuple[float, float]] = []  # the job's pending spans: between its runs
        since: float | None = job.submit
        for seg in segments.get(job.id, []):
            if since is None:
                break
            waits.append((since, seg.start))
            since = seg.end if seg.preempted else None
        if since is not None:
            waits.append((since, result.horizon))
        length, a, b = max((min(b, hi) - max(a, lo), max(a, lo), min(b, hi)) for a, b in waits)
        asks.append(Ask(leaf, ratio, job, round((a + b) / 2) if length > 0 else None, share, cap))
    return asks


def _short_teams(asks: list[Ask]) -> list[str]:
    """"Teams that fell short" (:func:`short_teams`) for ``report.md``, with the commands to
    run in the report's directory (``--report .``: its ``run.json``,
    :mod:`engine.commands.runrecord`; the report's bytes do not depend on where it is written).
    Nothing when every team reached 95%."""
    if not asks:
        return []
    lines = ["", "## Teams that fell short (budget)", "",
             "Each team with enough demand below 95% of its entitlement, its funded job that waited "
             "the most GPU-hours, and how to ask the scheduler why, at the middle of that job's "
             "longest wait in the measured window (times are seconds of the run, as in "
             "`tasks-budget.csv`); run the commands in this report's directory.", ""]
    for ask in asks:
        job = ask.job
        if job is None:
            lines.append(f"- **{ask.leaf}** ({pct(ask.ratio)}): no funded job of it waited.")
            continue
        end = {"pending": "still pending at the end", "running": "running at the end"}.get(job.state, job.state)
        # a job larger than the team's share: whenever it runs, the team uses more than its
        # share, and it can start only where a whole set of GPUs comes free at once
        above = (f" (more than the team's share: {ask.share_gpus:.1f} of the run's "
                 f"{ask.capacity} GPUs)" if ask.capacity and job.gpus > ask.share_gpus else "")
        lines.append(
            f"- **{ask.leaf}** ({pct(ask.ratio)}): {job.id}, {job.gpus} GPUs{above}, waited "
            f"{approx_duration(job.queued_s)} in all ({_times(job.preemptions)}, {end})"
            + (f": `allot explain {job.id} --report . --at {ask.at}`" if ask.at is not None else
               ": its waits fall outside the measured window."))
    return lines + [""]


def _times(preemptions: int) -> str:
    return {0: "not preempted", 1: "preempted once"}.get(preemptions, f"preempted {preemptions} times")
