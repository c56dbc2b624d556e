"""Adapters from the project's pruning engine to the bench's ``Decider``, and the service under test.

- ``EngineDecider``: the library ``suggestion.pruning.engine.PruningEngine`` in process.
- ``GrpcDecider``: the pruning RPC of a running suggestion service (``suggestion.pruning.client``).
- ``ServiceUnderTest``: starts the real suggestion service (``suggestion.server.create_server``) on
  loopback, port 0, once per bench run; experiments are isolated by name.

The suggestion package is imported lazily: the bench still runs its own baselines when it is absent.
"""

from __future__ import annotations

import importlib
import logging
from collections.abc import Mapping
from typing import Any

from katib_progress.bench._deciders import Objective, TrialEnd
from katib_progress.core.types import Decision, ProgressPoint
from katib_progress.errors import ConfigError

_log = logging.getLogger(__name__)


def _optional(module: str) -> Any | None:
    try:
        return importlib.import_module(module)
    except ModuleNotFoundError as exc:
        if exc.name is None or not module.startswith(exc.name):
            raise
        return None


def engine_available() -> bool:
    return (
        _optional("suggestion.pruning.engine") is not None
        and _optional("suggestion.pruning.config") is not None
    )


def grpc_available() -> bool:
    return (
        _optional("suggestion.pruning.client") is not None
        and _optional("suggestion.pruning.service") is not None
        and _optional("suggestion.server") is not None
    )


def service_available() -> bool:
    return _optional("suggestion.server") is not None


def pruning_config(objective: Objective, policy: str, settings: Mapping[str, str] | None = None) -> Any:
    config_mod = _optional("suggestion.pruning.config")
    if config_mod is None:
        raise ConfigError(
            "policy", f"engine policy {policy!r} needs suggestion.pruning, which is not installed"
        )
    merged = {"policy": policy, **dict(settings or {})}
    return config_mod.PruningConfig.from_settings(objective.metric, objective.direction, merged)


class EngineDecider:
    """The pruning engine as a library, one engine per replay."""

    def __init__(
        self, name: str, objective: Objective, policy: str, settings: Mapping[str, str] | None = None
    ):
        engine_mod = _optional("suggestion.pruning.engine")
        if engine_mod is None:
            raise ConfigError("policy", f"{name}: suggestion.pruning.engine is not available")
        self.name = name
        self._engine = engine_mod.PruningEngine(pruning_config(objective, policy, settings))

    def start(self, trial: str) -> None:
        return None

    def decide(self, point: ProgressPoint) -> Decision:
        decision: Decision = self._engine.decide(point)
        return decision

    def finish(self, trial: str, state: TrialEnd, observation: float | None) -> None:
        self._engine.finish(trial, state)

    def close(self) -> None:
        return None


class GrpcDecider:
    """The pruning RPC of the running suggestion service: ``Decide`` per point, ``ReportFinal`` per
    trial end, ``Forget`` of the experiment when the replay is over."""

    def __init__(
        self,
        name: str,
        objective: Objective,
        policy: str,
        address: str,
        *,
        experiment: str,
        settings: Mapping[str, str] | None = None,
    ):
        client_mod = _optional("suggestion.pruning.client")
        if client_mod is None:
            raise ConfigError("policy", f"{name}: suggestion.pruning.client is not available")
        self.name = name
        self._experiment = experiment
        self._config = pruning_config(objective, policy, settings)
        self._client = client_mod.PruningClient(address)

    def start(self, trial: str) -> None:
        return None

    def decide(self, point: ProgressPoint) -> Decision:
        decision: Decision = self._client.decide(point, self._config)
        return decision

    def finish(self, trial: str, state: TrialEnd, observation: float | None) -> None:
        self._client.report_final(self._experiment, trial, state)

    def close(self) -> None:
        try:
            self._client.forget(self._experiment)
        finally:
            self._client.close()


class ServiceUnderTest:
    """The real suggestion service on 127.0.0.1 (port 0), for the lifetime of a ``with`` block."""

    def __init__(self) -> None:
        server_mod = _optional("suggestion.server")
        if server_mod is None:
            raise ConfigError("sampler", "suggestion.server is not available")
        self._server = server_mod.create_server(["127.0.0.1:0"])
        self.address = ""

    def __enter__(self) -> ServiceUnderTest:
        self._server.start()
        self.address = self._server.bound_addresses[0]
        _log.info("suggestion service under test at %s", self.address)
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.stop(None)
