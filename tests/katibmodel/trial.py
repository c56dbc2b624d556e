"""Katib's trial controller (pkg/controller.v1beta1/trial/trial_controller.go,
trial_controller_util.go, managerclient/managerclient.go)."""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any

import grpc
from kubeflow.katib import katib_api_pb2, katib_api_pb2_grpc
from kubernetes import client

from tests.katibmodel import rules
from tests.katibmodel._controller import Cache, Controller, Key, Timing, Watch, for_object, for_owner
from tests.katibmodel._kube import (
    GVR,
    OK,
    TRAINJOBS,
    TRIALS,
    Kube,
    Result,
    has_condition,
    now,
    owner_reference,
    set_condition,
)
from tests.katibmodel.katibconfig import InitConfig

pb: Any = katib_api_pb2

#: trial/trial_controller_status.go
CREATED_REASON = "TrialCreated"
RUNNING_REASON = "TrialRunning"
SUCCEEDED_REASON = "TrialSucceeded"
METRICS_UNAVAILABLE_REASON = "MetricsUnavailable"
FAILED_REASON = "TrialFailed"

_KINDS = {("trainer.kubeflow.org/v1alpha1", "TrainJob"): TRAINJOBS}


def job_gvr(run_spec: Mapping[str, Any]) -> GVR:
    try:
        return _KINDS[(run_spec["apiVersion"], run_spec["kind"])]
    except KeyError:
        raise NotImplementedError(
            f"the model runs TrainJob trials only, not {run_spec.get('kind')}"
        ) from None


class DBManager:
    """managerclient.go + common/v1beta1/katib_manager_util.go: a connection per call."""

    def __init__(self, address: str, timeout_s: float) -> None:
        self.address = address
        self.timeout_s = timeout_s

    def _stub(self, channel: grpc.Channel) -> Any:
        return katib_api_pb2_grpc.DBManagerStub(channel)

    def observation_log(self, trial: Mapping[str, Any]) -> list[tuple[str, str, str]]:
        """GetTrialObservationLog: the objective's log, then each additional metric's appended."""
        objective = trial["spec"]["objective"]
        names = [objective["objectiveMetricName"], *(objective.get("additionalMetricNames") or [])]
        rows: list[tuple[str, str, str]] = []
        with grpc.insecure_channel(self.address) as channel:
            for name in names:
                reply = self._stub(channel).GetObservationLog(
                    pb.GetObservationLogRequest(trial_name=trial["metadata"]["name"], metric_name=name),
                    timeout=self.timeout_s,
                )
                rows += [
                    (m.metric.name, m.metric.value, m.time_stamp) for m in reply.observation_log.metric_logs
                ]
        return rows

    def report_unavailable(self, trial: Mapping[str, Any]) -> None:
        """trial_controller_util.go: reportUnavailableMetrics -- objective "unavailable" at Go's zero
        time (time.Time{}.UTC().Format(time.RFC3339))."""
        log = pb.ObservationLog(
            metric_logs=[
                pb.MetricLog(
                    time_stamp="0001-01-01T00:00:00Z",
                    metric=pb.Metric(
                        name=trial["spec"]["objective"]["objectiveMetricName"], value=rules.UNAVAILABLE
                    ),
                )
            ]
        )
        with grpc.insecure_channel(self.address) as channel:
            self._stub(channel).ReportObservationLog(
                pb.ReportObservationLogRequest(trial_name=trial["metadata"]["name"], observation_log=log),
                timeout=self.timeout_s,
            )


def _push(trial: Mapping[str, Any]) -> bool:
    collector = ((trial.get("spec") or {}).get("metricsCollector") or {}).get("collector") or {}
    return collector.get("kind") == "Push"


def update_condition(trial: dict[str, Any], job_name: str, job: rules.JobStatus, db: DBManager) -> None:
    """trial_controller_util.go: UpdateTrialStatusCondition."""
    msg_suffix = f". Job message: {job.message}" if job.message else ""
    reason_suffix = f". Job reason: {job.reason}" if job.reason else ""
    if job.condition == "Succeeded":
        if rules.is_observation_available(trial) and not has_condition(trial, "Succeeded"):
            if not has_condition(trial, "EarlyStopped"):
                _mark_ended(
                    trial, "Succeeded", SUCCEEDED_REASON + reason_suffix, "Trial has succeeded" + msg_suffix
                )
        elif not has_condition(trial, "MetricsUnavailable"):
            if _push(trial):
                db.report_unavailable(trial)  # an error requeues after 1 s (errReportMetricsFailed)
            _mark_ended(
                trial,
                "MetricsUnavailable",
                METRICS_UNAVAILABLE_REASON + reason_suffix,
                "Metrics are not available" + msg_suffix,
            )
    elif (
        job.condition == "Failed"
        and not has_condition(trial, "Failed")
        and not has_condition(trial, "EarlyStopped")
    ):
        _mark_ended(trial, "Failed", FAILED_REASON + reason_suffix, "Trial has failed" + msg_suffix)
    elif (
        job.condition == "Running"
        and not has_condition(trial, "Running")
        and not has_condition(trial, "EarlyStopped")
    ):
        set_condition(trial, "Running", "True", RUNNING_REASON, "Trial is running")


