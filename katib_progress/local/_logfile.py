"""``sweep.log``: service logs of a sweep go to its work directory, not the terminal.

The console is quieted from the start (the services start before the work directory may be touched);
records logged before the work directory exists are kept in memory and written first to ``sweep.log``.
"""

from __future__ import annotations

import logging
import logging.handlers
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

_FORMAT = "%(asctime)s %(levelname)-7s %(name)s: %(message)s"


class SweepLog:
    """Collects service logs; ``attach(path)`` starts writing them (earlier ones first) to ``path``."""

    def __init__(self, root: logging.Logger) -> None:
        self._root = root
        self._early = logging.handlers.MemoryHandler(capacity=100_000, flushLevel=logging.CRITICAL + 1)
        self._early.setLevel(logging.INFO)
        self._file: logging.FileHandler | None = None
        root.addHandler(self._early)

    def attach(self, path: Path) -> None:
        self._file = logging.FileHandler(path, encoding="utf-8")
        self._file.setFormatter(logging.Formatter(_FORMAT))
        self._file.setLevel(logging.INFO)
        self._early.setTarget(self._file)
        self._early.flush()
        self._root.removeHandler(self._early)
        self._early.close()
        self._root.addHandler(self._file)

    def close(self) -> None:
        for handler in (self._early, self._file):
            if handler is not None:
                self._root.removeHandler(handler)
                handler.close()


@contextmanager
def sweep_logging(*, quiet_console: bool) -> Iterator[SweepLog]:
    """Service logs for ``sweep.log``; the terminal keeps the view (and errors) unless ``quiet_console``
    is False (a log level was asked for explicitly with ``--log-level``)."""
    root = logging.getLogger()
    saved = [(h, h.level) for h in root.handlers]
    if quiet_console:
        for h, level in saved:
            h.setLevel(max(level, logging.ERROR))
    old_level = root.level
    root.setLevel(min(old_level or logging.INFO, logging.INFO))
    log = SweepLog(root)
    try:
        yield log
    finally:
        log.close()
        root.setLevel(old_level)
        for h, level in saved:
            h.setLevel(level)
