"""Signals that stop a sweep cleanly: they become KeyboardInterrupt in the main loop."""

from __future__ import annotations

import logging
import signal
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from types import FrameType

_log = logging.getLogger(__name__)

STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


@contextmanager
def signals_as_interrupt() -> Iterator[None]:
    """SIGINT (Ctrl-C), SIGTERM and SIGHUP (terminal closed) stop the sweep cleanly: trials stopped,
    state kept, the same command resumes."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    fired = False

    def handler(signum: int, frame: FrameType | None) -> None:
        nonlocal fired
        if fired:  # already stopping: trials get SIGKILL after the grace period anyway
            _log.warning("already stopping (signal %d ignored)", signum)
            return
        fired = True
        raise KeyboardInterrupt

    old = {sig: signal.signal(sig, handler) for sig in STOP_SIGNALS}
    try:
        yield
    finally:
        for sig, previous in old.items():
            signal.signal(sig, previous)
