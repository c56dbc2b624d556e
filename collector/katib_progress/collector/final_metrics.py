"""The final-metrics marker (docs/deploy.md, "successCondition"): make MetricsUnavailable impossible
for a trial that reported its objective, whatever the collector's lag or downtime.

Katib reads a Push trial's observation log once, when the TrainJob meets the trial template's
``successCondition``. That condition requires the TrainJob annotation
``katib-progress.kubeflow.org/final-metrics: written``, which only this module sets, and only when:

- the TrainJob has ``Complete=True`` (never on ``Failed``; a set marker is never removed), and
- the DB manager has *stored* the rows of the TrainJob's current (final) ``trainerStatus`` snapshot:
  the trial's latest stored rows (read back with ``GetObservationLog``, not the local queue) are at
  the snapshot's second with the same written content, or at a later second. A TrainJob without a
  usable trainerStatus has nothing to write and is marked at once (Katib then rightly finds no
  objective).

The check is stateless (DB + TrainJob), so a restarted or newly elected collector resumes it.
Jobs waiting for their rows are re-checked with backoff by ``run()`` (or ``check_pending()``).
"""

from __future__ import annotations

import logging
import random
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from kubernetes import client

from katib_progress.collector.backoff import Backoff, BackoffSettings, retry_hint
from katib_progress.collector.counters import Counters, CounterSpec
from katib_progress.collector.enforce import TRAINER, condition_true
from katib_progress.collector.events import EventRecorder, ObjectRef
from katib_progress.collector.kube._client import call_or_none
from katib_progress.collector.pipeline import JobRef
from katib_progress.collector.rows import MetricRow, content_digest, recover_state, snapshot_rows
from katib_progress.core.errors import KatibProgressError, TemporaryError
from katib_progress.core.status import StatusError, parse_trainer_status

_log = logging.getLogger(__name__)

MARKER_ANNOTATION = "katib-progress.kubeflow.org/final-metrics"
MARKER_VALUE = "written"
MARKED = CounterSpec("collector_final_metrics_marked_total", "TrainJobs given the final-metrics marker")
WAITING = CounterSpec(
    "collector_final_metrics_checks_total", "checks of a completed TrainJob's stored rows", ("result",)
)
PASS_FAILURES = CounterSpec(
    "collector_final_metrics_pass_failures_total", "final-metrics passes that raised unexpectedly"
)
DEFAULT_POLL = BackoffSettings(initial_s=0.2, max_s=5.0)


class StoredReader(Protocol):
    def stored_latest(self, trial: str) -> list[MetricRow]: ...


def has_marker(obj: Mapping[str, Any]) -> bool:
    annotations = (obj.get("metadata") or {}).get("annotations") or {}
    return annotations.get(MARKER_ANNOTATION) == MARKER_VALUE


def final_rows_stored(job: JobRef, obj: Mapping[str, Any], stored: list[MetricRow]) -> bool:
    """True when ``stored`` (the trial's latest stored rows) holds the TrainJob's current snapshot."""
    raw = (obj.get("status") or {}).get("trainerStatus")
    if not isinstance(raw, Mapping):
        return True  # nothing was reported: nothing to wait for
    try:
        parsed = parse_trainer_status(raw)
    except StatusError:
        return True  # an unusable snapshot is never written
    state = recover_state(stored)
    if state is None:
        return False
    second = int(parsed.last_updated.timestamp())
    if state.epoch_second != second:
        return state.epoch_second > second
    elapsed = None
    if job.started_at is not None:
        delta = (parsed.last_updated - job.started_at).total_seconds()
        elapsed = delta if delta >= 0 else None
    expected = content_digest(snapshot_rows(parsed, stamp=parsed.last_updated, seq=0, elapsed_s=elapsed))
    return expected == state.content_digest


@dataclass
class _Waiting:
    job: JobRef
    obj: Mapping[str, Any]
    next_check: float
    backoff: Backoff


