"""Snapshot sequencing through SnapshotProcessor: repeats, same-second order, time going backwards,
appear/disappear, sink refusal and restart recovery (with MemorySink; the real store is in
test_store_sink.py)."""

from __future__ import annotations

import math
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from katib_progress.collector.counters import Counters
from katib_progress.collector.pipeline import LAG, REJECTED, SNAPSHOTS, JobRef, OutcomeKind, SnapshotProcessor
from katib_progress.collector.rows import ELAPSED_METRIC, ETA_METRIC, PROGRESS_METRIC, SEQ_METRIC, MetricRow
from katib_progress.collector.sinks import ObservationSink
from katib_progress.collector.testing import MemorySink
from katib_progress.core.errors import TemporaryError
from katib_progress.core.sequence import MAX_OFFSET_US, SequenceState, SnapshotSequencer, StepKind
from katib_progress.core.timefmt import format_rfc3339nano, parse_rfc3339
from katib_progress.core.types import ProgressPoint

START = datetime(2026, 3, 1, 12, 0, 0, tzinfo=UTC)
JOB = JobRef("ns", "trial-a", "uid-a", "exp", "trial-a", started_at=START)


def _ts(second: int, sub: str = "") -> str:
    return format_rfc3339nano(START + timedelta(seconds=second)).replace("Z", f"{sub}Z")


def _status(
    second: int, loss: str = "1.0", progress: int | None = 10, sub: str = "", **extra: Any
) -> dict[str, Any]:
    body: dict[str, Any] = {"lastUpdatedTime": _ts(second, sub), "metrics": [{"name": "loss", "value": loss}]}
    if progress is not None:
        body["progressPercentage"] = progress
    body.update(extra)
    return body


def _processor(
    sink: ObservationSink | None = None,
) -> tuple[SnapshotProcessor, MemorySink, list[ProgressPoint]]:
    points: list[ProgressPoint] = []
    mem = sink if isinstance(sink, MemorySink) else MemorySink()
    return SnapshotProcessor(sink or mem, counters=Counters(), on_point=points.append), mem, points


def _stamps(rows: list[MetricRow], name: str = "loss") -> list[datetime]:
    return [parse_rfc3339(r.timestamp) for r in rows if r.name == name]


def test_new_snapshot_becomes_rows_and_a_point() -> None:
    proc, sink, points = _processor()
    out = proc.process(JOB, _status(30, loss="0.25", progress=40, estimatedRemainingSeconds=45))
    assert out.kind is OutcomeKind.WRITTEN and out.seq == 0
    rows = {r.name: r for r in sink.rows("trial-a")}
    assert rows["loss"].value == "0.25"
    assert rows[PROGRESS_METRIC].value == "40"
    assert rows[ETA_METRIC].value == "45"
    assert rows[ELAPSED_METRIC].value == "30"
    assert rows[SEQ_METRIC].value == "0"
    assert {r.timestamp for r in rows.values()} == {"2026-03-01T12:00:30Z"}
    (point,) = points
    assert (point.experiment, point.trial, point.seq, point.progress, point.eta_s, point.elapsed_s) == (
        "exp",
        "trial-a",
        0,
        40.0,
        45.0,
        30.0,
    )
    assert dict(point.metrics) == {"loss": 0.25}


def test_repeated_delivery_writes_nothing() -> None:
    proc, sink, points = _processor()
    for _ in range(5):
        proc.process(JOB, _status(1))
    assert len(points) == 1
    assert len(_stamps(sink.rows("trial-a"))) == 1
    assert proc.counters.get(SNAPSHOTS, outcome="repeat") == 4
    # the same content at a later second IS a new snapshot (a new apply with a new time)
    assert proc.process(JOB, _status(2)).kind is OutcomeKind.WRITTEN


def test_same_second_distinct_snapshots_keep_their_order_with_microsecond_offsets() -> None:
    proc, sink, points = _processor()
    losses = ["0.9", "0.8", "0.7", "0.6"]
    for i, loss in enumerate(losses):
        out = proc.process(JOB, _status(7, loss=loss, sub=f".{i}"))  # sub-second input is floored
        assert out.kind is OutcomeKind.WRITTEN
    proc.process(JOB, _status(7, loss="0.6"))  # repeat of the last one
    rows = sink.rows("trial-a")
    stamps = _stamps(rows)
    base = START + timedelta(seconds=7)
    assert stamps == [base + timedelta(microseconds=k) for k in range(4)]
    # order of the log by timestamp == order of the snapshots
    by_time = sorted((r for r in rows if r.name == "loss"), key=lambda r: parse_rfc3339(r.timestamp))
    assert [r.value for r in by_time] == losses
    assert [p.seq for p in points] == [0, 1, 2, 3]
    # the next second starts again at offset 0
    proc.process(JOB, _status(8, loss="0.5"))
    assert _stamps(sink.rows("trial-a"))[-1] == START + timedelta(seconds=8)


