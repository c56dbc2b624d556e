"""The sweep's book of trials: resume, capacity, trial outcomes and the experiment's verdict."""

from __future__ import annotations

import math
import signal
from collections.abc import Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from katib_progress.core.errors import ConfigError
from katib_progress.local._pipeline import PruneRequest
from katib_progress.local.experiment import LocalExperiment
from katib_progress.local.summary import (
    FAILED,
    SUMMARY_FILE,
    TERMINAL,
    BestTrial,
    ExperimentState,
    ObjectiveSummary,
    SearchParameter,
    SweepSummary,
    TrialSummary,
    read_summary,
)

_STALE = ("Running", "Created", "Interrupted")


def detect_accelerator() -> str:
    """ "GPU" when this machine shows an NVIDIA or AMD GPU to processes, else "compute" (trial-hours)."""
    nvidia = Path("/proc/driver/nvidia/gpus")
    if (nvidia.is_dir() and any(nvidia.iterdir())) or any(Path("/dev").glob("nvidia[0-9]*")):
        return "GPU"
    return "GPU" if Path("/dev/kfd").exists() else "compute"


ACCELERATOR = detect_accelerator()
_STDERR_TAIL = 200


class Book:
    """Trials in creation order plus experiment-level state. Only the sweep's main loop uses it."""

    def __init__(self, exp: LocalExperiment, previous: SweepSummary | None) -> None:
        self.exp = exp
        self.trials: dict[str, TrialSummary] = {}
        self.summary_requests = 0
        # what the suggestion service asked to keep (Katib's Suggestion status.algorithmSettings)
        self.algorithm_settings: dict[str, str] = {}
        self._wall_before = 0.0
        self._started_at = datetime.now(UTC)
        self.status: ExperimentState = "Running"
        self.reason = ""
        self.message = ""
        self._ended_at: datetime | None = None
        if previous is not None:
            self.summary_requests = previous.suggestion_requests
            self.algorithm_settings = dict(previous.algorithm_settings)
            self._wall_before = previous.wall_s
            self._started_at = previous.started_at
            for old in previous.trials:
                # A trial the previous run did not finish is run again from scratch.
                stale = old.status in _STALE
                update = {"status": "Interrupted", "reason": "SweepInterrupted"}
                self.trials[old.name] = old.model_copy(update=update) if stale else old

    @classmethod
    def resume(cls, exp: LocalExperiment, workdir: Path, previous: SweepSummary | None) -> Book:
        return cls(exp, previous)

    def put(self, trial: TrialSummary) -> None:
        self.trials[trial.name] = trial

    def to_rerun(self) -> list[str]:
        return [t.name for t in self.trials.values() if t.status == "Interrupted"]

    def _count(self, states: frozenset[str]) -> int:
        return sum(1 for t in self.trials.values() if t.status in states)

    def room(self, active: int) -> int:
        spec = self.exp.doc.spec
        room = spec.parallel_trial_count - active
        if spec.max_trial_count is not None:
            room = min(room, spec.max_trial_count - self._count(TERMINAL) - active)
        return max(room, 0)

    def best(self) -> TrialSummary | None:
        objective = self.exp.doc.spec.objective
        done = [
            t
            for t in self.trials.values()
            if t.status == "Succeeded" and t.objective is not None and math.isfinite(t.objective)
        ]
        if not done:
            return None
        pick = min if objective.type == "minimize" else max
        return pick(done, key=lambda t: t.objective if t.objective is not None else 0.0)

    def verdict(self, exhausted_and_idle: bool) -> tuple[ExperimentState, str, str] | None:
        spec = self.exp.doc.spec
        goal = spec.objective.goal
        best = self.best()
        if goal is not None and best is not None and best.objective is not None:
            reached = best.objective <= goal if spec.objective.type == "minimize" else best.objective >= goal
            if reached:
                return (
                    "Succeeded",
                    "GoalReached",
                    f"objective goal {goal} reached by {best.name} ({best.objective:.6g})",
                )
        failed = self._count(FAILED)
        if spec.max_failed_trial_count is not None and failed > spec.max_failed_trial_count:
            return (
                "Failed",
                "MaxFailedTrialsReached",
                f"{failed} trials failed, more than maxFailedTrialCount={spec.max_failed_trial_count}",
            )
        completed = self._count(TERMINAL)
        if spec.max_trial_count is not None and completed >= spec.max_trial_count:
            return "Succeeded", "MaxTrialsReached", f"{completed} trials completed (maxTrialCount)"
        if exhausted_and_idle and not self.to_rerun():
            return "Succeeded", "SuggestionEndReached", "the suggestion service has no more trials to suggest"
        return None

    def finish(self, status: ExperimentState, reason: str, message: str) -> None:
        self.status, self.reason, self.message = status, reason, message
        self._ended_at = datetime.now(UTC)

    def summary(self, *, wall_s: float, running_s: float = 0.0) -> SweepSummary:
        """The state on disk; ``running_s``: run time so far of the attempts still running."""
        exp = self.exp
        spec = exp.doc.spec
        counts: dict[str, int] = {}
        for trial in self.trials.values():
            counts[trial.status] = counts.get(trial.status, 0) + 1
        best = self.best()
        return SweepSummary(
            experiment=exp.name,
            namespace=exp.namespace,
            source=str(exp.source),
            fingerprint=exp.fingerprint,
            status=self.status,
            reason=self.reason,
            message=self.message,
            objective=ObjectiveSummary(
                type=spec.objective.type,
                metric=spec.objective.objective_metric_name,
                goal=spec.objective.goal,
                additional_metrics=list(spec.objective.additional_metric_names),
                strategies=exp.strategies(),
            ),
            algorithm=spec.algorithm.algorithm_name,
            early_stopping=spec.early_stopping.algorithm_name if spec.early_stopping else None,
            max_trial_count=spec.max_trial_count,
            parallel_trial_count=spec.parallel_trial_count,
            max_failed_trial_count=spec.max_failed_trial_count,
            started_at=self._started_at,
            updated_at=datetime.now(UTC),
            ended_at=self._ended_at,
            wall_s=self._wall_before + wall_s,
            compute_used_s=sum(t.compute_s for t in self.trials.values()) + running_s,
            accelerator=ACCELERATOR,
            compute_saved_s=sum(
                t.eta_at_prune_s or 0.0 for t in self.trials.values() if t.status == "EarlyStopped"
            ),
            suggestion_requests=self.summary_requests,
            algorithm_settings=dict(self.algorithm_settings),
            counts=counts,
            best=BestTrial(
                trial=best.name, objective=best.objective, params=best.params, observation=best.observation
            )
            if best is not None and best.objective is not None
            else None,
            unsupported=list(exp.unsupported),
            parameters=search_space(exp),
            trials=list(self.trials.values()),
        )


