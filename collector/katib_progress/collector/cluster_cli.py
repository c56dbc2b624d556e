"""Flags and entry point of ``katib-progress collector run`` on a cluster (docs/cluster.md).

``add_arguments(run_parser)`` adds the cluster flags (the contract with manifests/base/deployment.yaml)
to the parser ``collector/cli.py`` builds; ``main(args)`` runs ``ClusterCollector`` with
``/metrics``, ``/healthz``, ``/readyz`` and SIGTERM/SIGINT handling. Exit codes: 0 after a clean
stop with the sink drained, 1 when rows were left undelivered or leadership was lost (the pod
restarts as a standby), 2 on invalid configuration.
"""

from __future__ import annotations

import argparse
import logging
import os
import signal
import socket
import threading
from types import FrameType
from typing import TYPE_CHECKING, Any

from pydantic import ValidationError

from katib_progress.core.errors import ConfigError
from katib_progress.core.pruning import PruningBackend

if TYPE_CHECKING:
    from katib_progress.collector.cluster import ClusterCollector
    from katib_progress.collector.counters import Counters
    from katib_progress.collector.observability import ObservabilityServer

_log = logging.getLogger(__name__)

#: Same as ``katib_progress.collector.forwarder.DEFAULT_TEMPLATE`` / ``SUGGESTION_TEMPLATE`` (kept here
#: so building the CLI parser stays light): Katib's suggestion Service, early-stopping / suggestion port.
DEFAULT_TEMPLATE = "{experiment}-{algorithm}.{namespace}:6788"
SUGGESTION_TEMPLATE = "{experiment}-{algorithm}.{namespace}:6789"


def add_arguments(run: argparse.ArgumentParser) -> None:
    run.add_argument(
        "--metrics-address",
        default="",
        metavar="HOST:PORT",
        help="serve /metrics, /healthz, /readyz here (empty: no HTTP server)",
    )
    run.add_argument("--leader-elect", action="store_true", help="take part in leader election (a Lease)")
    run.add_argument(
        "--leader-election-namespace",
        default=os.environ.get("POD_NAMESPACE", "katib-progress"),
        metavar="NS",
        help="namespace of the Lease (default: $POD_NAMESPACE or katib-progress)",
    )
    run.add_argument(
        "--leader-election-id", default="katib-progress-collector", metavar="NAME", help="name of the Lease"
    )
    run.add_argument(
        "--leader-election-identity",
        default=os.environ.get("POD_NAME", socket.gethostname()),
        metavar="ID",
        help="holder identity (default: $POD_NAME or the host name)",
    )
    run.add_argument("--lease-duration", type=float, default=15.0, metavar="S")
    run.add_argument("--renew-deadline", type=float, default=10.0, metavar="S")
    run.add_argument("--retry-period", type=float, default=2.0, metavar="S")
    run.add_argument(
        "--pruning-address-template",
        default=DEFAULT_TEMPLATE,
        metavar="TEMPLATE",
        help="our pruning engine (the early-stopping container, Katib's port 6788) for Experiments with "
        "earlyStopping katib-progress; {experiment}, {algorithm}, {namespace} are substituted",
    )
    run.add_argument(
        "--suggestion-address-template",
        default=SUGGESTION_TEMPLATE,
        metavar="TEMPLATE",
        help="our suggestion service (Katib's port 6789), fed curves for kp-* algorithms; same fields",
    )
    run.add_argument("--pruning-timeout", type=float, default=2.0, metavar="S", help="deadline per Decide")
    run.add_argument("--pruning-workers", type=int, default=2, metavar="N")
    run.add_argument("--experiment-cache-ttl", type=float, default=30.0, metavar="S")
    run.add_argument(
        "--watchdog",
        action="store_true",
        help="also watch annotated TrainJobs no Trial owns (katib-progress.kubeflow.org/watchdog)",
    )
    run.add_argument("--watchdog-interval", type=float, default=30.0, metavar="S")


