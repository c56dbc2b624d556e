"""Predictive pruning: stop a trial when its final objective is unlikely to reach the study's top-k.

For a running trial at ``p`` percent the learning-curve ensemble (``pruning/_lcmodel.py``) fitted to its
reported values (oriented so that lower is better) gives a distribution for its value at 100 %, ``F``.
What Katib would record follows the metric strategy: under ``latest`` the final value; under the
improving strategy (``min`` when minimising, ``max`` when maximising) the better of the best so far and
the best still to come; under the other one the worse of the worst so far and what is to come.

**Calibration, from the study's own curves.** ``F`` from one curve is typically over-confident (the
families cannot know about a schedule's late drop or an overfit). The completed trials say by how much
(``pruning/_calibrate.py``): each completed trial (the ``calib_window`` most recent) is refitted once at
checkpoints of 10, 20, ... 90 percent, and a decision at ``p`` asks those at ``c = floor(p / 10) x 10``
how forecasts like this one fared. By default (``calibration`` ``event``) an isotonic regression of
whether each of them reached the decision's own target on the probability the ensemble gave it maps
this trial's probability to an observed frequency (the posterior mean of its isotonic block under a Beta
prior of ``prior`` pseudo-trials at the ensemble's own probability plus Jeffreys' half trial each way);
``pit`` recalibrates the whole distribution from probability integral transforms (Kuleshov et al., ICML
2018); ``none`` keeps the ensemble's probability.

**The rule.** The target is the ``top``-th best value recorded so far among the other trials that
can still be the result (running and completed, by the metric strategy). The trial is pruned when
``P(its final reaches the target) < p_threshold``, once it is at ``min_progress`` percent or more with
``min_points`` finite reports, and at least ``min_finished`` completed trials were refitted at its
checkpoint; never while it leads the experiment. Irregular reports need nothing special (the fit
takes the reports where they are); parallel trials count as peers with their current values, which
only makes the target easier to reach.

State: none outside the engine's history. A completed trial's refits are cached by trial name (its curve
no longer changes), each running trial's fit by its reports (their count and the last value), the sorted
finals of the completed trials as they end; so a rebuilt engine decides the same.
"""

from __future__ import annotations

import bisect
import math
from dataclasses import dataclass

import numpy as np

from katib_progress.core.types import Decision, Verdict
from katib_progress.suggestion.pruning._calibrate import METHODS, Calibrator, Kind, Method, checkpoint
from katib_progress.suggestion.pruning._history import (
    Direction,
    ExperimentState,
    Strategy,
    TrialHistory,
    TrialState,
)
from katib_progress.suggestion.pruning._lcmodel import CurvePrediction, fit_curve
from katib_progress.suggestion.pruning.policies.base import Policy, PolicyContext


def strategy_kind(direction: Direction, strategy: Strategy) -> Kind:
    if strategy == "latest":
        return "latest"
    improving = "min" if direction is Direction.MINIMIZE else "max"
    return "improving" if strategy == improving else "worsening"


@dataclass(frozen=True, slots=True)
class Forecast:
    """A trial's calibrated outlook at one decision (values in the objective's own orientation)."""

    probability: float  # calibrated P(recorded final reaches the target)
    raw_probability: float  # the ensemble's own, before calibration
    fit: CurvePrediction  # the ensemble's distribution of the value at 100 % (uncalibrated)
    calibrated_on: int  # completed trials' u at the checkpoint
    checkpoint: int
    forced: bool = False  # certain from the values so far (the best so far is within the target, ...)


