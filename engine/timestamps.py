"""Times of a cluster's clock as people read them (kept out of :mod:`engine.durations`, which
the pure core imports: nothing here is for the core).

The core says times as ``t=<seconds>`` on its shell's clock: the simulator's seconds of a run,
the cluster's epoch seconds. What the reconciler writes for people (Events, reason
annotations) and what the views show of a live cluster say an epoch time as RFC 3339 in UTC.
"""

from __future__ import annotations

import re
from datetime import datetime, timezone

_EPOCH = re.compile(r"\bt=(\d{10,})(?:\.\d+)?")  # ``t=1796469421``: epoch seconds (2001 on)


def readable_times(text: str | None) -> str | None:
    """``text`` with each epoch ``t=<seconds>`` as RFC 3339 in UTC (``its min runtime ended at
    2026-12-05T11:20:00Z``); a simulator's seconds (fewer than ten digits) are left as they are."""
    if not text:
        return text
    return _EPOCH.sub(lambda m: datetime.fromtimestamp(int(m.group(1)), tz=timezone.utc)
                      .strftime("%Y-%m-%dT%H:%M:%SZ"), text)