def _options(args: argparse.Namespace) -> Any:
    from katib_progress.collector.cluster import ClusterOptions
    from katib_progress.collector.controller import CollectorSettings
    from katib_progress.collector.forwarder import ForwarderSettings
    from katib_progress.collector.kube import WatchSettings
    from katib_progress.collector.leader import LeaderSettings

    leader = None
    if args.leader_elect:
        leader = LeaderSettings(
            namespace=args.leader_election_namespace,
            name=args.leader_election_id,
            identity=args.leader_election_identity,
            lease_duration_s=args.lease_duration,
            renew_deadline_s=args.renew_deadline,
            retry_period_s=args.retry_period,
        )
    return ClusterOptions(
        collector=CollectorSettings(watch=WatchSettings(namespaces=tuple(args.namespace or ()))),
        forwarder=ForwarderSettings(
            address_template=args.pruning_address_template,
            suggestion_address_template=args.suggestion_address_template,
            timeout_s=args.pruning_timeout,
            workers=args.pruning_workers,
        ),
        leader=leader,
        identity=args.leader_election_identity,
        experiment_ttl_s=args.experiment_cache_ttl,
        watchdog=args.watchdog,
        watchdog_interval_s=args.watchdog_interval,
    )


def _serve_metrics(args: argparse.Namespace, counters: Counters, cc: ClusterCollector) -> ObservabilityServer:
    """Start ``/metrics``, ``/healthz`` and ``/readyz``; raises OSError/ValueError when it cannot."""
    from katib_progress.collector.observability import ObservabilityServer

    server = ObservabilityServer(
        args.metrics_address, counters, gauges=cc.gauges(), healthy=cc.healthy, ready=cc.ready
    ).start()
    _log.info(
        "metrics on %s", server.address, extra={"event": "metrics_listening", "address": server.address}
    )
    return server


def _stop_on_signals(cc: ClusterCollector) -> dict[signal.Signals, Any]:
    """SIGTERM/SIGINT stop ``cc`` (main thread only); returns the handlers to put back."""

    def _terminate(signum: int, _frame: FrameType | None) -> None:
        _log.info("signal %s received; stopping", signal.Signals(signum).name, extra={"event": "stopping"})
        cc.stop()

    if threading.current_thread() is not threading.main_thread():
        return {}
    return {sig: signal.signal(sig, _terminate) for sig in (signal.SIGTERM, signal.SIGINT)}


def main(args: argparse.Namespace, *, pruning: PruningBackend) -> int:
    from katib_progress.collector.cluster import ClusterCollector
    from katib_progress.collector.counters import Counters
    from katib_progress.collector.katib.dbmanager import DBManagerSettings, DBManagerSink
    from katib_progress.collector.katib.readback import StoredRowsReader
    from katib_progress.collector.kube import load_api_client

    try:
        options = _options(args)
        db_settings = DBManagerSettings.from_cli(args)
        api_client = load_api_client(getattr(args, "kubeconfig", None))
    except (ConfigError, ValidationError, ValueError) as exc:
        _log.error("invalid configuration: %s", exc, extra={"event": "config_error"})
        return 2
    counters = Counters()
    reader = StoredRowsReader(args.db_manager, rpc_timeout_s=db_settings.rpc_timeout_s)
    cc = ClusterCollector(
        options,
        api_client,
        counters=counters,
        reader=reader,
        pruning=pruning,
        sink_factory=lambda: DBManagerSink(args.db_manager, settings=db_settings, counters=counters),
    )
    server = None
    if args.metrics_address:
        try:
            server = _serve_metrics(args, counters, cc)
        except (OSError, ValueError) as exc:
            _log.error("cannot serve metrics on %s: %s", args.metrics_address, exc)
            return 2
    previous = _stop_on_signals(cc)
    _log.info(
        "collector started: identity=%s leader-elect=%s db-manager=%s",
        options.identity,
        options.leader is not None,
        args.db_manager,
        extra={"event": "started", "identity": options.identity, "db_manager": args.db_manager},
    )
    try:
        kept = cc.run()
    finally:
        if server is not None:
            server.stop()
        reader.close()
        api_client.close()
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    _log.info(
        "collector stopped: leadership kept=%s drained=%s",
        kept,
        cc.drained,
        extra={"event": "stopped", "drained": cc.drained, "counters": counters.snapshot()},
    )
    return 0 if kept and cc.drained else 1
