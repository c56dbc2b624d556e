"""Katib's stock medianstop early-stopping service, on an address of our choosing (comparison baseline).

Katib's ``cmd/earlystopping/medianstop/v1beta1/main.py`` binds 0.0.0.0:6788 and needs a Kubernetes
configuration (the service loads it in ``__init__``, for ``SetTrialStatus``); this serves the same
``MedianStopService`` (pkg/earlystopping/v1beta1/medianstop/service.py) from a Katib checkout on
``address`` with ``load_kube_config`` made a no-op, as Katib's own unit test patches it
(test/unit/v1beta1/earlystopping/test_medianstop_service.py ``setUp``). Run it with the Python
environment of Katib's image (cmd/earlystopping/medianstop/v1beta1/requirements.txt: ``grpcio``,
``protobuf<5``, ``kubernetes``):

    python benchmarks/run_katib_medianstop.py KATIB_CHECKOUT 127.0.0.1:50051
"""

from __future__ import annotations

import sys
from concurrent import futures


def main() -> int:
    katib, address = sys.argv[1], sys.argv[2]
    # the image's PYTHONPATH (cmd/earlystopping/medianstop/v1beta1/Dockerfile)
    sys.path[:0] = [katib, f"{katib}/pkg/apis/manager/v1beta1/python"]
    import grpc
    from kubernetes import config

    config.load_kube_config = lambda *args, **kwargs: None  # no cluster: GetEarlyStoppingRules needs none
    from pkg.apis.manager.v1beta1.python import api_pb2_grpc  # type: ignore[import-not-found]
    from pkg.earlystopping.v1beta1.medianstop.service import MedianStopService  # type: ignore[import-not-found]

    server = grpc.server(futures.ThreadPoolExecutor(max_workers=10))
    api_pb2_grpc.add_EarlyStoppingServicer_to_server(MedianStopService(), server)
    server.add_insecure_port(address)
    server.start()
    print(f"Katib MedianStopService listening on {address}", flush=True)
    server.wait_for_termination()
    return 0


if __name__ == "__main__":
    sys.exit(main())
