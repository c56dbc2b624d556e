"""The real services a local sweep talks to over loopback gRPC: the embedded Katib DB manager
(SQLite), the suggestion service (Katib Suggestion API + pruning service), and their clients."""

from __future__ import annotations

import logging
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


@dataclass
class Services:
    store: Any
    sink: DBManagerSink
    store_address: str
    suggestion: Any | None
    suggestion_address: str

    def stop(self) -> None:
        self.sink.flush(10.0)
        self.sink.close()
        if self.suggestion is not None:
            self.suggestion.stop(1.0)
        self.store.stop(1.0)


def start_services(workdir: Path, suggestion_address: str | None = None) -> Services:
    """Start the store and (unless an address is given) an embedded suggestion service."""
    store = start_store_server(str(workdir / STORE_FILE), address="127.0.0.1:0")
    sink = DBManagerSink(store.address)
    server = None
    if suggestion_address is None:
        from katib_progress.suggestion.server import create_server

        server = create_server(["127.0.0.1:0"])
        server.start()
        suggestion_address = server.bound_addresses[0]
    _log.info("store at %s, suggestion service at %s", store.address, suggestion_address)
    return Services(store, sink, store.address, server, suggestion_address)


class Pruner:
    """Asks the pruning service (over gRPC) about each progress point, with the experiment's config."""

    def __init__(self, exp: LocalExperiment, address: str) -> None:
        from katib_progress.suggestion.pruning import PruningConfig
        from katib_progress.suggestion.pruning.client import PruningClient

        spec = exp.doc.spec
        settings = exp.pruning_settings()
        assert settings is not None
        self.config = PruningConfig.from_settings(
            spec.objective.objective_metric_name, spec.objective.type, settings
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
