"""Divergence: a non-finite objective (or watched metric) or an exploding objective prunes at once."""

from __future__ import annotations

import math
from collections.abc import Sequence

from katib_progress.core.types import Decision, Verdict
from katib_progress.suggestion.pruning._history import Direction
from katib_progress.suggestion.pruning.policies.base import Policy, PolicyContext


class DivergencePolicy(Policy):
    """Prune when the objective or any ``watch`` metric is NaN/Inf, or when the objective has moved
    in the bad direction past ``factor`` times its starting magnitude:
    ``value > start + (factor - 1) * max(|start|, floor)`` when minimizing (mirrored when maximizing).
    """

    name = "divergence"

    def __init__(self, *, factor: float = 3.0, watch: Sequence[str] = ("loss",), floor: float = 1e-8) -> None:
        if not (math.isfinite(factor) and factor > 1.0):
            raise ValueError(f"divergence factor must be a finite number > 1, got {factor}")
        if not (math.isfinite(floor) and floor > 0):
            raise ValueError(f"divergence floor must be > 0, got {floor}")
        self.factor = factor
        self.watch = tuple(watch)
        self.floor = floor

    def decide(self, ctx: PolicyContext) -> Decision:
        metrics = ctx.point.metrics
        for name in (ctx.objective, *self.watch):
            value = metrics.get(name)
            if value is not None and not math.isfinite(value):
                at = "" if ctx.progress is None else f" at {ctx.progress:.0f}%"
                return Decision(
                    Verdict.PRUNE,
                    f"{name} is {value}{at}: the trial diverged",
                    self.name,
                    {"metric": name, "value": str(value)},
                )
        start, value = ctx.trial.first_value, metrics.get(ctx.objective)
        if start is None or value is None:
            return Decision(Verdict.CONTINUE, "", self.name)
        span = (self.factor - 1.0) * max(abs(start), self.floor)
        if ctx.direction is Direction.MINIMIZE:
            limit, exploded = start + span, value > start + span
        else:
            limit, exploded = start - span, value < start - span
        if exploded:
            return Decision(
                Verdict.PRUNE,
                f"{ctx.objective} {value:.4g} exploded past {limit:.4g} "
                f"({self.factor:g}x its starting value {start:.4g}): the trial diverged",
                self.name,
                {"value": value, "start": start, "limit": limit},
            )
        return Decision(Verdict.CONTINUE, "", self.name)
