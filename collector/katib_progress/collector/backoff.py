"""The collector's one retry policy: exponential backoff with jitter, capped.

Every retry loop of the collector (the TrainJob watcher, the DB manager client, the pruning
forwarder's circuit breaker and enforcement, the final-metrics marker) draws its delays from here:
``initial_s * factor**n``, capped at ``max_s``, then spread by +/- ``jitter`` so many clients do not
retry in step. A peer's own hint (``TemporaryError.delay``, e.g. a Kubernetes ``Retry-After``) is
honoured as ``at_least``, up to ``max_s``.
"""

from __future__ import annotations

import math
import random

from pydantic import BaseModel, ConfigDict, Field, model_validator

from katib_progress.core.errors import TemporaryError


def retry_hint(error: BaseException) -> float | None:
    """The wait the failing peer asked for (``TemporaryError.delay``, e.g. Retry-After), if any."""
    return error.delay if isinstance(error, TemporaryError) else None


class BackoffSettings(BaseModel):
    """Delays between retries: ``initial_s * factor**n``, capped at ``max_s``, +/- ``jitter``."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    initial_s: float = Field(default=0.5, gt=0)
    max_s: float = Field(default=30.0, gt=0)
    factor: float = Field(default=2.0, ge=1.0)
    jitter: float = Field(default=0.2, ge=0.0, le=1.0, description="relative spread, 0.2 = +/-20%")

    @model_validator(mode="after")
    def _ordered(self) -> BackoffSettings:
        if self.max_s < self.initial_s:
            raise ValueError(f"max_s: must be >= initial_s ({self.initial_s}), got {self.max_s}")
        return self

    def delay(self, attempt: int, rng: random.Random, at_least: float | None = None) -> float:
        """The wait after failed attempt number ``attempt`` (0 = the first failure)."""
        # Grow only until the cap is reached: factor**attempt overflows a float after ~1000 failures.
        steps = attempt
        if self.factor > 1.0:
            steps = min(attempt, math.ceil(math.log(self.max_s / self.initial_s, self.factor)) + 1)
        base = min(self.max_s, self.initial_s * self.factor**steps)
        delay = base * (1.0 + rng.uniform(-self.jitter, self.jitter))
        if at_least is not None:
            delay = max(delay, min(at_least, self.max_s))
        return max(0.0, delay)


class Backoff:
    """Stateful delay sequence; ``reset()`` after a success."""

    def __init__(self, settings: BackoffSettings, rng: random.Random | None = None) -> None:
        self._settings = settings
        self._rng = rng or random.Random()
        self._attempt = 0

    @property
    def attempts(self) -> int:
        return self._attempt

    def reset(self) -> None:
        self._attempt = 0

    def next_delay(self, at_least: float | None = None) -> float:
        delay = self._settings.delay(self._attempt, self._rng, at_least)
        self._attempt += 1
        return delay
