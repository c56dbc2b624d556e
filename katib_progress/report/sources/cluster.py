"""Source adapter: a Katib Experiment on a cluster (Kubernetes API + Katib DB manager).

- Trials, parameters, states, start/end and Katib's own observation come from the Trial objects.
- Accelerators come from the TrainJob (or, when it is gone, the Trial's ``spec.runSpec``):
  the accelerator resources in ``spec.trainer.resourcesPerNode`` (limits, else requests) x
  ``spec.trainer.numNodes``.
- Curves come from the observation log (``GetObservationLog`` on ``--db-manager``); without it, each
  trial's curve is the TrainJob's latest ``status.trainerStatus`` snapshot only.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

from kubernetes import client
from kubernetes.utils.quantity import parse_quantity

from katib_progress.core.timefmt import parse_rfc3339
from katib_progress.report.model import (
    LOG_DISTRIBUTIONS,
    CurvePoint,
    ExperimentRecord,
    Objective,
    ParameterSpec,
    TrialRecord,
    TrialStatus,
)
from katib_progress.report.sources._kube import ClusterSnapshot, fetch
from katib_progress.report.sources._observations import fetch_rows, rows_to_curve

_log = logging.getLogger(__name__)

# Checked in this order: the first condition with status "True" decides.
_CONDITIONS: tuple[tuple[str, TrialStatus], ...] = (
    ("EarlyStopped", TrialStatus.PRUNED),
    ("MetricsUnavailable", TrialStatus.METRICS_UNAVAILABLE),
    ("Failed", TrialStatus.FAILED),
    ("Killed", TrialStatus.KILLED),
    ("Succeeded", TrialStatus.SUCCEEDED),
    ("Running", TrialStatus.RUNNING),
)

ACCELERATOR_SUFFIXES = ("/gpu", "/tpu", "/neuron", "/neuroncore", "/gaudi")


def _time(value: object) -> datetime | None:
    if not isinstance(value, str) or not value:
        return None
    try:
        return parse_rfc3339(value)
    except ValueError:
        return None


def _float(value: object) -> float | None:
    try:
        number = float(str(value))
    except ValueError:
        return None
    return number if math.isfinite(number) else None


def trial_state(trial: Mapping[str, Any]) -> tuple[TrialStatus, str, str, datetime | None]:
    """(status, reason, message, time of that condition) from a Trial's conditions."""
    conditions = {c.get("type"): c for c in trial.get("status", {}).get("conditions", []) or []}
    for kind, status in _CONDITIONS:
        cond = conditions.get(kind)
        if cond is not None and str(cond.get("status")) == "True":
            reason = str(cond.get("reason", "") or "")
            message = str(cond.get("message", "") or "")
            if kind == "Killed":
                reason = reason or "Killed"
            return status, reason, message, _time(cond.get("lastTransitionTime"))
    return TrialStatus.PENDING, "", "", None


def accelerators(job: Mapping[str, Any] | None) -> float | None:
    """Accelerators a TrainJob holds: accelerator resources per node x numNodes (None if unstated)."""
    if not job:
        return None
    trainer = job.get("spec", {}).get("trainer") or {}
    per_node = trainer.get("resourcesPerNode")
    if not isinstance(per_node, Mapping):
        return None
    nodes = int(trainer.get("numNodes") or 1)
    picked = per_node.get("limits") or per_node.get("requests") or {}
    total = 0.0
    for name, quantity in picked.items():
        if str(name).endswith(ACCELERATOR_SUFFIXES):
            try:
                total += float(parse_quantity(quantity))
            except ValueError:
                _log.warning(
                    "unreadable quantity %s=%r in %s", name, quantity, job.get("metadata", {}).get("name")
                )
    return total * nodes


def objective_of(experiment: Mapping[str, Any]) -> Objective:
    spec = experiment.get("spec", {}).get("objective", {}) or {}
    return Objective(
        metric=str(spec.get("objectiveMetricName", "")),
        direction="maximize" if spec.get("type") == "maximize" else "minimize",
        goal=_float(spec["goal"]) if spec.get("goal") is not None else None,
        additional_metrics=tuple(spec.get("additionalMetricNames", []) or []),
        strategies={s["name"]: s["value"] for s in spec.get("metricStrategies", []) or [] if "name" in s},
    )


def parameters_of(experiment: Mapping[str, Any]) -> tuple[ParameterSpec, ...]:
    out = []
    for p in experiment.get("spec", {}).get("parameters", []) or []:
        space = p.get("feasibleSpace", {}) or {}
        out.append(
            ParameterSpec(
                name=str(p.get("name")),
                kind=str(p.get("parameterType", "double")),
                low=_float(space["min"]) if "min" in space else None,
                high=_float(space["max"]) if "max" in space else None,
                choices=tuple(str(v) for v in space.get("list", []) or []),
                log=space.get("distribution") in LOG_DISTRIBUTIONS,
            )
        )
    return tuple(out)


