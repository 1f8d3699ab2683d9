"""The pictures of a simulation report (matplotlib, Agg backend, deterministic PNGs).

* ``gantt.png``: the brief's picture. One row per GPU, one bar per task run, one hue per team
  (budget leaf; grey for work with none), hatched while the run is preemptible (unallocated
  work, or past its min runtime), a red edge on a run that ended by preemption. One panel per
  scheduler, side by side, same window and GPUs. The legend lists the teams drawn.
* ``usage.png``: per team, delivered GPUs over time under each scheduler against the budget
  scheduler's entitlement (allocation capped by demand), hourly (in 6-hour means past 4
  days); teams with no work in the window (nothing entitled or delivered under any
  scheduler) get no panel, and are named under the panels instead.
* ``waits.png``: the distribution (empirical CDF, log time axis) of queue waits per class and
  scheduler; censored waits (never started) count at their value at the horizon.
* ``waiting.png``: why work waited (:mod:`engine.sim.causes`), for each scheduler that gave
  causes (the budget scheduler): one bar per team whose work waited, split by cause as a
  share of the team's waiting GPU-hours (a hue per cause, in
  :data:`~engine.core.statuses.WAIT_CAUSES` order), so a small team's causes read as well as
  a large one's; teams by effective share as in ``usage.png``, each labelled with its total
  and the share of its entitlement it was delivered (``*``: enough demand to count towards
  "teams >= 95%"). A team that waited under 1% (:data:`FAINT_SHARE`) of the most any team
  waited is drawn faded and hatched, its total in bold after "only" (the legend says so): a
  full bar of 0.05 GPU-h does not read like one of hundreds.
"""

from __future__ import annotations

import textwrap
from pathlib import Path
from typing import Iterable, Sequence

import numpy as np
from matplotlib.collections import PolyCollection
from matplotlib.patches import Patch

from engine.core.statuses import NO_TEAM, WAIT_CAUSES
from engine.pictures import pyplot
from engine.sim.trace import CLASSES

plt = pyplot()

_META = {"Software": None}
CLASS_WORDS = {"debug": "debug jobs", "small": "small jobs", "large": "large gangs (64+ GPUs)"}
MAX_ROWS = 256


# tab20, its strong hues first, without its red (the preempted edge's colour) and its two
# greys (work of no team's)
TEAM_PALETTE = [plt.get_cmap("tab20")(i) for i in (*range(0, 20, 2), *range(1, 20, 2))
                if i not in (6, 14, 15)]
NO_TEAM_COLOR = (0.6, 0.6, 0.6, 1.0)


def by_share(tree, leaves: Iterable[str]) -> list[str]:
    """``leaves`` by effective share (largest first), then name: the order of every picture."""
    return sorted(leaves, key=lambda l: (-tree.effective_share(l), l))


def team_colors(leaves: Sequence[str]) -> dict[str | None, tuple]:
    """A hue per team, strong hues first in the order given (repeating past 17 teams); grey
    for work of no team."""
    n = len(TEAM_PALETTE)
    out: dict[str | None, tuple] = {leaf: TEAM_PALETTE[i % n] for i, leaf in enumerate(leaves)}
    out[None] = NO_TEAM_COLOR
    return out


def gantt_window(result, hours: float = 48.0) -> tuple[float, float]:
    """A default window: ``hours`` ending at the horizon, or the whole measured window (after
    any warm-up) if shorter."""
    end = result.horizon
    return max(float(getattr(result, "measure_from", 0.0) or 0.0), end - hours * 3600.0), end


