"""Stall: the trial's objective has not moved meaningfully over the last window of progress."""

from __future__ import annotations

import bisect
import math

import numpy as np

from katib_progress.core.types import Decision, Verdict
from katib_progress.suggestion.pruning._history import Direction
from katib_progress.suggestion.pruning.policies.base import Policy, PolicyContext


class StallPolicy(Policy):
    """Prune when a straight-line fit of the objective over the last ``window`` percent of progress
    improved by less than ``max(noise * residual_sd, min_rel_improvement * |level|)``.

    The residual standard deviation of that fit is the trial's own noise, so noisy curves need a
    bigger move to count as progress and smooth curves a smaller one. Needs no peers. The current
    leader (best recorded objective by the metric strategy among running and completed trials) is
    never pruned: a converged winner costs little to finish and is the result. A trial with no peers
    leads nothing and can be pruned (the lone-trial case). A trial whose window holds fewer than
    ``min_points`` reports is not judged, and the decision says so.
    """

    name = "stall"

    def __init__(
        self,
        *,
        window: float = 25.0,
        min_progress: float = 40.0,
        min_points: int = 5,
        noise: float = 1.0,
        min_rel_improvement: float = 0.001,
        max_peers: int | None = None,
    ) -> None:
        if not (0 < window <= 100):
            raise ValueError(f"stall window must be within (0, 100] percent, got {window}")
        if not (0 <= min_progress <= 100):
            raise ValueError(f"stall min_progress must be within 0..100, got {min_progress}")
        if min_points < 3:
            raise ValueError(f"stall min_points must be >= 3, got {min_points}")
        if not (math.isfinite(noise) and noise >= 0):
            raise ValueError(f"stall noise multiplier must be >= 0, got {noise}")
        if not (math.isfinite(min_rel_improvement) and min_rel_improvement >= 0):
            raise ValueError(f"stall min_rel_improvement must be >= 0, got {min_rel_improvement}")
        self.window = window
        self.min_progress = min_progress
        self.min_points = min_points
        self.noise = noise
        self.min_rel_improvement = min_rel_improvement
        if max_peers is not None and max_peers < 0:
            raise ValueError(f"stall max_peers must be >= 0 or None, got {max_peers}")
        self.max_peers = max_peers

    def decide(self, ctx: PolicyContext) -> Decision:
        trial = ctx.trial
        p = trial.last_progress
        if p is None or p < self.min_progress or not trial.progress:
            return Decision(Verdict.CONTINUE, "", self.name)
        if self.max_peers is not None:
            # Peers that reached this progress can judge the trial far better than its own plateau
            # (a converged good run also plateaus); leave it to the comparison policies then.
            peers = sum(
                1
                for t in ctx.experiment.peers(trial.name)
                if t.last_progress is not None and t.last_progress >= p
            )
            if peers > self.max_peers:
                return Decision(Verdict.CONTINUE, "", self.name)
        start = p - self.window
        if trial.progress[0] > start:
            return Decision(Verdict.CONTINUE, "", self.name)
        lo = bisect.bisect_left(trial.progress, start)
        x = np.asarray(trial.progress[lo:])
        y = np.asarray(trial.values[lo:])
        if len(x) < self.min_points or x[-1] - x[0] <= 0:
            return Decision(
                Verdict.CONTINUE,
                f"not judged: {len(x)} reports in the last {self.window:g}% of progress, "
                f"stall_min_points is {self.min_points}",
                self.name,
            )
        xc, yc = x - x.mean(), y - y.mean()
        slope = float(xc @ yc) / float(xc @ xc)
        residual = yc - slope * xc
        residual_sd = math.sqrt(float(residual @ residual) / (len(x) - 2))
        sign = -1.0 if ctx.direction is Direction.MINIMIZE else 1.0
        improvement = float(sign * slope * self.window)
        level = float(np.mean(y))
        needed = max(self.noise * residual_sd, self.min_rel_improvement * abs(level))
        evidence: dict[str, float | str] = {
            "improvement": improvement,
            "needed": needed,
            "noise_sd": residual_sd,
            "window": self.window,
            "points": float(len(x)),
        }
        if improvement >= needed:
            return Decision(Verdict.CONTINUE, "", self.name, evidence)
        if ctx.experiment.leads(trial):
            return Decision(Verdict.CONTINUE, "stalled but leading; spared", self.name, evidence)
        return Decision(
            Verdict.PRUNE,
            f"{ctx.objective} improved by {improvement:.3g} over the last {self.window:g}% of progress "
            f"(up to {p:.0f}%), less than the {needed:.3g} needed (noise sd {residual_sd:.3g}): stalled",
            self.name,
            evidence,
        )
