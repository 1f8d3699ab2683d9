"""Progress on stderr for the long commands (``allot simulate``, ``allot impact``): one line
redrawn in place, with bars of how far each run is."""

from __future__ import annotations

import sys
import time


def bar(fraction: float, width: int) -> str:
    """``[#####     ]  50.0%`` for ``fraction`` in [0, 1]."""
    return f"[{'#' * int(width * fraction):<{width}}] {100 * fraction:5.1f}%"


class ProgressLine:
    """One line on stderr, redrawn in place (``\\r``): a draw within 0.2 s of the last one is
    skipped, except the final one, which ends the line (the next draw starts a new one)."""

    def __init__(self) -> None:
        self.last = 0.0

    def draw(self, text: str, final: bool = False) -> None:
        t = time.monotonic()
        if not final and t - self.last < 0.2:
            return
        self.last = t
        sys.stderr.write(f"\r{text}" + ("\n" if final else ""))
        sys.stderr.flush()
