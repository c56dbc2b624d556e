"""Katib's calls to the suggestion and early-stopping services
(pkg/controller.v1beta1/suggestion/suggestionclient/suggestionclient.go, algorithm_settings.go)."""

from __future__ import annotations

import copy
import secrets
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import grpc
from kubeflow.katib import katib_api_pb2, katib_api_pb2_grpc

from tests.katibmodel import rules
from tests.katibmodel._controller import Timing
from tests.katibmodel._kube import has_condition
from tests.katibmodel.composer import algorithm_endpoint, early_stopping_endpoint

pb: Any = katib_api_pb2

_OBJECTIVE = {"minimize": pb.MINIMIZE, "maximize": pb.MAXIMIZE}
_PARAMETER = {"double": pb.DOUBLE, "int": pb.INT, "discrete": pb.DISCRETE, "categorical": pb.CATEGORICAL}
_DISTRIBUTION = {
    "uniform": pb.UNIFORM,
    "logUniform": pb.LOG_UNIFORM,
    "normal": pb.NORMAL,
    "logNormal": pb.LOG_NORMAL,
}
_CONDITION = {
    "Created": pb.TrialStatus.CREATED,
    "Running": pb.TrialStatus.RUNNING,
    "Succeeded": pb.TrialStatus.SUCCEEDED,
    "Killed": pb.TrialStatus.KILLED,
    "Failed": pb.TrialStatus.FAILED,
    "EarlyStopped": pb.TrialStatus.EARLYSTOPPED,
}  # convertTrialConditionType: anything else (MetricsUnavailable too) is UNKNOWN
_COMPARISON = {pb.EQUAL: "equal", pb.LESS: "less", pb.GREATER: "greater"}
_ALPHANUMS = "bcdfghjklmnpqrstvwxz2456789"  # k8s.io/apimachinery/pkg/util/rand


class SuggestionError(Exception):
    """An error SyncAssignments or a validator returns (the reconcile fails and is retried)."""


class ValidationFailed(Exception):
    """INVALID_ARGUMENT or UNKNOWN from a Validate* call: the Suggestion (then Experiment) fails."""


def convert_experiment(experiment: Mapping[str, Any]) -> Any:
    """ConvertExperiment."""
    spec = experiment["spec"]
    objective = spec["objective"]
    out = pb.Experiment(name=experiment["metadata"]["name"])
    s = out.spec
    s.algorithm.algorithm_name = spec["algorithm"]["algorithmName"]
    for setting in spec["algorithm"].get("algorithmSettings") or ():
        s.algorithm.algorithm_settings.add(name=setting.get("name", ""), value=setting.get("value", ""))
    s.objective.type = _OBJECTIVE.get(str(objective.get("type")), pb.UNKNOWN)
    s.objective.objective_metric_name = objective.get("objectiveMetricName", "")
    s.objective.additional_metric_names.extend(objective.get("additionalMetricNames") or ())
    if objective.get("goal") is not None:
        s.objective.goal = float(objective["goal"])
    for p in spec.get("parameters") or ():
        fs = p.get("feasibleSpace") or {}
        param = s.parameter_specs.parameters.add(name=p["name"])
        param.parameter_type = _PARAMETER.get(p.get("parameterType"), pb.UNKNOWN_TYPE)
        param.feasible_space.max = fs.get("max", "")
        param.feasible_space.min = fs.get("min", "")
        param.feasible_space.list.extend(fs.get("list") or ())
        param.feasible_space.step = fs.get("step", "")
        param.feasible_space.distribution = _DISTRIBUTION.get(
            str(fs.get("distribution")), pb.DISTRIBUTION_UNSPECIFIED
        )
    if spec.get("parallelTrialCount") is not None:
        s.parallel_trial_count = spec["parallelTrialCount"]
    if spec.get("maxTrialCount") is not None:
        s.max_trial_count = spec["maxTrialCount"]
    early = spec.get("earlyStopping")
    if early is not None:
        s.early_stopping.algorithm_name = early.get("algorithmName", "")
        for setting in early.get("algorithmSettings") or ():
            s.early_stopping.algorithm_settings.add(
                name=setting.get("name", ""), value=setting.get("value", "")
            )
    return out


