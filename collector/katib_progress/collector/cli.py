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
from katib_progress.core.errors import KatibProgressError
from katib_progress.core.listen import check_listen_address
from katib_progress.core.pruning import PruningBackend

_log = logging.getLogger(__name__)
DB_SERVE_ADDRESS = "127.0.0.1:6790"


def register(subparsers: Any, *, pruning: Callable[[], PruningBackend]) -> None:
    """Add ``db serve`` and ``collector run``; ``pruning()`` gives what ``collector run`` forwards
    progress to and validates Experiments' pruning settings with."""
    db = subparsers.add_parser("db", help="embedded Katib observation store")
    db_sub = db.add_subparsers(dest="db_command", metavar="SUBCOMMAND")
    serve = db_sub.add_parser(
        "serve", help="serve Katib's DBManager gRPC API from an SQLite file (grpc.health.v1 included)"
    )
    # 6790, not Katib's 6789: `suggestion serve` keeps 6789 (Katib dials its suggestion pods there),
    # so both run side by side on one machine with their defaults
    serve.add_argument(
        "--address",
        default=DB_SERVE_ADDRESS,
        help=f"HOST:PORT to bind (default {DB_SERVE_ADDRESS}; port 0 = any free)",
    )
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
    import sqlite3

    from katib_progress.collector.store import start_store_server

    check_listen_address(args.address)
    try:
        server = start_store_server(args.db, args.address)
    except (OSError, ValueError, sqlite3.Error) as exc:
        raise KatibProgressError(f"cannot start the observation store on {args.db}: {exc}") from None
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