def test_a_b_a_within_one_second_is_three_snapshots() -> None:
    proc, sink, _ = _processor()
    for loss in ["1", "2", "1"]:
        assert proc.process(JOB, _status(3, loss=loss)).kind is OutcomeKind.WRITTEN
    assert [r.value for r in sink.rows("trial-a") if r.name == "loss"] == ["1", "2", "1"]


def test_time_going_backwards_is_skipped_and_counted() -> None:
    proc, sink, points = _processor()
    proc.process(JOB, _status(10, loss="0.5"))
    out = proc.process(JOB, _status(9, loss="0.4"))
    assert out.kind is OutcomeKind.STALE
    assert proc.counters.get(SNAPSHOTS, outcome="stale") == 1
    assert [r.value for r in sink.rows("trial-a") if r.name == "loss"] == ["0.5"]
    assert len(points) == 1


def test_disappear_and_reappear() -> None:
    proc, _sink, points = _processor()
    proc.process(JOB, _status(1, loss="1"))
    assert proc.process(JOB, None).kind is OutcomeKind.ABSENT
    # the same snapshot reappearing is still a repeat
    assert proc.process(JOB, _status(1, loss="1")).kind is OutcomeKind.REPEAT
    proc.process(JOB, None)
    assert proc.process(JOB, _status(4, loss="0.5")).kind is OutcomeKind.WRITTEN
    assert [p.seq for p in points] == [0, 1]
    assert proc.counters.get(SNAPSHOTS, outcome="absent") == 2


def test_first_sight_absent_then_appear() -> None:
    proc, _sink, _ = _processor()
    assert proc.process(JOB, None).kind is OutcomeKind.ABSENT
    assert proc.process(JOB, _status(1)).kind is OutcomeKind.WRITTEN


def test_rejections_are_counted_once_per_distinct_snapshot_and_nan_reaches_the_point() -> None:
    proc, sink, points = _processor()
    body = _status(2, loss="nan")
    body["metrics"] += [{"name": "acc", "value": "0.5"}, {"name": "bad", "value": "12%"}]
    proc.process(JOB, body)
    proc.process(JOB, body)
    assert proc.counters.get(REJECTED, reason="non_finite") == 1
    assert proc.counters.get(REJECTED, reason="not_a_number") == 1
    names = {r.name for r in sink.rows("trial-a")}
    assert "loss" not in names and "bad" not in names and "acc" in names
    assert math.isnan(points[0].metrics["loss"])


def test_invalid_snapshot_is_counted_not_raised() -> None:
    proc, sink, points = _processor()
    assert proc.process(JOB, {"progressPercentage": 5}).kind is OutcomeKind.INVALID
    assert proc.counters.get(SNAPSHOTS, outcome="invalid") == 1
    assert not sink.trials() and not points


def test_sink_refusal_keeps_the_snapshot_pending() -> None:
    proc, sink, points = _processor()
    sink.fail_with = TemporaryError("buffer full")
    assert proc.process(JOB, _status(1)).kind is OutcomeKind.RETRY  # latest() refused
    sink.fail_with = None
    proc.process(JOB, _status(1))
    sink.fail_with = TemporaryError("buffer full")
    out = proc.process(JOB, _status(2, loss="0.5"))
    assert out.retry and len(points) == 1
    sink.fail_with = None
    assert proc.process(JOB, _status(2, loss="0.5")).kind is OutcomeKind.WRITTEN  # retried, not a repeat
    assert [p.seq for p in points] == [0, 1]


def test_restart_recovers_from_the_sinks_latest_rows() -> None:
    sink = MemorySink()
    first, _, _ = _processor(sink)
    first.process(JOB, _status(5, loss="0.9"))
    first.process(JOB, _status(5, loss="0.8"))  # offset 1 µs, seq 1
    # a new collector with no memory, same sink
    second, _, points = _processor(sink)
    assert second.process(JOB, _status(5, loss="0.8")).kind is OutcomeKind.REPEAT  # re-list after restart
    assert second.counters.get("collector_jobs_recovered_total") == 1
    assert second.process(JOB, _status(4, loss="0.1")).kind is OutcomeKind.STALE
    out = second.process(JOB, _status(5, loss="0.7"))  # a distinct snapshot in the same second
    assert out.kind is OutcomeKind.WRITTEN and out.seq == 2
    assert _stamps(sink.rows("trial-a"))[-1] == START + timedelta(seconds=5, microseconds=2)
    assert points[-1].seq == 2


