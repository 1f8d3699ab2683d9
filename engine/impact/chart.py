"""A small PNG bar chart of the per-team change in delivered GPU-hours (head minus base).

One horizontal bar per team that moved (gains in green to the right, losses in red to the
left, largest at the top), the value printed at the end of each bar, at most ``MAX_BARS``
bars (the rest are summed into one "N other teams" bar per sign). Matplotlib runs on the
non-interactive Agg backend; the figure is about 640 px wide so it reads inline in a PR.
"""

from __future__ import annotations

from pathlib import Path

from engine.impact.replay import ReplayImpact

MAX_BARS = 20
GAIN, LOSS = "#2e7d32", "#c62828"


def bars(replay: ReplayImpact) -> list[tuple[str, float]]:
    """(label, change in GPU-hours) to draw, top to bottom."""
    gain, loss = list(replay.gainers), list(replay.losers)
    half = MAX_BARS // 2
    out = [(t.team, t.change) for t in gain[:half]]
    if len(gain) > half:
        out.append((f"{len(gain) - half} other teams", sum(t.change for t in gain[half:])))
    tail = [(t.team, t.change) for t in loss[:half]]
    if len(loss) > half:
        tail.append((f"{len(loss) - half} other teams", sum(t.change for t in loss[half:])))
    return out + list(reversed(tail))  # the largest loss ends up at the bottom


def write_chart(replay: ReplayImpact, path: str | Path, title: str = "") -> Path:
    from engine.pictures import pyplot

    plt = pyplot()
    data = bars(replay)
    path = Path(path)
    height = 1.2 + 0.32 * max(1, len(data))
    fig, ax = plt.subplots(figsize=(6.4, height), dpi=100)
    try:
        if data:
            labels = [d[0] for d in data][::-1]
            values = [d[1] for d in data][::-1]
            colors = [GAIN if v > 0 else LOSS for v in values]
            ax.barh(range(len(values)), values, color=colors, height=0.6)
            ax.set_yticks(range(len(values)), labels, fontsize=8)
            span = max(abs(v) for v in values) or 1.0
            for i, v in enumerate(values):
                ax.text(v + (0.02 * span if v >= 0 else -0.02 * span), i, f"{v:+,.1f}",
                        va="center", ha="left" if v >= 0 else "right", fontsize=7)
            ax.set_xlim(-1.3 * span if min(values) < 0 else 0, 1.3 * span if max(values) > 0 else 0)
        else:
            ax.text(0.5, 0.5, "no team's delivered GPU-hours moved", ha="center", va="center",
                    transform=ax.transAxes)
            ax.set_yticks([])
        ax.axvline(0, color="#555", linewidth=0.8)
        ax.set_xlabel("change in delivered GPU-hours (head − base)", fontsize=8)
        ax.tick_params(axis="x", labelsize=7)
        ax.set_title(title or f"Per-team change, {replay.horizon_s / 86400:.1f} days of {replay.trace}",
                     fontsize=9)
        for side in ("top", "right"):
            ax.spines[side].set_visible(False)
        fig.tight_layout()
        path.parent.mkdir(parents=True, exist_ok=True)
        fig.savefig(path, format="png")
    finally:
        plt.close(fig)
    return path
