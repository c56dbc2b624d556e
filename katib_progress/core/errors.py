"""Error hierarchy shared by every component (kopf-style: temporary vs permanent).

- ``TemporaryError``: worth retrying with backoff (peer unavailable, timeout, 5xx, 410 re-list).
- ``PermanentError``: retrying cannot help (invalid input, invalid configuration).
- ``ConfigError``: a configuration value is invalid; ``field`` names it.
"""

from __future__ import annotations


class KatibProgressError(Exception):
    """Root of every error this project raises on purpose."""


class TemporaryError(KatibProgressError):
    """A failure that may succeed if retried later.

    ``delay`` is the wait the peer itself asked for (a Kubernetes ``Retry-After``). Every backoff of
    the collector (watcher, pruning forwarder, final-metrics marker) takes it as a lower bound, up to
    its cap (``katib_progress.collector.backoff.retry_hint``); the fixed-period loops (leader
    election, watchdog scan, the controller's re-delivery) simply try again at their next period.
    """

    def __init__(self, message: str, *, delay: float | None = None) -> None:
        super().__init__(message)
        self.delay = delay


class PermanentError(KatibProgressError):
    """A failure that retrying cannot fix."""


class ConfigError(PermanentError, ValueError):
    """An invalid configuration value; ``field`` names the offending setting."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(f"{field}: {message}")
        self.field = field
        self.detail = message
