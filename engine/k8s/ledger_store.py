"""The usage ledger's persistence in a ConfigMap, charged and written at most once per loop.

Charging rule (exact across restarts)
-------------------------------------
The ConfigMap holds the ledger *and* ``charged-until``, the instant up to which every run has
been charged, in one object written with one conditional PUT. Each pass, at time ``now``, every
run the cluster shows (:class:`engine.k8s.observe.Occupancy`: running Jobs, runs that ended
since, the last run of each preempted Job) is charged over ``(max(start, charged_until),
min(end or now, now)]`` to its leaf at ``gpus * billing weight`` per second, then
``charged_until = now``. Unallocated runs (no leaf) are never charged.

- A reconciler killed after charging but before saving loses nothing: the next one loads the
  previous ``charged_until`` and charges the same interval again, once.
- A run preempted or finished while no reconciler saved is still charged to its end: its
  start and end stay on the Job (``allot.dev/last-run``) until it runs again.
- What can be lost is bounded by one loop interval: a Job deleted (not just finished) before
  the next pass, whose last interval nobody charged.
- A fresh ledger (no ConfigMap yet) charges running Jobs from their start.

Concurrency: the PUT carries the resourceVersion read. On a 409 the ConfigMap is read again;
if its ``charged-until`` is still the one this reconciler last loaded or saved, nobody else
charged (a spurious conflict) and the write is retried; otherwise another reconciler (a new
leader) has charged meanwhile: this one's unsaved charges are dropped and its state reloaded,
so usage is never counted twice.

Format: ``binaryData["ledger.json.gz"]`` is the gzipped :meth:`Ledger.to_dict`;
``data`` carries a readable summary (``charged-until``, per-leaf usage, config commit).
"""

from __future__ import annotations

import base64
import gzip
import json
import logging
from dataclasses import dataclass
from typing import Iterable

from engine.core.ledger import Ledger
from engine.k8s import marks
from engine.k8s.client import ApiError, Conflict, KubeClient, NotFound
from engine.k8s.observe import Occupancy
from engine.model import Config

log = logging.getLogger("allot.k8s.ledger")

BLOB = "ledger.json.gz"
FUTURE_SLACK_S = 3600.0  # how far ahead of now "charged until" may be (clocks of replicas differ by seconds)
MAX_BYTES = 1_000_000  # ConfigMaps are limited to 1 MiB


@dataclass
class LedgerState:
    """The ledger in memory. ``persisted_until`` is the ``charged-until`` last read from or
    written to the ConfigMap (the base for conflict detection)."""

    ledger: Ledger
    charged_until: float | None
    persisted_until: float | None
    resource_version: str | None
    charged_gpu_s: float = 0.0  # charged by this process since it loaded (for metrics)


def charge(state: LedgerState, occupancy: Iterable[Occupancy], now: float) -> float:
    """Charge every run over its uncharged part up to ``now``; return GPU-seconds charged
    (billing-weighted). ``now`` before ``charged_until`` charges nothing."""
    since = state.charged_until
    if since is not None and since > now + FUTURE_SLACK_S:
        # (charged "until" far ahead of any clock: an edit; charging from it would charge
        # nothing until then, and from the runs' starts twice: from now on, then)
        log.warning("ledger charged until %s, ahead of now %s: charging from now on", since, now)
        state.charged_until = now
        return 0.0
    if since is not None and now <= since:
        return 0.0
    total = 0.0
    for occ in occupancy:
        if not occ.leaf or occ.gpus <= 0:
            continue
        start = occ.start
        if start > now:  # (a start in the future is an edit: it must not make the run free)
            start = now if since is None else since
        a = start if since is None else max(start, since)
        b = now if occ.end is None else min(occ.end, now)
        if b > a:
            state.ledger.charge(occ.leaf, a, b, occ.gpus, occ.weight)
            total += (b - a) * occ.gpus * occ.weight
    state.charged_until = now
    state.charged_gpu_s += total
    return total


def usage(state: LedgerState, now: float, lookback_s: float) -> dict[str, float]:
    """Usage per leaf over the policy's lookback. When the policy lengthened the lookback
    beyond the history kept, the window is clipped to what the ledger still holds."""
    ledger = state.ledger
    ledger.lookback_s = lookback_s
    try:
        return ledger.usage(now)
    except ValueError:
        if ledger.origin is None:
            raise
        horizon = ledger.origin + ledger.horizon
        kept = now - horizon
        if kept <= 0:  # a clock behind the history kept (skew after a hand-over)
            log.warning("clock %s is behind the ledger's history; usage taken at %s", now,
                        horizon + lookback_s)
            return ledger.usage(horizon + lookback_s)
        log.warning("lookback %ss exceeds the ledger's history; using the last %ss", lookback_s,
                    kept)
        ledger.lookback_s = kept
        try:
            return ledger.usage(now)
        finally:
            ledger.lookback_s = lookback_s


