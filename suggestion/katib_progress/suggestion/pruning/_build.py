"""Turn a validated PruningConfig into the composed policy tree."""

from __future__ import annotations

import math
import warnings

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
from katib_progress.suggestion.pruning.policies.base import AnyOf, NopPolicy, Policy
from katib_progress.suggestion.pruning.policies.budget import BudgetPolicy
from katib_progress.suggestion.pruning.policies.cost import CostGuard
from katib_progress.suggestion.pruning.policies.divergence import DivergencePolicy
from katib_progress.suggestion.pruning.policies.extrapolation import ExtrapolationPolicy
from katib_progress.suggestion.pruning.policies.optuna_pruner import OptunaPrunerPolicy
from katib_progress.suggestion.pruning.policies.stall import StallPolicy


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


def build_policy(config: PruningConfig) -> Policy:
    """AnyOf(divergence, budget, CostGuard(AnyOf(comparative and curve policies))), from ``policy``.

    Divergence and budget are outside the cost guard: a diverged trial or a spent budget stops a trial
    whatever its progress. ``nop`` alone gives a policy that never prunes.
    """
    direction = Direction(config.direction)
    names = config.policy_names
    outer: list[Policy] = []
    guarded: list[Policy] = []
    try:
        for name in names:
            if name == "nop":
                continue
            if name == "divergence":
                watch = tuple(m.strip() for m in config.divergence_metrics.split(",") if m.strip())
                outer.append(DivergencePolicy(factor=config.divergence_factor, watch=watch))
            elif name == "budget":
                continue
            elif name == "stall":
                guarded.append(
                    StallPolicy(
                        window=config.stall_window,
                        min_progress=config.stall_min_progress,
                        noise=config.stall_noise,
                        min_rel_improvement=config.stall_min_rel_improvement,
                        spare_leader=config.stall_spare_leader,
                        max_peers=config.min_trials - 1 if config.stall_alone_only else None,
                    )
                )
            elif name == "extrapolation":
                guarded.append(
                    ExtrapolationPolicy(
                        min_progress=config.extrapolation_min_progress, p_threshold=config.extrapolation_p
                    )
                )
            elif name in OPTUNA_POLICIES:
                percentile = {"median": 50.0, "percentile": config.percentile}.get(name)
                guarded.append(
                    OptunaPrunerPolicy(
                        _optuna_pruner(name, config),
                        name=name,
                        direction=direction,
                        grid_step=config.grid_step,
                        percentile=percentile,
                    )
                )
        if "budget" in names or config.deadline is not None or config.gpu_hour_budget is not None:
            outer.append(
                BudgetPolicy(
                    deadline=config.deadline,
                    gpu_hours=config.gpu_hour_budget,
                    gpus_per_trial=config.gpus_per_trial,
                )
            )
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
