"""Test doubles of the collector's ports (not used by the collector itself)."""

from __future__ import annotations

import threading
from collections.abc import Sequence

from katib_progress.collector.rows import MetricRow, latest_rows
from katib_progress.core.errors import KatibProgressError


class MemorySink:
    """In-memory sink; ``fail_with`` makes the next calls raise (for tests of refusal paths)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._rows: dict[str, list[MetricRow]] = {}
        self.fail_with: KatibProgressError | None = None

    def report(self, trial: str, rows: Sequence[MetricRow]) -> None:
        if not trial:
            raise ValueError("trial: must not be empty")
        with self._lock:
            if self.fail_with is not None:
                raise self.fail_with
            self._rows.setdefault(trial, []).extend(rows)

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

    def delete(self, trial: str) -> None:
        with self._lock:
            if self.fail_with is not None:
                raise self.fail_with
            self._rows.pop(trial, None)

    def close(self) -> None:
        return None
