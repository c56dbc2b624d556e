"""Adaptive warm-up: prune from the earliest progress at which this experiment's own finished trials
show that values there predict final ranks.

From the trials that COMPLETED so far (their final is known), the policy computes, at candidate
progress points ``step, 2*step, ...``, the Spearman rank correlation between each trial's value at that
progress (as the objective's metric strategy records it: best so far for ``min``/``max``, the value
itself for ``latest``) and its final observation, and a one-sided lower bound of it (``confidence``
standard errors; :func:`spearman_lower_bound`). The warm-up is the earliest candidate from which, at
every later candidate, that bound is >= ``rho`` and the rule below would have kept the best completed
trial, once ``min_finished`` trials have completed; it is relearned whenever a trial ends.
From the warm-up on, a trial whose value at its current progress is worse than the ``percentile`` of
its peers' values at the same progress is pruned (peers = every trial that reached that progress,
running, completed or pruned, as asynchronous successive halving ranks a rung). Before
``min_finished`` trials have completed, or when no candidate is predictive enough, the same rule
applies from ``fallback_progress`` only (the conservative fallback). The current leader (best recorded
objective among running and completed trials) is never pruned.

State: none outside the engine's history. What the policy keeps is derived from it (each trial's
recorded-value grid, the warm-up per count of ended trials), so a rebuilt engine decides the same.
"""

from __future__ import annotations

import math

import numpy as np

from katib_progress.core.types import Decision, Verdict
from katib_progress.suggestion.pruning._history import (
    Direction,
    ExperimentState,
    RecordedGrid,
    Strategy,
    TrialHistory,
    TrialState,
)
from katib_progress.suggestion.pruning.policies.base import Policy, PolicyContext


def spearman(x: list[float], y: list[float]) -> float:
    """Spearman rank correlation with average ranks for ties; NaN when either side is constant."""
    if len(x) != len(y):
        raise ValueError(f"spearman needs equal lengths, got {len(x)} and {len(y)}")
    if len(x) < 2:
        return math.nan
    rx, ry = _ranks(x), _ranks(y)
    sx, sy = float(np.std(rx)), float(np.std(ry))
    if sx == 0 or sy == 0:
        return math.nan
    return float(np.mean((rx - rx.mean()) * (ry - ry.mean())) / (sx * sy))


def spearman_lower_bound(rho: float, n: int, z: float) -> float:
    """One-sided lower confidence bound of a Spearman correlation from ``n`` pairs: Fisher's
    z-transform with the Fieller-Hartley-Pearson standard error ``1.03 / sqrt(n - 3)`` (the sample
    correlation is clipped to 0.95 so a perfect rank agreement of few trials stays uncertain: 4 trials
    in perfect order, which happens by chance 1 time in 24, give 0.66 at ``z`` = 1).
    ``z`` = 0 gives ``rho`` itself. NaN when ``n`` <= 3 and ``z`` > 0 or ``rho`` is NaN."""
    if math.isnan(rho):
        return math.nan
    if z == 0:
        return rho
    if n <= 3:
        return math.nan
    r = max(-0.95, min(0.95, rho))
    return math.tanh(math.atanh(r) - z * 1.03 / math.sqrt(n - 3))


def _ranks(values: list[float]) -> np.ndarray:
    a = np.asarray(values, dtype=float)
    order = np.argsort(a, kind="mergesort")
    ranks = np.empty(len(a), dtype=float)
    sorted_a = a[order]
    i = 0
    while i < len(a):
        j = i
        while j + 1 < len(a) and sorted_a[j + 1] == sorted_a[i]:
            j += 1
        ranks[order[i : j + 1]] = (i + j) / 2.0
        i = j + 1
    return ranks


