"""Turn a validated PruningConfig into the composed policy tree."""

from __future__ import annotations

import math
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

from optuna.exceptions import ExperimentalWarning
from optuna.pruners import (
    BasePruner,
    HyperbandPruner,
    MedianPruner,
    PatientPruner,
    PercentilePruner,
    SuccessiveHalvingPruner,
    ThresholdPruner,
    WilcoxonPruner,
)

from katib_progress.core.errors import ConfigError
from katib_progress.suggestion.pruning._history import Direction
from katib_progress.suggestion.pruning.config import OPTUNA_POLICIES, PruningConfig
from katib_progress.suggestion.pruning.policies.adaptive import AdaptiveWarmupPolicy
from katib_progress.suggestion.pruning.policies.base import AnyOf, NopPolicy, Policy
from katib_progress.suggestion.pruning.policies.budget import BudgetPolicy
from katib_progress.suggestion.pruning.policies.cost import CostGuard
from katib_progress.suggestion.pruning.policies.divergence import DivergencePolicy
from katib_progress.suggestion.pruning.policies.extrapolation import ExtrapolationPolicy
from katib_progress.suggestion.pruning.policies.lone_stall import LoneStallPolicy
from katib_progress.suggestion.pruning.policies.medianstop import MedianStopPolicy
from katib_progress.suggestion.pruning.policies.optuna_pruner import OptunaPrunerPolicy
from katib_progress.suggestion.pruning.policies.predictive import PredictivePolicy
from katib_progress.suggestion.pruning.policies.stall import StallPolicy
from katib_progress.suggestion.pruning.policies.trend_halving import TrendHalvingPolicy


def _steps(config: PruningConfig, percent: float) -> int:
    return math.ceil(percent / config.grid_step - 1e-9)


def _optuna_pruner(name: str, c: PruningConfig) -> BasePruner:
    with warnings.catch_warnings():
        # Wilcoxon and Patient are flagged experimental by Optuna; the choice is the operator's.
        warnings.simplefilter("ignore", ExperimentalWarning)
        return _make_pruner(name, c)


def _make_pruner(name: str, c: PruningConfig) -> BasePruner:
    warmup = _steps(c, c.warmup_progress)
    max_steps = _steps(c, 100.0)
    pruner: BasePruner
    if name == "median":
        pruner = MedianPruner(c.startup_trials, warmup, 1, n_min_trials=c.min_trials)
    elif name == "percentile":
        pruner = PercentilePruner(c.percentile, c.startup_trials, warmup, 1, n_min_trials=c.min_trials)
    elif name == "successive_halving":
        resource: str | int = "auto" if c.min_resource == "auto" else max(1, _steps(c, float(c.min_resource)))
        pruner = SuccessiveHalvingPruner(
            resource, c.reduction_factor, c.min_early_stopping_rate, c.bootstrap_count
        )
    elif name == "hyperband":
        start = max(1, warmup) if c.min_resource == "auto" else max(1, _steps(c, float(c.min_resource)))
        pruner = HyperbandPruner(start, max_steps, c.reduction_factor, c.bootstrap_count)
    elif name == "wilcoxon":
        pruner = WilcoxonPruner(p_threshold=c.wilcoxon_p_threshold, n_startup_steps=c.wilcoxon_startup_steps)
    elif name == "threshold":
        pruner = ThresholdPruner(c.threshold_lower, c.threshold_upper, warmup, 1)
    else:  # pragma: no cover - names are validated by PruningConfig
        raise ConfigError("policy", f"{name} is not an Optuna policy")
    if c.patience > 0:
        pruner = PatientPruner(pruner, _steps(c, c.patience), c.patience_min_delta)
    return pruner


def _divergence(c: PruningConfig) -> Policy:
    watch = tuple(m.strip() for m in c.divergence_metrics.split(",") if m.strip())
    return DivergencePolicy(factor=c.divergence_factor, watch=watch)


def _budget(c: PruningConfig) -> Policy:
    return BudgetPolicy(deadline=c.deadline, gpu_hours=c.gpu_hour_budget, gpus_per_trial=c.gpus_per_trial)


def _stall(c: PruningConfig) -> Policy:
    return StallPolicy(
        window=c.stall_window,
        min_progress=c.stall_min_progress,
        noise=c.stall_noise,
        min_rel_improvement=c.stall_min_rel_improvement,
        min_points=c.stall_min_points,
        max_peers=c.min_trials - 1 if c.stall_alone_only else None,
    )


def _lone_stall(c: PruningConfig) -> Policy:
    return LoneStallPolicy(
        max_remaining=c.lone_stall_max_remaining,
        noise=c.lone_stall_noise,
        min_progress=c.lone_stall_min_progress,
        min_points=c.lone_stall_min_points,
    )


def _extrapolation(c: PruningConfig) -> Policy:
    return ExtrapolationPolicy(min_progress=c.extrapolation_min_progress, p_threshold=c.extrapolation_p)


def _adaptive(c: PruningConfig) -> Policy:
    return AdaptiveWarmupPolicy(
        direction=Direction(c.direction),
        strategy=c.strategy,
        grid_step=c.grid_step,
        rho=c.adaptive_rho,
        min_finished=c.adaptive_min_finished,
        confidence=c.adaptive_confidence,
        percentile=c.adaptive_percentile,
        step=c.adaptive_step,
        fallback_progress=c.adaptive_fallback_progress,
        min_peers=c.min_trials,
    )


