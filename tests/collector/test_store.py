"""The embedded observation store over real gRPC with Katib's own protos and stubs."""

from __future__ import annotations

import os
import re
import signal
import sqlite3
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import grpc
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc
from kubeflow.katib import katib_api_pb2 as pb
from kubeflow.katib import katib_api_pb2_grpc as pb_grpc

from katib_progress.collector.store import SERVICE_NAME, StoreServer, start_store_server

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture
def store(tmp_path: Path) -> Iterator[StoreServer]:
    server = start_store_server(tmp_path / "obs.sqlite")
    yield server
    server.stop(0)


@pytest.fixture
def stub(store: StoreServer) -> Iterator[Any]:
    with grpc.insecure_channel(store.address) as channel:
        yield pb_grpc.DBManagerStub(channel)


def _log(ts: str, name: str, value: str) -> Any:
    return pb.MetricLog(time_stamp=ts, metric=pb.Metric(name=name, value=value))


def _report(stub: Any, trial: str, *logs: Any) -> None:
    stub.ReportObservationLog(
        pb.ReportObservationLogRequest(
            trial_name=trial, observation_log=pb.ObservationLog(metric_logs=list(logs))
        )
    )


def _get(stub: Any, trial: str, **kw: str) -> list[tuple[str, str, str]]:
    reply = stub.GetObservationLog(pb.GetObservationLogRequest(trial_name=trial, **kw))
    return [(m.time_stamp, m.metric.name, m.metric.value) for m in reply.observation_log.metric_logs]


def test_report_then_get_orders_by_time_and_keeps_everything(stub: Any) -> None:
    _report(
        stub,
        "t1",
        _log("2026-03-01T12:00:02Z", "loss", "0.5"),
        _log("2026-03-01T12:00:01.000001Z", "loss", "0.7"),
        _log("2026-03-01T12:00:01Z", "loss", "0.9"),
        _log("2026-03-01T12:00:02Z", "loss", "0.5"),  # exact duplicate: stored as given
    )
    _report(stub, "t2", _log("2026-03-01T12:00:00Z", "loss", "9"))
    assert _get(stub, "t1") == [
        ("2026-03-01T12:00:01Z", "loss", "0.9"),
        ("2026-03-01T12:00:01.000001Z", "loss", "0.7"),
        ("2026-03-01T12:00:02Z", "loss", "0.5"),
        ("2026-03-01T12:00:02Z", "loss", "0.5"),
    ]
    assert _get(stub, "unknown-trial") == []


def test_times_are_normalised_to_utc_microseconds(stub: Any) -> None:
    _report(
        stub,
        "t",
        _log("2026-03-01T14:00:00.123456789+02:00", "a", "1"),  # nanoseconds truncated like DATETIME(6)
        _log("2026-03-01T12:00:00.500000Z", "b", "2"),
        _log("", "skipped", "3"),  # Katib skips logs without a timestamp
    )
    assert _get(stub, "t") == [
        ("2026-03-01T12:00:00.123456Z", "a", "1"),
        ("2026-03-01T12:00:00.5Z", "b", "2"),
    ]


def test_filters_by_metric_and_inclusive_time_bounds(stub: Any) -> None:
    logs = [_log(f"2026-03-01T12:00:0{s}Z", name, str(s)) for s in range(5) for name in ("loss", "acc")]
    _report(stub, "t", *logs)
    assert [v for _, _, v in _get(stub, "t", metric_name="acc")] == ["0", "1", "2", "3", "4"]
    got = _get(
        stub, "t", metric_name="loss", start_time="2026-03-01T12:00:01Z", end_time="2026-03-01T12:00:03Z"
    )
    assert [v for _, _, v in got] == ["1", "2", "3"]
    assert len(_get(stub, "t", start_time="2026-03-01T12:00:04Z")) == 2
    assert len(_get(stub, "t", end_time="2026-03-01T12:00:00Z")) == 2
    # bounds in another zone mean the same instants
    got = _get(stub, "t", metric_name="loss", start_time="2026-03-01T13:00:02+01:00")
    assert [v for _, _, v in got] == ["2", "3", "4"]
    assert _get(stub, "t", metric_name="nope") == []


def test_delete_removes_one_trial_only(stub: Any) -> None:
    _report(stub, "a", _log("2026-03-01T12:00:00Z", "loss", "1"))
    _report(stub, "b", _log("2026-03-01T12:00:00Z", "loss", "2"))
    stub.DeleteObservationLog(pb.DeleteObservationLogRequest(trial_name="a"))
    assert _get(stub, "a") == []
    assert len(_get(stub, "b")) == 1
    stub.DeleteObservationLog(pb.DeleteObservationLogRequest(trial_name="a"))  # idempotent


