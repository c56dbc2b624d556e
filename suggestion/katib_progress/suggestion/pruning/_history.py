"""Per-trial learning curves as the pruning policies see them (Katib-free, no gRPC).

A trial's objective is kept twice: the raw points as reported (progress %, value) and the same curve
resampled onto a fixed progress grid (linear interpolation between consecutive reports), so that peers
reporting at different progress values can be compared step by step (Optuna pruners compare values at
equal integer steps).
"""

from __future__ import annotations

import enum
import math
from dataclasses import dataclass, field
from typing import Literal


class Direction(enum.Enum):
    MINIMIZE = "minimize"
    MAXIMIZE = "maximize"

    def better(self, a: float, b: float) -> bool:
        """True when ``a`` is strictly better than ``b``."""
        return a < b if self is Direction.MINIMIZE else a > b

    def best(self, values: list[float]) -> float:
        return min(values) if self is Direction.MINIMIZE else max(values)


#: Katib's metricStrategies: how a trial's observation is taken from its values.
Strategy = Literal["min", "max", "latest"]


def default_strategy(direction: Direction) -> Strategy:
    """Katib's default when an Experiment names no strategy for its objective: min when minimizing,
    max when maximizing (kubeflow/katib pkg/apis/controller/experiments/v1beta1/experiment_defaults.go,
    ``Experiment.setDefaultObjective``)."""
    return "min" if direction is Direction.MINIMIZE else "max"


class TrialState(enum.Enum):
    RUNNING = "running"
    COMPLETE = "complete"
    PRUNED = "pruned"
    FAILED = "failed"

    @property
    def finished(self) -> bool:
        return self is not TrialState.RUNNING


_STATE_NAMES = {
    "complete": TrialState.COMPLETE,
    "completed": TrialState.COMPLETE,
    "succeeded": TrialState.COMPLETE,
    "pruned": TrialState.PRUNED,
    "early_stopped": TrialState.PRUNED,
    "earlystopped": TrialState.PRUNED,
    "failed": TrialState.FAILED,
    "killed": TrialState.FAILED,
}


def parse_state(state: TrialState | str) -> TrialState:
    if isinstance(state, TrialState):
        return state
    try:
        return _STATE_NAMES[state.strip().lower()]
    except KeyError:
        raise ValueError(f"trial state {state!r} is not one of {', '.join(sorted(_STATE_NAMES))}") from None


@dataclass(slots=True)
class TrialHistory:
    """Mutable state the engine keeps for one trial; policies only read it.

    ``progress``/``values`` hold finite objective values in increasing progress order; ``grid`` maps
    grid step -> interpolated value for every grid step the curve has crossed.
    """

    name: str
    grid_step: float
    progress: list[float] = field(default_factory=list)
    values: list[float] = field(default_factory=list)
    grid: dict[int, float] = field(default_factory=dict)
    last_progress: float | None = None
    elapsed_s: float | None = None
    eta_s: float | None = None
    state: TrialState = TrialState.RUNNING
    #: Every finite objective value the trial reported, one per point, in order: the rows of its
    #: observation log (the collector writes none for NaN or infinities); ``medianstop`` counts them.
    reports: list[float] = field(default_factory=list)
    #: The trials that had completed when the engine first met this one, in the order they ended
    #: (``medianstop``'s peers when Katib never called GetEarlyStoppingRules).
    completed_before: tuple[str, ...] = ()

    @property
    def first_value(self) -> float | None:
        return self.values[0] if self.values else None

    @property
    def last_step(self) -> int | None:
        return max(self.grid) if self.grid else None

    def best_value(self, direction: Direction) -> float | None:
        return direction.best(self.values) if self.values else None

    def recorded(self, strategy: Strategy) -> float | None:
        """The observation Katib would record if the trial ended now (finite values only)."""
        if not self.values:
            return None
        if strategy == "min":
            return min(self.values)
        if strategy == "max":
            return max(self.values)
        return self.values[-1]

    def remaining_fraction(self) -> float | None:
        """Share of the trial's total compute still ahead, from the ETA when known, else progress."""
        if self.eta_s is not None and self.elapsed_s is not None and self.elapsed_s + self.eta_s > 0:
            return self.eta_s / (self.elapsed_s + self.eta_s)
        if self.last_progress is not None:
            return max(0.0, 100.0 - self.last_progress) / 100.0
        return None

    def add(self, progress: float, value: float) -> list[tuple[int, float]]:
        """Append one finite objective value; return the grid steps it newly fills.

        A value at the same progress as the last one replaces it (only the raw curve changes: grid
        steps already filled are kept, so a repeated report never rewrites history). A value at a
        lower progress than the last one is ignored (a restarted job re-reporting old progress).
        """
        if self.progress and progress < self.progress[-1]:
            return []
        if self.progress and progress == self.progress[-1]:
            self.values[-1] = value
            return []
        new: list[tuple[int, float]] = []
        step_hi = math.floor(progress / self.grid_step + 1e-9)
        if not self.progress:
            new.append((step_hi, value))
        else:
            p0, v0 = self.progress[-1], self.values[-1]
            step_lo = math.floor(p0 / self.grid_step + 1e-9) + 1
            for step in range(step_lo, step_hi + 1):
                x = step * self.grid_step
                new.append((step, v0 + (value - v0) * (x - p0) / (progress - p0)))
        self.progress.append(progress)
        self.values.append(value)
        for step, v in new:
            self.grid[step] = v
        return new

    def curve(self) -> list[tuple[float, float]]:
        return list(zip(self.progress, self.values, strict=True))

    def value_at(self, progress: float) -> float | None:
        """Linearly interpolated objective at ``progress`` (None outside the observed range)."""
        if not self.progress or progress < self.progress[0] or progress > self.progress[-1]:
            return None
        for i in range(1, len(self.progress)):
            if self.progress[i] >= progress:
                p0, p1 = self.progress[i - 1], self.progress[i]
                v0, v1 = self.values[i - 1], self.values[i]
                return v1 if p1 == p0 else v0 + (v1 - v0) * (progress - p0) / (p1 - p0)
        return self.values[0]