def convert_trials(trials: Sequence[Mapping[str, Any]]) -> list[Any]:
    """ConvertTrials: MetricsUnavailable trials and EarlyStopped trials WITHOUT an observation are
    not sent; each sent trial carries its observation (by metricStrategies) and the type of its
    LAST condition."""
    out = []
    for t in trials:
        if has_condition(t, "MetricsUnavailable"):
            continue
        if not rules.is_observation_available(t) and has_condition(t, "EarlyStopped"):
            continue
        spec = t["spec"]
        trial = pb.Trial(name=t["metadata"]["name"])
        objective = spec["objective"]
        trial.spec.objective.type = _OBJECTIVE.get(str(objective.get("type")), pb.UNKNOWN)
        trial.spec.objective.objective_metric_name = objective.get("objectiveMetricName", "")
        trial.spec.objective.additional_metric_names.extend(objective.get("additionalMetricNames") or ())
        if objective.get("goal") is not None:
            trial.spec.objective.goal = float(objective["goal"])
        for a in spec.get("parameterAssignments") or ():
            trial.spec.parameter_assignments.assignments.add(name=a["name"], value=a["value"])
        for k, v in (spec.get("labels") or {}).items():
            trial.spec.labels[k] = v
        status = t.get("status") or {}
        trial.status.start_time = status.get("startTime") or ""  # already "2006-01-02T15:04:05Z"
        trial.status.completion_time = status.get("completionTime") or ""
        for name, value in rules.observation_values(t):
            trial.status.observation.metrics.add(name=name, value=value)
        last = rules.last_condition_type(t)
        if last is not None:
            trial.status.condition = _CONDITION.get(last, pb.TrialStatus.UNKNOWN)
        out.append(trial)
    return out


def fill_algorithm_settings(
    experiment: Mapping[str, Any], settings: Sequence[Mapping[str, str]]
) -> dict[str, Any]:
    """algorithm_settings.go: appendAlgorithmSettingsFromSuggestion (Suggestion status overrides)."""
    filled = copy.deepcopy(dict(experiment))
    current = filled["spec"]["algorithm"].setdefault("algorithmSettings", [])
    for setting in settings:
        found = next((s for s in current if s.get("name") == setting.get("name")), None)
        if found is not None:
            found["value"] = setting.get("value")
        else:
            current.append(dict(setting))
    return filled


