"""``cmaes``: CMA-ES whose optimizer stays in memory between asks (one per experiment).

Optuna's ``CmaEsSampler`` (optuna/samplers/_cmaes.py) keeps its optimizer pickled in trial system
attributes: every ask scans all trials for the newest stored optimizer, unpickles it, scans them
again for the current generation's trials and pickles it back after a tell. At 1,000 trials that
repeated work cost more than the rest of the call. This sampler runs the same algorithm on the
same ``cmaes.CMA`` optimizer with Optuna's rules (cited below) and keeps the optimizer object.

It also draws Katib's random streams and asks from the optimizer state Optuna's sampler would ask
from. Katib's service (pkg/suggestion/v1beta1/optuna/base_service.py ``_create_sampler``) keeps one
``CmaEsSampler(seed=random_state)`` per experiment, so its suggestions come from two streams seeded
once: the sampler's ``_cma_rng`` (one ``randint(1, 2**31 - 2)`` whenever ``_init_optimizer`` builds an
optimizer, one ``randint(1, 2**16)`` per CMA-ES ask, added to the trial number to seed the
optimizer's own ``_rng``) and its independent ``RandomSampler(seed=random_state)`` (every parameter of
the start-up ask, then the parameters CMA-ES doesn't handle). Optuna 3.3 (Katib's image) and 5.0
consume them alike. Optuna builds an optimizer on every ask while no COMPLETE trial holds a stored
one: it restores the optimizer stored on the newest completed trial that holds one
(``_restore_optimizer``) and stores one on every trial whose ask told a generation; an ask whose
restored optimizer is behind tells that generation again. Here the trials Optuna would have stored
an optimizer on are recorded with the generation stored, which decides the extra draw and which
covariance an ask starts from (see ``_tell``). So with the same ``random_state`` an experiment gets
Katib's suggestions (tested against the installed Optuna's ``CmaEsSampler`` driven as Katib drives
it, sequential and 3 in parallel with failures). One case differs: when a generation is told again
from a restored optimizer after more of its trials completed, Optuna takes the first population-size
of them by number then, this sampler took those complete when it first told it (trials that finish
out of order).

What it keeps is a function of the study's trials, so it can be rebuilt: each trial it samples
carries its generation (system attribute ``kp:cma:generation``), the trial whose ask told a
generation carries the numbers of the trials told (``kp:cma:told``), and every trial it asked
carries what the streams had given by then. With ``--storage`` a restarted service replays those in
order and continues exactly. A study rebuilt from Katib's trial list (no attributes) starts a new
CMA-ES run over it with both streams from their start, as Optuna's sampler would.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import optuna
from optuna._transform import _SearchSpaceTransform
from optuna.distributions import (
    BaseDistribution,
    FloatDistribution,
    IntDistribution,
    _get_single_value,
)
from optuna.samplers import BaseSampler
from optuna.samplers._lazy_random_state import LazyRandomState
from optuna.study import StudyDirection
from optuna.trial import FrozenTrial, TrialState

from katib_progress.suggestion._random import SpaceRandomSampler, Untransform

GENERATION_ATTR = "kp:cma:generation"
TOLD_ATTR = "kp:cma:told"
#: On a trial whose ask Optuna's sampler would have stored an optimizer on (it told a generation):
#: the generation stored.
HOLDS_ATTR = "kp:cma:holds"
#: On a CMA-ES ask that took ``_init_optimizer``'s seed draw.
INIT_ATTR = "kp:cma:init"
#: Values the independent random stream had given when this trial was asked.
DRAWN_ATTR = "kp:cma:drawn"


class KeptCmaEsSampler(BaseSampler):
    """CMA-ES over the double/int parameters of a fixed search space; other parameters are sampled
    at random (``CmaEsSampler`` samples what CMA-ES can't handle with its independent
    ``RandomSampler``). Not thread-safe: the registry serialises asks per experiment."""

    def __init__(
        self, space: dict[str, BaseDistribution], *, sigma0: float | None = None, seed: int | None = None
    ) -> None:
        # CmaEsSampler.infer_relative_search_space: float and int parameters with more than one
        # value, from IntersectionSearchSpace.calculate, which sorts them by name
        # (optuna/search_space/intersection.py): that order gives CMA-ES its coordinates.
        self._space: dict[str, BaseDistribution] = {
            name: space[name]
            for name in sorted(space)
            if isinstance(space[name], (FloatDistribution, IntDistribution)) and not space[name].single()
        }
        # CmaEsSampler.sample_relative: transform_step=True, transform_0_1=True (bounds [0, 1]).
        self._trans = _SearchSpaceTransform(self._space, transform_step=True, transform_0_1=True)
        self._untransform = Untransform(self._space, self._trans)
        self._sigma0 = sigma0
        # CmaEsSampler.__init__: ``_cma_rng = LazyRandomState(seed)`` and
        # ``_independent_sampler = RandomSampler(seed=seed)``.
        self._rng = LazyRandomState(seed)
        # The start-up asks draw every parameter (in the experiment's order, Trial._suggest); later
        # asks draw the parameters CMA-ES doesn't handle, from the same random state. Single-valued
        # ones take no draw (Trial._suggest takes their value).
        self._random = SpaceRandomSampler(space, seed=seed)
        self._rest_space = {n: d for n, d in space.items() if n not in self._space and not d.single()}
        self._rest = SpaceRandomSampler(self._rest_space, rng=self._random._rng)
        self._singles = {n: _get_single_value(d) for n, d in space.items() if d.single()}
        self._drawn = 0  # values the independent stream has given
        self._full = dict(space)
        # cmaes imports SciPy (0.7 s): when the experiment's study is made, not in a later call.
        import cmaes

        self._cma_class: Any = cmaes.CMA
        self._cma: Any = None
        self._members: dict[int, list[int]] = {}  # generation -> trial ids sampled in it, in order
        # (trial id, generation) of each trial Optuna would have stored an optimizer on, by number
        self._holders: list[tuple[int, int]] = []
        # the covariance after the last tell, and as Optuna gets it back from storage (see _tell)
        self._live: np.ndarray = np.zeros((0, 0))
        self._stored: np.ndarray = np.zeros((0, 0))
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
        if not self._replayed:
            self._replayed = True
            self._replay(study)
        storage = study._storage
        # CmaEsSampler(n_startup_trials=1): independent sampling until a trial has completed.
        if not self._space or (
            self._cma is None and not study.get_trials(deepcopy=False, states=(TrialState.COMPLETE,))
        ):
            values = self._random.sample_relative(study, trial, search_space)
            self._drawn += self._random.columns
            storage.set_trial_system_attr(trial._trial_id, DRAWN_ATTR, self._drawn)
            return values
        attrs: dict[str, Any] = {}
        # CmaEsSampler.sample_relative: ``_restore_optimizer`` returns the optimizer stored on the
        # newest COMPLETE trial that holds one; without one ``_init_optimizer`` builds a new one
        # (generation 0), drawing its seed from ``_cma_rng``.
        restored = self._restored_generation(storage)
        if restored is None:
            attrs[INIT_ATTR] = True
            seed = int(self._rng.rng.randint(1, 2**31 - 2))
            if self._cma is None:
                self._cma = self._new_optimizer(seed)
                self._live = self._stored = np.array(self._cma._C)
        cma = self._cma
        # CmaEsSampler._get_solution_trials + sample_relative: once population_size trials of the
        # current generation have completed, the first population_size of them (by trial number)
        # are told; values are negated when maximising. The optimizer is then stored on the trial.
        done = [
            t
            for t in (storage.get_trial(i) for i in self._members.get(cma.generation, ()))
            if t.state is TrialState.COMPLETE
        ]
        if len(done) >= cma.population_size:
            told = done[: cma.population_size]
            self._tell(cma, told, study.direction)
            del self._members[cma.generation - 1]
            attrs[TOLD_ATTR] = [t.number for t in told]
        # Optuna tells on this ask whenever the optimizer it restored (or built) is behind this
        # one: then it stores its optimizer on this trial and asks with the one it told.
        told_here = (restored or 0) < cma.generation
        if told_here:
            attrs[HOLDS_ATTR] = cma.generation
            self._holders.append((trial._trial_id, cma.generation))
        self._restore(cma, self._live if told_here else self._stored)
        # CmaEsSampler.sample_relative: "optimizer should update its seed value" before each ask.
        cma._rng.seed(self._rng.rng.randint(1, 2**16) + trial.number)
        x = cma.ask()
        values = self._untransform(x)
        attrs[GENERATION_ATTR] = cma.generation
        self._members.setdefault(cma.generation, []).append(trial._trial_id)
        if self._rest_space:
            values.update(self._rest.sample_relative(study, trial, self._rest_space))
            self._drawn += self._rest.columns
        values.update(self._singles)
        attrs[DRAWN_ATTR] = self._drawn
        for key, value in attrs.items():
            storage.set_trial_system_attr(trial._trial_id, key, value)
        return values

    def _restored_generation(self, storage: Any) -> int | None:
        """The generation of the optimizer Optuna's ``_restore_optimizer`` would return: the one
        stored on the newest COMPLETE trial holding one (``None``: no such trial)."""
        for trial_id, generation in reversed(self._holders):
            if storage.get_trial(trial_id).state is TrialState.COMPLETE:
                return generation
        return None

    def _new_optimizer(self, seed: int) -> Any:
        # CmaEsSampler._init_optimizer: mean at the centre of the bounds, sigma0 = min range / 6
        # unless given, n_max_resampling = 10 * dimensions, cmaes' default population size.
        bounds = self._trans.bounds
        lower, upper = bounds[:, 0], bounds[:, 1]
        sigma0 = float(np.min((upper - lower) / 6)) if self._sigma0 is None else self._sigma0
        return self._cma_class(
            mean=lower + (upper - lower) / 2,
            sigma=max(sigma0, 1e-10),
            bounds=bounds,
            seed=seed,
            n_max_resampling=10 * len(bounds),
        )

    def _tell(self, cma: Any, trials: list[FrozenTrial], direction: StudyDirection) -> None:
        """Tell ``trials`` to the optimizer as Optuna does: to the optimizer it restored."""
        sign = 1.0 if direction == StudyDirection.MINIMIZE else -1.0
        solutions = []
        for t in trials:
            assert t.value is not None and math.isfinite(t.value), "completed trials have a value"
            solutions.append((self._trans.transform(t.params), sign * t.value))
        self._restore(cma, self._stored)
        cma.tell(solutions)
        # cmaes pickles the covariance as its upper triangle and no eigendecomposition
        # (cmaes/_cma.py ``CMA.__getstate__`` / ``__setstate__``, ``_compress_symmetric``): an
        # optimizer Optuna unpickles samples with the upper triangle mirrored, which can differ
        # from the told covariance in the last bit below the diagonal. Optuna asks with the told
        # optimizer on the ask that told, with an unpickled one on every other ask; each ask
        # rewrites the covariance from its eigendecomposition (``CMA._eigen_decomposition``), so
        # every ask here starts from one of these two.
        self._live = np.array(cma._C)
        stored = np.array(self._live)
        upper = np.triu_indices(len(stored))
        stored[upper[1], upper[0]] = stored[upper]
        self._stored = stored

    @staticmethod
    def _restore(cma: Any, cov: np.ndarray) -> None:
        cma._C = np.array(cov)
        cma._B = cma._D = None

    def _replay(self, study: optuna.Study) -> None:
        """Rebuild the optimizer and the streams' positions from the attributes of a reloaded
        study (``--storage``); a study without them (new, or rebuilt from Katib's trial list)
        starts from the streams' beginning."""
        trials = study.get_trials(deepcopy=False)
        by_number = {t.number: t for t in trials}
        rng = self._rng.rng
        first_seed: int | None = None
        tells: list[list[int]] = []
        for t in trials:  # by number: the order they were asked in
            attrs = t.system_attrs
            self._drawn = max(self._drawn, int(attrs.get(DRAWN_ATTR, 0)))
            if GENERATION_ATTR not in attrs:
                continue
            if attrs.get(INIT_ATTR):
                drawn = int(rng.randint(1, 2**31 - 2))
                first_seed = drawn if first_seed is None else first_seed
            rng.randint(1, 2**16)
            if TOLD_ATTR in attrs:
                tells.append(attrs[TOLD_ATTR])
            if HOLDS_ATTR in attrs:
                self._holders.append((t._trial_id, int(attrs[HOLDS_ATTR])))
            self._members.setdefault(int(attrs[GENERATION_ATTR]), []).append(t._trial_id)
        if self._drawn:
            self._random._rng.rng.random_sample(self._drawn)
        if first_seed is None:
            self._members.clear()
            return
        cma = self._new_optimizer(first_seed)
        self._live = self._stored = np.array(cma._C)
        for numbers in tells:
            self._tell(cma, [by_number[n] for n in numbers], study.direction)
            self._members.pop(cma.generation - 1, None)
        self._cma = cma
