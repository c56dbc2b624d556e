"""Budget: honour an experiment wall-clock deadline and a GPU-hour budget."""

from __future__ import annotations

import math
from datetime import datetime, timedelta

from katib_progress.core.types import Decision, Verdict
from katib_progress.suggestion.pruning.policies.base import Policy, PolicyContext


class BudgetPolicy(Policy):
    """Prune every trial once the deadline has passed or the GPU-hour budget is spent.

    Before that, a trial that cannot finish in time is stopped early unless it leads the experiment:
    one whose ETA ends after the deadline, or, when the running trials' projected total exceeds the
    GPU budget, the running trial with the largest remaining cost. "Now" is the point's timestamp, so a
    replay decides as the live run would have. GPU time is ``elapsed_s * gpus_per_trial`` summed over
    every trial seen.
    """

    name = "budget"

    def __init__(
        self,
        *,
        deadline: datetime | None = None,
        gpu_hours: float | None = None,
        gpus_per_trial: float = 1.0,
    ) -> None:
        if deadline is not None and deadline.tzinfo is None:
            raise ValueError(f"deadline must carry a timezone, got {deadline.isoformat()}")
        if gpu_hours is not None and not (math.isfinite(gpu_hours) and gpu_hours > 0):
            raise ValueError(f"gpu_hour_budget must be > 0, got {gpu_hours}")
        if not (math.isfinite(gpus_per_trial) and gpus_per_trial > 0):
            raise ValueError(f"gpus_per_trial must be > 0, got {gpus_per_trial}")
        self.deadline = deadline
        self.gpu_hours = gpu_hours
        self.gpus_per_trial = gpus_per_trial

    def decide(self, ctx: PolicyContext) -> Decision:
        now, eta = ctx.now, ctx.trial.eta_s
        if self.deadline is not None:
            if now >= self.deadline:
                return Decision(
                    Verdict.PRUNE,
                    f"experiment deadline {self.deadline.isoformat()} has passed",
                    self.name,
                    {"deadline": self.deadline.isoformat()},
                )
            if eta is not None and now + timedelta(seconds=eta) > self.deadline and not self._leads(ctx):
                left = (self.deadline - now).total_seconds()
                return Decision(
                    Verdict.PRUNE,
                    f"ETA {eta:.0f}s exceeds the {left:.0f}s left before the deadline "
                    f"{self.deadline.isoformat()} and the trial does not lead",
                    self.name,
                    {"eta_s": eta, "deadline_left_s": left},
                )
        if self.gpu_hours is not None:
            used = ctx.experiment.gpu_seconds(self.gpus_per_trial) / 3600.0
            if used >= self.gpu_hours:
                return Decision(
                    Verdict.PRUNE,
                    f"GPU-hour budget {self.gpu_hours:g} is spent ({used:.2f} GPU-h used)",
                    self.name,
                    {"gpu_hours_used": used, "gpu_hour_budget": self.gpu_hours},
                )
            running = [t for t in ctx.experiment.trials.values() if not t.state.finished]
            ahead = sum((t.eta_s or 0.0) for t in running) * self.gpus_per_trial / 3600.0
            costliest = max(running, key=lambda t: t.eta_s or 0.0, default=None)
            if used + ahead > self.gpu_hours and costliest is ctx.trial and eta and not self._leads(ctx):
                return Decision(
                    Verdict.PRUNE,
                    f"running trials need {ahead:.2f} more GPU-h but only {self.gpu_hours - used:.2f} of "
                    f"the {self.gpu_hours:g} budget remain; this trial has the largest remaining cost",
                    self.name,
                    {"gpu_hours_used": used, "gpu_hours_ahead": ahead, "gpu_hour_budget": self.gpu_hours},
                )
        return Decision(Verdict.CONTINUE, "", self.name)

    def _leads(self, ctx: PolicyContext) -> bool:
        other = ctx.experiment.best_other(ctx.trial.name)
        mine = ctx.trial.recorded(ctx.experiment.strategy)
        if mine is None:
            return False
        return other is None or not ctx.direction.better(other[0], mine)
