"""report.md's Teams table: every percentage can be checked against the entitlement it shows."""

from __future__ import annotations

import re

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