def search_space(exp: LocalExperiment) -> list[SearchParameter]:
    """``spec.parameters`` as the summary records them (the report draws log-scale ones on log axes)."""
    return [
        SearchParameter(
            name=p.name,
            type=p.parameter_type,
            min=p.feasible_space.min,
            max=p.feasible_space.max,
            step=p.feasible_space.step,
            choices=p.feasible_space.list_,
            distribution=p.feasible_space.distribution,
        )
        for p in exp.doc.spec.parameters
    ]


def outcome(
    exp: LocalExperiment,
    code: int,
    observation: Mapping[str, float],
    prune: PruneRequest | None,
    kill: tuple[str, str] | None,
    *,
    workdir: Path,
) -> dict[str, Any]:
    """The status fields of a trial whose process exited with ``code``."""
    metric = exp.doc.spec.objective.objective_metric_name
    if prune is not None:
        return {
            "status": "EarlyStopped",
            "reason": "TrialEarlyStopped",
            "message": prune.decision.reason or "pruned",
            "policy": prune.decision.policy,
            "eta_at_prune_s": prune.point.eta_s,
        }
    if kill is not None:
        status, reason = kill
        return {"status": status, "reason": reason, "message": f"stopped by the sweep ({reason})"}
    if code == 0:
        if metric in observation:
            return {"status": "Succeeded", "reason": "TrialSucceeded", "message": ""}
        how = {
            "Push": "kind Push: report it with the Kubeflow SDK's update_trainjob_status, or set "
            "metricsCollectorSpec.collector.kind StdOut to read printed metrics",
            "StdOut": f"kind StdOut: print it as {metric}=VALUE (or set a metricsFormat filter)",
            "File": "kind File: write it to the collector's file",
        }[exp.collector.kind]
        return {
            "status": "MetricsUnavailable",
            "reason": "MetricsUnavailable",
            "message": f"exited 0 but reported no {metric!r} ({how})",
        }
    if code < 0:
        try:
            how = f"killed by {signal.Signals(-code).name}"
        except ValueError:
            how = f"killed by signal {-code}"
    else:
        how = f"exit code {code}"
    tail = _stderr_tail(workdir / "stderr.log") or _stderr_tail(workdir / "stdout.log")
    return {"status": "Failed", "reason": "TrialFailed", "message": f"{how}: {tail}" if tail else how}


