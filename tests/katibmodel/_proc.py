"""Child processes that cannot outlive the test: each gets SIGTERM when the thread that started it
ends (Linux ``prctl(PR_SET_PDEATHSIG)``), so a killed test run leaves no pod or collector behind."""

from __future__ import annotations

import ctypes
import signal
import sys

_PR_SET_PDEATHSIG = 1
_LIBC = ctypes.CDLL(None) if sys.platform.startswith("linux") else None


def die_with_parent() -> None:
    """``preexec_fn`` for ``subprocess.Popen`` (runs in the child between fork and exec)."""
    if _LIBC is not None:
        _LIBC.prctl(_PR_SET_PDEATHSIG, signal.SIGTERM)
