"""Per-trial figures derived from a TrialRecord: objective by strategy, duration, prune point."""

from __future__ import annotations

import math
from datetime import datetime

from katib_progress.core.strategy import apply_strategy
from katib_progress.report.model import CurvePoint, Objective, Strategy, TrialRecord, TrialStatus


def metric_series(trial: TrialRecord, metric: str) -> list[tuple[CurvePoint, float]]:
    """Points that carry ``metric``, in reporting order (non-finite values included)."""
    return [(p, p.metrics[metric]) for p in trial.curve if metric in p.metrics]


def extract(trial: TrialRecord, metric: str, strategy: Strategy) -> float | None:
    """A metric's value per Katib's strategy; the source's own observation wins when present."""
    observed = trial.observation.get(metric)
    if observed is not None and math.isfinite(observed):
        return observed
    return apply_strategy((v for _, v in metric_series(trial, metric)), strategy)


def objective_value(trial: TrialRecord, objective: Objective) -> float | None:
    return extract(trial, objective.metric, objective.strategy(objective.metric))


def last_update(trial: TrialRecord) -> datetime | None:
    stamps = [p.timestamp for p in trial.curve if p.timestamp is not None]
    return max(stamps) if stamps else None


def duration_s(trial: TrialRecord, now: datetime) -> float | None:
    """Run time: ended - started; for a live trial now - started; else the largest elapsed seen."""
    if trial.started is not None:
        end = trial.ended if trial.ended is not None else (None if trial.status.terminal else now)
        if end is None:
            end = last_update(trial)
        if end is not None:
            return max(0.0, (end - trial.started).total_seconds())
    elapsed = [p.elapsed_s for p in trial.curve if p.elapsed_s is not None]
    if elapsed:
        return max(elapsed)
    stamps = [p.timestamp for p in trial.curve if p.timestamp is not None]
    if len(stamps) >= 2:
        return (max(stamps) - min(stamps)).total_seconds()
    return None


def last_with_progress(trial: TrialRecord) -> CurvePoint | None:
    """The latest point that reported a progress percentage."""
    for point in reversed(trial.curve):
        if point.progress is not None:
            return point
    return None


def last_eta(trial: TrialRecord) -> float | None:
    """The latest ETA (seconds) the trial reported (a pruned trial's: the one at the prune)."""
    if trial.eta_at_prune_s is not None and trial.status is TrialStatus.PRUNED:
        return trial.eta_at_prune_s
    for point in reversed(trial.curve):
        if point.eta_s is not None:
            return point.eta_s
    return None


def progress_now(trial: TrialRecord) -> float | None:
    if trial.progress is not None:
        return trial.progress
    point = last_with_progress(trial)
    if point is not None:
        return point.progress
    return 100.0 if trial.status is TrialStatus.SUCCEEDED else None


def gpu_hours(trial: TrialRecord, now: datetime) -> float:
    """Accelerators x run time of every attempt (the source's ``compute_s``, else the duration)."""
    seconds = trial.compute_s if trial.compute_s is not None else duration_s(trial, now)
    return 0.0 if seconds is None else trial.accelerators * seconds / 3600.0
