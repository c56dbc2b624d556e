"""Adapters from the project's pruning engine to the bench's ``Decider``, and the service under test.

- ``EngineDecider``: the library ``katib_progress.suggestion.pruning.engine.PruningEngine`` in process.
- ``GrpcDecider``: the pruning RPC of a running suggestion service
  (``katib_progress.suggestion.pruning.client``).
- ``ServiceUnderTest``: starts the real suggestion service
  (``katib_progress.suggestion.server.create_server``) on loopback, port 0, once per bench run;
  experiments are isolated by name.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping

from katib_progress.bench._deciders import Objective, TrialEnd
from katib_progress.core.types import Decision, ProgressPoint
from katib_progress.suggestion.pruning.client import PruningClient
from katib_progress.suggestion.pruning.config import PruningConfig
from katib_progress.suggestion.pruning.engine import PruningEngine
from katib_progress.suggestion.server import create_server

_log = logging.getLogger(__name__)


def pruning_config(
    objective: Objective, policy: str, settings: Mapping[str, str] | None = None
) -> PruningConfig:
    """Raises ConfigError naming the bad setting."""
    merged = {"policy": policy, **dict(settings or {})}
    if objective.strategy is not None:
        merged.setdefault("metric_strategy", objective.strategy)
    return PruningConfig.from_settings(objective.metric, objective.direction, merged)


class EngineDecider:
    """The pruning engine as a library, one engine per replay."""

    def __init__(
        self, name: str, objective: Objective, policy: str, settings: Mapping[str, str] | None = None
    ):
        self.name = name
        self._engine = PruningEngine(pruning_config(objective, policy, settings))

    def start(self, trial: str) -> None:
        return None

    def decide(self, point: ProgressPoint) -> Decision:
        return self._engine.decide(point)

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
        self.name = name
        self._experiment = experiment
        self._config = pruning_config(objective, policy, settings)
        self._client = PruningClient(address)

    def start(self, trial: str) -> None:
        return None

    def decide(self, point: ProgressPoint) -> Decision:
        return self._client.decide(point, self._config)

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
        self._server = create_server(["127.0.0.1:0"])
        self.address = ""

    def __enter__(self) -> ServiceUnderTest:
        self._server.start()
        self.address = self._server.bound_addresses[0]
        _log.info("suggestion service under test at %s", self.address)
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.stop(None)