class LedgerStore:
    """Loads and saves :class:`LedgerState` in ConfigMap ``namespace/name``."""

    def __init__(self, client: KubeClient, namespace: str, name: str = "allot-ledger",
                 bucket_s: float = 300.0):
        self.client = client
        self.namespace = namespace
        self.name = name
        self.bucket_s = bucket_s

    def load(self, config: Config) -> LedgerState:
        """The stored ledger, or a fresh one when there is none (or it is unreadable)."""
        obj = self.client.get("configmaps", self.namespace, self.name)
        if obj is None:
            return self._fresh(config, None)
        rv = str((obj.get("metadata") or {}).get("resourceVersion", "")) or None
        data = obj.get("data") or {}
        until = marks.maybe_number(data.get("charged-until-epoch"))
        blob = (obj.get("binaryData") or {}).get(BLOB)
        try:
            if blob is None:
                raise ValueError(f"no binaryData {BLOB!r}")
            ledger = Ledger.from_dict(json.loads(gzip.decompress(base64.b64decode(blob))))
        except Exception as err:  # unreadable: start over rather than crash-loop
            log.error("ledger ConfigMap %s/%s unreadable (%s): starting a fresh ledger",
                      self.namespace, self.name, err)
            return self._fresh(config, rv)
        for leaf in config.tree.leaves():
            ledger._leaf(leaf)  # report every current leaf, 0 when unused
        return LedgerState(ledger, until, until, rv)

    def _fresh(self, config: Config, rv: str | None) -> LedgerState:
        ledger = Ledger(config.tree.leaves(), config.policy.lookback_s, self.bucket_s)
        return LedgerState(ledger, None, None, rv)

    def save(self, state: LedgerState, config: Config, now: float, revision: str = "") -> bool:
        """Write the state (one conditional PUT). False when another reconciler charged
        meanwhile: the caller must :meth:`load` again and drop its unsaved charges."""
        body = self._body(state, config, now, revision)
        for _ in range(self.client.retries + 1):
            try:
                if state.resource_version is None:
                    written = self.client.create("configmaps", self.namespace, body)
                else:
                    body["metadata"]["resourceVersion"] = state.resource_version
                    written = self.client.replace("configmaps", self.namespace, self.name, body)
            except NotFound:  # deleted meanwhile (by hand): made again, with what is charged
                log.warning("ledger ConfigMap %s/%s was deleted; writing it again", self.namespace, self.name)
                body["metadata"].pop("resourceVersion", None)
                state.resource_version = None
                continue
            except Conflict:
                current = self.client.get("configmaps", self.namespace, self.name)
                current_until = None if current is None else marks.maybe_number(
                    (current.get("data") or {}).get("charged-until-epoch"))
                if current is not None and current_until == state.persisted_until:
                    state.resource_version = str(current["metadata"].get("resourceVersion"))
                    continue  # nobody else charged: retry on the new version
                log.warning("ledger written by another reconciler (charged until %s); "
                            "reloading", current_until)
                return False
            state.resource_version = str((written.get("metadata") or {}).get("resourceVersion"))
            state.persisted_until = state.charged_until
            return True
        return False

    def _body(self, state: LedgerState, config: Config, now: float, revision: str) -> dict:
        raw = json.dumps(state.ledger.to_dict(), separators=(",", ":")).encode()
        blob = base64.b64encode(gzip.compress(raw, mtime=0)).decode()
        if len(blob) > MAX_BYTES:
            raise ApiError(413, f"ledger is {len(blob)} bytes, over the ConfigMap limit")
        use = usage(state, now, config.policy.lookback_s)
        until = state.charged_until
        return {
            "apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": self.name, "namespace": self.namespace,
                         "labels": {"app.kubernetes.io/name": "allot",
                                    "app.kubernetes.io/component": "ledger"}},
            "data": {
                "charged-until": "" if until is None else marks.format_time(until),
                "charged-until-epoch": "" if until is None else repr(float(until)),
                "usage-gpu-seconds.json": json.dumps(
                    {k: round(v, 3) for k, v in sorted(use.items())}, indent=1),
                "config": revision or config.revision or config.origin,
            },
            "binaryData": {BLOB: blob},
        }
