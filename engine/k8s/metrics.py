"""Prometheus metrics (text exposition format 0.0.4, stdlib only) and health endpoints.

``GET /metrics`` serves every family registered in :data:`FAMILIES`; ``GET /healthz`` is 200
while the loop keeps turning (an iteration, leader or not, within ``stall_s``); ``GET /readyz``
is 200 once a valid policy is in force and the last observation of the cluster succeeded.

Families (labels in braces):

- ``allot_queue_length`` pending managed Jobs; ``allot_running_workloads``;
  ``allot_running_gpus``; ``allot_unreadable_jobs`` (managed Jobs that could not be read:
  left out of the pass, each logged once)
- ``allot_admissions_total``, ``allot_preemptions_total{cause="contention"|"drain"}``,
  ``allot_rejections_total``, ``allot_holds_total``, ``allot_cordons_total``,
  ``allot_drained_nodes_total``, ``allot_uncordons_total``, ``allot_stale_writes_total``
- ``allot_leaf_usage_gpu_seconds{leaf}``, ``allot_leaf_share{leaf}``,
  ``allot_leaf_rank_metric{leaf}``, ``allot_leaf_rank{leaf}``
- ``allot_waiting_gpus{leaf,cause}``: GPUs of the Jobs still waiting after the last pass,
  per budget requested (``(none)`` for unfunded work) and cause in one word
  (``Decision.waiting``: no-room, pingpong, kept-off, reserved, holding, no-reservation,
  free-work), the live form of the simulator's "why work waited"
- ``allot_last_loop_duration_seconds`` (last pass), ``allot_loop_duration_seconds`` (a
  summary: ``_sum`` and ``_count`` over all passes), ``allot_last_pass_timestamp_seconds``
- ``allot_config_info{revision}`` (1 for the revision in force),
  ``allot_policy_invalid{revision}`` (1 while the newest candidate is invalid),
  ``allot_policy_invalid_total``, ``allot_policy_fetch_errors_total``, ``allot_pass_errors_total``
- ``allot_is_leader``, ``allot_api_calls_total``, ``allot_api_retries_total``,
  ``allot_api_errors_total{status}``, ``allot_ledger_charged_gpu_seconds_total``
"""

from __future__ import annotations

import math
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import TYPE_CHECKING, Callable, Iterable

from engine.core.statuses import NO_TEAM

if TYPE_CHECKING:
    from engine.core.types import Decision, Workload

FAMILIES: dict[str, tuple[str, str]] = {
    "allot_queue_length": ("gauge", "Managed Jobs waiting to be admitted."),
    "allot_running_workloads": ("gauge", "Managed Jobs running."),
    "allot_running_gpus": ("gauge", "GPUs held by running managed Jobs."),
    "allot_unreadable_jobs": ("gauge", "Managed Jobs that could not be read, left out of the last pass (each logged once)."),
    "allot_admissions_total": ("counter", "Jobs admitted."),
    "allot_preemptions_total": ("counter", "Jobs preempted (suspended and requeued)."),
    "allot_rejections_total": ("counter", "Jobs rejected (never admitted)."),
    "allot_holds_total": ("counter", "Contract Jobs found unsuspended and queued."),
    "allot_cordons_total": ("counter", "Nodes cordoned."),
    "allot_uncordons_total": ("counter", "Nodes it had cordoned, uncordoned once healthy again."),
    "allot_drained_nodes_total": ("counter", "Nodes labelled drained."),
    "allot_stale_writes_total": ("counter", "Writes refused because the object changed."),
    "allot_leaf_usage_gpu_seconds": ("gauge", "Charged GPU-seconds in the lookback window."),
    "allot_leaf_share": ("gauge", "Effective share of the whole (0..1)."),
    "allot_leaf_rank_metric": ("gauge", "Usage fraction over share (1 = on budget)."),
    "allot_leaf_rank": ("gauge", "Fair-share rank, 1 served first."),
    "allot_waiting_gpus": ("gauge", "GPUs of Jobs still waiting after the last pass, by budget and cause."),
    "allot_last_loop_duration_seconds": ("gauge", "Duration of the last reconcile pass."),
    "allot_loop_duration_seconds": ("summary", "Duration of reconcile passes."),
    "allot_last_pass_timestamp_seconds": ("gauge", "Clock time of the last pass."),
    "allot_config_info": ("gauge", "The policy revision in force."),
    "allot_policy_invalid": ("gauge", "1 while the newest policy revision is invalid."),
    "allot_policy_invalid_total": ("counter", "Invalid policy revisions seen."),
    "allot_policy_fetch_errors_total": ("counter", "Failed fetches of the policy repo."),
    "allot_pass_errors_total": ("counter", "Passes that failed unforeseen (logged with a traceback); the loop went on."),
    "allot_is_leader": ("gauge", "1 when this replica holds the Lease."),
    "allot_api_calls_total": ("counter", "Kubernetes API calls."),
    "allot_api_retries_total": ("counter", "Kubernetes API calls retried."),
    "allot_api_errors_total": ("counter", "Kubernetes API errors by HTTP status (0: network)."),
    "allot_ledger_charged_gpu_seconds_total": ("counter",
                                               "Billing-weighted GPU-seconds charged."),
}

Labels = tuple[tuple[str, str], ...]

