"""report.md's Teams table: every percentage can be checked against the entitlement it shows."""

from __future__ import annotations

import re

import pytest

from engine.sim.experiment import run_experiment
from engine.sim.prepare import prepare_trace
from engine.sim.report import markdown
from engine.sim.synthetic import synthetic_trace
from tests.sim.conftest import tiny_config


def test_each_schedulers_percentage_is_of_the_entitlement_written_beside_it():
    """Demand counts queued work, so the baselines' entitlements differ from the budget run's:
    a baseline's cell names its own (`of N`) where it differs, and delivered / that entitlement
    is the percentage shown, as for the budget run's against the entitled column."""
    cfg = tiny_config(nodes=2, gpus_per_node=8)
    trace = prepare_trace(synthetic_trace(cfg, days=0.5, tasks=120, seed=5), cfg, seed=5)
    summary = run_experiment(cfg, trace, ("budget", "legacy", "monopoly"), seed=5).summary()
    names = list(summary["schedulers"])
    assert any(summary["schedulers"][n]["teams"][t]["entitled_gpu_h"]
               != summary["schedulers"]["budget"]["teams"][t]["entitled_gpu_h"]
               for n in names for t in ("a", "b"))  # the case this is about
    md = markdown(summary, pictures=False)
    assert "| team | share | budget entitled GPU-h | budget delivered |" in md
    checked = 0
    for leaf in ("a", "b"):
        (row,) = [line for line in md.splitlines() if re.match(rf"\| {leaf}\*? \|", line)]
        cells = [c.strip() for c in row.strip("|").split("|")]
        shown = float(cells[2])
        for n, cell in zip(names, cells[3:3 + len(names)]):
            m = re.fullmatch(r"(\d+) \(([\d.]+)%(?: of (\d+))?\)", cell)
            assert m, cell
            t = summary["schedulers"][n]["teams"][leaf]
            entitled = float(m.group(3)) if m.group(3) else shown
            assert entitled == round(t["entitled_gpu_h"]), (n, leaf, cell, t["entitled_gpu_h"])
            checked += 1
    assert checked == 6


def test_a_team_short_whose_job_is_larger_than_its_share_is_told_so():
    """Teams that fell short: a job asking more GPUs than its team's share of the run's
    capacity is said to (whenever it runs the team is above its share, and it needs that many
    GPUs free at once); a job within the share is not."""
    from engine.sim.report import Ask, _short_teams
    from engine.sim.result import TaskRecord

    def job(gpus: int) -> TaskRecord:
        return TaskRecord(f"j{gpus}", "o", "a", "small", gpus, True, 0.0, None, None, "pending",
                          3600.0, 0, 0.0, 0)

    big, small = (_short_teams([Ask("a", 0.5, job(g), 1800, 7.68, 192)]) for g in (8, 4))
    assert "- **a** (50.0%): j8, 8 GPUs (more than the team's share: 7.7 of the run's 192 GPUs), " \
        "waited 60.0 min in all" in "\n".join(big)
    assert "- **a** (50.0%): j4, 4 GPUs, waited 60.0 min in all" in "\n".join(small)


def test_the_team_s_share_in_gpus_is_its_share_of_every_gpu_of_the_run():
    """``short_teams`` gives each team's share of the run's capacity in GPUs (summary share x
    the clusters' GPUs), and a job is said to be above it only when it asks strictly more.
    Run: 4 nodes x 8 = 32 GPUs. Team a: share 0.25 -> 8.0 GPUs; its 8-GPU job is not above
    (8 = 8.0). Team b: share 0.2 -> 6.4 GPUs; its 8-GPU job is (8 > 6.4)."""
    from types import SimpleNamespace

    from engine.sim.report import _short_teams, short_teams
    from engine.sim.result import TaskRecord

    def job(name: str, leaf: str) -> TaskRecord:
        return TaskRecord(name, "o", leaf, "large", 8, True, 0.0, None, None, "pending",
                          7200.0, 0, 0.0, 0)

    result = SimpleNamespace(config=tiny_config(nodes=4, gpus_per_node=8), segments=[],
                             horizon=7200.0, tasks={"ja": job("ja", "a"), "jb": job("jb", "b")})
    summary = {"measured_s": [0.0, 7200.0], "teams": {
        "a": {"share": 0.25, "enough_demand": True, "ratio": 0.5},
        "b": {"share": 0.2, "enough_demand": True, "ratio": 0.4}}}
    asks = short_teams(result, summary)  # type: ignore[arg-type]
    assert [(a.leaf, a.job.id if a.job else None, a.share_gpus, a.capacity) for a in asks] == [
        ("b", "jb", pytest.approx(6.4), 32), ("a", "ja", pytest.approx(8.0), 32)]
    lines = "\n".join(_short_teams(asks))
    assert "- **b** (40.0%): jb, 8 GPUs (more than the team's share: 6.4 of the run's 32 GPUs), waited" in lines
    assert "- **a** (50.0%): ja, 8 GPUs, waited" in lines


def test_an_ask_without_the_run_s_capacity_says_nothing_of_the_share():
    """An ``Ask`` made without the run's capacity (its defaults: 0 GPUs, a share of 0) does not
    call every job larger than the team's share."""
    from engine.sim.report import Ask, _short_teams
    from engine.sim.result import TaskRecord

    j = TaskRecord("j8", "o", "a", "small", 8, True, 0.0, None, None, "pending", 3600.0, 0, 0.0, 0)
    assert "- **a** (50.0%): j8, 8 GPUs, waited 60.0 min in all" in "\n".join(_short_teams([Ask("a", 0.5, j, 1800)]))
