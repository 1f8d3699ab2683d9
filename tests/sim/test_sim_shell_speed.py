"""The simulator shell's shortcuts give exactly what the plain algorithms give.

* :meth:`engine.sim.idle.IdleMeter.fillable` (memoised, shapes kept in order, the last shape
  counted rather than placed) against the plain greedy fill it replaced, on random states;
* :class:`engine.sim.queue.PendingQueue` against sorting the pending work by (submission, id);
* :func:`engine.sim.trace.replace_task` against ``dataclasses.replace``.
"""

from __future__ import annotations

import dataclasses
import random

import pytest

from engine.core.types import Contract, Workload
from engine.sim.idle import IdleMeter
from engine.sim.queue import PendingQueue
from engine.sim.trace import Task, replace_task


def _reference_fill(meter: IdleMeter) -> int:
    """The greedy fill as first written: every shape placed on a copy of the free GPUs."""
    shapes = {k: n for k, n in meter.shapes.items() if k[0] >= 1 and k[1] >= 1}
    if not shapes:
        return 0
    free = dict(meter.free)
    used = 0
    smallest = min(g * p for g, p, _ in shapes)
    for (gpp, pods, cluster), count in sorted(shapes.items(),
                                              key=lambda kv: (-kv[0][0] * kv[0][1], kv[0][1],
                                                              kv[0][2] or "")):
        if meter.idle - used < smallest:
            break
        total = gpp * pods
        if meter.idle - used < total:
            continue
        nodes = [n for n in free if cluster is None or meter.cluster[n] == cluster]
        if pods == 1 or not nodes:
            for n in sorted(nodes, key=lambda n: (free[n], n)):
                if count == 0:
                    break
                k = min(count, free[n] // total)
                count -= k
                used += k * total
                free[n] -= k * total
            continue
        groups: dict[str, list[str]] = {}
        for n in nodes:
            if free[n] >= gpp:
                groups.setdefault(meter.group[n], []).append(n)
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


@pytest.mark.parametrize("seed", range(40))
def test_fillable_matches_the_plain_greedy_fill(seed):
    rng = random.Random(seed)
    nodes = {f"{c}-n{i:02d}": c for c in ("a", "b") for i in range(rng.randint(1, 12))}
    group = {n: f"{c}/d{int(n[-2:]) // rng.choice((2, 4, 16))}" for n, c in nodes.items()}
    meter = IdleMeter(nodes, group, {n: 8 for n in nodes})
    shapes = [(rng.choice((1, 2, 3, 4, 8)), rng.choice((1, 1, 2, 3, 4, 8)),
               rng.choice((None, "a", "b"))) for _ in range(rng.randint(1, 6))]
    shapes.append((0, 1, None))  # an impossible shape: never filled
    for step in range(60):
        what = rng.random()
        if what < 0.5:
            meter.set_free(rng.choice(list(nodes)), rng.randint(0, 8))
        elif what < 0.6:
            meter.set_health(rng.choice(list(nodes)), rng.random() < 0.6, rng.randint(0, 8))
        else:
            shape = rng.choice(shapes)
            if meter.shapes.get(shape) and rng.random() < 0.4:
                meter.add_pending(shape, -1)
            else:
                meter.add_pending(shape, rng.randint(1, 3))
        assert meter.fillable() == _reference_fill(meter), step
        assert meter.fillable() == _reference_fill(meter), step  # memoised answer


@pytest.mark.parametrize("seed", range(40))
def test_fillable_kept_across_pending_changes_matches_the_plain_fill(seed):
    """A fill is kept while only counts change that room, not the count, bounds: asked after
    several changes at a time, in a cluster often too full for the pending work."""
    rng = random.Random(1000 + seed)
    nodes = {f"{c}-n{i:02d}": c for c in ("a", "b") for i in range(rng.randint(1, 6))}
    group = {n: f"{c}/d{int(n[-2:]) // rng.choice((2, 4))}" for n, c in nodes.items()}
    meter = IdleMeter(nodes, group, {n: 8 for n in nodes})
    for n in nodes:
        meter.set_free(n, rng.randint(0, 3))
    shapes = [(rng.choice((1, 2, 4)), rng.choice((1, 1, 2, 3)), rng.choice((None, "a")))
              for _ in range(rng.randint(1, 5))]
    for step in range(80):
        for _ in range(rng.randint(1, 4)):
            what = rng.random()
            if what < 0.15:
                meter.set_free(rng.choice(list(nodes)), rng.randint(0, 4))
            else:
                shape = rng.choice(shapes)
                have = meter.shapes.get(shape, 0)
                meter.add_pending(shape, -rng.randint(1, have) if have and rng.random() < 0.5
                                  else rng.randint(1, 3))
        assert meter.fillable() == _reference_fill(meter), step


def test_a_count_that_room_bounds_keeps_the_fill_and_one_that_counts_does_not():
    meter = IdleMeter({"n1": "c"}, {"n1": "c/d0"}, {"n1": 8})
    meter.set_free("n1", 3)
    meter.add_pending((2, 1, None), 3)  # room for one of three
    meter.add_pending((1, 1, None), 1)
    assert meter.fillable() == 3
    version = meter._version
    meter.add_pending((2, 1, None), 5)  # still room for one: the fill stands
    meter.add_pending((2, 1, None), -7)  # one left, as many as it placed
    meter.add_pending((0, 1, None), 1)  # an impossible shape is never filled
    assert meter._version == version and meter.fillable() == 3
    meter.add_pending((1, 1, None), 1)  # the 1-GPU shape placed all it had: it may place more
    assert meter._version != version and meter.fillable() == 3
    meter.add_pending((2, 1, None), -1)  # fewer than it placed
    assert meter.fillable() == 2


def _wl(wid: str, submitted: float) -> Workload:
    return Workload(wid, Contract(budget=None, min_runtime_s=0.0), submitted)


@pytest.mark.parametrize("arrivals_sorted", [True, False])
def test_pending_queue_presents_submission_order(arrivals_sorted):
    rng = random.Random(7)
    arrivals = [_wl(f"t{i:03d}", float(rng.randint(0, 50))) for i in range(200)]
    if arrivals_sorted:
        arrivals.sort(key=lambda w: (w.submitted_at, w.id))
    queue = PendingQueue()
    model: dict[str, Workload] = {}  # the old way: a dict in arrival order, re-sorted on requeue
    out: list[Workload] = []
    for w in arrivals:
        queue.submit(w)
        model[w.id] = w
        if rng.random() < 0.4 and model:  # admit one
            gone = rng.choice(list(model.values()))
            queue.remove(gone)
            del model[gone.id]
            out.append(gone)
        if rng.random() < 0.2 and out:  # requeue one
            back = out.pop(rng.randrange(len(out)))
            queue.requeue(back)
            model[back.id] = back
            model = dict(sorted(model.items(), key=lambda kv: (kv[1].submitted_at, kv[0])))
        assert queue.items() == tuple(model.values())
        assert len(queue) == len(model)


def test_replace_task_is_dataclasses_replace():
    t = Task("x", 1.5, 2, 4, 100.0, "o", leaf="a")
    for changes in ({"submit": 3.0}, {"leaf": None, "min_runtime": 0.0}, {"klass": "debug"}):
        fast, slow = replace_task(t, **changes), dataclasses.replace(t, **changes)
        assert fast == slow and repr(fast) == repr(slow) and hash(fast) == hash(slow)
    assert t.submit == 1.5
    with pytest.raises(TypeError):
        replace_task(t, nope=1)
