"""Shared pieces of the cluster tests: a running stack (API stand-in, observation store, suggestion
service with the pruning hub), a collector factory, and a stand-in of Katib's trial-controller rule."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

import grpc
from kubeflow.katib import katib_api_pb2 as _pb
from kubeflow.katib import katib_api_pb2_grpc as _pb_grpc
from kubernetes import client

from katib_progress.collector.backoff import BackoffSettings
from katib_progress.collector.cluster import ClusterCollector, ClusterOptions
from katib_progress.collector.controller import CollectorSettings
from katib_progress.collector.counters import Counters
from katib_progress.collector.forwarder import ForwarderSettings
from katib_progress.collector.katib.dbmanager import DBManagerSettings, DBManagerSink
from katib_progress.collector.katib.readback import StoredRowsReader
from katib_progress.collector.kube import WatchSettings
from katib_progress.collector.leader import LeaderSettings
from katib_progress.collector.rows import SEQ_METRIC
from katib_progress.collector.store import StoreServer
from katib_progress.suggestion.pruning.backend import BACKEND
from tests.kubestandin import KubeStandin
from tests.kubestandin._server import ServerOptions, StandinHTTPServer
from tests.kubestandin.objects import KATIB, TRAINER, Objects, trainer_status
from tests.kubestandin.waiting import wait_until
from tests.test_examples_gjson import FAILURE_CONDITION, SUCCESS_CONDITION, katib_condition_met

pb: Any = _pb
pb_grpc: Any = _pb_grpc

NS = "team-a"
EXPERIMENT = "exp"
LEASE_NS = "katib-progress"
BASE = datetime(2026, 1, 5, 12, 0, 0, tzinfo=UTC)


def experiment_body(
    name: str = EXPERIMENT,
    *,
    algorithm: str = "kp-tpe",
    settings: Mapping[str, str] | None = None,
    early_stopping: str | None = "katib-progress",
) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "objective": {"type": "minimize", "objectiveMetricName": "loss"},
        "algorithm": {"algorithmName": algorithm},
        "metricsCollectorSpec": {"collector": {"kind": "Push"}},
        "trialTemplate": {"successCondition": SUCCESS_CONDITION, "failureCondition": FAILURE_CONDITION},
    }
    if early_stopping:
        spec["earlyStopping"] = {
            "algorithmName": early_stopping,
            "algorithmSettings": [{"name": k, "value": v} for k, v in (settings or {}).items()],
        }
    return {
        "apiVersion": "kubeflow.org/v1beta1",
        "kind": "Experiment",
        "metadata": {"name": name, "namespace": NS},
        "spec": spec,
    }


class TestFront:
    """A second HTTP front-end on the stand-in's store for the test's own calls, so that
    ``kube.requests`` logs the collector's requests only (RBAC drift test)."""

    def __init__(self, kube: KubeStandin) -> None:
        self._server = StandinHTTPServer(kube.store, ServerOptions(bookmark_interval=0.2))
        self._thread = threading.Thread(target=self._server.serve_forever, args=(0.05,), daemon=True)
        self._thread.start()

    def api_client(self) -> client.ApiClient:
        host, port = self._server.server_address[:2]
        config = client.Configuration()
        config.host = f"http://{host!s}:{port}"
        return client.ApiClient(config)

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(5)


