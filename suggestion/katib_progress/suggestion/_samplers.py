"""Optuna samplers per algorithm, plus the QMC point picker.

Every ask samples with a seed derived from (random_state, trial index), so each suggestion depends
only on the seed and the study's trials, not on how long the process has lived: a service rebuilt
from Katib's trial list continues exactly where it was. ``AskSamplers`` keeps one sampler per
experiment and, before each ask, puts every random state in it into the state a sampler freshly
built with that ask's seed would have; what else the sampler keeps (the search-space intersection it
updates incrementally; ``cmaes``' CMA-ES optimizer, see ``_cma``) is a function of the study's
trials. Building a sampler per ask made Optuna recompute that intersection over every trial on every
ask. ``random``, ``tpe``, ``multivariate-tpe`` and ``cmaes`` are the exceptions: they read Katib's
streams, seeded once per experiment. ``random``, ``tpe`` and ``multivariate-tpe`` position theirs
from the trial index (``SpaceRandomSampler.position_stream``, ``KatibTPESampler.position_stream``),
so the index alone still fixes each suggestion; ``cmaes`` records in the trials what its streams
gave and a reloaded study replays that (``_cma``).
"""

from __future__ import annotations

import math
import warnings
from typing import Any

import optuna
from optuna.distributions import BaseDistribution, CategoricalDistribution, FloatDistribution, IntDistribution
from optuna.samplers import BaseSampler
from optuna.samplers._lazy_random_state import LazyRandomState

from katib_progress.suggestion._cma import KeptCmaEsSampler
from katib_progress.suggestion._katib_tpe import KatibTPESampler
from katib_progress.suggestion._random import SpaceRandomSampler
from katib_progress.suggestion._settings import (
    AlgorithmSettings,
    BayesianOptimizationSettings,
    CmaEsSettings,
    GPSettings,
    MultivariateTPESettings,
    QMCSettings,
    RandomSettings,
    TPESettings,
    TunedTPESettings,
)
from katib_progress.suggestion._space import Space


def make_sampler(
    algorithm: str, settings: AlgorithmSettings, seed: int, space: dict[str, BaseDistribution]
) -> BaseSampler:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
        if isinstance(settings, (TPESettings, MultivariateTPESettings)):
            return KatibTPESampler(
                space,
                n_startup_trials=settings.n_startup_trials,
                n_ei_candidates=settings.effective_ei_candidates,
                seed=seed,
                multivariate=settings.multivariate_tpe,
            )
        if isinstance(settings, TunedTPESettings):
            # Optuna 4.9 deprecated prior_weight (removal planned for 6.0); Optuna is pinned to 5.0.
            warnings.simplefilter("ignore", FutureWarning)
            return optuna.samplers.TPESampler(
                n_startup_trials=settings.n_startup_trials,
                n_ei_candidates=settings.effective_ei_candidates,
                seed=seed,
                multivariate=settings.multivariate,
                constant_liar=True,
                prior_weight=None if settings.prior_weight == 1.0 else settings.prior_weight,
            )
        if isinstance(settings, CmaEsSettings):
            return KeptCmaEsSampler(space, sigma0=settings.sigma, seed=seed)
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
    return SpaceRandomSampler(space, seed=seed)


#: Samplers that keep history-dependent state besides their random states (GPSampler warm-starts
#: each GP fit from the previous one's kernel parameters): built afresh for every ask.
_FRESH_PER_ASK = (GPSettings, BayesianOptimizationSettings)


def reseed(sampler: BaseSampler, seed: int) -> None:
    """Seed every random state of ``sampler`` and of the samplers it holds with ``seed``: the state
    ``make_sampler(..., seed)`` starts with (each of Optuna's samplers seeds all of its
    ``LazyRandomState``s, and its nested independent sampler, with the one ``seed`` it is given)."""
    if not _reseed(sampler, seed):
        raise TypeError(
            f"{type(sampler).__name__}: no random state found to seed (Optuna internals changed?)"
        )


def _reseed(sampler: BaseSampler, seed: int) -> int:
    found = 0
    for value in vars(sampler).values():
        if isinstance(value, LazyRandomState):
            value.rng.seed(seed)
            found += 1
        elif isinstance(value, BaseSampler):
            found += _reseed(value, seed)
    return found


class AskSamplers:
    """The sampler for each ask of one experiment (not thread-safe: the registry serialises asks)."""

    def __init__(
        self, algorithm: str, settings: AlgorithmSettings, seed: int, space: dict[str, BaseDistribution]
    ) -> None:
        self._algorithm = algorithm
        self._settings = settings
        self._space = space
        self._seed = seed
        fresh = isinstance(settings, _FRESH_PER_ASK)
        self._kept = None if fresh else make_sampler(algorithm, settings, seed, space)
        # ``random`` draws Katib's stream (SpaceRandomSampler.position_stream): the experiment's seed
        # itself, positioned by the ask's index, instead of a seed derived per ask.
        # ``multivariate-tpe`` reads Katib's two streams the same way (KatibTPESampler.position_stream).
        # ``tpe`` too (the same sampler, independent).
        katib_streams = (RandomSettings, MultivariateTPESettings, TPESettings)
        self._stream_seed = seed if type(settings) in katib_streams else None

    @property
    def streams(self) -> bool:
        """Whether asks read the experiment's streams (``random``, ``multivariate-tpe``, ``cmaes``):
        ``for_ask`` ignores their seed."""
        return self._stream_seed is not None or isinstance(self._kept, KeptCmaEsSampler)

    def for_ask(self, seed: int, index: int) -> BaseSampler:
        """The sampler for ask number ``index``, whose derived seed is ``seed``."""
        if self._kept is None:
            return make_sampler(self._algorithm, self._settings, seed, self._space)
        if self._stream_seed is not None and isinstance(self._kept, (SpaceRandomSampler, KatibTPESampler)):
            self._kept.position_stream(self._stream_seed, index)
            return self._kept
        if isinstance(self._kept, KeptCmaEsSampler):
            return self._kept  # continues Katib's streams itself (see ``_cma``)
        reseed(self._kept, seed)
        return self._kept


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
