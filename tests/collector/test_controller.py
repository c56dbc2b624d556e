"""Collector (watcher -> SnapshotProcessor -> sink) against the stand-in, with the in-memory sink."""

from __future__ import annotations

import threading
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from katib_progress.cli import main as cli_main
from katib_progress.collector.backoff import BackoffSettings
from katib_progress.collector.controller import BACKPRESSURE, SHED, Collector, CollectorSettings
from katib_progress.collector.kube import WatchSettings
from katib_progress.collector.rows import PROGRESS_METRIC, SEQ_METRIC, MetricRow
from katib_progress.collector.testing import MemorySink
from katib_progress.core.errors import TemporaryError
from katib_progress.core.types import ProgressPoint
from tests.kubestandin import KubeStandin
from tests.kubestandin.objects import Objects, trainer_status
from tests.kubestandin.waiting import running, wait_until

T0 = datetime(2026, 5, 1, 12, 0, 0, tzinfo=UTC)


def _settings(**overrides: object) -> CollectorSettings:
    base: dict[str, object] = {
        "watch": WatchSettings(backoff=BackoffSettings(initial_s=0.01, max_s=0.05), watch_timeout_s=30),
        "retry_interval_s": 0.05,
        "flush_timeout_s": 2.0,
    }
    base.update(overrides)
    return CollectorSettings(**base)  # type: ignore[arg-type]


def _values(sink: MemorySink, trial: str, name: str) -> list[str]:
    return [row.value for row in sink.rows(trial) if row.name == name]


def _watching(collector: Collector) -> None:
    """Wait until the collector listed and watches: snapshots written earlier are only seen as the latest."""
    wait_until(collector.has_synced)


@pytest.fixture
def objs(kube: KubeStandin) -> Objects:
    return Objects(kube.api_client())


def test_snapshots_become_rows_and_points(kube: KubeStandin, objs: Objects) -> None:
    job = objs.trial_job("trial-1", "exp-1")
    objs.trainjob("stray")  # not owned by a Trial: ignored
    objs.set_status("stray", trainer_status(T0, progress=50))
    points: list[ProgressPoint] = []
    lock = threading.Lock()

    def on_point(point: ProgressPoint) -> None:
        with lock:
            points.append(point)

    sink = MemorySink()
    collector = Collector(_settings(), sink, kube.api_client(), on_point=on_point)
    base = datetime.now(UTC).replace(microsecond=0)  # not before the TrainJob's creation
    with running(collector.run, collector.stop):
        _watching(collector)
        for i in range(1, 4):
            status = trainer_status(base + timedelta(seconds=i), progress=i, metrics={"loss": f"{1 / i:.4f}"})
            objs.set_status("trial-1", status)
        wait_until(lambda: len(_values(sink, "trial-1", SEQ_METRIC)) == 3)
    assert sink.trials() == ["trial-1"]
    assert _values(sink, "trial-1", PROGRESS_METRIC) == ["1", "2", "3"]
    assert _values(sink, "trial-1", "loss") == ["1.0000", "0.5000", "0.3333"]
    with lock:
        assert [(p.experiment, p.trial, p.progress) for p in points] == [
            ("exp-1", "trial-1", float(i)) for i in (1, 2, 3)
        ]
        # JobRef.started_at is the TrainJob's creationTimestamp: elapsed is measured from it.
        created = datetime.fromisoformat(job["metadata"]["creationTimestamp"].replace("Z", "+00:00"))
        assert points[0].elapsed_s == ((base + timedelta(seconds=1)) - created).total_seconds()


def test_refused_snapshots_are_redelivered_in_order(kube: KubeStandin, objs: Objects) -> None:
    objs.trial_job("t")
    sink = MemorySink()
    collector = Collector(_settings(), sink, kube.api_client())
    with running(collector.run, collector.stop):
        _watching(collector)
        objs.set_status("t", trainer_status(T0, progress=1))
        wait_until(lambda: _values(sink, "t", PROGRESS_METRIC) == ["1"])
        sink.fail_with = TemporaryError("db manager down")
        for i in (2, 3, 4):
            objs.set_status("t", trainer_status(T0 + timedelta(seconds=i), progress=i))
        wait_until(lambda: collector.retry_pending() == 3)
        sink.fail_with = None
        wait_until(lambda: _values(sink, "t", PROGRESS_METRIC) == ["1", "2", "3", "4"])
    assert collector.retry_pending() == 0


def test_full_queue_pushes_back_on_the_watch(kube: KubeStandin, objs: Objects) -> None:
    objs.trial_job("t")
    sink = MemorySink()
    sink.fail_with = TemporaryError("down")
    collector = Collector(_settings(max_pending_per_job=2), sink, kube.api_client())
    with running(collector.run, collector.stop):
        _watching(collector)
        for i in range(1, 6):
            objs.set_status("t", trainer_status(T0 + timedelta(seconds=i), progress=i))
        wait_until(lambda: collector.counters.get(BACKPRESSURE) >= 1)
        sink.fail_with = None
        wait_until(lambda: _values(sink, "t", PROGRESS_METRIC) == ["1", "2", "3", "4", "5"])
    # Nothing lost, nothing twice, although the watch was made to back off.
    assert _values(sink, "t", SEQ_METRIC) == sorted(set(_values(sink, "t", SEQ_METRIC)), key=int)


