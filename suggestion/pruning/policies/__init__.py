"""Pruning policies: each one class with one ``decide(ctx) -> Decision`` method."""

from suggestion.pruning.policies.base import AnyOf, NopPolicy, Policy, PolicyContext
from suggestion.pruning.policies.budget import BudgetPolicy
from suggestion.pruning.policies.cost import CostGuard
from suggestion.pruning.policies.divergence import DivergencePolicy
from suggestion.pruning.policies.extrapolation import ExtrapolationPolicy
from suggestion.pruning.policies.optuna_pruner import OptunaPrunerPolicy
from suggestion.pruning.policies.stall import StallPolicy

__all__ = [
    "AnyOf",
    "BudgetPolicy",
    "CostGuard",
    "DivergencePolicy",
    "ExtrapolationPolicy",
    "NopPolicy",
    "OptunaPrunerPolicy",
    "Policy",
    "PolicyContext",
    "StallPolicy",
]
