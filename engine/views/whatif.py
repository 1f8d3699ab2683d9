"""What a user can change: answer "what if" by deciding again on a changed copy of the state.

``decide()`` is pure, so each suggestion is exact for the state at hand: the workload's
contract is changed in a copy of the snapshot and the core decides again; the suggestion
reports whether the workload would then start at once, or where it would stand in the queue.
Nothing is guessed. Tried, in order (each at most once, so a few decisions in all):

* **fewer GPUs**: halve the pods of a gang (or the GPUs of a single pod) until one shape
  starts now (at most 4 shapes);
* **shorter min runtime**: the debug rule's min runtime (``policy.debug.max_min_runtime_s``),
  which lets it backfill GPUs reserved for a larger job and charges less (anti-ping-pong);
* **another budget**: every other leaf whose principals name the workload's owner or
  namespace (the ``ns`` of an ``ns/name`` id): the budget's rank and the result there;
* **free (unallocated) work**: min runtime 0 runs on idle GPUs only, uncharged and
  preemptible at any time.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

from engine.core.decide import decide
from engine.core.explain import shape_text
from engine.core.types import Contract, Snapshot, Workload
from engine.durations import format_duration
from engine.views.state import ViewState


@dataclass(frozen=True)
class Outcome:
    admitted: bool
    position: int | None
    state: str
    reason: str


def _decide_with(state: ViewState, w: Workload, contract: Contract) -> Outcome:
    changed = replace(w, contract=contract)
    pending = tuple(changed if x.id == w.id else x for x in state.snapshot.pending)
    snap = Snapshot(state.snapshot.nodes, state.snapshot.running, pending, state.snapshot.usage)
    st = decide(snap, state.config, state.now).statuses[w.id]
    return Outcome(st.state == "admitted", st.queue_position, st.state, st.reason)


def _smaller_shapes(c: Contract) -> list[tuple[int, int]]:
    out: list[tuple[int, int]] = []
    pods, gpp = c.pods, c.gpus_per_pod
    while len(out) < 4:
        if pods > 1:
            pods //= 2
        elif gpp > 1:
            gpp //= 2
        else:
            break
        out.append((gpp, pods))
    return out


def principal_matches(state: ViewState, w: Workload) -> list[str]:
    """Leaves (other than its own) whose principals name the workload's owner or namespace."""
    names = {w.owner} if w.owner else set()
    if "/" in w.id:
        names.add(w.id.split("/", 1)[0])
    own = w.contract.budget
    out = []
    for leaf in state.config.tree.leaves():
        if leaf == own:
            continue
        node = state.config.tree.nodes[leaf]
        if any(p.name in names for p in node.principals):
            out.append(leaf)
    return out


def suggestions(state: ViewState, wid: str) -> list[tuple[str, dict[str, Any]]]:
    """``(text, numbers)`` suggestions for a pending workload (empty if it is not pending or
    would start anyway)."""
    w = next((x for x in state.snapshot.pending if x.id == wid), None)
    if w is None or state.decision.statuses[wid].state != "pending":
        return []
    c = w.contract
    pos = state.decision.statuses[wid].queue_position
    out: list[tuple[str, dict[str, Any]]] = []
    tried = _smaller_shapes(c)
    for gpp, pods in tried:
        smaller = replace(c, gpus_per_pod=gpp, pods=pods)
        got = _decide_with(state, w, smaller)
        if got.admitted:
            out.append((f"Fewer GPUs: as {shape_text(smaller)} it would start now.",
                        {"change": "gpus", "gpus": smaller.gpus, "admitted": True}))
            break
    else:
        if c.gpus > 1 and tried:
            gpp, pods = tried[-1]
            out.append((f"Fewer GPUs: no shape down to {gpp * pods} GPU(s) would start now "
                        f"(tried halving {len(tried)} times).",
                        {"change": "gpus", "admitted": False}))
    debug = state.config.policy.debug
    if c.allocated and c.min_runtime_s > debug.max_min_runtime_s:
        shorter = replace(c, min_runtime_s=debug.max_min_runtime_s)
        got = _decide_with(state, w, shorter)
        verdict = ("it would start now" if got.admitted else
                   f"it would still wait (queue position {got.position})")
        out.append((f"Shorter min runtime: with {format_duration(debug.max_min_runtime_s)} instead of "
                    f"{format_duration(c.min_runtime_s)} {verdict}.",
                    {"change": "min_runtime", "min_runtime_s": debug.max_min_runtime_s,
                     "admitted": got.admitted, "position": got.position}))
    ranks = state.decision.ranks
    others = sorted(principal_matches(state, w), key=lambda leaf: ranks[leaf].rank)
    for leaf in others[:3]:
        other = replace(c, budget=leaf, requested_budget=leaf, note="")
        if other.min_runtime_s <= 0:
            other = replace(other, min_runtime_s=state.config.policy.default_min_runtime_s)
        got = _decide_with(state, w, other)
        r = ranks[leaf]
        verdict = ("it would start now" if got.admitted else
                   f"it would be at queue position {got.position} (now {pos})")
        out.append((f"Another budget: you may also charge {leaf} (rank {r.rank}, metric "
                     f"{r.metric:.2f}); charged there {verdict}.",
                     {"change": "budget", "budget": leaf, "rank": r.rank, "metric": r.metric,
                      "admitted": got.admitted, "position": got.position}))
    if c.allocated:
        free = replace(c, budget=None, min_runtime_s=0.0, note="min runtime 0: unallocated")
        got = _decide_with(state, w, free)
        if got.admitted:
            out.append(("Free work: with min runtime 0 it would start now on idle GPUs, uncharged, "
                        "but preemptible at any time.",
                        {"change": "unallocated", "admitted": True}))
    return out