class Client:
    """The gRPC side. ``resolve`` maps a Service address (``name.ns:port``) to a dialable one."""

    def __init__(self, timing: Timing, resolve: Callable[[str], str], db_manager_address: str) -> None:
        self.timing = timing
        self.resolve = resolve
        self.db_manager_address = db_manager_address  # GetDBManagerAddr()
        self.calls: list[tuple[str, str]] = []  # (method, endpoint), for tests

    def _validate(self, method: str, endpoint: str, stub_class: Any, request: Any) -> None:
        """ValidateAlgorithmSettings / ValidateEarlyStoppingSettings: grpc.WaitForReady(true), retried
        on UNAVAILABLE (linear 3 s x 10), all within the 60 s deadline. INVALID_ARGUMENT or UNKNOWN:
        validation error; UNAVAILABLE: a plain error (retried later); UNIMPLEMENTED, OK and any other
        code (DEADLINE_EXCEEDED when nothing ever answered) count as validated."""
        self.calls.append((method, endpoint))
        deadline = time.monotonic() + self.timing.grpc_timeout_s
        code, details = grpc.StatusCode.OK, ""
        with grpc.insecure_channel(self.resolve(endpoint)) as channel:
            call = getattr(stub_class(channel), method)
            for _ in range(self.timing.grpc_retry_attempts):
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    code = grpc.StatusCode.DEADLINE_EXCEEDED
                    break
                try:
                    call(request, timeout=remaining, wait_for_ready=True)
                    code = grpc.StatusCode.OK
                    break
                except grpc.RpcError as exc:
                    code, details = exc.code(), exc.details() or ""
                    if code not in (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.RESOURCE_EXHAUSTED):
                        break
                    time.sleep(min(self.timing.grpc_retry_period_s, max(0.0, deadline - time.monotonic())))
        if code in (grpc.StatusCode.INVALID_ARGUMENT, grpc.StatusCode.UNKNOWN):
            raise ValidationFailed(f"{method} Error: {details}")
        if code == grpc.StatusCode.UNAVAILABLE:
            raise SuggestionError(f"{method}: {details}")

    def validate_algorithm(self, suggestion: Mapping[str, Any], experiment: Mapping[str, Any]) -> None:
        request = pb.ValidateAlgorithmSettingsRequest(experiment=convert_experiment(experiment))
        self._validate(
            "ValidateAlgorithmSettings",
            algorithm_endpoint(suggestion),
            katib_api_pb2_grpc.SuggestionStub,
            request,
        )

    def validate_early_stopping(self, suggestion: Mapping[str, Any], experiment: Mapping[str, Any]) -> None:
        request = pb.ValidateEarlyStoppingSettingsRequest(
            early_stopping=convert_experiment(experiment).spec.early_stopping
        )
        self._validate(
            "ValidateEarlyStoppingSettings",
            early_stopping_endpoint(suggestion),
            katib_api_pb2_grpc.EarlyStoppingStub,
            request,
        )

    def sync_assignments(
        self, suggestion: dict[str, Any], experiment: Mapping[str, Any], trials: Sequence[Mapping[str, Any]]
    ) -> None:
        """SyncAssignments: ask for ``requests - suggestionCount`` new trials; with early stopping, then
        GetEarlyStoppingRules (its failure aborts the whole sync: the assignments are dropped)."""
        status = suggestion.setdefault("status", {})
        requests = int(suggestion["spec"].get("requests") or 0)
        current = requests - int(status.get("suggestionCount") or 0)
        if current <= 0:
            return
        filled = fill_algorithm_settings(experiment, status.get("algorithmSettings") or [])
        request = pb.GetSuggestionsRequest(
            experiment=convert_experiment(filled),
            trials=convert_trials(trials),
            current_request_number=current,
            total_request_number=requests,
        )
        endpoint = algorithm_endpoint(suggestion)
        self.calls.append(("GetSuggestions", endpoint))
        try:
            with grpc.insecure_channel(self.resolve(endpoint)) as channel:
                reply = katib_api_pb2_grpc.SuggestionStub(channel).GetSuggestions(
                    request, timeout=self.timing.grpc_timeout_s
                )
        except grpc.RpcError as exc:
            raise SuggestionError(f"GetSuggestions: {exc.code().name}: {exc.details()}") from exc
        if len(reply.parameter_assignments) != current:
            raise SuggestionError("The response contains unexpected trials")
        early_rules = []
        if suggestion["spec"].get("earlyStopping") is not None:
            early_rules = self._early_stopping_rules(suggestion, filled, trials)
        name = suggestion["metadata"]["name"]
        assignments = status.setdefault("suggestions", [])
        for t in reply.parameter_assignments:
            trial_name = t.trial_name or f"{name}-{''.join(secrets.choice(_ALPHANUMS) for _ in range(8))}"
            entry: dict[str, Any] = {
                "name": trial_name,
                "parameterAssignments": [{"name": a.name, "value": a.value} for a in t.assignments],
                "earlyStoppingRules": early_rules,
            }
            if t.labels:
                entry["labels"] = dict(t.labels)
            assignments.append(entry)
        status["suggestionCount"] = len(assignments)
        if reply.HasField("algorithm"):  # updateAlgorithmSettings
            settings = status.setdefault("algorithmSettings", [])
            for s in reply.algorithm.algorithm_settings:
                found = next((x for x in settings if x.get("name") == s.name), None)
                if found is not None:
                    found["value"] = s.value
                else:
                    settings.append({"name": s.name, "value": s.value})

    def _early_stopping_rules(
        self,
        suggestion: Mapping[str, Any],
        experiment: Mapping[str, Any],
        trials: Sequence[Mapping[str, Any]],
    ) -> list[dict[str, Any]]:
        endpoint = early_stopping_endpoint(suggestion)
        self.calls.append(("GetEarlyStoppingRules", endpoint))
        request = pb.GetEarlyStoppingRulesRequest(
            experiment=convert_experiment(experiment),
            trials=convert_trials(trials),
            db_manager_address=self.db_manager_address,
        )
        try:
            with grpc.insecure_channel(self.resolve(endpoint)) as channel:
                reply = katib_api_pb2_grpc.EarlyStoppingStub(channel).GetEarlyStoppingRules(
                    request, timeout=self.timing.grpc_timeout_s
                )
        except grpc.RpcError as exc:
            raise SuggestionError(f"GetEarlyStoppingRules: {exc.code().name}: {exc.details()}") from exc
        return [
            {
                "name": r.name,
                "value": r.value,
                "comparison": _COMPARISON.get(r.comparison, "equal"),
                "startStep": r.start_step,
            }
            for r in reply.early_stopping_rules
        ]
