"""Our gRPC servers: the suggestion process and the early-stopping process.

Katib runs the suggestion container (Suggestion API on 6789, gRPC probes) and the early-stopping
container (EarlyStopping API on 6788, no probes) in ONE pod sharing one network namespace
(pkg/controller.v1beta1/suggestion/composer/composer.go ``desiredContainers``), each from its own
image; either may be Katib's stock one. So each of our images binds only its own port:

- ``create_server`` (suggestion image, ``katib-progress suggestion serve``, 6789): Katib
  ``Suggestion``, grpc.health.v1 and our ``Pruning`` API (the collector feeds it curves with
  ``policy=nop`` so the sampler can use them). ``early_stopping=True`` adds Katib's
  ``EarlyStopping`` API to the same server: the one-process layout of the local sweep and the bench;
- ``create_early_stopping_server`` (early-stopping image, ``katib-progress early-stopping serve``,
  6788): Katib ``EarlyStopping``, our ``Pruning`` API (the collector's live points and trial ends)
  and grpc.health.v1, over one pruning hub.
"""

from __future__ import annotations

import logging
import signal
import threading
from collections.abc import Sequence
from concurrent import futures
from types import FrameType

import grpc
from grpc_health.v1 import health, health_pb2, health_pb2_grpc
from kubeflow.katib import katib_api_pb2_grpc as pb_grpc

from katib_progress.suggestion._registry import StudyRegistry
from katib_progress.suggestion.katib import early_stopping as early_stopping_api
from katib_progress.suggestion.katib.early_stopping import TrialStopped
from katib_progress.suggestion.katib.servicer import HEALTH_SERVICE_NAME, SERVICE_NAME, SuggestionServicer
from katib_progress.suggestion.pruning.service import HistoryLoader, PruningHub

_log = logging.getLogger(__name__)


class SuggestionServer:
    def __init__(
        self,
        addresses: Sequence[str],
        *,
        storage: str | None = None,
        max_workers: int = 16,
        suggestion: bool = True,
        early_stopping: bool = True,
        on_trial_stopped: TrialStopped | None = None,
        history: HistoryLoader | None = None,
    ) -> None:
        if not addresses:
            raise ValueError("addresses: at least one address is needed")
        pool = futures.ThreadPoolExecutor(max_workers=max_workers, thread_name_prefix="suggestion")
        self._server = grpc.server(pool)
        self.hub = PruningHub(history)
        names = [""]
        self.registry: StudyRegistry | None = None
        if suggestion:
            self.registry = StudyRegistry(storage, curve_source=self.hub)
            pb_grpc.add_SuggestionServicer_to_server(SuggestionServicer(self.registry), self._server)
            names += [SERVICE_NAME, HEALTH_SERVICE_NAME]
        names.extend(self.hub.register(self._server))
        if early_stopping:
            names.extend(early_stopping_api.add_to_server(self.hub, self._server, on_trial_stopped))
        self._health = health.HealthServicer()
        health_pb2_grpc.add_HealthServicer_to_server(self._health, self._server)
        self._health_names = names
        self.bound_addresses: list[str] = []
        for address in addresses:
            port = self._server.add_insecure_port(address)
            if port == 0:
                raise ValueError(f"address {address!r}: could not bind")
            host = address.rsplit(":", 1)[0]
            self.bound_addresses.append(f"{host}:{port}")

    def start(self) -> None:
        self._server.start()
        for name in self._health_names:
            self._health.set(name, health_pb2.HealthCheckResponse.SERVING)
        _log.info(
            "serving %s; listening on %s",
            ", ".join(n for n in self._health_names if n),
            ", ".join(self.bound_addresses),
        )

    def stop(self, grace: float | None = None) -> None:
        self._health.enter_graceful_shutdown()
        self._server.stop(grace).wait()

    def wait(self, timeout: float | None = None) -> bool:
        return bool(self._server.wait_for_termination(timeout))

    def serve_until_signalled(self, grace: float) -> None:
        """Start, serve until SIGTERM or SIGINT (main thread), stop within ``grace`` seconds."""
        stopping = threading.Event()

        def on_signal(signum: int, _frame: FrameType | None) -> None:
            _log.info("signal %d: shutting down", signum)
            stopping.set()

        previous = {sig: signal.signal(sig, on_signal) for sig in (signal.SIGTERM, signal.SIGINT)}
        self.start()
        try:
            stopping.wait()
        finally:
            self.stop(grace)
            for sig, handler in previous.items():
                signal.signal(sig, handler)


def create_server(
    addresses: Sequence[str], *, storage: str | None = None, early_stopping: bool = True
) -> SuggestionServer:
    """A suggestion server for ``addresses`` ("host:port"; port 0 picks a free one, see
    ``bound_addresses``).

    ``storage`` is an Optuna storage URL (e.g. ``sqlite:///studies.db``); None keeps studies in
    memory (they are rebuilt from Katib's requests after a restart). ``early_stopping=False`` leaves
    Katib's EarlyStopping API to the early-stopping container (the cluster layout).
    """
    return SuggestionServer(addresses, storage=storage, early_stopping=early_stopping)


def create_early_stopping_server(
    addresses: Sequence[str],
    *,
    on_trial_stopped: TrialStopped | None = None,
    history: HistoryLoader | None = None,
) -> SuggestionServer:
    """The early-stopping container's server: Katib EarlyStopping + our Pruning API + health.

    ``on_trial_stopped(experiment, trial)`` runs when Katib's SetTrialStatus names a trial (the
    app layer marks the Trial EarlyStopped, as Katib's medianstop does). ``history(experiment)``
    gives the hub an experiment's stored points and trial ends the first time it meets the
    experiment, so a restarted process rebuilds its engines (the app layer reads them from the
    Trials and Katib's DB manager: katib_progress.earlystopping_history)."""
    return SuggestionServer(addresses, suggestion=False, on_trial_stopped=on_trial_stopped, history=history)
