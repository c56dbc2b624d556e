"""Katib observation-log rows built from parsed trainerStatus snapshots.

One distinct snapshot becomes rows that all carry the snapshot's stamp (RFC3339Nano): one per finite
user metric (its original string, unchanged), then the reserved rows below. Reserved names live under
the ``trainjob/`` prefix; a user metric under that prefix is rejected by the parser.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime

from katib_progress.core.sequence import SequenceState
from katib_progress.core.status import (
    ELAPSED_METRIC,
    ETA_METRIC,
    PROGRESS_METRIC,
    RESERVED_PREFIX,
    SEQ_METRIC,
    ParsedSnapshot,
)
from katib_progress.core.timefmt import format_rfc3339nano, parse_rfc3339

__all__ = [
    "ELAPSED_METRIC",
    "ETA_METRIC",
    "PROGRESS_METRIC",
    "RESERVED_PREFIX",
    "SEQ_METRIC",
    "MetricRow",
    "content_digest",
    "format_number",
    "latest_rows",
    "recover_state",
    "snapshot_rows",
]


@dataclass(frozen=True, slots=True)
class MetricRow:
    """One Katib ``MetricLog``: metric name, value string, RFC3339Nano timestamp."""

    name: str
    value: str
    timestamp: str


def format_number(value: float) -> str:
    """A float as a short decimal string Go's ``strconv.ParseFloat`` reads back exactly."""
    if float(value).is_integer():
        return str(int(value))
    return repr(float(value))


def snapshot_rows(
    parsed: ParsedSnapshot, *, stamp: datetime, seq: int, elapsed_s: float | None = None
) -> list[MetricRow]:
    """The rows of one distinct snapshot, all stamped ``stamp``."""
    ts = format_rfc3339nano(stamp)
    rows = [MetricRow(name, text, ts) for name, text in parsed.texts.items()]
    if parsed.progress is not None:
        rows.append(MetricRow(PROGRESS_METRIC, str(parsed.progress), ts))
    if parsed.eta_s is not None:
        rows.append(MetricRow(ETA_METRIC, str(parsed.eta_s), ts))
    if elapsed_s is not None:
        rows.append(MetricRow(ELAPSED_METRIC, format_number(elapsed_s), ts))
    rows.append(MetricRow(SEQ_METRIC, str(seq), ts))
    return rows


def content_digest(rows: Iterable[MetricRow]) -> str:
    """Digest of what a snapshot wrote (names and values, order-free), ignoring stamp and seq.

    Exact duplicates count once: a stock DB manager may hold a snapshot's rows twice (a write that
    committed after its client gave up on it), and the content is still the same."""
    pairs = sorted({(row.name, row.value) for row in rows if row.name != SEQ_METRIC})
    text = "\x1e".join(f"{name}\x1f{value}" for name, value in pairs)
    return hashlib.blake2b(text.encode("utf-8", "surrogatepass"), digest_size=16).hexdigest()


def latest_rows(rows: Iterable[MetricRow]) -> list[MetricRow]:
    """The rows carrying the greatest timestamp (rows with unparseable timestamps are ignored)."""
    best: datetime | None = None
    picked: list[MetricRow] = []
    for row in rows:
        try:
            moment = parse_rfc3339(row.timestamp, field="time_stamp")
        except ValueError:
            continue
        if best is None or moment > best:
            best, picked = moment, [row]
        elif moment == best:
            picked.append(row)
    return picked


def recover_state(rows: Sequence[MetricRow]) -> SequenceState | None:
    """Sequencing state from a trial's latest rows (what a restarted collector already wrote).

    The stamp's second and microsecond offset come from the timestamp; ``seq`` from the
    ``trainjob/seq`` row, or -1 when there is none (rows written by someone else, e.g. Katib's own
    "unavailable" marker), so the collector's first snapshot is still seq 0.
    """
    latest = latest_rows(rows)
    if not latest:
        return None
    moment = parse_rfc3339(latest[0].timestamp, field="time_stamp")
    seq = -1
    for row in latest:
        if row.name == SEQ_METRIC:
            try:
                seq = max(0, int(row.value))
            except ValueError:
                seq = -1
    return SequenceState(
        epoch_second=int(moment.timestamp() // 1),
        offset_us=moment.microsecond,
        seq=seq,
        fingerprint=None,
        content_digest=content_digest(latest),
    )
