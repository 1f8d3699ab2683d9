"""Benchmark: ``allot impact`` for a 14-day replay on a 1,024-GPU cluster (target < 2 min).

Builds a real git repository with pygit2 whose base commit holds the shipped budgets and
policies with one cluster of 128 x 8 = 1,024 H100 GPUs, and whose head moves 10 points of the
applied program from code-assistant to agents; then times the whole command (both loads from
git, the diff, two 14-day simulations of the default trace at the default demand, the report, chart
and JSON). Prints the figures; asserts nothing about time.

    python tests/benchmarks/bench_impact.py [--days 14] [--trace philly] [--cadence watch|interval]
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import re
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

import pygit2  # noqa: E402

from engine.cli import main  # noqa: E402
from engine.commands.buildcore import describe  # noqa: E402
from tests.impact.gitrepo import commit, replace_in, shipped_files  # noqa: E402


def one_cluster(files: dict[str, bytes]) -> dict[str, bytes]:
    """policies/clusters.yaml with only the 1,024-GPU h100 cluster."""
    text = files["policies/clusters.yaml"].decode()
    cut = re.search(r"\n  - name: b200\b", text)
    assert cut, "the shipped clusters.yaml lists h100 then b200"
    return {**files, "policies/clusters.yaml": text[:cut.start() + 1].encode()}


def main_bench() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--days", default="14")
    parser.add_argument("--trace", default=None)
    parser.add_argument("--cadence", default="watch", choices=["watch", "interval"])
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        repo = pygit2.init_repository(str(Path(tmp) / "config"))
        files = one_cluster(shipped_files())
        base = commit(repo, files, "base")
        files = replace_in(files, "budgets/applied.yaml", "    - name: code-assistant\n      share: 35",
                           "    - name: code-assistant\n      share: 25")
        files = replace_in(files, "budgets/applied.yaml", "    - name: agents\n      share: 20",
                           "    - name: agents\n      share: 30")
        head = commit(repo, files, "head")
        out = Path(tmp) / "out"
        argv = ["impact", "--repo", str(Path(tmp) / "config"), "--base", base, "--head", head,
                "--days", args.days, "--out", str(out), "--format", "json"]
        if args.trace:
            argv += ["--trace", args.trace]
        argv += ["--cadence", args.cadence]
        buf = io.StringIO()
        started = time.perf_counter()
        with contextlib.redirect_stdout(buf):
            code = main(argv)
        wall = time.perf_counter() - started
        doc = json.loads(buf.getvalue())
        replay = doc["replay"]
        md = (out / "impact.md").read_text()
        teams = {t["team"]: t for t in replay["teams"]}
        print(f"exit status            {code}")
        print(f"cadence                {args.cadence}")
        print(f"core                   {describe()}")
        print(f"replayed               {replay['horizon_s'] / 86400:.1f} days, {replay['tasks']:,} jobs, "
              f"{replay['capacity_gpus']['before']:,} GPUs, trace {replay['trace']}")
        print(f"wall time (whole cmd)  {wall:.1f} s   (target < 120 s)")
        print(f"of which simulation    {replay['wall_s']:.1f} s")
        for name in ("code-assistant", "agents"):
            d = teams[name]["delivered_gpu_h"]
            print(f"{name:22} delivered {d['before']:,.0f} -> {d['after']:,.0f} GPU-h")
        print(f"occupancy              {replay['overall']['occupancy']['before']:.3f} -> "
              f"{replay['overall']['occupancy']['after']:.3f}")
        print(f"markdown               {len(md):,} chars; png {(out / 'impact.png').stat().st_size:,} bytes")
    return 0


if __name__ == "__main__":
    sys.exit(main_bench())
