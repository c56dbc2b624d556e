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
- ``delete(trial)`` removes the trial's rows for good: what is queued for it is dropped, a write of it
  in flight is waited for (and, where its outcome is unknown, the time it may still commit), then the
  stored log is deleted (Katib's ``DeleteObservationLog``). Once it returns, nothing this sink was
  given for ``trial`` can still reach the store. May raise ``TemporaryError``.
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

    def delete(self, trial: str) -> None: ...

    def close(self) -> None: ...
