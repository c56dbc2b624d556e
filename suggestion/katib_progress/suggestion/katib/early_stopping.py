"""Katib's ``EarlyStopping`` gRPC API backed by the pruning hub (the Katib edge of pruning).

Two algorithm names are served: ours, ``katib-progress``, and Katib's ``medianstop`` (also as
``kp-medianstop``, its katib-config name), which runs Katib's rules live (the ``medianstop``
policy; its settings validated with Katib's messages, ``validate_medianstop``). Any other name is
INVALID_ARGUMENT, naming the ones served.

An Experiment names our policy under ``spec.earlyStopping``::

    earlyStopping:
      algorithmName: katib-progress
      algorithmSettings:
        - {name: policy, value: "default"}
        - {name: percentile, value: "25"}

- ``ValidateEarlyStoppingSettings`` validates the settings (INVALID_ARGUMENT naming setting, value and
  what is allowed).
- ``GetEarlyStoppingRules`` configures the hub for the experiment (so live ``Decide`` calls need no
  config) and returns the best *static* approximation of the live policy for stock Katib collectors.
- ``SetTrialStatus`` records that Katib stopped a trial (told to the policies as PRUNED) and calls
  ``on_trial_stopped(experiment, trial)``: the early-stopping process marks the Trial EarlyStopped
  as Katib's medianstop does (katib_progress.earlystopping_cli). Katib's stock metrics collectors
  call it after they have reported the trial's rows; our collector marks its own prunes itself.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable, Iterable
from typing import Any

import grpc
import numpy as np
from kubeflow.katib import katib_api_pb2, katib_api_pb2_grpc

from katib_progress.core.errors import ConfigError
from katib_progress.core.names import EARLY_STOPPING_ALGORITHM
from katib_progress.core.pruning import (
    MEDIANSTOP_ALGORITHMS,
    early_stopping_settings,
    hyperband_pruning_settings,
)
from katib_progress.suggestion.pruning._build import build_policy
from katib_progress.suggestion.pruning._history import TrialState
from katib_progress.suggestion.pruning.config import PruningConfig
from katib_progress.suggestion.pruning.policies.medianstop import katib_rule
from katib_progress.suggestion.pruning.service import PruningHub

_log = logging.getLogger(__name__)

pb: Any = katib_api_pb2

SERVICE_NAME = "api.v1.beta1.EarlyStopping"

#: ``(experiment, trial)`` -> None; raising fails the SetTrialStatus call (Katib's collector retries).
TrialStopped = Callable[[str, str], None]

_CONDITIONS = {
    pb.TrialStatus.SUCCEEDED: TrialState.COMPLETE,
    pb.TrialStatus.EARLYSTOPPED: TrialState.PRUNED,
    pb.TrialStatus.FAILED: TrialState.FAILED,
    pb.TrialStatus.KILLED: TrialState.FAILED,
    pb.TrialStatus.METRICSUNAVAILABLE: TrialState.FAILED,
}


def _settings(spec: Any) -> dict[str, str]:
    settings: dict[str, str] = {}
    for setting in spec.algorithm_settings:
        if setting.name in settings:
            raise ConfigError(setting.name, f"given twice ({settings[setting.name]!r} and {setting.value!r})")
        settings[setting.name] = setting.value
    return settings


#: Every ``spec.earlyStopping.algorithmName`` this service serves ("" is ours: our own tests and
#: tools leave it out).
SERVED = (EARLY_STOPPING_ALGORITHM, *reversed(MEDIANSTOP_ALGORITHMS))


def validate_medianstop(settings: Iterable[Any]) -> str | None:
    """Katib's medianstop validation, its checks in its order and its messages (the first problem
    only, as Katib): pkg/earlystopping/v1beta1/medianstop/service.py ``validate_medianstop_setting``.
    None when valid."""
    for setting in settings:
        try:
            if setting.name == "min_trials_required":
                if not int(setting.value) > 0:
                    return "min_trials_required must be greater than zero (>0)"
            elif setting.name == "start_step":
                if not int(setting.value) >= 1:
                    return "start_step must be greater or equal than one (>=1)"
            else:
                return f"unknown setting {setting.name} for algorithm medianstop"
        except ValueError as exc:  # int() of a non-integer: Katib catches it and reports it so
            return f"failed to validate {setting.name}({setting.value}): {exc}"
    return None


#: trailing metadata of an unknown-name refusal: the names this service serves
SERVED_METADATA_KEY = "katib-progress-served-algorithms"


def katib_unknown_algorithm(name: str) -> str:
    """Katib's message, word for word, for a name its service does not serve (medianstop/service.py
    ``validate_early_stopping_spec``); Katib's own test_medianstop_service.py compares it exactly."""
    return f"unknown algorithm name {name}"


def unknown_algorithm(name: str) -> str:
    """Katib's message followed by the names this service serves (our own Pruning API's wording)."""
    return f"{katib_unknown_algorithm(name)}; this service serves {', '.join(SERVED)}"


