"""Katib's stock hyperopt suggestion service, on an address of our choosing (benchmark baseline).

Katib's stock katib-config maps ``tpe`` and ``random`` to this image, not to its Optuna one.
Katib's ``cmd/suggestion/hyperopt/v1beta1/main.py`` always binds 0.0.0.0:6789; this serves the same
``HyperoptService`` (pkg/suggestion/v1beta1/hyperopt/service.py) from a Katib checkout on ``address``.
Run it with the Python environment of Katib's image (``hyperopt==0.2.5``, ``grpcio``, ``protobuf<5``:
cmd/suggestion/hyperopt/v1beta1/requirements.txt; NumPy below 2, which hyperopt 0.2.5 needs), see
docs/suggestion.md:

    python benchmarks/run_katib_hyperopt.py KATIB_CHECKOUT 127.0.0.1:50051
"""

from __future__ import annotations

import sys
from concurrent import futures


def main() -> int:
    katib, address = sys.argv[1], sys.argv[2]
    # the image's PYTHONPATH (cmd/suggestion/hyperopt/v1beta1/Dockerfile)
    sys.path[:0] = [
        katib,
        f"{katib}/pkg/apis/manager/v1beta1/python",
        f"{katib}/pkg/apis/manager/health/python",
    ]
    import grpc
    from pkg.apis.manager.health.python import health_pb2_grpc  # type: ignore[import-not-found]
    from pkg.apis.manager.v1beta1.python import api_pb2_grpc  # type: ignore[import-not-found]
    from pkg.suggestion.v1beta1.hyperopt.service import HyperoptService  # type: ignore[import-not-found]

    server = grpc.server(futures.ThreadPoolExecutor(max_workers=10))
    service = HyperoptService()
    api_pb2_grpc.add_SuggestionServicer_to_server(service, server)
    health_pb2_grpc.add_HealthServicer_to_server(service, server)
    server.add_insecure_port(address)
    server.start()
    print(f"Katib HyperoptService listening on {address}", flush=True)
    server.wait_for_termination()
    return 0


if __name__ == "__main__":
    sys.exit(main())
