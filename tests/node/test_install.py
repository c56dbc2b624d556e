"""Install the collector on a real node the way docs/deploy.md tells a user: a kustomize overlay of the
user's own over manifests/default that sets only the image, ``kubectl apply -k``, and the Deployment
becomes Available through the kubelet's real readiness probes, its pods running as non-root and
reaching the API server through the ``kubernetes`` Service (kube-proxy)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from tests.node.conftest import image
from tests.node.node import RealNode


@pytest.mark.timeout(600)
def test_collector_installs_with_kubectl_apply_k_and_becomes_available(
    node: RealNode, installed: dict[str, Any]
) -> None:
    assert installed["status"]["readyReplicas"] == 2
    pods = json.loads(node.kubectl("-n", "katib-progress", "get", "pods", "-o", "json"))["items"]
    assert len(pods) == 2
    for pod in pods:
        (container,) = pod["spec"]["containers"]
        assert container["image"] == image("collector")
        status = pod["status"]["containerStatuses"][0]
        assert status["ready"] is True and status["restartCount"] == 0, status
        uid = node.kubectl("-n", "katib-progress", "exec", pod["metadata"]["name"], "--", "id", "-u").strip()
        assert uid == "65532"
