"""Optuna samplers per algorithm, plus the QMC point picker.

A fresh sampler is built for every ask with a seed derived from (random_state, trial index), so
each suggestion depends only on the seed and the study's trials, not on how long the process has
lived: a service rebuilt from Katib's trial list continues exactly where it was.
"""

from __future__ import annotations

import math
import warnings
from typing import Any

import optuna
from optuna.distributions import CategoricalDistribution, FloatDistribution, IntDistribution
from optuna.samplers import BaseSampler

from katib_progress.suggestion._settings import (
    AlgorithmSettings,
    BayesianOptimizationSettings,
    CmaEsSettings,
    GPSettings,
    QMCSettings,
    TPESettings,
)
from katib_progress.suggestion._space import Space


def make_sampler(algorithm: str, settings: AlgorithmSettings, seed: int) -> BaseSampler:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
        # Optuna 4.9 deprecated CmaEsSampler(sigma0=...); it still works and Katib's image has it.
        warnings.simplefilter("ignore", FutureWarning)
        if isinstance(settings, TPESettings):
            return optuna.samplers.TPESampler(
                n_startup_trials=settings.n_startup_trials,
                n_ei_candidates=settings.effective_ei_candidates,
                seed=seed,
                multivariate=algorithm == "multivariate-tpe",
                constant_liar=True,
            )
        if isinstance(settings, CmaEsSettings):
            return optuna.samplers.CmaEsSampler(
                sigma0=settings.sigma, seed=seed, warn_independent_sampling=False
            )
        if isinstance(settings, GPSettings):
            return optuna.samplers.GPSampler(
                seed=seed,
                n_startup_trials=settings.n_startup_trials,
                deterministic_objective=settings.deterministic_objective,
                warn_independent_sampling=False,
            )
        if isinstance(settings, BayesianOptimizationSettings):
            return optuna.samplers.GPSampler(
                seed=seed, n_startup_trials=settings.n_initial_points, warn_independent_sampling=False
            )
    # random, hyperband, and the base sampler under grid and qmc (whose params are fixed before asking)
    return optuna.samplers.RandomSampler(seed=seed)


def qmc_point(space: Space, settings: QMCSettings, seed: int, index: int) -> dict[str, Any]:
    """Point ``index`` of the seeded Sobol/Halton sequence, mapped onto the search space."""
    from scipy.stats import qmc

    d = len(space.params)
    engine: qmc.QMCEngine
    if settings.qmc_type == "sobol":
        engine = qmc.Sobol(d, scramble=settings.scramble, rng=seed)
    else:
        engine = qmc.Halton(d, scramble=settings.scramble, rng=seed)
    if index:
        engine.fast_forward(index)
    unit = [float(u) for u in engine.random(1)[0]]
    return {p.name: _from_unit(p.distribution, u) for p, u in zip(space.params, unit, strict=True)}


def _from_unit(dist: optuna.distributions.BaseDistribution, u: float) -> Any:
    u = min(max(u, 0.0), math.nextafter(1.0, 0.0))
    if isinstance(dist, CategoricalDistribution):
        return dist.choices[int(u * len(dist.choices))]
    if isinstance(dist, IntDistribution):
        if dist.log:
            lo, hi = math.log(dist.low - 0.5 + 1e-9), math.log(dist.high + 0.5)
            return min(max(round(math.exp(lo + u * (hi - lo))), dist.low), dist.high)
        count = (dist.high - dist.low) // dist.step + 1
        return dist.low + int(u * count) * dist.step
    assert isinstance(dist, FloatDistribution)
    if dist.log:
        lo, hi = math.log(dist.low), math.log(dist.high)
        return min(max(math.exp(lo + u * (hi - lo)), dist.low), dist.high)
    if dist.step is not None:
        count = round((dist.high - dist.low) / dist.step) + 1
        return min(dist.low + int(u * count) * dist.step, dist.high)
    return dist.low + u * (dist.high - dist.low)