def plot_gantt(results: Sequence, path: Path, window: tuple[float, float]) -> Path:
    config = results[0].config
    rows: list[tuple[str, int]] = [(n, g) for c in config.policy.clusters
                                   for n in c.node_names() for g in range(c.gpus_per_node)]
    rows = rows[:MAX_ROWS]
    row_of = {r: i for i, r in enumerate(rows)}
    colors = team_colors(by_share(config.tree, config.tree.leaves()))  # strongest hues: largest teams
    a, b = window
    scale = 3600.0
    fig, axes = plt.subplots(1, len(results), figsize=(7 * len(results), 0.03 * len(rows) + 3),
                             sharey=True, squeeze=False)
    shown: set[str | None] = set()  # the teams drawn (None: work of no team), for the legend
    for ax, res in zip(axes[0], results):
        polys: dict[tuple, list] = {}
        for s in res.segments:
            if s.end <= a or s.start >= b:
                continue
            lo, hi = max(s.start, a), min(s.end, b)
            cut = min(max(s.protected_until, lo), hi)
            for node, idx in s.gpus:
                for g in idx:
                    y = row_of.get((node, g))
                    if y is None:
                        continue
                    for x0, x1, hatch in ((lo, cut, False), (cut, hi, True)):
                        if x1 > x0:
                            box = [((x0 - a) / scale, y), ((x1 - a) / scale, y),
                                   ((x1 - a) / scale, y + 0.9), ((x0 - a) / scale, y + 0.9)]
                            polys.setdefault((s.leaf, hatch), []).append(box)
                    if s.preempted and s.end <= b:
                        x = (s.end - a) / scale
                        polys.setdefault(("__red__", False), []).append(
                            [(x - 0.02, y), (x, y), (x, y + 0.9), (x - 0.02, y + 0.9)])
        for (leaf, hatch), boxes in sorted(polys.items(), key=lambda kv: (str(kv[0][0]), kv[0][1])):
            if leaf == "__red__":
                # above the bars (added in name order, some after it), or the bar it ends hides it
                ax.add_collection(PolyCollection(boxes, facecolors="red", edgecolors="red",
                                                 linewidths=0.8, zorder=3))
                continue
            shown.add(leaf if leaf in colors else None)
            ax.add_collection(PolyCollection(boxes, facecolors=[colors.get(leaf, colors[None])],
                                             edgecolors="white" if hatch else "none",
                                             hatch="////" if hatch else None, linewidths=0.0))
        ax.set_xlim(0, (b - a) / scale)
        ax.set_ylim(len(rows), 0)
        ax.set_title(f"{res.scheduler}")
        ax.set_xlabel(f"hours from t={a / 3600.0:.1f} h")
    axes[0][0].set_ylabel(f"GPU (first {len(rows)})" if len(rows) == MAX_ROWS else "GPU")
    handles = [Patch(facecolor=colors[l], label=l) for l in sorted(config.tree.leaves()) if l in shown]
    if None in shown:
        handles.append(Patch(facecolor=colors[None], label=NO_TEAM))
    handles += [Patch(facecolor="white", edgecolor="black", hatch="////", label="preemptible"),
                Patch(facecolor="red", label="preempted")]
    _legend_below(fig, handles, ncol=min(7, len(handles)))
    fig.savefig(path, dpi=90, metadata=_META)
    plt.close(fig)
    return path


def _legend_below(fig, handles: list, ncol: int) -> None:
    """The figure's legend centred under the panels: as many columns as fit the figure's
    width (at most ``ncol``), and room kept for all its rows, so that it neither runs off the
    sides nor covers the x-axis labels (a one-node run's short figure)."""
    renderer = fig.canvas.get_renderer()
    while True:
        legend = fig.legend(handles=handles, loc="lower center", ncol=ncol, fontsize=7)
        box = legend.get_window_extent(renderer)
        if ncol == 1 or box.width <= 0.98 * fig.bbox.width:
            break
        legend.remove()
        ncol -= 1
    fig.tight_layout(rect=(0, min(0.6, box.height / fig.bbox.height + 0.01), 1, 1))


def _bins(x: np.ndarray, k: int = 6) -> np.ndarray:
    n = len(x) // k * k
    head = x[:n].reshape(-1, k).mean(axis=1) if n else np.zeros(0)
    return np.concatenate([head, [x[n:].mean()]]) if len(x) > n else head


