"""One experiment's Optuna study, kept in step with the trial list Katib sends.

Katib sends every trial in every GetSuggestions request, so the study can always be rebuilt from
the request alone: trials are identified by name, never by their assignments; trials this
service named carry a seeded index (``_names``) that restores their original order after a
restart; trials it issued that Katib has not reported yet stay RUNNING.

``random`` and ``hyperband`` (in memory) take a fast path: their suggestion ``k`` is a function of
(random_state, k) alone (``_samplers.AskSamplers.for_ask``), so no Optuna trial is made or told per
request. What the general path would write to the study is recorded in plain objects and written
to the Optuna study when it is first read (``ExperimentStudy.study``); from then on the study takes
the general path.
"""

from __future__ import annotations

import json
import logging
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import optuna
from optuna.storages import BaseStorage
from optuna.study._tell import _tell_with_warning
from optuna.trial import FrozenTrial

from katib_progress.suggestion._ask import ask_trial, sample_params
from katib_progress.suggestion._checks import CheckedExperiment, resource_value
from katib_progress.suggestion._domain import (
    Direction,
    ExperimentSpec,
    ParamSpec,
    ReportedTrial,
    Suggestion,
    TrialRecord,
    TrialState,
)
from katib_progress.suggestion._names import NameIndex, derive_seed
from katib_progress.suggestion._random import SpaceRandomSampler
from katib_progress.suggestion._samplers import AskSamplers, qmc_point
from katib_progress.suggestion._settings import HyperbandSettings, QMCSettings, RandomSettings

_log = logging.getLogger(__name__)

NAME_ATTR = "katib_trial_name"
INDEX_ATTR = "katib_progress_index"
SPEC_ATTR = "katib_progress_spec"
INCARNATION_ATTR = "katib_progress_incarnation"
_NAME_HORIZON_SLACK = 1024

_STATES = {
    TrialState.COMPLETE: optuna.trial.TrialState.COMPLETE,
    TrialState.PRUNED: optuna.trial.TrialState.PRUNED,
    TrialState.FAIL: optuna.trial.TrialState.FAIL,
    TrialState.RUNNING: optuna.trial.TrialState.RUNNING,
}


class CurveSource(Protocol):
    """Live learning curves of trials (the pruning hub): ``[(progress %, objective value)]``."""

    def curve(self, experiment: str, trial: str) -> list[tuple[float, float]]: ...


@dataclass(frozen=True, slots=True)
class _Outcome:
    state: optuna.trial.TrialState
    value: float | None
    intermediate: dict[int, float]


@dataclass(slots=True)
class _Recorded:
    """A trial of the fast path: what the general path writes to the Optuna study for it."""

    params: dict[str, Any]
    attrs: dict[str, Any]
    #: how the general path creates it: ``asked`` (suggested here), ``enqueued`` (first reported
    #: RUNNING: enqueued and asked), ``added`` (first reported finished: added finished)
    origin: str
    outcome: _Outcome | None = None  # None: RUNNING


#: Algorithms whose suggestions depend on (random_state, trial index) only: ``random`` reads Katib's
#: stream positioned from the index, ``hyperband`` reseeds from (random_state, index) and fixes the
#: resource (``_samplers.AskSamplers.for_ask``); neither sampler reads the study.
_FAST = (RandomSettings, HyperbandSettings)


def _param_key(p: ParamSpec) -> list[Any]:
    dist = p.distribution.value if p.distribution else None
    return [p.name, p.type.value if p.type else None, p.min, p.max, p.step, list(p.values), dist]


def spec_fingerprint(spec: ExperimentSpec) -> str:
    """What identifies an experiment's search (trial counts excluded: users may edit them)."""
    return json.dumps(
        {
            "algorithm": spec.algorithm,
            "settings": sorted(spec.settings),
            "params": [_param_key(p) for p in spec.params],
            "objective": spec.objective_metric,
            "direction": spec.direction.value if spec.direction else None,
        },
        sort_keys=True,
    )


