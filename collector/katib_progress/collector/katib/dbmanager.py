"""``DBManagerSink``: writes observation rows to Katib's DB manager (``ReportObservationLog``).

``report()`` never talks to the network: it appends the rows to the trial's FIFO in a bounded
in-memory buffer and returns. One background sender thread delivers each trial's FIFO in order
(trials served round-robin), coalescing the queued snapshots of one trial into a single
``ReportObservationLog`` of at most ``max_batch_rows`` rows (a batch is all-or-nothing in Katib's
MySQL, one INSERT). The slower the DB manager, the larger the batches. Failures:

- UNAVAILABLE, DEADLINE_EXCEEDED, UNKNOWN (Katib's answer when MySQL is down), ABORTED, INTERNAL:
  retried forever with exponential backoff and jitter, the batch staying at the head of the FIFO so
  order is kept. These outcomes are ambiguous (the insert may have committed), so before each resend
  the sender asks ``GetObservationLog`` whether the batch's rows are already there; if they are, the
  batch counts as delivered (no duplicate rows).
- Any other code: the batch can never succeed; it is dropped with an ERROR log and counted in
  ``dbmanager_rows_dropped_total{reason=<code>}``.

Overflow policy: when accepting the rows would exceed ``max_buffered_rows``, ``report()`` refuses
with ``TemporaryError`` (ERROR log + ``dbmanager_buffer_overflow_total``) and keeps nothing, so the
caller does not mark the snapshot written and delivers it again later. Nothing is dropped silently.
"""

from __future__ import annotations

import logging
import random
import threading
from collections import OrderedDict, deque
from collections.abc import Sequence
from typing import Any

import grpc
from kubeflow.katib import katib_api_pb2 as _pb
from kubeflow.katib import katib_api_pb2_grpc as _pb_grpc
from pydantic import BaseModel, ConfigDict, Field

from katib_progress.collector.counters import Counters
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
        grpc.StatusCode.UNKNOWN,
        grpc.StatusCode.ABORTED,
        grpc.StatusCode.INTERNAL,
    }
)
OVERFLOW = "dbmanager_buffer_overflow_total"
DROPPED = "dbmanager_rows_dropped_total"
RETRIES = "dbmanager_retries_total"
DELIVERED = "dbmanager_rows_delivered_total"
RECOVERED = "dbmanager_batches_found_committed_total"


