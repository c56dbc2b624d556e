"""The port the collector writes observation rows through (an in-memory fake for tests:
``katib_progress.collector.testing.MemorySink``).

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

from collections.abc import Sequence
from typing import Protocol, runtime_checkable

from katib_progress.collector.rows import MetricRow


@runtime_checkable
class ObservationSink(Protocol):
    def report(self, trial: str, rows: Sequence[MetricRow]) -> None: ...

    def latest(self, trial: str) -> list[MetricRow]: ...

    def flush(self, timeout: float) -> bool: ...

    def close(self) -> None: ...
