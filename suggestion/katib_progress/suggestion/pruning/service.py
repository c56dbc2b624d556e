"""gRPC edge of the pruning engine: ``katib_progress.pruning.v1.Pruning`` and the hub behind it.

Thin: proto -> domain -> engine -> proto. ``PruningHub`` keeps one ``PruningEngine`` per experiment
(built from the config the request carries, or from the settings Katib sent through its EarlyStopping
API) and serialises access to each engine with its own lock.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, TypeVar

import grpc

from katib_progress.core.errors import ConfigError
from katib_progress.core.types import Decision, ProgressPoint
from katib_progress.suggestion.pruning import _convert
from katib_progress.suggestion.pruning._history import ExperimentState, TrialState
from katib_progress.suggestion.pruning.config import PruningConfig
from katib_progress.suggestion.pruning.engine import PruningEngine
from katib_progress.suggestion.pruning.proto import pruning_pb2 as pb
from katib_progress.suggestion.pruning.proto import pruning_pb2_grpc as pb_grpc

_log = logging.getLogger(__name__)

SERVICE_NAME = "katib_progress.pruning.v1.Pruning"
_T = TypeVar("_T")


@dataclass(slots=True)
class _Slot:
    engine: PruningEngine
    authoritative: bool  # configured from Katib's Experiment (wins over configs sent with points)
    lock: threading.Lock = field(default_factory=threading.Lock)


class UnknownExperimentError(LookupError):
    """A point arrived without a config for an experiment the hub has no config for."""


#: experiment -> (stored progress points of every trial, final state of every ended trial), or None.
HistoryLoader = Callable[[str], tuple[Iterable[ProgressPoint], Mapping[str, str]] | None]


class PruningHub:
    """Engines per experiment, shared by the Pruning servicer, the EarlyStopping servicer and the
    suggestion service (which reads curves).

    ``_lock`` guards the two maps (experiment -> slot, trial -> experiment): every read and write
    of them holds it, and nothing slow runs under it. Each slot's own lock serialises its engine.
    """

    def __init__(self, history: HistoryLoader | None = None) -> None:
        """``history(experiment)`` returns the stored points and trial ends of an experiment (or
        None); it is called when the hub first meets an experiment, so a restarted service rebuilds
        the engine (``PruningEngine.rebuild``) instead of forgetting every curve."""
        self._history = history
        self._slots: dict[str, _Slot] = {}
        self._trial_experiment: dict[str, str] = {}
        self._lock = threading.Lock()

    # -- configuration -----------------------------------------------------------------------------
    def configure(
        self, experiment: str, config: PruningConfig, *, authoritative: bool = True
    ) -> PruningEngine:
        """Make sure ``experiment`` runs with ``config``; a changed config starts a fresh engine.

        The Experiment's own settings (``authoritative``, from Katib's EarlyStopping API) win: a
        differing config sent along with a progress point does not replace them. One exception:
        Katib's API does not carry the objective's metric strategy, so the strategy a point's config
        brings (the collector reads it from the Experiment) completes an authoritative config that has
        none, and is kept when Katib sends its settings again.
        """
        with self._lock:
            slot = self._slots.get(experiment)
            if slot is not None:
                config, authoritative = self._with_strategy(slot, config, authoritative)
            if slot is not None and slot.engine.config == config:
                slot.authoritative = slot.authoritative or authoritative
                return slot.engine
            if slot is not None and slot.authoritative and not authoritative:
                _log.debug(
                    "experiment %s: ignoring a point's config; the Experiment's settings win", experiment
                )
                return slot.engine
            if slot is not None and self._completes(slot.engine.config, config):
                # Katib's settings first (GetEarlyStoppingRules), then the collector's first point brings
                # the Experiment's metric strategy: every earlier judgment used another strategy, so the
                # engine is built again under it, from the stored history (below)
                _log.info(
                    "experiment %s: the Experiment's metric strategy %s completes Katib's settings; "
                    "engine rebuilt",
                    experiment,
                    config.objective_strategy,
                )
            elif slot is not None:
                _log.warning("experiment %s: pruning config changed; starting a fresh engine", experiment)
            engine = PruningEngine(config)
            if config.metric_strategy is not None:
                source = "the metric_strategy setting"
            elif config.objective_strategy is not None:
                source = "the Experiment's metricStrategies"
            else:
                source = "Katib's default"
            _log.info(
                "experiment %s: pruning engine: policy %s, %s %s, metric strategy %s (%s)",
                experiment,
                ",".join(config.policy_names),
                config.direction,
                config.objective_metric,
                config.strategy,
                source,
            )
            if self._history is not None:
                stored = self._history(experiment)
                if stored is not None:
                    points, ends = stored
                    replayed = engine.rebuild(points, ends)
                    _log.info("experiment %s: rebuilt from %d stored points", experiment, replayed)
            self._slots[experiment] = _Slot(engine, authoritative)
            return engine

    @staticmethod
    def _completes(current: PruningConfig, config: PruningConfig) -> bool:
        """``config`` is ``current`` with the objective's strategy added, nothing else changed."""
        return (
            current.objective_strategy is None
            and config.objective_strategy is not None
            and config.model_copy(update={"objective_strategy": None}) == current
        )

    @staticmethod
    def _with_strategy(slot: _Slot, config: PruningConfig, authoritative: bool) -> tuple[PruningConfig, bool]:
        """(config, authoritative) with the objective's strategy carried over (``configure``)."""
        current = slot.engine.config
        if authoritative and config.objective_strategy is None and current.objective_strategy is not None:
            return config.model_copy(update={"objective_strategy": current.objective_strategy}), True
        if (
            not authoritative
            and slot.authoritative
            and current.objective_strategy is None
            and config.objective_strategy is not None
        ):
            completed = current.model_copy(update={"objective_strategy": config.objective_strategy})
            if completed == config:
                slot.authoritative = False  # replaced below by the completed Experiment settings
                return completed, True
        return config, authoritative

    def engine(self, experiment: str) -> PruningEngine | None:
        with self._lock:
            slot = self._slots.get(experiment)
        return None if slot is None else slot.engine

    def note_trial(self, experiment: str, trial: str) -> None:
        """Remember which experiment a trial belongs to (Katib's SetTrialStatus names only the trial)."""
        with self._lock:
            self._trial_experiment[trial] = experiment

    def experiment_of(self, trial: str) -> str | None:
        with self._lock:
            return self._trial_experiment.get(trial)

    def _slot(self, experiment: str, config: PruningConfig | None, trial: str) -> _Slot:
        if config is not None:
            self.configure(experiment, config, authoritative=False)
        with self._lock:
            slot = self._slots.get(experiment)
            if slot is not None:
                self._trial_experiment[trial] = experiment
        if slot is None:
            raise UnknownExperimentError(
                f"experiment {experiment!r} is unknown to this service; send its config with the point"
            )
        return slot

    # -- decisions ---------------------------------------------------------------------------------
    def decide(self, point: ProgressPoint, config: PruningConfig | None = None) -> Decision:
        slot = self._slot(point.experiment, config, point.trial)
        with slot.lock:
            return slot.engine.decide(point)

    def finish(self, experiment: str, trial: str, state: TrialState | str) -> None:
        with self._lock:
            slot = self._slots.get(experiment)
            if slot is not None:
                self._trial_experiment.setdefault(trial, experiment)
        if slot is None:
            _log.info("finish %s/%s: unknown experiment, ignored", experiment, trial)
            return
        with slot.lock:
            slot.engine.finish(trial, state)

    def record_katib_call(
        self,
        experiment: str,
        names: list[str],
        succeeded: list[str],
        then: Callable[[ExperimentState], _T],
    ) -> _T | None:
        """Record one of Katib's GetEarlyStoppingRules requests (``ExperimentState.record_katib_call``)
        and return ``then(state)``, under the experiment's lock; None for an unknown experiment."""
        with self._lock:
            slot = self._slots.get(experiment)
        if slot is None:
            return None
        with slot.lock:
            slot.engine.state.record_katib_call(names, succeeded)
            return then(slot.engine.state)

    def forget(self, experiment: str) -> None:
        with self._lock:
            self._slots.pop(experiment, None)
            for trial in [t for t, e in self._trial_experiment.items() if e == experiment]:
                del self._trial_experiment[trial]

    def curve(self, experiment: str, trial: str) -> list[tuple[float, float]]:
        """(progress %, objective) as reported live; [] for an unknown experiment or trial."""
        with self._lock:
            slot = self._slots.get(experiment)
        if slot is None:
            return []
        with slot.lock:
            return slot.engine.curve(trial)

    # -- gRPC --------------------------------------------------------------------------------------
    def register(self, server: grpc.Server) -> list[str]:
        """Add the Pruning servicer to ``server``; returns its service name for grpc.health.v1.
        (Katib's EarlyStopping servicer over this hub is added by the server: the Katib edge.)"""
        pb_grpc.add_PruningServicer_to_server(PruningServicer(self), server)
        return [SERVICE_NAME]


