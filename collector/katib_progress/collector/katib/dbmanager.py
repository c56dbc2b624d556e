"""``DBManagerSink``: writes observation rows to Katib's DB manager (``ReportObservationLog``).

``report()`` never talks to the network: it appends the rows to the trial's FIFO in a bounded
in-memory buffer and returns. ``senders`` threads deliver the FIFOs concurrently, **at most one RPC
in flight per trial** so each trial's rows arrive in order (trials are served round-robin). The
queued snapshots of one trial are coalesced into a single ``ReportObservationLog`` of at most
``max_batch_rows`` rows (a batch is all-or-nothing in Katib's MySQL, one INSERT); a batch keeps its
rows across retries. Failures:

- UNAVAILABLE, DEADLINE_EXCEEDED, CANCELLED (Katib's Go server resets a stream whose deadline passed
  with RST_STREAM CANCEL, which can reach the client before its own timer: "Stream removed"; this
  client never cancels a call itself), UNKNOWN (Katib's answer when MySQL is down), ABORTED, INTERNAL:
  retried forever with exponential backoff and jitter; the trial waits (others go on), its batch
  stays at the head of its FIFO. These outcomes are ambiguous: the server may still commit the write
  after the client gave up on it (Katib's MySQL DB manager ignores the RPC deadline while it waits
  on a lock). So before resending, the batch is read back (``GetObservationLog``) only once
  ``lock_wait_s`` has passed since the last attempt began - past the server's worst-case lock wait
  - and counts as delivered when all its rows are there (no duplicate rows). An attempt that never
  left this process (``never_sent``: no connection) is not ambiguous: resent after the backoff. A store that
  advertises idempotent writes (the embedded store: trailing metadata
  ``katib-progress-idempotent-writes``; it skips rows it already holds, inside the write
  transaction) gets the batch resent after the backoff alone.
- Any other code: the batch can never succeed; it is dropped with an ERROR log and counted in
  ``dbmanager_rows_dropped_total{reason=<code>}``.

Overflow policy: when accepting the rows would exceed ``max_buffered_rows``, ``report()`` refuses
with ``TemporaryError`` (``dbmanager_buffer_overflow_total``; one ERROR line per 10 s) and keeps
nothing, so the caller does not mark the snapshot written and delivers it again later. Nothing is
dropped silently.
"""

from __future__ import annotations

import heapq
import logging
import random
import threading
import time
from collections import OrderedDict, deque
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import grpc
from kubeflow.katib import katib_api_pb2 as _pb
from kubeflow.katib import katib_api_pb2_grpc as _pb_grpc

from katib_progress.collector.counters import Counters, CounterSpec
from katib_progress.collector.katib.dbsettings import DBManagerSettings
from katib_progress.collector.ratelog import Every, held_back
from katib_progress.collector.rows import SEQ_METRIC, MetricRow, latest_rows
from katib_progress.core.errors import PermanentError, TemporaryError
from katib_progress.core.timefmt import format_rfc3339nano, parse_rfc3339

_log = logging.getLogger(__name__)

# The generated stubs carry no type information.
pb: Any = _pb
pb_grpc: Any = _pb_grpc

RETRYABLE = frozenset(
    {
        grpc.StatusCode.UNAVAILABLE,
        grpc.StatusCode.DEADLINE_EXCEEDED,
        # grpc-go's server answers an expired deadline with RST_STREAM(CANCEL); the client may see that
        # ("Stream removed") before its own deadline fires. Ambiguous, like DEADLINE_EXCEEDED.
        grpc.StatusCode.CANCELLED,
        grpc.StatusCode.UNKNOWN,
        grpc.StatusCode.ABORTED,
        grpc.StatusCode.INTERNAL,
    }
)
IDEMPOTENT_KEY = "katib-progress-idempotent-writes"  # trailing metadata of the embedded store
OVERFLOW = CounterSpec("dbmanager_buffer_overflow_total", "reports refused because the buffer was full")
DROPPED = CounterSpec("dbmanager_rows_dropped_total", "rows the DB manager will never get", ("reason",))
RETRIES = CounterSpec("dbmanager_retries_total", "ReportObservationLog attempts to retry", ("code",))
DELIVERED = CounterSpec("dbmanager_rows_delivered_total", "rows stored by the DB manager")
RECOVERED = CounterSpec(
    "dbmanager_batches_found_committed_total", "ambiguous batches found stored when read back"
)
LOG_EVERY_S = 10.0

