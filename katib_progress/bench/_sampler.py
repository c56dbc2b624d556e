"""Trial source driven by the suggestion service over Katib's Suggestion gRPC API.

The bench plays Katib's controller: it asks ``GetSuggestions`` for as many trials as there are free
workers, sending every trial so far with its condition (RUNNING, SUCCEEDED, EARLYSTOPPED, FAILED) and
observation, and answers each suggestion with the bank's nearest configuration, whose curve is then
replayed.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import grpc
from kubeflow.katib import katib_api_pb2, katib_api_pb2_grpc

from katib_progress.bench._bank import Bank, BankTrial
from katib_progress.bench._sim import TrialOutcome
from katib_progress.bench._sources import NearestConfig
from katib_progress.core.errors import PermanentError
from katib_progress.suggestion._names import INCARNATION_SETTING

# The generated Katib stubs carry no type information.
pb: Any = katib_api_pb2
pb_grpc: Any = katib_api_pb2_grpc

_TYPES = {
    "double": pb.DOUBLE,
    "int": pb.INT,
    "discrete": pb.DISCRETE,
    "categorical": pb.CATEGORICAL,
}
_CONDITIONS = {
    "succeeded": pb.TrialStatus.TrialConditionType.SUCCEEDED,
    "pruned": pb.TrialStatus.TrialConditionType.EARLYSTOPPED,
    "failed": pb.TrialStatus.TrialConditionType.FAILED,
}


def _fmt_number(value: float | None) -> str:
    if value is None:
        return ""
    return str(int(value)) if float(value).is_integer() else repr(float(value))


def experiment_proto(bank: Bank, name: str, *, algorithm: str, seed: int, parallel: int, budget: int) -> Any:
    """The Katib Experiment (as the Suggestion API carries it) for replaying ``bank``."""
    specs = []
    for p in bank.parameters:
        space = pb.FeasibleSpace()
        if p.type in ("double", "int"):
            space.min = _fmt_number(p.min)
            space.max = _fmt_number(p.max)
            space.distribution = pb.LOG_UNIFORM if p.log else pb.UNIFORM
        else:
            space.list.extend(str(v) for v in p.values)
        specs.append(pb.ParameterSpec(name=p.name, parameter_type=_TYPES[p.type], feasible_space=space))
    return pb.Experiment(
        name=name,
        spec=pb.ExperimentSpec(
            parameter_specs=pb.ExperimentSpec.ParameterSpecs(parameters=specs),
            objective=pb.ObjectiveSpec(
                type=pb.MINIMIZE if bank.direction == "minimize" else pb.MAXIMIZE,
                objective_metric_name=bank.metric,
            ),
            algorithm=pb.AlgorithmSpec(
                algorithm_name=algorithm,
                algorithm_settings=[
                    pb.AlgorithmSetting(name="random_state", value=str(seed)),
                    # a fixed incarnation, as Katib would send back the one of the first reply: the
                    # replay's trial names then depend on the seed alone (suggestion/_names.py)
                    pb.AlgorithmSetting(name=INCARNATION_SETTING, value=f"bench-{seed}"),
                ],
            ),
            parallel_trial_count=parallel,
            max_trial_count=budget,
        ),
    )


@dataclass(slots=True)
class _Record:
    name: str
    assignments: list[tuple[str, str]]
    condition: int = pb.TrialStatus.TrialConditionType.RUNNING
    observation: float | None = None
    labels: dict[str, str] = field(default_factory=dict)


class SuggestionSource:
    """Ask the suggestion service at ``address`` for trials; stop after ``budget`` trials."""

    def __init__(
        self,
        bank: Bank,
        address: str,
        *,
        experiment: str,
        budget: int,
        seed: int = 0,
        algorithm: str = "tpe",
        workers: int = 4,
        timeout: float = 30.0,
    ) -> None:
        if budget < 1:
            raise ValueError(f"budget must be >= 1, got {budget}")
        self._bank = bank
        self._nearest = NearestConfig(bank)
        self._experiment = experiment_proto(
            bank, experiment, algorithm=algorithm, seed=seed, parallel=workers, budget=budget
        )
        self._budget = budget
        self._timeout = timeout
        self._channel = grpc.insecure_channel(address)
        self._stub = pb_grpc.SuggestionStub(self._channel)
        self._records: dict[str, _Record] = {}
        self.mapped: list[tuple[dict[str, str], int]] = []  # (assignment, bank index), for inspection

    def close(self) -> None:
        self._channel.close()

    def _trial_proto(self, record: _Record) -> Any:
        status = pb.TrialStatus(condition=record.condition)
        if record.observation is not None and math.isfinite(record.observation):
            status.observation.metrics.append(
                pb.Metric(name=self._bank.metric, value=repr(record.observation))
            )
        return pb.Trial(
            name=record.name,
            spec=pb.TrialSpec(
                parameter_assignments=pb.TrialSpec.ParameterAssignments(
                    assignments=[pb.ParameterAssignment(name=n, value=v) for n, v in record.assignments]
                ),
                labels=record.labels,
            ),
            status=status,
        )

    def next_trials(self, count: int, now_s: float) -> Sequence[tuple[str, BankTrial]]:
        count = min(count, self._budget - len(self._records))
        if count <= 0:
            return []
        request = pb.GetSuggestionsRequest(
            experiment=self._experiment,
            trials=[self._trial_proto(r) for r in self._records.values()],
            current_request_number=count,
            total_request_number=len(self._records) + count,
        )
        try:
            reply = self._stub.GetSuggestions(request, timeout=self._timeout)
        except grpc.RpcError as exc:
            raise PermanentError(f"GetSuggestions failed: {exc.code()} {exc.details()}") from exc
        out = []
        for assignment in reply.parameter_assignments[:count]:
            name = assignment.trial_name or f"{self._experiment.name}-{len(self._records):04d}"
            values = [(a.name, a.value) for a in assignment.assignments]
            trial = self._nearest.nearest(dict(values))
            self._records[name] = _Record(name, values, labels=dict(assignment.labels))
            self.mapped.append((dict(values), trial.index))
            out.append((name, trial))
        return out

    def running(self, name: str, points: int) -> None:
        return None

    def ended(self, outcome: TrialOutcome) -> None:
        record = self._records[outcome.name]
        record.condition = _CONDITIONS[outcome.state]
        record.observation = outcome.observation