def _trend_halving(c: PruningConfig) -> Policy:
    return TrendHalvingPolicy(
        direction=Direction(c.direction),
        strategy=c.strategy,
        grid_step=c.grid_step,
        rungs=c.trend_rung_list,
        keep=c.trend_keep_list,
        horizon=c.trend_horizon,
        window=c.trend_window,
        min_peers=c.min_trials,
        rejudge=c.trend_rejudge,
        gate_below=c.trend_gate_below,
        gate_ref=c.trend_gate_ref,
        gate_min=c.trend_gate_min,
        gate_top=c.trend_gate_top,
        rho=c.trend_rho,
        rho_min_finished=c.trend_rho_min_finished,
        rho_confidence=c.trend_rho_confidence,
        noise=c.trend_noise,
        smooth=c.trend_smooth,
        adapt_top=c.trend_adapt_top,
        adapt_margin=c.trend_adapt_margin,
        adapt_min=c.trend_adapt_min,
    )


def _predictive(c: PruningConfig) -> Policy:
    return PredictivePolicy(
        direction=Direction(c.direction),
        strategy=c.strategy,
        top=c.predict_top,
        p_threshold=c.predict_p,
        min_progress=c.predict_min_progress,
        min_points=c.predict_min_points,
        min_finished=c.predict_min_finished,
        prior=c.predict_prior,
        calib_window=c.predict_calib_window,
        calibration=c.predict_calibration,
    )


def _medianstop(c: PruningConfig) -> Policy:
    return MedianStopPolicy(min_trials_required=c.min_trials_required, start_step=c.start_step)


def _optuna(name: str) -> Callable[[PruningConfig], Policy]:
    def build(c: PruningConfig) -> Policy:
        percentile = {"median": 50.0, "percentile": c.percentile}.get(name)
        return OptunaPrunerPolicy(
            _optuna_pruner(name, c),
            name=name,
            direction=Direction(c.direction),
            grid_step=c.grid_step,
            percentile=percentile,
            strategy=c.strategy,
            min_completed=1 if name in ("successive_halving", "hyperband") and c.bootstrap_count else 0,
        )

    return build


@dataclass(frozen=True, slots=True)
class PolicyEntry:
    """One name of the ``policy`` setting: how it is built and where it sits in the tree.

    ``outer`` policies (divergence, budget) stop a trial whatever its progress; ``guarded`` ones are
    wrapped in the cost guard; ``build`` None means the name adds nothing (``nop``).
    """

    name: str
    place: Literal["outer", "guarded"]
    build: Callable[[PruningConfig], Policy] | None


#: Every policy name of the ``policy`` setting (``default`` expands to ``DEFAULT_POLICIES``).
#: ``PruningConfig`` validates names against ``POLICY_NAMES``; tests check both agree, and that
#: docs/pruning.md documents every name and setting.
REGISTRY: dict[str, PolicyEntry] = {
    e.name: e
    for e in (
        PolicyEntry("divergence", "outer", _divergence),
        PolicyEntry("budget", "outer", _budget),
        PolicyEntry("stall", "guarded", _stall),
        PolicyEntry("lone_stall", "guarded", _lone_stall),
        PolicyEntry("extrapolation", "guarded", _extrapolation),
        PolicyEntry("adaptive", "guarded", _adaptive),
        PolicyEntry("trend_halving", "guarded", _trend_halving),
        PolicyEntry("predictive", "guarded", _predictive),
        *(PolicyEntry(name, "guarded", _optuna(name)) for name in OPTUNA_POLICIES),
        # Katib's rule as Katib applies it: no cost guard (its sidecar stops a trial at start_step
        # whatever its progress)
        PolicyEntry("medianstop", "outer", _medianstop),
        PolicyEntry("nop", "outer", None),
    )
}


def build_policy(config: PruningConfig) -> Policy:
    """AnyOf(divergence, budget, CostGuard(AnyOf(comparative and curve policies))), from ``policy``.

    Divergence and budget are outside the cost guard: a diverged trial or a spent budget stops a trial
    whatever its progress. ``nop`` alone gives a policy that never prunes. The budget policy is added
    whenever ``deadline`` or ``gpu_hour_budget`` is set.
    """
    names = [n for n in config.policy_names if n != "budget"]
    if "budget" in config.policy_names or config.deadline is not None or config.gpu_hour_budget is not None:
        names.append("budget")  # the budget always comes last among the outer policies
    outer: list[Policy] = []
    guarded: list[Policy] = []
    try:
        for name in names:  # in the order the setting names them
            entry = REGISTRY[name]
            if entry.build is not None:
                (outer if entry.place == "outer" else guarded).append(entry.build(config))
    except ValueError as exc:
        if isinstance(exc, ConfigError):
            raise
        raise ConfigError("policy", str(exc)) from exc
    if guarded:
        inner = guarded[0] if len(guarded) == 1 else AnyOf(guarded)
        outer.append(
            CostGuard(
                inner, max_prune_progress=config.max_prune_progress, min_remaining_s=config.min_remaining_s
            )
        )
    if not outer:
        return NopPolicy()
    return outer[0] if len(outer) == 1 else AnyOf(outer)