class AdaptiveWarmupPolicy(Policy):
    """Percentile rule with a warm-up learned from the experiment's completed trials (module doc)."""

    name = "adaptive"

    def __init__(
        self,
        *,
        direction: Direction,
        strategy: Strategy,
        grid_step: float,
        rho: float = 0.8,
        min_finished: int = 4,
        confidence: float = 1.0,
        percentile: float = 50.0,
        step: float = 5.0,
        fallback_progress: float = 50.0,
        min_peers: int = 3,
    ) -> None:
        if not (0 < rho <= 1):
            raise ValueError(f"adaptive rho must be within (0, 1], got {rho}")
        if min_finished < 3:
            raise ValueError(
                f"adaptive min_finished must be >= 3 (Spearman of fewer is noise), got {min_finished}"
            )
        if not (math.isfinite(confidence) and confidence >= 0):
            raise ValueError(f"adaptive confidence must be >= 0, got {confidence}")
        if not (0 < percentile < 100):
            raise ValueError(f"adaptive percentile must be within (0, 100), got {percentile}")
        if not (0 < step < 100):
            raise ValueError(f"adaptive step must be within (0, 100) percent, got {step}")
        if not (0 <= fallback_progress < 100):
            raise ValueError(f"adaptive fallback_progress must be within [0, 100), got {fallback_progress}")
        if min_peers < 1:
            raise ValueError(f"adaptive min_peers must be >= 1, got {min_peers}")
        if not grid_step > 0:
            raise ValueError(f"grid_step must be > 0, got {grid_step}")
        self.direction = direction
        self.strategy = strategy
        self.grid_step = grid_step
        self.rho = rho
        self.min_finished = min_finished
        self.confidence = confidence
        self.percentile = percentile
        self.step = step
        self.fallback_progress = fallback_progress
        self.min_peers = min_peers
        self._recorded: dict[str, RecordedGrid] = {}
        self._warmup_key: int = -1
        self._warmup: tuple[float, str, int] = (fallback_progress, "", 0)

    # -- derived caches -------------------------------------------------------------------------
    def _rec(self, trial: TrialHistory) -> RecordedGrid:
        rec = self._recorded.setdefault(trial.name, RecordedGrid())
        rec.extend(trial.grid, self.strategy)
        return rec

    def warmup(self, experiment: ExperimentState) -> tuple[float, str, int]:
        """(warm-up progress %, why, completed trials used); recomputed when a trial ends."""
        key = len(experiment.ended)
        if key == self._warmup_key:
            return self._warmup
        self._warmup_key = key
        done = [
            t
            for t in experiment.trials.values()
            if t.state is TrialState.COMPLETE and t.recorded(self.strategy) is not None
        ]
        n = len(done)
        if n < self.min_finished:
            why = f"{n} of {self.min_finished} completed trials needed to learn the warm-up"
            self._warmup = (self.fallback_progress, why, n)
            return self._warmup
        finals = [t.recorded(self.strategy) for t in done]
        leader = done[0]
        for t, final in zip(done, finals, strict=True):
            best = leader.recorded(self.strategy)
            if final is not None and best is not None and self.direction.better(final, best):
                leader = t
        candidates: list[tuple[float, float, float, bool]] = []  # (progress, rho, lower bound, spared)
        k = 1
        while k * self.step < 100.0 - 1e-9:
            p = k * self.step
            s = math.ceil(p / self.grid_step - 1e-9)
            xs, ys = [], []
            for t, final in zip(done, finals, strict=True):
                v = self._rec(t).at(s)
                if v is not None and final is not None:
                    xs.append(v)
                    ys.append(final)
            r = spearman(xs, ys) if len(xs) >= self.min_finished else math.nan
            low = spearman_lower_bound(r, len(xs), self.confidence)
            candidates.append((p, r, low, self._spared(leader, s, experiment)))
            k += 1
        # Earliest candidate from which, at every later candidate, rho's lower bound is >= the bar
        # and the rule would have spared the best completed trial.
        chosen: tuple[float, float, float, bool] | None = None
        for cand in reversed(candidates):
            if not (cand[2] >= self.rho and cand[3]):  # a NaN bound fails too
                break
            chosen = cand
        if chosen is None:
            why = (
                f"no progress where Spearman's lower bound is >= {self.rho:g} and the best completed "
                f"trial would have been spared, over {n} completed trials"
            )
            self._warmup = (self.fallback_progress, why, n)
        else:
            why = (
                f"Spearman {chosen[1]:.2f} (lower bound {chosen[2]:.2f}) >= {self.rho:g} from {chosen[0]:g}% "
                f"over {n} completed trials"
            )
            self._warmup = (chosen[0], why, n)
        return self._warmup

    def _spared(self, leader: TrialHistory, step: int, experiment: ExperimentState) -> bool:
        """Would the percentile rule at ``step`` have kept ``leader`` (the best completed trial)?"""
        mine = self._rec(leader).at(step)
        if mine is None:
            return False
        peers = self._peers(leader.name, step, experiment)
        return len(peers) < self.min_peers or not self.direction.better(self._bar(peers), mine)

    def _peers(self, name: str, step: int, experiment: ExperimentState) -> list[float]:
        """Recorded values at ``step`` of every other trial that reached it (failed ones excepted)."""
        out = []
        for t in experiment.trials.values():
            if t.name == name or t.state is TrialState.FAILED:
                continue
            v = self._rec(t).at(step)
            if v is not None and math.isfinite(v):
                out.append(v)
        return out

    def _bar(self, peers: list[float]) -> float:
        q = self.percentile if self.direction is Direction.MINIMIZE else 100.0 - self.percentile
        return float(np.percentile(np.asarray(peers), q))

    # -- decision -------------------------------------------------------------------------------
    def decide(self, ctx: PolicyContext) -> Decision:
        trial = ctx.trial
        warm, why, _ = self.warmup(ctx.experiment)
        step = trial.last_step
        if step is None:
            return Decision(Verdict.CONTINUE, f"no {ctx.objective} value yet", self.name)
        at = step * self.grid_step
        if at < warm - 1e-9:
            return Decision(Verdict.CONTINUE, f"before the warm-up {warm:g}% ({why})", self.name)
        mine = self._rec(trial).at(step)
        if mine is None:  # pragma: no cover - the trial's own grid covers its last step
            return Decision(Verdict.CONTINUE, "", self.name)
        peers = self._peers(trial.name, step, ctx.experiment)
        if len(peers) < self.min_peers:
            return Decision(
                Verdict.CONTINUE, f"{len(peers)} peers reached {at:g}% (< {self.min_peers})", self.name
            )
        bar = self._bar(peers)
        if not self.direction.better(bar, mine):
            return Decision(Verdict.CONTINUE, "", self.name)
        if ctx.experiment.leads(trial):
            return Decision(Verdict.CONTINUE, "the trial leads the experiment", self.name)
        label = "median" if self.percentile == 50 else f"{self.percentile:g}th percentile"
        return Decision(
            Verdict.PRUNE,
            f"{ctx.objective} {mine:.4g} at {at:g}% is worse than the {label} {bar:.4g} of {len(peers)} "
            f"trials at {at:g}%; warm-up {warm:g}% ({why})",
            self.name,
            {"value": mine, "progress": at, "threshold": bar, "peers": float(len(peers)), "warmup": warm},
        )
