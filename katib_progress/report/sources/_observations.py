"""Read Katib observation logs over the DBManager gRPC API and turn them into curve points.

Both the local sweep (its embedded store serves the same API) and a cluster (Katib's
``katib-db-manager``) are read through ``GetObservationLog`` with an empty metric name (all metrics).
Rows sharing a timestamp are one snapshot; the reserved ``trainjob/*`` rows become progress, ETA and
elapsed, every other row a metric value.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Iterable, Sequence
from datetime import datetime
from typing import Any

import grpc
from kubeflow.katib import katib_api_pb2 as _pb
from kubeflow.katib import katib_api_pb2_grpc as _pb_grpc

from katib_progress.collector.rows import ELAPSED_METRIC, ETA_METRIC, PROGRESS_METRIC, RESERVED_PREFIX
from katib_progress.core.errors import PermanentError, TemporaryError
from katib_progress.core.timefmt import parse_rfc3339
from katib_progress.report.model import CurvePoint

_log = logging.getLogger(__name__)
pb: Any = _pb  # generated code without usable type information
pb_grpc: Any = _pb_grpc

Row = tuple[str, str, str]  # (time_stamp, metric name, value)
_RETRYABLE = (
    grpc.StatusCode.UNAVAILABLE,
    grpc.StatusCode.DEADLINE_EXCEEDED,
    grpc.StatusCode.RESOURCE_EXHAUSTED,
)


def fetch_rows(address: str, trials: Sequence[str], *, timeout_s: float = 30.0) -> dict[str, list[Row]]:
    """Every observation row of each trial, from the DBManager at ``address`` ("host:port")."""
    out: dict[str, list[Row]] = {}
    options = [("grpc.max_receive_message_length", 256 * 1024 * 1024)]
    with grpc.insecure_channel(address, options=options) as channel:
        stub = pb_grpc.DBManagerStub(channel)
        for trial in trials:
            request = pb.GetObservationLogRequest(trial_name=trial, metric_name="")
            try:
                reply = stub.GetObservationLog(request, timeout=timeout_s)
            except grpc.RpcError as exc:
                code = exc.code() if isinstance(exc, grpc.Call) else None
                detail = exc.details() if isinstance(exc, grpc.Call) else str(exc)
                text = f"GetObservationLog({trial}) at {address}: {code} {detail}"
                if code in _RETRYABLE:
                    raise TemporaryError(text) from None
                raise PermanentError(text) from None
            out[trial] = [
                (m.time_stamp, m.metric.name, m.metric.value) for m in reply.observation_log.metric_logs
            ]
    return out


def _number(text: str) -> float | None:
    try:
        return float(text)
    except ValueError:
        return None


def rows_to_curve(rows: Iterable[Row]) -> tuple[CurvePoint, ...]:
    """Curve points in time order, one per distinct timestamp; unreadable rows are skipped."""
    snapshots: dict[datetime, dict[str, float]] = {}
    for stamp, name, value in rows:
        try:
            moment = parse_rfc3339(stamp, field="time_stamp")
        except ValueError:
            _log.debug("skipping observation row with bad timestamp %r", stamp)
            continue
        number = _number(value)
        if number is None:
            continue
        snapshots.setdefault(moment, {})[name] = number
    points = []
    for moment in sorted(snapshots):
        values = snapshots[moment]
        progress = values.get(PROGRESS_METRIC)
        eta = values.get(ETA_METRIC)
        elapsed = values.get(ELAPSED_METRIC)
        points.append(
            CurvePoint(
                timestamp=moment,
                progress=progress if progress is not None and 0 <= progress <= 100 else None,
                eta_s=eta if eta is not None and eta >= 0 else None,
                elapsed_s=elapsed
                if elapsed is not None and math.isfinite(elapsed) and elapsed >= 0
                else None,
                metrics={k: v for k, v in values.items() if not k.startswith(RESERVED_PREFIX)},
            )
        )
    return tuple(points)