def _abort_invalid(context: grpc.ServicerContext, exc: ConfigError | ValueError) -> Any:
    context.abort(grpc.StatusCode.INVALID_ARGUMENT, str(exc))


class PruningServicer(pb_grpc.PruningServicer):
    def __init__(self, hub: PruningHub) -> None:
        self._hub = hub

    def Decide(self, request: pb.ProgressPointRequest, context: grpc.ServicerContext) -> pb.DecisionReply:
        try:
            point = _convert.point_from_proto(request)
            config = _convert.config_from_proto(request.config) if request.HasField("config") else None
        except ValueError as exc:  # ConfigError is a ValueError
            return _abort_invalid(context, exc)
        try:
            decision = self._hub.decide(point, config)
        except UnknownExperimentError as exc:
            context.abort(grpc.StatusCode.INVALID_ARGUMENT, f"config: {exc}")
        return _convert.decision_to_proto(decision)

    def ReportFinal(
        self, request: pb.ReportFinalRequest, context: grpc.ServicerContext
    ) -> pb.ReportFinalReply:
        if not request.experiment or not request.trial:
            field_name = "experiment" if not request.experiment else "trial"
            context.abort(grpc.StatusCode.INVALID_ARGUMENT, f"{field_name}: required, got an empty string")
        try:
            state = _convert.state_from_proto(request.state)
        except ConfigError as exc:
            return _abort_invalid(context, exc)
        self._hub.finish(request.experiment, request.trial, state)
        return pb.ReportFinalReply()

    def Forget(self, request: pb.ForgetRequest, context: grpc.ServicerContext) -> pb.ForgetReply:
        if not request.experiment:
            context.abort(grpc.StatusCode.INVALID_ARGUMENT, "experiment: required, got an empty string")
        self._hub.forget(request.experiment)
        return pb.ForgetReply()
