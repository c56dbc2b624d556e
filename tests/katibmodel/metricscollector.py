"""Katib's file metrics collector sidecar for ``StdOut``/``File`` collectors, as far as early stopping
needs it (cmd/metricscollector/v1beta1/file-metricscollector/main.go).

The pod webhook injects it into the trial's primary pod for those kinds with ``-stop-rule`` from the
Trial's ``spec.earlyStoppingRules`` and ``-s-earlystop`` = the Suggestion's early-stopping endpoint
(pkg/webhook/v1beta1/pod/inject_webhook.go ``getMetricsCollectorArgs``). Here it sees every point the
scripted training prints (one metric per line) instead of tailing a file:

- ``main``: with stop rules it watches the log (``watchMetricsFile``), without it only waits; when
  the training process ends and it did not early-stop, it reports the whole log (``reportMetrics``).
- ``watchMetricsFile`` / ``updateStopRules``: a rule counts only after its metric was reported
  ``startStep`` times; for the objective the value compared is the best so far (min for minimize,
  max for maximize); a met rule is deleted; when none is left the trial is early stopped: the
  training child is terminated (Katib's command wrapper then exits 0, so the job completes), the log
  is reported to the DB manager, then ``SetTrialStatus(trial)`` is sent to the early-stopping
  service, which marks the Trial (a failure is fatal for the sidecar: logged here, raised there).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import grpc
from kubeflow.katib import katib_api_pb2, katib_api_pb2_grpc

from tests.katibmodel import composer
from tests.katibmodel._kube import SUGGESTIONS, TRIALS, Kube
from tests.katibmodel.trainer import Point

pb: Any = katib_api_pb2
Key = tuple[str, str]
#: the kinds the pod webhook injects this sidecar for (pod/utils.go ``needWrapWorkerContainer``)
FILE_KINDS = ("StdOut", "File")


@dataclass
class _Watch:
    """One trial's sidecar: the metric names it reports and the stop rules not met yet."""

    trial: str
    namespace: str
    experiment: str
    metric_names: tuple[str, ...]
    minimize: bool
    rules: list[dict[str, Any]]
    start_steps: dict[str, int] = field(default_factory=dict)
    optimal: float | None = None
    rows: list[tuple[str, str, str]] = field(default_factory=list)  # (time, metric, value)
    early_stopped: bool = False

    def update(self, rule: dict[str, Any], value: float) -> None:
        """main.go ``updateStopRules``."""
        if rule["name"] == self.metric_names[0]:  # the objective: the best value so far
            if self.optimal is None or (value < self.optimal if self.minimize else value > self.optimal):
                self.optimal = value
            value = self.optimal
        if rule["name"] in self.start_steps:
            self.start_steps[rule["name"]] -= 1
            if self.start_steps[rule["name"]] != 0:
                return
        bar = float(rule["value"])
        comparison = rule.get("comparison")
        if (
            (comparison == "equal" and value == bar)
            or (comparison == "less" and value < bar)
            or (comparison == "greater" and value > bar)
        ):
            self.rules.remove(rule)  # deleteStopRule


class FileMetricsCollector:
    """The sidecars of every trial pod (``point``/``end`` are the trainer's hooks, see trainer.Run)."""

    def __init__(self, kube: Kube, resolve: Callable[[str], str], db_address: str, timeout_s: float) -> None:
        self.kube, self.resolve, self.db_address, self.timeout_s = kube, resolve, db_address, timeout_s
        self._watches: dict[Key, _Watch | None] = {}
        self._lock = threading.Lock()
        self.set_trial_status_calls: list[tuple[str, str]] = []  # (endpoint, trial), for tests

    def _watch(self, key: Key) -> _Watch | None:
        with self._lock:
            if key in self._watches:
                return self._watches[key]
        trial = self.kube.get(TRIALS, *key)  # trial name = TrainJob name (getTrialInstance)
        watch = None
        spec = (trial or {}).get("spec") or {}
        kind = ((spec.get("metricsCollector") or {}).get("collector") or {}).get("kind", "StdOut")
        if trial is not None and kind in FILE_KINDS:
            objective = spec["objective"]
            rules = [dict(r) for r in spec.get("earlyStoppingRules") or []]
            watch = _Watch(
                trial=key[1],
                namespace=key[0],
                experiment=trial["metadata"]["labels"][composer.LABEL_EXPERIMENT],
                metric_names=(objective["objectiveMetricName"], *objective.get("additionalMetricNames", [])),
                minimize=objective["type"] == "minimize",
                rules=rules,
                start_steps={r["name"]: int(r["startStep"]) for r in rules if int(r.get("startStep") or 0)},
            )
        with self._lock:
            return self._watches.setdefault(key, watch)

    def point(self, key: Key, point: Point) -> bool:
        """One printed point; True when the sidecar early-stopped the training (it is terminated)."""
        watch = self._watch(key)
        if watch is None or watch.early_stopped:
            return False
        stamp = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
        watch.rows += [(stamp, k, v) for k, v in point.metrics.items() if k in watch.metric_names]
        if not watch.rules:  # no stop rule: printMetricsFile only
            return False
        for name, value in point.metrics.items():
            for rule in list(watch.rules):  # for idx, rule := range stopRules
                if rule["name"] == name and rule in watch.rules:
                    watch.update(rule, float(value))
        if watch.rules:
            return False
        watch.early_stopped = True
        self._report(watch)
        self._set_trial_status(watch)
        return True

    def end(self, key: Key) -> None:
        """The training process ended on its own: ``main`` reports the log unless it early-stopped."""
        watch = self._watch(key)
        if watch is not None and not watch.early_stopped:
            self._report(watch)

    def _report(self, watch: _Watch) -> None:
        log = pb.ObservationLog(
            metric_logs=[
                pb.MetricLog(time_stamp=t, metric=pb.Metric(name=name, value=value))
                for t, name, value in watch.rows
            ]
        )
        with grpc.insecure_channel(self.db_address) as channel:
            katib_api_pb2_grpc.DBManagerStub(channel).ReportObservationLog(
                pb.ReportObservationLogRequest(trial_name=watch.trial, observation_log=log),
                timeout=self.timeout_s,
            )

    def _set_trial_status(self, watch: _Watch) -> None:
        suggestion: Mapping[str, Any] | None = self.kube.get(SUGGESTIONS, watch.namespace, watch.experiment)
        assert suggestion is not None, f"suggestion {watch.experiment} not found"
        endpoint = composer.early_stopping_endpoint(suggestion)
        self.set_trial_status_calls.append((endpoint, watch.trial))
        with grpc.insecure_channel(self.resolve(endpoint)) as channel:
            katib_api_pb2_grpc.EarlyStoppingStub(channel).SetTrialStatus(
                pb.SetTrialStatusRequest(trial_name=watch.trial), timeout=self.timeout_s
            )