class ExperimentStudy:
    """Not thread-safe: the registry serialises calls per experiment."""

    def __init__(
        self,
        checked: CheckedExperiment,
        *,
        storage: BaseStorage | None = None,
        curve_source: CurveSource | None = None,
    ) -> None:
        self.checked = checked
        spec = checked.spec
        self.fingerprint = spec_fingerprint(spec)
        self._curves = curve_source
        self.incarnation = spec.incarnation
        self._names = NameIndex(spec.name, checked.seed, spec.incarnation)
        self._distributions = checked.space.distributions()
        self._samplers = AskSamplers(spec.algorithm, checked.settings, checked.seed, self._distributions)
        direction = (
            optuna.study.StudyDirection.MAXIMIZE
            if spec.direction is Direction.MAXIMIZE
            else optuna.study.StudyDirection.MINIMIZE
        )
        if storage is not None:
            self._drop_stale(storage, spec.name)
        self._study = optuna.create_study(
            storage=storage,
            study_name=spec.name,
            direction=direction,
            load_if_exists=True,
            sampler=optuna.samplers.RandomSampler(seed=checked.seed),
        )
        self._study.set_user_attr(SPEC_ATTR, self.fingerprint)
        self._study.set_user_attr(INCARNATION_ATTR, self.incarnation)
        self._number: dict[str, int] = {}  # trial name -> study trial number
        self._open: dict[str, optuna.Trial | _Recorded] = {}  # names of RUNNING trials -> their handle
        self._unusable: set[str] = set()
        self._seen: set[str] = set()  # names Katib has reported
        self._n_trials = 0
        self._next_index = 0
        self._last: tuple[int, int, tuple[Suggestion, ...]] | None = None
        # the fast path's trials in study order, until the study is read (in memory only: a
        # storage is read by others, optuna-dashboard and a restarted service)
        fast = storage is None and type(checked.settings) in _FAST
        self._recorded: list[_Recorded] | None = [] if fast else None
        self._resource: dict[str, Any] | None = None  # hyperband: the resource parameter's value
        if isinstance(checked.settings, HyperbandSettings):
            param = checked.space.by_name()[checked.settings.resource_name]
            self._resource = {param.name: param.parse(resource_value(param, checked.settings.r_l))}
        self._load()

    @property
    def study(self) -> optuna.Study:
        """The Optuna study holding every trial recorded so far (the fast path's written first)."""
        self.materialise()
        return self._study

    def materialise(self) -> None:
        """Write the fast path's trials to the Optuna study as the general path would have (each
        created, then told, by the same calls: same numbers, params, attributes, states, values and
        intermediate values; the start and end times are those of this write) and go on with the
        general path."""
        recorded, self._recorded = self._recorded, None
        if not recorded:
            return
        study = self._study
        sampler = study.sampler  # the last ask's, as the general path leaves it
        study.sampler = optuna.samplers.RandomSampler(seed=0)  # params are all fixed
        for kept in recorded:
            name = kept.attrs[NAME_ATTR]
            outcome = kept.outcome
            if kept.origin == "added":
                assert outcome is not None
                study.add_trial(
                    optuna.trial.create_trial(
                        state=outcome.state,
                        value=outcome.value,
                        params=kept.params,
                        distributions=self._distributions,
                        user_attrs=kept.attrs,
                        intermediate_values=outcome.intermediate,
                    )
                )
                continue
            if kept.origin == "enqueued":
                study.enqueue_trial(kept.params, user_attrs=kept.attrs, skip_if_exists=False)
                handle = study.ask(self._distributions)
            else:
                handle = ask_trial(study, self._distributions, kept.attrs, kept.params)[0]
            if outcome is None:
                self._open[name] = handle
            else:
                self._close(handle, outcome)
        study.sampler = sampler

    # -- loading ---------------------------------------------------------------------------

    def _drop_stale(self, storage: BaseStorage, name: str) -> None:
        try:
            old = optuna.load_study(study_name=name, storage=storage)
        except KeyError:
            return
        if old.user_attrs.get(SPEC_ATTR) != self.fingerprint:
            _log.warning("stored study %r belongs to a different experiment spec; replacing it", name)
            optuna.delete_study(study_name=name, storage=storage)
        elif old.user_attrs.get(INCARNATION_ATTR, "") != self.incarnation:
            # the Experiment was deleted and created again under the same name (see _names)
            _log.info("stored study %r belongs to an earlier Experiment of that name; replacing it", name)
            optuna.delete_study(study_name=name, storage=storage)

    def _load(self) -> None:
        trials = self._study.get_trials(deepcopy=False)
        self._n_trials = len(trials)
        for trial in trials:
            name = trial.user_attrs.get(NAME_ATTR)
            if not isinstance(name, str):
                continue
            self._number[name] = trial.number
            index = trial.user_attrs.get(INDEX_ATTR)
            if isinstance(index, int):
                self._next_index = max(self._next_index, index + 1)
            if trial.state is optuna.trial.TrialState.RUNNING:
                self._open[name] = optuna.Trial(self._study, trial._trial_id)
        if trials:
            _log.info("loaded study %r with %d trials from storage", self._study.study_name, len(trials))

    # -- syncing Katib's trial list --------------------------------------------------------

    def sync(self, trials: Sequence[ReportedTrial]) -> None:
        """Record what Katib reports: new trials are added, finished ones are told."""
        current = {t.name for t in trials}
        self._tell_vanished(current)
        self._seen.update(current)
        # one pass: the open trials Katib reports finished (told after the new ones are added, a
        # new trial being added finished if it is), and the new trials
        opened, known, unusable = self._open, self._number, self._unusable
        ending: list[tuple[ReportedTrial, optuna.Trial | _Recorded]] = []
        new: list[ReportedTrial] = []
        for t in trials:
            handle = opened.get(t.name)
            if handle is not None:
                if t.state.finished:
                    ending.append((t, handle))
            elif t.name not in known and t.name not in unusable:
                new.append(t)
        if new:
            horizon = 2 * (len(trials) + self._n_trials) + _NAME_HORIZON_SLACK
            ours = self._names.lookup((t.name for t in new), horizon)
            foreign = sorted((t for t in new if t.name not in ours), key=lambda t: t.name)
            mine = sorted((t for t in new if t.name in ours), key=lambda t: ours[t.name])
            self._study.sampler = optuna.samplers.RandomSampler(seed=0)  # params are all fixed
            for record in [*foreign, *mine]:
                self._add(record, ours.get(record.name))
        for record, handle in ending:
            self._finish(record, handle)

    def _tell_vanished(self, current: set[str]) -> None:
        """Katib never sends back a trial that ended MetricsUnavailable, or EarlyStopped without an
        observation (pkg/controller.v1beta1/suggestion/suggestionclient/suggestionclient.go
        ``ConvertTrials``). A RUNNING trial that an earlier request reported and this one lacks has
        ended so: PRUNED with its curve if the pruning hub has one, FAIL otherwise."""
        for name in [n for n in self._open if n in self._seen and n not in current]:
            handle = self._open.pop(name)
            curve = self._curve(TrialRecord(name, (), TrialState.PRUNED))
            if curve:
                # Optuna's tell gives a PRUNED trial told without a value its last intermediate
                # value (optuna/study/_tell.py ``_tell_with_warning``), as ``_outcome`` does
                self._close(handle, _Outcome(optuna.trial.TrialState.PRUNED, curve[max(curve)], curve))
            else:
                self._close(handle, _Outcome(optuna.trial.TrialState.FAIL, None, {}))
            _log.info(
                "trial %s is no longer reported by Katib (MetricsUnavailable, or EarlyStopped without an "
                "observation): recorded as %s",
                name,
                "pruned" if curve else "failed",
            )

    def _params(self, record: ReportedTrial) -> dict[str, Any] | None:
        given = dict(record.assignments)
        params: dict[str, Any] = {}
        for param in self.checked.space.params:
            if param.name not in given:
                _log.warning("trial %s lacks parameter %r; not recorded", record.name, param.name)
                return None
            try:
                params[param.name] = param.parse(given[param.name])
            except ValueError as exc:
                _log.warning("trial %s not recorded in the study: %s", record.name, exc)
                return None
        return params

    def _add(self, record: ReportedTrial, index: int | None) -> None:
        params = self._params(record)
        if params is None:
            self._unusable.add(record.name)
            return
        attrs: dict[str, Any] = {NAME_ATTR: record.name}
        if index is not None:
            attrs[INDEX_ATTR] = index
            self._next_index = max(self._next_index, index + 1)
        if self._recorded is not None:
            outcome = self._outcome(record) if record.state.finished else None
            kept = _Recorded(params, attrs, "enqueued" if outcome is None else "added", outcome)
            self._recorded.append(kept)
            if outcome is None:
                self._open[record.name] = kept
        elif record.state.finished:
            outcome = self._outcome(record)
            self._study.add_trial(
                optuna.trial.create_trial(
                    state=outcome.state,
                    value=outcome.value,
                    params=params,
                    distributions=self.checked.space.distributions(),
                    user_attrs=attrs,
                    intermediate_values=outcome.intermediate,
                )
            )
        else:
            self._study.enqueue_trial(params, user_attrs=attrs, skip_if_exists=False)
            self._open[record.name] = self._study.ask(self._distributions)
        self._number[record.name] = self._n_trials
        self._n_trials += 1

    def _finish(self, record: ReportedTrial, handle: optuna.Trial | _Recorded) -> None:
        self._close(handle, self._outcome(record))
        del self._open[record.name]

    def _close(self, handle: optuna.Trial | _Recorded, outcome: _Outcome) -> None:
        """Report ``outcome``'s intermediate values and tell its state (a PRUNED trial's value is
        its last intermediate value, which Optuna's tell takes when given none)."""
        if isinstance(handle, _Recorded):
            handle.outcome = outcome
            return
        for step, value in sorted(outcome.intermediate.items()):
            handle.report(value, step)
        if outcome.state is optuna.trial.TrialState.COMPLETE:
            self._tell(handle, outcome.value)
        else:
            self._tell(handle, state=outcome.state)

    def _tell(
        self, handle: optuna.Trial, value: float | None = None, state: optuna.trial.TrialState | None = None
    ) -> None:
        """``Study.tell`` without the deep copy of the finished trial it returns (optuna/study/
        study.py ``Study.tell`` = ``_tell_with_warning`` + ``copy.deepcopy``): every trial Katib
        reported finished was deep-copied for a return value nobody read."""
        _tell_with_warning(study=self._study, trial=handle, value_or_values=value, state=state)

    def _objective(self, record: ReportedTrial) -> float | None:
        text = record.observation.get(self.checked.spec.objective_metric)
        if text is None:
            return None
        try:
            value = float(text)
        except ValueError:
            return None
        return value if math.isfinite(value) else None

    def _curve(self, record: ReportedTrial) -> dict[int, float]:
        if self._curves is None:
            return {}
        try:
            points = self._curves.curve(self.checked.spec.name, record.name)
        except (LookupError, ValueError) as exc:
            _log.info("no curve for trial %s: %s", record.name, exc)
            return {}
        return {round(p): float(v) for p, v in points if math.isfinite(p) and math.isfinite(v)}

    def _outcome(self, record: ReportedTrial) -> _Outcome:
        state = _STATES[record.state]
        value = self._objective(record)
        if record.state is TrialState.COMPLETE:
            if value is None:
                _log.warning(
                    "trial %s succeeded without a finite %r; recorded as failed",
                    record.name,
                    self.checked.spec.objective_metric,
                )
                return _Outcome(optuna.trial.TrialState.FAIL, None, {})
            return _Outcome(state, value, {})
        if record.state is TrialState.PRUNED:
            curve = self._curve(record) or ({0: value} if value is not None else {})
            last = curve[max(curve)] if curve else None
            return _Outcome(state, last, curve)
        return _Outcome(state, None, {})

    # -- asking ----------------------------------------------------------------------------

    def suggest(self, count: int, total: int) -> list[Suggestion]:
        """``count`` new trials. A repeated request (same total and count, previous reply not seen
        back) is a retry by Katib after failing to record our reply: it gets the same reply."""
        last = self._last
        if (
            last is not None
            and total > 0
            and last[:2] == (total, count)
            and not any(s.trial_name in self._seen for s in last[2])
        ):
            _log.info("repeated request (total %d, count %d): same reply", total, count)
            return list(last[2])
        if total > 0:
            # Katib has recorded ``total - count`` suggestions; after a restart some may not be
            # trials yet (so not in the request): never hand out their names again.
            self._next_index = max(self._next_index, total - count)
        out = tuple(self._ask_one() for _ in range(count))
        self._last = (total, count, out)
        return list(out)

    def _fresh_name(self) -> tuple[int, str]:
        while True:
            index = self._next_index
            self._next_index += 1
            name = self._names.name(index)
            if name not in self._number and name not in self._unusable:
                return index, name

    def _ask_one(self) -> Suggestion:
        checked = self.checked
        index, name = self._fresh_name()
        seed = 0 if self._samplers.streams else derive_seed(checked.seed, "ask", index)
        attrs: dict[str, Any] = {NAME_ATTR: name, INDEX_ATTR: index}
        fixed: dict[str, Any] | None = None
        if checked.grid is not None:
            fixed = checked.grid.pick(self._study.get_trials(deepcopy=False))
        elif isinstance(checked.settings, QMCSettings):
            fixed = qmc_point(checked.space, checked.settings, checked.seed, index)
        elif self._resource is not None:
            fixed = self._resource
        sampler = self._samplers.for_ask(seed, index)
        self._study.sampler = sampler
        if self._recorded is not None:
            assert isinstance(sampler, SpaceRandomSampler)
            params = sample_params(sampler, self._distributions, fixed)
            kept = _Recorded(params, attrs, "asked")
            self._recorded.append(kept)
            self._open[name] = kept
            self._number[name] = self._n_trials
        else:
            trial, params = ask_trial(self._study, self._distributions, attrs, fixed)
            self._open[name] = trial
            self._number[name] = trial.number
        self._n_trials += 1
        assignments = tuple((p.name, p.format(params[p.name])) for p in checked.space.params)
        return Suggestion(name, assignments)

    def trials(self) -> list[FrozenTrial]:
        return self.study.get_trials(deepcopy=True)
