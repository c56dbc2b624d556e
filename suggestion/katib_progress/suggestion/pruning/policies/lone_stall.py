"""Lone stall: a trial with no peers whose fitted saturating curve leaves too little improvement ahead.

Acts only while the experiment holds no other trial (running, completed, pruned or failed): a lone
run has nothing to be compared with, so its own curve is the only evidence. As soon as the engine
knows a peer, the comparison policies decide and this one abstains.

The curve judged is the trial's running best (oriented so that larger is better, normalised so that
the improvement so far is 1). Two saturating families are fitted to it by least squares over a fixed
grid of rates (deterministic, no optimiser): exponential ``a - b * exp(-c * p)`` and power law
``a - b * (p + 1) ** -c`` (``b >= 0``; ``p`` = progress percent). For each family the predicted
improvement still ahead is ``fit(100) - max(fit(p), current)``, plus ``noise`` times the fit's residual
standard deviation (a staircase or noisy curve that a smooth curve fits badly gets a wide margin).
The trial is pruned when the largest of these upper bounds is at most ``max_remaining`` of the
improvement so far.

The leader rule (the current leader is never pruned by stall) holds: ``ExperimentState.leads`` is
false for a trial without peers (it leads nothing), and with any peer this policy never prunes.

State: none; every decision is computed from the engine's history, so a rebuilt engine decides the same.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np

from katib_progress.core.types import Decision, Verdict
from katib_progress.suggestion.pruning._history import Direction
from katib_progress.suggestion.pruning.policies.base import Policy, PolicyContext

_EXP_RATES = np.exp(np.linspace(math.log(0.003), math.log(2.0), 40))
_POW_RATES = np.linspace(0.05, 4.0, 40)


def _exp(x: np.ndarray, c: float) -> np.ndarray:
    return np.exp(-c * x)


def _pow(x: np.ndarray, c: float) -> np.ndarray:
    return (x + 1.0) ** (-c)


_FAMILIES: tuple[tuple[str, Callable[[np.ndarray, float], np.ndarray], np.ndarray], ...] = (
    ("exp", _exp, _EXP_RATES),
    ("power", _pow, _POW_RATES),
)


def remaining_upper_bound(progress: np.ndarray, best: np.ndarray, noise: float) -> tuple[float, str] | None:
    """Upper bound of the improvement still ahead (share of the improvement so far) and the family
    giving it; None when no family fits with ``b >= 0``. ``best`` is the running best, oriented up."""
    improvement = float(best[-1] - best[0])
    if improvement <= 0:
        return None
    y = (best - best[0]) / improvement
    n = len(y)
    now = float(progress[-1])
    out: tuple[float, str] | None = None
    for name, basis, rates in _FAMILIES:
        fit: tuple[float, float, float, float] | None = None
        for c in rates:
            g = basis(progress, float(c))
            design = np.stack([np.ones_like(g), -g], axis=1)
            (a, b), *_ = np.linalg.lstsq(design, y, rcond=None)
            if b < 0:
                continue
            residual = y - design @ np.array([a, b])
            sse = float(residual @ residual)
            if fit is None or sse < fit[0]:
                fit = (sse, float(a), float(b), float(c))
        if fit is None:
            continue
        sse, a, b, c = fit
        ends = basis(np.array([100.0, now]), c)
        at_end, at_now = a - b * float(ends[0]), a - b * float(ends[1])
        sd = math.sqrt(sse / max(1, n - 3))
        bound = max(at_end - max(at_now, float(y[-1])), 0.0) + noise * sd
        if out is None or bound > out[0]:
            out = (bound, name)
    return out


class LoneStallPolicy(Policy):
    """Prune a trial without peers once the upper bound of its remaining improvement, from an
    exponential and a power-law fit of its running best, is at most ``max_remaining`` of the
    improvement so far (module doc)."""

    name = "lone_stall"

    def __init__(
        self,
        *,
        max_remaining: float = 0.02,
        noise: float = 1.0,
        min_progress: float = 10.0,
        min_points: int = 5,
    ) -> None:
        if not (math.isfinite(max_remaining) and 0 < max_remaining < 1):
            raise ValueError(f"lone_stall max_remaining must be within (0, 1), got {max_remaining}")
        if not (math.isfinite(noise) and noise >= 0):
            raise ValueError(f"lone_stall noise must be >= 0, got {noise}")
        if not (math.isfinite(min_progress) and 0 <= min_progress < 100):
            raise ValueError(f"lone_stall min_progress must be within [0, 100), got {min_progress}")
        if min_points < 4:
            raise ValueError(f"lone_stall min_points must be >= 4, got {min_points}")
        self.max_remaining = max_remaining
        self.noise = noise
        self.min_progress = min_progress
        self.min_points = min_points

    def decide(self, ctx: PolicyContext) -> Decision:
        trial = ctx.trial
        p = trial.last_progress
        if p is None or p < self.min_progress or len(trial.values) < self.min_points:
            return Decision(Verdict.CONTINUE, "", self.name)
        if ctx.experiment.peers(trial.name):
            return Decision(Verdict.CONTINUE, "", self.name)
        sign = -1.0 if ctx.direction is Direction.MINIMIZE else 1.0
        best = np.maximum.accumulate(sign * np.asarray(trial.values, dtype=float))
        bound = remaining_upper_bound(np.asarray(trial.progress, dtype=float), best, self.noise)
        if bound is None:
            return Decision(Verdict.CONTINUE, "", self.name)
        share, family = bound
        evidence: dict[str, float | str] = {
            "remaining_share": share,
            "max_remaining": self.max_remaining,
            "family": family,
            "points": float(len(trial.values)),
        }
        if share > self.max_remaining:
            return Decision(Verdict.CONTINUE, "", self.name, evidence)
        return Decision(
            Verdict.PRUNE,
            f"{ctx.objective}: alone in the experiment and at {p:.0f}% the fitted curves leave at most "
            f"{100 * share:.2g}% of the improvement so far ahead ({family} fit, with noise), "
            f"<= lone_stall_max_remaining {100 * self.max_remaining:g}%: stalled",
            self.name,
            evidence,
        )
