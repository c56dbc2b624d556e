"""The Katib gRPC edge of the local sweep: GetSuggestions as Katib's controller sends it, and trial
observations computed from the DB manager's observation log by ``metricStrategies``."""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from types import MappingProxyType
from typing import Any

import grpc
from kubeflow.katib import katib_api_pb2 as _pb
from kubeflow.katib import katib_api_pb2_grpc as _pb_grpc

from katib_progress.core.errors import ConfigError, PermanentError, TemporaryError
from katib_progress.core.timefmt import format_rfc3339nano, parse_rfc3339
from katib_progress.local.experiment import LocalExperiment
from katib_progress.local.summary import TrialSummary

_log = logging.getLogger(__name__)

pb: Any = _pb  # generated stubs carry no type information
pb_grpc: Any = _pb_grpc

_PARAM_TYPES = {
    "double": pb.DOUBLE,
    "int": pb.INT,
    "discrete": pb.DISCRETE,
    "categorical": pb.CATEGORICAL,
}
_DISTRIBUTIONS = {
    None: pb.DISTRIBUTION_UNSPECIFIED,
    "uniform": pb.UNIFORM,
    "logUniform": pb.LOG_UNIFORM,
    "normal": pb.NORMAL,
    "logNormal": pb.LOG_NORMAL,
}
_CONDITIONS = {
    "Created": pb.TrialStatus.CREATED,
    "Running": pb.TrialStatus.RUNNING,
    "Interrupted": pb.TrialStatus.RUNNING,
    "Succeeded": pb.TrialStatus.SUCCEEDED,
    "Killed": pb.TrialStatus.KILLED,
    "Failed": pb.TrialStatus.FAILED,
    "MetricsUnavailable": pb.TrialStatus.METRICSUNAVAILABLE,
    "EarlyStopped": pb.TrialStatus.EARLYSTOPPED,
}
_TIMEOUT_S = 60.0
# Katib algorithm names the suggestion service may not accept, and what to use instead.
KATIB_ALGORITHM_HINTS = {
    "hyperband": (
        "Katib's hyperband runs as random sampling + the hyperband pruning policy: it needs earlyStopping "
        "algorithmName katib-progress"
    ),
    "pbt": "population based training is not supported: it hands checkpoints between trials",
    "enas": "neural architecture search is not supported by a local sweep",
    "darts": "neural architecture search is not supported by a local sweep",
}


@dataclass(frozen=True, slots=True)
class Assignment:
    params: Mapping[str, str]
    trial_name: str = ""
    labels: Mapping[str, str] = field(default_factory=lambda: MappingProxyType({}))


def objective_proto(exp: LocalExperiment) -> Any:
    objective = exp.doc.spec.objective
    return pb.ObjectiveSpec(
        type=pb.MINIMIZE if objective.type == "minimize" else pb.MAXIMIZE,
        goal=objective.goal if objective.goal is not None else 0.0,
        objective_metric_name=objective.objective_metric_name,
        additional_metric_names=list(objective.additional_metric_names),
    )


def experiment_proto(exp: LocalExperiment, kept: Mapping[str, str] | None = None) -> Any:
    """``kept``: the settings the suggestion service returned earlier, which override and extend the
    Experiment's own as Katib's Suggestion status does (algorithm_settings.go
    ``appendAlgorithmSettingsFromSuggestion``)."""
    spec = exp.doc.spec
    settings = {s.name: s.value for s in spec.algorithm.algorithm_settings}
    settings.update(kept or {})
    params = [
        pb.ParameterSpec(
            name=p.name,
            parameter_type=_PARAM_TYPES[p.parameter_type],
            feasible_space=pb.FeasibleSpace(
                max=p.feasible_space.max or "",
                min=p.feasible_space.min or "",
                list=list(p.feasible_space.list_ or []),
                step=p.feasible_space.step or "",
                distribution=_DISTRIBUTIONS[p.feasible_space.distribution],
            ),
        )
        for p in spec.parameters
    ]
    early = None
    if spec.early_stopping is not None:
        early = pb.EarlyStoppingSpec(
            algorithm_name=spec.early_stopping.algorithm_name,
            algorithm_settings=[
                pb.EarlyStoppingSetting(name=s.name, value=s.value)
                for s in spec.early_stopping.algorithm_settings
            ],
        )
    return pb.Experiment(
        name=exp.name,
        spec=pb.ExperimentSpec(
            parameter_specs=pb.ExperimentSpec.ParameterSpecs(parameters=params),
            objective=objective_proto(exp),
            algorithm=pb.AlgorithmSpec(
                algorithm_name=spec.algorithm.algorithm_name,
                algorithm_settings=[pb.AlgorithmSetting(name=k, value=v) for k, v in settings.items()],
            ),
            early_stopping=early,
            parallel_trial_count=spec.parallel_trial_count,
            max_trial_count=spec.max_trial_count or 0,
        ),
    )


