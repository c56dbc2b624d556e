"""A stand-in for Katib's experiment/suggestion controllers, driving the service over real gRPC.

It keeps the trial list as Katib does (name, assignments, latest condition, observation), sends
it whole in every GetSuggestions request, creates trials under the names the service returns and
"trains" them with a formula of their parameters.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import grpc
from kubeflow.katib import katib_api_pb2 as pb
from kubeflow.katib import katib_api_pb2_grpc as pb_grpc

from katib_progress.suggestion._names import INCARNATION_SETTING

Cond = pb.TrialStatus.TrialConditionType


def param(
    name: str,
    kind: str,
    *,
    lo: str = "",
    hi: str = "",
    step: str = "",
    values: Sequence[str] = (),
    dist: str = "",
) -> Any:
    types = {"double": pb.DOUBLE, "int": pb.INT, "discrete": pb.DISCRETE, "categorical": pb.CATEGORICAL}
    dists = {
        "": pb.DISTRIBUTION_UNSPECIFIED,
        "uniform": pb.UNIFORM,
        "logUniform": pb.LOG_UNIFORM,
        "normal": pb.NORMAL,
        "logNormal": pb.LOG_NORMAL,
    }
    return pb.ParameterSpec(
        name=name,
        parameter_type=types[kind],
        feasible_space=pb.FeasibleSpace(
            min=lo, max=hi, step=step, list=list(values), distribution=dists[dist]
        ),
    )


DEFAULT_PARAMS = (
    param("lr", "double", lo="0.0001", hi="0.1", dist="logUniform"),
    param("layers", "int", lo="1", hi="8"),
    param("optimizer", "categorical", values=("sgd", "adam", "rmsprop")),
)


def experiment(
    name: str = "exp",
    algorithm: str = "tpe",
    settings: Mapping[str, str] | None = None,
    params: Sequence[Any] = DEFAULT_PARAMS,
    *,
    maximize: bool = False,
    metric: str = "loss",
    max_trials: int = 30,
    parallel: int = 3,
    early_stopping: str = "",
) -> Any:
    return pb.Experiment(
        name=name,
        spec=pb.ExperimentSpec(
            parameter_specs=pb.ExperimentSpec.ParameterSpecs(parameters=list(params)),
            objective=pb.ObjectiveSpec(
                type=pb.MAXIMIZE if maximize else pb.MINIMIZE, objective_metric_name=metric
            ),
            algorithm=pb.AlgorithmSpec(
                algorithm_name=algorithm,
                algorithm_settings=[
                    pb.AlgorithmSetting(name=k, value=v) for k, v in (settings or {}).items()
                ],
            ),
            max_trial_count=max_trials,
            parallel_trial_count=parallel,
            early_stopping=pb.EarlyStoppingSpec(algorithm_name=early_stopping),
        ),
    )


def default_objective(params: Mapping[str, str]) -> float:
    """A smooth loss of the parameters (minimum near lr=0.01, layers=4, adam)."""
    value = 0.0
    for name, text in params.items():
        try:
            x = float(text)
        except ValueError:
            value += {"adam": 0.0, "sgd": 0.3, "rmsprop": 0.1}.get(text, 0.2)
            continue
        if name == "lr":
            value += (math.log10(x) + 2) ** 2
        elif name == "layers":
            value += (x - 4) ** 2 / 10
        else:
            value += (x - 0.3) ** 2
    return value


@dataclass
class FakeTrial:
    name: str
    assignments: tuple[tuple[str, str], ...]
    condition: int = Cond.RUNNING
    metrics: dict[str, str] = field(default_factory=dict)
    objective: Any = None  # the experiment's ObjectiveSpec, copied into the trial as Katib does

    def to_proto(self) -> Any:
        # Katib's ConvertTrials (pkg/controller.v1beta1/suggestion/suggestionclient/suggestionclient.go)
        # copies the trial's objective (type, metric name) into TrialSpec.objective; Katib's own
        # Optuna service reads the metric name from there.
        return pb.Trial(
            name=self.name,
            spec=pb.TrialSpec(
                objective=self.objective,
                parameter_assignments=pb.TrialSpec.ParameterAssignments(
                    assignments=[pb.ParameterAssignment(name=n, value=v) for n, v in self.assignments]
                ),
            ),
            status=pb.TrialStatus(
                condition=self.condition,
                observation=pb.Observation(
                    metrics=[pb.Metric(name=k, value=v) for k, v in self.metrics.items()]
                ),
            ),
        )


class FakeKatib:
    def __init__(
        self,
        address: str,
        exp: Any,
        objective: Callable[[Mapping[str, str]], float] = default_objective,
        *,
        incarnation: str | None = "katib-fake",
    ) -> None:
        """``incarnation``: the one Katib holds from the start (so that two fakes of one experiment
        and seed get the same names and can be compared); None: none, as for a new Experiment,
        which the service's first reply then gives."""
        self.exp = exp
        self.objective = objective
        self.trials: list[FakeTrial] = []
        self.replies: list[list[tuple[str, tuple[tuple[str, str], ...]]]] = []
        # the Suggestion's status.algorithmSettings: what the service's replies asked to keep
        self.kept: dict[str, str] = {} if incarnation is None else {INCARNATION_SETTING: incarnation}
        self.connect(address)

    def connect(self, address: str) -> None:
        self.channel = grpc.insecure_channel(address)
        self.stub = pb_grpc.SuggestionStub(self.channel)

    def close(self) -> None:
        self.channel.close()

    @property
    def metric(self) -> str:
        return self.exp.spec.objective.objective_metric_name

    def validate(self) -> None:
        self.stub.ValidateAlgorithmSettings(
            pb.ValidateAlgorithmSettingsRequest(experiment=self.exp), timeout=30
        )

    def request(self, count: int) -> Any:
        objective = self.exp.spec.objective
        for trial in self.trials:
            if trial.objective is None:
                trial.objective = objective
        # Katib's ConvertTrials (suggestionclient.go) leaves out MetricsUnavailable trials and
        # EarlyStopped ones without an observation.
        sent = [
            t
            for t in self.trials
            if t.condition != Cond.METRICSUNAVAILABLE
            and not (t.condition == Cond.EARLYSTOPPED and not t.metrics)
        ]
        return pb.GetSuggestionsRequest(
            experiment=self.filled(),
            trials=[t.to_proto() for t in sent],
            current_request_number=count,
            total_request_number=len(self.trials) + count,
        )

    def filled(self) -> Any:
        """The Experiment with the kept settings over its own (algorithm_settings.go
        ``appendAlgorithmSettingsFromSuggestion``: a kept setting replaces one of the same name, else is
        appended)."""
        exp = pb.Experiment()
        exp.CopyFrom(self.exp)
        settings = exp.spec.algorithm.algorithm_settings
        for name, value in self.kept.items():
            found = next((s for s in settings if s.name == name), None)
            if found is not None:
                found.value = value
            else:
                settings.add(name=name, value=value)
        return exp

    def ask(self, count: int) -> list[FakeTrial]:
        reply = self.stub.GetSuggestions(self.request(count), timeout=60)
        # suggestionclient.go updateAlgorithmSettings: the reply's settings are kept in the status
        for setting in reply.algorithm.algorithm_settings:
            self.kept[setting.name] = setting.value
        assert len(reply.parameter_assignments) == count
        new = []
        for pa in reply.parameter_assignments:
            assert pa.trial_name, "the service must name its trials"
            new.append(FakeTrial(pa.trial_name, tuple((a.name, a.value) for a in pa.assignments)))
        self.replies.append([(t.name, t.assignments) for t in new])
        self.trials.extend(new)
        return new

    def finish(self, trial: FakeTrial, condition: int = Cond.SUCCEEDED) -> None:
        trial.condition = condition
        if condition in (Cond.SUCCEEDED, Cond.EARLYSTOPPED):
            trial.metrics[self.metric] = repr(self.objective(dict(trial.assignments)))

    def running(self) -> list[FakeTrial]:
        return [t for t in self.trials if t.condition == Cond.RUNNING]

    def step(self, until: int, parallel: int, fail_every: int = 0) -> bool:
        """One controller round: fill free slots with new trials, then finish the oldest running
        one (every ``fail_every``-th trial fails). False once everything has finished."""
        want = min(parallel - len(self.running()), until - len(self.trials))
        if want > 0:
            self.ask(want)
        running = self.running()
        if not running:
            return False
        oldest = running[0]
        fail = fail_every and (self.trials.index(oldest) + 1) % fail_every == 0
        self.finish(oldest, Cond.FAILED if fail else Cond.SUCCEEDED)
        return True

    def run(self, until: int, parallel: int, fail_every: int = 0) -> None:
        """Keep ``parallel`` trials going until ``until`` trials exist and all have finished."""
        while self.step(until, parallel, fail_every):
            pass
