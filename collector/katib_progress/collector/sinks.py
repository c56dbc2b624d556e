"""The port the collector writes observation rows through, and an in-memory fake.

Contract of ``ObservationSink``:

- ``report(trial, rows)`` accepts the rows of one snapshot (all or nothing). Returning means the
  sink has taken responsibility for them (written, or queued for in-order delivery). It raises
  ``TemporaryError`` when it cannot take them now (e.g. its buffer is full): the caller must NOT
  treat the snapshot as written, and retries it later. ``PermanentError`` means the rows are invalid.
- ``latest(trial)`` returns the trial's rows at its greatest timestamp (including rows still queued),
  which is how a restarted collector learns what it already wrote. May raise ``TemporaryError``.
- ``flush(timeout)`` waits until queued rows are delivered; True when nothing is left.
- ``close()`` releases resources.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from typing import Protocol, runtime_checkable

from katib_progress.collector.rows import MetricRow, latest_rows
from katib_progress.core.errors import KatibProgressError


@runtime_checkable
class ObservationSink(Protocol):
    def report(self, trial: str, rows: Sequence[MetricRow]) -> None: ...

    def latest(self, trial: str) -> list[MetricRow]: ...

    def flush(self, timeout: float) -> bool: ...

    def close(self) -> None: ...


class MemorySink:
    """In-memory sink; ``fail_with`` makes the next calls raise (for tests of refusal paths)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._rows: dict[str, list[MetricRow]] = {}
        self.fail_with: KatibProgressError | None = None
        self.reports = 0

    def report(self, trial: str, rows: Sequence[MetricRow]) -> None:
        if not trial:
            raise ValueError("trial: must not be empty")
        with self._lock:
            if self.fail_with is not None:
                raise self.fail_with
            self._rows.setdefault(trial, []).extend(rows)
            self.reports += 1

    def latest(self, trial: str) -> list[MetricRow]:
        with self._lock:
            if self.fail_with is not None:
                raise self.fail_with
            return latest_rows(self._rows.get(trial, ()))

    def rows(self, trial: str) -> list[MetricRow]:
        """Every row of ``trial`` in the order reported."""
        with self._lock:
            return list(self._rows.get(trial, ()))

    def trials(self) -> list[str]:
        with self._lock:
            return sorted(self._rows)

    def flush(self, timeout: float) -> bool:
        return True

    def close(self) -> None:
        return None
