"""``summary.json``: the sweep's state on disk (the report command reads it; schema in docs/local.md).

Written atomically (temp file + rename) after every change of a trial's state, so an interrupted
sweep resumes from it.
"""

from __future__ import annotations

import json
import os
from datetime import datetime
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

SCHEMA_VERSION = 1
SUMMARY_FILE = "summary.json"
STORE_FILE = "observations.sqlite"

TrialState = Literal[
    "Created", "Running", "Succeeded", "Failed", "MetricsUnavailable", "EarlyStopped", "Killed", "Interrupted"
]
TERMINAL: frozenset[str] = frozenset({"Succeeded", "Failed", "MetricsUnavailable", "EarlyStopped", "Killed"})
FAILED: frozenset[str] = frozenset({"Failed", "MetricsUnavailable"})

ExperimentState = Literal["Running", "Succeeded", "Failed", "Interrupted"]


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="ignore")


class TrialSummary(_Frozen):
    name: str
    params: dict[str, str]
    labels: dict[str, str] = Field(default_factory=dict)
    status: TrialState = "Created"
    reason: str = ""
    message: str = ""
    policy: str = ""
    progress: float | None = None
    eta_s: float | None = None
    eta_at_prune_s: float | None = None
    started_at: datetime | None = None
    ended_at: datetime | None = None
    elapsed_s: float = 0.0
    compute_s: float = 0.0
    objective: float | None = None
    observation: dict[str, float] = Field(default_factory=dict)
    latest_metrics: dict[str, float] = Field(default_factory=dict)
    exit_code: int | None = None
    pid: int | None = None
    attempts: int = 0

    @property
    def terminal(self) -> bool:
        return self.status in TERMINAL


class BestTrial(_Frozen):
    trial: str
    objective: float
    params: dict[str, str]
    observation: dict[str, float]


class SearchParameter(_Frozen):
    """One ``spec.parameters`` entry, so a report can draw it on the right scale."""

    name: str
    type: str
    min: str | None = None
    max: str | None = None
    step: str | None = None
    choices: list[str] | None = None
    distribution: str | None = None


class ObjectiveSummary(_Frozen):
    type: Literal["minimize", "maximize"]
    metric: str
    goal: float | None = None
    additional_metrics: list[str] = Field(default_factory=list)
    strategies: dict[str, str] = Field(default_factory=dict)


class SweepSummary(_Frozen):
    schema_version: int = SCHEMA_VERSION
    experiment: str
    namespace: str
    source: str
    fingerprint: str
    status: ExperimentState = "Running"
    reason: str = ""
    message: str = ""
    objective: ObjectiveSummary
    algorithm: str
    early_stopping: str | None = None
    max_trial_count: int | None = None
    parallel_trial_count: int = 1
    max_failed_trial_count: int | None = None
    started_at: datetime
    updated_at: datetime
    ended_at: datetime | None = None
    wall_s: float = 0.0
    compute_used_s: float = 0.0
    compute_saved_s: float = 0.0
    accelerator: str = "GPU"  # "GPU" on a machine with GPUs, else "compute": what the hours are counted in
    suggestion_requests: int = 0
    #: settings the suggestion service returned, sent back on resume as Katib's Suggestion status does
    algorithm_settings: dict[str, str] = Field(default_factory=dict)
    counts: dict[str, int] = Field(default_factory=dict)
    best: BestTrial | None = None
    unsupported: list[str] = Field(default_factory=list)
    parameters: list[SearchParameter] = Field(default_factory=list)
    trials: list[TrialSummary] = Field(default_factory=list)


def write_summary(workdir: Path, summary: SweepSummary) -> Path:
    path = workdir / SUMMARY_FILE
    tmp = path.with_suffix(".json.tmp")
    tmp.write_text(json.dumps(summary.model_dump(mode="json"), indent=2) + "\n", encoding="utf-8")
    os.replace(tmp, path)
    return path


def read_summary(workdir: Path) -> SweepSummary | None:
    path = workdir / SUMMARY_FILE
    if not path.exists():
        return None
    return SweepSummary.model_validate_json(path.read_text(encoding="utf-8"))
