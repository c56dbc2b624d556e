"""TrainJob trainerStatus snapshots -> observation rows in a sink, plus ProgressPoints for pruning.

``SnapshotProcessor.process(job, trainer_status)`` is called for every delivery of a TrainJob (watch
event, re-list, resync). It parses the snapshot, decides with the per-job sequencer whether it is new
(see katib_progress/core/sequence.py), writes the rows of new snapshots through the sink, and hands a
``ProgressPoint`` to ``on_point``. The rules are documented in docs/collector.md.
"""

from __future__ import annotations

import enum
import logging
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from katib_progress.collector.counters import Counters, CounterSpec, HistogramSpec
from katib_progress.collector.ratelog import Every, held_back
from katib_progress.collector.rows import MetricRow, content_digest, recover_state, snapshot_rows
from katib_progress.collector.sinks import ObservationSink
from katib_progress.core.errors import PermanentError, TemporaryError
from katib_progress.core.sequence import SequenceState, SnapshotSequencer, Step, StepKind
from katib_progress.core.status import MetricRejection, ParsedSnapshot, StatusError, parse_trainer_status
from katib_progress.core.types import ProgressPoint

_log = logging.getLogger(__name__)

SNAPSHOTS = CounterSpec("collector_snapshots_total", "trainerStatus snapshots seen, by outcome", ("outcome",))
REJECTED = CounterSpec("collector_metrics_rejected_total", "metrics not written, by reason", ("reason",))
ROWS = CounterSpec("collector_rows_written_total", "observation rows handed to the sink")
RECOVERED = CounterSpec("collector_jobs_recovered_total", "jobs resumed from what the sink already held")
LAG = HistogramSpec(
    "collector_snapshot_lag_seconds",
    "seconds from a new snapshot's lastUpdatedTime (the trainer's clock, whole seconds) to its rows "
    "being handed to the sink",
    (0.5, 1.0, 2.0, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0, 900.0, 3600.0),
)
LOG_EVERY_S = 10.0


@dataclass(frozen=True, slots=True)
class JobRef:
    """The TrainJob a snapshot belongs to, and the Katib trial/experiment it reports for."""

    namespace: str
    name: str
    uid: str
    experiment: str
    trial: str
    started_at: datetime | None = None
    trial_uid: str = ""  # "" when not known

    def __post_init__(self) -> None:
        if not self.trial:
            raise ValueError(f"trial: must not be empty (TrainJob {self.namespace}/{self.name})")
        if self.started_at is not None and self.started_at.tzinfo is None:
            raise ValueError(f"started_at: naive datetime {self.started_at!r} has no zone")

    @property
    def key(self) -> str:
        return self.uid or f"{self.namespace}/{self.name}"


class OutcomeKind(enum.StrEnum):
    WRITTEN = "written"  # a new snapshot: rows handed to the sink, point emitted
    REPEAT = "repeat"  # same second and content as the last accepted snapshot
    STALE = "stale"  # lastUpdatedTime earlier than the last accepted snapshot
    ABSENT = "absent"  # no trainerStatus (state is kept: a reappearing status continues it)
    INVALID = "invalid"  # the snapshot as a whole is unusable (e.g. no lastUpdatedTime)
    RETRY = "retry"  # the sink refused for now: nothing recorded, deliver again later
    SECOND_FULL = "second_full"  # more than a million distinct snapshots within one second


@dataclass(frozen=True, slots=True)
class ProcessOutcome:
    kind: OutcomeKind
    seq: int | None = None
    rows: int = 0
    rejections: tuple[MetricRejection, ...] = ()
    point: ProgressPoint | None = None
    error: str = ""

    @property
    def retry(self) -> bool:
        return self.kind is OutcomeKind.RETRY


