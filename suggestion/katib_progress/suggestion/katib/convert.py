"""Katib ``api.v1.beta1`` protos <-> suggestion domain types. No search logic here."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from kubeflow.katib import katib_api_pb2

from katib_progress.suggestion._domain import (
    Direction,
    Distribution,
    ExperimentSpec,
    Observation,
    ParamSpec,
    ParamType,
    Suggestion,
    TrialState,
)
from katib_progress.suggestion._names import INCARNATION_SETTING
from katib_progress.suggestion._settings import canonical_algorithm

# The generated module has no type stubs: treat its messages as Any.
pb: Any = katib_api_pb2

_PARAM_TYPES = {
    pb.DOUBLE: ParamType.DOUBLE,
    pb.INT: ParamType.INT,
    pb.DISCRETE: ParamType.DISCRETE,
    pb.CATEGORICAL: ParamType.CATEGORICAL,
}
_DISTRIBUTIONS = {
    pb.UNIFORM: Distribution.UNIFORM,
    pb.LOG_UNIFORM: Distribution.LOG_UNIFORM,
    pb.NORMAL: Distribution.NORMAL,
    pb.LOG_NORMAL: Distribution.LOG_NORMAL,
}
_DIRECTIONS = {pb.MINIMIZE: Direction.MINIMIZE, pb.MAXIMIZE: Direction.MAXIMIZE}

_Condition = pb.TrialStatus.TrialConditionType
# Katib sends only a trial's latest condition. Killed, Failed and MetricsUnavailable end a trial
# without a usable objective; Created, Running and Unknown are still going as far as we know.
_CONDITIONS = {
    _Condition.SUCCEEDED: TrialState.COMPLETE,
    _Condition.EARLYSTOPPED: TrialState.PRUNED,
    _Condition.FAILED: TrialState.FAIL,
    _Condition.KILLED: TrialState.FAIL,
    _Condition.METRICSUNAVAILABLE: TrialState.FAIL,
}


def experiment_from_proto(experiment: Any) -> ExperimentSpec:
    spec = experiment.spec
    params = tuple(
        ParamSpec(
            name=p.name,
            type=_PARAM_TYPES.get(p.parameter_type),
            min=p.feasible_space.min,
            max=p.feasible_space.max,
            step=p.feasible_space.step,
            values=tuple(p.feasible_space.list),
            distribution=_DISTRIBUTIONS.get(p.feasible_space.distribution),
        )
        for p in spec.parameter_specs.parameters
    )
    settings = tuple((s.name, s.value) for s in spec.algorithm.algorithm_settings)
    return ExperimentSpec(
        name=experiment.name,
        algorithm=canonical_algorithm(spec.algorithm.algorithm_name),
        settings=tuple(s for s in settings if s[0] != INCARNATION_SETTING),
        params=params,
        objective_metric=spec.objective.objective_metric_name,
        direction=_DIRECTIONS.get(spec.objective.type),
        max_trial_count=spec.max_trial_count,
        parallel_trial_count=spec.parallel_trial_count,
        early_stopping=spec.early_stopping.algorithm_name,
        incarnation=next((v for k, v in settings if k == INCARNATION_SETTING), ""),
    )


class ProtoTrial:
    """A trial of a GetSuggestions request (a ``ReportedTrial``) whose assignments and observation
    are read from the proto when first asked for. Katib sends every trial in every request, and
    the study reads those two only for trials it has not recorded or finished yet: reading them
    for all 1,000 trials of a request took about 8 ms."""

    __slots__ = ("_assignments", "_observation", "_proto", "_state", "name")

    def __init__(self, trial: Any) -> None:
        self._proto = trial
        self.name: str = trial.name
        self._state: TrialState | None = None
        self._assignments: tuple[tuple[str, str], ...] | None = None
        self._observation: Observation | None = None

    @property
    def state(self) -> TrialState:
        """Read when first asked for too: the study asks only for new and still-running trials
        (reading every trial's condition took 1 ms of a 1,000-trial request, its name 0.3 ms)."""
        if self._state is None:
            self._state = _CONDITIONS.get(self._proto.status.condition, TrialState.RUNNING)
        return self._state

    @property
    def assignments(self) -> tuple[tuple[str, str], ...]:
        if self._assignments is None:
            items = self._proto.spec.parameter_assignments.assignments
            self._assignments = tuple((a.name, a.value) for a in items)
        return self._assignments

    @property
    def observation(self) -> Observation:
        if self._observation is None:
            metrics = self._proto.status.observation.metrics
            self._observation = Observation(tuple((m.name, m.value) for m in metrics))
        return self._observation


def reply_to_proto(suggestions: Sequence[Suggestion], incarnation: str = "") -> Any:
    """Built in place with ``add`` (a third of the time of building each message and copying it
    into its parent, 7 us instead of 19 for 3 suggestions of 5 parameters).

    ``incarnation`` goes back as an algorithm setting: Katib keeps the reply's settings in the
    Suggestion's ``status.algorithmSettings`` and sends them in every later request
    (suggestionclient.go ``updateAlgorithmSettings`` / ``appendAlgorithmSettingsFromSuggestion``)."""
    reply = pb.GetSuggestionsReply()
    if incarnation:
        reply.algorithm.algorithm_settings.add(name=INCARNATION_SETTING, value=incarnation)
    add_suggestion = reply.parameter_assignments.add
    for s in suggestions:
        add_assignment = add_suggestion(trial_name=s.trial_name).assignments.add
        for name, value in s.assignments:
            add_assignment(name=name, value=value)
    return reply
