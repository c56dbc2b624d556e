"""``sweep.log``: service logs of a sweep go to its work directory, not the terminal."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path


@contextmanager
def log_to_file(path: Path, *, quiet_console: bool) -> Iterator[None]:
    """Service logs go to ``path``; the terminal keeps the view (and errors) unless ``quiet_console``
    is False (a log level was asked for explicitly with ``--log-level``)."""
    root = logging.getLogger()
    handler = logging.FileHandler(path, encoding="utf-8")
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)-7s %(name)s: %(message)s"))
    handler.setLevel(logging.INFO)
    saved = [(h, h.level) for h in root.handlers]
    if quiet_console:
        for h, level in saved:
            h.setLevel(max(level, logging.ERROR))
    old_level = root.level
    root.setLevel(min(old_level or logging.INFO, logging.INFO))
    root.addHandler(handler)
    try:
        yield
    finally:
        root.removeHandler(handler)
        handler.close()
        root.setLevel(old_level)
        for h, level in saved:
            h.setLevel(level)
