"""The final-metrics acknowledgement rule (which stored rows count as the final snapshot's)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from kubernetes import client

from katib_progress.collector.backoff import BackoffSettings
from katib_progress.collector.final_metrics import FinalMetricsMarker, final_rows_stored
from katib_progress.collector.pipeline import JobRef
from katib_progress.collector.rows import MetricRow, snapshot_rows
from katib_progress.core.errors import TemporaryError
from katib_progress.core.status import parse_trainer_status
from tests.kubestandin.objects import trainer_status

T = datetime(2026, 3, 1, 10, 0, 0, tzinfo=UTC)
START = T - timedelta(hours=1)
JOB = JobRef("ns", "t", "uid", "exp", "t", started_at=START)


def _job(status: dict[str, Any] | None) -> dict[str, Any]:
    return {"status": {"trainerStatus": status} if status is not None else {}}


def _stored(status: dict[str, Any], *, offset_us: int = 0, seq: int = 3) -> list[MetricRow]:
    parsed = parse_trainer_status(status)
    stamp = parsed.last_updated + timedelta(microseconds=offset_us)
    return snapshot_rows(
        parsed, stamp=stamp, seq=seq, elapsed_s=(parsed.last_updated - START).total_seconds()
    )


def test_final_snapshot_stored() -> None:
    final = trainer_status(T, progress=100, metrics={"loss": "0.25"})
    assert final_rows_stored(JOB, _job(final), _stored(final))
    assert final_rows_stored(JOB, _job(final), _stored(final, offset_us=2))  # a later same-second stamp


def test_older_or_different_snapshot_is_not_enough() -> None:
    final = trainer_status(T, progress=100, metrics={"loss": "0.25"})
    earlier = trainer_status(T - timedelta(seconds=5), progress=95, metrics={"loss": "0.3"})
    same_second_other = trainer_status(T, progress=99, metrics={"loss": "0.26"})
    assert not final_rows_stored(JOB, _job(final), _stored(earlier))
    assert not final_rows_stored(JOB, _job(final), _stored(same_second_other))
    assert not final_rows_stored(JOB, _job(final), [])


def test_nothing_to_wait_for() -> None:
    assert final_rows_stored(JOB, _job(None), [])
    later = trainer_status(T + timedelta(seconds=3), metrics={"loss": "0.2"})
    assert final_rows_stored(JOB, _job(trainer_status(T, metrics={"loss": "0.25"})), _stored(later))


class _BusyReader:
    """A DB manager that answers "come back in ``delay`` seconds" (TemporaryError.delay)."""

    def __init__(self, delay: float) -> None:
        self.delay = delay
        self.reads = 0

    def stored_latest(self, trial: str) -> list[MetricRow]:
        self.reads += 1
        raise TemporaryError("busy", delay=self.delay)


def test_recheck_waits_as_long_as_the_peer_asked() -> None:
    now = [0.0]
    reader = _BusyReader(delay=20.0)
    marker = FinalMetricsMarker(
        client.ApiClient(),
        reader,
        poll=BackoffSettings(initial_s=0.01, max_s=60.0),
        clock=lambda: now[0],
    )
    complete = {"status": {"conditions": [{"type": "Complete", "status": "True"}]}}
    marker.observe(JOB, complete)
    assert marker.check_pending() == 1
    assert reader.reads == 1
    now[0] = 1.0  # past the backoff's own 0.01 s, before the peer's 20 s
    marker.check_pending()
    assert reader.reads == 1
    now[0] = 20.5
    marker.check_pending()
    assert reader.reads == 2
