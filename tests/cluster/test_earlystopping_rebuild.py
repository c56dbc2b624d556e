"""A restarted early-stopping process rebuilds its pruning engines from the cluster (issue 12).

Real peers: the Kubernetes API stand-in holds the experiment's Trials (conditions as Katib and our
enforcer write them), our embedded store serves Katib's DBManager API with the observation rows the
collector writes, and the early-stopping server gets points through the Pruning API over loopback.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import grpc
import pytest
from kubeflow.katib import katib_api_pb2 as _pb
from kubeflow.katib import katib_api_pb2_grpc as pb_grpc

from katib_progress.collector.katib.readback import StoredRowsReader
from katib_progress.collector.store import StoreServer, start_store_server
from katib_progress.core.types import ProgressPoint
from katib_progress.earlystopping_history import ClusterHistory, default_db_manager_address, trial_end
from katib_progress.suggestion.pruning import PruningEngine
from katib_progress.suggestion.pruning.client import PruningClient
from katib_progress.suggestion.pruning.config import PruningConfig
from katib_progress.suggestion.server import SuggestionServer, create_early_stopping_server
from tests.kubestandin import KubeStandin
from tests.kubestandin.objects import KATIB, Objects
from tests.suggestion.test_pruning_restore import Event, _feed, _rows, _sweep

pb: Any = _pb
_KATIB_END = {"succeeded": "Succeeded", "pruned": "EarlyStopped", "failed": "Failed"}


@pytest.fixture
def store(tmp_path: Path) -> Iterator[StoreServer]:
    server = start_store_server(tmp_path / "observations.sqlite")
    try:
        yield server
    finally:
        server.stop(0)


class Cluster:
    """What the collector and Katib leave behind while a sweep runs: rows in the DB manager,
    Trials with their end conditions."""

    def __init__(self, kube: KubeStandin, store: StoreServer, experiment: str) -> None:
        self.objects = Objects(kube.api_client())
        self.kube = kube
        self.store = store
        self.experiment = experiment
        self._trials: set[str] = set()

    def trial(self, name: str) -> None:
        if name not in self._trials:
            self.objects.trial(name, self.experiment)
            self._trials.add(name)

    def write(self, point: ProgressPoint) -> None:
        """The collector's rows for one snapshot (skipped, as in the hub test, when a metric is not
        finite: such a snapshot has no objective row to replay)."""
        if not all(math.isfinite(v) for v in point.metrics.values()):
            return
        log = pb.ObservationLog(
            metric_logs=[
                pb.MetricLog(time_stamp=stamp, metric=pb.Metric(name=name, value=value))
                for stamp, name, value in _rows(point)
            ]
        )
        with grpc.insecure_channel(self.store.address) as channel:
            pb_grpc.DBManagerStub(channel).ReportObservationLog(
                pb.ReportObservationLogRequest(trial_name=point.trial, observation_log=log), timeout=10
            )

    def end(self, trial: str, state: str) -> None:
        """Katib's (or our enforcer's) condition on the Trial: type, status "True"."""
        body = self.objects.api.get_namespaced_custom_object(*KATIB, "default", "trials", trial)
        conditions = [
            {"type": "Created", "status": "True", "reason": "TrialCreated"},
            {"type": _KATIB_END[state], "status": "True", "reason": "Test"},
        ]
        body["status"] = {**(body.get("status") or {}), "conditions": conditions}
        self.objects.api.replace_namespaced_custom_object_status(*KATIB, "default", "trials", trial, body)

    def history(self, db_manager: str | None = None) -> ClusterHistory:
        reader = StoredRowsReader(db_manager or self.store.address, rpc_timeout_s=5)
        return ClusterHistory(self.kube.api_client, "default", reader)


def _serve(history: ClusterHistory | None) -> SuggestionServer:
    server = create_early_stopping_server(["127.0.0.1:0"], history=history)
    server.start()
    return server


def _drive(
    address: str, config: PruningConfig, events: list[Event], cluster: Cluster
) -> list[tuple[str, int, bool, str]]:
    """Send ``events`` to the early-stopping server as the collector does: every point through the
    Pruning API (its rows stored first), every trial end through ReportFinal and onto the Trial."""
    out = []
    with PruningClient(address, timeout=10) as client:
        for kind, a, b in events:
            if kind == "point":
                cluster.trial(a.trial)
                cluster.write(a)
                decision = client.decide(a, config)
                out.append((a.trial, a.seq, decision.prune, decision.reason))
            else:
                client.report_final(cluster.experiment, a, b)
                cluster.end(a, b)
    return out


def test_a_restarted_process_decides_like_one_that_never_stopped(
    kube: KubeStandin, store: StoreServer
) -> None:
    config, events = _sweep("default")
    experiment = next(a.experiment for kind, a, _ in events if kind == "point")
    whole = _feed(PruningEngine(config), events)
    assert any(prune for *_, prune, _ in whole)
    cluster = Cluster(kube, store, experiment)
    # a trial of another experiment in the same namespace is not part of this one's history
    cluster.objects.trial("other-x", "other")
    cluster.end("other-x", "succeeded")
    half = len(events) // 2

    first = _serve(cluster.history())
    try:
        before = _drive(first.bound_addresses[0], config, events[:half], cluster)
    finally:
        first.stop(0)
    assert before == whole[: len(before)]
    # a trial our engine pruned is marked EarlyStopped on the cluster (the collector's enforcer)
    for trial, _, prune, _ in before:
        if (
            prune
            and trial_end(
                cluster.objects.api.get_namespaced_custom_object(*KATIB, "default", "trials", trial)
            )
            is None
        ):
            cluster.end(trial, "pruned")

    restarted = _serve(cluster.history())
    try:
        after = _drive(restarted.bound_addresses[0], config, events[half:], cluster)
        engine = restarted.hub.engine(experiment)
        assert engine is not None
        assert "other-x" not in engine.state.trials
    finally:
        restarted.stop(0)
    assert after == whole[len(before) :]
    # Without the stored history (the process before the loader) the decisions differ.
    assert _feed(PruningEngine(config), events[half:]) != after


def test_a_db_manager_outage_starts_the_engine_empty_with_a_warning(
    kube: KubeStandin, store: StoreServer, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    config, events = _sweep("default")
    experiment = next(a.experiment for kind, a, _ in events if kind == "point")
    cluster = Cluster(kube, store, experiment)
    half = len(events) // 2
    for kind, a, _ in events[:half]:
        if kind == "point":
            cluster.trial(a.trial)
            cluster.write(a)
    down = start_store_server(tmp_path / "down.sqlite")
    address = down.address
    down.stop(0)  # nothing listens there any more: the DB manager is down
    server = _serve(cluster.history(address))
    try:
        with caplog.at_level(logging.WARNING, logger="katib_progress.earlystopping_history"):
            later = _drive(server.bound_addresses[0], config, events[half:], cluster)
        engine = server.hub.engine(experiment)
        assert engine is not None
    finally:
        server.stop(0)
    # the service answered every point, from an empty engine, and said why
    assert later == _feed(PruningEngine(config), events[half:])
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert any(f"experiment {experiment}: pruning history not loaded" in w for w in warnings), warnings
    assert any("starting its engine empty" in w for w in warnings)


def test_a_kubernetes_api_outage_starts_the_engine_empty_with_a_warning(
    kube: KubeStandin, store: StoreServer, caplog: pytest.LogCaptureFixture
) -> None:
    cluster = Cluster(kube, store, "exp")
    cluster.trial("exp-a")
    api = kube.api_client(retries=0)
    history = ClusterHistory(lambda: api, "default", StoredRowsReader(store.address))
    kube.stop()  # nothing listens at the API server's address any more
    with caplog.at_level(logging.WARNING, logger="katib_progress.earlystopping_history"):
        assert history("exp") is None
    assert any("pruning history not loaded" in r.getMessage() for r in caplog.records)


def test_trial_ends_follow_katibs_true_conditions() -> None:
    def trial(*conditions: tuple[str, str]) -> dict[str, Any]:
        return {"status": {"conditions": [{"type": t, "status": s} for t, s in conditions]}}

    assert trial_end(trial(("Created", "True"), ("Running", "True"))) is None
    assert trial_end(trial(("Running", "False"), ("Succeeded", "True"))) == "complete"
    assert trial_end(trial(("Succeeded", "False"))) is None
    assert trial_end(trial(("EarlyStopped", "True"), ("Succeeded", "True"))) == "pruned"
    assert trial_end(trial(("Failed", "True"))) == "failed"
    assert trial_end(trial(("Killed", "True"))) == "failed"
    assert trial_end(trial(("MetricsUnavailable", "True"))) == "failed"
    assert trial_end({}) is None


def test_the_default_db_manager_is_katibs() -> None:
    assert default_db_manager_address({}) == "katib-db-manager.kubeflow:6789"
    assert default_db_manager_address({"KATIB_CORE_NAMESPACE": "katib"}) == "katib-db-manager.katib:6789"
    env = {
        "KATIB_DB_MANAGER_SERVICE_NAMESPACE": "db",
        "KATIB_DB_MANAGER_SERVICE_IP": "mgr",
        "KATIB_DB_MANAGER_SERVICE_PORT": "7000",
    }
    assert default_db_manager_address(env) == "mgr.db:7000"
