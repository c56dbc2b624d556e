"""Drive a real Optuna pruner on a real in-memory Optuna study, fed with grid-resampled curves.

Each policy instance owns one in-memory study (so several Optuna pruners can be combined): every trial
becomes an Optuna trial, its curve is reported step by step (step = grid index of the progress, see
``TrialHistory``), ``Trial.should_prune()`` decides, and trial ends are told to the study (pruned trials
as PRUNED with their intermediate values, completed ones with their final objective).
"""

from __future__ import annotations

import logging
import math
from dataclasses import dataclass

import numpy as np
import optuna
from optuna.pruners import BasePruner
from optuna.trial import TrialState as OptunaState

from katib_progress.core.types import Decision, Verdict
from katib_progress.suggestion.pruning._history import (
    Direction,
    ExperimentState,
    Strategy,
    TrialHistory,
    TrialState,
)
from katib_progress.suggestion.pruning.policies.base import Policy, PolicyContext

_log = logging.getLogger(__name__)
optuna.logging.set_verbosity(optuna.logging.WARNING)

_STATES = {
    TrialState.COMPLETE: OptunaState.COMPLETE,
    TrialState.PRUNED: OptunaState.PRUNED,
    TrialState.FAILED: OptunaState.FAIL,
}


@dataclass(slots=True)
class _Live:
    trial: optuna.Trial
    reported: int = 0
    recorded: float | None = None  # running min/max of the reported grid values (strategy min/max)


class OptunaPrunerPolicy(Policy):
    """Ask an Optuna pruner (median, percentile, successive halving, Hyperband, Wilcoxon, threshold,
    optionally wrapped in PatientPruner) whether the trial should stop.

    ``percentile`` is only used to word the reason (the pruner itself decides).
    """

    def __init__(
        self,
        pruner: BasePruner,
        *,
        name: str,
        direction: Direction,
        grid_step: float,
        percentile: float | None = None,
        strategy: Strategy = "min",
        min_completed: int = 0,
    ) -> None:
        if not isinstance(pruner, BasePruner):
            raise ValueError(f"pruner must be an optuna BasePruner, got {pruner!r}")
        if not grid_step > 0:
            raise ValueError(f"grid_step must be > 0, got {grid_step}")
        self.name = name
        self._direction = direction
        self._grid_step = grid_step
        self._percentile = percentile
        self._strategy = strategy
        self._min_completed = min_completed
        # A fixed study name: HyperbandPruner assigns brackets by hashing the study name, so a
        # random name would make decisions irreproducible across runs and restarts.
        self.study = optuna.create_study(
            study_name=f"katib-progress-{name}",
            direction=direction.value,
            pruner=pruner,
            sampler=optuna.samplers.RandomSampler(seed=0),
            storage=optuna.storages.InMemoryStorage(),
        )
        self._live: dict[str, _Live] = {}
        self._told = 0  # how many of the experiment's ended trials the study has been told about

    def _sync(self, trial: TrialHistory) -> _Live | None:
        live = self._live.get(trial.name)
        if live is None:
            if not trial.grid:
                return None
            live = self._live[trial.name] = _Live(self.study.ask())
        if len(trial.grid) > live.reported:
            for step, value in list(trial.grid.items())[live.reported :]:
                live.trial.report(self._as_recorded(live, value), step)
            live.reported = len(trial.grid)
        return live

    def _sync_ended(self, experiment: ExperimentState) -> None:
        """Tell the study about trials that ended since the last decision, in the order they ended."""
        for name in experiment.ended[self._told :]:
            self._tell(experiment.trials[name])
        self._told = len(experiment.ended)

    def _as_recorded(self, live: _Live, value: float) -> float:
        """What Katib would record at this step: the running min/max for strategy min/max, the value
        itself for latest. Every trial is reported the same way, so the pruner compares like with
        like. (Optuna's pruners still take the judged trial's best reported value; with strategy
        latest that is its best so far, not its latest.)"""
        if self._strategy == "latest":
            return value
        pick = min if self._strategy == "min" else max
        live.recorded = value if live.recorded is None else pick(live.recorded, value)
        return live.recorded

    def decide(self, ctx: PolicyContext) -> Decision:
        self._sync_ended(ctx.experiment)
        live = self._sync(ctx.trial)
        if live is None:
            return Decision(Verdict.CONTINUE, f"no {ctx.objective} value yet", self.name)
        if not live.trial.should_prune():
            return Decision(Verdict.CONTINUE, "", self.name)
        completed = sum(t.state is TrialState.COMPLETE for t in ctx.experiment.trials.values())
        if completed < self._min_completed:
            # Optuna's bootstrap_count prunes the first trials to reach each rung; without this guard
            # every trial of a small experiment can be pruned and none finishes.
            return Decision(
                Verdict.CONTINUE,
                f"{self.name} would prune, but no trial has completed yet (bootstrap_count guard)",
                self.name,
            )
        return self._explain(ctx)

    def _explain(self, ctx: PolicyContext) -> Decision:
        trial = ctx.trial
        step = trial.last_step
        assert step is not None
        at = step * self._grid_step
        best = self._direction.best(list(trial.grid.values()))
        done = self.study.get_trials(deepcopy=False, states=(OptunaState.COMPLETE,))
        peers = [t.intermediate_values[step] for t in done if step in t.intermediate_values]
        peers = [v for v in peers if math.isfinite(v)]
        evidence: dict[str, float | str] = {
            "value": best,
            "progress": at,
            "step": float(step),
            "peers": float(len(peers)),
        }
        worse = "worse than"
        if self._percentile is not None and peers:
            q = self._percentile if self._direction is Direction.MINIMIZE else 100.0 - self._percentile
            bar = float(np.percentile(np.asarray(peers), q))
            evidence["percentile"] = self._percentile
            evidence["threshold"] = bar
            label = "median" if self._percentile == 50 else f"{self._percentile:g}th percentile"
            reason = (
                f"{ctx.objective} {best:.4g} at {at:.0f}% is {worse} the {label} {bar:.4g} "
                f"of {len(peers)} trials at {at:.0f}%"
            )
        elif peers:
            evidence["peer_best"] = self._direction.best(peers)
            evidence["peer_median"] = float(np.median(peers))
            reason = (
                f"{self.name}: {ctx.objective} {best:.4g} at {at:.0f}% ranks too low among {len(peers)} "
                f"trials at {at:.0f}% (their best {evidence['peer_best']:.4g}, "
                f"median {evidence['peer_median']:.4g})"
            )
        else:
            reason = f"{self.name}: {ctx.objective} {best:.4g} at {at:.0f}% pruned by the Optuna pruner"
        return Decision(Verdict.PRUNE, reason, self.name, evidence)

    def _tell(self, trial: TrialHistory) -> None:
        state = trial.state
        live = self._sync(trial)
        if live is None:
            return
        self._live.pop(trial.name, None)
        optuna_state = _STATES.get(state, OptunaState.FAIL)
        if optuna_state is OptunaState.COMPLETE:
            final = trial.recorded(self._strategy)
            if final is None or not math.isfinite(final):
                optuna_state = OptunaState.FAIL
            else:
                self.study.tell(live.trial, final, state=optuna_state)
                return
        self.study.tell(live.trial, state=optuna_state)

    def curve(self, trial: str) -> list[tuple[int, float]]:
        """The intermediate values the study holds for a live trial (for tests and diagnostics)."""
        live = self._live.get(trial)
        if live is None:
            return []
        frozen = self.study.get_trials(deepcopy=False)[live.trial.number]
        return sorted(frozen.intermediate_values.items())
