"""Proto <-> domain conversion for the pruning API (the only place that touches pruning_pb2 fields)."""

from __future__ import annotations

import math
from datetime import UTC, datetime

from katib_progress.core.errors import ConfigError
from katib_progress.core.types import Decision, ProgressPoint, Verdict
from katib_progress.suggestion.pruning._history import TrialState
from katib_progress.suggestion.pruning.config import PruningConfig
from katib_progress.suggestion.pruning.proto import pruning_pb2 as pb

_DIRECTIONS = {pb.MINIMIZE: "minimize", pb.MAXIMIZE: "maximize"}
_STATES: dict[int, TrialState] = {
    pb.ReportFinalRequest.COMPLETE: TrialState.COMPLETE,
    pb.ReportFinalRequest.PRUNED: TrialState.PRUNED,
    pb.ReportFinalRequest.FAILED: TrialState.FAILED,
}


def _time(ts: object) -> datetime | None:
    seconds, nanos = getattr(ts, "seconds", 0), getattr(ts, "nanos", 0)
    if not seconds and not nanos:
        return None
    return datetime.fromtimestamp(seconds + nanos / 1e9, tz=UTC)


def point_from_proto(req: pb.ProgressPointRequest) -> ProgressPoint:
    """Raises ConfigError naming the request field when it is missing or out of range."""
    if not req.experiment:
        raise ConfigError("experiment", "required, got an empty string")
    if not req.trial:
        raise ConfigError("trial", "required, got an empty string")
    if req.seq < 0:
        raise ConfigError("seq", f"must be >= 0, got {req.seq}")
    fields = {
        "progress": req.progress if req.HasField("progress") else None,
        "elapsed_seconds": req.elapsed_seconds if req.HasField("elapsed_seconds") else None,
        "eta_seconds": req.eta_seconds if req.HasField("eta_seconds") else None,
    }
    for name, value in fields.items():
        if value is not None and not math.isfinite(value):
            raise ConfigError(name, f"must be a finite number, got {value}")
    progress = fields["progress"]
    if progress is not None and not (0.0 <= progress <= 100.0):
        raise ConfigError("progress", f"must be within 0..100, got {progress}")
    for name in ("elapsed_seconds", "eta_seconds"):
        value = fields[name]
        if value is not None and value < 0:
            raise ConfigError(name, f"must be >= 0, got {value}")
    for name in req.metrics:
        if not name:
            raise ConfigError("metrics", "metric names must be non-empty")
    return ProgressPoint(
        experiment=req.experiment,
        trial=req.trial,
        seq=req.seq,
        timestamp=_time(req.timestamp) or datetime.now(UTC),
        progress=progress,
        elapsed_s=fields["elapsed_seconds"],
        eta_s=fields["eta_seconds"],
        metrics=dict(req.metrics),
    )


def point_to_proto(point: ProgressPoint, config: PruningConfig | None = None) -> pb.ProgressPointRequest:
    req = pb.ProgressPointRequest(
        experiment=point.experiment, trial=point.trial, seq=point.seq, metrics=dict(point.metrics)
    )
    if point.progress is not None:
        req.progress = point.progress
    if point.elapsed_s is not None:
        req.elapsed_seconds = point.elapsed_s
    if point.eta_s is not None:
        req.eta_seconds = point.eta_s
    req.timestamp.FromDatetime(point.timestamp)
    if config is not None:
        req.config.CopyFrom(config_to_proto(config))
    return req


def config_from_proto(msg: pb.ExperimentConfig) -> PruningConfig:
    """Raises ConfigError naming ``config.<field>`` or the offending setting."""
    if not msg.objective_metric_name:
        raise ConfigError("config.objective_metric_name", "required, got an empty string")
    direction = _DIRECTIONS.get(msg.direction)
    if direction is None:
        raise ConfigError("config.direction", f"must be MINIMIZE or MAXIMIZE, got {msg.direction}")
    settings = dict(msg.settings)
    if msg.policy:
        settings["policy"] = msg.policy
    deadline = _time(msg.deadline)
    if deadline is not None:
        settings["deadline"] = deadline.isoformat()
    if msg.HasField("gpu_hour_budget"):
        settings["gpu_hour_budget"] = repr(msg.gpu_hour_budget)
    return PruningConfig.from_settings(
        msg.objective_metric_name, direction, settings, objective_strategy=msg.metric_strategy or None
    )


def config_to_proto(config: PruningConfig) -> pb.ExperimentConfig:
    settings = config.to_settings()
    policy = settings.pop("policy", "")
    settings.pop("deadline", None)
    settings.pop("gpu_hour_budget", None)
    msg = pb.ExperimentConfig(
        objective_metric_name=config.objective_metric,
        direction=pb.MINIMIZE if config.direction == "minimize" else pb.MAXIMIZE,
        policy=policy,
        settings=settings,
        metric_strategy=config.objective_strategy or "",
    )
    if config.deadline is not None:
        msg.deadline.FromDatetime(config.deadline)
    if config.gpu_hour_budget is not None:
        msg.gpu_hour_budget = config.gpu_hour_budget
    return msg


def decision_to_proto(decision: Decision) -> pb.DecisionReply:
    verdict = pb.DecisionReply.PRUNE if decision.prune else pb.DecisionReply.CONTINUE
    evidence = {k: v if isinstance(v, str) else repr(float(v)) for k, v in decision.evidence.items()}
    return pb.DecisionReply(
        verdict=verdict, reason=decision.reason, policy=decision.policy, evidence=evidence
    )


def decision_from_proto(reply: pb.DecisionReply) -> Decision:
    evidence: dict[str, float | str] = {}
    for key, text in reply.evidence.items():
        try:
            evidence[key] = float(text)
        except ValueError:
            evidence[key] = text
    verdict = Verdict.PRUNE if reply.verdict == pb.DecisionReply.PRUNE else Verdict.CONTINUE
    return Decision(verdict, reply.reason, reply.policy, evidence)


def state_from_proto(state: int) -> TrialState:
    try:
        return _STATES[state]
    except KeyError:
        raise ConfigError("state", f"must be COMPLETE, PRUNED or FAILED, got {state}") from None
