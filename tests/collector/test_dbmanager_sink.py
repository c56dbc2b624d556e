"""DBManagerSink against the real embedded store over gRPC: batching, in-order delivery across a
store restart on the same port, loud overflow, ambiguous (committed-but-timed-out) writes, permanent
rejections, and collector restart recovery through latest()."""

from __future__ import annotations

import logging
import socket
import threading
import time
from collections.abc import Iterator
from concurrent import futures
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import grpc
import pytest
from kubeflow.katib import katib_api_pb2 as pb
from kubeflow.katib import katib_api_pb2_grpc as pb_grpc

from katib_progress.collector.backoff import BackoffSettings
from katib_progress.collector.counters import Counters
from katib_progress.collector.katib.dbmanager import (
    DROPPED,
    OVERFLOW,
    RECOVERED,
    RETRIES,
    DBManagerSettings,
    DBManagerSink,
)
from katib_progress.collector.pipeline import JobRef, OutcomeKind, SnapshotProcessor
from katib_progress.collector.rows import MetricRow
from katib_progress.collector.store import StoreServer, start_store_server
from katib_progress.core.errors import TemporaryError
from katib_progress.core.timefmt import format_rfc3339nano
from tests.kubestandin.waiting import wait_until

FAST = DBManagerSettings(
    rpc_timeout_s=2.0,
    backoff=BackoffSettings(initial_s=0.02, max_s=0.2),
    close_timeout_s=5.0,
    lock_wait_s=1.5,
)
T0 = datetime(2026, 3, 1, 12, 0, 0, tzinfo=UTC)


def _rows(i: int, n: int = 3) -> list[MetricRow]:
    ts = format_rfc3339nano(T0 + timedelta(seconds=i))
    return [MetricRow(f"m{j}", str(i), ts) for j in range(n)]


def _all(address: str, trial: str) -> list[tuple[str, str, str]]:
    with grpc.insecure_channel(address) as channel:
        reply = pb_grpc.DBManagerStub(channel).GetObservationLog(
            pb.GetObservationLogRequest(trial_name=trial)
        )
    return [(m.time_stamp, m.metric.name, m.metric.value) for m in reply.observation_log.metric_logs]


@pytest.fixture
def store(tmp_path: Path) -> Iterator[StoreServer]:
    server = start_store_server(tmp_path / "obs.sqlite")
    yield server
    server.stop(0)


def test_rows_are_delivered_in_order_and_latest_reads_them_back(store: StoreServer) -> None:
    sink = DBManagerSink(store.address, settings=FAST.model_copy(update={"max_batch_rows": 4}))
    try:
        for i in range(10):
            sink.report("t", _rows(i))
        assert sink.flush(10)
        got = _all(store.address, "t")
        assert [v for _, _, v in got] == [str(i) for i in range(10) for _ in range(3)]
        latest = sink.latest("t")
        assert {r.value for r in latest} == {"9"} and len(latest) == 3
        assert sink.latest("never-written") == []
    finally:
        sink.close()


def test_store_restart_on_the_same_port_buffered_rows_arrive_once_in_order(tmp_path: Path) -> None:
    db = tmp_path / "obs.sqlite"
    server = start_store_server(db)
    address = server.address
    counters = Counters()
    sink = DBManagerSink(address, settings=FAST, counters=counters)
    try:
        sink.report("t", _rows(0))
        assert sink.flush(10)
        server.stop(0)
        for i in range(1, 21):
            sink.report("t", _rows(i))
        assert not sink.flush(0.5)  # the store is down: rows are held
        assert sink.buffered_rows > 0
        # while the store is down latest() cannot know what is stored: a temporary error, not a guess
        with pytest.raises(TemporaryError):
            sink.latest("t")
        server = start_store_server(db, address)
        assert server.address == address
        assert sink.flush(30)
        got = _all(address, "t")
        assert [v for _, _, v in got] == [str(i) for i in range(21) for _ in range(3)]
        assert len(got) == len(set(got)) == 63  # once each
        assert counters.total(RETRIES) > 0
        assert {r.value for r in sink.latest("t")} == {"20"}
    finally:
        sink.close()
        server.stop(0)


