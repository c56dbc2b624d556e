"""Source adapter: a local sweep's workdir (``summary.json`` + ``observations.sqlite``).

The summary (written by ``katib-progress sweep``, schema in docs/local.md) gives the trials, their
parameters, states and timings; the curves come from the observation log in ``observations.sqlite``,
read through the embedded store's DBManager gRPC API (the same API and code path as a cluster's
katib-db-manager) on a loopback port that lives only while the report is built.
Only the summary fields the report needs are modelled here (unknown fields are ignored), so the
report keeps working when the sweep adds fields.
"""

from __future__ import annotations

import logging
from datetime import UTC, datetime
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from katib_progress.core.errors import ConfigError
from katib_progress.report.model import (
    LOG_DISTRIBUTIONS,
    ExperimentRecord,
    Objective,
    ParameterSpec,
    TrialRecord,
    TrialStatus,
)
from katib_progress.report.sources._observations import fetch_rows, rows_to_curve

_log = logging.getLogger(__name__)

SUMMARY_FILE = "summary.json"
OBSERVATIONS_FILE = "observations.sqlite"
_LOG_TAIL_LINES = 20

# Katib trial condition / local sweep state -> report status.
STATES: dict[str, TrialStatus] = {
    "Created": TrialStatus.PENDING,
    "Running": TrialStatus.RUNNING,
    "Succeeded": TrialStatus.SUCCEEDED,
    "EarlyStopped": TrialStatus.PRUNED,
    "Failed": TrialStatus.FAILED,
    "Killed": TrialStatus.KILLED,
    "Interrupted": TrialStatus.INTERRUPTED,
    "MetricsUnavailable": TrialStatus.METRICS_UNAVAILABLE,
}


class _Model(BaseModel):
    model_config = ConfigDict(extra="ignore", frozen=True)


class _Trial(_Model):
    name: str = Field(min_length=1)
    params: dict[str, str] = Field(default_factory=dict)
    status: str = "Created"
    reason: str = ""
    message: str = ""
    progress: float | None = None
    eta_at_prune_s: float | None = None
    started_at: datetime | None = None
    ended_at: datetime | None = None
    observation: dict[str, float] = Field(default_factory=dict)
    latest_metrics: dict[str, float] = Field(default_factory=dict)
    compute_s: float | None = Field(default=None, ge=0)
    accelerators: float | None = Field(default=None, ge=0)


class _Objective(_Model):
    type: str
    metric: str
    goal: float | None = None
    additional_metrics: list[str] = Field(default_factory=list)
    strategies: dict[str, str] = Field(default_factory=dict)


class _Parameter(_Model):
    name: str
    type: str = "double"
    min: str | None = None
    max: str | None = None
    choices: list[str] | None = None
    distribution: str | None = None

    def spec(self) -> ParameterSpec:
        return ParameterSpec(
            name=self.name,
            kind=self.type,
            low=_number(self.min),
            high=_number(self.max),
            choices=tuple(self.choices or ()),
            log=self.distribution in LOG_DISTRIBUTIONS,
        )


def _number(text: str | None) -> float | None:
    try:
        return None if text is None else float(text)
    except ValueError:
        return None


class _Summary(_Model):
    experiment: str
    namespace: str | None = None
    source: str = ""
    status: str = ""
    reason: str = ""
    message: str = ""
    accelerator: str = "GPU"
    updated_at: datetime | None = None
    objective: _Objective
    unsupported: list[str] = Field(default_factory=list)
    parameters: list[_Parameter] = Field(default_factory=list)
    trials: list[_Trial] = Field(default_factory=list)


def _log_tail(workdir: Path, trial: str) -> str:
    path = workdir / "trials" / trial / "stderr.log"
    try:
        lines = path.read_text(encoding="utf-8", errors="replace").splitlines()
    except OSError:
        return ""
    return "\n".join(lines[-_LOG_TAIL_LINES:])


def _aware(moment: datetime | None) -> datetime | None:
    if moment is None or moment.tzinfo is not None:
        return moment
    return moment.replace(tzinfo=UTC)


def load_local(workdir: str | Path, *, store_address: str | None = None) -> ExperimentRecord:
    """Build an ExperimentRecord from a sweep workdir.

    ``store_address`` reads the observation log from an already running store (e.g. the sweep's
    own); otherwise the workdir's ``observations.sqlite`` is served on a private loopback port.
    Raises ConfigError when the workdir holds no readable summary.
    """
    root = Path(workdir)
    summary_path = root / SUMMARY_FILE
    try:
        summary = _Summary.model_validate_json(summary_path.read_bytes())
    except OSError as exc:
        raise ConfigError("source", f"no {SUMMARY_FILE} in {root} ({exc.strerror})") from None
    except ValidationError as exc:
        raise ConfigError("source", f"{summary_path} is not a sweep summary: {exc}") from None
    names = [t.name for t in summary.trials]
    rows = _read_rows(root, names, store_address)
    trials = [_trial_record(root, t, rows.get(t.name, [])) for t in summary.trials]
    obj = summary.objective
    objective = Objective(
        metric=obj.metric,
        direction="maximize" if obj.type == "maximize" else "minimize",
        goal=obj.goal,
        additional_metrics=tuple(obj.additional_metrics),
        strategies=obj.strategies,
    )
    notes = [
        f"local sweep: 1 {'accelerator' if summary.accelerator != 'compute' else 'process'} per trial "
        "unless the summary states otherwise; hours count every attempt of a trial"
    ]
    notes += [f"not applied locally: {u}" for u in summary.unsupported]
    return ExperimentRecord(
        name=summary.experiment,
        objective=objective,
        trials=tuple(trials),
        parameters=tuple(p.spec() for p in summary.parameters),
        namespace=summary.namespace,
        source=f"local sweep {root}",
        observed_at=_aware(summary.updated_at) if summary.status not in ("", "Running") else None,
        notes=tuple(notes),
        finished=summary.status in ("Succeeded", "Failed", "Interrupted"),
        status=summary.status,
        reason=summary.reason,
        message=summary.message,
        accelerator=summary.accelerator,
    )


def _trial_record(root: Path, t: _Trial, rows: list[tuple[str, str, str]]) -> TrialRecord:
    status = STATES.get(t.status)
    if status is None:
        raise ConfigError(f"trials[{t.name}].status", f"unknown trial state {t.status!r}")
    return TrialRecord(
        name=t.name,
        params=t.params,
        status=status,
        reason=t.reason,
        message=t.message,
        started=_aware(t.started_at),
        ended=_aware(t.ended_at),
        accelerators=1.0 if t.accelerators is None else t.accelerators,
        accelerators_known=t.accelerators is not None,
        curve=rows_to_curve(rows),
        observation=t.observation,
        log_tail=_log_tail(root, t.name)
        if status in (TrialStatus.FAILED, TrialStatus.METRICS_UNAVAILABLE)
        else "",
        progress=t.progress,
        eta_at_prune_s=t.eta_at_prune_s,
        compute_s=t.compute_s,
        latest=t.latest_metrics,
    )


def _read_rows(root: Path, names: list[str], address: str | None) -> dict[str, list[tuple[str, str, str]]]:
    if address is not None:
        return fetch_rows(address, names)
    db = root / OBSERVATIONS_FILE
    if not db.exists():
        _log.warning("%s has no %s: trials will have no curves", root, OBSERVATIONS_FILE)
        return {}
    from katib_progress.collector.store import start_store_server

    server = start_store_server(db)
    try:
        return fetch_rows(server.address, names)
    finally:
        server.stop(grace=None)
