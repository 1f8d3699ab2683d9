"""Benchmark of the reconciler against the Kubernetes API emulator (official client, HTTP).

Prints:

1. the latency from a debug Job's creation (the POST through the official client) to its
   admission (the Job unsuspended and pinned) with free capacity, with the reconciler running
   its watch-driven loop (resync far away, so only the watch can trigger the pass); target < 2 s;
2. the duration of reconcile passes with 1,000 Jobs and 128 nodes (1,024 GPUs): the first pass
   (admits what fits, explains every waiting Job), steady passes (nothing changed), and a pass
   after 20 Jobs completed; with the split list / decide / apply+ledger.

The emulator runs in this process (its own thread), so both share one interpreter: the figures
are pessimistic, and noisy when other work runs on the machine.

    python tests/benchmarks/bench_reconcile.py [--jobs 1000] [--nodes 128] [--samples 10]
"""

from __future__ import annotations

import argparse
import logging
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

import kubernetes  # noqa: E402

from engine.core.decide import decide  # noqa: E402
from engine.k8s import marks  # noqa: E402
from engine.k8s.observe import observe  # noqa: E402
from tests.k8s.emulator import run_emulator  # noqa: E402
from tests.k8s.reconcile_support import POLICY_NS, job, node_labels, reconciler, write_policy  # noqa: E402

LEAVES = {f"team-{c}": 10 for c in "abcdefghij"}


def api_client(emu) -> kubernetes.client.ApiClient:
    cfg = kubernetes.client.Configuration()
    cfg.host = emu.url
    cfg.connection_pool_maxsize = 16
    return kubernetes.client.ApiClient(cfg)


def latency(samples: int) -> list[float]:
    out: list[float] = []
    with run_emulator() as emu:
        for ns in (POLICY_NS, "team-a"):
            emu.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}})
        for i in range(16):
            emu.add_node(f"n{i:03d}", gpus=8, labels=node_labels(domain=f"d{i // 8}"))
        policy = write_policy(Path(tempfile.mkdtemp()), LEAVES, nodes=16)
        r = reconciler(api_client(emu), policy, emu.clock, interval_s=3600, lease_s=15)
        thread = threading.Thread(target=r.run, daemon=True)
        thread.start()
        batch = kubernetes.client.BatchV1Api(api_client(emu))
        try:
            while r.passes < 1:
                time.sleep(0.01)
            time.sleep(0.2)
            for i in range(samples):
                body = job("team-a", f"debug-{i}", budget="team-a", min_runtime="10m", gpus=2)
                t0 = time.perf_counter()
                batch.create_namespaced_job("team-a", body)
                while True:
                    obj = emu.get("Job", "team-a", f"debug-{i}")
                    if obj and (obj.get("metadata", {}).get("annotations") or {}).get(
                            marks.STATE) == "running":
                        break
                    if time.perf_counter() - t0 > 30:
                        raise RuntimeError("debug Job not admitted within 30 s")
                    time.sleep(0.002)
                out.append(time.perf_counter() - t0)
                emu.complete_job("team-a", f"debug-{i}")
                time.sleep(0.1)
        finally:
            r.stop()
            thread.join(timeout=5)
    return out


def loop_duration(n_jobs: int, n_nodes: int) -> dict[str, float]:
    figures: dict[str, float] = {}
    with run_emulator() as emu:
        emu.clock.now = 1_750_000_000.0
        emu.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": POLICY_NS}})
        for i in range(n_nodes):
            emu.add_node(f"n{i:03d}", gpus=8, labels=node_labels(domain=f"d{i // 16}"))
        policy = write_policy(Path(tempfile.mkdtemp()), LEAVES, nodes=n_nodes)
        shapes = [(1, 1, "10m"), (2, 1, "15m"), (8, 1, "1h"), (8, 2, "2h"), (4, 1, "4h"),
                  (8, 4, "8h"), (1, 1, "0")]
        leaves = list(LEAVES)
        for i in range(n_jobs):
            gpus, pods, mr = shapes[i % len(shapes)]
            leaf = leaves[i % len(leaves)]
            emu.create(job(leaf, f"job-{i:04d}", budget=None if mr == "0" else leaf,
                           min_runtime=mr, gpus=gpus, pods=pods))
            if i % 50 == 0:
                emu.clock.advance(1)
        client = api_client(emu)
        r = reconciler(client, policy, emu.clock, lease_s=3600, refresh_s=3600)

        def timed_pass(label: str) -> None:
            report = r.run_pass()
            figures[label] = report.duration_s
            figures[f"{label} admitted"] = len(report.result.admitted)
            figures[f"{label} writes"] = (len(report.result.admitted) + len(report.result.preempted)
                                          + report.result.explained)

        timed_pass("first pass")
        for k in range(3):
            emu.clock.advance(5)
            timed_pass(f"steady pass {k + 1}")
        running = [j for j in emu.list("jobs") if not j["spec"].get("suspend")]
        for j in running[:20]:
            emu.complete_job(j["metadata"]["namespace"], j["metadata"]["name"])
        emu.clock.advance(5)
        timed_pass("pass after 20 completions")
        # where a steady pass spends its time
        t = time.perf_counter()
        nodes, _ = r.client.list("nodes")
        jobs, _ = r.client.list("jobs")
        pods, _ = r.client.list("pods")
        figures["list nodes+jobs+pods"] = time.perf_counter() - t
        t = time.perf_counter()
        obs = observe(jobs, pods, nodes, r.policy.config)
        figures["observe"] = time.perf_counter() - t
        t = time.perf_counter()
        decide(obs.snapshot, r.policy.config, emu.clock())
        figures["decide"] = time.perf_counter() - t
        figures["jobs"] = len(jobs)
        figures["pods"] = len(pods)
    return figures


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--jobs", type=int, default=1000)
    parser.add_argument("--nodes", type=int, default=128)
    parser.add_argument("--samples", type=int, default=10)
    args = parser.parse_args()
    logging.basicConfig(level=logging.WARNING)
    lat = sorted(latency(args.samples))
    print(f"debug Job creation -> admission, free capacity, watch-driven ({len(lat)} samples):")
    print(f"  median {statistics.median(lat) * 1000:.0f} ms, "
          f"p90 {lat[int(0.9 * (len(lat) - 1))] * 1000:.0f} ms, max {lat[-1] * 1000:.0f} ms "
          f"(target < 2000 ms)")
    figs = loop_duration(args.jobs, args.nodes)
    print(f"reconcile passes with {args.jobs} Jobs and {args.nodes} nodes "
          f"({args.nodes * 8} GPUs):")
    for key, value in figs.items():
        if key.endswith(("admitted", "writes")) or key in ("jobs", "pods"):
            print(f"  {key}: {int(value)}")
        else:
            print(f"  {key}: {value * 1000:.0f} ms")
    return 0


if __name__ == "__main__":
    sys.exit(main())