def test_overflow_refuses_loudly_and_the_snapshot_is_retried(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    server = start_store_server(tmp_path / "obs.sqlite")
    address = server.address
    server.stop(0)  # DB manager down from the start
    counters = Counters()
    settings = FAST.model_copy(update={"max_buffered_rows": 8})
    sink = DBManagerSink(address, settings=settings, counters=counters)
    server2: StoreServer | None = None
    try:
        sink.report("t", _rows(0, n=5))
        with caplog.at_level(logging.ERROR), pytest.raises(TemporaryError, match="buffer full"):
            sink.report("t", _rows(1, n=5))
        assert counters.get(OVERFLOW) == 1
        assert any("buffer full" in r.getMessage() for r in caplog.records if r.levelno >= logging.ERROR)
        assert sink.buffered_rows == 5  # the refused rows were not kept
        server2 = start_store_server(tmp_path / "obs.sqlite", address)
        assert sink.flush(30)
        sink.report("t", _rows(1, n=5))  # the caller's retry
        assert sink.flush(30)
        assert [v for _, _, v in _all(address, "t")] == ["0"] * 5 + ["1"] * 5
    finally:
        sink.close()
        if server2 is not None:
            server2.stop(0)


def test_pipeline_does_not_mark_a_refused_snapshot_written(tmp_path: Path) -> None:
    server = start_store_server(tmp_path / "obs.sqlite")
    address = server.address
    sink = DBManagerSink(address, settings=FAST.model_copy(update={"max_buffered_rows": 3}))
    proc = SnapshotProcessor(sink)
    job = JobRef("ns", "j", "uid", "exp", "t")
    try:
        body = {
            "lastUpdatedTime": "2026-03-01T12:00:00Z",
            "metrics": [{"name": f"m{i}", "value": "1"} for i in range(5)],
        }
        assert proc.process(job, body).kind is OutcomeKind.RETRY  # 6 rows > 3
        assert _all(address, "t") == []
        sink2 = DBManagerSink(address, settings=FAST)
        proc2 = SnapshotProcessor(sink2)
        assert proc2.process(job, body).kind is OutcomeKind.WRITTEN
        assert sink2.flush(10)
        sink2.close()
        assert len(_all(address, "t")) == 6
    finally:
        sink.close()
        server.stop(0)


class _Proxy(pb_grpc.DBManagerServicer):  # type: ignore[misc]
    """Forwards to a real store; can commit a report and then stall past the client deadline, or
    reject a trial permanently."""

    def __init__(self, target: str) -> None:
        self._channel = grpc.insecure_channel(target)
        self._stub = pb_grpc.DBManagerStub(self._channel)
        self.stall_next_report_s = 0.0
        self.cancel_next_report = False
        self.fail_next_gets = 0
        self.reject_trial = ""
        self.reports = 0

    def ReportObservationLog(self, request: Any, context: Any) -> Any:
        self.reports += 1
        if request.trial_name == self.reject_trial:
            context.abort(grpc.StatusCode.INVALID_ARGUMENT, "trial_name: rejected by test")
        reply = self._stub.ReportObservationLog(request)
        if self.cancel_next_report:  # what grpc-go's server sends once the deadline passed: RST_STREAM CANCEL
            self.cancel_next_report = False
            context.abort(grpc.StatusCode.CANCELLED, "Stream removed")
        if self.stall_next_report_s:
            stall, self.stall_next_report_s = self.stall_next_report_s, 0.0
            time.sleep(stall)  # committed, but the client times out: an ambiguous outcome
        return reply

    def DeleteObservationLog(self, request: Any, context: Any) -> Any:
        return self._stub.DeleteObservationLog(request)

    def GetObservationLog(self, request: Any, context: Any) -> Any:
        if self.fail_next_gets:
            self.fail_next_gets -= 1
            context.abort(grpc.StatusCode.UNAVAILABLE, "read failed by test")
        return self._stub.GetObservationLog(request)


@pytest.fixture
def proxy(store: StoreServer) -> Iterator[tuple[_Proxy, str]]:
    servicer = _Proxy(store.address)
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=4))
    pb_grpc.add_DBManagerServicer_to_server(servicer, server)
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    yield servicer, f"127.0.0.1:{port}"
    server.stop(0)
    servicer._channel.close()


