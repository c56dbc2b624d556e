"""Plain domain types of the suggestion service (no Katib, no gRPC, no Optuna).

The Katib edge (``katib_progress.suggestion.katib``) converts protos into these; the study logic
works on them.
"""

from __future__ import annotations

import enum
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

from katib_progress.core.errors import PermanentError


class ParamType(enum.Enum):
    DOUBLE = "double"
    INT = "int"
    DISCRETE = "discrete"
    CATEGORICAL = "categorical"


class Distribution(enum.Enum):
    UNIFORM = "uniform"
    LOG_UNIFORM = "logUniform"
    NORMAL = "normal"
    LOG_NORMAL = "logNormal"


class Direction(enum.Enum):
    MINIMIZE = "minimize"
    MAXIMIZE = "maximize"


class TrialState(enum.Enum):
    """What the study records for a trial (Katib's condition, mapped)."""

    RUNNING = "running"
    COMPLETE = "complete"
    PRUNED = "pruned"
    FAIL = "fail"

    @property
    def finished(self) -> bool:
        return self is not TrialState.RUNNING


@dataclass(frozen=True, slots=True)
class ParamSpec:
    """One search-space parameter as Katib declares it (raw strings; checked by ``_space``)."""

    name: str
    type: ParamType | None
    min: str = ""
    max: str = ""
    step: str = ""
    values: tuple[str, ...] = ()
    distribution: Distribution | None = None


@dataclass(frozen=True, slots=True)
class ExperimentSpec:
    name: str
    algorithm: str
    settings: tuple[tuple[str, str], ...]
    params: tuple[ParamSpec, ...]
    objective_metric: str
    direction: Direction | None
    max_trial_count: int = 0
    parallel_trial_count: int = 0
    #: ``spec.earlyStopping.algorithmName`` ("" when unset)
    early_stopping: str = ""
    #: which creation of the Experiment this is ("" when Katib holds none yet): kept by Katib in the
    #: Suggestion's ``status.algorithmSettings`` (see ``_names``); never a search setting
    incarnation: str = ""


@dataclass(frozen=True, slots=True)
class Observation:
    """A trial's reported metrics: name -> value string, as Katib sends them."""

    metrics: tuple[tuple[str, str], ...] = ()

    def get(self, name: str) -> str | None:
        for metric, value in self.metrics:
            if metric == name:
                return value
        return None


@dataclass(frozen=True, slots=True)
class TrialRecord:
    """A trial as Katib reports it in a GetSuggestions request."""

    name: str
    assignments: tuple[tuple[str, str], ...]
    state: TrialState
    observation: Observation = Observation()


class ReportedTrial(Protocol):
    """What the study reads of a trial Katib reports: a ``TrialRecord``, or a view that reads the
    request on demand (the study needs every trial's name and state on each call, but the
    assignments and observation only of trials it has not recorded or finished yet)."""

    @property
    def name(self) -> str: ...

    @property
    def state(self) -> TrialState: ...

    @property
    def assignments(self) -> tuple[tuple[str, str], ...]: ...

    @property
    def observation(self) -> Observation: ...


@dataclass(frozen=True, slots=True)
class Suggestion:
    """One suggested trial: Katib's trial name and its parameter assignments (value strings)."""

    trial_name: str
    assignments: tuple[tuple[str, str], ...]


class InvalidExperimentError(PermanentError, ValueError):
    """The experiment (search space, objective or algorithm settings) cannot be served.

    ``problems`` lists every problem found, each naming the field, the value and what is allowed.
    """

    def __init__(self, problems: Sequence[str]) -> None:
        self.problems = tuple(problems)
        super().__init__("; ".join(self.problems))
