"""Snapshots from the local status endpoint -> SnapshotProcessor -> sink (-> store) -> pruning decision.

The endpoint only enqueues; one worker thread runs the same pipeline the cluster collector runs, and
asks the pruning service about every new ProgressPoint. A PRUNE decision is queued for the sweep's
main loop, which stops the trial's process group.
"""

from __future__ import annotations

import logging
import math
import queue
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from types import MappingProxyType
from typing import Any

from katib_progress.collector.pipeline import JobRef, OutcomeKind, SnapshotProcessor
from katib_progress.collector.sinks import ObservationSink
from katib_progress.core.errors import KatibProgressError
from katib_progress.core.types import Decision, ProgressPoint

_log = logging.getLogger(__name__)

DecideFn = Callable[[ProgressPoint], Decision]
_RETRIES = 50
_RETRY_SLEEP_S = 0.1


@dataclass(frozen=True, slots=True)
class Live:
    """The latest progress of a running trial, as the view shows it."""

    progress: float | None = None
    eta_s: float | None = None
    elapsed_s: float | None = None
    metrics: MappingProxyType[str, float] = field(default_factory=lambda: MappingProxyType({}))


@dataclass(frozen=True, slots=True)
class PruneRequest:
    trial: str
    decision: Decision
    point: ProgressPoint


class LocalPipeline:
    def __init__(self, sink: ObservationSink, decide: DecideFn | None) -> None:
        self._decide = decide
        self._processor = SnapshotProcessor(sink, on_point=self._on_point)
        self._queue: queue.Queue[tuple[str, str, dict[str, Any]] | threading.Event | None] = queue.Queue()
        self._lock = threading.Lock()
        self._jobs: dict[tuple[str, str], JobRef] = {}
        self._live: dict[str, Live] = {}
        self._pruned: set[str] = set()
        self._non_finite: dict[str, list[tuple[datetime, str, float]]] = {}
        self.prunes: queue.Queue[PruneRequest] = queue.Queue()
        self._thread = threading.Thread(target=self._run, name="local-pipeline", daemon=True)

    @property
    def processor(self) -> SnapshotProcessor:
        return self._processor

    def start(self) -> LocalPipeline:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._queue.put(None)
        self._thread.join(timeout=10)

    def track(self, job: JobRef) -> None:
        with self._lock:
            self._jobs[(job.namespace, job.name)] = job
            self._live[job.trial] = Live()
            self._pruned.discard(job.trial)
            self._non_finite[job.trial] = []

    def untrack(self, job: JobRef) -> None:
        with self._lock:
            self._jobs.pop((job.namespace, job.name), None)
        self._processor.forget(job)

    def live(self, trial: str) -> Live | None:
        with self._lock:
            return self._live.get(trial)

    def non_finite(self, trial: str) -> list[tuple[datetime, str, float]]:
        """(timestamp, metric, value) of every NaN/Inf the trial reported: never observation rows, but
        Katib's metric strategies see them (a trial whose latest value is NaN has a NaN ``latest``)."""
        with self._lock:
            return list(self._non_finite.get(trial, ()))

    def submit(self, namespace: str, name: str, trainer_status: dict[str, Any]) -> None:
        """The status endpoint's callback: enqueue only."""
        self._queue.put((namespace, name, trainer_status))

    def drain(self, timeout: float = 30.0) -> bool:
        """Wait until every snapshot submitted before this call has gone through the pipeline."""
        done = threading.Event()
        self._queue.put(done)
        return done.wait(timeout)

    def _run(self) -> None:
        while True:
            item = self._queue.get()
            if item is None:
                return
            if isinstance(item, threading.Event):
                item.set()
                continue
            try:
                self._handle(*item)
            except Exception:  # noqa: BLE001 - the worker's outermost loop: log with traceback, keep going
                _log.exception("local pipeline failed on a snapshot of %s/%s", item[0], item[1])

    def _handle(self, namespace: str, name: str, status: dict[str, Any]) -> None:
        with self._lock:
            job = self._jobs.get((namespace, name))
        if job is None:
            _log.debug("snapshot for %s/%s after its trial ended: dropped", namespace, name)
            return
        for _ in range(_RETRIES):
            outcome = self._processor.process(job, status)
            if outcome.kind is not OutcomeKind.RETRY:
                return
            time.sleep(_RETRY_SLEEP_S)
        _log.error("snapshot of trial %s dropped after %d retries: %s", job.trial, _RETRIES, outcome.error)

    def _on_point(self, point: ProgressPoint) -> None:
        with self._lock:
            previous = self._live.get(point.trial, Live())
            metrics = dict(previous.metrics)
            metrics.update(point.metrics)
            bad = [(point.timestamp, k, v) for k, v in point.metrics.items() if not math.isfinite(v)]
            self._non_finite.setdefault(point.trial, []).extend(bad)
            self._live[point.trial] = Live(
                progress=point.progress if point.progress is not None else previous.progress,
                eta_s=point.eta_s,
                elapsed_s=point.elapsed_s,
                metrics=MappingProxyType(metrics),
            )
            if self._decide is None or point.trial in self._pruned:
                return
        try:
            decision = self._decide(point)
        except KatibProgressError as exc:
            _log.warning("no pruning decision for trial %s (seq %d): %s", point.trial, point.seq, exc)
            return
        if decision.prune:
            with self._lock:
                self._pruned.add(point.trial)
            _log.info("prune trial %s: %s", point.trial, decision.reason)
            self.prunes.put(PruneRequest(point.trial, decision, point))