def test_committed_but_timed_out_batch_is_not_written_twice(
    store: StoreServer, proxy: tuple[_Proxy, str]
) -> None:
    servicer, address = proxy
    servicer.stall_next_report_s = 1.0
    counters = Counters()
    sink = DBManagerSink(address, settings=FAST.model_copy(update={"rpc_timeout_s": 0.3}), counters=counters)
    try:
        sink.report("t", _rows(0))
        assert sink.flush(20)
        sink.report("t", _rows(1))
        assert sink.flush(20)
    finally:
        sink.close()
    assert counters.get(RETRIES, code="DEADLINE_EXCEEDED") >= 1
    assert counters.get(RECOVERED) == 1
    assert [v for _, _, v in _all(store.address, "t")] == ["0"] * 3 + ["1"] * 3


def test_an_unanswered_read_back_is_asked_again_never_resent_blind(
    store: StoreServer, proxy: tuple[_Proxy, str]
) -> None:
    servicer, address = proxy
    servicer.stall_next_report_s = 1.0  # committed, the client times out
    servicer.fail_next_gets = 2  # and the first read-backs get no answer
    counters = Counters()
    sink = DBManagerSink(address, settings=FAST.model_copy(update={"rpc_timeout_s": 0.3}), counters=counters)
    try:
        sink.report("t", _rows(0))
        assert sink.flush(20)
    finally:
        sink.close()
    assert counters.get(RETRIES, code="READBACK") == 2
    assert counters.get(RECOVERED) == 1
    assert servicer.reports == 1
    assert [v for _, _, v in _all(store.address, "t")] == ["0"] * 3


def test_a_committed_batch_answered_cancelled_is_read_back_not_dropped(
    store: StoreServer, proxy: tuple[_Proxy, str]
) -> None:
    """Katib's katib-db-manager (grpc-go) resets a stream whose deadline passed with RST_STREAM(CANCEL),
    which the client may see as CANCELLED before its own deadline: the write may have committed."""
    servicer, address = proxy
    servicer.cancel_next_report = True
    counters = Counters()
    sink = DBManagerSink(address, settings=FAST, counters=counters)
    try:
        sink.report("t", _rows(0))
        assert sink.flush(20)
        sink.report("t", _rows(1))
        assert sink.flush(20)
    finally:
        sink.close()
    assert counters.get(RETRIES, code="CANCELLED") == 1
    assert counters.total(DROPPED) == 0
    assert counters.get(RECOVERED) == 1
    assert [v for _, _, v in _all(store.address, "t")] == ["0"] * 3 + ["1"] * 3


def test_permanent_rejection_drops_that_batch_and_moves_on(
    store: StoreServer, proxy: tuple[_Proxy, str]
) -> None:
    servicer, address = proxy
    servicer.reject_trial = "bad"
    counters = Counters()
    sink = DBManagerSink(address, settings=FAST, counters=counters)
    try:
        sink.report("bad", _rows(0))
        sink.report("good", _rows(1))
        assert sink.flush(20)
    finally:
        sink.close()
    assert counters.get(DROPPED, reason="INVALID_ARGUMENT") == 3
    assert len(_all(store.address, "good")) == 3


