"""One attempt of a trial: its fresh state, its own copy of a File collector's path, and the metrics
a StdOut/File collector reads from its output once it exited."""

from __future__ import annotations

import logging
from collections.abc import Mapping
from datetime import datetime
from pathlib import Path

from katib_progress.local._katib import ObservationReader
from katib_progress.local._textmetrics import collect
from katib_progress.local.experiment import LocalExperiment
from katib_progress.local.summary import TrialSummary

_log = logging.getLogger(__name__)


def collect_output(exp: LocalExperiment, trial_dir: Path, reader: ObservationReader) -> str:
    """StdOut/File collectors: the trial's metrics file, parsed as Katib's sidecar parses it, into the
    store (``ReportObservationLog``). Returns a note when the file could not be used."""
    collector = exp.collector
    if not collector.reads_output:
        return ""
    source = trial_dir / "stdout.log" if collector.kind == "StdOut" else local_path(collector.path, trial_dir)
    try:
        rows = collect(collector, source, exp.metric_names)
    except ValueError as exc:
        _log.warning("metrics file of trial %s: %s", trial_dir.name, exc)
        return f"metrics file {source.name}: {exc}"
    if rows:
        reader.report(trial_dir.name, rows)
    return ""


def local_path(path: str | None, trial_dir: Path) -> Path:
    """A File collector's absolute path inside the trial's directory (Katib mounts a volume per pod)."""
    return trial_dir / (path or "").lstrip("/")


def own_metrics_file(
    path: str, trial_dir: Path, argv: tuple[str, ...], env: Mapping[str, str]
) -> tuple[tuple[str, ...], dict[str, str]]:
    """Each trial writes its own copy of the File collector's path: occurrences are rewritten."""
    local = local_path(path, trial_dir)
    local.parent.mkdir(parents=True, exist_ok=True)
    return (
        tuple(a.replace(path, str(local)) for a in argv),
        {k: v.replace(path, str(local)) for k, v in env.items()},
    )


def new_attempt(trial: TrialSummary, now: datetime) -> TrialSummary:
    """``trial`` as a new running attempt: results of an earlier attempt cleared."""
    return trial.model_copy(
        update={
            "status": "Running",
            "reason": "",
            "message": "",
            "started_at": now,
            "ended_at": None,
            "attempts": trial.attempts + 1,
            "progress": None,
            "eta_s": None,
            "exit_code": None,
            "objective": None,
            "observation": {},
            "latest_metrics": {},
            "eta_at_prune_s": None,
            "policy": "",
        }
    )
