"""``katib-progress early-stopping serve``: the process of our early-stopping image.

Katib adds the early-stopping container to the suggestion pod with only its image, pull policy and
resources from katib-config: no command, args or env (suggestion/composer/composer.go
``desiredContainers``), so the image's CMD carries everything and the defaults below are the
cluster's. The process serves, on 6788, Katib's ``EarlyStopping`` API and our ``Pruning`` API over
one pruning hub (katib_progress.suggestion.server.create_early_stopping_server).

``SetTrialStatus`` marks the named Trial EarlyStopped the way Katib's medianstop does
(pkg/earlystopping/v1beta1/medianstop/service.py): the Trial is looked up in the pod's own namespace
(``/var/run/secrets/kubernetes.io/serviceaccount/namespace``; medianstop assumes Trial namespace =
Suggestion namespace) with the pod's ServiceAccount. Katib runs a suggestion pod whose Experiment
has early stopping under the ServiceAccount ``<experiment>-<algorithm>`` and grants it every verb
on ``trials`` and ``trials/status`` in that namespace (composer.go ``DesiredDeployment`` /
``DesiredRBAC``), unless katib-config names a ``serviceAccountName`` for the suggestion, in which
case that account needs the same Role. Out of a cluster (tests, a laptop): ``$POD_NAMESPACE``, else
the kubeconfig's current-context namespace, else ``default``.

After a restart the hub rebuilds each experiment's engine the first time it meets the experiment,
from the experiment's Trials in that namespace and their rows in Katib's DB manager (``--db-manager``,
default Katib's address); a failure to read them leaves the engine empty with a warning
(katib_progress.earlystopping_history).
"""

from __future__ import annotations

import argparse
import logging
import os
from pathlib import Path
from typing import TYPE_CHECKING

from katib_progress import clikit
from katib_progress.core.listen import check_listen_address

if TYPE_CHECKING:
    from kubernetes.client import ApiClient

_log = logging.getLogger(__name__)
_GRACE_S = 5.0
SA_NAMESPACE = Path("/var/run/secrets/kubernetes.io/serviceaccount/namespace")


def register(subparsers: argparse._SubParsersAction) -> None:
    _register(subparsers, "early-stopping", deprecated=False)
    # the old spelling (the early-stopping image's CMD used it): accepted, hidden from --help, warns
    _register(subparsers, "earlystopping", deprecated=True)


def _register(subparsers: argparse._SubParsersAction, name: str, *, deprecated: bool) -> None:
    # a subcommand added without help= is left out of `katib-progress --help`
    if deprecated:
        parser = subparsers.add_parser(name)
    else:
        parser = subparsers.add_parser(name, help="Katib EarlyStopping + live pruning service")
    sub = parser.add_subparsers(dest="earlystopping_command", metavar="COMMAND", required=True)
    serve = sub.add_parser("serve", help="serve Katib's EarlyStopping API and the Pruning API")
    serve.add_argument(
        "--address",
        action="append",
        default=None,
        help="host:port to listen on; repeat for several (default 0.0.0.0:6788)",
    )
    serve.add_argument(
        "--kubeconfig", default=None, help="kubeconfig (default: in-cluster, then $KUBECONFIG)"
    )
    serve.add_argument("--namespace", default=None, help="the Trials' namespace (default: the pod's own)")
    serve.add_argument(
        "--db-manager",
        default=None,
        metavar="HOST:PORT",
        help="Katib's DB manager, read to rebuild pruning after a restart "
        "(default: Katib's, katib-db-manager.kubeflow:6789 or its KATIB_DB_MANAGER_SERVICE_* env)",
    )
    func = clikit.deprecated_command(serve_command, f"`{name} serve`", "`early-stopping serve`")
    serve.set_defaults(func=func if deprecated else serve_command)


def pod_namespace(sa_file: Path = SA_NAMESPACE) -> str:
    """The namespace SetTrialStatus looks Trials up in (see the module docstring)."""
    try:
        text = sa_file.read_text().strip()
        if text:
            return text
    except OSError:
        pass
    if os.environ.get("POD_NAMESPACE"):
        return os.environ["POD_NAMESPACE"]
    # Imported here: the Kubernetes client is only needed out of a cluster (and costs start-up time).
    from katib_progress.collector.kube import context_namespace

    return context_namespace()


def serve_command(args: argparse.Namespace) -> int:
    # Imported here: gRPC, Katib's protos and the Kubernetes client cost start-up time (`--help`).
    from katib_progress.collector.enforce import Enforcer
    from katib_progress.collector.katib.readback import StoredRowsReader
    from katib_progress.collector.kube import load_api_client
    from katib_progress.earlystopping_history import ClusterHistory, default_db_manager_address
    from katib_progress.suggestion.server import create_early_stopping_server

    addresses = args.address or ["0.0.0.0:6788"]
    for address in addresses:
        check_listen_address(address)
    namespace = args.namespace or pod_namespace()
    api_clients: list[ApiClient] = []
    enforcers: list[Enforcer] = []

    def api_client() -> ApiClient:
        # the Kubernetes client is built on first use: live pruning needs none, and a missing
        # configuration fails only SetTrialStatus (with the reason) or empties a rebuilt engine
        # (with a warning), never the whole service
        if not api_clients:
            api_clients.append(load_api_client(args.kubeconfig))
        return api_clients[0]

    def on_trial_stopped(experiment: str, trial: str) -> None:
        if not enforcers:
            enforcers.append(Enforcer(api_client()))
        enforcers[0].mark_stopped(namespace, trial)

    db_manager = args.db_manager or default_db_manager_address()
    history = ClusterHistory(api_client, namespace, StoredRowsReader(db_manager))
    server = create_early_stopping_server(addresses, on_trial_stopped=on_trial_stopped, history=history)
    _log.info(
        "early stopping: Trials of namespace %s, pruning history from DB manager %s", namespace, db_manager
    )
    server.serve_until_signalled(_GRACE_S)
    _log.info("early-stopping service stopped")
    return 0
