"""Regression tests for bugs found by the fault and corpus work (docs/reliability.md, "Fixed")."""

from __future__ import annotations

from pathlib import Path

import grpc
from kubeflow.katib import katib_api_pb2 as pb
from kubeflow.katib import katib_api_pb2_grpc as pb_grpc

from katib_progress.collector.katib.dbmanager import DBManagerSettings, DBManagerSink
from katib_progress.collector.rows import MetricRow
from katib_progress.collector.store import start_store_server
from katib_progress.core.status import RejectReason, parse_trainer_status
from tests.kubestandin._schema import format_time, parse_time


def test_unencodable_rows_are_dropped_not_fatal_to_the_sender(tmp_path: Path) -> None:
    """A row protobuf cannot encode (a lone surrogate) used to kill the sink's sender thread: every
    later row of every trial stayed queued forever. Now that batch is dropped and counted."""
    server = start_store_server(tmp_path / "o.sqlite")
    sink = DBManagerSink(server.address, settings=DBManagerSettings(close_timeout_s=2))
    try:
        sink.report("t1", [MetricRow("\ud800loss", "1", "2026-03-01T12:00:00Z")])
        sink.report("t2", [MetricRow("loss", "2", "2026-03-01T12:00:01Z")])
        assert sink.flush(10)
        assert sink.counters.get("dbmanager_rows_dropped_total", reason="unencodable") == 1
        with grpc.insecure_channel(server.address) as channel:
            reply = pb_grpc.DBManagerStub(channel).GetObservationLog(
                pb.GetObservationLogRequest(trial_name="t2"), timeout=5
            )
        assert [m.metric.value for m in reply.observation_log.metric_logs] == ["2"]
    finally:
        sink.close()
        server.stop(0)


def test_parser_rejects_names_that_are_not_unicode() -> None:
    parsed = parse_trainer_status(
        {
            "lastUpdatedTime": "2026-03-01T12:00:00Z",
            "metrics": [{"name": "\udc00x", "value": "1"}, {"name": "loss", "value": "2"}],
        }
    )
    assert dict(parsed.texts) == {"loss": "2"}
    (rejection,) = parsed.rejections
    assert rejection.reason is RejectReason.INVALID_NAME and rejection.name == "metrics[0]"


def test_standin_keeps_years_before_1000_parseable() -> None:
    moment = parse_time("0001-01-01T00:00:00Z")
    assert moment is not None and format_time(moment) == "0001-01-01T00:00:00Z"
    assert parse_time("0001-01-01T00:30:00+01:00") is None  # year 0 in UTC: out of range, not a crash
