"""Plain domain types shared by the collector, the pruning policies and the local sweep.

These are the seams between components; they carry no Katib or Kubernetes types.
"""

from __future__ import annotations

import enum
import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from types import MappingProxyType


@dataclass(frozen=True, slots=True)
class ProgressPoint:
    """One live progress observation of one trial, as the pruning side sees it.

    ``metrics`` holds every metric the snapshot reported that parsed as a number, including
    non-finite ones ("nan", "inf"): divergence detection needs them even though they are never
    written as observation rows. ``seq`` increases by one per distinct snapshot of the trial and is
    what makes repeated delivery of the same point idempotent.
    """

    experiment: str
    trial: str
    seq: int
    timestamp: datetime
    progress: float | None = None
    elapsed_s: float | None = None
    eta_s: float | None = None
    metrics: Mapping[str, float] = field(default_factory=lambda: MappingProxyType({}))

    def __post_init__(self) -> None:
        if self.seq < 0:
            raise ValueError(f"seq must be >= 0, got {self.seq}")
        if self.progress is not None and not (0.0 <= self.progress <= 100.0):
            raise ValueError(f"progress must be within 0..100, got {self.progress}")
        if self.eta_s is not None and (math.isnan(self.eta_s) or self.eta_s < 0):
            raise ValueError(f"eta_s must be >= 0, got {self.eta_s}")
        if self.elapsed_s is not None and (math.isnan(self.elapsed_s) or self.elapsed_s < 0):
            raise ValueError(f"elapsed_s must be >= 0, got {self.elapsed_s}")
        # Freeze the caller's mapping by copy so later mutation on their side changes nothing here.
        object.__setattr__(self, "metrics", MappingProxyType(dict(self.metrics)))


class Verdict(enum.Enum):
    CONTINUE = "CONTINUE"
    PRUNE = "PRUNE"


@dataclass(frozen=True, slots=True)
class Decision:
    """A pruning verdict with a human-readable reason and the evidence behind it."""

    verdict: Verdict
    reason: str = ""
    policy: str = ""
    evidence: Mapping[str, float | str] = field(default_factory=lambda: MappingProxyType({}))

    @classmethod
    def cont(cls, reason: str = "", policy: str = "") -> Decision:
        return cls(Verdict.CONTINUE, reason, policy)

    @property
    def prune(self) -> bool:
        return self.verdict is Verdict.PRUNE