def test_close_with_the_store_down_counts_undelivered_rows(tmp_path: Path) -> None:
    server = start_store_server(tmp_path / "obs.sqlite")
    address = server.address
    server.stop(0)
    counters = Counters()
    sink = DBManagerSink(
        address, settings=FAST.model_copy(update={"close_timeout_s": 0.3}), counters=counters
    )
    sink.report("t", _rows(0))
    sink.close()
    assert counters.get(DROPPED, reason="closed") == 3


def test_collector_restart_recovers_through_the_store(store: StoreServer) -> None:
    job = JobRef("ns", "j", "uid", "exp", "t", started_at=T0)
    bodies = [
        {
            "lastUpdatedTime": "2026-03-01T12:00:10Z",
            "progressPercentage": 10,
            "metrics": [{"name": "loss", "value": "0.9"}],
        },
        {
            "lastUpdatedTime": "2026-03-01T12:00:10Z",
            "progressPercentage": 11,
            "metrics": [{"name": "loss", "value": "0.8"}],
        },
    ]
    sink = DBManagerSink(store.address, settings=FAST)
    proc = SnapshotProcessor(sink)
    for body in bodies:
        assert proc.process(job, body).kind is OutcomeKind.WRITTEN
    assert sink.flush(10)
    sink.close()
    before = _all(store.address, "t")

    sink2 = DBManagerSink(store.address, settings=FAST)
    points: list[Any] = []
    proc2 = SnapshotProcessor(sink2, on_point=points.append)
    try:
        assert proc2.process(job, bodies[1]).kind is OutcomeKind.REPEAT  # re-list after restart
        assert proc2.process(job, bodies[0]).kind is OutcomeKind.WRITTEN  # a genuinely new (A,B,A) snapshot
        assert sink2.flush(10)
    finally:
        sink2.close()
    after = _all(store.address, "t")
    assert after[: len(before)] == before
    assert points[0].seq == 2
    assert {ts for ts, _, _ in after[len(before) :]} == {"2026-03-01T12:00:10.000002Z"}


