"""Leader election on a ``coordination.k8s.io/v1`` Lease, so two replicas are safe.

Only the leader writes to the cluster. The Lease ``namespace/name`` names its holder and when
it last renewed (``renewTime``) for how long (``leaseDurationSeconds``). Each loop the leader
renews it with a conditional PUT; a candidate takes it only once ``renewTime +
leaseDurationSeconds`` is past (or the holder released it by clearing ``holderIdentity``), also
with a conditional PUT, so of two candidates exactly one wins (the other gets a 409).

A leader trusts its leadership only until ``renew_deadline_s`` (default two thirds of the lease)
after its last successful renewal: between that deadline and the lease's expiry nobody writes,
which absorbs a paused or partitioned leader. All times come from the injected ``clock``
(the reconciler and the API server are assumed to share a reasonably synchronised clock, as
NTP gives). Writes are additionally fenced per object by resourceVersion preconditions (see
:mod:`engine.k8s.apply`), so even a leader that outlives its lease cannot overwrite a newer
admission.
"""

from __future__ import annotations

import logging
from typing import Callable

from engine.k8s import marks
from engine.k8s.client import ApiError, Conflict, KubeClient

log = logging.getLogger("allot.k8s.leader")


class LeaderElector:
    """Acquire / renew / release one Lease for ``identity``."""

    def __init__(self, client: KubeClient, namespace: str, identity: str, *,
                 name: str = "allot-reconciler", lease_s: float = 15.0,
                 renew_deadline_s: float | None = None, clock: Callable[[], float]):
        self.client = client
        self.namespace = namespace
        self.name = name
        self.identity = identity
        self.lease_s = lease_s
        self.renew_deadline_s = renew_deadline_s if renew_deadline_s is not None \
            else lease_s * 2 / 3
        self.clock = clock
        self._renewed_at: float | None = None
        self.holder: str | None = None
        self.transitions = 0
        self.error: str | None = None  # why the last round could not read or write the Lease
        self._seen: tuple | None = None  # the other holder's record last seen, and when
        self._seen_at = 0.0

    def is_leader(self) -> bool:
        """True while the last renewal is younger than the renew deadline."""
        return self._renewed_at is not None and \
            self.clock() < self._renewed_at + self.renew_deadline_s

    def _body(self, now: float, acquire: float, transitions: int, rv: str | None) -> dict:
        meta: dict = {"name": self.name, "namespace": self.namespace,
                      "labels": {"app.kubernetes.io/name": "allot"}}
        if rv:
            meta["resourceVersion"] = rv
        return {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease", "metadata": meta,
                "spec": {"holderIdentity": self.identity,
                         "leaseDurationSeconds": int(round(self.lease_s)),
                         "acquireTime": marks.format_micro_time(acquire),
                         "renewTime": marks.format_micro_time(now),
                         "leaseTransitions": transitions}}

    def try_acquire_or_renew(self) -> bool:
        """One election round; True when this instance is the leader afterwards."""
        now = self.clock()
        self.error = None
        try:
            lease = self.client.get("leases", self.namespace, self.name)
            if lease is None:
                self.client.create("leases", self.namespace, self._body(now, now, 0, None))
                return self._won(now, "created")
            spec = lease.get("spec") or {}
            rv = str((lease.get("metadata") or {}).get("resourceVersion", ""))
            holder = spec.get("holderIdentity") or ""
            self.holder = holder or None
            self.transitions = _whole(spec.get("leaseTransitions"), 0)
            # when the holder last renewed: its renewTime, but never later than when this
            # replica first saw that record (a renewTime in the future, from a skewed clock or
            # a hand edit, must not keep the Lease for ever), and for at most 4 of our own
            # lease durations (nor must a huge leaseDurationSeconds)
            seen = (holder, spec.get("renewTime"), rv)
            if seen != self._seen:
                self._seen, self._seen_at = seen, now
            renewed = min(marks.parse_time(spec.get("renewTime")) or 0.0, self._seen_at)
            duration = float(_whole(spec.get("leaseDurationSeconds"), 0))
            duration = min(duration if duration > 0 else self.lease_s, 4 * self.lease_s)
            if holder == self.identity:
                acquired = marks.parse_time(spec.get("acquireTime")) or now
                self.client.replace("leases", self.namespace, self.name,
                                    self._body(now, acquired, self.transitions, rv))
                return self._won(now, "renewed")
            if holder and now < renewed + duration:
                self._renewed_at = None
                return False
            self.client.replace("leases", self.namespace, self.name,
                                self._body(now, now, self.transitions + 1, rv))
            self.transitions += 1
            return self._won(now, f"taken over from {holder or 'nobody'}")
        except Conflict:
            log.info("lease %s/%s: lost the race", self.namespace, self.name)
            self._renewed_at = None
            return False
        except ApiError as err:
            log.warning("lease %s/%s: %s", self.namespace, self.name, err)
            self.error = str(err)
            return self.is_leader()

    def _won(self, now: float, how: str) -> bool:
        if self.holder != self.identity:
            log.info("leader election: %s is leader (%s)", self.identity, how)
        self.holder = self.identity
        self._renewed_at = now
        return True

    def release(self) -> None:
        """Give the Lease up (on shutdown) so a standby takes over without waiting."""
        if self._renewed_at is None:
            return
        self._renewed_at = None
        try:
            lease = self.client.get("leases", self.namespace, self.name)
            if lease is None or (lease.get("spec") or {}).get("holderIdentity") != self.identity:
                return
            lease["spec"]["holderIdentity"] = ""
            self.client.replace("leases", self.namespace, self.name, lease)
        except ApiError as err:
            log.warning("lease release failed: %s", err)


def _whole(value: object, default: int) -> int:
    """A Lease's whole-number field as written, or ``default`` when it is not one (only a
    hand edit or a lenient server lets such a value through)."""
    try:
        return int(value)  # type: ignore[call-overload]
    except (TypeError, ValueError, OverflowError):
        return default
