"""Katib's stock Optuna suggestion service, on an address of our choosing (benchmark baseline).

Katib's ``cmd/suggestion/optuna/v1beta1/main.py`` always binds 0.0.0.0:6789; this serves the same
``OptunaService`` (pkg/suggestion/v1beta1/optuna/service.py) from a Katib checkout on ``address``.
Run it with the Python environment of Katib's image (``optuna==3.3.0``, ``grpcio``,
``protobuf<5``: cmd/suggestion/optuna/v1beta1/requirements.txt), see docs/suggestion.md:

    python benchmarks/run_katib_optuna.py KATIB_CHECKOUT 127.0.0.1:50051
"""

from __future__ import annotations

import sys
from concurrent import futures
from typing import Any


def katib_path(katib: str) -> None:
    """The PYTHONPATH of Katib's suggestion images (cmd/suggestion/<name>/v1beta1/Dockerfile)."""
    sys.path[:0] = [
        katib,
        f"{katib}/pkg/apis/manager/v1beta1/python",
        f"{katib}/pkg/apis/manager/health/python",
    ]


def serve(address: str, service: Any) -> int:
    """Serve one of Katib's suggestion services (Suggestion and Health) on ``address``."""
    import grpc
    from pkg.apis.manager.health.python import health_pb2_grpc  # type: ignore[import-not-found]
    from pkg.apis.manager.v1beta1.python import api_pb2_grpc  # type: ignore[import-not-found]

    server = grpc.server(futures.ThreadPoolExecutor(max_workers=10))
    api_pb2_grpc.add_SuggestionServicer_to_server(service, server)
    health_pb2_grpc.add_HealthServicer_to_server(service, server)
    server.add_insecure_port(address)
    server.start()
    print(f"Katib {type(service).__name__} listening on {address}", flush=True)
    server.wait_for_termination()
    return 0


def main() -> int:
    katib_path(sys.argv[1])
    from pkg.suggestion.v1beta1.optuna.service import OptunaService  # type: ignore[import-not-found]

    return serve(sys.argv[2], OptunaService())


if __name__ == "__main__":
    sys.exit(main())