def test_overload_sheds_older_waiting_snapshots_and_the_latest_wins(kube: KubeStandin, objs: Objects) -> None:
    # Two jobs, a sink that refuses everything, and room for 3 waiting snapshots in all: once 3 wait,
    # a job's new snapshot replaces the ones it has waiting. Then the sink takes rows again.
    for name in ("a", "b"):
        objs.trial_job(name)
    sink = MemorySink()
    collector = Collector(_settings(max_pending_snapshots=3), sink, kube.api_client())
    with running(collector.run, collector.stop):
        _watching(collector)
        objs.set_status("a", trainer_status(T0, progress=1))
        wait_until(lambda: _values(sink, "a", PROGRESS_METRIC) == ["1"])
        sink.fail_with = TemporaryError("db manager full")
        for i in range(2, 7):
            for name in ("a", "b"):
                objs.set_status(name, trainer_status(T0 + timedelta(seconds=i), progress=i))
            # what waits stays within max_pending_snapshots plus one per job
            wait_until(lambda: collector.retry_pending() >= 1)
            assert collector.retry_pending() <= 3 + 2
        wait_until(lambda: collector.counters.get(SHED) >= 1)
        assert collector.counters.get(BACKPRESSURE) == 0
        sink.fail_with = None
        wait_until(lambda: all("6" in _values(sink, name, PROGRESS_METRIC) for name in ("a", "b")))
    for name in ("a", "b"):
        progress = [int(v) for v in _values(sink, name, PROGRESS_METRIC)]
        assert progress == sorted(set(progress)), progress  # in order, nothing twice
        assert progress[-1] == 6  # the latest snapshot wins
        seqs = [int(v) for v in _values(sink, name, SEQ_METRIC)]
        assert seqs == list(range(seqs[0], seqs[0] + len(seqs)))  # shed snapshots took no sequence number
    shed = collector.counters.get(SHED)
    written = len(_values(sink, "a", PROGRESS_METRIC)) + len(_values(sink, "b", PROGRESS_METRIC))
    assert written + shed == 11  # every snapshot was either written once or counted as shed
    assert written < 11


def test_deleted_trainjob_is_forgotten(kube: KubeStandin, objs: Objects) -> None:
    objs.trial_job("t")
    sink = MemorySink()
    collector = Collector(_settings(), sink, kube.api_client())
    with running(collector.run, collector.stop):
        _watching(collector)
        objs.set_status("t", trainer_status(T0, progress=1))
        wait_until(lambda: len(collector.processor) == 1)
        objs.delete_trainjob("t")
        wait_until(lambda: len(collector.processor) == 0)


def test_run_iterations_seam(kube: KubeStandin, objs: Objects) -> None:
    objs.trial_job("t")
    objs.set_status("t", trainer_status(T0, progress=5))
    sink = MemorySink()
    collector = Collector(_settings(watch=WatchSettings(watch_timeout_s=1)), sink, kube.api_client())
    collector.run(_iterations=1)  # just the list
    assert _values(sink, "t", PROGRESS_METRIC) == ["5"]


def test_collector_run_rejects_a_missing_kubeconfig(tmp_path: Path) -> None:
    argv = ["collector", "run", "--kubeconfig", str(tmp_path / "nope"), "--db-manager", "127.0.0.1:1"]
    assert cli_main(argv) == 2


def test_settings_are_validated() -> None:
    with pytest.raises(ValueError, match="retry_interval_s"):
        CollectorSettings(retry_interval_s=0)
    with pytest.raises(ValueError, match="watch_timeout_s"):
        WatchSettings(watch_timeout_s=0)


def test_first_sight_reads_wait_until_the_first_list_is_delivered(kube: KubeStandin, objs: Objects) -> None:
    """Reading what each listed job already wrote (sink.latest) starts once every job of the first
    list was delivered, so those N reads do not delay the first watch; later jobs are read at once."""
    for i in range(5):
        objs.trial_job(f"t{i}")
        objs.set_status(f"t{i}", trainer_status(T0, progress=i))
    synced_at_read: list[bool] = []

    class Sink(MemorySink):
        def latest(self, trial: str) -> list[MetricRow]:
            synced_at_read.append(collector.has_synced())
            return super().latest(trial)

    sink = Sink()
    collector = Collector(_settings(), sink, kube.api_client())
    with running(collector.run, collector.stop):
        wait_until(lambda: all(_values(sink, f"t{i}", PROGRESS_METRIC) == [str(i)] for i in range(5)))
        objs.trial_job("late")
        objs.set_status("late", trainer_status(T0, progress=7))
        wait_until(lambda: _values(sink, "late", PROGRESS_METRIC) == ["7"])
    assert synced_at_read == [True] * 6


def test_a_job_the_sink_keeps_refusing_does_not_hold_the_others_back(
    kube: KubeStandin, objs: Objects
) -> None:
    """A re-delivery round stops at the first refusal and the refused job goes last, so a sink refusing
    one trial only (the contract allows it) still takes the other jobs' waiting snapshots."""
    for name in ("a", "b"):
        objs.trial_job(name)

    class Sink(MemorySink):
        refuse: frozenset[str] = frozenset()

        def report(self, trial: str, rows: Sequence[MetricRow]) -> None:
            if trial in self.refuse:
                raise TemporaryError(f"{trial} not now")
            super().report(trial, rows)

    sink = Sink()
    collector = Collector(_settings(retry_interval_s=3600), sink, kube.api_client())
    with running(collector.run, collector.stop):
        _watching(collector)
        sink.refuse = frozenset({"a", "b"})
        objs.set_status("a", trainer_status(T0, progress=1))
        wait_until(lambda: collector.retry_pending() == 1)
        objs.set_status("b", trainer_status(T0, progress=2))
        wait_until(lambda: collector.retry_pending() == 2)
        sink.refuse = frozenset({"a"})
        for _ in range(2):  # a refuses each time; b is taken in the round after a went last
            collector.retry_pending()
        assert _values(sink, "b", PROGRESS_METRIC) == ["2"]
        assert _values(sink, "a", PROGRESS_METRIC) == []
