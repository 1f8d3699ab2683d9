"""Where did the GPUs go: every GPU-second of capacity, busy or idle, with the idle part by cause.

The simulator's state is piecewise constant between instants (event times), so the meter
classifies the state left after each instant (its events applied and its scheduling pass, if
any, run) and charges that classification for the time until the next instant. Buckets, in
GPU-seconds, summing exactly to capacity x horizon:

* ``busy``: GPUs of healthy nodes running work (the numerator of occupancy);
* ``unhealthy``: every GPU of a node between its failure and its repair, busy (draining) or
  not: out of service, outside occupancy's denominator;
* idle GPUs of healthy nodes, by cause:

  - ``no_work``: nothing is pending at all;
  - ``fragmentation``: work is pending but no pending shape fits in the free GPUs as they lie
    (e.g. 3 free GPUs on each of 8 nodes and only 4-GPU jobs queued, or a 64-GPU gang and free
    GPUs scattered over topology domains);
  - ``lag``: pending work would fit, but no scheduling pass has run since the GPUs came free
    (passes on a grid, or a wake-up the shell does not get);
  - ``reserved``: pending work would fit, and the last pass left it pending anyway: for the
    budget scheduler, free GPUs kept for a reservation's holder (work that would still be
    protected when the holder starts may not use them).

"Would fit" is a greedy fill of the free GPUs by the pending shapes (largest gangs first,
best-fit node, gangs inside one topology group as placement requires), counting the GPUs
the fill uses: an upper bound of what a pass could start, ignoring queue order. Lag and
reserved split it: the fillable GPUs measured right after the last pass were *held* by the
scheduler (``reserved``); anything fillable beyond that, since, is ``lag``.

Cost: the meter keeps the set of nodes with free GPUs and a count per pending shape
incrementally, so an instant with no idle GPU costs O(1), and otherwise O(idle nodes x
pending shapes).
"""

from __future__ import annotations

from typing import Mapping

Shape = tuple[int, int, str | None]  # (gpus_per_pod, pods, cluster)
BUCKETS = ("busy", "no_work", "fragmentation", "lag", "reserved", "unhealthy")


class IdleMeter:
    """Accumulates :data:`BUCKETS` over time (see the module docstring)."""

    def __init__(self, node_cluster: Mapping[str, str], node_group: Mapping[str, str],
                 node_gpus: Mapping[str, int]):
        self.cluster = dict(node_cluster)
        self.group = dict(node_group)  # node -> placement group (cluster/domain) for gangs
        self.gpus = dict(node_gpus)
        self.capacity = sum(self.gpus.values())
        self.free: dict[str, int] = dict(self.gpus)  # free GPUs of healthy nodes with any free
        self.unhealthy: set[str] = set()
        self.idle = self.capacity  # free GPUs on healthy nodes
        self.out = 0  # GPUs of unhealthy nodes
        self.shapes: dict[Shape, int] = {}
        self.pending = 0
        self.totals = dict.fromkeys(BUCKETS, 0.0)
        self.rates = dict.fromkeys(BUCKETS, 0.0)
        self.rates["no_work"] = float(self.capacity)
        self.held = 0
        self.since = 0.0

    # ---------------------------------------------------------------- state changes

    def set_free(self, node: str, free: int) -> None:
        if node in self.unhealthy:
            return
        old = self.free.get(node, 0)
        self.idle += free - old
        if free > 0:
            self.free[node] = free
        else:
            self.free.pop(node, None)

    def set_health(self, node: str, healthy: bool, free: int) -> None:
        if healthy and node in self.unhealthy:
            self.unhealthy.discard(node)
            self.out -= self.gpus[node]
            self.set_free(node, free)
        elif not healthy and node not in self.unhealthy:
            self.set_free(node, 0)
            self.unhealthy.add(node)
            self.out += self.gpus[node]

    def add_pending(self, shape: Shape, n: int = 1) -> None:
        k = self.shapes.get(shape, 0) + n
        if k:
            self.shapes[shape] = k
        else:
            del self.shapes[shape]
        self.pending += n

    # ---------------------------------------------------------------- time

    def advance(self, now: float) -> None:
        """Charge the current classification up to ``now``."""
        dt = now - self.since
        if dt > 0:
            for k, r in self.rates.items():
                if r:
                    self.totals[k] += r * dt
            self.since = now

    def classify(self, after_pass: bool) -> None:
        """Classify the state as it now stands; ``after_pass``: a pass just ran on it."""
        r = self.rates
        r["unhealthy"] = float(self.out)
        r["busy"] = float(self.capacity - self.out - self.idle)
        r["no_work"] = r["fragmentation"] = r["lag"] = r["reserved"] = 0.0
        if self.idle == 0:
            if after_pass:
                self.held = 0
            return
        if not self.pending:
            r["no_work"] = float(self.idle)
            if after_pass:
                self.held = 0
            return
        fillable = self.fillable()
        r["fragmentation"] = float(self.idle - fillable)
        if after_pass:
            self.held = fillable
        held = min(fillable, self.held)
        r["reserved"] = float(held)
        r["lag"] = float(fillable - held)

    def fillable(self) -> int:
        """GPUs a greedy fill of the free GPUs by the pending shapes would use."""
        shapes = {k: n for k, n in self.shapes.items() if k[0] >= 1 and k[1] >= 1}
        if not shapes:
            return 0  # only impossible shapes pending: the next pass rejects them
        free = dict(self.free)
        used = 0
        smallest = min(g * p for g, p, _ in shapes)
        for (gpp, pods, cluster), count in sorted(shapes.items(),
                                                  key=lambda kv: (-kv[0][0] * kv[0][1], kv[0][1],
                                                                  kv[0][2] or "")):
            if self.idle - used < smallest:
                break
            total = gpp * pods
            if self.idle - used < total:
                continue
            nodes = [n for n in free if cluster is None or self.cluster[n] == cluster]
            if pods == 1 or len(nodes) == 0:
                used += _fill_single(free, nodes, total, count)
            else:
                used += _fill_gang(free, nodes, self.group, gpp, pods, count)
        return used

    def reset(self) -> None:
        """Forget the GPU-time accumulated so far (the end of a warm-up)."""
        self.totals = dict.fromkeys(BUCKETS, 0.0)

    def summary(self) -> dict[str, float]:
        return dict(self.totals)


def _fill_single(free: dict[str, int], nodes: list[str], g: int, count: int) -> int:
    """Place up to ``count`` single-node pieces of ``g`` GPUs, best fit; GPUs used."""
    used = 0
    for n in sorted(nodes, key=lambda n: (free[n], n)):
        if count == 0:
            break
        f = free[n]
        k = min(count, f // g)
        if k:
            count -= k
            used += k * g
            free[n] = f - k * g
    return used


def _fill_gang(free: dict[str, int], nodes: list[str], group: Mapping[str, str], gpp: int,
               pods: int, count: int) -> int:
    """Place up to ``count`` gangs of ``pods`` x ``gpp`` GPUs, each inside one group."""
    groups: dict[str, list[str]] = {}
    for n in nodes:
        if free[n] >= gpp:
            groups.setdefault(group[n], []).append(n)
    used = 0
    for key in sorted(groups):
        members = groups[key]
        while count and sum(free[n] // gpp for n in members) >= pods:
            need = pods
            for n in sorted(members, key=lambda n: (-free[n], n)):
                k = min(need, free[n] // gpp)
                free[n] -= k * gpp
                need -= k
                if need == 0:
                    break
            used += pods * gpp
            count -= 1
        if count == 0:
            break
    return used
