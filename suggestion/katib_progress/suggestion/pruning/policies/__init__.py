"""Pruning policies: each one class with one ``decide(ctx) -> Decision`` method."""

from katib_progress.suggestion.pruning.policies.adaptive import AdaptiveWarmupPolicy
from katib_progress.suggestion.pruning.policies.base import AnyOf, NopPolicy, Policy, PolicyContext
from katib_progress.suggestion.pruning.policies.budget import BudgetPolicy
from katib_progress.suggestion.pruning.policies.cost import CostGuard
from katib_progress.suggestion.pruning.policies.divergence import DivergencePolicy
from katib_progress.suggestion.pruning.policies.extrapolation import ExtrapolationPolicy
from katib_progress.suggestion.pruning.policies.lone_stall import LoneStallPolicy
from katib_progress.suggestion.pruning.policies.optuna_pruner import OptunaPrunerPolicy
from katib_progress.suggestion.pruning.policies.predictive import PredictivePolicy
from katib_progress.suggestion.pruning.policies.stall import StallPolicy
from katib_progress.suggestion.pruning.policies.trend_halving import TrendHalvingPolicy

__all__ = [
    "AdaptiveWarmupPolicy",
    "AnyOf",
    "BudgetPolicy",
    "CostGuard",
    "DivergencePolicy",
    "ExtrapolationPolicy",
    "LoneStallPolicy",
    "NopPolicy",
    "OptunaPrunerPolicy",
    "Policy",
    "PolicyContext",
    "PredictivePolicy",
    "StallPolicy",
    "TrendHalvingPolicy",
]
