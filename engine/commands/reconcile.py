"""``allot reconcile``: run the fair-share / preemption loop against a Kubernetes cluster.

Follows the policy repository, watches Jobs and Nodes, and keeps ``decide()`` in force: admits,
preempts, rejects, drains (see :mod:`engine.k8s`). Two replicas are safe (Lease election).
``--once`` runs a single pass and exits (0 when it ran, 1 otherwise); ``--dry-run`` logs the
decisions and writes nothing (no Lease, no patches, no Events, no ledger).

Logs are JSON lines on stderr (``--log-format text`` for humans): one ``pass`` record per pass
with what it did.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import signal
import socket
import sys
import time
from pathlib import Path

from engine.commands import port, seconds_arg

NAMESPACE_FILE = "/var/run/secrets/kubernetes.io/serviceaccount/namespace"


def lease_arg(text: str) -> float:
    """argparse type of ``--lease-duration``: a time span of at least 1 s (the Lease holds it in
    whole seconds, and the API server refuses a ``leaseDurationSeconds`` of 0)."""
    value = seconds_arg(text)
    if value < 1:
        raise argparse.ArgumentTypeError(
            f"must be at least 1s, got {text!r}: the Lease counts whole seconds and the API "
            f"server refuses a duration of 0 (no replica could lead)")
    return value


def period_arg(text: str) -> float:
    """argparse type of ``--interval`` and ``--policy-interval``: a time span above 0 (0 would
    turn the loop without rest; it used to mean "the default" silently)."""
    value = seconds_arg(text)
    if value <= 0:
        raise argparse.ArgumentTypeError(
            f"must be above 0, got {text!r}; leave the flag out for the default")
    return value


def _default_namespace() -> str:
    if os.environ.get("POD_NAMESPACE"):
        return os.environ["POD_NAMESPACE"]
    try:
        return Path(NAMESPACE_FILE).read_text().strip() or "allot-system"
    except OSError:
        return "allot-system"


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "reconcile",
        help="run the scheduling loop in a Kubernetes cluster",
        description="Keep the budget policy in force on a cluster: admit suspended Jobs that "
                    "carry contract labels, preempt, reject, drain unhealthy nodes. Uses "
                    "--kubeconfig, else the in-cluster service account, else ~/.kube/config.",
    )
    parser.add_argument("--kubeconfig", metavar="PATH", default=None,
                        help="kubeconfig file (default: in-cluster config)")
    parser.add_argument("--policy-repo", metavar="URL|PATH", default=None,
                        help="policy git repository (URL or path) to follow, or a plain directory "
                             "with budgets/ and policies/ (default: the embedded policy)")
    parser.add_argument("--branch", default="main", help="branch to follow (default: main)")
    parser.add_argument("--once", action="store_true", help="run one pass and exit")
    parser.add_argument("--dry-run", action="store_true",
                        help="log decisions without applying them (takes no Lease, writes nothing)")
    parser.add_argument("--interval", type=period_arg, default=None, metavar="S",
                        help="resync period in seconds or as 30s/2m (default: the policy's "
                             "schedulingInterval); watch events trigger passes in between")
    parser.add_argument("--policy-interval", type=period_arg, default=None, metavar="S",
                        help="how often to fetch the policy repository (default: --interval, "
                             "else 60s)")
    parser.add_argument("--metrics-port", type=port, default=None, metavar="P",
                        help="serve /metrics, /healthz and /readyz on this port (default: off)")
    parser.add_argument("--namespace", default=None, metavar="NS",
                        help="namespace of the reconciler's Lease, ledger ConfigMap and policy "
                             "Events (default: $POD_NAMESPACE, the in-cluster namespace, else "
                             "allot-system)")
    parser.add_argument("--watch-namespace", default=None, metavar="NS",
                        help="manage Jobs of this namespace only (default: all namespaces); pods are read in "
                             "every namespace (other tenants' GPUs on the same nodes)")
    parser.add_argument("--identity", default=None,
                        help="leader-election identity (default: $POD_NAME, else the host name)")
    parser.add_argument("--lease-duration", type=lease_arg, default=15.0, metavar="S",
                        help="Lease duration; a standby takes over this long after the leader "
                             "stopped renewing (default: 15)")
    parser.add_argument("--export-trace", metavar="PATH", default=None,
                        help="after each pass, write the Jobs submitted within the policy's "
                             "lookback as a simulator trace (.jsonl or .csv)")
    parser.add_argument("--workdir", metavar="DIR", default=None,
                        help="where the policy repository is cloned (default: a temporary dir)")
    parser.add_argument("--log-format", choices=("json", "text"), default="json",
                        help="log format on stderr (default: json)")
    parser.set_defaults(func=run)


class JsonFormatter(logging.Formatter):
    """One JSON object per record: time, level, logger, message and the record's fields."""

    def format(self, record: logging.LogRecord) -> str:
        out = {"ts": round(record.created, 3), "level": record.levelname.lower(),
               "logger": record.name, "msg": record.getMessage()}
        out.update(getattr(record, "fields", None) or {})
        if record.exc_info:
            out["exc"] = self.formatException(record.exc_info)
        return json.dumps(out, default=str)


