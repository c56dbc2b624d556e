"""End to end: TrainJob status in the API stand-in -> collector -> DBManagerSink -> embedded store (gRPC).

Everything talks over real protocols: the kubernetes client over HTTP to the stand-in, the sink over
gRPC to the SQLite-backed store; the last test runs ``katib-progress collector run`` as a subprocess.
"""

from __future__ import annotations

import math
import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import grpc
import pytest
from kubeflow.katib import katib_api_pb2 as pb
from kubeflow.katib import katib_api_pb2_grpc as pb_grpc

from katib_progress.collector.backoff import BackoffSettings
from katib_progress.collector.controller import Collector, CollectorSettings
from katib_progress.collector.katib.dbmanager import DBManagerSettings, DBManagerSink
from katib_progress.collector.kube import WatchSettings
from katib_progress.collector.kube import watcher as w
from katib_progress.collector.rows import ETA_METRIC, PROGRESS_METRIC, SEQ_METRIC
from katib_progress.collector.store import StoreServer, start_store_server
from katib_progress.core.timefmt import parse_rfc3339
from tests.kubestandin import KubeStandin
from tests.kubestandin.objects import Objects, trainer_status
from tests.kubestandin.waiting import running, wait_until

ROOT = Path(__file__).resolve().parents[2]
TRIAL = "mnist-x7k2p9"
SETTINGS = CollectorSettings(
    watch=WatchSettings(backoff=BackoffSettings(initial_s=0.01, max_s=0.1), watch_timeout_s=30),
    retry_interval_s=0.05,
    flush_timeout_s=5.0,
)
SINK_SETTINGS = DBManagerSettings(backoff=BackoffSettings(initial_s=0.01, max_s=0.1), close_timeout_s=5.0)


@pytest.fixture
def store(tmp_path: Path) -> Iterator[StoreServer]:
    server = start_store_server(tmp_path / "observations.sqlite")
    try:
        yield server
    finally:
        server.stop(0)


@pytest.fixture
def objs(kube: KubeStandin) -> Objects:
    return Objects(kube.api_client())


def _log(store: StoreServer, trial: str, metric: str = "") -> list[tuple[str, str, str]]:
    """(timestamp, name, value) rows of ``trial`` as Katib's DBManager API returns them."""
    with grpc.insecure_channel(store.address) as channel:
        reply = pb_grpc.DBManagerStub(channel).GetObservationLog(
            pb.GetObservationLogRequest(trial_name=trial, metric_name=metric), timeout=5
        )
    return [(m.time_stamp, m.metric.name, m.metric.value) for m in reply.observation_log.metric_logs]