class DBManagerSettings(BaseModel):
    """Tuning of the DB manager client."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    rpc_timeout_s: float = Field(default=5.0, gt=0, description="deadline of each RPC")
    max_batch_rows: int = Field(default=1000, ge=1, description="rows per ReportObservationLog at most")
    max_buffered_rows: int = Field(
        default=100_000, ge=1, description="rows held while the DB manager is down"
    )
    backoff_initial_s: float = Field(default=0.1, gt=0)
    backoff_max_s: float = Field(default=5.0, gt=0)
    backoff_multiplier: float = Field(default=2.0, ge=1.0)
    close_timeout_s: float = Field(
        default=10.0, ge=0, description="close() waits this long to deliver the rest"
    )

    @classmethod
    def from_cli(cls, args: Any) -> DBManagerSettings:
        """Settings from ``collector run`` arguments (``--max-buffered-rows``, ``--rpc-timeout``)."""
        values = {
            "max_buffered_rows": getattr(args, "max_buffered_rows", None),
            "rpc_timeout_s": getattr(args, "rpc_timeout", None),
        }
        return cls(**{k: v for k, v in values.items() if v is not None})


def _to_pb(rows: Sequence[MetricRow]) -> Any:
    return pb.ObservationLog(
        metric_logs=[
            pb.MetricLog(time_stamp=r.timestamp, metric=pb.Metric(name=r.name, value=r.value)) for r in rows
        ]
    )


def _key(row: MetricRow) -> tuple[Any, str, str]:
    return parse_rfc3339(row.timestamp, field="time_stamp"), row.name, row.value


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
        self._cond = threading.Condition()
        # trial -> FIFO of row groups (one per report); dict order = round-robin order of trials
        self._pending: OrderedDict[str, deque[tuple[MetricRow, ...]]] = OrderedDict()
        self._buffered = 0
        self._closing = threading.Event()
        self._abandon = threading.Event()
        self._thread = threading.Thread(target=self._run, name="dbmanager-sender", daemon=True)
        self._thread.start()

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
                self.counters.inc(OVERFLOW)
                _log.error(
                    "DB manager %s: buffer full (%d of %d rows held); refusing %d rows of trial %s "
                    "- the snapshot will be retried",
                    self.address,
                    self._buffered,
                    limit,
                    len(rows),
                    trial,
                )
                raise TemporaryError(
                    f"DB manager buffer full ({self._buffered}/{limit} rows)",
                    delay=self.settings.backoff_max_s,
                )
            fifo = self._pending.get(trial)
            if fifo is None:
                fifo = self._pending[trial] = deque()
            fifo.append(tuple(rows))
            self._buffered += len(rows)
            self._cond.notify_all()

    def latest(self, trial: str) -> list[MetricRow]:
        """Rows at the trial's greatest timestamp, stored or still queued here.

        Every snapshot the collector writes carries a ``trainjob/seq`` row, so the latest stamp is
        found from those rows alone and only the rows at that stamp are fetched (two small reads
        instead of the whole log); a log without seq rows (written by another tool) is read whole.
        """
        with self._cond:
            pending = [row for group in self._pending.get(trial, ()) for row in group]
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
            reply = self._stub.GetObservationLog(request, timeout=self.settings.rpc_timeout_s)
        except grpc.RpcError as exc:
            code = exc.code()
            message = f"GetObservationLog({request.trial_name}): {code.name}: {exc.details()}"
            if code in RETRYABLE:
                raise TemporaryError(message) from None
            raise PermanentError(message) from None
        return [
            MetricRow(log.metric.name, log.metric.value, log.time_stamp)
            for log in reply.observation_log.metric_logs
        ]

    def flush(self, timeout: float) -> bool:
        with self._cond:
            return self._cond.wait_for(lambda: self._buffered == 0, timeout=timeout)

    def close(self) -> None:
        if self._closing.is_set():
            return
        with self._cond:
            self._closing.set()
            self._cond.notify_all()
        delivered = self.flush(self.settings.close_timeout_s)
        if not delivered:
            self._abandon.set()
        self._thread.join(timeout=self.settings.rpc_timeout_s + self.settings.backoff_max_s + 1)
        with self._cond:
            lost = self._buffered
        if lost:
            self.counters.inc(DROPPED, lost, reason="closed")
            _log.error("DB manager %s: closed with %d rows undelivered", self.address, lost)
        self._channel.close()

    # ------------------------------------------------------------------ sender thread

    def _next_batch(self) -> tuple[str, list[MetricRow], int] | None:
        with self._cond:
            while not self._pending:
                if self._closing.is_set():
                    return None
                self._cond.wait(timeout=1.0)
            trial, fifo = next(iter(self._pending.items()))
            rows = list(fifo[0])
            count = 1
            while count < len(fifo) and len(rows) + len(fifo[count]) <= self.settings.max_batch_rows:
                rows.extend(fifo[count])
                count += 1
            return trial, rows, count

    def _run(self) -> None:
        while not self._abandon.is_set():
            batch = self._next_batch()
            if batch is None:
                return
            trial, rows, count = batch
            if not self._deliver(trial, rows):
                return  # close() gave up: what is left is counted as dropped there
            with self._cond:
                fifo = self._pending[trial]
                for _ in range(count):
                    self._buffered -= len(fifo.popleft())
                if fifo:
                    self._pending.move_to_end(trial)  # round-robin between trials
                else:
                    del self._pending[trial]
                self._cond.notify_all()

    def _already_written(self, trial: str, rows: Sequence[MetricRow]) -> bool:
        keys = [_key(r) for r in rows]
        times = sorted(k[0] for k in keys)
        request = pb.GetObservationLogRequest(
            trial_name=trial, start_time=format_rfc3339nano(times[0]), end_time=format_rfc3339nano(times[-1])
        )
        try:
            reply = self._stub.GetObservationLog(request, timeout=self.settings.rpc_timeout_s)
        except grpc.RpcError:
            return False
        found = {
            (parse_rfc3339(log.time_stamp, field="time_stamp"), log.metric.name, log.metric.value)
            for log in reply.observation_log.metric_logs
        }
        return all(k in found for k in keys)

    def _deliver(self, trial: str, rows: list[MetricRow]) -> bool:
        """Deliver (or drop as undeliverable) one batch; False only when close() gave up on it."""
        try:
            request = pb.ReportObservationLogRequest(trial_name=trial, observation_log=_to_pb(rows))
        except ValueError as exc:  # e.g. a lone surrogate: protobuf cannot encode it, and never will
            self.counters.inc(DROPPED, len(rows), reason="unencodable")
            _log.error(
                "DB manager %s: %d rows of trial %s cannot be encoded (dropped): %s",
                self.address,
                len(rows),
                trial,
                exc,
            )
            return True
        attempt = 0
        ambiguous = False
        while True:
            if self._abandon.is_set():
                return False
            if ambiguous and self._already_written(trial, rows):
                self.counters.inc(RECOVERED)
                self.counters.inc(DELIVERED, len(rows))
                _log.info(
                    "DB manager %s: batch of %d rows for %s was already committed",
                    self.address,
                    len(rows),
                    trial,
                )
                return True
            try:
                self._stub.ReportObservationLog(request, timeout=self.settings.rpc_timeout_s)
            except grpc.RpcError as exc:
                code = exc.code()
                if code not in RETRYABLE:
                    self.counters.inc(DROPPED, len(rows), reason=code.name)
                    _log.error(
                        "DB manager %s rejected %d rows of trial %s: %s: %s (dropped)",
                        self.address,
                        len(rows),
                        trial,
                        code.name,
                        exc.details(),
                    )
                    return True
                ambiguous = True
                self.counters.inc(RETRIES, code=code.name)
                delay = min(
                    self.settings.backoff_max_s,
                    self.settings.backoff_initial_s * self.settings.backoff_multiplier**attempt,
                )
                delay = random.uniform(delay / 2, delay)
                attempt += 1
                log = _log.warning if attempt in (1, 10) or attempt % 100 == 0 else _log.debug
                log(
                    "DB manager %s: %s (attempt %d, %d rows buffered); retrying in %.2fs",
                    self.address,
                    code.name,
                    attempt,
                    self.buffered_rows,
                    delay,
                )
                self._abandon.wait(delay)
                continue
            self.counters.inc(DELIVERED, len(rows))
            if attempt:
                _log.info("DB manager %s reachable again after %d attempts", self.address, attempt)
            return True
