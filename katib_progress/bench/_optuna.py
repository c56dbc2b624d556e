"""A minimal adapter that drives a real Optuna pruner (default settings) from replayed points.

Each replay owns one in-memory Optuna study. A trial becomes an Optuna trial when it is created;
every point's objective is reported at step = integer progress percent (non-finite values are
reported as they are: Optuna's median pruner prunes on NaN); ``Trial.should_prune()`` decides; trial
ends are told to the study (pruned -> PRUNED, failed -> FAIL, succeeded -> its observation).
"""

from __future__ import annotations

import logging
import math

import optuna
from optuna.pruners import BasePruner
from optuna.trial import TrialState

from katib_progress.bench._deciders import Objective, TrialEnd
from katib_progress.core.types import Decision, ProgressPoint, Verdict

_log = logging.getLogger(__name__)


class OptunaPrunerDecider:
    """Ask ``pruner`` whether a trial should stop, with Optuna's own bookkeeping."""

    def __init__(self, name: str, pruner: BasePruner, objective: Objective, *, seed: int = 0) -> None:
        optuna.logging.set_verbosity(optuna.logging.WARNING)
        self.name = name
        self._objective = objective
        # A fixed study name: Hyperband assigns brackets by hashing the study name and trial number,
        # so an auto-generated (random) name would make replays irreproducible.
        self._study = optuna.create_study(
            study_name=f"bench-{name}-{seed}",
            direction=objective.direction,
            pruner=pruner,
            sampler=optuna.samplers.RandomSampler(seed=seed),
            storage=optuna.storages.InMemoryStorage(),
        )
        self._trials: dict[str, optuna.Trial] = {}
        self._last_step: dict[str, int] = {}
        self._last_seq: dict[str, int] = {}

    def start(self, trial: str) -> None:
        if trial not in self._trials:
            self._trials[trial] = self._study.ask()

    def decide(self, point: ProgressPoint) -> Decision:
        self.start(point.trial)
        trial = self._trials[point.trial]
        if point.seq <= self._last_seq.get(point.trial, -1):
            return Decision(Verdict.CONTINUE, "repeated point", self.name)
        self._last_seq[point.trial] = point.seq
        value = point.metrics.get(self._objective.metric)
        if value is None or point.progress is None:
            return Decision(Verdict.CONTINUE, "no objective or progress in this report", self.name)
        step = round(point.progress)
        if step <= self._last_step.get(point.trial, -1):
            return Decision(Verdict.CONTINUE, "no new step", self.name)
        self._last_step[point.trial] = step
        # Optuna refuses infinities in intermediate values; a diverged value is reported as NaN.
        trial.report(value if math.isfinite(value) else math.nan, step)
        if trial.should_prune():
            evidence = {"step": float(step), "value": value}
            return Decision(Verdict.PRUNE, f"Optuna {self.name} pruned at step {step}", self.name, evidence)
        return Decision(Verdict.CONTINUE, "", self.name)

    def finish(self, trial: str, state: TrialEnd, observation: float | None) -> None:
        live = self._trials.pop(trial, None)
        if live is None:
            return
        if state == "pruned":
            self._study.tell(live, state=TrialState.PRUNED)
        elif state == "succeeded" and observation is not None and math.isfinite(observation):
            self._study.tell(live, observation)
        else:
            self._study.tell(live, state=TrialState.FAIL)

    def close(self) -> None:
        return None
