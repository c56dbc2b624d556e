"""The suggestion process: Katib ``Suggestion``, our ``Pruning`` service, Katib ``EarlyStopping`` and health.

Katib dials 6789 for ``Suggestion`` and 6788 for ``EarlyStopping``; one server listens on every
address given, so both are served from one process.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from concurrent import futures

import grpc
from grpc_health.v1 import health, health_pb2, health_pb2_grpc
from kubeflow.katib import katib_api_pb2_grpc as pb_grpc

from katib_progress.suggestion._registry import StudyRegistry
from katib_progress.suggestion.katib import early_stopping
from katib_progress.suggestion.katib.servicer import HEALTH_SERVICE_NAME, SERVICE_NAME, SuggestionServicer
from katib_progress.suggestion.pruning.service import PruningHub

_log = logging.getLogger(__name__)


class SuggestionServer:
    def __init__(
        self, addresses: Sequence[str], *, storage: str | None = None, max_workers: int = 16
    ) -> None:
        if not addresses:
            raise ValueError("addresses: at least one address is needed")
        pool = futures.ThreadPoolExecutor(max_workers=max_workers, thread_name_prefix="suggestion")
        self._server = grpc.server(pool)
        self.hub = PruningHub()
        self.registry = StudyRegistry(storage, curve_source=self.hub)
        pb_grpc.add_SuggestionServicer_to_server(SuggestionServicer(self.registry), self._server)
        names = [SERVICE_NAME, HEALTH_SERVICE_NAME, ""]
        names.extend(self.hub.register(self._server))
        names.extend(early_stopping.add_to_server(self.hub, self._server))
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
        _log.info("suggestion service listening on %s", ", ".join(self.bound_addresses))

    def stop(self, grace: float | None = None) -> None:
        self._health.enter_graceful_shutdown()
        self._server.stop(grace).wait()

    def wait(self, timeout: float | None = None) -> bool:
        return bool(self._server.wait_for_termination(timeout))


def create_server(addresses: Sequence[str], *, storage: str | None = None) -> SuggestionServer:
    """A server for ``addresses`` ("host:port"; port 0 picks a free one, see ``bound_addresses``).

    ``storage`` is an Optuna storage URL (e.g. ``sqlite:///studies.db``); None keeps studies in
    memory (they are rebuilt from Katib's requests after a restart).
    """
    return SuggestionServer(addresses, storage=storage)
