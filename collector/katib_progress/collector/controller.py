"""The collector process: TrainJob watcher -> SnapshotProcessor -> observation sink.

``Collector`` wires the pieces; ``main(args)`` is what ``katib-progress collector run`` calls.

Snapshots the sink refuses for now (``ProcessOutcome.retry``) are kept per TrainJob, in order, and
delivered again every ``retry_interval_s`` (and before any newer snapshot of the same job). When a
job's queue is full the watcher is made to back off and deliver the event again later, so nothing is
dropped. Overload: once ``max_pending_snapshots`` wait in all, a job that already has snapshots waiting
keeps only its newest one (the older ones are *shed*, never written, counted in
``collector_snapshots_shed_total``): the latest snapshot of every job still wins, nothing is written
twice, and what waits stays below ``max_pending_snapshots`` plus one per job. On SIGTERM/SIGINT the
watcher stops, the queues get a last delivery attempt and the sink is flushed within ``flush_timeout_s``.

Deleted trials (docs/collector.md, "Deleted trials"): before a job's first write the collector adds its
finalizer to the TrainJob (``kube.finalizer``). Once the TrainJob is being deleted (or is gone), nothing
more of it is written; when its Trial is gone or being deleted too, the sink deletes the trial's log
after the last row it could still write, and then the finalizer is removed. Katib's own clean-up may
run before or after: either way no row of a deleted Trial is left.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import deque
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from kubernetes import client
from pydantic import BaseModel, ConfigDict, Field

from katib_progress.collector.counters import Counters, CounterSpec
from katib_progress.collector.kube import JobEvent, TrainJobWatcher, WatchSettings
from katib_progress.collector.kube.finalizer import Finalizers, holds
from katib_progress.collector.pipeline import JobRef, SnapshotProcessor
from katib_progress.collector.ratelog import Every, held_back
from katib_progress.collector.sinks import ObservationSink
from katib_progress.core.errors import KatibProgressError, TemporaryError
from katib_progress.core.types import ProgressPoint

_log = logging.getLogger(__name__)

BACKPRESSURE = CounterSpec(
    "collector_backpressure_total",
    "watch events sent back because the job's queue of refused snapshots was full",
)
SHED = CounterSpec(
    "collector_snapshots_shed_total",
    "waiting snapshots dropped for a newer one of the same job because max_pending_snapshots wait in all",
)
RELEASED = CounterSpec(
    "collector_trainjobs_released_total",
    "deleted TrainJobs handled: the trial's log deleted (its Trial is gone) or kept",
    ("log",),
)
RELEASE_ERRORS = CounterSpec(
    "collector_release_errors_total", "unexpected failures releasing a deleted TrainJob (retried)"
)
DEFER_MAX_S = 10.0  # first-sight reads wait for the first list at most this long
DEFER_POLL_S = 0.05


class CollectorSettings(BaseModel):
    """Settings of one collector process, in small typed groups."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    watch: WatchSettings = WatchSettings()
    retry_interval_s: float = Field(
        default=1.0, gt=0, description="re-delivery of snapshots the sink refused"
    )
    max_pending_per_job: int = Field(default=256, ge=1, description="refused snapshots held per TrainJob")
    max_pending_snapshots: int = Field(
        default=20_000,
        ge=1,
        description="refused snapshots held in all; beyond, a job with some waiting keeps only its newest",
    )
    recovery_workers: int = Field(
        default=8, ge=1, le=256, description="first-sight reads of what a job already wrote, at once"
    )
    flush_timeout_s: float = Field(default=10.0, ge=0, description="time to drain the sink on shutdown")
    finalizer: bool = Field(
        default=True,
        description="hold each TrainJob with our finalizer until a deleted trial's log is deleted",
    )


def job_ref(event: JobEvent) -> JobRef:
    return JobRef(
        namespace=event.namespace,
        name=event.name,
        uid=event.uid,
        experiment=event.trial.experiment,
        trial=event.trial.name,
        started_at=event.created,
        trial_uid=event.trial.uid,
    )