__all__ = ["RETRYABLE", "DBManagerSettings", "DBManagerSink"]


def _to_pb(rows: Sequence[MetricRow]) -> Any:
    return pb.ObservationLog(
        metric_logs=[
            pb.MetricLog(time_stamp=r.timestamp, metric=pb.Metric(name=r.name, value=r.value)) for r in rows
        ]
    )


def _key(row: MetricRow) -> tuple[Any, str, str]:
    return parse_rfc3339(row.timestamp, field="time_stamp"), row.name, row.value


@dataclass
class _Trial:
    """One trial's queue: row groups (one per report) and the state of its delivery."""

    fifo: deque[tuple[MetricRow, ...]] = field(default_factory=deque)
    busy: bool = False  # an RPC of this trial is in flight
    delayed: bool = False  # waiting for its retry time
    batch: int = 0  # groups in the batch being delivered (fixed across retries), 0 = none yet
    attempts: int = 0
    ambiguous_at: float | None = None  # start of the last attempt whose outcome is unknown


@dataclass
class _Batch:
    trial: str
    rows: list[MetricRow]
    attempts: int
    ambiguous_at: float | None


def _classified(call: str, exc: grpc.RpcError) -> TemporaryError | PermanentError:
    """A failed call as the project's error: temporary for the retryable codes (``RETRYABLE``)."""
    code = exc.code()
    message = f"{call}: {code.name}: {exc.details()}"
    return TemporaryError(message) if code in RETRYABLE else PermanentError(message)


def never_sent(exc: grpc.RpcError) -> bool:
    """The RPC failed before its request left this process: gRPC's UNAVAILABLE with "failed to connect
    to all addresses" (no connection: the channel is in TRANSIENT_FAILURE, found against Katib's real
    DB manager killed and restarted, where waiting ``lock_wait_s`` held every trial for a minute).
    Any other failure may have reached the server and stays ambiguous."""
    return exc.code() == grpc.StatusCode.UNAVAILABLE and "failed to connect to all addresses" in (
        exc.details() or ""
    )