def _time(moment: datetime | None) -> str:
    return format_rfc3339nano(moment) if moment is not None else ""


def trial_proto(exp: LocalExperiment, trial: TrialSummary) -> Any:
    observation = None
    if trial.terminal and trial.observation:
        observation = pb.Observation(
            metrics=[pb.Metric(name=k, value=_fmt(v)) for k, v in sorted(trial.observation.items())]
        )
    return pb.Trial(
        name=trial.name,
        spec=pb.TrialSpec(
            objective=objective_proto(exp),
            parameter_assignments=pb.TrialSpec.ParameterAssignments(
                assignments=[pb.ParameterAssignment(name=k, value=v) for k, v in trial.params.items()]
            ),
            labels=dict(trial.labels),
        ),
        status=pb.TrialStatus(
            start_time=_time(trial.started_at),
            completion_time=_time(trial.ended_at) if trial.terminal else "",
            condition=_CONDITIONS[trial.status],
            observation=observation,
        ),
    )


def _fmt(value: float) -> str:
    return repr(float(value))


def _rpc_error(what: str, exc: grpc.RpcError) -> Exception:
    code = exc.code() if hasattr(exc, "code") else None
    detail = exc.details() if hasattr(exc, "details") else str(exc)
    message = f"{what}: {getattr(code, 'name', code)}: {detail}"
    if code in (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED):
        return TemporaryError(message)
    return PermanentError(message)


class SuggestionClient:
    """Katib's Suggestion API as the experiment controller calls it."""

    def __init__(self, address: str) -> None:
        self._channel = grpc.insecure_channel(address)
        self._stub = pb_grpc.SuggestionStub(self._channel)

    def validate(self, exp: LocalExperiment) -> None:
        try:
            self._stub.ValidateAlgorithmSettings(
                pb.ValidateAlgorithmSettingsRequest(experiment=experiment_proto(exp)),
                timeout=_TIMEOUT_S,
                wait_for_ready=True,
            )
        except grpc.RpcError as exc:
            if exc.code() is grpc.StatusCode.UNIMPLEMENTED:
                return
            if exc.code() is grpc.StatusCode.INVALID_ARGUMENT:
                hint = KATIB_ALGORITHM_HINTS.get(exp.doc.spec.algorithm.algorithm_name)
                detail = str(exc.details()) + (f" ({hint})" if hint else "")
                raise ConfigError("spec.algorithm", detail) from None
            raise _rpc_error("ValidateAlgorithmSettings", exc) from None

    def get(
        self,
        exp: LocalExperiment,
        trials: Sequence[TrialSummary],
        *,
        current: int,
        total: int,
        kept: dict[str, str],
    ) -> list[Assignment]:
        """New assignments. ``kept`` holds the settings the service returned so far (Katib's Suggestion
        ``status.algorithmSettings``): sent with the request and updated from the reply
        (suggestionclient.go ``updateAlgorithmSettings``)."""
        request = pb.GetSuggestionsRequest(
            experiment=experiment_proto(exp, kept),
            trials=[trial_proto(exp, t) for t in trials],
            current_request_number=current,
            total_request_number=total,
        )
        try:
            reply = self._stub.GetSuggestions(request, timeout=_TIMEOUT_S, wait_for_ready=True)
        except grpc.RpcError as exc:
            raise _rpc_error("GetSuggestions", exc) from None
        for setting in reply.algorithm.algorithm_settings:
            kept[setting.name] = setting.value
        return [
            Assignment(
                params={a.name: a.value for a in pa.assignments},
                trial_name=pa.trial_name,
                labels=dict(pa.labels),
            )
            for pa in reply.parameter_assignments
        ]

    def close(self) -> None:
        self._channel.close()


