"""Explanations: the words and numbers that say why a workload is where it is.

Every :class:`~engine.core.types.WorkloadStatus` reason is built here, so the wording is
consistent across admit, wait, preempt and drain. The mappings that build statuses and wait
causes on first access are :mod:`engine.core.lazymaps` (re-exported here).
"""

from __future__ import annotations

import math

from engine.core.lazymaps import LazyMap, StatusMap
from engine.core.types import Contract, LeafRank
from engine.durations import format_duration

__all__ = ["LazyMap", "StatusMap", "when", "leaf_text", "placement_text", "shape_text",
           "preempt_reason", "admit_reason"]


def when(t: float, now: float) -> str:
    """``t=1234 (in 1h20m)`` / ``(20m ago)``: absolute time on the shell's clock and distance."""
    if not math.isfinite(t):
        return "never"
    delta = t - now
    if abs(delta) < 0.5:
        return f"t={t:.0f} (now)"
    span = format_duration(round(abs(delta)))
    return f"t={t:.0f} ({'in ' + span if delta > 0 else span + ' ago'})"


def leaf_text(rank: LeafRank | None, n_leaves: int) -> str:
    """``budget A1 rank 2/15 (metric 0.84 = usage fraction 0.294 / share 0.350; 12.5 GPU-h in
    the window)``; a budget with no share that used something: ``(metric inf: a 0% budget;
    0.3 GPU-h in the window)``."""
    if rank is None:
        return "unallocated (free, never charged, preemptible)"
    if math.isinf(rank.metric):
        return (f"budget {rank.leaf} rank {rank.rank}/{n_leaves} (metric inf: a 0% budget; "
                f"{rank.usage / 3600:.1f} GPU-h in the window)")
    used = rank.metric * rank.share
    return (f"budget {rank.leaf} rank {rank.rank}/{n_leaves} (metric {rank.metric:.2f} = usage "
            f"fraction {used:.3f} / share {rank.share:.3f}; {rank.usage / 3600:.1f} GPU-h in the "
            f"window)")


def shape_text(c: Contract) -> str:
    pods = f"{c.pods} pods x {c.gpus_per_pod} GPUs" if c.pods > 1 else f"{c.gpus_per_pod} GPU{'s' if c.gpus_per_pod != 1 else ''}"
    where = f" in cluster {c.cluster}" if c.cluster else ""
    return f"{c.gpus} GPUs ({pods}){where}" if c.pods > 1 else f"{pods}{where}"


def preempt_reason(preemptor: str, mine: str, debug: bool, leaf: str | None, rank: int | None,
                   theirs: str | None, ended_at: float, now: float, cost_s: float) -> str:
    """Why a victim was preempted for ``preemptor`` (a debug workload or not, of ``leaf`` at
    ``rank``): ``mine`` and ``theirs`` are the two leaves' :func:`leaf_text` (``theirs`` None:
    the victim is unallocated), ``ended_at`` the end of the victim's min runtime, ``cost_s``
    the GPU-seconds of progress it loses."""
    if theirs is None:
        why = "unallocated work is preempted first"
    else:
        ended = when(ended_at, now)
        why = (f"{preemptor} is a debug workload, which may preempt work of any budget past "
               f"its min runtime, and this one's ended {ended} ({theirs})" if debug else
               f"{theirs} ranks below {leaf} (rank {rank}) and its min runtime ended {ended}")
    return f"preempted for {preemptor} ({mine}): {why}; estimated progress lost {cost_s / 3600:.2f} GPU-h"


def admit_reason(assignments: tuple[tuple[str, int], ...], victims: list[str],
                 loan_holders: list[str] | None, mine: str) -> str:
    """Why a workload was admitted where it was: after preempting ``victims`` (ids), or on
    loan on the GPUs held for ``loan_holders`` (None: not a loan); ``mine`` is its
    :func:`leaf_text`."""
    if loan_holders is not None:
        how = (f" on loan (reserved for {', '.join(loan_holders)}): unallocated for this run, so "
               f"not charged, not protected and preempted first")
    else:
        how = f" after preempting {len(victims)} workload(s) ({', '.join(victims)})" if victims else ""
    return f"admitted on {placement_text(assignments)}{how}: {mine}"


def placement_text(assignments: tuple[tuple[str, int], ...]) -> str:
    return ", ".join(f"{n}:{g}" for n, g in assignments)