def test_many_threads_reporting_keep_per_trial_order(store: StoreServer) -> None:
    sink = DBManagerSink(store.address, settings=FAST)

    def worker(trial: str) -> None:
        for i in range(30):
            sink.report(trial, _rows(i, n=2))

    threads = [threading.Thread(target=worker, args=(f"t{n}",)) for n in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    try:
        assert sink.flush(30)
    finally:
        sink.close()
    for n in range(4):
        assert [v for _, _, v in _all(store.address, f"t{n}")] == [
            str(i) for i in range(30) for _ in range(2)
        ]


def test_latest_without_seq_rows_reads_the_whole_log(store: StoreServer) -> None:
    sink = DBManagerSink(store.address, settings=FAST)
    try:
        sink.report("t", _rows(3) + _rows(1))  # another tool's rows: no trainjob/seq
        assert sink.flush(10)
        assert {(r.timestamp, r.value) for r in sink.latest("t")} == {("2026-03-01T12:00:03Z", "3")}
    finally:
        sink.close()


def test_latest_uses_the_seq_rows_to_find_the_last_snapshot(store: StoreServer) -> None:
    sink = DBManagerSink(store.address, settings=FAST)
    try:
        ts = [format_rfc3339nano(T0 + timedelta(seconds=s)) for s in (1, 2)]
        sink.report("t", [MetricRow("loss", "1", ts[0]), MetricRow("trainjob/seq", "0", ts[0])])
        sink.report("t", [MetricRow("loss", "2", ts[1]), MetricRow("trainjob/seq", "1", ts[1])])
        assert sink.flush(10)
        assert sorted((r.name, r.value) for r in sink.latest("t")) == [("loss", "2"), ("trainjob/seq", "1")]
    finally:
        sink.close()


def test_settings_from_cli_arguments_and_validation() -> None:
    import argparse

    from katib_progress.collector.cli import register
    from katib_progress.suggestion.pruning.backend import BACKEND

    parser = argparse.ArgumentParser()
    register(parser.add_subparsers(), pruning=lambda: BACKEND)
    args = parser.parse_args(
        [
            "collector",
            "run",
            "--db-manager",
            "h:1",
            "--max-buffered-rows",
            "7",
            "--rpc-timeout",
            "1.5",
            "--namespace",
            "a",
            "--namespace",
            "b",
        ]
    )
    assert args.namespace == ["a", "b"] and args.db_manager == "h:1"
    settings = DBManagerSettings.from_cli(args)
    assert (settings.max_buffered_rows, settings.rpc_timeout_s) == (7, 1.5)
    with pytest.raises(ValueError, match="max_buffered_rows"):
        DBManagerSettings(max_buffered_rows=0)


class _PlainDBManager(pb_grpc.DBManagerServicer):  # type: ignore[misc]
    """Like Katib's MySQL DB manager: stores what it is sent, no idempotent-writes promise."""

    def __init__(self) -> None:
        self.rows: list[tuple[str, str, str]] = []

    def ReportObservationLog(self, request: Any, context: Any) -> Any:
        for m in request.observation_log.metric_logs:
            self.rows.append((m.time_stamp, m.metric.name, m.metric.value))
        return pb.ReportObservationLogReply()


def test_rows_sent_while_nothing_listens_are_resent_after_the_backoff_not_the_lock_wait() -> None:
    """A write that could not connect never reached a server, so it cannot commit later: it is resent
    after the backoff, not after ``lock_wait_s`` (30 s here), and stored once."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        address = f"127.0.0.1:{probe.getsockname()[1]}"
    sink = DBManagerSink(address, settings=FAST.model_copy(update={"lock_wait_s": 30.0}))
    servicer = _PlainDBManager()
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=2))
    pb_grpc.add_DBManagerServicer_to_server(servicer, server)
    try:
        sink.report("t", _rows(0))
        assert not sink.flush(0.5)  # nothing listens: held
        server.add_insecure_port(address)
        server.start()
        assert sink.flush(15), "held for the lock wait although nothing had been sent"
        assert [v for _, _, v in servicer.rows] == ["0", "0", "0"]
    finally:
        sink.close()
        server.stop(0)


def test_delete_while_a_write_is_in_flight_waits_for_it_then_deletes(
    store: StoreServer, proxy: tuple[_Proxy, str]
) -> None:
    """The sender settling the in-flight batch removes the emptied queue while delete() waits: delete
    finds it gone and goes on (it raised KeyError once), and the committed rows are deleted after."""
    servicer, address = proxy
    servicer.stall_next_report_s = 0.5  # committed, then answered late (within the deadline)
    sink = DBManagerSink(address, settings=FAST)
    try:
        sink.report("t", _rows(0))
        time.sleep(0.2)  # the RPC is in flight
        sink.delete("t")
        assert _all(store.address, "t") == []
        assert sink.buffered_rows == 0
    finally:
        sink.close()


def test_delete_after_an_ambiguous_write_waits_until_it_cannot_commit(
    store: StoreServer, proxy: tuple[_Proxy, str]
) -> None:
    """A write that timed out may still commit until lock_wait_s after it began: delete refuses for now
    (TemporaryError with that wait), then deletes, so no row of it can land afterwards."""
    servicer, address = proxy
    servicer.stall_next_report_s = 1.0
    sink = DBManagerSink(address, settings=FAST.model_copy(update={"rpc_timeout_s": 0.3}))
    try:
        sink.report("t", _rows(0))
        wait_until(lambda: sink.counters.get(RETRIES, code="DEADLINE_EXCEEDED") >= 1, timeout=10)
        with pytest.raises(TemporaryError) as refused:
            sink.delete("t")
        assert refused.value.delay is not None and 0 < refused.value.delay <= FAST.lock_wait_s
        time.sleep(refused.value.delay + 0.1)
        sink.delete("t")
        assert _all(store.address, "t") == []
    finally:
        sink.close()