class TextFormatter(logging.Formatter):
    """A plain line for humans: time, level, logger, message, then the record's fields as
    ``key=value`` (a ``pass`` record's admitted, preempted, ... as in the JSON format)."""

    def __init__(self) -> None:
        super().__init__("%(asctime)s %(levelname)s %(name)s: %(message)s")

    def format(self, record: logging.LogRecord) -> str:
        line = super().format(record)
        fields = getattr(record, "fields", None) or {}
        if not fields:
            return line
        said = " ".join(f"{k}={json.dumps(v, default=str)}" for k, v in fields.items())
        head, sep, tail = line.partition("\n")  # (a traceback stays below the fields)
        return f"{head} {said}{sep}{tail}"


def setup_logging(fmt: str) -> None:
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(JsonFormatter() if fmt == "json" else TextFormatter())
    root = logging.getLogger("allot")
    root.handlers[:] = [handler]
    root.setLevel(logging.INFO)
    root.propagate = False


def run(args: argparse.Namespace) -> int:
    from engine.k8s.client import ApiError, KubeClient
    from engine.k8s.loop import LoopOptions, Reconciler
    from engine.k8s.metrics import Health, Metrics, serve
    from engine.k8s.policy_source import PolicySource

    setup_logging(args.log_format)
    log = logging.getLogger("allot.reconcile")
    if args.kubeconfig and not os.path.isfile(args.kubeconfig):
        print(f"allot reconcile: --kubeconfig {args.kubeconfig}: no such file", file=sys.stderr)
        return 1
    if args.policy_repo is not None and not args.policy_repo.strip():
        print("allot reconcile: --policy-repo is empty; give a git URL or a path (or drop the flag "
              "for the embedded policy)", file=sys.stderr)
        return 1
    try:
        client = KubeClient.connect(args.kubeconfig)
    except Exception as err:  # a missing or broken kubeconfig is a user error, not a traceback
        where = (f"from --kubeconfig {args.kubeconfig}" if args.kubeconfig else
                 "(not in a cluster, and $KUBECONFIG or ~/.kube/config gave none)")
        said = " ".join(str(err).split()).rstrip(".")
        print(f"allot reconcile: cannot load Kubernetes configuration {where}: {said}; pass "
              f"--kubeconfig PATH, or run it in the cluster (deploy/)", file=sys.stderr)
        return 1
    policy = PolicySource(args.policy_repo, branch=args.branch, workdir=args.workdir,
                          interval_s=args.policy_interval or args.interval or 60.0)
    options = LoopOptions(
        namespace=args.namespace or _default_namespace(),
        watch_namespace=args.watch_namespace,
        interval_s=args.interval,
        dry_run=args.dry_run,
        identity=args.identity or os.environ.get("POD_NAME") or socket.gethostname(),
        lease_s=args.lease_duration,
        export_path=args.export_trace,
    )
    metrics, health = Metrics(), Health()
    reconciler = Reconciler(client, policy, options, clock=time.time, metrics=metrics,
                            health=health)
    try:
        from engine.views.live import LiveRecorder

        recorder = LiveRecorder()  # the dashboard and /api/state on the metrics port
        reconciler.listeners.append(recorder.record)
        server = serve(metrics, health, args.metrics_port, app=recorder.app) if args.metrics_port else None
    except OSError as err:
        print(f"allot reconcile: cannot serve metrics on port {args.metrics_port}: {err}",
              file=sys.stderr)
        return 1
    try:
        if args.once:
            report = reconciler.run(once=True)
            if report is None or not report.acted:
                why = report.error if report and report.error else "this instance is not the leader"
                if report and report.policy_event and report.policy_event.kind != "applied":
                    why = report.policy_event.message
                print(f"allot reconcile: pass not run: {why}", file=sys.stderr)
                return 1
            result = report.result
            summary = {"revision": report.revision, "pending": report.pending,
                       "running": report.running, "charged_gpu_s": round(report.charged_gpu_s, 3),
                       "duration_s": round(report.duration_s, 4), "dry_run": args.dry_run}
            if result is not None:
                summary.update(admitted=result.admitted, preempted=result.preempted,
                               evicted=result.evicted, rejected=result.rejected,
                               held=result.held, cordoned=result.cordoned,
                               drained=result.drained, planned=result.planned,
                               errors=result.errors)
            print(json.dumps(summary, indent=2))
            return 0

        def _stop(signum: int, frame: object) -> None:
            log.info("signal %s: stopping", signum)
            reconciler.stop()

        signal.signal(signal.SIGTERM, _stop)
        signal.signal(signal.SIGINT, _stop)
        reconciler.run()
        return 0
    except ApiError as err:
        print(f"allot reconcile: Kubernetes API error: {err}", file=sys.stderr)
        return 1
    finally:
        if server is not None:
            server.shutdown()
