"""Katib's ``DBManager`` gRPC API served from an SQLite file, plus grpc.health.v1.

Semantics follow Katib's own DB manager (pkg/db/v1beta1/mysql): rows are stored as given (no dedup);
a MetricLog with an empty time_stamp is skipped; times are kept in UTC at microsecond precision and
served back in RFC3339Nano; ``GetObservationLog`` filters by metric name (empty = all) and by
inclusive ``start_time <= time <= end_time`` (empty = unbounded) and orders by time (ties keep
insertion order). Deviations, on purpose: an empty trial name, an unparseable timestamp or a
MetricLog without a metric name is INVALID_ARGUMENT naming the field (Katib answers UNKNOWN, or
panics on a missing metric), and a failed request writes nothing.
"""

from __future__ import annotations

import logging
import sqlite3
from concurrent import futures
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, NoReturn

import grpc
from grpc_health.v1 import health, health_pb2, health_pb2_grpc
from kubeflow.katib import katib_api_pb2 as _pb
from kubeflow.katib import katib_api_pb2_grpc as _pb_grpc

from katib_progress.collector.store._db import ObservationDB, Row
from katib_progress.core.listen import split_address
from katib_progress.core.timefmt import format_rfc3339nano, parse_rfc3339

_log = logging.getLogger(__name__)

# The generated stubs carry no type information.
pb: Any = _pb
pb_grpc: Any = _pb_grpc

SERVICE_NAME = "api.v1.beta1.DBManager"
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_MAX_MESSAGE = 256 * 1024 * 1024


def to_us(moment: datetime) -> int:
    delta = moment - _EPOCH
    return (delta.days * 86_400 + delta.seconds) * 1_000_000 + delta.microseconds


def from_us(micros: int) -> str:
    return format_rfc3339nano(_EPOCH + timedelta(microseconds=micros))


class _InvalidArgumentError(ValueError):
    pass


def _time_us(text: str, field: str) -> int:
    try:
        return to_us(parse_rfc3339(text, field=field))
    except ValueError as exc:
        raise _InvalidArgumentError(str(exc)) from None


#: Trailing metadata on every answer of an idempotent store; the collector's DB manager client then
#: resends an ambiguous write at once instead of waiting out the server's lock wait first.
IDEMPOTENT_KEY, IDEMPOTENT_VALUE = "katib-progress-idempotent-writes", "1"


class _DBManagerServicer(_pb_grpc.DBManagerServicer):
    def __init__(self, db: ObservationDB, *, idempotent: bool) -> None:
        self._db = db
        self._idempotent = idempotent

    def _advertise(self, context: grpc.ServicerContext) -> None:
        if self._idempotent:
            context.set_trailing_metadata(((IDEMPOTENT_KEY, IDEMPOTENT_VALUE),))

    @staticmethod
    def _abort(context: grpc.ServicerContext, code: grpc.StatusCode, message: str) -> NoReturn:
        context.abort(code, message)
        raise AssertionError("unreachable")  # pragma: no cover - abort raises

    def _run(self, context: grpc.ServicerContext, fn: Any) -> Any:
        try:
            return fn()
        except _InvalidArgumentError as exc:
            self._abort(context, grpc.StatusCode.INVALID_ARGUMENT, str(exc))
        except sqlite3.OperationalError as exc:
            _log.warning("observation store busy or failing: %s", exc)
            self._abort(context, grpc.StatusCode.UNAVAILABLE, f"observation store: {exc}")
        except sqlite3.Error as exc:
            _log.error("observation store error: %s", exc)
            self._abort(context, grpc.StatusCode.INTERNAL, f"observation store: {exc}")

    def ReportObservationLog(self, request: Any, context: grpc.ServicerContext) -> Any:
        def run() -> Any:
            if not request.trial_name:
                raise _InvalidArgumentError("trial_name: must not be empty")
            rows: list[Row] = []
            times: dict[str, int] = {}  # the rows of one snapshot share a timestamp: parse it once
            for index, log in enumerate(request.observation_log.metric_logs):
                stamp = log.time_stamp
                if stamp == "":
                    continue  # Katib skips MetricLogs without a timestamp
                if not log.HasField("metric") or not log.metric.name:
                    field = f"observation_log.metric_logs[{index}]"
                    raise _InvalidArgumentError(f"{field}.metric.name: must not be empty")
                micros = times.get(stamp)
                if micros is None:
                    field = f"observation_log.metric_logs[{index}].time_stamp"
                    micros = times[stamp] = _time_us(stamp, field)
                rows.append((micros, log.metric.name, log.metric.value))
            self._db.insert(request.trial_name, rows, idempotent=self._idempotent)
            self._advertise(context)
            return pb.ReportObservationLogReply()

        return self._run(context, run)

    def GetObservationLog(self, request: Any, context: grpc.ServicerContext) -> Any:
        def run() -> Any:
            if not request.trial_name:
                raise _InvalidArgumentError("trial_name: must not be empty")
            start = _time_us(request.start_time, "start_time") if request.start_time else None
            end = _time_us(request.end_time, "end_time") if request.end_time else None
            rows = self._db.select(request.trial_name, request.metric_name, start, end)
            self._advertise(context)
            return pb.GetObservationLogReply(
                observation_log=pb.ObservationLog(
                    metric_logs=[
                        pb.MetricLog(time_stamp=from_us(t), metric=pb.Metric(name=n, value=v))
                        for t, n, v in rows
                    ]
                )
            )

        return self._run(context, run)

    def DeleteObservationLog(self, request: Any, context: grpc.ServicerContext) -> Any:
        def run() -> Any:
            if not request.trial_name:
                raise _InvalidArgumentError("trial_name: must not be empty")
            self._db.delete(request.trial_name)
            return pb.DeleteObservationLogReply()

        return self._run(context, run)


