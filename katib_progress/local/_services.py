"""The real services a local sweep talks to over loopback gRPC: the embedded Katib DB manager
(SQLite), the suggestion service (Katib Suggestion API + pruning service), and their clients."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from katib_progress.collector.katib.dbmanager import DBManagerSink
from katib_progress.collector.store import start_store_server
from katib_progress.core.errors import ConfigError, KatibProgressError
from katib_progress.core.types import Decision, ProgressPoint
from katib_progress.local.experiment import LocalExperiment
from katib_progress.local.summary import STORE_FILE

_log = logging.getLogger(__name__)

_FINAL_STATES = {
    "Succeeded": "complete",
    "EarlyStopped": "pruned",
    "Failed": "failed",
    "MetricsUnavailable": "failed",
    "Killed": "failed",
}


@contextmanager
def suggestion_service(address: str | None) -> Iterator[str]:
    """The suggestion service's address: ``address``, or an embedded service started here (no files)."""
    if address is not None:
        yield address
        return
    from katib_progress.suggestion.server import create_server

    server = create_server(["127.0.0.1:0"])
    server.start()
    try:
        yield server.bound_addresses[0]
    finally:
        server.stop(1.0)


@dataclass
class Store:
    """The embedded Katib DB manager over the work directory's SQLite file, and the sink writing to it."""

    server: Any
    sink: DBManagerSink
    address: str


@contextmanager
def store_service(workdir: Path) -> Iterator[Store]:
    server = start_store_server(str(workdir / STORE_FILE), address="127.0.0.1:0")
    sink = DBManagerSink(server.address)
    _log.info("observation store at %s", server.address)
    try:
        yield Store(server, sink, server.address)
    finally:
        sink.flush(10.0)
        sink.close()
        server.stop(1.0)


class Pruner:
    """Asks the pruning service (over gRPC) about each progress point, with the experiment's config."""

    def __init__(self, exp: LocalExperiment, address: str) -> None:
        from katib_progress.suggestion.pruning import PruningConfig
        from katib_progress.suggestion.pruning.client import PruningClient

        spec = exp.doc.spec
        settings = exp.pruning_settings()
        assert settings is not None
        metric = spec.objective.objective_metric_name
        # the objective's metricStrategies entry reaches the engine; a metric_strategy setting overrides it
        self.config = PruningConfig.from_settings(
            metric, spec.objective.type, settings, objective_strategy=exp.strategies()[metric]
        )
        self._client = PruningClient(address)
        self._experiment = exp.name

    @classmethod
    def create(cls, exp: LocalExperiment, address: str) -> Pruner:
        """A pruner for ``exp``; a bad setting raises ConfigError naming its Experiment path."""
        try:
            return cls(exp, address)
        except ConfigError as exc:
            early = exp.doc.spec.early_stopping
            names = [s.name for s in early.algorithm_settings] if early else []
            where = "spec.earlyStopping.algorithmSettings"
            if exc.field in names:
                where += f"[{names.index(exc.field)}]"
            raise ConfigError(where, f"{exc.field}: {exc.detail}") from None

    def decide(self, point: ProgressPoint) -> Decision:
        decision: Decision = self._client.decide(point, self.config)
        return decision

    def replay(self, trial: str, points: list[ProgressPoint], status: str) -> None:
        """A finished trial's stored points, then its end: the service's history as if it never
        stopped (decisions on replayed points are ignored)."""
        for point in points:
            try:
                self._client.decide(point, self.config)
            except KatibProgressError as exc:
                _log.warning(
                    "replay of %s (seq %d) to the pruning service failed: %s", point.trial, point.seq, exc
                )
                return
        self.finish(trial, status)

    def finish(self, trial: str, status: str) -> None:
        """Tell the pruning service how a trial ended (comparative policies count completed trials)."""
        state = _FINAL_STATES.get(status)
        if state is None:
            return
        try:
            self._client.report_final(self._experiment, trial, state)
        except KatibProgressError as exc:
            _log.warning("could not report the end of trial %s to the pruning service: %s", trial, exc)

    def close(self) -> None:
        self._client.close()
