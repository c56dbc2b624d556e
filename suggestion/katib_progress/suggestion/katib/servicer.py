"""Katib's ``Suggestion`` gRPC service backed by the study registry."""

from __future__ import annotations

import logging
from typing import Any

import grpc
from kubeflow.katib import katib_api_pb2, katib_api_pb2_grpc

from katib_progress.suggestion._domain import ExperimentSpec, InvalidExperimentError
from katib_progress.suggestion._registry import StudyRegistry
from katib_progress.suggestion.katib.convert import ProtoTrial, experiment_from_proto, reply_to_proto

_log = logging.getLogger(__name__)

pb: Any = katib_api_pb2

SERVICE_NAME = "api.v1.beta1.Suggestion"
#: The service name Katib's readiness and liveness probes ask grpc.health.v1 about.
HEALTH_SERVICE_NAME = "manager.v1beta1.Suggestion"
#: specs kept by the bytes of their Experiment message (one per experiment served, in practice)
_SPEC_CACHE_SIZE = 64


class SuggestionServicer(katib_api_pb2_grpc.SuggestionServicer):
    def __init__(self, registry: StudyRegistry) -> None:
        self._registry = registry
        self._specs: dict[bytes, ExperimentSpec] = {}

    def _spec(self, experiment: Any) -> ExperimentSpec:
        """``experiment_from_proto``, remembered by the message's bytes: Katib sends the same
        Experiment in every GetSuggestions request, and serialising it takes 1 us where converting
        it took 40 (equal bytes are equal messages; equal messages that serialise differently are
        only converted again)."""
        key = experiment.SerializeToString(deterministic=True)
        spec = self._specs.get(key)
        if spec is None:
            spec = experiment_from_proto(experiment)
            if len(self._specs) >= _SPEC_CACHE_SIZE:
                self._specs.clear()
            self._specs[key] = spec
        return spec

    def ValidateAlgorithmSettings(self, request: Any, context: grpc.ServicerContext) -> Any:
        spec = experiment_from_proto(request.experiment)
        try:
            self._registry.validate(spec)
        except InvalidExperimentError as exc:
            _log.info("experiment %r rejected: %s", spec.name, exc)
            context.abort(grpc.StatusCode.INVALID_ARGUMENT, str(exc))
        return pb.ValidateAlgorithmSettingsReply()

    def GetSuggestions(self, request: Any, context: grpc.ServicerContext) -> Any:
        spec = self._spec(request.experiment)
        count = request.current_request_number
        if count < 0:
            context.abort(grpc.StatusCode.INVALID_ARGUMENT, f"current_request_number={count}: must be >= 0")
        trials = [ProtoTrial(t) for t in request.trials]
        try:
            suggested = self._registry.suggest(spec, trials, count, request.total_request_number)
        except InvalidExperimentError as exc:
            _log.info("GetSuggestions for %r rejected: %s", spec.name, exc)
            context.abort(grpc.StatusCode.INVALID_ARGUMENT, str(exc))
        # DEBUG: an INFO line per call was a tenth of a 10-trial `random` call's handler time in the
        # serving process (py-spy); the registry logs each study it starts at INFO
        _log.debug(
            "experiment %s: %d trials reported, %d suggested",
            spec.name,
            len(trials),
            len(suggested.suggestions),
        )
        return reply_to_proto(suggested.suggestions, suggested.incarnation)