# counters exported at 0 from the start (an alert on rate() or increase() sees 0, not no data,
# before the first event): every counter without labels, and the preemption causes
ZERO_FROM_START: dict[str, tuple[Labels, ...]] = {
    **{name: ((),) for name, (kind, _) in FAMILIES.items()
       if kind == "counter" and name not in ("allot_preemptions_total", "allot_api_errors_total")},
    "allot_preemptions_total": ((("cause", "contention"),), (("cause", "drain"),)),
}


def _escape(value: str) -> str:
    return value.replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')


def _number(value: float) -> str:
    if math.isinf(value):
        return "+Inf" if value > 0 else "-Inf"
    if math.isnan(value):
        return "NaN"
    return repr(float(value)) if value != int(value) else str(int(value))


def waiting_gpus(pending: Iterable[Workload], decision: Decision) -> dict[Labels, float]:
    """``allot_waiting_gpus``: GPUs of the ``pending`` workloads still waiting after
    ``decision``, per budget requested and cause (admitted and rejected work has no cause)."""
    causes = decision.waiting
    out: dict[Labels, float] = {}
    for w in pending:
        cause = causes.get(w.id)
        if cause is not None:
            key = (("cause", cause), ("leaf", w.contract.requested_budget or NO_TEAM))
            out[key] = out.get(key, 0.0) + w.contract.gpus
    return out


class Metrics:
    """A thread-safe registry of samples for the families above."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._samples: dict[str, dict[Labels, float]] = {name: {} for name in FAMILIES}
        for name, keys in ZERO_FROM_START.items():
            self._samples[name].update((key, 0.0) for key in keys)

    def set(self, name: str, value: float, **labels: str) -> None:
        with self._lock:
            self._samples[name][tuple(sorted(labels.items()))] = float(value)

    def inc(self, name: str, value: float = 1.0, **labels: str) -> None:
        key = tuple(sorted(labels.items()))
        with self._lock:
            family = self._samples[name]
            family[key] = family.get(key, 0.0) + float(value)

    def observe(self, name: str, value: float) -> None:
        """Add one observation to a summary family (``_sum`` and ``_count``)."""
        with self._lock:
            family = self._samples[name]
            for suffix, add in (("_sum", float(value)), ("_count", 1.0)):
                key = (("__suffix", suffix),)
                family[key] = family.get(key, 0.0) + add

    def replace(self, name: str, values: dict[Labels, float]) -> None:
        """Swap a whole family (per-leaf gauges, the info gauge) in one step."""
        with self._lock:
            self._samples[name] = dict(values)

    def get(self, name: str, **labels: str) -> float | None:
        with self._lock:
            return self._samples[name].get(tuple(sorted(labels.items())))

    def render(self) -> str:
        lines: list[str] = []
        with self._lock:
            for name, (kind, text) in FAMILIES.items():
                samples = self._samples[name]
                lines.append(f"# HELP {name} {text}")
                lines.append(f"# TYPE {name} {kind}")
                for labels, value in sorted(samples.items()):
                    if labels and labels[0][0] == "__suffix":
                        lines.append(f"{name}{labels[0][1]} {_number(value)}")
                    elif labels:
                        inner = ",".join(f'{k}="{_escape(v)}"' for k, v in labels)
                        lines.append(f"{name}{{{inner}}} {_number(value)}")
                    else:
                        lines.append(f"{name} {_number(value)}")
        return "\n".join(lines) + "\n"


class Health:
    """Liveness and readiness, fed by the loop (monotonic wall time, not the injected clock)."""

    def __init__(self, stall_s: float = 300.0) -> None:
        self.stall_s = stall_s
        self.last_beat = time.monotonic()
        self.ready = False
        self.reason = "starting"

    def beat(self) -> None:
        self.last_beat = time.monotonic()

    def alive(self) -> bool:
        return time.monotonic() - self.last_beat < self.stall_s


def serve(metrics: Metrics, health: Health, port: int, host: str = "0.0.0.0",
          before_render: Callable[[], None] | None = None,
          app: Callable[[str, str, str], tuple[int, dict[str, str], bytes]] | None = None
          ) -> ThreadingHTTPServer:
    """Start the HTTP endpoint in a daemon thread; ``server.shutdown()`` stops it. ``app``
    (``(method, path, query) -> (status, headers, body)``, e.g. the dashboard of
    :class:`engine.views.live.LiveRecorder`) serves every other path."""

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802 - http.server API
            path = self.path.split("?", 1)[0]
            if path == "/metrics":
                if before_render is not None:
                    before_render()
                self._send(200, metrics.render(), "text/plain; version=0.0.4; charset=utf-8")
            elif path == "/healthz":
                ok = health.alive()
                self._send(200 if ok else 503, "ok\n" if ok else "loop stalled\n")
            elif path == "/readyz":
                self._send(200 if health.ready else 503,
                           "ok\n" if health.ready else f"{health.reason}\n")
            elif app is not None:
                status, headers, data = app("GET", path, self.path.partition("?")[2])
                self.send_response(status)
                for key, value in headers.items():
                    self.send_header(key, value)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)
            else:
                self._send(404, "not found\n")

        def _send(self, status: int, body: str, ctype: str = "text/plain; charset=utf-8") -> None:
            data = body.encode()
            self.send_response(status)
            self.send_header("Content-Type", ctype)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, format: str, *args: object) -> None:  # silence access logs
            return

    server = ThreadingHTTPServer((host, port), Handler)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, name="allot-metrics", daemon=True).start()
    return server
