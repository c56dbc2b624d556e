"""Per-experiment studies keyed by experiment name; thread-safe for the gRPC thread pool."""

from __future__ import annotations

import dataclasses
import logging
import threading
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import optuna
import sqlalchemy
from optuna.storages import BaseStorage

from katib_progress.suggestion._checks import check_experiment
from katib_progress.suggestion._domain import ExperimentSpec, ReportedTrial, Suggestion
from katib_progress.suggestion._names import new_incarnation
from katib_progress.suggestion._study import CurveSource, ExperimentStudy, spec_fingerprint

_log = logging.getLogger(__name__)


def open_storage(url: str | None) -> BaseStorage | None:
    """An Optuna storage for ``url`` (``None``: each study in memory)."""
    if url is None:
        return None
    if not url.startswith("sqlite"):
        return optuna.storages.RDBStorage(url)
    # The gRPC pool writes from several threads: wait for SQLite's lock instead of failing.
    storage = optuna.storages.RDBStorage(url, engine_kwargs={"connect_args": {"timeout": 60}})
    # WAL lets optuna-dashboard read while we write; synchronous=NORMAL drops the fsync per
    # commit (a crash may lose the last commits, which Katib's next request restores).
    sqlalchemy.event.listen(storage.engine, "connect", _sqlite_pragmas)
    storage.engine.dispose()
    return storage


def _sqlite_pragmas(connection: Any, _record: Any) -> None:
    cursor = connection.cursor()
    cursor.execute("PRAGMA journal_mode=WAL")
    cursor.execute("PRAGMA synchronous=NORMAL")
    cursor.close()


@dataclass(frozen=True, slots=True)
class Suggested:
    """New trials, and the incarnation of the study that made them (for Katib to keep)."""

    suggestions: list[Suggestion]
    incarnation: str


@dataclass
class _Slot:
    lock: threading.Lock = field(default_factory=threading.Lock)
    study: ExperimentStudy | None = None
    #: the last spec whose fingerprint matched ``study``'s: Katib sends the same spec in every
    #: request, and comparing it costs a fraction of computing its fingerprint (a JSON dump).
    spec: ExperimentSpec | None = None


class StudyRegistry:
    """Holds one ``ExperimentStudy`` per experiment; calls for one experiment are serialised,
    different experiments proceed in parallel."""

    def __init__(self, storage: str | None = None, *, curve_source: CurveSource | None = None) -> None:
        optuna.logging.set_verbosity(optuna.logging.WARNING)
        self._storage = open_storage(storage)
        self._curves = curve_source
        self._lock = threading.Lock()
        self._slots: dict[str, _Slot] = {}

    def validate(self, spec: ExperimentSpec) -> None:
        """Raise ``InvalidExperimentError`` listing every problem of ``spec``."""
        check_experiment(spec)

    def suggest(
        self, spec: ExperimentSpec, trials: Sequence[ReportedTrial], count: int, total: int = 0
    ) -> Suggested:
        """Sync Katib's ``trials`` into the experiment's study and return ``count`` new trials.

        A request without an incarnation comes from an Experiment Katib has not recorded one for yet
        (just created, or created again under the same name): it starts a new study under a new
        incarnation, which the reply carries back to Katib (see ``_names``)."""
        if not spec.incarnation:
            spec = dataclasses.replace(spec, incarnation=new_incarnation())
        with self._lock:
            slot = self._slots.setdefault(spec.name, _Slot())
        with slot.lock:
            study = slot.study
            if study is not None and study.incarnation != spec.incarnation:
                _log.info("experiment %r was created again; starting a new study", spec.name)
                study = None
            if study is None or (spec != slot.spec and study.fingerprint != spec_fingerprint(spec)):
                if study is not None:
                    _log.warning("experiment %r changed its search; starting a new study", spec.name)
                checked = check_experiment(spec, creating=False)
                study = ExperimentStudy(checked, storage=self._storage, curve_source=self._curves)
                slot.study = study
                _log.info(
                    "experiment %r: %s study started, %d trials reported",
                    spec.name,
                    spec.algorithm,
                    len(trials),
                )
            slot.spec = spec
            study.sync(trials)
            return Suggested(study.suggest(count, total), spec.incarnation)

    def study(self, experiment: str) -> ExperimentStudy | None:
        """The experiment's study, every trial written to its Optuna study (``materialise``)."""
        with self._lock:
            slot = self._slots.get(experiment)
        if slot is None:
            return None
        with slot.lock:
            if slot.study is not None:
                slot.study.materialise()
            return slot.study