class PredictivePolicy(Policy):
    """Prune when P(final reaches the current top-k) < ``p_threshold`` (module doc)."""

    name = "predictive"

    def __init__(
        self,
        *,
        direction: Direction,
        strategy: Strategy,
        top: int = 1,
        p_threshold: float = 0.05,
        min_progress: float = 10.0,
        min_points: int = 4,
        min_finished: int = 4,
        prior: float = 2.0,
        calib_window: int = 200,
        calibration: Method = "event",
    ) -> None:
        if top < 1:
            raise ValueError(f"predictive top must be >= 1, got {top}")
        if not (0 < p_threshold < 1):
            raise ValueError(f"predictive p_threshold must be within (0, 1), got {p_threshold}")
        if not (0 <= min_progress < 100):
            raise ValueError(f"predictive min_progress must be within [0, 100), got {min_progress}")
        if min_points < 4:
            raise ValueError(f"predictive min_points must be >= 4, got {min_points}")
        if min_finished < 1:
            raise ValueError(f"predictive min_finished must be >= 1, got {min_finished}")
        if not (math.isfinite(prior) and prior > 0):
            raise ValueError(f"predictive prior must be > 0 pseudo-trials, got {prior}")
        if calibration not in METHODS:
            raise ValueError(
                f"predictive calibration must be one of {', '.join(METHODS)}, got {calibration!r}"
            )
        if calib_window < min_finished:
            raise ValueError(
                f"predictive calib_window must be >= min_finished {min_finished}, got {calib_window}"
            )
        self.direction = direction
        self.strategy = strategy
        self.kind = strategy_kind(direction, strategy)
        self.top = top
        self.p_threshold = p_threshold
        self.min_progress = min_progress
        self.min_points = min_points
        self.min_finished = min_finished
        self.prior = prior
        self.calib_window = calib_window
        self._sign = 1.0 if direction is Direction.MINIMIZE else -1.0
        self.calibrator = Calibrator(
            kind=self.kind, min_points=min_points, window=calib_window, prior=prior, method=calibration
        )
        self._seen_ended = 0
        self._fits: dict[str, tuple[tuple[int, float], CurvePrediction | None]] = {}
        #: (oriented final, name) of every completed trial with a finite final, sorted
        self._finals: list[tuple[float, str]] = []

    # -- calibration --------------------------------------------------------------------------
    def _update_window(self, experiment: ExperimentState) -> None:
        """Take in the trials ended since the last call (the engine's ``ended`` only grows): completed
        ones join the calibration and the sorted finals."""
        for name in experiment.ended[self._seen_ended :]:
            self._fits.pop(name, None)  # an ended trial is not judged again
            t = experiment.trials.get(name)
            if t is None or t.state is not TrialState.COMPLETE:
                continue
            final = t.recorded(self.strategy)
            if final is not None and math.isfinite(final):
                bisect.insort(self._finals, (self._sign * final, name))
            if len(t.values) > self.min_points:
                self.calibrator.add(name, t.progress, self._sign * np.asarray(t.values, dtype=float))
        self._seen_ended = len(experiment.ended)

    # -- prediction ---------------------------------------------------------------------------
    def _fit(self, trial: TrialHistory) -> CurvePrediction | None:
        """The ensemble fitted to the trial's reports, refitted whenever they change (a report at the
        same progress replaces the last value)."""
        key = (len(trial.values), trial.values[-1] if trial.values else math.nan)
        cached = self._fits.get(trial.name)
        if cached is not None and cached[0] == key:
            return cached[1]
        fit = fit_curve(np.asarray(trial.progress), self._sign * np.asarray(trial.values))
        self._fits[trial.name] = (key, fit)
        return fit

    def _ranked(self, trial: TrialHistory, experiment: ExperimentState) -> list[tuple[float, str]]:
        """The ``top`` best recorded values (oriented, best first) among the other running and
        completed trials, with their names. Completed trials' finals are kept sorted as they end, so a
        decision reads the running trials only."""
        self._update_window(experiment)
        out: list[tuple[float, str]] = []
        for v in self._finals:
            if v[1] != trial.name:
                out.append(v)
                if len(out) == self.top:
                    break
        for t in experiment.trials.values():
            if t.state is TrialState.RUNNING and t.name != trial.name and t.values:
                r = t.recorded(self.strategy)
                if r is not None and math.isfinite(r):
                    out.append((self._sign * r, t.name))
        out.sort()
        return out[: self.top]

    def target(self, trial: TrialHistory, experiment: ExperimentState) -> tuple[float, str] | None:
        """The ``top``-th best recorded value (oriented) among the other running and completed trials,
        and whose it is; None with fewer such trials."""
        ranked = self._ranked(trial, experiment)
        return ranked[self.top - 1] if len(ranked) == self.top else None

    def forecast(self, trial: TrialHistory, target: float, experiment: ExperimentState) -> Forecast | None:
        """The calibrated probability that ``trial``'s recorded final reaches ``target`` (oriented);
        None when the trial is not judged yet (too early, too few reports or completed trials)."""
        p = trial.last_progress
        c = None if p is None else checkpoint(p)
        if p is None or c is None or p < self.min_progress or len(trial.values) < self.min_points:
            return None
        self._update_window(experiment)
        calibrated_on = self.calibrator.count(c)
        if calibrated_on < self.min_finished:
            return None
        fit = self._fit(trial)
        if fit is None:
            return None
        y = self._sign * np.asarray(trial.values)
        raw = fit.cdf1(target)
        if self.kind == "improving" and float(y.min()) <= target:
            return Forecast(1.0, raw, fit, calibrated_on, c, forced=True)
        if self.kind == "worsening" and float(y.max()) > target:
            return Forecast(0.0, raw, fit, calibrated_on, c, forced=True)
        return Forecast(self.calibrator.probability(c, raw, target), raw, fit, calibrated_on, c)

    # -- decision -----------------------------------------------------------------------------
    def decide(self, ctx: PolicyContext) -> Decision:
        trial = ctx.trial
        p = trial.last_progress
        if p is None or p < self.min_progress or len(trial.values) < self.min_points:
            return Decision(Verdict.CONTINUE, "", self.name)
        ranked = self._ranked(trial, ctx.experiment)
        if len(ranked) < self.top:
            return Decision(Verdict.CONTINUE, f"fewer than {self.top} peers with a value", self.name)
        target = ranked[self.top - 1]
        mine = trial.recorded(self.strategy)
        if self.kind == "improving" and mine is not None and self._sign * mine <= target[0]:
            return Decision(Verdict.CONTINUE, "", self.name)  # already within the top-k: no fit needed
        fc = self.forecast(trial, target[0], ctx.experiment)
        if fc is None:
            return Decision(Verdict.CONTINUE, "", self.name)
        value = self._sign * target[0]
        evidence: dict[str, float | str] = {
            "probability": fc.probability,
            "raw_probability": fc.raw_probability,
            "target": value,
            "target_trial": target[1],
            "calibrated_on": float(fc.calibrated_on),
        }
        if fc.probability >= self.p_threshold:
            return Decision(Verdict.CONTINUE, "", self.name, evidence)
        if mine is not None and self._sign * mine <= ranked[0][0]:  # it leads the experiment
            return Decision(Verdict.CONTINUE, "unlikely to reach the top but leading; spared", self.name)
        lo, mid, hi = (self._sign * v for v in fc.fit.quantiles((0.05, 0.5, 0.95)))
        if self._sign < 0:
            lo, hi = hi, lo
        evidence |= {"median": mid, "q05": lo, "q95": hi, "family": fc.fit.family}
        return Decision(
            Verdict.PRUNE,
            f"{ctx.objective} is predicted to end at {mid:.4g} (90% in [{lo:.4g}, {hi:.4g}], {fc.fit.family} "
            f"ensemble at {p:.0f}%); P(reaching the top-{self.top} value {value:.4g} of {target[1]}) = "
            f"{fc.probability:.3f} < {self.p_threshold:g} (calibrated on {fc.calibrated_on} completed "
            f"trials at {fc.checkpoint}%)",
            self.name,
            evidence,
        )
