"""``katib-progress db serve`` and ``katib-progress collector run``."""

from __future__ import annotations

import argparse
import logging
import signal
import threading
from collections.abc import Callable
from types import FrameType
from typing import Any

from katib_progress.collector import cluster_cli
from katib_progress.core.pruning import PruningBackend

_log = logging.getLogger(__name__)


def register(subparsers: Any, *, pruning: Callable[[], PruningBackend]) -> None:
    """Add ``db serve`` and ``collector run``; ``pruning()`` gives what ``collector run`` forwards
    progress to and validates Experiments' pruning settings with."""
    db = subparsers.add_parser("db", help="embedded Katib observation store")
    db_sub = db.add_subparsers(dest="db_command", metavar="SUBCOMMAND")
    serve = db_sub.add_parser(
        "serve", help="serve Katib's DBManager gRPC API from an SQLite file (grpc.health.v1 included)"
    )
    serve.add_argument("--address", default="127.0.0.1:6789", help="HOST:PORT to bind (port 0 = any free)")
    serve.add_argument("--db", required=True, metavar="FILE", help="SQLite file (created if missing)")
    serve.add_argument("--grace", type=float, default=5.0, help="seconds in-flight calls get on SIGTERM")
    serve.set_defaults(func=_db_serve)
    db.set_defaults(func=lambda args: _usage(db))

    col = subparsers.add_parser("collector", help="TrainJob trainerStatus -> Katib observation logs")
    col_sub = col.add_subparsers(dest="collector_command", metavar="SUBCOMMAND")
    run = col_sub.add_parser("run", help="watch TrainJobs and write their progress to Katib's DB manager")
    run.add_argument("--kubeconfig", metavar="FILE", help="kubeconfig file (default: in-cluster config)")
    run.add_argument(
        "--namespace",
        action="append",
        default=None,
        metavar="NS",
        help="namespace to watch (repeatable; default: all namespaces)",
    )
    run.add_argument("--db-manager", required=True, metavar="HOST:PORT", help="Katib DB manager address")
    run.add_argument(
        "--max-buffered-rows", type=int, default=100_000, help="rows held while the DB manager is down"
    )
    run.add_argument("--rpc-timeout", type=float, default=5.0, help="seconds per DB manager call")
    run.add_argument(
        "--db-manager-lock-wait",
        type=float,
        default=60.0,
        metavar="S",
        help="after an ambiguous write failure, wait this long before reading it back and resending "
        "(the DB manager's worst-case lock wait; skipped for a store that advertises idempotent writes)",
    )
    # Cluster flags (pruning, leader election, /metrics...): docs/cluster.md.
    cluster_cli.add_arguments(run)
    run.set_defaults(func=lambda args: cluster_cli.main(args, pruning=pruning()))
    col.set_defaults(func=lambda args: _usage(col))


def _usage(parser: argparse.ArgumentParser) -> int:
    parser.print_help()
    return 2


def _db_serve(args: argparse.Namespace) -> int:
    from katib_progress.collector.store import start_store_server

    try:
        server = start_store_server(args.db, args.address)
    except (OSError, ValueError) as exc:
        _log.error("cannot start the observation store: %s", exc)
        return 1
    done = threading.Event()

    def _on_signal(signum: int, frame: FrameType | None) -> None:
        _log.info("signal %d: stopping (grace %.1fs)", signum, args.grace)
        done.set()

    previous = {sig: signal.signal(sig, _on_signal) for sig in (signal.SIGTERM, signal.SIGINT)}
    try:
        _log.info("listening on %s", server.address)
        while not done.wait(1.0):
            pass
    finally:
        server.stop(args.grace)
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    return 0