class ObservationReader:
    """Reads a trial's observation log from the DB manager and applies ``metricStrategies``."""

    def __init__(self, address: str) -> None:
        self._channel = grpc.insecure_channel(address)
        self._stub = pb_grpc.DBManagerStub(self._channel)

    def observation(
        self,
        trial: str,
        strategies: Mapping[str, str],
        extra: Sequence[tuple[datetime, str, float]] = (),
    ) -> dict[str, float]:
        """Each metric's value by its strategy over the trial's log plus ``extra`` values the log never
        holds (NaN/Inf, as (time, metric, value)); a metric without any value is left out."""
        out: dict[str, float] = {}
        for metric, strategy in strategies.items():
            try:
                reply = self._stub.GetObservationLog(
                    pb.GetObservationLogRequest(trial_name=trial, metric_name=metric),
                    timeout=_TIMEOUT_S,
                    wait_for_ready=True,
                )
            except grpc.RpcError as exc:
                raise _rpc_error("GetObservationLog", exc) from None
            rows = [(log.time_stamp, log.metric.value) for log in reply.observation_log.metric_logs]
            rows += [(format_rfc3339nano(t), _fmt(v)) for t, name, v in extra if name == metric]
            value = katib_observation(rows, strategy)
            if value is not None:
                out[metric] = value
        return out

    def rows(self, trial: str) -> list[tuple[str, str, str]]:
        """Every (time_stamp, metric, value) row of the trial's observation log."""
        try:
            reply = self._stub.GetObservationLog(
                pb.GetObservationLogRequest(trial_name=trial, metric_name=""),
                timeout=_TIMEOUT_S,
                wait_for_ready=True,
            )
        except grpc.RpcError as exc:
            raise _rpc_error("GetObservationLog", exc) from None
        return [(m.time_stamp, m.metric.name, m.metric.value) for m in reply.observation_log.metric_logs]

    def report(self, trial: str, rows: Sequence[tuple[str, str, str]]) -> None:
        """``ReportObservationLog`` of (time_stamp, metric, value) rows, as Katib's collector sidecar."""
        logs = [pb.MetricLog(time_stamp=t, metric=pb.Metric(name=n, value=v)) for t, n, v in rows]
        try:
            self._stub.ReportObservationLog(
                pb.ReportObservationLogRequest(
                    trial_name=trial, observation_log=pb.ObservationLog(metric_logs=logs)
                ),
                timeout=_TIMEOUT_S,
                wait_for_ready=True,
            )
        except grpc.RpcError as exc:
            raise _rpc_error("ReportObservationLog", exc) from None

    def delete(self, trial: str) -> None:
        try:
            self._stub.DeleteObservationLog(
                pb.DeleteObservationLogRequest(trial_name=trial), timeout=_TIMEOUT_S, wait_for_ready=True
            )
        except grpc.RpcError as exc:
            raise _rpc_error("DeleteObservationLog", exc) from None

    def close(self) -> None:
        self._channel.close()


def katib_observation(rows: Sequence[tuple[str, str]], strategy: str) -> float | None:
    """A metric's observation from its (time_stamp, value) log rows, as Katib computes it.

    Katib's trial controller (``getMetrics`` in pkg/controller.v1beta1/trial/trial_controller_util.go)
    keeps, in log order, ``min``/``max`` of the values that parse as numbers (the first one seeds both;
    Go comparisons with NaN are false, so a later NaN never replaces them) and ``latest`` = the value of
    the row with the latest timestamp (a tie goes to the later row), whatever it is; the experiment
    controller (``getObjectiveMetricValue`` in pkg/controller.v1beta1/experiment/util/status_util.go)
    falls back to ``latest`` when ``min``/``max`` has no value. None when no row parses as a number.
    """
    low = high = latest = None
    latest_at: datetime | None = None
    for stamp, text in rows:
        value = _parse_go_float(text)
        if value is not None:
            if low is None or high is None:
                low = high = value
            elif value < low:
                low = value
            elif value > high:
                high = value
        try:
            moment = parse_rfc3339(stamp, field="time_stamp")
        except ValueError:
            continue
        if latest_at is None or not latest_at > moment:
            latest_at, latest = moment, value
    if strategy == "min" and low is not None:
        return low
    if strategy == "max" and high is not None:
        return high
    return latest


def _parse_go_float(text: str) -> float | None:
    """``strconv.ParseFloat(text, 64)``: decimal numbers and nan/inf spellings; None when it fails."""
    try:
        value = float(text)
    except ValueError:
        return None
    if "_" in text or text != text.strip():  # Python accepts these, Go does not
        return None
    return value
