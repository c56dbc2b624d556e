"""The collector's data path on the real node: a TrainJob's trainerStatus snapshots become rows in a DB
manager reached by its Service name, as on a cluster (cluster DNS, then kube-proxy's Service routing).

The DB manager here is ``katib-progress db serve`` (Katib's DBManager API on SQLite) from the collector
image, as the Deployment and Service ``katib-db-manager`` in ``kubeflow``: the address the manifests'
collector dials (``katib-db-manager.kubeflow:6789``). Katib's own controller and DB manager run as pods
in a later stage of this tier (docs/cluster.md)."""

from __future__ import annotations

import json
import time
from datetime import UTC, datetime, timedelta

import pytest

from tests.kubestandin.objects import Objects, trainer_status
from tests.node.conftest import image
from tests.node.node import RealNode

READ_LOG = """
import json, grpc
from kubeflow.katib import katib_api_pb2 as pb, katib_api_pb2_grpc as pbg
stub = pbg.DBManagerStub(grpc.insecure_channel("127.0.0.1:6789"))
reply = stub.GetObservationLog(pb.GetObservationLogRequest(trial_name="{trial}", metric_name="{metric}"))
print(json.dumps([m.metric.value for m in reply.observation_log.metric_logs]))
"""


def _db_manager(node: RealNode) -> None:
    node.kubectl("create", "namespace", "kubeflow")
    manifest = {
        "apiVersion": "v1",
        "kind": "List",
        "items": [
            {
                "apiVersion": "apps/v1",
                "kind": "Deployment",
                "metadata": {"name": "katib-db-manager", "namespace": "kubeflow"},
                "spec": {
                    "selector": {"matchLabels": {"app": "katib-db-manager"}},
                    "template": {
                        "metadata": {"labels": {"app": "katib-db-manager"}},
                        "spec": {
                            "containers": [
                                {
                                    "name": "db",
                                    "image": image("collector"),
                                    "imagePullPolicy": "Never",
                                    "args": [
                                        "db",
                                        "serve",
                                        "--address",
                                        "0.0.0.0:6789",
                                        "--db",
                                        "/data/obs.sqlite",
                                    ],
                                    "ports": [{"containerPort": 6789, "name": "grpc"}],
                                    "readinessProbe": {"grpc": {"port": 6789}, "periodSeconds": 2},
                                    "volumeMounts": [{"name": "data", "mountPath": "/data"}],
                                }
                            ],
                            "volumes": [{"name": "data", "emptyDir": {}}],
                        },
                    },
                },
            },
            {
                "apiVersion": "v1",
                "kind": "Service",
                "metadata": {"name": "katib-db-manager", "namespace": "kubeflow"},
                "spec": {
                    "selector": {"app": "katib-db-manager"},
                    "ports": [{"port": 6789, "targetPort": 6789}],
                },
            },
        ],
    }
    node.kubectl("apply", "-f", "-", input=json.dumps(manifest))
    node.kubectl(
        "-n", "kubeflow", "rollout", "status", "deployment/katib-db-manager", "--timeout=180s", timeout=200
    )


def _rows(node: RealNode, trial: str, metric: str) -> list[str]:
    out = node.kubectl(
        "-n",
        "kubeflow",
        "exec",
        "deploy/katib-db-manager",
        "--",
        "python3",
        "-c",
        READ_LOG.format(trial=trial, metric=metric),
    )
    return list(json.loads(out))


@pytest.mark.timeout(600)
@pytest.mark.usefixtures("installed")
def test_snapshots_reach_the_db_manager_through_its_service_name(node: RealNode) -> None:
    _db_manager(node)
    objs = Objects(node.api_client())
    objs.trial_job("node-trial-1", "node-exp")
    base = datetime.now(UTC).replace(microsecond=0) + timedelta(seconds=1)
    sent = []
    for i in range(4):
        loss = f"{1 / (i + 1):.4f}"
        objs.set_status(
            "node-trial-1",
            trainer_status(base + timedelta(seconds=i), progress=25 * (i + 1), metrics={"loss": loss}),
        )
        sent.append(loss)
        time.sleep(1.5)
    deadline = time.monotonic() + 120
    stored: list[str] = []
    while time.monotonic() < deadline:
        stored = _rows(node, "node-trial-1", "loss")
        if len(stored) >= len(sent):
            break
        time.sleep(2)
    assert stored == sent
