"""``Study.ask`` with a whole search space, without Optuna's per-parameter bookkeeping.

``Study.ask(fixed_distributions)`` (optuna/study/study.py) creates a RUNNING trial and then calls
``Trial._suggest`` (optuna/trial/_trial.py) once per parameter. Each of those copies the trial,
checks the distribution against the relative search space, and writes the one parameter to the
storage, which copies the trial again and checks the distribution against the study's. For the
five parameters of a small study that was about half the time of a GetSuggestions call.

``ask_trial`` makes the same choices in the same order (fixed value, single-valued distribution,
relative sample, independent sample; the relative sample drawn when the first parameter needs
it), so it returns the same values as ``Study.ask``, and writes the trial's attributes with the
trial and all its parameters at once (in memory: in one write after sampling).
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from datetime import datetime
from typing import Any

import optuna
from optuna import pruners
from optuna.distributions import BaseDistribution, _get_single_value, check_distribution_compatibility
from optuna.storages import InMemoryStorage
from optuna.trial import FrozenTrial, TrialState

from katib_progress.suggestion._random import SpaceRandomSampler


def ask_trial(
    study: optuna.Study,
    distributions: Mapping[str, BaseDistribution],
    user_attrs: Mapping[str, Any],
    fixed: Mapping[str, Any] | None = None,
) -> tuple[optuna.Trial, dict[str, Any]]:
    """A new RUNNING trial of ``study`` with ``user_attrs`` and a value for every parameter of
    ``distributions`` (``fixed`` ones as given, the rest from ``study.sampler``); returns the trial
    and its params (the values the sampler returned, as ``Trial.params`` gives them)."""
    storage = study._storage
    # Study.ask: "Sync storage once every trial."
    study._thread_local.cached_all_trials = None
    in_memory = isinstance(storage, InMemoryStorage)
    if in_memory:
        # a plain new RUNNING trial (the template is deep-copied); attributes come with the params
        trial_id = storage.create_new_trial(study._study_id)
    else:
        template = FrozenTrial(
            number=-1,
            state=TrialState.RUNNING,
            value=None,
            datetime_start=datetime.now(),
            datetime_complete=None,
            params={},
            distributions={},
            user_attrs=dict(user_attrs),
            system_attrs={},
            intermediate_values={},
            trial_id=-1,
        )
        trial_id = storage.create_new_trial(study._study_id, template_trial=template)
    trial = optuna.Trial(study, trial_id)  # the sampler's before_trial
    # Trial._suggest adds each value to the trial's cached copy, which the next independent sample
    # sees; a copy of our own so that the storage's trial is not changed in place.
    cached = copy.copy(trial._cached_frozen_trial)
    cached.params = {}
    cached.distributions = {}
    trial._cached_frozen_trial = cached
    for name, dist in distributions.items():
        # Trial._suggest, in its order of choices
        if fixed is not None and name in fixed:
            value = fixed[name]
        elif dist.single():
            value = _get_single_value(dist)
        elif _is_relative(trial, name, dist):
            value = trial.relative_params[name]
        else:
            value = study.sampler.sample_independent(
                pruners._filter_study(study, cached), trial._get_latest_trial(), name, dist
            )
        dist.to_internal_repr(value)  # Trial._suggest: raises ValueError on an invalid value (NaN)
        cached.distributions[name] = dist
        cached.params[name] = value
    cached.user_attrs = dict(user_attrs)
    if in_memory:
        assert isinstance(storage, InMemoryStorage)
        _write_in_memory(storage, trial_id, cached)
    else:
        for name, dist in cached.distributions.items():
            storage.set_trial_param(trial_id, name, dist.to_internal_repr(cached.params[name]), dist)
    return trial, cached.params


def sample_params(
    sampler: SpaceRandomSampler,
    distributions: Mapping[str, BaseDistribution],
    fixed: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """The params ``ask_trial`` gives a trial when ``study.sampler`` is ``sampler``, without a
    study or a trial: the same choices in the same order (fixed value, single-valued distribution,
    the relative sample drawn when the first parameter needs it if it holds a valid value, an
    independent sample otherwise). A ``SpaceRandomSampler`` reads neither the study nor the trial
    (its relative search space is its own fixed space, ``infer_relative_search_space``)."""
    params: dict[str, Any] = {}
    relative: dict[str, Any] | None = None
    for name, dist in distributions.items():
        if fixed is not None and name in fixed:
            value = fixed[name]
        elif dist.single():
            value = _get_single_value(dist)
        else:
            if relative is None:
                relative = sampler.draw()
            if name in relative and dist._contains(dist.to_internal_repr(relative[name])):
                value = relative[name]
            else:
                value = sampler.draw_one(name, dist)
        dist.to_internal_repr(value)  # Trial._suggest: raises ValueError on an invalid value (NaN)
        params[name] = value
    return params


def _is_relative(trial: optuna.Trial, name: str, dist: BaseDistribution) -> bool:
    """Trial._is_relative_param; the relative sample is drawn on the first call."""
    relative = trial.relative_params
    if name not in relative:
        return False
    space = trial.relative_search_space
    assert space is not None
    if name not in space:
        raise ValueError(
            f"The parameter {name} was sampled by `sample_relative` method "
            "but it is not contained in the relative search space."
        )
    if space[name] is not dist:
        check_distribution_compatibility(space[name], dist)
    return bool(dist._contains(dist.to_internal_repr(relative[name])))


def _write_in_memory(storage: InMemoryStorage, trial_id: int, trial: FrozenTrial) -> None:
    """Store ``trial``'s params and user attributes at once, as ``set_trial_param`` and
    ``set_trial_user_attr`` would one at a time (InMemoryStorage.set_trial_param, for every
    parameter: check the distribution against the study's, record it, replace the trial by a copy
    holding the value)."""
    with storage._lock:
        stored = storage._get_trial(trial_id)
        storage.check_trial_is_updatable(trial_id, stored.state)
        study_id = storage._trial_id_to_study_id_and_number[trial_id][0]
        known = storage._studies[study_id].param_distribution
        stored = copy.copy(stored)
        stored.params = dict(stored.params)
        stored.distributions = dict(stored.distributions)
        stored.user_attrs = {**stored.user_attrs, **trial.user_attrs}
        for name, dist in trial.distributions.items():
            previous = known.get(name)
            if previous is not None and previous is not dist:
                check_distribution_compatibility(previous, dist)
            known[name] = dist
            stored.params[name] = dist.to_external_repr(dist.to_internal_repr(trial.params[name]))
            stored.distributions[name] = dist
        storage._set_trial(trial_id, stored)
