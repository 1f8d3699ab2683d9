"""What ``allot simulate --sweep`` writes and prints of its runs (:mod:`engine.commands.sweep`
builds ``sweep.json``, the document): the points read as one summary whose schedulers are the
points (:func:`table_text`, the table ``allot simulate`` prints, one column per value),
``sweep.md`` (that table, and each team's share of its entitlement per value) and ``sweep.png``
(the headline figures per value, :data:`PANELS`); :func:`write` writes them to ``--out``, which
holds this sweep's files only (:data:`SWEEP_FILES`).
"""

from __future__ import annotations

import json
import shlex
from pathlib import Path
from typing import Any, Callable

from engine.commands import remove_outputs, runrecord


def heading(knobs: list[str]) -> str:
    """What a column heading holds: ``placement.reservationShare`` or, for several knobs,
    ``placement.reservationShare/placement.loans``."""
    return "/".join(knobs)


def _as_experiment(doc: dict[str, Any]) -> dict[str, Any]:
    """The points as one summary whose "schedulers" are the points, each named by its label,
    ``(file)`` after the policy file's (for the report's tables)."""
    return {"experiment": doc["points"][0]["summary"]["experiment"],
            "schedulers": {p["label"] + (" (file)" if p["file"] else ""): p["summary"]["schedulers"]["budget"]
                           for p in doc["points"]}}


def table_text(doc: dict[str, Any]) -> str:
    from engine.sim.report import text_table

    return text_table(_as_experiment(doc))


def team_rows(doc: dict[str, Any]) -> list[tuple[str, list[str]]]:
    """Per team with an entitlement at some point: its share of it delivered, per point
    (``*``: enough demand at every point)."""
    from engine.sim.report import pct

    scheds = list(_as_experiment(doc)["schedulers"].values())
    rows = []
    for team in scheds[0]["teams"]:
        at = [s["teams"][team] for s in scheds]
        if not any(t["entitled_gpu_h"] for t in at):
            continue
        star = "*" if all(t["enough_demand"] for t in at) else ""
        rows.append((team + star, [pct(t["ratio"]) if t["entitled_gpu_h"] else "-" for t in at]))
    return rows


def markdown(doc: dict[str, Any]) -> str:
    from engine.sim.report import summary_rows

    summary = _as_experiment(doc)
    names = list(summary["schedulers"])
    exp = summary["experiment"]

    def table(rows: list[tuple[str, list[str]]], first: str) -> list[str]:
        return ([f"| {first} | " + " | ".join(names) + " |", "|---" * (len(names) + 1) + "|"]
                + [f"| {r} | " + " | ".join(v) + " |" for r, v in rows])

    return "\n".join([
        f"# Sweep: {heading(doc['knobs'])}", "",
        f"The same replay ({exp['trace']}, {exp['tasks']} tasks, {exp['config']['gpus']} GPUs, seed "
        f"{exp['seed']}) under the budget scheduler, once per value (column headings: "
        f"{heading(doc['knobs'])}); each column is what "
        f"`allot simulate --set KNOB=VALUE{''.join(f' --set {shlex.quote(s)}' for s in doc['set'])} "
        f"--baseline none` reports for it (`sweep.json` holds each run's whole summary).", "",
        doc["note"] + ".", "",
        *table(summary_rows(summary), "measure"), "",
        "## Teams: delivered GPU-hours as a share of the entitlement", "",
        "`*` = enough demand at every value (demand at least its share in half the hours).", "",
        *table(team_rows(doc), "team"), ""])


# what an --out directory of a sweep holds (removed first: it holds this sweep only)
SWEEP_FILES = ("sweep.json", "sweep.md", "sweep.png", f"point-*/{runrecord.FILE}")


def write(doc: dict[str, Any], out: Path, pictures: bool = True) -> list[Path]:
    out.mkdir(parents=True, exist_ok=True)
    remove_outputs(out, SWEEP_FILES)
    paths = [out / "sweep.json", out / "sweep.md"]
    paths[0].write_text(json.dumps(doc, indent=2, sort_keys=True) + "\n")
    paths[1].write_text(markdown(doc))
    if pictures:
        paths.append(plot(doc, out / "sweep.png"))
    return paths


def _pct(x: float | None) -> float | None:
    return None if x is None else 100 * x


def _hours(x: float | None) -> float | None:
    return None if x is None else x / 3600


PANELS: tuple[tuple[str, Callable[[dict[str, Any]], float | None]], ...] = (
    # (title, the figure from a budget summary; None: none to show, e.g. no large gang)
    ("entitled GPU-h delivered (%)", lambda s: _pct(s["entitlement"]["delivered_within_entitlement"])),
    ("worst team with enough demand (%)", lambda s: _pct(s["entitlement"]["worst_ratio"])),
    ("occupancy of healthy GPUs (%)", lambda s: _pct(s["occupancy"])),
    ("p90 queue wait, debug (s)", lambda s: s["waits"]["by_class"]["debug"]["p90_s"]),
    ("p90 queue wait, large gangs (h)", lambda s: _hours(s["waits"]["by_class"]["large"]["p90_s"])),
    ("GPU-h lost to preemption", lambda s: s["gpu_hours"]["lost_to_preemption"]),
)


def plot(doc: dict[str, Any], path: Path) -> Path:
    """One panel per headline figure, its value at each point (in the sweep's order), each
    point labelled with its value; a point without one (no large gang, no team with enough
    demand) is left out. The points of one knob are joined by a line (its values in order);
    the combinations of several are not (``0.1/true`` to ``0.1/false`` is no trend)."""
    from engine.sim.plots import _META, plt

    scheds = _as_experiment(doc)["schedulers"]
    names = list(scheds)
    slant = len(names) > 4 or max(len(n) for n in names) > 12
    fig, axes = plt.subplots(2, 3, figsize=(12, 6.5))
    for ax, (title, get) in zip(axes.flat, PANELS):
        got = [(i, get(s)) for i, s in enumerate(scheds.values())]
        shown = [(i, y) for i, y in got if y is not None]
        if shown:
            ax.plot([i for i, _ in shown], [y for _, y in shown], marker="o", color="#1f77b4",
                    linestyle="-" if len(doc["knobs"]) == 1 else "none")
            for i, y in shown:
                ax.annotate(f"{y:.3g}", (i, y), textcoords="offset points", xytext=(0, 5),
                            ha="center", fontsize=7)
            ax.margins(y=0.2)
        else:
            ax.text(0.5, 0.5, "none in this replay", transform=ax.transAxes, ha="center",
                    va="center", fontsize=8, color="grey")
            ax.set_yticks([])
        ax.set_title(title, fontsize=9)
        ax.set_xlim(-0.5, len(names) - 0.5)
        ax.set_xticks(range(len(names)), names, rotation=30 if slant else 0,
                      ha="right" if slant else "center", fontsize=7)
        ax.tick_params(axis="y", labelsize=7)
        ax.grid(alpha=0.3)
    fig.suptitle(f"allot simulate --sweep: {heading(doc['knobs'])} (budget scheduler)", fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=100, metadata=_META)
    plt.close(fig)
    return path