def _observation(trial: Mapping[str, Any], objective: Objective) -> dict[str, float]:
    out = {}
    for m in (trial.get("status", {}).get("observation") or {}).get("metrics", []) or []:
        name = m.get("name")
        if not name:
            continue
        value = _float(m.get(objective.strategy(name)))
        if value is not None:
            out[name] = value
    return out


def status_point(job: Mapping[str, Any] | None) -> CurvePoint | None:
    """The TrainJob's latest trainerStatus snapshot as a curve point (None when absent)."""
    status = (job or {}).get("status", {}).get("trainerStatus")
    if not isinstance(status, Mapping):
        return None
    progress = _float(status.get("progressPercentage"))
    eta = _float(status.get("estimatedRemainingSeconds"))
    metrics = {}
    for m in status.get("metrics", []) or []:
        value = _float(m.get("value")) if isinstance(m, Mapping) else None
        if value is not None:
            metrics[str(m.get("name"))] = value
    return CurvePoint(
        timestamp=_time(status.get("lastUpdatedTime")),
        progress=progress if progress is not None and 0 <= progress <= 100 else None,
        eta_s=eta if eta is not None and eta >= 0 else None,
        metrics=metrics,
    )


def _trial_record(
    snapshot: ClusterSnapshot,
    trial: Mapping[str, Any],
    rows: Mapping[str, Sequence[tuple[str, str, str]]] | None,
    objective: Objective,
    default_accelerators: float,
) -> TrialRecord:
    meta = trial.get("metadata", {})
    name = str(meta.get("name"))
    job = snapshot.trainjobs.get(name)
    status, reason, message, since = trial_state(trial)
    count = accelerators(job)
    if count is None:
        count = accelerators(
            {"spec": trial.get("spec", {}).get("runSpec", {}).get("spec", {}), "metadata": meta}
        )
    live = status_point(job)
    curve = rows_to_curve(rows.get(name, [])) if rows is not None else ((live,) if live else ())
    if status is TrialStatus.PRUNED and message and reason in ("", "TrialEarlyStopped"):
        reason = message
    tstatus = trial.get("status", {})
    return TrialRecord(
        name=name,
        params={
            a["name"]: str(a.get("value", ""))
            for a in trial.get("spec", {}).get("parameterAssignments", []) or []
        },
        status=status,
        reason=reason,
        message=message,
        started=_time(tstatus.get("startTime")) or _time(meta.get("creationTimestamp")),
        ended=_time(tstatus.get("completionTime")) or (since if status.terminal else None),
        accelerators=default_accelerators if count is None else count,
        accelerators_known=count is not None,
        curve=curve,
        observation=_observation(trial, objective),
        progress=live.progress if live is not None else None,
        eta_at_prune_s=live.eta_s
        if live is not None and status is TrialStatus.PRUNED and rows is None
        else None,
    )


def to_record(
    snapshot: ClusterSnapshot,
    rows: Mapping[str, Sequence[tuple[str, str, str]]] | None,
    *,
    default_accelerators: float = 0.0,
    observed_at: datetime | None = None,
) -> ExperimentRecord:
    """Convert raw API objects (and observation rows, when read) into an ExperimentRecord."""
    exp = snapshot.experiment
    objective = objective_of(exp)
    trials = []
    for trial in snapshot.trials:
        trials.append(_trial_record(snapshot, trial, rows, objective, default_accelerators))
    meta = exp.get("metadata", {})
    notes = [] if rows is not None else ["no --db-manager: curves hold only each TrainJob's latest snapshot"]
    return ExperimentRecord(
        name=str(meta.get("name")),
        namespace=meta.get("namespace"),
        objective=objective,
        trials=tuple(trials),
        parameters=parameters_of(exp),
        source="cluster",
        observed_at=observed_at,
        notes=tuple(notes),
        finished=any(
            c.get("type") in ("Succeeded", "Failed") and str(c.get("status")) == "True"
            for c in exp.get("status", {}).get("conditions", []) or []
        ),
        **experiment_state(exp),
    )


def experiment_state(experiment: Mapping[str, Any]) -> dict[str, str]:
    """status/reason/message of the Experiment's last condition that is True (Katib keeps one current)."""
    conditions = [
        c for c in experiment.get("status", {}).get("conditions", []) or [] if str(c.get("status")) == "True"
    ]
    if not conditions:
        return {"status": "", "reason": "", "message": ""}
    last = conditions[-1]
    return {
        "status": str(last.get("type", "")),
        "reason": str(last.get("reason", "") or ""),
        "message": str(last.get("message", "") or ""),
    }


def load_cluster(
    api_client: client.ApiClient,
    name: str,
    namespace: str,
    *,
    db_manager: str | None = None,
    default_accelerators: float = 0.0,
) -> ExperimentRecord:
    """Read Experiment ``namespace/name`` (and its observation logs from ``db_manager``, if given)."""
    snapshot = fetch(api_client, name, namespace)
    rows = None
    if db_manager is not None:
        names = [str(t.get("metadata", {}).get("name")) for t in snapshot.trials]
        rows = fetch_rows(db_manager, names)
    return to_record(snapshot, rows, default_accelerators=default_accelerators)
