"""Turn an ExperimentRecord into report figures: leaderboard, cost, ETA accuracy, incidents.

Rules (documented in docs/report.md):
- Rank: succeeded trials first, then pruned, running, pending, failed/metrics unavailable; within a
  group by objective (per direction), trials without an objective last, then by name.
- Best trial: the top-ranked succeeded trial with a finite objective (none otherwise), as the local
  sweep's summary: a pruned or stopped trial's partial value is not a result.
- GPU-hours of a trial = accelerators x run time; GPU-hours saved by pruning = sum over pruned trials
  of (last ETA reported before the prune) x accelerators.
- ETA accuracy (finished trials only): each reported ETA against the real remaining time
  (ended - the point's timestamp); error = reported - real.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from types import MappingProxyType

from katib_progress.report import _extract as ex
from katib_progress.report._params import param_importance
from katib_progress.report.model import ExperimentRecord, Objective, TrialRecord, TrialStatus

_GROUP = {
    TrialStatus.SUCCEEDED: 0,
    TrialStatus.PRUNED: 1,
    TrialStatus.RUNNING: 2,
    TrialStatus.INTERRUPTED: 2,
    TrialStatus.PENDING: 3,
    TrialStatus.KILLED: 4,
    TrialStatus.FAILED: 4,
    TrialStatus.METRICS_UNAVAILABLE: 4,
}
_DIVERGE_WORDS = ("diverg", "nan", "non-finite", "inf")


@dataclass(frozen=True, slots=True)
class LeaderboardRow:
    rank: int
    trial: str
    params: Mapping[str, str]
    objective: float | None
    status: TrialStatus
    reason: str
    progress: float | None
    progress_at_prune: float | None
    eta_at_prune_s: float | None
    duration_s: float | None
    accelerators: float
    gpu_hours: float
    best: bool = False


@dataclass(frozen=True, slots=True)
class CostSummary:
    total_gpu_hours: float
    saved_gpu_hours: float
    saved_by_trial: Mapping[str, float]
    gpu_hour_price: float | None
    accelerators_assumed: tuple[str, ...]
    pruned_without_eta: tuple[str, ...]

    @property
    def total_cost(self) -> float | None:
        return None if self.gpu_hour_price is None else self.total_gpu_hours * self.gpu_hour_price

    @property
    def saved_cost(self) -> float | None:
        return None if self.gpu_hour_price is None else self.saved_gpu_hours * self.gpu_hour_price


@dataclass(frozen=True, slots=True)
class EtaSample:
    progress: float | None
    reported_s: float
    actual_s: float

    @property
    def error_s(self) -> float:
        return self.reported_s - self.actual_s


@dataclass(frozen=True, slots=True)
class EtaAccuracy:
    trial: str
    samples: tuple[EtaSample, ...]

    @property
    def mean_abs_error_s(self) -> float:
        return statistics.fmean(abs(s.error_s) for s in self.samples)

    @property
    def max_abs_error_s(self) -> float:
        return max(abs(s.error_s) for s in self.samples)

    @property
    def mean_abs_rel_error(self) -> float | None:
        rel = [abs(s.error_s) / s.actual_s for s in self.samples if s.actual_s > 0]
        return statistics.fmean(rel) if rel else None


@dataclass(frozen=True, slots=True)
class Incident:
    trial: str
    kind: str  # "stalled" | "diverged" | "crashed"
    summary: str
    evidence: Mapping[str, str] = field(default_factory=lambda: MappingProxyType({}))


@dataclass(frozen=True, slots=True)
class Report:
    experiment: ExperimentRecord
    generated_at: datetime
    leaderboard: tuple[LeaderboardRow, ...]
    cost: CostSummary
    eta: tuple[EtaAccuracy, ...]
    incidents: tuple[Incident, ...]
    metrics: tuple[str, ...]
    importance: Mapping[str, float] = field(default_factory=lambda: MappingProxyType({}))
    importance_note: str = ""

    @property
    def best(self) -> LeaderboardRow | None:
        return next((r for r in self.leaderboard if r.best), None)

    def counts(self) -> dict[str, int]:
        out = {s.value: 0 for s in TrialStatus}
        for row in self.leaderboard:
            out[row.status.value] += 1
        return out


def _finite(value: float | None) -> bool:
    return value is not None and math.isfinite(value)


def _sort_key(objective: Objective, value: float | None, trial: TrialRecord) -> tuple[int, int, float, str]:
    if value is None or math.isnan(value):
        return (_GROUP[trial.status], 1, 0.0, trial.name)
    signed = value if objective.direction == "minimize" else -value
    return (_GROUP[trial.status], 0, signed, trial.name)


def leaderboard(record: ExperimentRecord, now: datetime) -> tuple[LeaderboardRow, ...]:
    objective = record.objective
    values = {t.name: ex.objective_value(t, objective) for t in record.trials}
    ordered = sorted(record.trials, key=lambda t: _sort_key(objective, values[t.name], t))
    best_name = next(
        (t.name for t in ordered if t.status is TrialStatus.SUCCEEDED and _finite(values[t.name])),
        None,
    )
    rows = []
    for rank, trial in enumerate(ordered, start=1):
        pruned = trial.status is TrialStatus.PRUNED
        rows.append(
            LeaderboardRow(
                rank=rank,
                trial=trial.name,
                params=trial.params,
                objective=values[trial.name],
                status=trial.status,
                reason=trial.reason or trial.message,
                progress=ex.progress_now(trial),
                progress_at_prune=ex.progress_now(trial) if pruned else None,
                eta_at_prune_s=ex.last_eta(trial) if pruned else None,
                duration_s=ex.duration_s(trial, now),
                accelerators=trial.accelerators,
                gpu_hours=ex.gpu_hours(trial, now),
                best=trial.name == best_name,
            )
        )
    return tuple(rows)


def cost(
    record: ExperimentRecord, rows: Sequence[LeaderboardRow], gpu_hour_price: float | None
) -> CostSummary:
    if gpu_hour_price is not None and not (gpu_hour_price >= 0 and math.isfinite(gpu_hour_price)):
        raise ValueError(f"gpu_hour_price must be a finite number >= 0, got {gpu_hour_price}")
    saved: dict[str, float] = {}
    no_eta = []
    for row in rows:
        if row.status is not TrialStatus.PRUNED:
            continue
        if row.eta_at_prune_s is None:
            no_eta.append(row.trial)
            continue
        saved[row.trial] = row.eta_at_prune_s / 3600.0 * row.accelerators
    return CostSummary(
        total_gpu_hours=math.fsum(r.gpu_hours for r in rows),
        saved_gpu_hours=math.fsum(saved.values()),
        saved_by_trial=MappingProxyType(saved),
        gpu_hour_price=gpu_hour_price,
        accelerators_assumed=tuple(t.name for t in record.trials if not t.accelerators_known),
        pruned_without_eta=tuple(no_eta),
    )


def eta_accuracy(record: ExperimentRecord) -> tuple[EtaAccuracy, ...]:
    out = []
    for trial in record.trials:
        if trial.status is not TrialStatus.SUCCEEDED:
            continue
        total = ex.duration_s(trial, trial.ended or datetime.now(UTC))
        samples = []
        for point in trial.curve:
            if point.eta_s is None:
                continue
            if trial.ended is not None and point.timestamp is not None:
                actual = (trial.ended - point.timestamp).total_seconds()
            elif total is not None and point.elapsed_s is not None:
                actual = total - point.elapsed_s
            else:
                continue
            samples.append(EtaSample(point.progress, point.eta_s, max(0.0, actual)))
        if samples:
            out.append(EtaAccuracy(trial.name, tuple(samples)))
    return tuple(out)


def _fmt_time(value: datetime | None) -> str:
    return "-" if value is None else value.isoformat()


def incidents(record: ExperimentRecord, now: datetime, *, stall_after_s: float) -> tuple[Incident, ...]:
    found: list[Incident] = []
    metric = record.objective.metric
    for trial in record.trials:
        progress = ex.progress_now(trial)
        if trial.status in (TrialStatus.FAILED, TrialStatus.METRICS_UNAVAILABLE):
            evidence = {
                "status": trial.status.value,
                "reason": trial.reason or "-",
                "message": trial.message or "-",
                "last progress %": "-" if progress is None else f"{progress:g}",
                "last update": _fmt_time(ex.last_update(trial)),
            }
            if trial.log_tail:
                evidence["log tail"] = trial.log_tail
            found.append(
                Incident(trial.name, "crashed", f"{trial.status.value}: {trial.reason or '-'}", evidence)
            )
        if trial.status is TrialStatus.RUNNING:
            seen = ex.last_update(trial) or trial.started
            if seen is not None and (now - seen).total_seconds() > stall_after_s:
                silent = (now - seen).total_seconds()
                found.append(
                    Incident(
                        trial.name,
                        "stalled",
                        f"no progress report for {silent:.0f} s (limit {stall_after_s:g} s)",
                        {
                            "last update": seen.isoformat(),
                            "last progress %": "-" if progress is None else f"{progress:g}",
                        },
                    )
                )
        diverged = _divergence(trial, metric, record.objective)
        if diverged is not None:
            found.append(Incident(trial.name, "diverged", diverged[0], diverged[1]))
    return tuple(found)


def _divergence(trial: TrialRecord, metric: str, objective: Objective) -> tuple[str, dict[str, str]] | None:
    final = trial.latest.get(metric)
    if final is not None and not math.isfinite(final) and trial.status.terminal:
        return (
            f"the final {metric} is {final} (last reported value)",
            {"final value": str(final), "objective by strategy": str(ex.objective_value(trial, objective))},
        )
    series = ex.metric_series(trial, metric)
    bad = [(p, v) for p, v in series if not math.isfinite(v)]
    if bad:
        point, value = bad[0]
        return (
            f"{metric} became {value} at progress {point.progress if point.progress is not None else '-'}%",
            {"first non-finite": str(value), "at": _fmt_time(point.timestamp)},
        )
    values = [v for _, v in series]
    if len(values) >= 3:
        first, latest = values[0], values[-1]
        best = min(values) if objective.direction == "minimize" else max(values)
        if objective.better(first, latest) and best != first:
            return (
                f"{metric} ended worse than it started ({latest:g} vs first {first:g}, best {best:g})",
                {"first": f"{first:g}", "best": f"{best:g}", "latest": f"{latest:g}"},
            )
    text = f"{trial.reason} {trial.message}".lower()
    if trial.status is TrialStatus.PRUNED and any(word in text for word in _DIVERGE_WORDS):
        return (
            f"pruned as diverged: {trial.reason or trial.message}",
            {"reason": trial.reason, "message": trial.message},
        )
    return None


def build_report(
    record: ExperimentRecord,
    *,
    gpu_hour_price: float | None = None,
    metrics: Sequence[str] = (),
    now: datetime | None = None,
    stall_after_s: float = 600.0,
    importance: str = "auto",
) -> Report:
    """Compute every figure of the report from ``record`` (pure; the record is not modified)."""
    generated = datetime.now(UTC)
    when = now or record.observed_at or generated
    rows = leaderboard(record, when)
    chosen = [record.objective.metric, *record.objective.additional_metrics, *metrics]
    _, weights, note = param_importance(record, importance)
    return Report(
        experiment=record,
        generated_at=now or generated,
        leaderboard=rows,
        cost=cost(record, rows, gpu_hour_price),
        eta=eta_accuracy(record),
        incidents=incidents(record, when, stall_after_s=stall_after_s),
        metrics=tuple(dict.fromkeys(chosen)),
        importance=MappingProxyType(weights),
        importance_note=note,
    )