class DBManagerSink:
    """An ``ObservationSink`` writing to Katib's DB manager at ``address`` ("host:port")."""

    def __init__(
        self, address: str, *, settings: DBManagerSettings | None = None, counters: Counters | None = None
    ) -> None:
        self.address = address
        self.settings = settings or DBManagerSettings()
        self.counters = counters if counters is not None else Counters()
        self._channel = grpc.insecure_channel(
            address,
            options=[
                ("grpc.max_receive_message_length", 256 * 1024 * 1024),
                ("grpc.max_send_message_length", 256 * 1024 * 1024),
                ("grpc.initial_reconnect_backoff_ms", 100),
                ("grpc.max_reconnect_backoff_ms", 2000),
            ],
        )
        self._stub = pb_grpc.DBManagerStub(self._channel)
        # One lock, two conditions: senders wait for work on ``_cond`` and are woken one at a time;
        # ``flush()`` waits on ``_emptied``. Waking every sender after each RPC cost more CPU than the RPC.
        lock = threading.RLock()
        self._cond = threading.Condition(lock)
        self._emptied = threading.Condition(lock)
        self._trials: dict[str, _Trial] = {}
        self._ready: OrderedDict[str, None] = OrderedDict()  # trials with rows, idle, not delayed
        self._delays: list[tuple[float, str]] = []  # heap of (retry time, trial)
        self._buffered = 0
        # deleted trials whose last write attempt may still commit: the monotonic time it can no longer
        self._unsettled: dict[str, float] = {}
        self._rng = random.Random()
        self.idempotent = False  # learned from the server's trailing metadata
        self._closing = threading.Event()
        self._abandon = threading.Event()
        self._overflow_log = Every(LOG_EVERY_S)
        self._retry_log = Every(LOG_EVERY_S)
        self._threads = [
            threading.Thread(target=self._run, name=f"dbmanager-sender-{i}", daemon=True)
            for i in range(self.settings.senders)
        ]
        for thread in self._threads:
            thread.start()

    # ------------------------------------------------------------------ ObservationSink

    @property
    def buffered_rows(self) -> int:
        with self._cond:
            return self._buffered

    def report(self, trial: str, rows: Sequence[MetricRow]) -> None:
        if not trial:
            raise PermanentError("trial: must not be empty")
        if not rows:
            return
        with self._cond:
            if self._closing.is_set():
                raise PermanentError(f"DB manager sink for {self.address} is closed")
            limit = self.settings.max_buffered_rows
            if self._buffered + len(rows) > limit:
                self._refuse(trial, len(rows), limit)
            state = self._trials.get(trial)
            if state is None:
                state = self._trials[trial] = _Trial()
            state.fifo.append(tuple(rows))
            self._buffered += len(rows)
            if not state.busy and not state.delayed:
                self._ready[trial] = None
                self._cond.notify()

    def _refuse(self, trial: str, count: int, limit: int) -> None:
        self.counters.inc(OVERFLOW)
        held = self._overflow_log.due()
        if held is not None:
            _log.error(
                "DB manager %s: buffer full (%d of %d rows held); refusing %d rows of trial %s - the "
                "snapshot will be retried%s",
                self.address,
                self._buffered,
                limit,
                count,
                trial,
                held_back(held),
            )
        raise TemporaryError(f"DB manager buffer full ({self._buffered}/{limit} rows)")

    def latest(self, trial: str) -> list[MetricRow]:
        """Rows at the trial's greatest timestamp, stored or still queued here.

        Every snapshot the collector writes carries a ``trainjob/seq`` row, so the latest stamp is
        found from those rows alone and only the rows at that stamp are fetched (two small reads
        instead of the whole log); a log without seq rows (written by another tool) is read whole.
        """
        with self._cond:
            state = self._trials.get(trial)
            pending = [row for group in state.fifo for row in group] if state is not None else []
        seq_rows = self._get(pb.GetObservationLogRequest(trial_name=trial, metric_name=SEQ_METRIC))
        if seq_rows:
            stamp = latest_rows(seq_rows)[0].timestamp
            remote = self._get(
                pb.GetObservationLogRequest(trial_name=trial, start_time=stamp, end_time=stamp)
            )
        else:
            remote = self._get(pb.GetObservationLogRequest(trial_name=trial))
        # A batch delivered between the two reads is in both: count each row once.
        unique = list(dict.fromkeys(remote + pending))
        return latest_rows(unique)

    def _get(self, request: Any) -> list[MetricRow]:
        try:
            reply, call = self._stub.GetObservationLog.with_call(request, timeout=self.settings.rpc_timeout_s)
        except grpc.RpcError as exc:
            raise _classified(f"GetObservationLog({request.trial_name})", exc) from None
        self._learn(call)
        return [
            MetricRow(log.metric.name, log.metric.value, log.time_stamp)
            for log in reply.observation_log.metric_logs
        ]

    def delete(self, trial: str) -> None:
        """Delete the trial's log after the last row this sink could still write for it (see
        ``ObservationSink``): queued groups are dropped, an RPC in flight is waited for, and an attempt
        whose outcome is unknown may still commit until ``lock_wait_s`` after it began, so the delete
        waits for that too (``TemporaryError`` carrying the wait; the caller retries)."""
        if not trial:
            raise PermanentError("trial: must not be empty")
        with self._cond:
            # wait until no RPC of the trial is in flight; the sender that settles it may remove the
            # trial's queue meanwhile (it was emptied), so it is looked up again after every wake-up
            def idle() -> bool:
                found = self._trials.get(trial)
                return found is None or not found.busy

            if not self._emptied.wait_for(idle, timeout=self.settings.rpc_timeout_s + 1):
                raise TemporaryError(f"a write of trial {trial} is still in flight")
            state = self._trials.get(trial)
            if state is not None:
                dropped = sum(len(group) for group in state.fifo)
                self._buffered -= dropped
                self._ready.pop(trial, None)
                del self._trials[trial]
                if dropped:
                    self.counters.inc(DROPPED, dropped, reason="trial_deleted")
                if self._buffered == 0:
                    self._emptied.notify_all()
                if state.ambiguous_at is not None and not self.idempotent:
                    self._unsettled[trial] = state.ambiguous_at + self.settings.lock_wait_s
            until = self._unsettled.get(trial)
        if until is not None:
            wait = until - time.monotonic()
            if wait > 0:
                raise TemporaryError(
                    f"an earlier write of trial {trial} may still commit for {wait:.1f}s", delay=wait
                )
        try:
            _, call = self._stub.DeleteObservationLog.with_call(
                pb.DeleteObservationLogRequest(trial_name=trial), timeout=self.settings.rpc_timeout_s
            )
        except grpc.RpcError as exc:
            raise _classified(f"DeleteObservationLog({trial})", exc) from None
        self._learn(call)
        with self._cond:
            self._unsettled.pop(trial, None)

    def _learn(self, call: Any) -> None:
        if not self.idempotent:
            self.idempotent = any(key == IDEMPOTENT_KEY for key, _ in call.trailing_metadata() or ())

    def flush(self, timeout: float) -> bool:
        with self._cond:
            return self._emptied.wait_for(lambda: self._buffered == 0, timeout=timeout)

    def close(self) -> None:
        if self._closing.is_set():
            return
        with self._cond:
            self._closing.set()
            self._cond.notify_all()
            self._emptied.notify_all()
        delivered = self.flush(self.settings.close_timeout_s)
        if not delivered:
            self._abandon.set()
        with self._cond:
            self._cond.notify_all()
            self._emptied.notify_all()
        for thread in self._threads:
            thread.join(timeout=self.settings.rpc_timeout_s + 1)
        with self._cond:
            lost = self._buffered
        if lost:
            self.counters.inc(DROPPED, lost, reason="closed")
            _log.error("DB manager %s: closed with %d rows undelivered", self.address, lost)
        self._channel.close()

    # ------------------------------------------------------------------ sender threads

    def _next_batch(self) -> _Batch | None:
        """The next trial to deliver (its batch), waiting for one; None when closing and idle."""
        with self._cond:
            while not self._abandon.is_set():
                now = time.monotonic()
                while self._delays and self._delays[0][0] <= now:
                    _, trial = heapq.heappop(self._delays)
                    state = self._trials.get(trial)
                    if state is not None and state.delayed:
                        state.delayed = False
                        self._ready[trial] = None
                if self._ready:
                    trial, _ = self._ready.popitem(last=False)
                    return self._take(trial)
                if self._closing.is_set() and self._buffered == 0:
                    return None
                wait = min(1.0, self._delays[0][0] - now) if self._delays else 1.0
                self._cond.wait(timeout=max(0.001, wait))
            return None

    def _take(self, trial: str) -> _Batch:
        state = self._trials[trial]
        state.busy = True
        if state.batch == 0:
            size, state.batch = len(state.fifo[0]), 1
            while (
                state.batch < len(state.fifo)
                and size + len(state.fifo[state.batch]) <= self.settings.max_batch_rows
            ):
                size += len(state.fifo[state.batch])
                state.batch += 1
        rows = [row for group in list(state.fifo)[: state.batch] for row in group]
        return _Batch(trial, rows, state.attempts, state.ambiguous_at)

    def _run(self) -> None:
        while (batch := self._next_batch()) is not None:
            outcome = self._attempt(batch)
            with self._cond:
                self._settle(batch.trial, outcome)
                # This sender serves the ready queue (and the retry heap) next itself: wake no other
                # sender, except idle ones when closing; ``_emptied`` wakes flush() and delete(), which
                # wait on a trial's in-flight RPC (rarely anyone).
                self._emptied.notify_all()
                if self._buffered == 0 and self._closing.is_set():
                    self._cond.notify_all()

    def _settle(self, trial: str, outcome: float | None) -> None:
        """Record an attempt's outcome (lock held): None = done (delivered or dropped), else retry at."""
        state = self._trials[trial]
        state.busy = False
        if outcome is not None:
            state.delayed = True
            heapq.heappush(self._delays, (outcome, trial))
            return
        for _ in range(state.batch):
            self._buffered -= len(state.fifo.popleft())
        state.batch, state.attempts, state.ambiguous_at = 0, 0, None
        if state.fifo:
            self._ready[trial] = None  # behind every trial already waiting: round-robin
        else:
            del self._trials[trial]

    def _attempt(self, batch: _Batch) -> float | None:
        """One delivery attempt; None when the batch is settled, else the time to try again."""
        found = None if batch.ambiguous_at is None or self.idempotent else self._already_written(batch)
        if found is None and batch.ambiguous_at is not None and not self.idempotent:
            # The read-back got no answer: the earlier attempt may have committed, so a resend now could
            # store the rows twice (the DB manager may be back by the time the resend arrives). Ask again.
            return self._unanswered(batch)
        if found:
            self.counters.inc(RECOVERED)
            self.counters.inc(DELIVERED, len(batch.rows))
            _log.info(
                "DB manager %s: batch of %d rows for %s was already committed",
                self.address,
                len(batch.rows),
                batch.trial,
            )
            return None
        try:
            request = pb.ReportObservationLogRequest(
                trial_name=batch.trial, observation_log=_to_pb(batch.rows)
            )
        except ValueError as exc:  # e.g. a lone surrogate: protobuf cannot encode it, and never will
            self.counters.inc(DROPPED, len(batch.rows), reason="unencodable")
            _log.error(
                "DB manager %s: %d rows of trial %s cannot be encoded (dropped): %s",
                self.address,
                len(batch.rows),
                batch.trial,
                exc,
            )
            return None
        started = time.monotonic()
        try:
            _, call = self._stub.ReportObservationLog.with_call(request, timeout=self.settings.rpc_timeout_s)
        except grpc.RpcError as exc:
            return self._failed(batch, exc, started)
        self._learn(call)
        self.counters.inc(DELIVERED, len(batch.rows))
        if batch.attempts:
            _log.info("DB manager %s reachable again after %d attempts", self.address, batch.attempts)
        return None

    def _failed(self, batch: _Batch, exc: grpc.RpcError, started: float) -> float | None:
        code = exc.code()
        if code not in RETRYABLE:
            self.counters.inc(DROPPED, len(batch.rows), reason=code.name)
            _log.error(
                "DB manager %s rejected %d rows of trial %s: %s: %s (dropped)",
                self.address,
                len(batch.rows),
                batch.trial,
                code.name,
                exc.details(),
            )
            return None
        self.counters.inc(RETRIES, code=code.name)
        s = self.settings
        retry_at = time.monotonic() + s.backoff.delay(batch.attempts, self._rng)
        sent = not never_sent(exc)
        with self._cond:
            state = self._trials[batch.trial]
            state.attempts += 1
            if sent:  # a request that never left this process cannot have committed
                state.ambiguous_at = started
            if state.ambiguous_at is not None and not self.idempotent:
                # an attempt that reached the server may still commit until its lock wait ends
                retry_at = max(retry_at, state.ambiguous_at + s.lock_wait_s)
            waiting = len(self._trials)
        held = self._retry_log.due()
        if held is not None:
            _log.warning(
                "DB manager %s: %s for trial %s (attempt %d; %d trials, %d rows buffered); "
                "retrying in %.2fs%s",
                self.address,
                code.name,
                batch.trial,
                batch.attempts + 1,
                waiting,
                self.buffered_rows,
                retry_at - time.monotonic(),
                held_back(held),
            )
        return retry_at

    def _unanswered(self, batch: _Batch) -> float:
        """The read-back of an ambiguous batch failed: retry the read-back after the backoff (the batch's
        ambiguous moment stays that of its last write attempt)."""
        self.counters.inc(RETRIES, code="READBACK")
        with self._cond:
            state = self._trials[batch.trial]
            state.attempts += 1
        return time.monotonic() + self.settings.backoff.delay(batch.attempts, self._rng)

    def _already_written(self, batch: _Batch) -> bool | None:
        """True when every row of ``batch`` is stored, False when not, None when the DB manager did not
        answer."""
        keys = [_key(r) for r in batch.rows]
        times = sorted(k[0] for k in keys)
        request = pb.GetObservationLogRequest(
            trial_name=batch.trial,
            start_time=format_rfc3339nano(times[0]),
            end_time=format_rfc3339nano(times[-1]),
        )
        try:
            reply = self._stub.GetObservationLog(request, timeout=self.settings.rpc_timeout_s)
        except grpc.RpcError:
            return None
        found = {
            (parse_rfc3339(log.time_stamp, field="time_stamp"), log.metric.name, log.metric.value)
            for log in reply.observation_log.metric_logs
        }
        return all(k in found for k in keys)
