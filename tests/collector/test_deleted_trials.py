"""A deleted Trial leaves no row behind, whatever the order of events (docs/collector.md, "Deleted
trials"): the collector holds each TrainJob with its finalizer, writes nothing of a TrainJob being
deleted, and deletes a gone Trial's log after the last row the sink could still write.

Katib's own clean-up (the ``clean-metrics-in-db`` finalizer's DeleteObservationLog) is played by
``sink.delete`` in these tests; the garbage collector's cascade by deleting the TrainJob."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from katib_progress.collector.backoff import BackoffSettings
from katib_progress.collector.controller import RELEASED, Collector
from katib_progress.collector.katib.dbmanager import DBManagerSettings, DBManagerSink
from katib_progress.collector.kube.finalizer import FINALIZER
from katib_progress.collector.rows import SEQ_METRIC, MetricRow
from katib_progress.collector.store import StoreServer, start_store_server
from katib_progress.collector.testing import MemorySink
from katib_progress.core.errors import TemporaryError
from katib_progress.core.timefmt import format_rfc3339nano
from tests.collector.test_controller import _settings
from tests.kubestandin import KubeStandin
from tests.kubestandin.objects import KATIB, TRAINER, Objects, trainer_status
from tests.kubestandin.waiting import running, wait_until


@pytest.fixture
def objs(kube: KubeStandin) -> Objects:
    return Objects(kube.api_client())


def _now() -> datetime:
    return datetime.now(UTC).replace(microsecond=0) + timedelta(seconds=1)


def _get(objs: Objects, gv: tuple[str, str], plural: str, name: str) -> dict[str, Any] | None:
    try:
        return dict(objs.api.get_namespaced_custom_object(*gv, "default", plural, name))
    except Exception as exc:
        if getattr(exc, "status", None) == 404:
            return None
        raise


def _finalizers(objs: Objects, name: str) -> list[str]:
    job = _get(objs, TRAINER, "trainjobs", name)
    return list(((job or {}).get("metadata") or {}).get("finalizers") or [])


def _seqs(sink: MemorySink, trial: str) -> list[str]:
    return [r.value for r in sink.rows(trial) if r.name == SEQ_METRIC]


def _delete(objs: Objects, gv: tuple[str, str], plural: str, name: str) -> None:
    objs.api.delete_namespaced_custom_object(*gv, "default", plural, name)


def _hold_trial(objs: Objects, name: str) -> None:
    """Give the Trial a finalizer (Katib's clean-metrics-in-db), so a delete leaves it deleting."""
    objs.api.patch_namespaced_custom_object(
        *KATIB, "default", "trials", name, {"metadata": {"finalizers": ["clean-metrics-in-db"]}}
    )


def _write(objs: Objects, sink: MemorySink, name: str, at: datetime, seq: int) -> None:
    objs.set_status(name, trainer_status(at, progress=seq))
    wait_until(lambda: len(_seqs(sink, name)) == seq + 1, timeout=60)


def test_the_finalizer_is_added_before_the_first_row(kube: KubeStandin, objs: Objects) -> None:
    objs.trial_job("t")
    sink = MemorySink()
    collector = Collector(_settings(), sink, kube.api_client())
    with running(collector.run, collector.stop):
        wait_until(collector.has_synced, timeout=60)
        _write(objs, sink, "t", _now(), 0)
        assert FINALIZER in _finalizers(objs, "t")


def test_trial_gone_first_then_its_trainjob_no_row_remains(kube: KubeStandin, objs: Objects) -> None:
    """The Trial is deleted and Katib's finalizer clears the log, a snapshot is written after that, the
    Trial goes, then the garbage collector deletes the TrainJob (background cascade): the late row is
    deleted too."""
    objs.trial_job("t")
    _hold_trial(objs, "t")
    sink = MemorySink()
    collector = Collector(_settings(), sink, kube.api_client())
    t0 = _now()
    with running(collector.run, collector.stop):
        wait_until(collector.has_synced, timeout=60)
        _write(objs, sink, "t", t0, 0)
        _delete(objs, KATIB, "trials", "t")
        sink.delete("t")  # Katib's clean-metrics-in-db
        objs.set_status("t", trainer_status(t0 + timedelta(seconds=1), progress=1))
        wait_until(lambda: _seqs(sink, "t") == ["1"], timeout=60)  # written after Katib's clean-up
        objs.api.patch_namespaced_custom_object(
            *KATIB, "default", "trials", "t", {"metadata": {"finalizers": None}}
        )
        wait_until(lambda: _get(objs, KATIB, "trials", "t") is None, timeout=60)
        _delete(objs, TRAINER, "trainjobs", "t")  # the cascade
        wait_until(lambda: _get(objs, TRAINER, "trainjobs", "t") is None, timeout=60)
        assert sink.rows("t") == []
        wait_until(
            lambda: collector.counters.get(RELEASED, log="deleted") == 1, timeout=60
        )  # counted after the release


def test_trainjob_deleted_first_while_the_trial_is_deleting(kube: KubeStandin, objs: Objects) -> None:
    """Foreground deletion: the TrainJob goes first while its Trial waits (deletionTimestamp set,
    Katib's finalizer not run yet): the rows are deleted, and nothing of the deleting job is written."""
    objs.trial_job("t")
    _hold_trial(objs, "t")
    sink = MemorySink()
    collector = Collector(_settings(), sink, kube.api_client())
    t0 = _now()
    with running(collector.run, collector.stop):
        wait_until(collector.has_synced, timeout=60)
        _write(objs, sink, "t", t0, 0)
        _delete(objs, KATIB, "trials", "t")
        assert (_get(objs, KATIB, "trials", "t") or {})["metadata"].get("deletionTimestamp")
        _delete(objs, TRAINER, "trainjobs", "t")
        wait_until(lambda: _get(objs, TRAINER, "trainjobs", "t") is None, timeout=60)
        assert sink.rows("t") == []


def test_a_snapshot_of_a_deleting_trainjob_is_not_written(kube: KubeStandin, objs: Objects) -> None:
    """A trainer still reporting after its TrainJob's deletion began (a snapshot in flight): nothing of
    it is written, even while the release waits (the sink refuses the delete for a while)."""
    objs.trial_job("t")
    sink = MemorySink()
    collector = Collector(_settings(), sink, kube.api_client())
    t0 = _now()
    with running(collector.run, collector.stop):
        wait_until(collector.has_synced, timeout=60)
        _write(objs, sink, "t", t0, 0)
        _delete(objs, KATIB, "trials", "t")
        sink.fail_with = TemporaryError("db manager down")
        _delete(objs, TRAINER, "trainjobs", "t")
        wait_until(
            lambda: bool((_get(objs, TRAINER, "trainjobs", "t") or {})["metadata"].get("deletionTimestamp")),
            timeout=60,
        )
        objs.set_status("t", trainer_status(t0 + timedelta(seconds=1), progress=1))
        sink.fail_with = None
        wait_until(lambda: _get(objs, TRAINER, "trainjobs", "t") is None, timeout=60)
        assert sink.rows("t") == []


def test_retain_false_the_trial_keeps_its_rows(kube: KubeStandin, objs: Objects) -> None:
    """Katib deletes the TrainJob of a completed trial (``retain: false``) while the Trial stays: its
    log is its observation and stays; the TrainJob is let go."""
    objs.trial_job("t")
    sink = MemorySink()
    collector = Collector(_settings(), sink, kube.api_client())
    with running(collector.run, collector.stop):
        wait_until(collector.has_synced, timeout=60)
        _write(objs, sink, "t", _now(), 0)
        _delete(objs, TRAINER, "trainjobs", "t")
        wait_until(lambda: _get(objs, TRAINER, "trainjobs", "t") is None, timeout=60)
        assert _seqs(sink, "t") == ["0"]
        wait_until(
            lambda: collector.counters.get(RELEASED, log="kept") == 1, timeout=60
        )  # counted after the release


def test_a_collector_restart_in_between_still_deletes_the_rows(kube: KubeStandin, objs: Objects) -> None:
    """The collector writes after Katib's clean-up and stops before it sees any deletion; the Trial
    and the TrainJob are deleted while it is down. The finalizer holds the TrainJob, so the next
    collector finds it deleting and deletes the rows."""
    objs.trial_job("t")
    sink = MemorySink()
    first = Collector(_settings(), sink, kube.api_client())
    with running(first.run, first.stop):
        wait_until(first.has_synced, timeout=60)
        _write(objs, sink, "t", _now(), 0)
    _delete(objs, KATIB, "trials", "t")
    _delete(objs, TRAINER, "trainjobs", "t")
    assert _get(objs, TRAINER, "trainjobs", "t") is not None  # held
    assert sink.rows("t")
    second = Collector(_settings(), sink, kube.api_client())
    with running(second.run, second.stop):
        wait_until(lambda: _get(objs, TRAINER, "trainjobs", "t") is None, timeout=60)
    assert sink.rows("t") == []


def test_without_the_finalizer_a_trainjob_delete_event_still_deletes(
    kube: KubeStandin, objs: Objects
) -> None:
    """``finalizer: false`` (or a TrainJob first seen already gone): the delete event alone leads to the
    same clean-up when the Trial is gone."""
    objs.trial_job("t")
    sink = MemorySink()
    collector = Collector(_settings(finalizer=False), sink, kube.api_client())
    with running(collector.run, collector.stop):
        wait_until(collector.has_synced, timeout=60)
        _write(objs, sink, "t", _now(), 0)
        assert FINALIZER not in _finalizers(objs, "t")
        _delete(objs, KATIB, "trials", "t")
        _delete(objs, TRAINER, "trainjobs", "t")
        wait_until(lambda: collector.counters.get(RELEASED, log="deleted") == 1, timeout=60)
        assert sink.rows("t") == []


# -- the DB manager sink's delete, against the embedded store over gRPC ---------------------------

FAST = DBManagerSettings(
    rpc_timeout_s=2.0,
    backoff=BackoffSettings(initial_s=0.02, max_s=0.2),
    close_timeout_s=5.0,
    lock_wait_s=1.0,
)


@pytest.fixture
def store(tmp_path: Path) -> Iterator[StoreServer]:
    server = start_store_server(tmp_path / "obs.sqlite")
    yield server
    server.stop(0)


def _rows(i: int) -> list[MetricRow]:
    return [
        MetricRow(
            SEQ_METRIC, str(i), format_rfc3339nano(datetime(2026, 3, 1, tzinfo=UTC) + timedelta(seconds=i))
        )
    ]


def test_sink_delete_drops_what_is_queued_and_deletes_what_is_stored(store: StoreServer) -> None:
    sink = DBManagerSink(store.address, settings=FAST)
    try:
        sink.report("t", _rows(0))
        assert sink.flush(10)
        for i in range(1, 50):
            sink.report("t", _rows(i))
        sink.report("other", _rows(0))
        sink.delete("t")
        assert sink.flush(10)
        assert sink.latest("t") == []
        assert [r.value for r in sink.latest("other")] == ["0"]
    finally:
        sink.close()
