"""Read what Katib's DB manager has *stored* for a trial (never rows still queued locally).

Used by the final-metrics marker (collector/final_metrics.py): the marker may only be set once the
final snapshot's rows are acknowledged by the DB manager, which is exactly "they can be read back";
and by the enforcer (collector/enforce.py), which computes a pruned Trial's observation from the
stored rows only.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import grpc
from kubeflow.katib import katib_api_pb2 as _pb
from kubeflow.katib import katib_api_pb2_grpc as _pb_grpc

from katib_progress.collector.katib.dbmanager import RETRYABLE
from katib_progress.collector.rows import SEQ_METRIC, MetricRow, latest_rows
from katib_progress.core.errors import PermanentError, TemporaryError

pb: Any = _pb
pb_grpc: Any = _pb_grpc


class StoredRowsReader:
    """``StoredRowsReader("host:port").stored_latest(trial)`` -> the stored rows at the trial's
    greatest timestamp; raises ``TemporaryError`` when the DB manager cannot answer now."""

    def __init__(self, address: str, *, rpc_timeout_s: float = 5.0) -> None:
        if rpc_timeout_s <= 0:
            raise ValueError(f"rpc_timeout_s: must be > 0, got {rpc_timeout_s}")
        self.address = address
        self._timeout = rpc_timeout_s
        self._channel = grpc.insecure_channel(address)
        self._stub = pb_grpc.DBManagerStub(self._channel)

    def _get(self, request: Any) -> list[MetricRow]:
        try:
            reply = self._stub.GetObservationLog(request, timeout=self._timeout)
        except grpc.RpcError as exc:
            message = f"GetObservationLog({request.trial_name}): {exc.code().name}: {exc.details()}"
            if exc.code() in RETRYABLE:
                raise TemporaryError(message) from None
            raise PermanentError(message) from None
        return [
            MetricRow(log.metric.name, log.metric.value, log.time_stamp)
            for log in reply.observation_log.metric_logs
        ]

    def stored_latest(self, trial: str) -> list[MetricRow]:
        seq_rows = self._get(pb.GetObservationLogRequest(trial_name=trial, metric_name=SEQ_METRIC))
        if not seq_rows:
            return latest_rows(self._get(pb.GetObservationLogRequest(trial_name=trial)))
        stamp = latest_rows(seq_rows)[0].timestamp
        return latest_rows(
            self._get(pb.GetObservationLogRequest(trial_name=trial, start_time=stamp, end_time=stamp))
        )

    def trial_metric_logs(self, trial: str, metrics: Sequence[str]) -> list[MetricRow]:
        """The rows Katib's trial controller reads for a Trial's observation
        (``GetTrialObservationLog``, pkg/controller.v1beta1/trial/managerclient/managerclient.go):
        one ``GetObservationLog`` per metric name, objective first, replies concatenated."""
        rows: list[MetricRow] = []
        for name in metrics:
            if name:
                rows += self._get(pb.GetObservationLogRequest(trial_name=trial, metric_name=name))
        return rows

    def all_rows(self, trial: str) -> list[MetricRow]:
        """Every stored row of ``trial``: one ``GetObservationLog`` with an empty metric name (Katib's
        DB manager then filters on the trial only, pkg/db/v1beta1/mysql/mysql.go ``GetObservationLog``)."""
        return self._get(pb.GetObservationLogRequest(trial_name=trial))

    def stored_seq(self, trial: str) -> int | None:
        """The greatest snapshot sequence number stored for ``trial`` (None: no snapshot stored)."""
        seqs = []
        for row in self._get(pb.GetObservationLogRequest(trial_name=trial, metric_name=SEQ_METRIC)):
            try:
                seqs.append(int(row.value))
            except ValueError:
                continue
        return max(seqs, default=None)

    def close(self) -> None:
        self._channel.close()
