"""Client of the ``katib_progress.pruning.v1.Pruning`` service."""

from __future__ import annotations

from types import TracebackType

import grpc

from katib_progress.core.errors import PermanentError, TemporaryError
from katib_progress.core.pruning import PruningSpec
from katib_progress.core.types import Decision, ProgressPoint
from katib_progress.suggestion.pruning import _convert
from katib_progress.suggestion.pruning._history import TrialState, parse_state
from katib_progress.suggestion.pruning.config import PruningConfig
from katib_progress.suggestion.pruning.proto import pruning_pb2 as pb
from katib_progress.suggestion.pruning.proto import pruning_pb2_grpc as pb_grpc

_TEMPORARY = {
    grpc.StatusCode.UNAVAILABLE,
    grpc.StatusCode.DEADLINE_EXCEEDED,
    grpc.StatusCode.RESOURCE_EXHAUSTED,
    grpc.StatusCode.ABORTED,
}


class PruningClient:
    """``PruningClient("127.0.0.1:6788").decide(point, config)``.

    Raises ``TemporaryError`` when the service is unreachable or slow and ``PermanentError`` when it
    rejects the request (the message names the offending field).
    """

    def __init__(self, address: str, *, timeout: float = 5.0) -> None:
        self._channel = grpc.insecure_channel(address)
        self._stub = pb_grpc.PruningStub(self._channel)
        self._timeout = timeout

    def _call(self, method: str, request: object) -> object:
        try:
            return getattr(self._stub, method)(request, timeout=self._timeout)
        except grpc.RpcError as exc:
            code, details = exc.code(), exc.details()
            if code in _TEMPORARY:
                raise TemporaryError(f"Pruning.{method}: {code.name}: {details}") from exc
            raise PermanentError(f"Pruning.{method}: {code.name}: {details}") from exc

    def decide(self, point: ProgressPoint, spec: PruningSpec | PruningConfig | None = None) -> Decision:
        """``spec`` is validated here first (ConfigError names the bad setting)."""
        config = PruningConfig.from_spec(spec) if isinstance(spec, PruningSpec) else spec
        reply = self._call("Decide", _convert.point_to_proto(point, config))
        assert isinstance(reply, pb.DecisionReply)
        return _convert.decision_from_proto(reply)

    def report_final(self, experiment: str, trial: str, state: TrialState | str) -> None:
        proto_state = parse_state(state).name  # TrialState names match the proto enum names
        self._call(
            "ReportFinal", pb.ReportFinalRequest(experiment=experiment, trial=trial, state=proto_state)
        )

    def forget(self, experiment: str) -> None:
        self._call("Forget", pb.ForgetRequest(experiment=experiment))

    def close(self) -> None:
        self._channel.close()

    def __enter__(self) -> PruningClient:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()