@dataclass
class Stack:
    kube: KubeStandin
    store: StoreServer
    pruning_address: str  # the early-stopping container (Katib's port 6788)
    front: TestFront
    suggestion_address: str = ""  # the suggestion container (Katib's port 6789)
    objects: Objects = field(init=False)
    api: client.CustomObjectsApi = field(init=False)

    def __post_init__(self) -> None:
        self.objects = Objects(self.front.api_client())
        self.api = self.objects.api

    def experiment(self, **kwargs: Any) -> dict[str, Any]:
        return self.api.create_namespaced_custom_object(*KATIB, NS, "experiments", experiment_body(**kwargs))

    def trial_job(self, name: str) -> dict[str, Any]:
        return self.objects.trial_job(name, EXPERIMENT, namespace=NS)

    def report(self, name: str, i: int, **metrics: str) -> None:
        self.objects.set_status(
            name,
            trainer_status(BASE + timedelta(seconds=i), progress=min(100, i * 5), metrics=metrics),
            namespace=NS,
        )

    def complete(self, name: str) -> None:
        current = self.api.get_namespaced_custom_object(*TRAINER, NS, "trainjobs", name)
        status = dict(current.get("status") or {})
        status["conditions"] = [
            {
                "type": "Complete",
                "status": "True",
                "reason": "JobsCompleted",
                "message": "done",
                "lastTransitionTime": "2026-01-05T13:00:00Z",
            }
        ]
        self.api.replace_namespaced_custom_object_status(
            *TRAINER, NS, "trainjobs", name, {**current, "status": status}
        )

    def trainjob(self, name: str) -> dict[str, Any]:
        return self.api.get_namespaced_custom_object(*TRAINER, NS, "trainjobs", name)

    def trial(self, name: str) -> dict[str, Any]:
        return self.api.get_namespaced_custom_object(*KATIB, NS, "trials", name)

    def rows(self, trial: str, metric: str = "") -> list[tuple[str, str, str]]:
        with grpc.insecure_channel(self.store.address) as channel:
            reply = pb_grpc.DBManagerStub(channel).GetObservationLog(
                pb.GetObservationLogRequest(trial_name=trial, metric_name=metric), timeout=5
            )
        return [(m.metric.name, m.metric.value, m.time_stamp) for m in reply.observation_log.metric_logs]

    def seqs(self, trial: str) -> list[int]:
        return [int(v) for _, v, _ in self.rows(trial, SEQ_METRIC)]

    def events(self) -> list[dict[str, Any]]:
        response = client.EventsV1Api(self.front.api_client()).list_namespaced_event(
            NS, _preload_content=False
        )
        return list(json.loads(response.data)["items"])

    def collector(
        self,
        *,
        identity: str = "c-0",
        leader: bool = False,
        counters: Counters | None = None,
        watchdog: bool = False,
        pruning_address: str | None = None,
        pruning_timeout_s: float = 2.0,
        db_settings: DBManagerSettings | None = None,
    ) -> ClusterCollector:
        fast = BackoffSettings(initial_s=0.05, max_s=0.5)
        options = ClusterOptions(
            collector=CollectorSettings(
                watch=WatchSettings(watch_timeout_s=5, request_timeout_s=5, backoff=fast),
                retry_interval_s=0.1,
                flush_timeout_s=5,
            ),
            forwarder=ForwarderSettings(
                address_template=pruning_address or self.pruning_address,
                suggestion_address_template=self.suggestion_address or "unused.invalid:1",
                timeout_s=pruning_timeout_s,
                enforce_backoff=BackoffSettings(initial_s=0.05, max_s=0.5),
            ),
            leader=LeaderSettings(
                namespace=LEASE_NS,
                identity=identity,
                lease_duration_s=1.5,
                renew_deadline_s=1.0,
                retry_period_s=0.1,
            )
            if leader
            else None,
            identity=identity,
            experiment_ttl_s=0.5,
            final_poll=BackoffSettings(initial_s=0.05, max_s=0.5),
            final_interval_s=0.05,
            watchdog=watchdog,
            watchdog_interval_s=0.1,
            flush_timeout_s=5,
        )
        db = db_settings or DBManagerSettings(
            backoff=BackoffSettings(initial_s=0.05, max_s=0.3), close_timeout_s=5
        )
        return ClusterCollector(
            options,
            self.kube.api_client(),
            sink_factory=lambda: DBManagerSink(self.store.address, settings=db, counters=counters),
            reader=StoredRowsReader(self.store.address, rpc_timeout_s=db.rpc_timeout_s),
            pruning=BACKEND,
            counters=counters,
        )


@contextmanager
def running_collector(cc: ClusterCollector) -> Iterator[threading.Thread]:
    thread = threading.Thread(target=cc.run, name="cluster-collector", daemon=True)
    thread.start()
    try:
        yield thread
    finally:
        cc.stop()
        thread.join(20)
        assert not thread.is_alive(), "collector did not stop"


class KatibTrialRule:
    """Katib's trial controller, reduced to the rule that matters here: the moment the TrainJob meets
    the successCondition (gjson over the whole object), read the observation log ONCE; objective
    missing -> MetricsUnavailable (Succeeded=False), else Succeeded with the latest value."""

    def __init__(self, stack: Stack, *, objective: str = "loss") -> None:
        self.stack = stack
        self.objective = objective
        self.reads: dict[str, int] = {}
        self.outcome: dict[str, tuple[str, str | None]] = {}

    def reconcile(self, trial: str) -> tuple[str, str | None] | None:
        if trial in self.outcome:
            return self.outcome[trial]
        job = self.stack.trainjob(trial)
        if katib_condition_met(job, FAILURE_CONDITION):
            self.outcome[trial] = ("Failed", None)
        elif katib_condition_met(job, SUCCESS_CONDITION):
            self.reads[trial] = self.reads.get(trial, 0) + 1
            rows = self.stack.rows(trial, self.objective)
            latest = max(
                rows, key=lambda r: datetime.fromisoformat(r[2].replace("Z", "+00:00")), default=None
            )
            self.outcome[trial] = ("Succeeded", latest[1]) if latest else ("MetricsUnavailable", None)
        return self.outcome.get(trial)


def wait_leader(cc: ClusterCollector, timeout: float = 10.0) -> None:
    """Wait until ``cc`` leads and its watcher has listed (snapshots from then on are all seen)."""

    def synced() -> bool:
        term = cc.term
        return term is not None and term.collector.has_synced()

    wait_until(synced, timeout=timeout)
