"""``katib-progress suggestion serve``."""

from __future__ import annotations

import argparse
import logging

from katib_progress.core.listen import check_listen_address

_log = logging.getLogger(__name__)
_GRACE_S = 5.0
#: Katib dials its suggestion pods on 6789 (the Service it creates), so this default stays; `db serve`
#: defaults to 6790 so both run side by side.
SUGGESTION_ADDRESS = "0.0.0.0:6789"


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser("suggestion", help="Optuna-backed Katib suggestion service")
    sub = parser.add_subparsers(dest="suggestion_command", metavar="COMMAND", required=True)
    serve = sub.add_parser("serve", help="serve Katib's Suggestion API and the Pruning API (curves)")
    serve.add_argument(
        "--address",
        action="append",
        default=None,
        help=f"host:port to listen on; repeat for several (default {SUGGESTION_ADDRESS})",
    )
    serve.add_argument(
        "--storage",
        default=None,
        help="Optuna storage URL, e.g. sqlite:///studies.db (default: in memory)",
    )
    serve.add_argument(
        "--early-stopping",
        action="store_true",
        help="also serve Katib's EarlyStopping API from this process (one-process use; on a cluster "
        "the early-stopping container serves it on 6788: `katib-progress early-stopping serve`)",
    )
    serve.set_defaults(func=serve_command)


def serve_command(args: argparse.Namespace) -> int:
    addresses = args.address or [SUGGESTION_ADDRESS]
    for address in addresses:
        check_listen_address(address)
    # Imported here: Optuna, scipy and Katib's client cost about a second, which `--help` should not pay.
    from katib_progress.suggestion.server import create_server

    server = create_server(addresses, storage=args.storage, early_stopping=args.early_stopping)
    _settle()
    server.serve_until_signalled(_GRACE_S)
    _log.info("suggestion service stopped")
    return 0


def _settle() -> None:
    """Before serving: import what a sampler would import in its first call (``cmaes`` pulls in
    SciPy, 0.7 s), then take every object made so far out of the garbage collector's generations
    (``gc.freeze``). Otherwise the first full collection walks all the objects the imports made,
    which took 140-320 ms inside one GetSuggestions call on a loaded 2-core machine."""
    import gc

    import cmaes  # noqa: F401

    gc.freeze()
