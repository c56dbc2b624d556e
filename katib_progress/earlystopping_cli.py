"""``katib-progress earlystopping serve``: the process of our early-stopping image.

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
"""

from __future__ import annotations

import argparse
import logging
import os
from pathlib import Path

_log = logging.getLogger(__name__)
_GRACE_S = 5.0
SA_NAMESPACE = Path("/var/run/secrets/kubernetes.io/serviceaccount/namespace")


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser("earlystopping", help="Katib EarlyStopping + live pruning service")
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
    serve.set_defaults(func=serve_command)


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
    # Imported here: kubernetes' config module is only needed out of a cluster.
    from kubernetes import config

    try:
        _contexts, current = config.list_kube_config_contexts()
        namespace = (current or {}).get("context", {}).get("namespace")
        return str(namespace) if namespace else "default"
    except (config.ConfigException, OSError):
        return "default"


def serve_command(args: argparse.Namespace) -> int:
    # Imported here: gRPC, Katib's protos and the Kubernetes client cost start-up time (`--help`).
    from katib_progress.collector.enforce import Enforcer
    from katib_progress.collector.kube import load_api_client
    from katib_progress.suggestion.server import create_early_stopping_server

    namespace = args.namespace or pod_namespace()
    enforcers: list[Enforcer] = []

    def on_trial_stopped(experiment: str, trial: str) -> None:
        # the Kubernetes client is built on first use: live pruning needs none, and a missing
        # configuration fails only SetTrialStatus (with the reason), never the whole service
        if not enforcers:
            enforcers.append(Enforcer(load_api_client(args.kubeconfig)))
        enforcers[0].mark_stopped(namespace, trial)

    server = create_early_stopping_server(args.address or ["0.0.0.0:6788"], on_trial_stopped=on_trial_stopped)
    _log.info("early stopping: Trials of namespace %s", namespace)
    server.serve_until_signalled(_GRACE_S)
    _log.info("early-stopping service stopped")
    return 0