def usage_teams(results: Sequence) -> tuple[list[str], list[str]]:
    """The teams of ``usage.png``, by effective share then name: those with a panel (some
    GPU-time entitled or delivered in the window, under any scheduler) and those without."""
    config = results[0].config
    ref = next((r for r in results if r.scheduler == "budget"), results[0]).metrics()
    drawn: list[str] = []
    idle: list[str] = []
    for leaf in by_share(config.tree, config.tree.leaves()):
        worked = ref.entitled_h[leaf].any() or any(r.metrics().delivered_h[leaf].any() for r in results)
        (drawn if worked else idle).append(leaf)
    return drawn, idle


def plot_usage(results: Sequence, path: Path) -> Path:
    config = results[0].config
    leaves, idle = usage_teams(results)
    ref = next((r for r in results if r.scheduler == "budget"), results[0]).metrics()
    cols = 4
    nrows = max(1, (len(leaves) + cols - 1) // cols)
    fig, axes = plt.subplots(nrows, cols, figsize=(4 * cols, 2.3 * nrows), squeeze=False)
    k = 1 if ref.hours <= 96 else 6  # hourly points for runs of up to 4 days
    for i, leaf in enumerate(leaves):
        ax = axes[i // cols][i % cols]
        t = np.arange(len(_bins(ref.entitled_h[leaf], k))) * float(k)
        ax.fill_between(t, _bins(ref.entitled_h[leaf], k), step="post", color="0.85", label="entitled")
        for res in results:
            ax.step(t, _bins(res.metrics().delivered_h[leaf], k), where="post", label=res.scheduler,
                    linewidth=1)
        ax.set_title(f"{leaf} ({config.tree.effective_share(leaf):.1%})", fontsize=8)
        ax.tick_params(labelsize=6)
    for j in range(len(leaves), nrows * cols):
        axes[j // cols][j % cols].axis("off")
    if leaves:
        axes[0][0].legend(fontsize=6)
    else:
        axes[0][0].text(0.5, 0.5, "no team had work in the window", ha="center", va="center")
    label = "hours of the measured window" + (" (6-hour means)" if k > 1 else "")
    if idle:  # wrapped to the figure's width (about 10 characters an inch), not cut at its sides
        label += "\n" + textwrap.fill("no work in the window (no panel): " + ", ".join(idle),
                                      width=10 * 4 * cols, break_on_hyphens=False)
    fig.supxlabel(label)
    fig.supylabel("GPUs")
    fig.tight_layout()
    fig.savefig(path, dpi=80, metadata=_META)
    plt.close(fig)
    return path


def plot_waits(results: Sequence, path: Path) -> Path:
    fig, axes = plt.subplots(1, len(CLASSES), figsize=(5 * len(CLASSES), 3.5), squeeze=False)
    for ax, klass in zip(axes[0], CLASSES):
        drawn = False
        for res in results:
            w = np.sort(res.metrics().waits_by_class[klass])
            if len(w):
                ax.step(np.maximum(w, 1.0), np.arange(1, len(w) + 1) / len(w), where="post",
                        label=f"{res.scheduler} (n={len(w)})")
                drawn = True
        ax.set_xscale("log")
        ax.axvline(120, color="0.5", linestyle=":", linewidth=1)
        ax.set_title(f"{klass} queue wait")
        ax.set_xlabel("seconds (0 s drawn at 1 s; dotted: 2 min)")
        if not drawn:
            ax.text(0.5, 0.5, f"no {CLASS_WORDS.get(klass, klass)} in the window", ha="center",
                    va="center", transform=ax.transAxes, color="0.4")
        ax.set_ylim(0, 1.01)
        if ax.get_legend_handles_labels()[0]:
            ax.legend(fontsize=7)
    axes[0][0].set_ylabel("fraction of tasks")
    fig.tight_layout()
    fig.savefig(path, dpi=90, metadata=_META)
    plt.close(fig)
    return path


CAUSE_COLORS = {cause: plt.get_cmap("Set2")(i) for i, cause in enumerate(WAIT_CAUSES)}
# a team whose waiting GPU-hours are under this share of the most any team waited (in the
# panel) is drawn faded and hatched: its bar is its own split, not an amount worth the width
FAINT_SHARE = 0.01
FAINT_ALPHA = 0.45
FAINT_HATCH = "////"


def _gpu_h(h: float) -> str:
    """GPU-hours as a team's label says them: whole hours, two figures under ten (0.05)."""
    return f"{h:,.0f}" if h >= 10 else f"{h:.2g}"


def plot_waiting(results: Sequence, path: Path) -> Path | None:
    """``waiting.png`` (module docstring); ``None`` (and no file) when no team's work waited
    for a cause (none collected, or only work of no team waited), as the report's mention."""
    config = results[0].config
    leaves = by_share(config.tree, (leaf for leaf in config.tree.leaves()
                                    if any(leaf in r.waiting for r in results)))
    given = [r for r in results if any(leaf in r.waiting for leaf in leaves)]
    if not given:
        return None
    fig, axes = plt.subplots(1, len(given), figsize=(8 * len(given), 0.45 * len(leaves) + 1.8),
                             squeeze=False)
    for ax, res in zip(axes[0], given):
        teams = res.summary()["teams"]
        y = np.arange(len(leaves))[::-1]  # the largest share on top
        hours = {c: np.array([res.waiting.get(leaf, {}).get(c, 0.0) / 3600.0 for leaf in leaves])
                 for c in WAIT_CAUSES}
        total = np.sum(list(hours.values()), axis=0)
        faint = total < FAINT_SHARE * total.max()
        left = np.zeros(len(leaves))
        for cause in WAIT_CAUSES:
            if hours[cause].any():
                part = np.divide(hours[cause], total, out=np.zeros(len(leaves)), where=total > 0)
                bars = ax.barh(y, part, left=left, color=CAUSE_COLORS[cause], label=cause, height=0.7)
                for bar in (b for b, f in zip(bars, faint) if f):
                    bar.set_alpha(FAINT_ALPHA)
                    bar.set_hatch(FAINT_HATCH)
                left += part
        for yi, leaf, h, f in zip(y, leaves, total, faint):
            ratio = teams[leaf]["ratio"]
            got = "no entitlement" if ratio is None else f"{ratio:.0%} of entitlement"
            ax.text(1.02, yi, f"{'only ' if f else ''}{_gpu_h(h)} GPU-h; {got}"
                    f"{'*' if teams[leaf]['enough_demand'] else ''}", va="center", fontsize=7,
                    fontweight="bold" if f else "normal")
        ax.set_yticks(y, [f"{leaf} ({config.tree.effective_share(leaf):.1%})" for leaf in leaves],
                      fontsize=7)
        ax.set_xlim(0, 1.6)  # room for the labels right of the bars
        ax.set_xticks([0, 0.25, 0.5, 0.75, 1.0], ["0", "25%", "50%", "75%", "100%"])
        ax.set_xlabel("share of the team's pending GPU-hours, by cause")
        ax.set_title(f"why work waited ({res.scheduler}); * enough demand", fontsize=9)
        handles, _ = ax.get_legend_handles_labels()
        if faint.any():
            handles.append(Patch(facecolor="grey", alpha=FAINT_ALPHA, hatch=FAINT_HATCH,
                                 label=f"faded: waited under {FAINT_SHARE:.0%} of the most "
                                       f"({_gpu_h(total.max())} GPU-h)"))
        ax.legend(handles=handles, fontsize=7, loc="upper center",
                  bbox_to_anchor=(0.5, -0.5 / len(leaves) - 0.08), ncol=len(WAIT_CAUSES), frameon=False)
    fig.tight_layout()
    fig.savefig(path, dpi=90, metadata=_META, bbox_inches="tight")
    plt.close(fig)
    return path