def _stderr_tail(path: Path) -> str:
    try:
        with path.open("rb") as handle:
            handle.seek(0, 2)
            size = handle.tell()
            handle.seek(max(0, size - 4096))
            lines = [ln.strip() for ln in handle.read().decode("utf-8", "replace").splitlines() if ln.strip()]
    except OSError:
        return ""
    return lines[-1][:_STDERR_TAIL] if lines else ""


def describe(trial: TrialSummary, metric: str) -> str:
    """One line for the view; a non-finite last value of the objective metric is always shown."""
    text = f"{trial.status.lower()} {trial.name}"
    if trial.objective is not None:
        text += f" objective={trial.objective:.6g}"
    final = trial.latest_metrics.get(metric)
    if (
        final is not None
        and not math.isfinite(final)
        and (trial.objective is None or math.isfinite(trial.objective))
    ):
        text += f" (last {metric}={final})"
    if trial.progress is not None:
        text += f" at {trial.progress:.0f}%"
    text += f" after {trial.elapsed_s:.1f}s"
    if trial.message and trial.status != "EarlyStopped":
        text += f": {trial.message}"
    if trial.eta_at_prune_s:
        text += f" (saved ~{trial.eta_at_prune_s:.0f}s)"
    return text


def prepare_workdir(
    exp: LocalExperiment, workdir: Path, *, fresh: bool
) -> tuple[SweepSummary | None, Path | None]:
    """(the previous run's summary, where ``--fresh`` moved earlier results); call it only once the
    experiment is known to be valid. ``--fresh`` never deletes: the old directory is renamed aside."""
    moved = _move_aside(workdir) if fresh else None
    workdir.mkdir(parents=True, exist_ok=True)
    if moved is not None:
        return None, moved
    try:
        previous = read_summary(workdir)
    except ValueError as exc:
        raise ConfigError(
            "workdir",
            f"{workdir / SUMMARY_FILE} is unreadable ({exc}); --fresh moves it aside and starts over",
        ) from None
    if previous is not None and (previous.fingerprint != exp.fingerprint or previous.experiment != exp.name):
        raise ConfigError(
            "workdir",
            f"{workdir} holds a different search ({previous.experiment}, spec {previous.fingerprint}); "
            "use --fresh to move it aside and start over, or --workdir for a new directory",
        )
    return previous, None


def _move_aside(workdir: Path) -> Path | None:
    """Rename a non-empty ``workdir`` to ``<workdir>.old-<UTC time>[-n]``; None when there is nothing."""
    if not workdir.exists() or not any(workdir.iterdir()):
        return None
    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")
    for n in range(1000):
        target = workdir.with_name(f"{workdir.name}.old-{stamp}" + (f"-{n}" if n else ""))
        if not target.exists():
            workdir.rename(target)
            return target
    raise ConfigError("workdir", f"cannot find a free name to move {workdir} aside")