def test_restart_with_a_different_snapshot_at_the_latest_second_is_new() -> None:
    sink = MemorySink()
    first, _, _ = _processor(sink)
    first.process(JOB, _status(5, loss="0.9"))
    second, _, _ = _processor(sink)
    assert second.process(JOB, _status(5, loss="0.9", progress=11)).kind is OutcomeKind.WRITTEN


def test_forget_drops_state() -> None:
    proc, _sink, _ = _processor()
    proc.process(JOB, _status(1))
    assert len(proc) == 1
    proc.forget(JOB)
    assert len(proc) == 0
    # state comes back from the sink: still a repeat
    assert proc.process(JOB, _status(1)).kind is OutcomeKind.REPEAT


def test_jobs_are_independent() -> None:
    proc, sink, _ = _processor()
    other = JobRef("ns", "trial-b", "uid-b", "exp", "trial-b")
    proc.process(JOB, _status(5))
    assert proc.process(other, _status(1)).kind is OutcomeKind.WRITTEN
    assert not any(r.name == ELAPSED_METRIC for r in sink.rows("trial-b"))  # start time unknown


def test_sequencer_runs_out_of_microseconds_gracefully() -> None:
    seq: SnapshotSequencer[str] = SnapshotSequencer()
    seq.seed("k", SequenceState(100, MAX_OFFSET_US, 7, "fp", None))
    step = seq.plan("k", datetime.fromtimestamp(100, UTC), "other")
    assert step.kind is StepKind.SECOND_FULL
    seq.commit("k", step)
    assert seq.get("k") == SequenceState(100, MAX_OFFSET_US, 7, "fp", None)


def test_plan_does_not_change_state_until_commit() -> None:
    seq: SnapshotSequencer[str] = SnapshotSequencer()
    t = datetime.fromtimestamp(100, UTC)
    step = seq.plan("k", t, "a")
    assert step.kind is StepKind.NEW and "k" not in seq
    seq.commit("k", step)
    assert seq.plan("k", t, "a").kind is StepKind.REPEAT
    with pytest.raises(ValueError, match="naive"):
        seq.plan("k", datetime(2026, 1, 1), "a")


def test_jobref_validates_its_fields() -> None:
    with pytest.raises(ValueError, match="started_at"):
        JobRef("ns", "n", "u", "e", "t", started_at=datetime(2026, 1, 1))
    with pytest.raises(ValueError, match="trial"):
        JobRef("ns", "n", "u", "e", "")


def test_concurrent_deliveries_of_the_same_snapshots_write_each_once() -> None:
    import threading

    proc, sink, points = _processor()
    bodies = [_status(s // 3, loss=str(s)) for s in range(60)]

    def worker() -> None:
        for body in bodies:
            proc.process(JOB, body)

    threads = [threading.Thread(target=worker) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    # whatever the interleaving, nothing is written twice and the log is in time order
    stamps = [parse_rfc3339(r.timestamp) for r in sink.rows("trial-a") if r.name == SEQ_METRIC]
    assert stamps == sorted(stamps) and len(stamps) == len(set(stamps))
    assert [p.seq for p in points] == list(range(len(points)))


def test_a_log_holding_only_katibs_unavailable_marker_starts_at_seq_zero() -> None:
    sink = MemorySink()
    sink.report("trial-a", [MetricRow("loss", "unavailable", "0001-01-01T00:00:00Z")])
    proc, _, points = _processor(sink)
    assert proc.process(JOB, _status(1)).kind is OutcomeKind.WRITTEN
    assert points[0].seq == 0


def test_lag_is_measured_from_the_trainers_stamp_to_the_write() -> None:
    proc, _, _ = _processor()
    assert proc.counters.observed(LAG) == (0, 0.0)
    old = datetime.now(UTC) - timedelta(seconds=90)
    status = {"lastUpdatedTime": format_rfc3339nano(old), "metrics": [{"name": "loss", "value": "1"}]}
    assert proc.process(JOB, status).kind is OutcomeKind.WRITTEN
    assert proc.process(JOB, status).kind is OutcomeKind.REPEAT  # only new snapshots count
    count, total = proc.counters.observed(LAG)
    assert count == 1
    assert 89.0 <= total < 3600.0  # at least the 90 s the status waited (less its sub-second part)