class FinalMetricsMarker:
    def __init__(
        self,
        api_client: client.ApiClient,
        reader: StoredReader,
        *,
        events: EventRecorder | None = None,
        counters: Counters | None = None,
        poll: BackoffSettings = DEFAULT_POLL,
        clock: Callable[[], float] = time.monotonic,
        request_timeout_s: float = 10.0,
    ) -> None:
        self._api = client.CustomObjectsApi(api_client)
        self._reader = reader
        self.counters = counters if counters is not None else Counters()
        self.events = events
        self._poll = poll
        self._rng = random.Random()
        self._clock = clock
        self._timeout = request_timeout_s
        self._lock = threading.Lock()
        self._waiting: dict[str, _Waiting] = {}
        self._stopping = threading.Event()

    @property
    def waiting(self) -> int:
        with self._lock:
            return len(self._waiting)

    def observe(self, job: JobRef, obj: Mapping[str, Any]) -> None:
        """Called with every delivered TrainJob (after its snapshot went through the pipeline)."""
        with self._lock:
            if has_marker(obj) or condition_true(obj, "Failed") or not condition_true(obj, "Complete"):
                self._waiting.pop(job.key, None)
                return
            entry = self._waiting.get(job.key)
            if entry is None:
                self._waiting[job.key] = _Waiting(job, obj, self._clock(), Backoff(self._poll, self._rng))
            else:
                entry.obj = obj
                entry.next_check = min(entry.next_check, self._clock())

    def forget(self, job: JobRef) -> None:
        with self._lock:
            self._waiting.pop(job.key, None)

    def check_pending(self) -> int:
        """Check every job whose time has come; returns how many still wait."""
        now = self._clock()
        with self._lock:
            due = [w for w in self._waiting.values() if w.next_check <= now]
        for entry in due:
            hint = None
            try:
                done = self._check(entry)
            except KatibProgressError as exc:
                self.counters.inc(WAITING, result="error")
                _log.warning("final metrics of trial %s not checked yet: %s", entry.job.trial, exc)
                done, hint = False, retry_hint(exc)
            with self._lock:
                if done:
                    if self._waiting.get(entry.job.key) is entry:
                        del self._waiting[entry.job.key]
                else:
                    entry.next_check = self._clock() + entry.backoff.next_delay(hint)
        return self.waiting

    def _check(self, entry: _Waiting) -> bool:
        job = entry.job
        if not final_rows_stored(job, entry.obj, self._reader.stored_latest(job.trial)):
            self.counters.inc(WAITING, result="waiting")
            return False
        self.counters.inc(WAITING, result="acknowledged")
        return self._mark(job)

    def _mark(self, job: JobRef) -> bool:
        body = {"metadata": {"annotations": {MARKER_ANNOTATION: MARKER_VALUE}}}
        patched = call_or_none(
            self._api.patch_namespaced_custom_object,
            *TRAINER,
            job.namespace,
            "trainjobs",
            job.name,
            body,
            _request_timeout=self._timeout,
        )
        if patched is None:
            return True  # gone: nothing left to mark
        self.counters.inc(MARKED)
        _log.info(
            "TrainJob %s/%s: final metrics stored; marker set",
            job.namespace,
            job.name,
            extra={"event": "final_metrics", "trial": job.trial, "namespace": job.namespace},
        )
        if self.events is not None:
            self.events.record(
                ObjectRef("trainer.kubeflow.org/v1alpha1", "TrainJob", job.namespace, job.name, job.uid),
                reason="FinalMetricsWritten",
                action="Annotate",
                note=f"final metrics of trial {job.trial} are stored in Katib's DB; "
                f"{MARKER_ANNOTATION}={MARKER_VALUE}",
            )
        return True

    def run(self, interval_s: float = 0.1) -> None:
        """Re-check waiting jobs until ``stop()``."""
        while not self._stopping.wait(interval_s):
            try:
                self.check_pending()
            except TemporaryError as exc:  # pragma: no cover - check_pending handles per job
                _log.warning("final-metrics pass failed: %s", exc)
            except Exception:  # noqa: BLE001 - the thread's outermost loop: a dead thread strands every trial
                self.counters.inc(PASS_FAILURES)
                _log.exception("final-metrics pass failed unexpectedly; retrying")

    def stop(self) -> None:
        self._stopping.set()
