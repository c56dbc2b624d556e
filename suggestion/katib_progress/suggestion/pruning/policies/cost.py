"""Cost guard: let nearly finished trials finish and skip prunes that would save too little."""

from __future__ import annotations

import math

from katib_progress.core.types import Decision, Verdict
from katib_progress.suggestion.pruning.policies.base import Policy, PolicyContext


class CostGuard(Policy):
    """Wraps a policy and vetoes its PRUNE when the trial is at or above ``max_prune_progress`` percent
    or its ETA is below ``min_remaining_s`` seconds (stopping it would free almost nothing).
    Divergence should sit outside the guard so a diverged trial is always stopped.
    """

    name = "cost_guard"

    def __init__(
        self, inner: Policy, *, max_prune_progress: float = 90.0, min_remaining_s: float = 0.0
    ) -> None:
        if not (0 <= max_prune_progress <= 100):
            raise ValueError(f"max_prune_progress must be within 0..100, got {max_prune_progress}")
        if not (math.isfinite(min_remaining_s) and min_remaining_s >= 0):
            raise ValueError(f"min_remaining_s must be >= 0, got {min_remaining_s}")
        self.inner = inner
        self.max_prune_progress = max_prune_progress
        self.min_remaining_s = min_remaining_s

    def decide(self, ctx: PolicyContext) -> Decision:
        decision = self.inner.decide(ctx)
        if not decision.prune:
            return decision
        p, eta = ctx.progress, ctx.trial.eta_s
        if p is not None and p >= self.max_prune_progress:
            why = f"it is at {p:.0f}% >= max_prune_progress {self.max_prune_progress:g}%"
        elif eta is not None and eta < self.min_remaining_s:
            why = f"only {eta:.0f}s remain (< min_remaining_s {self.min_remaining_s:g}s)"
        else:
            return decision
        evidence = dict(decision.evidence)
        evidence["vetoed"] = decision.policy
        return Decision(
            Verdict.CONTINUE,
            f"not pruned although {decision.policy} would ({decision.reason}): {why}; let it finish",
            self.name,
            evidence,
        )

    def describe(self) -> str:
        return f"cost_guard({self.inner.describe()})"
