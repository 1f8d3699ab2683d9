"""The annotations the reconciler writes on Jobs and Nodes, and their codecs.

These annotations are the reconciler's only durable per-Job state. Everything a restarted or
newly elected reconciler needs to continue is recoverable from them: which Jobs run, since
when (``started-at``), until when they are protected (``protected-until``), on which nodes
(``placement``), charged to which leaf (``leaf``), and the last finished run of a preempted
Job (``last-run``, so its final interval is charged even if the reconciler died right after
suspending it). Admission writes all of them in the same single patch that unsuspends the
Job, so no crash can leave a Job running without its record.

The other annotations explain: ``state``, ``reason``, ``rank``, ``rank-metric``,
``queue-position``, ``config`` (the policy commit in force), ``updated-at``.

Times are RFC 3339 UTC with milliseconds (``2025-01-31T12:00:00.000Z``), readable in
``kubectl describe`` and exact enough for charging.

Submitter principals: the Job's namespace is always one (``namespace:<ns>``). The annotation
``allot.dev/submitter`` adds users and groups, comma separated: ``user:alice,group:vision``
(a bare name means a user). The reconciler trusts it: restrict who may create Jobs in a
namespace with RBAC, the namespace being the authorization boundary.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from datetime import datetime, timezone

from engine.core.types import Placement, WorkloadStatus
from engine.model import Principal
from engine.timestamps import readable_times

PREFIX = "allot.dev/"

STATE = PREFIX + "state"
REASON = PREFIX + "reason"
WAITING = PREFIX + "waiting"  # why a pending Job still waits, in one word (Decision.waiting)
LEAF = PREFIX + "leaf"
RANK = PREFIX + "rank"
METRIC = PREFIX + "rank-metric"
QUEUE_POSITION = PREFIX + "queue-position"
STARTED_AT = PREFIX + "started-at"
PROTECTED_UNTIL = PREFIX + "protected-until"
PLACEMENT = PREFIX + "placement"
GPUS = PREFIX + "gpus"
WEIGHT = PREFIX + "billing-weight"
CONFIG = PREFIX + "config"
UPDATED_AT = PREFIX + "updated-at"
LAST_RUN = PREFIX + "last-run"
PREEMPTIONS = PREFIX + "preemptions"
RUN_SECONDS = PREFIX + "run-seconds"  # seconds run in earlier (preempted) runs
SUBMITTER = PREFIX + "submitter"
CORDON_REASON = PREFIX + "cordon-reason"

# Annotations that only explain (refreshed at a bounded rate); a change to them alone is
# not a reason to run a pass.
EXPLAIN_KEYS: tuple[str, ...] = (REASON, RANK, METRIC, QUEUE_POSITION, CONFIG, UPDATED_AT, LEAF,
                                  WAITING)
# Every annotation the reconciler owns.
OWNED_KEYS: tuple[str, ...] = (
    STATE, REASON, LEAF, RANK, METRIC, QUEUE_POSITION, STARTED_AT, PROTECTED_UNTIL, PLACEMENT,
    GPUS, WEIGHT, CONFIG, UPDATED_AT, LAST_RUN, PREEMPTIONS, RUN_SECONDS, WAITING,
)

HOSTNAME_LABEL = "kubernetes.io/hostname"


def format_time(t: float) -> str:
    """Epoch seconds -> ``2025-01-31T12:00:00.000Z``."""
    dt = datetime.fromtimestamp(round(t, 3), tz=timezone.utc)
    return dt.strftime("%Y-%m-%dT%H:%M:%S.") + f"{dt.microsecond // 1000:03d}Z"


def format_micro_time(t: float) -> str:
    """Epoch seconds -> Kubernetes MicroTime ``2025-01-31T12:00:00.000000Z`` (Leases)."""
    return datetime.fromtimestamp(t, tz=timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def format_kube_time(t: float) -> str:
    """Epoch seconds -> Kubernetes Time ``2025-01-31T12:00:00Z`` (second precision)."""
    return datetime.fromtimestamp(math.floor(t), tz=timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def parse_time(text: str | None) -> float | None:
    """RFC 3339 text (with or without fraction, ``Z`` or offset) -> epoch seconds, or None."""
    if not text or not isinstance(text, str):
        return None
    raw = text.strip()
    if raw.endswith("Z") or raw.endswith("z"):
        raw = raw[:-1] + "+00:00"
    # Python < 3.11 cannot read 9-digit fractions; trim to microseconds.
    if "." in raw:
        head, _, rest = raw.partition(".")
        n = 0
        while n < len(rest) and rest[n].isdigit():
            n += 1
        digits, tail = rest[:n], rest[n:]
        raw = f"{head}.{digits[:6].ljust(6, '0')}{tail}"
    try:
        dt = datetime.fromisoformat(raw)
    except ValueError:
        return None
    if dt.tzinfo is None:
        dt = dt.replace(tzinfo=timezone.utc)
    return dt.timestamp()


def format_placement(placement: Placement) -> str:
    """``Placement`` -> ``node-a=8,node-b=8``."""
    return ",".join(f"{node}={gpus}" for node, gpus in placement.assignments)


def parse_placement(text: str | None) -> Placement | None:
    """``node-a=8,node-b=8`` -> ``Placement``; None when absent or malformed."""
    if not text:
        return None
    out: list[tuple[str, int]] = []
    for part in text.split(","):
        node, sep, gpus = part.strip().partition("=")
        if not sep or not node:
            return None
        try:
            count = int(gpus)
        except ValueError:
            return None
        if count < 0:
            return None
        out.append((node, count))
    return Placement(tuple(sorted(out))) if out else None


def format_metric(value: float | None) -> str:
    """A rank metric for humans: 4 significant digits, ``inf`` spelled out."""
    if value is None:
        return ""
    if math.isinf(value):
        return "inf"
    return f"{value:.4g}"


def parse_submitter(text: str | None) -> tuple[Principal, ...]:
    """``user:alice,group:vision,bob`` -> principals (a bare name is a user). Unknown kinds
    and empty parts are skipped: the namespace principal always remains."""
    if not text:
        return ()
    out: list[Principal] = []
    for part in text.split(","):
        item = part.strip()
        if not item:
            continue
        kind, sep, name = item.partition(":")
        if not sep:
            kind, name = "user", item
        kind, name = kind.strip(), name.strip()
        if kind in ("user", "group") and name:
            out.append(Principal(kind, name))  # type: ignore[arg-type]
    return tuple(out)


def maybe_number(text: str | None) -> float | None:
    """A number the reconciler wrote (an annotation, the ledger's ``charged-until-epoch``), or
    None when it is missing or was edited into something that is not a finite number >= 0
    (a NaN or a negative count must not reach the ledger or the patches)."""
    if text is None or text == "":
        return None
    try:
        value = float(text)
    except (TypeError, ValueError):
        return None
    return value if math.isfinite(value) and value >= 0 else None


def number(text: str | None, default: float) -> float:
    """:func:`maybe_number`, ``default`` when there is none."""
    value = maybe_number(text)
    return default if value is None else value


@dataclass(frozen=True)
class RunRecord:
    """A finished run of a Job, kept on the Job until it has been charged.

    ``weight`` is the billing weight per GPU-second; ``leaf`` None means unallocated (never
    charged, recorded only for the trace export).
    """

    start: float
    end: float
    gpus: int
    weight: float
    leaf: str | None

    def to_text(self) -> str:
        return json.dumps(
            {"start": round(self.start, 3), "end": round(self.end, 3), "gpus": self.gpus,
             "weight": self.weight, "leaf": self.leaf},
            sort_keys=True, separators=(",", ":"),
        )

    @staticmethod
    def parse(text: str | None) -> "RunRecord | None":
        if not text:
            return None
        try:
            d = json.loads(text)
            rec = RunRecord(float(d["start"]), float(d["end"]), int(d["gpus"]),
                            float(d.get("weight", 1.0)), d.get("leaf"))
        except (ValueError, KeyError, TypeError, OverflowError):
            return None
        # (written by the reconciler; edited by hand it must not charge NaN, a negative
        # rate, or to a leaf that is not a name)
        if not (math.isfinite(rec.start) and math.isfinite(rec.end) and rec.start <= rec.end
                and rec.gpus >= 0 and math.isfinite(rec.weight) and rec.weight > 0
                and (rec.leaf is None or isinstance(rec.leaf, str))):
            return None
        return rec


def explain_annotations(status: WorkloadStatus | None, commit: str, running: bool,
                        cause: str | None = None) -> dict:
    """The explanation annotations for a status (values as strings, None deletes); ``cause``:
    why a pending workload still waits, in one word (``Decision.waiting``, which has no word
    for running work), so the annotation goes once the workload is admitted."""
    if status is None:
        return {}
    out: dict[str, str | None] = {
        REASON: readable_times(status.reason),
        RANK: None if status.rank is None else str(status.rank),
        METRIC: None if status.metric is None else format_metric(status.metric),
        QUEUE_POSITION: None if status.queue_position is None else str(status.queue_position),
        CONFIG: commit or None,
        WAITING: cause,
    }
    if not running:
        out[LEAF] = status.leaf
    return out
