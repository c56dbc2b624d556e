"""The report's own data model: Katib-free records of one experiment and its trials.

Source adapters (a local sweep's workdir, a cluster experiment) fill these; the analysis and the
renderers read only these, so a new source (e.g. Kubeflow Trainer's OptimizationJob) needs only an
adapter.
"""

from __future__ import annotations

import enum
import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from types import MappingProxyType
from typing import Literal

from katib_progress.core.strategy import STRATEGIES, Strategy

Direction = Literal["minimize", "maximize"]
LOG_DISTRIBUTIONS = ("logUniform", "logNormal")  # Katib distributions drawn on log axes


def _frozen(mapping: Mapping[str, object] | None) -> MappingProxyType:
    return MappingProxyType(dict(mapping or {}))


class TrialStatus(enum.StrEnum):
    """Where a trial ended (or stands). ``METRICS_UNAVAILABLE`` is Katib's terminal "no objective"."""

    SUCCEEDED = "succeeded"
    PRUNED = "pruned"
    FAILED = "failed"
    METRICS_UNAVAILABLE = "metrics unavailable"
    KILLED = "killed"  # stopped by the experiment (goal reached, too many failures)
    INTERRUPTED = "interrupted"  # a local sweep was interrupted; its next run starts the trial again
    RUNNING = "running"
    PENDING = "pending"

    @property
    def terminal(self) -> bool:
        return self not in (TrialStatus.RUNNING, TrialStatus.PENDING)


@dataclass(frozen=True, slots=True)
class Objective:
    """The experiment's objective and Katib's per-metric extraction strategies.

    A metric without an explicit strategy uses Katib's default: ``min`` when minimizing, ``max``
    when maximizing.
    """

    metric: str
    direction: Direction = "minimize"
    goal: float | None = None
    additional_metrics: tuple[str, ...] = ()
    strategies: Mapping[str, str] = field(default_factory=lambda: MappingProxyType({}))

    def __post_init__(self) -> None:
        if not self.metric:
            raise ValueError("objective.metric must be a non-empty metric name, got ''")
        if self.direction not in ("minimize", "maximize"):
            raise ValueError(f"objective.direction must be minimize or maximize, got {self.direction!r}")
        for name, value in self.strategies.items():
            if value not in STRATEGIES:
                raise ValueError(f"objective.strategies[{name!r}] must be min, max or latest, got {value!r}")
        object.__setattr__(self, "strategies", _frozen(self.strategies))
        object.__setattr__(self, "additional_metrics", tuple(self.additional_metrics))

    def strategy(self, metric: str) -> Strategy:
        value = self.strategies.get(metric)
        if value in STRATEGIES:
            return value
        return "min" if self.direction == "minimize" else "max"

    def better(self, a: float, b: float) -> bool:
        """True when objective value ``a`` is strictly better than ``b``."""
        return a < b if self.direction == "minimize" else a > b


@dataclass(frozen=True, slots=True)
class ParameterSpec:
    """A search-space parameter: ``kind`` is Katib's parameterType (double, int, discrete, categorical);
    ``log`` when its distribution is logUniform or logNormal (drawn on log axes)."""

    name: str
    kind: str = "double"
    low: float | None = None
    high: float | None = None
    choices: tuple[str, ...] = ()
    log: bool = False


@dataclass(frozen=True, slots=True)
class CurvePoint:
    """One reported snapshot of a trial: progress %, elapsed and ETA seconds, and metric values."""

    timestamp: datetime | None
    progress: float | None = None
    elapsed_s: float | None = None
    eta_s: float | None = None
    metrics: Mapping[str, float] = field(default_factory=lambda: MappingProxyType({}))

    def __post_init__(self) -> None:
        if self.progress is not None and not (0.0 <= self.progress <= 100.0):
            raise ValueError(f"curve point progress must be within 0..100, got {self.progress}")
        if self.eta_s is not None and not (self.eta_s >= 0):
            raise ValueError(f"curve point eta_s must be >= 0, got {self.eta_s}")
        object.__setattr__(self, "metrics", _frozen(self.metrics))


@dataclass(frozen=True, slots=True)
class TrialRecord:
    """One trial as the report sees it.

    ``observation`` holds metric values already extracted by the source (Katib's Trial
    ``status.observation`` or the sweep's summary); when a metric is absent there, the report
    extracts it from ``curve`` with the objective's strategy. ``accelerators`` is the number of
    accelerators the trial held (GPUs x nodes); ``accelerators_known`` is False when the source
    could not tell and the value is an assumption. ``progress`` and ``eta_at_prune_s`` are the
    source's own latest progress % and (for a pruned trial) the ETA it reported when pruned; when
    None the report takes them from ``curve``. ``compute_s`` is the run time of every attempt when the
    source knows it (a local sweep re-runs interrupted trials); ``latest`` the last value of each
    metric the trial reported, non-finite ones included (they never become observation rows).
    """

    name: str
    params: Mapping[str, str] = field(default_factory=lambda: MappingProxyType({}))
    status: TrialStatus = TrialStatus.PENDING
    reason: str = ""
    message: str = ""
    started: datetime | None = None
    ended: datetime | None = None
    accelerators: float = 1.0
    accelerators_known: bool = False
    curve: tuple[CurvePoint, ...] = ()
    observation: Mapping[str, float] = field(default_factory=lambda: MappingProxyType({}))
    log_tail: str = ""
    progress: float | None = None
    eta_at_prune_s: float | None = None
    compute_s: float | None = None
    latest: Mapping[str, float] = field(default_factory=lambda: MappingProxyType({}))

    def __post_init__(self) -> None:
        if not self.name:
            raise ValueError("trial.name must be non-empty, got ''")
        if not (self.accelerators >= 0 and math.isfinite(self.accelerators)):
            raise ValueError(f"trial.accelerators must be a finite number >= 0, got {self.accelerators}")
        object.__setattr__(self, "params", _frozen({k: str(v) for k, v in self.params.items()}))
        if self.compute_s is not None and not (self.compute_s >= 0 and math.isfinite(self.compute_s)):
            raise ValueError(f"trial.compute_s must be a finite number >= 0, got {self.compute_s}")
        object.__setattr__(self, "observation", _frozen(self.observation))
        object.__setattr__(self, "latest", _frozen(self.latest))
        object.__setattr__(self, "curve", tuple(self.curve))
        object.__setattr__(self, "status", TrialStatus(self.status))


@dataclass(frozen=True, slots=True)
class ExperimentRecord:
    """An experiment and its trials, from whichever source."""

    name: str
    objective: Objective
    trials: tuple[TrialRecord, ...] = ()
    parameters: tuple[ParameterSpec, ...] = ()
    namespace: str | None = None
    source: str = ""
    observed_at: datetime | None = None
    notes: tuple[str, ...] = ()
    finished: bool = False
    status: str = ""  # the experiment's state (Katib condition / local sweep status), "" if unknown
    reason: str = ""
    message: str = ""
    accelerator: str = "GPU"  # what a trial-hour is counted in: "GPU", or "compute" without accelerators

    def __post_init__(self) -> None:
        names = [t.name for t in self.trials]
        if len(set(names)) != len(names):
            dup = sorted({n for n in names if names.count(n) > 1})
            raise ValueError(f"experiment.trials has duplicate trial names: {dup}")
        object.__setattr__(self, "trials", tuple(self.trials))
        object.__setattr__(self, "parameters", tuple(self.parameters))
        object.__setattr__(self, "notes", tuple(self.notes))
