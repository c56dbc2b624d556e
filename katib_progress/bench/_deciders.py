"""The ``Decider`` seam of the replay harness, and the baselines implemented in the harness itself.

A decider sees every progress point of every trial in simulated-time order, says CONTINUE or PRUNE,
and is told when a trial starts and how it ended. Adapters for the project's pruning engine (library
and gRPC) live in ``_engine.py``; real Optuna pruners in ``_optuna.py``.
"""

from __future__ import annotations

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
    strategy: str | None = None  # Katib metricStrategies value; None: Katib's default for direction


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
    """Stock Katib ``medianstop`` (v1beta1) with the stock file metrics collector, as upstream applies it.

    Modelled on kubeflow/katib ``pkg/earlystopping/v1beta1/medianstop/service.py``
    (``MedianStopService.GetEarlyStoppingRules`` / ``get_median_value``),
    ``pkg/controller.v1beta1/suggestion/suggestionclient/suggestionclient.go`` (``SyncAssignments``) and
    ``cmd/metricscollector/v1beta1/file-metricscollector/main.go`` (``watchMetricsFile``,
    ``updateStopRules``):

    - Rule fixed at trial start: Katib asks for rules right after ``GetSuggestions`` (``SyncAssignments``)
      and stores them in the new Trial's spec, so the threshold a trial is judged by is the one that held
      when it was created.
    - History (``get_median_value``): for every trial whose condition is SUCCEEDED (early-stopped and
      failed trials never count), the mean of the first ``start_step`` objective rows of its observation
      log. The threshold is the arithmetic MEAN of those per-trial means (not a median), once at least
      ``min_trials_required`` trials succeeded; before that there is no rule.
    - Rule: objective GREATER than the threshold (minimize) / LESS than it (maximize).
    - Checked once, at ``start_step`` (``updateStopRules``): the sidecar counts the objective's reports
      down from ``start_step`` and evaluates the rule only when the count reaches zero exactly (it keeps
      decreasing past zero afterwards). It compares the best value so far (``optimalObjValue``, updated
      with the objective type's ``<``/``>`` on every report).
    - Non-finite reports: the JSON-format sidecar parses "nan"/"inf" with Go's ``ParseFloat``, so they
      count as reports; Go's comparisons with NaN are false, so a NaN first value stays the best so far
      and never prunes, and a NaN row in a succeeded trial's first ``start_step`` rows makes its mean,
      and so the threshold, NaN (no trial is pruned after that), as Python's ``float`` arithmetic does
      in the service.
    """

    def __init__(self, objective: Objective, *, start_step: int = 4, min_trials_required: int = 3) -> None:
        if start_step < 1:
            raise ValueError(f"start_step must be >= 1, got {start_step}")
        if min_trials_required < 1:
            raise ValueError(f"min_trials_required must be >= 1, got {min_trials_required}")
        self.name = "katib-medianstop"
        self._minimize = objective.direction == "minimize"
        self._metric = objective.metric
        self._start_step = start_step
        self._min_trials = min_trials_required
        self._history: dict[str, float] = {}
        self._threshold: dict[str, float | None] = {}
        self._first: dict[str, list[float]] = {}  # the first start_step objective rows
        self._count: dict[str, int] = {}
        self._best: dict[str, float] = {}
        self._seen: dict[str, int] = {}

    def _current_threshold(self) -> float | None:
        if len(self._history) < self._min_trials:
            return None
        return sum(self._history.values()) / len(self._history)

    def start(self, trial: str) -> None:
        self._threshold[trial] = self._current_threshold()
        self._first[trial] = []
        self._count[trial] = 0

    def _record(self, trial: str, value: float) -> float:
        """Count one report and update the best so far exactly as ``updateStopRules`` does."""
        self._count[trial] += 1
        if len(self._first[trial]) < self._start_step:
            self._first[trial].append(value)
        best = self._best.get(trial)
        if best is None or (value < best if self._minimize else value > best):
            self._best[trial] = best = value
        return best

    def decide(self, point: ProgressPoint) -> Decision:
        trial = point.trial
        if trial not in self._threshold:
            self.start(trial)
        if point.seq <= self._seen.get(trial, -1):
            return Decision(Verdict.CONTINUE, "repeated point", self.name)
        self._seen[trial] = point.seq
        value = point.metrics.get(self._metric)
        if value is None:
            return Decision(Verdict.CONTINUE, "no objective in this report", self.name)
        best = self._record(trial, value)
        threshold = self._threshold[trial]
        if threshold is None:
            return Decision(Verdict.CONTINUE, "no rule: fewer succeeded trials than required", self.name)
        if self._count[trial] != self._start_step:
            return Decision(Verdict.CONTINUE, f"rule applies at report {self._start_step} only", self.name)
        worse = best > threshold if self._minimize else best < threshold
        evidence = {"value": best, "threshold": threshold, "reports": float(self._count[trial])}
        if worse:
            return Decision(Verdict.PRUNE, f"{best:.4g} worse than mean {threshold:.4g}", self.name, evidence)
        return Decision(
            Verdict.CONTINUE, f"{best:.4g} not worse than mean {threshold:.4g}", self.name, evidence
        )

    def finish(self, trial: str, state: TrialEnd, observation: float | None) -> None:
        first = self._first.pop(trial, [])
        self._threshold.pop(trial, None)
        if state == "succeeded" and first:
            self._history[trial] = sum(first) / len(first)

    def close(self) -> None:
        return None