class SnapshotProcessor:
    """Thread-safe; one instance serves every TrainJob of a collector."""

    def __init__(
        self,
        sink: ObservationSink,
        *,
        counters: Counters | None = None,
        on_point: Callable[[ProgressPoint], None] | None = None,
    ) -> None:
        self._sink = sink
        self.counters = counters if counters is not None else Counters()
        self._on_point = on_point
        self._lock = threading.Lock()
        self._sequencer: SnapshotSequencer[str] = SnapshotSequencer()
        self._recovered: set[str] = set()  # jobs whose restart recovery ran (with or without rows)
        self._refused_log = Every(LOG_EVERY_S)

    def __len__(self) -> int:
        """Number of TrainJobs whose sequencing state is held."""
        return len(self._sequencer)

    def forget(self, job: JobRef) -> None:
        """Drop a job's state (its TrainJob was deleted)."""
        with self._lock:
            self._sequencer.forget(job.key)
            self._recovered.discard(job.key)

    def ready(self, job: JobRef) -> bool:
        """True once the job's restart recovery ran: ``process`` then reads nothing from the sink."""
        with self._lock:
            return job.key in self._recovered

    def recover(self, job: JobRef) -> None:
        """Learn what was already written for the job's trial (``sink.latest``), without holding the
        processor's lock during the read, so many jobs can recover at once. Raises TemporaryError."""
        recovered = recover_state(self._sink.latest(job.trial))
        with self._lock:
            if job.key not in self._recovered:
                self._seed(job, recovered)

    def _seed(self, job: JobRef, recovered: SequenceState | None) -> None:
        if recovered is not None:
            self._sequencer.seed(job.key, recovered)
            self.counters.inc(RECOVERED)
            _log.debug("trial %s resumes after %s (seq %d)", job.trial, recovered.stamp, recovered.seq)
        self._recovered.add(job.key)

    def _outcome(self, kind: OutcomeKind, **kw: Any) -> ProcessOutcome:
        self.counters.inc(SNAPSHOTS, outcome=kind.value)
        return ProcessOutcome(kind, **kw)

    def process(self, job: JobRef, trainer_status: Mapping[str, Any] | None) -> ProcessOutcome:
        """Sequence one delivery of the job's trainerStatus and write it when it is a new snapshot."""
        if trainer_status is None:
            return self._outcome(OutcomeKind.ABSENT)
        try:
            parsed = parse_trainer_status(trainer_status)
        except StatusError as exc:
            _log.warning("unusable trainerStatus of TrainJob %s/%s: %s", job.namespace, job.name, exc)
            return self._outcome(OutcomeKind.INVALID, error=str(exc))
        elapsed: float | None = None
        if job.started_at is not None:
            delta = (parsed.last_updated - job.started_at).total_seconds()
            elapsed = delta if delta >= 0 else None
        with self._lock:
            if job.key not in self._recovered:
                try:
                    self._seed(job, recover_state(self._sink.latest(job.trial)))
                except TemporaryError as exc:
                    _log.warning("cannot read trial %s's latest rows yet: %s", job.trial, exc)
                    return self._outcome(OutcomeKind.RETRY, error=str(exc))
            step = self._plan(job, parsed, elapsed)
            if step.kind is not StepKind.NEW:
                return self._skipped(job, parsed, step)
            rows = snapshot_rows(parsed, stamp=step.stamp, seq=step.seq, elapsed_s=elapsed)
            refused = self._write(job, rows)
            if refused is not None:
                return refused
            self._sequencer.commit(job.key, step)
        return self._written(job, parsed, step, rows, elapsed)

    def _plan(self, job: JobRef, parsed: ParsedSnapshot, elapsed: float | None) -> Step:
        state = self._sequencer.get(job.key)
        digest = None
        if state is not None and state.fingerprint is None:
            # Recovered from rows: compare what this snapshot would write with what was written.
            digest = content_digest(
                snapshot_rows(parsed, stamp=parsed.last_updated, seq=0, elapsed_s=elapsed)
            )
        return self._sequencer.plan(job.key, parsed.last_updated, parsed.fingerprint, digest)

    def _skipped(self, job: JobRef, parsed: ParsedSnapshot, step: Step) -> ProcessOutcome:
        kind = {
            StepKind.REPEAT: OutcomeKind.REPEAT,
            StepKind.STALE: OutcomeKind.STALE,
            StepKind.SECOND_FULL: OutcomeKind.SECOND_FULL,
        }[step.kind]
        if kind is not OutcomeKind.REPEAT:
            _log.warning(
                "%s snapshot of TrainJob %s/%s at %s skipped (last accepted %s)",
                kind.value,
                job.namespace,
                job.name,
                parsed.last_updated,
                step.stamp,
            )
        return self._outcome(kind, seq=step.seq)

    def _write(self, job: JobRef, rows: list[MetricRow]) -> ProcessOutcome | None:
        """Hand the rows to the sink; the outcome when it did not take them."""
        try:
            self._sink.report(job.trial, rows)
        except TemporaryError as exc:
            held = self._refused_log.due()
            if held is not None:
                _log.warning(
                    "sink refused snapshot of trial %s for now: %s%s", job.trial, exc, held_back(held)
                )
            return self._outcome(OutcomeKind.RETRY, error=str(exc))
        except PermanentError as exc:
            _log.error("sink rejected snapshot of trial %s: %s", job.trial, exc)
            return self._outcome(OutcomeKind.INVALID, error=str(exc))
        return None

    def _written(
        self, job: JobRef, parsed: ParsedSnapshot, step: Step, rows: list[MetricRow], elapsed: float | None
    ) -> ProcessOutcome:
        self.counters.inc(ROWS, len(rows))
        self.counters.observe(LAG, max(0.0, (datetime.now(UTC) - parsed.last_updated).total_seconds()))
        for rejection in parsed.rejections:
            self.counters.inc(REJECTED, reason=rejection.reason.value)
        if parsed.rejections:
            _log.warning(
                "TrainJob %s/%s snapshot %d: %d metric(s) not written: %s",
                job.namespace,
                job.name,
                step.seq,
                len(parsed.rejections),
                "; ".join(f"{r.name}={r.value!r} {r.reason.value} ({r.detail})" for r in parsed.rejections),
            )
        point = ProgressPoint(
            experiment=job.experiment,
            trial=job.trial,
            seq=step.seq,
            timestamp=step.stamp,
            progress=float(parsed.progress) if parsed.progress is not None else None,
            elapsed_s=elapsed,
            eta_s=float(parsed.eta_s) if parsed.eta_s is not None else None,
            metrics={**parsed.values, **parsed.non_finite},
        )
        outcome = self._outcome(
            OutcomeKind.WRITTEN, seq=step.seq, rows=len(rows), rejections=parsed.rejections, point=point
        )
        if self._on_point is not None:
            self._on_point(point)
        return outcome