def config_from_experiment(experiment: Any) -> PruningConfig:
    """PruningConfig from a Katib ``Experiment`` proto; raises ConfigError naming the field."""
    objective = experiment.spec.objective
    if not objective.objective_metric_name:
        raise ConfigError("objective.objectiveMetricName", "required for early stopping")
    if objective.type == pb.MINIMIZE:
        direction = "minimize"
    elif objective.type == pb.MAXIMIZE:
        direction = "maximize"
    else:
        raise ConfigError("objective.type", f"must be minimize or maximize, got {objective.type}")
    early = experiment.spec.early_stopping
    if early.algorithm_name not in ("", *SERVED):
        raise ConfigError("earlyStopping.algorithmName", unknown_algorithm(early.algorithm_name))
    if early.algorithm_name in MEDIANSTOP_ALGORITHMS:
        problem = validate_medianstop(early.algorithm_settings)
        if problem is not None:
            raise ConfigError("earlyStopping.algorithmSettings", problem)
    # Katib's medianstop: the medianstop policy; Katib's hyperband algorithm: the hyperband policy
    # with its eta and r_l mapped (core.pruning)
    settings = hyperband_pruning_settings(
        experiment.spec.algorithm.algorithm_name,
        {s.name: s.value for s in experiment.spec.algorithm.algorithm_settings},
        early_stopping_settings(early.algorithm_name, _settings(early)),
    )
    return PruningConfig.from_settings(objective.objective_metric_name, direction, settings)


def _final(trial: Any, metric: str) -> float | None:
    for m in trial.status.observation.metrics:
        if m.name == metric:
            try:
                value = float(m.value)
            except ValueError:
                return None
            return value if math.isfinite(value) else None
    return None


def static_rules(config: PruningConfig, finals: Iterable[float]) -> list[Any]:
    """Stock-collector rules approximating the live policy.

    - comparative policies (percentile, median, trend_halving and the Optuna rank-based ones): stop when the
      objective is worse than the configured percentile (median for the others) of the finished
      trials' objective values, from ``start_step`` reports on; nothing until ``startup_trials``
      trials have finished (max(1, startup_trials)).
    - threshold: stop outside [threshold_lower, threshold_upper].
    Divergence, stall, extrapolation and budgets have no static equivalent.
    """
    names = config.policy_names
    metric = config.objective_metric
    rules: list[Any] = []
    comparative = {
        "median",
        "percentile",
        "successive_halving",
        "hyperband",
        "wilcoxon",
        "trend_halving",
    } & set(names)
    values = [v for v in finals if math.isfinite(v)]
    if comparative and len(values) >= max(1, config.startup_trials):
        q = config.percentile if "percentile" in names else 50.0
        minimize = config.direction == "minimize"
        bar = float(np.percentile(np.asarray(values), q if minimize else 100.0 - q))
        rules.append(
            pb.EarlyStoppingRule(
                name=metric,
                value=repr(bar),
                comparison=pb.GREATER if minimize else pb.LESS,
                start_step=config.start_step,
            )
        )
    if "threshold" in names:
        if config.threshold_upper is not None:
            rules.append(
                pb.EarlyStoppingRule(
                    name=metric,
                    value=repr(config.threshold_upper),
                    comparison=pb.GREATER,
                    start_step=config.start_step,
                )
            )
        if config.threshold_lower is not None:
            rules.append(
                pb.EarlyStoppingRule(
                    name=metric,
                    value=repr(config.threshold_lower),
                    comparison=pb.LESS,
                    start_step=config.start_step,
                )
            )
    return rules


