"""Property-based fuzzing of the trainerStatus parser and the snapshot pipeline (hypothesis).

Two profiles of the same properties: a short one in the fast suite, and a long one marked ``slow``
(``make test-slow``; ``KP_FUZZ_EXAMPLES`` sets its size: default 20,000 statuses, and a quarter as
many streams of up to 12 snapshots).

Properties:
1. ``parse_trainer_status`` returns a ``ParsedSnapshot`` or raises ``StatusError``; nothing else.
2. Every metrics entry is accounted for exactly once: kept (``values``) or rejected with a reason.
3. Every kept text is a plain ASCII decimal that Go's ``strconv.ParseFloat`` reads, finite, equal
   to its value; every written row encodes as UTF-8 (protobuf strings).
4. The input is never mutated; the fingerprint is a pure function of the content.
5. What the strict CRD model accepts never yields a type/limit rejection from the lenient parser.
6. ``SnapshotProcessor`` over an arbitrary stream of one job never raises; written seqs are
   0, 1, 2, ... and the stamps of written snapshots strictly increase.
"""

from __future__ import annotations

import copy
import itertools
import math
import os
import re
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

from katib_progress.collector.pipeline import JobRef, OutcomeKind, SnapshotProcessor
from katib_progress.collector.rows import snapshot_rows
from katib_progress.collector.testing import MemorySink
from katib_progress.core.status import (
    ParsedSnapshot,
    RejectReason,
    StatusError,
    TrainerStatus,
    parse_trainer_status,
)
from tests.fuzz._strategies import stream_statuses, trainer_statuses

# Go's strconv.ParseFloat decimal syntax (no hex, no underscores, no inf/nan), written independently.
GO_DECIMAL = re.compile(r"^[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?$", re.ASCII)
LONG = int(os.environ.get("KP_FUZZ_EXAMPLES", "20000"))
FAST = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
SLOW = settings(max_examples=LONG, deadline=None, suppress_health_check=list(HealthCheck))
SLOW_STREAMS = settings(SLOW, max_examples=max(1, LONG // 4))  # a stream is up to 12 snapshots
TYPE_OR_LIMIT = {
    RejectReason.WRONG_TYPE,
    RejectReason.INVALID_NAME,
    RejectReason.INVALID_ENTRY,
    RejectReason.TOO_MANY,
    RejectReason.TOO_LONG,
    RejectReason.EMPTY,
}


def check_parser(raw: Any) -> None:
    before = copy.deepcopy(raw)
    try:
        parsed = parse_trainer_status(raw)
    except StatusError:
        assert repr(raw) == repr(before)  # never mutated
        return
    assert isinstance(parsed, ParsedSnapshot)
    assert repr(raw) == repr(before)  # never mutated

    # 2. accounting, without the optional integer fields' own rejections
    metrics_only = parse_trainer_status(
        {k: v for k, v in raw.items() if k not in ("progressPercentage", "estimatedRemainingSeconds")}
    )
    metrics = raw.get("metrics")
    if isinstance(metrics, list | tuple):
        assert len(metrics_only.values) + len(metrics_only.rejections) == len(metrics)
    else:
        assert not metrics_only.values and len(metrics_only.rejections) == (0 if metrics is None else 1)
    assert set(parsed.non_finite) <= {
        r.name for r in parsed.rejections if r.reason is RejectReason.NON_FINITE
    }

    # 3. kept values
    assert set(parsed.texts) == set(parsed.values)
    for name, text in parsed.texts.items():
        assert GO_DECIMAL.match(text), text
        assert math.isfinite(parsed.values[name]) and float(text) == parsed.values[name]
    for row in snapshot_rows(parsed, stamp=parsed.last_updated, seq=0):
        row.name.encode("utf-8")
        row.value.encode("utf-8")
    if parsed.progress is not None:
        assert 0 <= parsed.progress <= 100
    if parsed.eta_s is not None:
        assert 0 <= parsed.eta_s <= 2**31 - 1

    # 4. pure fingerprint
    assert parse_trainer_status(copy.deepcopy(raw)).fingerprint == parsed.fingerprint

    # 5. strict model vs lenient parser
    try:
        TrainerStatus.model_validate(raw)
    except ValidationError:
        return
    assert not {r.reason for r in parsed.rejections} & TYPE_OR_LIMIT, parsed.rejections
    assert parsed.progress == raw.get("progressPercentage")


def check_stream(statuses: list[Any]) -> None:
    sink = MemorySink()
    processor = SnapshotProcessor(sink)
    job = JobRef("ns", "job", "uid-1", "exp", "trial")
    seqs: list[int] = []
    stamps = []
    for status in statuses:
        outcome = processor.process(job, status)
        if outcome.kind is OutcomeKind.WRITTEN:
            assert outcome.point is not None
            seqs.append(outcome.seq or 0)
            stamps.append(outcome.point.timestamp)
    assert seqs == list(range(len(seqs)))
    assert all(a < b for a, b in itertools.pairwise(stamps))
    assert len({r.timestamp for r in sink.rows("trial")}) == len(seqs)


@st.composite
def streams(draw: st.DrawFn) -> list[Any]:
    seconds = draw(st.lists(st.integers(0, 30), min_size=1, max_size=12))
    out: list[Any] = []
    for second in seconds:
        if draw(st.integers(0, 7)) == 0:
            out.append(draw(trainer_statuses()))  # garbage in the middle of a good stream
        elif out and draw(st.integers(0, 4)) == 0:
            out.append(copy.deepcopy(out[-1]))  # a re-delivery
        else:
            out.append(draw(stream_statuses(second)))
    return out


@FAST
@given(trainer_statuses())
def test_parser_properties(raw: Any) -> None:
    check_parser(raw)


@FAST
@given(streams())
def test_pipeline_stream_properties(statuses: list[Any]) -> None:
    check_stream(statuses)


@pytest.mark.slow
@pytest.mark.timeout(3600)
@SLOW
@given(trainer_statuses())
def test_parser_properties_long(raw: Any) -> None:
    check_parser(raw)


@pytest.mark.slow
@pytest.mark.timeout(3600)
@SLOW_STREAMS
@given(streams())
def test_pipeline_stream_properties_long(statuses: list[Any]) -> None:
    check_stream(statuses)
