"""Logging a repeated condition at most once per interval, with the count of what was held back.

``Every(10.0)`` is shared by all occurrences of one condition (e.g. "buffer full", for every trial):
``suppressed = gate.due()`` returns None while the interval has not passed (log nothing), else the
number of occurrences held back since the last line (log one line that says so).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable


class Every:
    def __init__(self, interval_s: float, clock: Callable[[], float] = time.monotonic) -> None:
        if interval_s < 0:
            raise ValueError(f"interval_s: must be >= 0, got {interval_s}")
        self._interval = interval_s
        self._clock = clock
        self._lock = threading.Lock()
        self._last: float | None = None
        self._held = 0

    def due(self) -> int | None:
        now = self._clock()
        with self._lock:
            if self._last is not None and now - self._last < self._interval:
                self._held += 1
                return None
            held, self._held, self._last = self._held, 0, now
            return held


def held_back(count: int) -> str:
    """Suffix for a rate-limited line: "" or " (and N more like it since the last report)"."""
    return f" (and {count} more like it since the last report)" if count else ""