def _mark_ended(trial: dict[str, Any], kind: str, reason: str, message: str) -> None:
    """trials/v1beta1/util.go: MarkTrialStatus{Succeeded,Failed,MetricsUnavailable} -- Running goes
    to False (keeping its reason and message), then the new condition; completionTime is set."""
    running = next((c for c in trial["status"].get("conditions") or () if c.get("type") == "Running"), None)
    if running is not None:
        set_condition(trial, "Running", "False", running.get("reason", ""), running.get("message", ""))
    set_condition(trial, kind, "True", reason, message)
    trial["status"]["completionTime"] = now()


class TrialController(Controller):
    name = "trial"

    def __init__(self, kube: Kube, timing: Timing, db: DBManager, init: InitConfig) -> None:
        super().__init__(kube, timing)
        self.db = db
        self.init = init
        self.observation_reads: dict[str, int] = {}

    def watches(self) -> list[Watch]:
        watches = [Watch(TRIALS, for_object)]
        if self.init.watches_kind("trainer.kubeflow.org/v1alpha1", "TrainJob"):
            watches.append(Watch(TRAINJOBS, for_owner("Trial")))  # only kinds listed in trialResources
        return watches

    def reconcile(self, key: Key, cache: Cache) -> Result:
        """trial_controller.go: Reconcile."""
        original = cache.get(TRIALS, key)
        if original is None:
            return OK
        trial = copy.deepcopy(original)
        trial.setdefault("status", {})
        result = OK
        if not has_condition(trial, "Created"):
            trial["status"].setdefault("startTime", now())
            set_condition(trial, "Created", "True", CREATED_REASON, "Trial is created")
        else:
            result = self.reconcile_trial(trial)
        if trial.get("status") != original.get("status"):
            try:
                self.kube.update_status(TRIALS, trial)
            except client.ApiException as exc:
                if exc.status == 409:
                    return Result(requeue=True)
                raise
        return result

    def reconcile_trial(self, trial: dict[str, Any]) -> Result:
        """trial_controller.go: reconcileTrial."""
        desired = copy.deepcopy(trial["spec"]["runSpec"])
        desired.setdefault("metadata", {})["ownerReferences"] = [owner_reference(trial)]
        deployed = self.reconcile_job(trial, desired)
        if deployed is None or (rules.is_completed(trial) and not has_condition(trial, "EarlyStopped")):
            return OK
        try:
            job_status = rules.deployed_job_status(trial, deployed)
        except rules.JobStatusError:
            return OK  # logged upstream; jobStatus is nil, nothing is updated
        if job_status is None:
            return OK
        if job_status.condition == "Succeeded" or has_condition(trial, "EarlyStopped"):
            self.update_observation(trial)
        if (
            job_status.condition == "Succeeded"
            and trial["status"].get("observation") is None
            and not _push(trial)
        ):
            return Result(requeue_after=self.timing.trial_requeue_s)  # errMetricsNotReported
        try:
            update_condition(trial, deployed["metadata"]["name"], job_status, self.db)
        except grpc.RpcError:
            return Result(requeue_after=self.timing.trial_requeue_s)  # errReportMetricsFailed
        return OK

    def reconcile_job(self, trial: Mapping[str, Any], desired: dict[str, Any]) -> dict[str, Any] | None:
        """trial_controller.go: reconcileJob -- create the job; delete it (foreground) once the trial
        is completed unless retainRun; a deleted job of a completed trial is not recreated."""
        gvr = job_gvr(desired)
        namespace, name = desired["metadata"]["namespace"], desired["metadata"]["name"]
        found = self.kube.get(gvr, namespace, name)  # unstructured reads bypass the cache
        if found is None:
            if rules.is_completed(trial):
                return None
            self.kube.create(gvr, namespace, desired)
            return desired
        if rules.is_completed(trial) and not trial["spec"].get("retainRun"):
            self.kube.delete(gvr, namespace, name)
            return None
        return found

    def update_observation(self, trial: dict[str, Any]) -> None:
        """trial_controller_util.go: UpdateTrialStatusObservation -- set only when the log is not empty."""
        name = trial["metadata"]["name"]
        self.observation_reads[name] = self.observation_reads.get(name, 0) + 1
        rows = self.db.observation_log(trial)
        if rows:
            trial["status"]["observation"] = rules.get_metrics(rows, rules.strategies_of(trial))