class EarlyStoppingServicer(katib_api_pb2_grpc.EarlyStoppingServicer):
    """``on_trial_stopped(experiment, trial)`` is called when Katib reports a stopped trial (e.g. to
    suspend its TrainJob); by default the stop is only recorded."""

    def __init__(self, hub: PruningHub, *, on_trial_stopped: TrialStopped | None = None) -> None:
        self._hub = hub
        self._on_trial_stopped = on_trial_stopped

    def ValidateEarlyStoppingSettings(self, request: Any, context: grpc.ServicerContext) -> Any:
        spec = request.early_stopping
        if not spec.algorithm_name:
            context.abort(grpc.StatusCode.INVALID_ARGUMENT, "earlyStopping.algorithmName: required")
        if spec.algorithm_name not in SERVED:
            # Katib's exact details (a drop-in passes Katib's unchanged test); the names served go in
            # the trailing metadata and the log, where a client or an operator can read them
            _log.warning("%s", unknown_algorithm(spec.algorithm_name))
            context.set_trailing_metadata(((SERVED_METADATA_KEY, ",".join(SERVED)),))
            context.abort(grpc.StatusCode.INVALID_ARGUMENT, katib_unknown_algorithm(spec.algorithm_name))
        if spec.algorithm_name in MEDIANSTOP_ALGORITHMS:
            # Katib's checks and messages: what a user of Katib's medianstop reads there
            problem = validate_medianstop(spec.algorithm_settings)
            if problem is not None:
                _log.info("medianstop settings rejected: %s", problem)
                context.abort(grpc.StatusCode.INVALID_ARGUMENT, problem)
            return pb.ValidateEarlyStoppingSettingsReply()
        try:
            # The objective is not part of this request: validate the settings against a placeholder.
            config = PruningConfig.from_settings("objective", "minimize", _settings(spec))
            build_policy(config)
        except ConfigError as exc:
            _log.info("early stopping settings rejected: %s", exc)
            context.abort(
                grpc.StatusCode.INVALID_ARGUMENT, f"earlyStopping.algorithmSettings {exc.field}: {exc.detail}"
            )
        return pb.ValidateEarlyStoppingSettingsReply()

    def GetEarlyStoppingRules(self, request: Any, context: grpc.ServicerContext) -> Any:
        experiment = request.experiment
        if not experiment.name:
            context.abort(grpc.StatusCode.INVALID_ARGUMENT, "experiment.name: required")
        if not experiment.spec.objective.objective_metric_name:
            # Katib's webhook never lets such an Experiment through; Katib's medianstop answers it
            # (with no rule while no trial succeeded), so do we: nothing to compare, no rule
            _log.warning("experiment %s: no objective metric; no early-stopping rule", experiment.name)
            return pb.GetEarlyStoppingRulesReply()
        try:
            config = config_from_experiment(experiment)
        except ConfigError as exc:
            context.abort(grpc.StatusCode.INVALID_ARGUMENT, f"{exc.field}: {exc.detail}")
        self._hub.configure(experiment.name, config)
        finals: list[float] = []
        succeeded: list[str] = []
        for trial in request.trials:
            self._hub.note_trial(experiment.name, trial.name)
            state = _CONDITIONS.get(trial.status.condition)
            if state is None:
                continue
            self._hub.finish(experiment.name, trial.name, state)
            if trial.status.condition == pb.TrialStatus.SUCCEEDED:
                succeeded.append(trial.name)
            if state is not TrialState.FAILED:
                value = _final(trial, config.objective_metric)
                if value is not None:
                    finals.append(value)
        if "medianstop" in config.policy_names:
            rules = self._medianstop_rules(experiment.name, config, request.trials, succeeded)
        else:
            rules = static_rules(config, finals)
        _log.info("experiment %s: %d static early-stopping rule(s)", experiment.name, len(rules))
        return pb.GetEarlyStoppingRulesReply(early_stopping_rules=rules)

    def _medianstop_rules(
        self, experiment: str, config: PruningConfig, trials: Any, succeeded: list[str]
    ) -> list[Any]:
        """Record the call (the trials created after it are judged against the trials it reported
        succeeded, ``policies.medianstop``) and return Katib's rule for them, for trials whose
        pod runs Katib's sidecar (service.py ``GetEarlyStoppingRules``: objective, ``str`` of the
        mean, LESS when maximizing else GREATER, ``start_step``)."""
        rule = self._hub.record_katib_call(
            experiment,
            [t.name for t in trials],
            succeeded,
            lambda state: katib_rule(
                state, state.katib_succeeded, config.start_step, config.min_trials_required
            ),
        )
        if rule is None:
            return []
        comparison = pb.LESS if config.direction == "maximize" else pb.GREATER
        return [
            pb.EarlyStoppingRule(
                name=config.objective_metric,
                value=str(rule[0]),
                comparison=comparison,
                start_step=config.start_step,
            )
        ]

    def SetTrialStatus(self, request: Any, context: grpc.ServicerContext) -> Any:
        if not request.trial_name:
            context.abort(grpc.StatusCode.INVALID_ARGUMENT, "trial_name: required")
        experiment = self._hub.experiment_of(request.trial_name)
        if experiment is None:
            # medianstop marks any Trial it is told about; so do we (the hub just cannot record it)
            _log.info("SetTrialStatus for a trial of an unknown experiment: %s", request.trial_name)
        else:
            self._hub.finish(experiment, request.trial_name, TrialState.PRUNED)
        if self._on_trial_stopped is not None:
            try:
                self._on_trial_stopped(experiment or "", request.trial_name)
            except Exception as exc:  # noqa: BLE001 - edge of a gRPC call: the caller must see it
                _log.warning("SetTrialStatus(%s) failed: %s", request.trial_name, exc)
                context.abort(grpc.StatusCode.UNAVAILABLE, f"trial {request.trial_name}: {exc}")
        return pb.SetTrialStatusReply()


def add_to_server(
    hub: PruningHub, server: grpc.Server, on_trial_stopped: TrialStopped | None = None
) -> list[str]:
    """Add Katib's EarlyStopping servicer over ``hub``; returns its name for grpc.health.v1."""
    servicer = EarlyStoppingServicer(hub, on_trial_stopped=on_trial_stopped)
    katib_api_pb2_grpc.add_EarlyStoppingServicer_to_server(servicer, server)
    return [SERVICE_NAME]
