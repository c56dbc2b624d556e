"""The policy contract: an abstract base class with one decision method, ``decide(ctx) -> Decision``.

Policies hold no experiment state: everything they judge by is in the engine's history (``ctx``), so a
restarted engine that rebuilds its history from stored observations decides as before. What a policy
may keep is a cache derived from that history (a fitted curve, an Optuna study mirroring it).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

from katib_progress.core.types import Decision, ProgressPoint, Verdict
from katib_progress.suggestion.pruning._history import Direction, ExperimentState, TrialHistory


@dataclass(frozen=True, slots=True)
class PolicyContext:
    """What a policy sees for one progress point: the point, its trial's curve and every peer.

    The histories are the engine's own (already updated with ``point``); policies must not mutate them.
    """

    point: ProgressPoint
    trial: TrialHistory
    experiment: ExperimentState
    objective: str
    direction: Direction
    now: datetime

    @property
    def progress(self) -> float | None:
        return self.trial.last_progress


class Policy(ABC):
    """Base class of every pruning policy.

    Subclasses implement :meth:`decide`; validation of their settings happens in ``__init__`` and
    raises ``ValueError`` naming the offending value.
    """

    name = "policy"

    @abstractmethod
    def decide(self, ctx: PolicyContext) -> Decision:
        """CONTINUE or PRUNE ``ctx.trial`` at ``ctx.point``, with a reason a person can read."""

    def describe(self) -> str:
        return self.name


class NopPolicy(Policy):
    """Never prunes."""

    name = "nop"

    def decide(self, ctx: PolicyContext) -> Decision:
        return Decision(Verdict.CONTINUE, "no pruning policy configured", self.name)


class AnyOf(Policy):
    """Prunes as soon as any member prunes (members are asked in order; the first PRUNE wins)."""

    name = "any_of"

    def __init__(self, policies: Sequence[Policy]) -> None:
        if not policies:
            raise ValueError("AnyOf needs at least one policy, got an empty list")
        self.policies: tuple[Policy, ...] = tuple(policies)

    def decide(self, ctx: PolicyContext) -> Decision:
        reasons: list[str] = []
        evidence: dict[str, float | str] = {}
        for policy in self.policies:
            decision = policy.decide(ctx)
            if decision.prune:
                return decision
            if decision.reason:
                reasons.append(f"{decision.policy or policy.name}: {decision.reason}")
            for key, value in decision.evidence.items():
                evidence[f"{decision.policy or policy.name}.{key}"] = value
        return Decision(Verdict.CONTINUE, "; ".join(reasons), self.describe(), evidence)

    def describe(self) -> str:
        return "any_of(" + ",".join(p.describe() for p in self.policies) + ")"
