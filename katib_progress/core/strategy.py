"""Katib's ``metricStrategies``: how a trial's observation is taken from its metric log.

Katib-free; used by the local sweep (observation from the store), the reports and the benchmarks.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import Literal

Strategy = Literal["min", "max", "latest"]
STRATEGIES: tuple[Strategy, ...] = ("min", "max", "latest")


def apply_strategy(values: Iterable[float], strategy: str) -> float | None:
    """``min``, ``max`` or ``latest`` (the last) of ``values`` given in time order.

    Non-finite values are ignored (they are never written as observation rows); None when no finite
    value is left. Any strategy other than min/max reads as latest, as Katib does.
    """
    finite = [v for v in values if math.isfinite(v)]
    if not finite:
        return None
    if strategy == "min":
        return min(finite)
    if strategy == "max":
        return max(finite)
    return finite[-1]