@pytest.mark.parametrize(
    ("call", "field"),
    [
        (lambda s: _report(s, "", _log("2026-03-01T12:00:00Z", "x", "1")), "trial_name"),
        (
            lambda s: _report(s, "t", _log("2026-03-01T12:00:00Z", "x", "1"), _log("soon", "x", "1")),
            "observation_log.metric_logs[1].time_stamp",
        ),
        (
            lambda s: _report(s, "t", pb.MetricLog(time_stamp="2026-03-01T12:00:00Z")),
            "observation_log.metric_logs[0].metric.name",
        ),
        (lambda s: _get(s, ""), "trial_name"),
        (lambda s: _get(s, "t", start_time="2026-03-01"), "start_time"),
        (lambda s: _get(s, "t", end_time="2026-03-01T12:00:00"), "end_time"),
        (lambda s: s.DeleteObservationLog(pb.DeleteObservationLogRequest(trial_name="")), "trial_name"),
    ],
)
def test_invalid_requests_are_invalid_argument_naming_the_field(stub: Any, call: Any, field: str) -> None:
    with pytest.raises(grpc.RpcError) as info:
        call(stub)
    assert info.value.code() is grpc.StatusCode.INVALID_ARGUMENT
    assert field in info.value.details()
    assert _get(stub, "t") == []  # a failed report writes nothing (not even its valid first row)


def test_health_is_serving(store: StoreServer) -> None:
    with grpc.insecure_channel(store.address) as channel:
        health = health_pb2_grpc.HealthStub(channel)
        for service in ("", SERVICE_NAME):
            reply = health.Check(health_pb2.HealthCheckRequest(service=service))
            assert reply.status == health_pb2.HealthCheckResponse.SERVING


def test_concurrent_writers_and_readers(store: StoreServer, stub: Any) -> None:
    errors: list[BaseException] = []

    def writer(trial: str) -> None:
        try:
            with grpc.insecure_channel(store.address) as channel:
                own = pb_grpc.DBManagerStub(channel)
                for i in range(40):
                    _report(own, trial, _log(f"2026-03-01T12:00:00.{i + 1:06d}Z", "m", str(i)))
                    _get(own, trial)
        except BaseException as exc:  # collected and asserted below
            errors.append(exc)

    threads = [threading.Thread(target=writer, args=(f"t{n}",)) for n in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    for n in range(6):
        assert [v for _, _, v in _get(stub, f"t{n}")] == [str(i) for i in range(40)]


def test_rows_survive_a_restart_and_the_file_is_wal(tmp_path: Path) -> None:
    path = tmp_path / "obs.sqlite"
    first = start_store_server(path)
    with grpc.insecure_channel(first.address) as channel:
        _report(pb_grpc.DBManagerStub(channel), "t", _log("2026-03-01T12:00:00Z", "m", "1"))
    first.stop(0)
    second = start_store_server(path)
    try:
        with grpc.insecure_channel(second.address) as channel:
            assert _get(pb_grpc.DBManagerStub(channel), "t") == [("2026-03-01T12:00:00Z", "m", "1")]
    finally:
        second.stop(0)
    with sqlite3.connect(path) as conn:
        assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"


def test_bad_address_is_an_error(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="address"):
        start_store_server(tmp_path / "x.sqlite", "no-port")


def test_db_serve_command_serves_and_stops_gracefully_on_sigterm(tmp_path: Path) -> None:
    db = tmp_path / "cli.sqlite"
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "katib_progress.cli",
            "db",
            "serve",
            "--address",
            "127.0.0.1:0",
            "--db",
            str(db),
        ],
        cwd=REPO,
        env=env,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stderr is not None
        address = None
        for line in proc.stderr:
            match = re.search(r"listening on (\S+:\d+)", line)
            if match:
                address = match.group(1)
                break
        assert address, "server never reported its address"
        with grpc.insecure_channel(address) as channel:
            stub = pb_grpc.DBManagerStub(channel)
            _report(stub, "t", _log("2026-03-01T12:00:00Z", "m", "1"))
            assert len(_get(stub, "t")) == 1
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=30) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    with sqlite3.connect(db) as conn:
        assert conn.execute("SELECT COUNT(*) FROM observation_logs").fetchone()[0] == 1


def test_katib_unavailable_marker_at_year_one_round_trips(stub: Any) -> None:
    # Katib's trial controller reports "unavailable" at Go's zero time when metrics are missing.
    _report(
        stub,
        "t",
        _log("0001-01-01T00:00:00Z", "loss", "unavailable"),
        _log("2026-03-01T12:00:00Z", "loss", "1"),
    )
    assert _get(stub, "t") == [
        ("0001-01-01T00:00:00Z", "loss", "unavailable"),
        ("2026-03-01T12:00:00Z", "loss", "1"),
    ]
