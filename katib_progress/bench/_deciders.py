"""The ``Decider`` seam of the replay harness, and the baselines implemented in the harness itself.

A decider sees every progress point of every trial in simulated-time order, says CONTINUE or PRUNE,
and is told when a trial starts and how it ended. Adapters for the project's pruning engine (library
and gRPC) live in ``_engine.py``; real Optuna pruners in ``_optuna.py``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal, Protocol

from katib_progress.core.types import Decision, ProgressPoint, Verdict

TrialEnd = Literal["succeeded", "pruned", "failed"]
Direction = Literal["minimize", "maximize"]


@dataclass(frozen=True, slots=True)
class Objective:
    """What a decider needs to know about the experiment's objective."""

    metric: str
    direction: Direction


class Decider(Protocol):
    """One pruning policy under test. A fresh instance serves one replay."""

    name: str

    def start(self, trial: str) -> None:
        """A trial was created (Katib asks its early-stopping service for rules at this moment)."""

    def decide(self, point: ProgressPoint) -> Decision:
        """CONTINUE or PRUNE the point's trial."""

    def finish(self, trial: str, state: TrialEnd, observation: float | None) -> None:
        """The trial ended; ``observation`` is its objective as Katib records it (None if none)."""

    def close(self) -> None:
        """Release resources (channels, servers)."""


class NoPruning:
    """Never prunes: the reference every compute fraction is measured against."""

    name = "none"

    def start(self, trial: str) -> None:
        return None

    def decide(self, point: ProgressPoint) -> Decision:
        return Decision(Verdict.CONTINUE, "no pruning", self.name)

    def finish(self, trial: str, state: TrialEnd, observation: float | None) -> None:
        return None

    def close(self) -> None:
        return None


class KatibMedianStop:
    """Stock Katib ``medianstop`` (v1beta1) as it actually behaves, re-implemented from its facts.

    - History: for every trial that ended SUCCEEDED (early-stopped and failed trials never count),
      the mean of its FIRST ``start_step`` reported objective values.
    - Threshold: the arithmetic MEAN of those per-trial means (not a median), available once at
      least ``min_trials_required`` trials succeeded; computed when a trial is created
      (``GetEarlyStoppingRules`` is called then) and fixed for that trial's life.
    - Rule: objective GREATER than threshold (minimize) / LESS than threshold (maximize), with
      ``start_step``. The stock sidecar counts the objective's reports and evaluates the rule only at
      the report whose count reaches ``start_step`` exactly (its counter keeps decreasing past zero
      afterwards), so a trial is checked once. The sidecar meant to compare the best-so-far value,
      but its best-so-far pointer never leaves the helper function, so the current value is compared;
      ``best_so_far=True`` gives the intended behaviour instead.
    - Only finite values count: the push collector never writes non-finite rows.
    """

    def __init__(
        self,
        objective: Objective,
        *,
        start_step: int = 4,
        min_trials_required: int = 3,
        best_so_far: bool = False,
    ) -> None:
        if start_step < 1:
            raise ValueError(f"start_step must be >= 1, got {start_step}")
        if min_trials_required < 1:
            raise ValueError(f"min_trials_required must be >= 1, got {min_trials_required}")
        self.name = "katib-medianstop"
        self._objective = objective
        self._start_step = start_step
        self._min_trials = min_trials_required
        self._best_so_far = best_so_far
        self._history: dict[str, float] = {}
        self._threshold: dict[str, float | None] = {}
        self._reported: dict[str, list[float]] = {}
        self._seen: dict[str, int] = {}

    def _current_threshold(self) -> float | None:
        if len(self._history) < self._min_trials:
            return None
        return sum(self._history.values()) / len(self._history)

    def start(self, trial: str) -> None:
        self._threshold[trial] = self._current_threshold()
        self._reported[trial] = []

    def decide(self, point: ProgressPoint) -> Decision:
        trial = point.trial
        if trial not in self._threshold:
            self.start(trial)
        if point.seq <= self._seen.get(trial, -1):
            return Decision(Verdict.CONTINUE, "repeated point", self.name)
        self._seen[trial] = point.seq
        value = point.metrics.get(self._objective.metric)
        if value is None or not math.isfinite(value):
            return Decision(Verdict.CONTINUE, "no finite objective in this report", self.name)
        reported = self._reported[trial]
        reported.append(value)
        threshold = self._threshold[trial]
        if threshold is None:
            return Decision(Verdict.CONTINUE, "fewer succeeded trials than min_trials_required", self.name)
        if len(reported) != self._start_step:
            return Decision(Verdict.CONTINUE, f"rule applies at report {self._start_step} only", self.name)
        minimize = self._objective.direction == "minimize"
        compared = (min(reported) if minimize else max(reported)) if self._best_so_far else value
        worse = compared > threshold if minimize else compared < threshold
        evidence = {"value": compared, "threshold": threshold, "reports": float(len(reported))}
        if worse:
            return Decision(
                Verdict.PRUNE, f"{compared:.4g} worse than mean {threshold:.4g}", self.name, evidence
            )
        return Decision(
            Verdict.CONTINUE, f"{compared:.4g} not worse than mean {threshold:.4g}", self.name, evidence
        )

    def finish(self, trial: str, state: TrialEnd, observation: float | None) -> None:
        reported = self._reported.pop(trial, [])
        self._threshold.pop(trial, None)
        if state == "succeeded" and reported:
            first = reported[: self._start_step]
            self._history[trial] = sum(first) / len(first)

    def close(self) -> None:
        return None
