"""``cmaes``: CMA-ES whose optimizer stays in memory between asks (one per experiment).

Optuna's ``CmaEsSampler`` (optuna/samplers/_cmaes.py) keeps its optimizer pickled in trial system
attributes: every ask scans all trials for the newest stored optimizer, unpickles it, scans them
again for the current generation's trials and pickles it back after a tell. At 1,000 trials that
repeated work cost more than the rest of the call. This sampler runs the same algorithm on the
same ``cmaes.CMA`` optimizer with Optuna's rules (cited below) and keeps the optimizer object.

What it keeps is a function of the study's trials, so it can be rebuilt: each trial it samples
carries its generation (system attribute ``kp:cma:generation``), and the trial whose ask told a
generation carries the numbers of the trials told (``kp:cma:told``). With ``--storage`` a restarted
service replays those tells in order and continues exactly. A study rebuilt from Katib's trial
list (no attributes) starts a new CMA-ES run over it, as Optuna's sampler does.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import optuna
from optuna._transform import _SearchSpaceTransform
from optuna.distributions import BaseDistribution, FloatDistribution, IntDistribution
from optuna.samplers import BaseSampler
from optuna.samplers._lazy_random_state import LazyRandomState
from optuna.study import StudyDirection
from optuna.trial import FrozenTrial, TrialState

from katib_progress.suggestion._random import SpaceRandomSampler, Untransform

GENERATION_ATTR = "kp:cma:generation"
TOLD_ATTR = "kp:cma:told"


class KeptCmaEsSampler(BaseSampler):
    """CMA-ES over the double/int parameters of a fixed search space; other parameters are sampled
    at random (``CmaEsSampler`` samples what CMA-ES can't handle with its independent
    ``RandomSampler``). Not thread-safe: the registry serialises asks per experiment."""

    def __init__(
        self, space: dict[str, BaseDistribution], *, sigma0: float | None = None, seed: int | None = None
    ) -> None:
        # CmaEsSampler.infer_relative_search_space: float and int parameters with more than one value.
        self._space: dict[str, BaseDistribution] = {
            name: dist
            for name, dist in space.items()
            if isinstance(dist, (FloatDistribution, IntDistribution)) and not dist.single()
        }
        # CmaEsSampler.sample_relative: transform_step=True, transform_0_1=True (bounds [0, 1]).
        self._trans = _SearchSpaceTransform(self._space, transform_step=True, transform_0_1=True)
        self._untransform = Untransform(self._space, self._trans)
        self._sigma0 = sigma0
        self._rng = LazyRandomState(seed)
        # Parameters CMA-ES doesn't handle, and all of them until a trial has completed, are
        # sampled at random (CmaEsSampler's independent sampler is a RandomSampler).
        self._random = SpaceRandomSampler(space, seed=seed)
        self._full = dict(space)
        # Only the per-ask seed below reaches the optimizer's sampling, so this seed changes nothing
        # a suggestion depends on; it is fixed per experiment so a replay builds the same object.
        self._init_seed = int(np.random.RandomState(seed).randint(1, 2**31 - 2))
        # cmaes imports SciPy (0.7 s): when the experiment's study is made, not in a later call.
        import cmaes

        self._cma_class: Any = cmaes.CMA
        self._cma: Any = None
        self._members: dict[int, list[int]] = {}  # generation -> trial ids sampled in it, in order
        self._replayed = False

    def reseed_rng(self) -> None:
        self._rng.rng.seed()
        self._random.reseed_rng()

    def infer_relative_search_space(
        self, study: optuna.Study, trial: FrozenTrial
    ) -> dict[str, BaseDistribution]:
        return dict(self._full)

    def sample_independent(
        self, study: optuna.Study, trial: FrozenTrial, param_name: str, param_distribution: BaseDistribution
    ) -> Any:
        return self._random.sample_independent(study, trial, param_name, param_distribution)

    def sample_relative(
        self, study: optuna.Study, trial: FrozenTrial, search_space: dict[str, BaseDistribution]
    ) -> dict[str, Any]:
        values = self._random.sample_relative(study, trial, search_space)
        if not self._space:
            return values
        if self._cma is None:
            if not self._replayed:
                self._replayed = True
                self._replay(study)
            # CmaEsSampler(n_startup_trials=1): independent sampling until a trial has completed.
            if self._cma is None:
                if not study.get_trials(deepcopy=False, states=(TrialState.COMPLETE,)):
                    return values
                self._cma = self._new_optimizer()
        cma = self._cma
        storage = study._storage
        # CmaEsSampler._get_solution_trials + sample_relative: once population_size trials of the
        # current generation have completed, the first population_size of them (by trial number)
        # are told; values are negated when maximising.
        done = [
            t
            for t in (storage.get_trial(i) for i in self._members.get(cma.generation, ()))
            if t.state is TrialState.COMPLETE
        ]
        if len(done) >= cma.population_size:
            told = done[: cma.population_size]
            self._tell(cma, told, study.direction)
            del self._members[cma.generation - 1]
            storage.set_trial_system_attr(trial._trial_id, TOLD_ATTR, [t.number for t in told])
        # CmaEsSampler.sample_relative: "optimizer should update its seed value" before each ask.
        cma._rng.seed(self._rng.rng.randint(1, 2**16) + trial.number)
        x = cma.ask()
        storage.set_trial_system_attr(trial._trial_id, GENERATION_ATTR, cma.generation)
        self._members.setdefault(cma.generation, []).append(trial._trial_id)
        values.update(self._untransform(x))
        return values

    def _new_optimizer(self) -> Any:
        # CmaEsSampler._init_optimizer: mean at the centre of the bounds, sigma0 = min range / 6
        # unless given, n_max_resampling = 10 * dimensions, cmaes' default population size.
        bounds = self._trans.bounds
        lower, upper = bounds[:, 0], bounds[:, 1]
        sigma0 = float(np.min((upper - lower) / 6)) if self._sigma0 is None else self._sigma0
        return self._cma_class(
            mean=lower + (upper - lower) / 2,
            sigma=max(sigma0, 1e-10),
            bounds=bounds,
            seed=self._init_seed,
            n_max_resampling=10 * len(bounds),
        )

    def _tell(self, cma: Any, trials: list[FrozenTrial], direction: StudyDirection) -> None:
        sign = 1.0 if direction == StudyDirection.MINIMIZE else -1.0
        solutions = []
        for t in trials:
            assert t.value is not None and math.isfinite(t.value), "completed trials have a value"
            solutions.append((self._trans.transform(t.params), sign * t.value))
        cma.tell(solutions)

    def _replay(self, study: optuna.Study) -> None:
        """Rebuild the optimizer from the attributes of a reloaded study (``--storage``)."""
        trials = study.get_trials(deepcopy=False)
        by_number = {t.number: t for t in trials}
        tells = [t.system_attrs[TOLD_ATTR] for t in trials if TOLD_ATTR in t.system_attrs]
        sampled = [t for t in trials if GENERATION_ATTR in t.system_attrs]
        if not sampled:
            return
        cma = self._new_optimizer()
        for numbers in tells:
            self._tell(cma, [by_number[n] for n in numbers], study.direction)
        for t in sampled:
            self._members.setdefault(int(t.system_attrs[GENERATION_ATTR]), []).append(t._trial_id)
        self._cma = cma
