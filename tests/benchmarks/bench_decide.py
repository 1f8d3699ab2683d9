"""Benchmark: median decide() time on a 1,024-GPU cluster (128 nodes x 8 GPUs, 16 domains of
8 nodes), 1,000 running and 5,000 pending workloads over 150 leaves (15 programs x 10
projects). Run: ``python tests/benchmarks/bench_decide.py [repeats]``. Target: median < 100 ms.

Three cases: a full cluster with random usage where much running work is past its min
runtime (a preemption storm: hundreds of preemptions in one decision, the worst case); a full
cluster where all running work is protected (the simulator's common case: nothing can move);
and an idle cluster that admits work.
"""

from __future__ import annotations

import random
import statistics
import sys
import time

from engine.core.decide import decide
from engine.core.types import Contract, NodeState, Placement, Running, Snapshot, Workload
from engine.model import BudgetNode, BudgetTree, Cluster, Config, Policy

SHAPES = [(1, 1), (2, 1), (4, 1), (8, 1), (8, 2), (8, 4), (1, 1), (1, 1), (2, 1), (8, 8)]
MINS = [0.0, 900.0, 3600.0, 4 * 3600.0, 8 * 3600.0]


def build(seed: int = 7, busy: bool = True, protected: bool = False) -> tuple[Snapshot, Config, float]:
    rnd = random.Random(seed)
    nodes_spec = [BudgetNode("root", None, 100.0)]
    leaves = []
    for p in range(15):
        nodes_spec.append(BudgetNode(f"p{p:02d}", "root", 100.0 / 15))
        for q in range(10):
            leaves.append(f"p{p:02d}-q{q}")
            nodes_spec.append(BudgetNode(leaves[-1], f"p{p:02d}", 10.0))
    tree = BudgetTree.build(nodes_spec)
    policy = Policy(clusters=(Cluster("h100", "h100", 128, 8, 8),))
    nodes = tuple(NodeState(f"h100-n{i:04d}", "h100", 8, f"h100-d{i // 8:03d}") for i in range(128))
    now = 10 * 86400.0
    running = []
    if busy:
        # 1,000 workloads filling the 1,024 GPUs: 976 x 1 GPU + 3 x 8 GPUs (as full nodes)
        slots = [(n.name, g) for n in nodes for g in range(8)]
        i = 0
        for k in range(1000):
            gpus = 8 if k < 3 else 1
            node = slots[i][0]
            i += gpus
            leaf = rnd.choice(leaves)
            mn = rnd.choice(MINS)
            started = now - rnd.uniform(0, 12 * 3600)
            if protected:
                mn, started = 8 * 3600.0, now - rnd.uniform(0, 7 * 3600)
            c = Contract(budget=leaf if mn > 0 else None, min_runtime_s=mn, gpus_per_pod=gpus,
                         resumable=rnd.random() < 0.7)
            running.append(Running(Workload(f"r{k}", c, started - 10), Placement(((node, gpus),)),
                                   started, started + mn if mn > 0 else started))
    pending = []
    for k in range(5000):
        gpp, pods = rnd.choice(SHAPES)
        mn = rnd.choice(MINS)
        leaf = rnd.choice(leaves)
        c = Contract(budget=leaf if mn > 0 else None, min_runtime_s=mn, gpus_per_pod=gpp, pods=pods,
                     priority=rnd.randint(0, 3))
        pending.append(Workload(f"p{k}", c, now - rnd.uniform(0, 86400)))
    usage = {leaf: rnd.uniform(0, 5e6) for leaf in leaves}
    return Snapshot(nodes, tuple(running), tuple(pending), usage), Config(tree, policy), now


def measure(busy: bool, repeats: int, protected: bool = False) -> tuple[float, float, int]:
    """Median wall and CPU milliseconds of decide() (CPU time is the steadier figure on a
    shared machine), and the number of actions."""
    snap, config, now = build(busy=busy, protected=protected)
    times, cpu = [], []
    for _ in range(repeats):
        t0, c0 = time.perf_counter(), time.process_time()
        d = decide(snap, config, now)
        times.append(time.perf_counter() - t0)
        cpu.append(time.process_time() - c0)
    return statistics.median(times) * 1000, statistics.median(cpu) * 1000, len(d.actions)


def main() -> None:
    repeats = int(sys.argv[1]) if len(sys.argv) > 1 else 15
    for busy, protected in ((True, False), (True, True), (False, False)):
        med, cpu, n = measure(busy, repeats, protected)
        label = ("full cluster, all running work protected" if protected else
                 "full cluster" if busy else "idle cluster")
        print(f"decide() {label}: 128 nodes x 8 GPUs, 5000 pending, {1000 if busy else 0} running, "
              f"150 leaves: median {med:.1f} ms wall, {cpu:.1f} ms CPU over {repeats} runs "
              f"({n} actions)")


if __name__ == "__main__":
    main()
