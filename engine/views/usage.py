"""``allot usage``: delivered time against allocation for a budget subtree, now and over time.

For the subtree's root and each of its nodes:

* over the lookback window (the numbers fair share uses): ``charged`` GPU-hours (billing-
  weighted, allocated work only) against ``allocation`` = effective share x the capacity's
  billing-weighted GPU-hours over the part of the window the state covers; their ratio; the
  node's fraction of all charged usage and its metric (fraction / effective share);
* over time (:mod:`engine.views.series`): per bin, delivered / charged / entitled / allocation;
* **burn projection**: the charge rate of the last bin held for 24 hours; the window then drops
  what was charged in its oldest 24 hours (exact, from the ledger's step function) and adds
  24 h at that rate, for the subtree and, at the cluster's current rate, for everyone; the
  projected metric follows.

The PNG (:func:`usage_png`) draws the subtree's delivered, entitled and allocated GPU-hours per
bin (and its billing-weighted charge, labelled so) and each child's delivered/entitled ratio.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from engine.errors import Problem, UserError
from engine.views.series import delivered_since, hourly_entitled, subtree_series, totals_start, usage_series
from engine.views.state import ViewState
from engine.views.tables import table

PROJECT_S = 86400.0


def ledger_charged(ledger: dict[str, Any] | None, leaves: set[str], a: float, b: float) -> float:
    """GPU-seconds charged to ``leaves`` over ``(a, b]`` from a ledger dict (its rate step
    function: the base rate at the horizon plus the kept breakpoints)."""
    if not ledger or ledger.get("origin") is None or b <= a:
        return 0.0
    origin = ledger["origin"]
    horizon = ledger.get("horizon")
    lo, hi = a - origin, b - origin
    total = 0.0
    for leaf, base in zip(ledger["leaves"], ledger.get("base", [])):
        if leaf in leaves and base:
            start = lo if horizon is None else max(lo, horizon)
            total += base * max(0.0, hi - start)
    for leaf, t, d in ledger.get("breakpoints", []):
        if leaf in leaves:
            total += d * max(0.0, hi - max(t, lo))
    return total


def _leaves_under(state: ViewState, node: str) -> list[str]:
    tree = state.config.tree
    return [x for x in tree.walk() if tree.is_leaf(x) and node in tree.path(x)]


def usage_report(state: ViewState, subtree: str | None = None) -> dict[str, Any]:
    config, tree, now = state.config, state.config.tree, state.now
    root = subtree or tree.root
    if root not in tree.nodes:
        raise UserError([Problem("--subtree", 0, 0, f"no budget node {root!r}",
                                 f"nodes: {', '.join(tree.walk())}")])
    pol = config.policy
    weighted_cap = sum(c.gpus * pol.billing_weight(c.gpu_type) for c in pol.clusters)
    series = usage_series(state)
    # (from the state's first run, not the first bin's start, which is rounded down before it)
    first = max(series["start"], min(r.start for r in state.runs)) if state.runs else None
    covered = min(pol.lookback_s, now - first) if first is not None else pol.lookback_s
    used = state.node_usage
    total = used[tree.root]
    by_hour = hourly_entitled(state)  # (the table's entitlement: hour by hour, as the report's)
    totals_from = totals_start(state)
    ran = delivered_since(state, totals_from)
    nodes = [x for x in tree.walk() if root in tree.path(x)]
    rows = []
    for name in nodes:
        eff = tree.effective_share(name)
        alloc = eff * weighted_cap * covered
        frac = used[name] / total if total > 0 else 0.0
        under = _leaves_under(state, name)
        delivered = sum(ran[leaf] for leaf in under)
        entitled = sum(by_hour[leaf] for leaf in under)
        rank = state.decision.ranks.get(name)
        rows.append({
            "node": name, "depth": tree.depth(name) - tree.depth(root), "share_pct": tree.nodes[name].share_pct,
            "effective": eff, "charged_gpu_h": used[name] / 3600.0, "allocation_gpu_h": alloc / 3600.0,
            "charged_over_allocation": used[name] / alloc if alloc > 0 else None,
            "usage_fraction": frac, "metric": frac / eff if eff > 0 else None,
            "rank": rank.rank if rank else None,
            "delivered_gpu_h": delivered, "entitled_gpu_h": entitled,
            "delivered_over_entitled": delivered / entitled if entitled > 0 else None,
        })
    leaves = set(_leaves_under(state, root))
    every = set(tree.leaves())
    bin_s = series["bin_s"]
    last_a = now - bin_s
    rate = ledger_charged(state.ledger, leaves, last_a, now) / bin_s if state.ledger else \
        _run_rate(state, leaves, bin_s)
    rate_all = ledger_charged(state.ledger, every, last_a, now) / bin_s if state.ledger else \
        _run_rate(state, every, bin_s)
    # the window at now + P holds what was charged in its part before now and P of the rate;
    # a window shorter than P holds only the rate's last lookback
    window_a, ahead = now - pol.lookback_s, min(PROJECT_S, pol.lookback_s)
    drop = ledger_charged(state.ledger, leaves, window_a, window_a + ahead)
    drop_all = ledger_charged(state.ledger, every, window_a, window_a + ahead)
    u_next = max(0.0, used[root] - drop + rate * ahead)
    t_next = max(0.0, total - drop_all + rate_all * ahead)
    eff = tree.effective_share(root)
    alloc_rate = eff * weighted_cap
    burn = {
        "rate_gpu_h_per_h": rate, "allocation_gpu_h_per_h": alloc_rate,
        "rate_over_allocation": rate / alloc_rate if alloc_rate > 0 else None,
        "horizon_s": PROJECT_S, "charged_next_gpu_h": rate * PROJECT_S / 3600.0,
        "allocation_next_gpu_h": alloc_rate * PROJECT_S / 3600.0,
        "window_usage_now_gpu_h": used[root] / 3600.0, "window_usage_next_gpu_h": u_next / 3600.0,
        "dropping_out_gpu_h": drop / 3600.0,
        "metric_now": (used[root] / total) / eff if total > 0 and eff > 0 else None,
        "metric_next": (u_next / t_next) / eff if t_next > 0 and eff > 0 else None,
    }
    return {"subtree": root, "now": now, "lookback_s": pol.lookback_s, "covered_s": covered,
            "totals_from": totals_from, "measure_from": state.meta.get("measure_from"),
            "rows": rows, "series": {"start": series["start"], "bin_s": bin_s, "bins": series["bins"],
                                     **_node_series(state, series, root)},
            "children": {k: _node_series(state, series, k) for k in tree.children(root)},
            "burn": burn, "notes": list(state.notes)}


def _node_series(state: ViewState, series: dict[str, Any], node: str) -> dict[str, list[float]]:
    """The series of ``node``'s subtree: its leaves' summed, but ``allocation`` = the node's own
    effective share x capacity, as its table row and the burn line count it (its leaves' sum
    leaves out an ``unallocated`` part: science's 13.5% of the lab, not its 15%)."""
    out = subtree_series(series, _leaves_under(state, node))
    eff = state.config.tree.effective_share(node)
    out["allocation"] = [round(c * eff, 4) for c in series["capacity"]]
    return out


def _run_rate(state: ViewState, leaves: set[str], bin_s: float) -> float:
    a, now = state.now - bin_s, state.now
    total = 0.0
    for r in state.runs:
        if r.allocated and r.leaf in leaves:
            end = now if r.end is None else r.end
            total += max(0.0, min(end, now) - max(r.start, a)) * r.gpu_count * r.weight
    return total / bin_s


def _f(x: float | None, fmt: str = "{:.2f}") -> str:
    return "-" if x is None else fmt.format(x)


def usage_text(rep: dict[str, Any]) -> str:
    from engine.durations import format_duration

    win = format_duration(rep["lookback_s"])
    cov = format_duration(round(rep["covered_s"]))
    measured = rep.get("measure_from") or 0.0
    span = (f"over the run's measured window, from the end of its warm-up at t={rep['totals_from']:.0f}, "
            f"as the report's" if measured > 0 and rep["totals_from"] == measured else "over the same span")
    out = [f"Usage of {rep['subtree']} at t={rep['now']:.0f}: charged GPU-hours over the last {win} "
           f"window (state covers {cov}) against allocation (effective share x capacity, billing-weighted); "
           f"delivered vs entitled (allocation capped by demand) {span}."]
    out.append(table(
        ("NODE", "SHARE", "EFFECTIVE", "CHARGED-H", "ALLOC-H", "CHG/ALLOC", "METRIC", "RANK",
         "DELIVERED-H", "ENTITLED-H", "DEL/ENT"),
        [("  " * r["depth"] + r["node"], f"{r['share_pct']:g}%", f"{r['effective'] * 100:.2f}%",
          f"{r['charged_gpu_h']:.1f}", f"{r['allocation_gpu_h']:.1f}", _f(r["charged_over_allocation"]),
          _f(r["metric"]), r["rank"], f"{r['delivered_gpu_h']:.1f}", f"{r['entitled_gpu_h']:.1f}",
          _f(r["delivered_over_entitled"])) for r in rep["rows"]]))
    s = rep["series"]
    n = min(12, s["bins"])
    out.append(f"\nLast {n} bins of {format_duration(s['bin_s'])} (GPU-hours; CHARGED-W is billing-weighted, "
               f"as fair share and the burn line count it, the others are plain GPU-hours):")
    out.append(table(("BIN START", "DELIVERED", "CHARGED-W", "ENTITLED", "ALLOCATION", "DEMAND"),
                     [(f"t={s['start'] + i * s['bin_s']:.0f}", f"{s['delivered'][i]:.1f}", f"{s['charged'][i]:.1f}",
                       f"{s['entitled'][i]:.1f}", f"{s['allocation'][i]:.1f}", f"{s['demand'][i]:.1f}")
                      for i in range(s["bins"] - n, s["bins"])]))
    b = rep["burn"]
    out.append(
        f"\nBurn: charged now at {b['rate_gpu_h_per_h']:.1f} GPU-h/h against an allocation of "
        f"{b['allocation_gpu_h_per_h']:.1f} GPU-h/h ({_f(b['rate_over_allocation'], '{:.0%}')}). Held for 24h: "
        f"{b['charged_next_gpu_h']:.0f} GPU-h charged vs {b['allocation_next_gpu_h']:.0f} allocated; window usage "
        f"{b['window_usage_now_gpu_h']:.0f} -> {b['window_usage_next_gpu_h']:.0f} GPU-h ({b['dropping_out_gpu_h']:.0f} "
        f"drop out of the window); metric {_f(b['metric_now'])} -> {_f(b['metric_next'])} if everyone else "
        f"keeps the cluster's current rate.")
    out += [f"note: {n}" for n in rep["notes"]]
    return "\n".join(out)


def usage_png(rep: dict[str, Any], path: str) -> str:
    from engine.pictures import pyplot

    plt = pyplot()
    s = rep["series"]
    hours = (s["start"] + np.arange(s["bins"]) * s["bin_s"] - rep["now"]) / 3600.0
    fig, (ax1, ax2) = plt.subplots(2, 1, figsize=(10, 6.5), sharex=True,
                                   gridspec_kw={"height_ratios": [3, 2]})
    width = s["bin_s"] / 3600.0
    ax1.bar(hours, s["delivered"], width=width, align="edge", color="#4c78a8", alpha=0.8, label="delivered")
    ax1.step(hours, s["entitled"], where="post", color="#f58518", lw=2, label="entitled (allocation capped by demand)")
    ax1.step(hours, s["allocation"], where="post", color="#54a24b", lw=1.5, ls="--", label="allocation (share x capacity)")
    ax1.step(hours, s["charged"], where="post", color="#b279a2", lw=1, label="charged (billing-weighted)")
    ax1.set_ylabel(f"GPU-hours per {s['bin_s'] / 3600:g} h")
    ax1.set_title(f"{rep['subtree']}: delivered vs allocation")
    ax1.legend(fontsize=8, loc="upper left")
    for name, sub in sorted(rep["children"].items()):
        d, e = np.asarray(sub["delivered"]), np.asarray(sub["entitled"])
        with np.errstate(divide="ignore", invalid="ignore"):
            ratio = np.where(e > 0, d / np.where(e > 0, e, 1), np.nan)
        ax2.step(hours, ratio, where="post", lw=1.2, label=name)
    ax2.axhline(1.0, color="#888", lw=0.8, ls=":")
    ax2.set_ylabel("delivered / entitled")
    ax2.set_xlabel("hours before the state's time")
    if rep["children"]:
        ax2.legend(fontsize=7, ncol=4, loc="upper left")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path