@dataclass(slots=True)
class RecordedGrid:
    """One trial's grid as Katib would record it at each step: the running best for ``min`` / ``max``, the
    value itself for ``latest`` (the objective's metric strategy); extended from ``TrialHistory.grid`` as the
    trial reports. Shared by the policies that rank trials by recorded values (adaptive, trend_halving)."""

    steps: list[int] = field(default_factory=list)
    values: list[float] = field(default_factory=list)

    def extend(self, grid: dict[int, float], strategy: Strategy) -> None:
        """Record the steps of ``grid`` not recorded yet (the engine's grid only grows at its end)."""
        for s, value in list(grid.items())[len(self.steps) :]:
            v = value
            if self.values and strategy != "latest":
                prev = self.values[-1]
                v = min(prev, value) if strategy == "min" else max(prev, value)
            self.steps.append(s)
            self.values.append(v)

    def at(self, step: int) -> float | None:
        """The recorded value at ``step`` (None if the trial has not reached it). The engine's grid is
        dense from the trial's first step (``TrialHistory.add`` fills every step it crosses)."""
        if not self.steps or step < self.steps[0] or step > self.steps[-1]:
            return None
        return self.values[step - self.steps[0]]


@dataclass(slots=True)
class ExperimentState:
    """Every trial the engine has seen for one experiment, plus experiment-wide accounting."""

    direction: Direction
    strategy: Strategy = "min"
    trials: dict[str, TrialHistory] = field(default_factory=dict)
    ended: list[str] = field(default_factory=list)  # trial names in the order they ended
    #: Katib's GetEarlyStoppingRules calls, for ``medianstop``: the trials each call reported
    #: SUCCEEDED for the first time, in that order (medianstop/service.py ``trials_avg_history``'s
    #: insertion order), and per call the trial names it carried with how many of those it had seen.
    katib_succeeded: list[str] = field(default_factory=list)
    katib_calls: list[tuple[frozenset[str], int]] = field(default_factory=list)

    def record_katib_call(self, names: list[str], succeeded: list[str]) -> None:
        """One GetEarlyStoppingRules request: every trial it carried, and those SUCCEEDED."""
        known = set(self.katib_succeeded)
        for name in succeeded:
            if name not in known:
                known.add(name)
                self.katib_succeeded.append(name)
        self.katib_calls.append((frozenset(names), len(self.katib_succeeded)))

    def peers(self, trial: str) -> list[TrialHistory]:
        return [t for name, t in self.trials.items() if name != trial]

    def best_other(self, trial: str) -> tuple[float, str] | None:
        """Best recorded objective (by the metric strategy) among the other trials that can still be
        found: running and completed ones (a pruned or failed trial's value is never the result), and
        which trial holds it."""
        best: tuple[float, str] | None = None
        for t in self.peers(trial):
            if t.state in (TrialState.PRUNED, TrialState.FAILED):
                continue
            v = t.recorded(self.strategy)
            if v is not None and (best is None or self.direction.better(v, best[0])):
                best = (v, t.name)
        return best

    def leads(self, trial: TrialHistory) -> bool:
        """``trial`` holds the best recorded objective: at least one other running or completed trial
        has a recorded value and none is better. A trial with no such peer does not lead."""
        other = self.best_other(trial.name)
        mine = trial.recorded(self.strategy)
        return other is not None and mine is not None and not self.direction.better(other[0], mine)

    def gpu_seconds(self, gpus_per_trial: float) -> float:
        return sum((t.elapsed_s or 0.0) for t in self.trials.values()) * gpus_per_trial