@dataclass
class StoreServer:
    """A running embedded store: ``address`` is "host:port" with the bound port."""

    address: str
    db: ObservationDB
    _server: grpc.Server
    _health: health.HealthServicer

    @property
    def port(self) -> int:
        return int(self.address.rsplit(":", 1)[1])

    def stop(self, grace: float | None = None) -> None:
        self._health.enter_graceful_shutdown()
        self._server.stop(grace).wait()
        self.db.close()
        _log.info("observation store on %s stopped", self.address)

    def wait(self, timeout: float | None = None) -> bool:
        return bool(self._server.wait_for_termination(timeout))


def start_store_server(
    db_path: str | Path,
    address: str = "127.0.0.1:0",
    *,
    max_workers: int = 8,
    idempotent: bool = True,
    busy_timeout_s: float = 30.0,
) -> StoreServer:
    """Open (or create) ``db_path`` and serve it as Katib's DBManager on ``address``.

    ``idempotent=False`` stores duplicate rows as Katib's own DB manager does (tests of the client's
    behaviour against a stock DB manager); ``busy_timeout_s`` is how long a write waits for the lock.
    """
    host = address.rpartition(":")[0]
    split_address(address)  # ConfigError (a ValueError) unless HOST:PORT
    db = ObservationDB(db_path, busy_timeout_s=busy_timeout_s)
    server = grpc.server(
        futures.ThreadPoolExecutor(max_workers=max_workers, thread_name_prefix="store"),
        options=[
            ("grpc.max_receive_message_length", _MAX_MESSAGE),
            ("grpc.max_send_message_length", _MAX_MESSAGE),
            ("grpc.so_reuseport", 0),
        ],
    )
    pb_grpc.add_DBManagerServicer_to_server(_DBManagerServicer(db, idempotent=idempotent), server)
    health_servicer = health.HealthServicer()
    health_pb2_grpc.add_HealthServicer_to_server(health_servicer, server)
    try:
        port = server.add_insecure_port(address)
    except RuntimeError as exc:
        db.close()
        raise OSError(f"address: cannot bind {address}: {exc}") from None
    if port == 0:
        db.close()
        raise OSError(f"address: cannot bind {address}")
    server.start()
    for name in ("", SERVICE_NAME):
        health_servicer.set(name, health_pb2.HealthCheckResponse.SERVING)
    bound = f"{host}:{port}"
    _log.info("observation store %s serving Katib DBManager on %s", db.path, bound)
    return StoreServer(bound, db, server, health_servicer)
