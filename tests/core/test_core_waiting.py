"""``Decision.waiting`` says in one word what each waiting workload's status says in full.

For every pending workload of random busy worlds (with and without loans, reservations,
victims past their min runtime) and a hand-built one with a loan: it is in ``waiting``
exactly when its status is pending, and its cause matches the words of its status reason.
"""

from __future__ import annotations

import collections
import random

from engine.core.decide import decide
from engine.core.statuses import WAIT_CAUSES

from .test_core_victim_caches import _busy_world
from .test_core_walk_shortcuts import _loan_world, _walk_world

# words of the status reason that each cause's workloads show (one of them)
SAYS = {
    "holding": ("; holding ",),
    "reserved": ("enough GPUs become preemptible",),
    "kept-off": ("reserved for", "held for"),
    "no-reservation": ("no reservation:",),
    "pingpong": ("the anti-ping-pong rule forbids preempting it",),
    "free-work": ("unallocated work only runs on idle GPUs",),
    "no-room": ("would not make room", "to preempt", "nothing preemptible"),
}


def test_every_waiting_workload_has_the_cause_its_status_gives():
    seen: collections.Counter[str] = collections.Counter()
    worlds = [(_busy_world if seed % 2 else _walk_world)(random.Random(seed)) for seed in range(60)]
    for world in [*worlds, _loan_world()]:
        d = decide(*world)
        pending = {wid for wid, st in d.statuses.items() if st.state == "pending"}
        assert set(d.waiting) == pending
        for wid, cause in d.waiting.items():
            assert cause in WAIT_CAUSES
            reason = d.statuses[wid].reason
            assert any(words in reason for words in SAYS[cause]), (cause, reason)
            if cause in ("holding", "reserved"):  # the holders' causes are told apart
                other = "reserved" if cause == "holding" else "holding"
                assert not any(words in reason for words in SAYS[other]), (cause, reason)
            seen[cause] += 1
    assert {"no-room", "kept-off", "reserved", "holding", "pingpong"} <= set(seen), seen
