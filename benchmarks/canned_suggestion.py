"""A Suggestion service that does no work: the gRPC floor of a GetSuggestions call (benchmark helper).

It answers every GetSuggestions with ``current_request_number`` copies of one fixed, valid
assignment of the benchmark's space (``suggestion_services.space``) and no trial names (the
driver then names the trials itself), from a gRPC server set up as ours is (``server.py``
``SuggestionServer``: a 16-thread pool, the health service). Timed with the same client as the
services, its latency is what gRPC, the request's (de)serialisation and the hand-off to a worker
thread cost before any suggestion logic runs:

    python benchmarks/bench_suggestion.py --part latency --algorithms random \
        --ours-cmd "python benchmarks/canned_suggestion.py {address}" --baseline-cmd ...
"""

from __future__ import annotations

import sys
from concurrent import futures
from typing import Any

import grpc
from grpc_health.v1 import health, health_pb2, health_pb2_grpc
from kubeflow.katib import katib_api_pb2, katib_api_pb2_grpc

pb: Any = katib_api_pb2

_ASSIGNMENT = (("x", "0.5"), ("scale", "0.01"), ("k", "4"), ("kind", "a"), ("level", "0.5"))


class CannedSuggestion(katib_api_pb2_grpc.SuggestionServicer):
    def __init__(self) -> None:
        self._replies: dict[int, Any] = {}

    def ValidateAlgorithmSettings(self, request: Any, context: grpc.ServicerContext) -> Any:
        return pb.ValidateAlgorithmSettingsReply()

    def GetSuggestions(self, request: Any, context: grpc.ServicerContext) -> Any:
        count = request.current_request_number
        reply = self._replies.get(count)
        if reply is None:
            one = pb.GetSuggestionsReply.ParameterAssignments(
                assignments=[pb.ParameterAssignment(name=n, value=v) for n, v in _ASSIGNMENT]
            )
            reply = self._replies[count] = pb.GetSuggestionsReply(parameter_assignments=[one] * count)
        return reply


def main() -> int:
    address = sys.argv[1]
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=16))
    katib_api_pb2_grpc.add_SuggestionServicer_to_server(CannedSuggestion(), server)
    probe = health.HealthServicer()
    health_pb2_grpc.add_HealthServicer_to_server(probe, server)
    probe.set("", health_pb2.HealthCheckResponse.SERVING)
    server.add_insecure_port(address)
    server.start()
    print(f"canned Suggestion service listening on {address}", flush=True)
    server.wait_for_termination()
    return 0


if __name__ == "__main__":
    sys.exit(main())