class Collector:
    """Watches Trial-owned TrainJobs and writes each distinct trainerStatus snapshot to ``sink``."""

    def __init__(
        self,
        settings: CollectorSettings,
        sink: ObservationSink,
        api_client: client.ApiClient,
        *,
        on_point: Callable[[ProgressPoint], None] | None = None,
        counters: Counters | None = None,
        on_event: Callable[[JobEvent], None] | None = None,
    ) -> None:
        self.settings = settings
        # Called with every delivered event before its snapshot is processed (collector/cluster.py).
        self._event_hook = on_event
        self.sink = sink
        self.counters = counters if counters is not None else Counters()
        self.processor = SnapshotProcessor(sink, counters=self.counters, on_point=on_point)
        self.watcher = TrainJobWatcher(
            api_client, self._on_event, settings=settings.watch, counters=self.counters
        )
        self._lock = threading.Lock()
        self._pending: dict[str, tuple[JobRef, deque[Mapping[str, Any] | None]]] = {}
        self._waiting = 0  # snapshots in all of _pending's queues
        self._shed_log = Every(10.0)
        self._recovering: set[str] = set()
        # First-sight reads of jobs delivered by the first list, held back until the list is delivered
        # (see _drain); at most DEFER_MAX_S after the first one.
        self._deferred: list[JobRef] = []
        self._deferred_since: float | None = None
        self._pool = ThreadPoolExecutor(settings.recovery_workers, thread_name_prefix="collector-recovery")
        self._recovery_log = Every(10.0)
        self._wait_log = Every(10.0)
        self._stopping = threading.Event()
        self.finalizers = Finalizers(api_client, request_timeout_s=settings.watch.request_timeout_s)
        # Jobs not read back yet: the TrainJob's metadata as last delivered (its finalizers).
        self._meta: dict[str, Mapping[str, Any]] = {}
        # Deleted TrainJobs: key -> (job, held by our finalizer, when to try next; inf while running).
        self._releasing: dict[str, tuple[JobRef, bool, float]] = {}
        self._released: set[str] = set()  # released while the TrainJob still existed (its delete follows)
        self._closed: set[str] = set()  # being deleted: nothing more of them is written
        self._release_log = Every(10.0)

    # -- event handling (called from the watcher's threads) --------------------------------------

    def _on_event(self, event: JobEvent) -> None:
        if self._event_hook is not None:
            self._event_hook(event)
        job = job_ref(event)
        with self._lock:
            if event.kind == "delete" or event.deleting:
                self._close(job, event)
                return
            if job.key in self._closed:
                return
            if not self.processor.ready(job):
                self._meta[job.key] = event.meta
            entry = self._pending.get(job.key)
            if entry is not None and entry[1] and entry[1][-1] == event.trainer_status:
                # the same status again (a change of metadata only, e.g. our finalizer being added):
                # the sequencer would skip it as a repeat, so it need not wait in the queue
                return
            if entry is not None and entry[1] and self._waiting >= self.settings.max_pending_snapshots:
                self._shed(job, entry[1])
            if entry is not None and len(entry[1]) >= self.settings.max_pending_per_job:
                self.counters.inc(BACKPRESSURE)
                self._drain(job.key)
                entry = self._pending.get(job.key)
                if entry is not None and len(entry[1]) >= self.settings.max_pending_per_job:
                    raise TemporaryError(f"{len(entry[1])} snapshots of trial {job.trial} wait for the sink")
            if entry is not None and entry[1]:
                # Earlier snapshots of this job wait (the sink refused one, or the first read runs):
                # queue behind them; the retry loop or the first read delivers them in order, so a
                # full sink is not asked again for every event.
                entry[1].append(event.trainer_status)
                self._waiting += 1
                return
            queue = entry[1] if entry is not None else deque()
            queue.append(event.trainer_status)
            self._waiting += 1
            self._pending[job.key] = (job, queue)
            self._drain(job.key)

    def _close(self, job: JobRef, event: JobEvent) -> None:
        """The TrainJob is being deleted or is gone (lock held): nothing more of it is written, and its
        release is scheduled (once) unless it already ran."""
        dropped = self._pending.pop(job.key, None)
        if dropped is not None:
            self._waiting -= len(dropped[1])
        self._recovering.discard(job.key)
        self._meta.pop(job.key, None)
        self.processor.forget(job)
        if event.kind == "delete":
            self._closed.discard(job.key)
            _log.info("TrainJob %s/%s deleted; state forgotten", job.namespace, job.name)
            if job.key in self._released:  # released while it waited for our finalizer
                self._released.discard(job.key)
                return
        else:
            self._closed.add(job.key)
            if job.key in self._released:
                return
        if job.key not in self._releasing:
            held = event.kind != "delete" and self.settings.finalizer and holds(event.meta)
            self._releasing[job.key] = (job, held, float("inf"))
            self._pool.submit(self._release, job, held)

    def _release(self, job: JobRef, held: bool) -> None:
        """Delete the trial's log if its Trial is gone or being deleted (after the last row the sink
        could still write), then let the TrainJob go. A failure is tried again by the retry loop.
        (A pool task is its thread's outermost loop: anything unexpected is logged, counted and
        retried too, never lost in a future nobody reads.)"""
        try:
            gone = self.finalizers.trial_gone(job.namespace, job.trial, job.trial_uid)
            if gone:
                self.sink.delete(job.trial)
            if held:
                self.finalizers.remove(job.namespace, job.name, job.uid)
        except Exception as exc:  # noqa: BLE001 - outermost: logged with traceback below, counted
            if not isinstance(exc, KatibProgressError):
                _log.exception("releasing deleted TrainJob %s/%s failed", job.namespace, job.name)
                self.counters.inc(RELEASE_ERRORS)
            delay = max(self.settings.retry_interval_s, getattr(exc, "delay", None) or 0.0)
            with self._lock:
                if job.key in self._releasing:
                    self._releasing[job.key] = (job, held, time.monotonic() + delay)
            if (held_for := self._release_log.due()) is not None:
                _log.warning(
                    "cannot release deleted TrainJob %s/%s yet: %s; retrying in %.1fs%s",
                    job.namespace,
                    job.name,
                    exc,
                    delay,
                    held_back(held_for),
                )
            return
        with self._lock:
            self._releasing.pop(job.key, None)
            if held and job.key in self._closed:
                self._released.add(job.key)
        self.counters.inc(RELEASED, log="deleted" if gone else "kept")
        _log.info(
            "deleted TrainJob %s/%s released; trial %s's log %s",
            job.namespace,
            job.name,
            job.trial,
            "deleted (its Trial is gone)" if gone else "kept (its Trial remains)",
        )

    def _retry_releases(self) -> None:
        now = time.monotonic()
        with self._lock:
            due = [(key, job, held) for key, (job, held, at) in self._releasing.items() if at <= now]
            for key, job, held in due:
                self._releasing[key] = (job, held, float("inf"))
        for _, job, held in due:
            if not self._stopping.is_set():
                self._pool.submit(self._release, job, held)

    def _shed(self, job: JobRef, queue: deque[Mapping[str, Any] | None]) -> None:
        """Overload (lock held): drop the job's waiting snapshots, which the new one supersedes. None
        was recorded (the sink refused each or the first read runs), so the new one takes the next
        sequence number and nothing is written twice."""
        shed = len(queue)
        queue.clear()
        self._waiting -= shed
        self.counters.inc(SHED, shed)
        held = self._shed_log.due()
        if held is not None:
            _log.warning(
                "%d snapshots wait for the sink (max_pending_snapshots %d): dropped %d older snapshot(s) "
                "of trial %s for its newest%s",
                self._waiting + shed,
                self.settings.max_pending_snapshots,
                shed,
                job.trial,
                held_back(held),
            )

    def _drain(self, key: str) -> bool:
        """Process a job's queued snapshots in order until the sink refuses one (lock held); True when
        it refused.

        A job seen for the first time waits (its snapshots queued) while a recovery worker reads what
        was already written for its trial; the watch goes on meanwhile."""
        job, queue = self._pending[key]
        if not self.processor.ready(job):
            if key not in self._recovering and not self._stopping.is_set():
                self._recovering.add(key)
                if self.watcher.has_synced():
                    self._pool.submit(self._recover, job)
                else:
                    # Until the first list is delivered its thread has the CPU to itself: N reads of
                    # the DB manager in parallel would only delay the watch (the jobs wait anyway).
                    if self._deferred_since is None:
                        self._deferred_since = time.monotonic()
                    self._deferred.append(job)
            return False
        while queue:
            outcome = self.processor.process(job, queue[0])
            if outcome.retry:
                return True
            queue.popleft()
            self._waiting -= 1
        del self._pending[key]
        return False

    def _recover(self, job: JobRef) -> None:
        try:
            if self.settings.finalizer:
                with self._lock:
                    meta = self._meta.get(job.key)
                if not self.finalizers.add(job.namespace, job.name, job.uid, meta):
                    return  # gone or being deleted: its deletion is delivered next
            self.processor.recover(job)
        except KatibProgressError as exc:
            held = self._recovery_log.due()
            if held is not None:
                _log.warning("cannot read trial %s's latest rows yet: %s%s", job.trial, exc, held_back(held))
        finally:
            with self._lock:
                self._recovering.discard(job.key)
                if self.processor.ready(job):
                    self._meta.pop(job.key, None)
                if job.key in self._pending and self.processor.ready(job):
                    self._drain(job.key)

    def _release_deferred(self, *, force: bool = False) -> None:
        """Start the held-back first-sight reads once every scope has listed (or DEFER_MAX_S passed)."""
        with self._lock:
            if not self._deferred or self._deferred_since is None:
                return
            waited = time.monotonic() - self._deferred_since
            if not force and not self.watcher.has_synced() and waited < DEFER_MAX_S:
                return
            deferred, self._deferred, self._deferred_since = self._deferred, [], None
            for job in deferred:
                if job.key in self._recovering and not self._stopping.is_set():
                    self._pool.submit(self._recover, job)

    def retry_pending(self) -> int:
        """Deliver refused snapshots again; returns how many are still waiting."""
        with self._lock:
            for key in list(self._pending):
                if self._drain(key):
                    # The sink takes nothing now: the others wait for the next round, which starts
                    # after this job (it goes last), so one job's refusals never hold the rest back.
                    self._pending[key] = self._pending.pop(key)
                    break
            return self._waiting

    def _retry_loop(self) -> None:
        interval = self.settings.retry_interval_s
        due = time.monotonic() + interval
        while True:
            wait = max(0.0, due - time.monotonic())
            if self._deferred or not self.watcher.has_synced():  # release them soon after the list
                wait = min(wait, DEFER_POLL_S)
            if self._stopping.wait(wait):
                return
            self._release_deferred()
            if time.monotonic() < due:
                continue
            self._retry_releases()
            due = time.monotonic() + interval
            try:
                left = self.retry_pending()
            except KatibProgressError:
                _log.exception("re-delivery of pending snapshots failed")
                continue
            if left and (held := self._wait_log.due()) is not None:
                _log.info("%d snapshot(s) still wait for the sink or a first read%s", left, held_back(held))

    # -- lifecycle -------------------------------------------------------------------------------

    def run(self, _iterations: int | None = None) -> None:
        """Watch until ``stop()`` (or ``_iterations`` list/watch rounds per scope, for tests)."""
        retry = threading.Thread(target=self._retry_loop, name="collector-retry", daemon=True)
        retry.start()
        try:
            self.watcher.run(_iterations)
        finally:
            if _iterations is not None:  # tests: what was delivered is read back and written first
                self._release_deferred(force=True)
                self._pool.shutdown(wait=True)
            self._stopping.set()
            retry.join()
            self._pool.shutdown(wait=True, cancel_futures=True)
            left = self.retry_pending()
            if left:
                _log.warning("%d refused snapshot(s) not delivered at shutdown", left)

    def has_synced(self) -> bool:
        """True once the watcher has listed every namespace scope (see ``TrainJobWatcher.has_synced``)."""
        return self.watcher.has_synced()

    def stop(self) -> None:
        self._stopping.set()
        self.watcher.stop()
