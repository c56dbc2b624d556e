"""Stand-in for Katib's ``suggestion-hyperopt`` image, algorithm ``random`` only.

Written from kubeflow/katib (commit 33c8ff4): cmd/suggestion/hyperopt/v1beta1/main.py (one gRPC
server, Suggestion + grpc.health.v1, ``add_insecure_port("0.0.0.0:6789")``, health service
``manager.v1beta1.Suggestion`` SERVING: pkg/suggestion/v1beta1/internal/base_health_service.py),
pkg/suggestion/v1beta1/hyperopt/service.py (ValidateAlgorithmSettings rules and messages) and
base_service.py (random: one independent draw per requested trial from the search space;
``random_state`` seeds it; no trial names returned, so Katib names trials ``<experiment>-<8 chars>``).
hyperopt itself is not used: draws follow hp.uniform / quniform / uniformint / loguniform / choice.
"""

from __future__ import annotations

import argparse
import math
import random
import signal
import sys
from concurrent import futures
from typing import Any

import grpc
from grpc_health.v1 import health, health_pb2, health_pb2_grpc
from kubeflow.katib import katib_api_pb2, katib_api_pb2_grpc

pb: Any = katib_api_pb2
HEALTH_SERVICE = "manager.v1beta1.Suggestion"


def validate(algorithm: Any) -> tuple[bool, str]:
    """hyperopt/service.py: OptimizerConfiguration.validate_algorithm_spec (random and tpe)."""
    name = algorithm.algorithm_name
    allowed = {
        "random": {"random_state"},
        "tpe": {"gamma", "prior_weight", "n_EI_candidates", "random_state"},
    }
    if name not in allowed:
        return False, f"unknown algorithm name {name}"
    for s in algorithm.algorithm_settings:
        try:
            if s.name not in allowed[name]:
                return False, f"unknown setting {s.name} for algorithm {name}"
            if s.name == "random_state" and not int(s.value) >= 0:
                return False, "random_state should be great or equal than zero"
            if s.name == "gamma" and not 1 > float(s.value) > 0:
                return False, "gamma should be in the range of (0, 1)"
            if s.name == "prior_weight" and not float(s.value) > 0:
                return False, "prior_weight should be great than zero"
            if s.name == "n_EI_candidates" and not int(s.value) > 0:
                return False, "n_EI_candidates should be great than zero"
        except Exception as e:
            return False, f"failed to validate {s.name}({s.value}): {e}"
    return True, ""


def draw(param: Any, rng: random.Random) -> str:
    space = param.feasible_space
    if param.parameter_type in (pb.CATEGORICAL, pb.DISCRETE):
        return str(rng.choice(list(space.list)))  # hp.choice
    low, high = float(space.min), float(space.max)
    if space.distribution == pb.LOG_UNIFORM:
        value = math.exp(rng.uniform(math.log(low), math.log(high)))
    else:
        value = rng.uniform(low, high)
    if space.step:
        value = round(value / float(space.step)) * float(space.step)  # hp.quniform
    if param.parameter_type == pb.INT:
        return str(round(value))  # hp.uniformint, then int(...) in BaseHyperoptService.convert
    return str(value)


class RandomService(katib_api_pb2_grpc.SuggestionServicer):
    def __init__(self) -> None:
        self._rng: random.Random | None = None

    def GetSuggestions(self, request: Any, context: Any) -> Any:
        algorithm = request.experiment.spec.algorithm
        if algorithm.algorithm_name != "random":
            context.abort(grpc.StatusCode.UNIMPLEMENTED, "this stand-in implements random only")
        if self._rng is None:  # is_first_run: the study is created from the first request
            seed = next(
                (int(s.value) for s in algorithm.algorithm_settings if s.name == "random_state"), None
            )
            self._rng = random.Random(seed)
        params = request.experiment.spec.parameter_specs.parameters
        reply = pb.GetSuggestionsReply()
        for _ in range(request.current_request_number):
            assignment = reply.parameter_assignments.add()
            for p in params:
                assignment.assignments.add(name=p.name, value=draw(p, self._rng))
        return reply

    def ValidateAlgorithmSettings(self, request: Any, context: Any) -> Any:
        ok, message = validate(request.experiment.spec.algorithm)
        if not ok:
            context.set_code(grpc.StatusCode.INVALID_ARGUMENT)
            context.set_details(message)
        return pb.ValidateAlgorithmSettingsReply()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--address", default="0.0.0.0:6789")  # main.py: DEFAULT_PORT
    args = parser.parse_args(argv)
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=10))
    katib_api_pb2_grpc.add_SuggestionServicer_to_server(RandomService(), server)
    checker = health.HealthServicer()
    checker.set(HEALTH_SERVICE, health_pb2.HealthCheckResponse.SERVING)
    health_pb2_grpc.add_HealthServicer_to_server(checker, server)
    server.add_insecure_port(args.address)  # raises when the address cannot be bound
    server.start()
    print("Listening...", flush=True)
    signal.signal(signal.SIGTERM, lambda *_: server.stop(0))
    server.wait_for_termination()
    return 0


if __name__ == "__main__":
    sys.exit(main())