def _snapshot(base: datetime, i: int) -> dict[str, Any]:
    """The i-th realistic snapshot: progress up, ETA down, loss/accuracy moving; pairs share a second."""
    return trainer_status(
        base + timedelta(seconds=i // 2, milliseconds=300 * (i % 2)),
        progress=min(100, 2 * i + 1),
        eta=max(0, 490 - 10 * i),
        metrics={
            "loss": f"{2.3 * math.exp(-i / 12) + 0.05:.6f}",
            "eval_accuracy": f"{0.1 + 0.85 * (1 - math.exp(-i / 10)):.4f}",
            "learning_rate": "3e-05",
            "epoch": f"{i / 10:.2f}",
        },
    )


def _seqs(store: StoreServer, trial: str) -> list[int]:
    return [int(v) for _, _, v in _log(store, trial, SEQ_METRIC)]


def _assert_exact(store: StoreServer, base: datetime, count: int) -> None:
    rows = _log(store, TRIAL)
    per_snapshot = 4 + 4  # user metrics + progress, eta, elapsed, seq
    assert len(rows) == count * per_snapshot
    assert len(set(rows)) == len(rows)  # no duplicate row
    seq_rows = _log(store, TRIAL, SEQ_METRIC)
    assert [int(v) for _, _, v in seq_rows] == list(range(count))
    stamps = [parse_rfc3339(t) for t, _, _ in seq_rows]
    assert stamps == sorted(stamps) and len(set(stamps)) == count  # distinct, in order
    expected = [_snapshot(base, i) for i in range(count)]
    assert [v for _, _, v in _log(store, TRIAL, "loss")] == [s["metrics"][0]["value"] for s in expected]
    assert [v for _, _, v in _log(store, TRIAL, PROGRESS_METRIC)] == [
        str(s["progressPercentage"]) for s in expected
    ]
    assert [v for _, _, v in _log(store, TRIAL, ETA_METRIC)] == [
        str(s["estimatedRemainingSeconds"]) for s in expected
    ]


def test_fifty_snapshots_exactly_once_through_drop_gone_and_5xx(
    kube: KubeStandin, objs: Objects, store: StoreServer
) -> None:
    objs.trial_job(TRIAL, "mnist")
    objs.trainjob("not-a-trial")  # no Trial owner: must be ignored
    base = datetime.now(UTC).replace(microsecond=0)
    sink = DBManagerSink(store.address, settings=SINK_SETTINGS)
    collector = Collector(SETTINGS, sink, kube.api_client())
    with running(collector.run, collector.stop, join_timeout=15):
        wait_until(collector.has_synced)
        for i in range(50):
            if i == 31:
                # The collector is caught up and disconnected (reconnects fail), snapshot 31 lands, and
                # the history is compacted past the collector's resourceVersion: its next watch gets
                # 410 Gone, it re-lists, sees snapshot 31 and the replay writes nothing twice.
                wait_until(lambda: len(_seqs(store, TRIAL)) == 31)
                kube.fail_next(10_000, 503, path="v1alpha1/trainjobs")
                kube.close_watches()
                wait_until(lambda: collector.counters.get(w.ERRORS, kind="temporary", scope="*") >= 1)
            objs.set_status(TRIAL, _snapshot(base, i))
            objs.set_status("not-a-trial", _snapshot(base, i))
            if i == 15:  # the watch connection breaks: resume from the last resourceVersion
                kube.close_watches(abrupt=True)
            if i == 31:
                kube.expire()
                kube.clear_faults()
                wait_until(lambda: collector.counters.get(w.LISTS, scope="*") == 2)
            if i == 40:  # a burst of API errors on reconnect
                kube.fail_next(6, 503, path="v1alpha1/trainjobs")
                kube.close_watches()
        wait_until(lambda: len(_seqs(store, TRIAL)) >= 50)
    assert sink.flush(5)
    sink.close()
    _assert_exact(store, base, 50)
    assert _log(store, "not-a-trial") == []
    counters = collector.counters
    assert counters.get(w.EXPIRED, scope="*") == 1
    assert counters.get(w.ERRORS, kind="temporary", scope="*") >= 7
    assert kube.pending_faults() == 0
    assert counters.get(w.LISTS, scope="*") == 2  # the dropped watches resumed without re-listing


def test_restart_mid_stream_writes_no_duplicate(kube: KubeStandin, objs: Objects, store: StoreServer) -> None:
    objs.trial_job(TRIAL, "mnist")
    base = datetime.now(UTC).replace(microsecond=0)
    for round_, (start, end) in enumerate([(0, 20), (20, 40)]):
        sink = DBManagerSink(store.address, settings=SINK_SETTINGS)
        collector = Collector(SETTINGS, sink, kube.api_client())
        with running(collector.run, collector.stop, join_timeout=15):
            wait_until(collector.has_synced)
            for i in range(start, end):
                objs.set_status(TRIAL, _snapshot(base, i))
            wait_until(lambda end=end: len(_seqs(store, TRIAL)) >= end)  # type: ignore[misc]
        assert sink.flush(5)
        sink.close()
        if round_ == 1:
            # The restarted collector re-listed snapshot 19, recognised it from the store, and went on.
            assert collector.counters.get("collector_jobs_recovered_total") == 1
    _assert_exact(store, base, 40)


def test_collector_run_command_exits_cleanly_on_sigterm(
    kube: KubeStandin, objs: Objects, store: StoreServer, tmp_path: Path
) -> None:
    objs.trial_job(TRIAL, "mnist")
    base = datetime.now(UTC).replace(microsecond=0)
    kubeconfig = kube.write_kubeconfig(tmp_path / "kubeconfig")
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "katib_progress.cli",
            "--log-json",
            "collector",
            "run",
            "--kubeconfig",
            str(kubeconfig),
            "--namespace",
            "default",
            "--db-manager",
            store.address,
        ],
        cwd=ROOT,
        env=env,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        # Snapshots written before the collector watches are gone (the status holds only the latest).
        wait_until(lambda: any(r.verb == "watch" for r in kube.requests), timeout=15)
        for i in range(5):
            objs.set_status(TRIAL, _snapshot(base, i))
        wait_until(lambda: len(_seqs(store, TRIAL)) == 5, timeout=15)
        proc.send_signal(signal.SIGTERM)
        _, stderr = proc.communicate(timeout=15)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 0, stderr
    assert '"event": "started"' in stderr and '"event": "stopped"' in stderr
    assert '"drained": true' in stderr
    _assert_exact(store, base, 5)
    # Read-only RBAC: the collector only lists/watches TrainJobs in its namespace and gets Trials.
    verbs = {
        (r.verb, r.resource, r.namespace) for r in kube.requests if r.resource in ("trainjobs", "trials")
    }
    assert {("list", "trainjobs", "default"), ("watch", "trainjobs", "default")} <= verbs
    assert not {v for v in verbs if v[0] in ("list", "watch") and v[2] == ""}
