"""Per-job sequencing of trainerStatus snapshots: new, repeat or stale, and the sub-second stamp.

``lastUpdatedTime`` has one-second precision, so a snapshot is identified by (second, content):

- a later second is a NEW snapshot (offset 0 within that second);
- the same second and the same content as the LAST accepted snapshot is a REPEAT (re-delivery
  after a re-list, a resync or a restart) and writes nothing;
- the same second with different content is a NEW snapshot stamped ``second + k µs`` where ``k``
  counts the distinct snapshots already accepted in that second, so the log keeps their true order
  (Katib's ``latest`` strategy picks by timestamp; whole microseconds survive MySQL DATETIME(6));
- an earlier second is STALE and writes nothing (it would reorder the log).

The planner never mutates: ``plan`` returns a ``Step`` and ``commit`` records it only once the
caller's sink accepted the rows, so a refused write is retried by the next delivery.
"""

from __future__ import annotations

import enum
from collections.abc import Hashable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Generic, TypeVar

MAX_OFFSET_US = 999_999

K = TypeVar("K", bound=Hashable)


class StepKind(enum.StrEnum):
    NEW = "new"
    REPEAT = "repeat"
    STALE = "stale"
    SECOND_FULL = "second_full"  # a millionth distinct snapshot within one second


@dataclass(frozen=True, slots=True)
class SequenceState:
    """What is remembered per job: the last accepted snapshot.

    ``fingerprint`` is the full content digest (None when the state was recovered from the sink's rows,
    which only hold what was written); ``content_digest`` digests the written rows' content.
    """

    epoch_second: int
    offset_us: int
    seq: int
    fingerprint: str | None
    content_digest: str | None

    @property
    def stamp(self) -> datetime:
        return stamp_for(self.epoch_second, self.offset_us)


@dataclass(frozen=True, slots=True)
class Step:
    kind: StepKind
    seq: int
    stamp: datetime
    state: SequenceState | None  # the state to commit (NEW only)


def stamp_for(epoch_second: int, offset_us: int) -> datetime:
    return datetime.fromtimestamp(epoch_second, UTC) + timedelta(microseconds=offset_us)


def _epoch_second(moment: datetime) -> int:
    if moment.tzinfo is None:
        raise ValueError(f"last_updated: naive datetime {moment!r} has no zone")
    return int(moment.timestamp() // 1)


class SnapshotSequencer(Generic[K]):
    """Sequencing state of many jobs, keyed by any hashable (not thread-safe: callers lock)."""

    def __init__(self) -> None:
        self._states: dict[K, SequenceState] = {}

    def __len__(self) -> int:
        return len(self._states)

    def __contains__(self, key: object) -> bool:
        return key in self._states

    def get(self, key: K) -> SequenceState | None:
        return self._states.get(key)

    def seed(self, key: K, state: SequenceState) -> None:
        """Install a state recovered from elsewhere (e.g. the sink's latest rows after a restart)."""
        self._states[key] = state

    def forget(self, key: K) -> None:
        self._states.pop(key, None)

    def plan(
        self, key: K, last_updated: datetime, fingerprint: str, content_digest: str | None = None
    ) -> Step:
        second = _epoch_second(last_updated)
        state = self._states.get(key)
        if state is None or second > state.epoch_second:
            seq = 0 if state is None else state.seq + 1
            new = SequenceState(second, 0, seq, fingerprint, content_digest)
            return Step(StepKind.NEW, seq, new.stamp, new)
        if second < state.epoch_second:
            return Step(StepKind.STALE, state.seq, state.stamp, None)
        same = (
            fingerprint == state.fingerprint
            if state.fingerprint is not None
            else content_digest is not None and content_digest == state.content_digest
        )
        if same:
            return Step(StepKind.REPEAT, state.seq, state.stamp, None)
        if state.offset_us >= MAX_OFFSET_US:
            return Step(StepKind.SECOND_FULL, state.seq, state.stamp, None)
        new = SequenceState(second, state.offset_us + 1, state.seq + 1, fingerprint, content_digest)
        return Step(StepKind.NEW, new.seq, new.stamp, new)

    def commit(self, key: K, step: Step) -> None:
        if step.kind is StepKind.NEW and step.state is not None:
            self._states[key] = step.state
