"""The suggestion Deployment and Service Katib composes for an Experiment
(pkg/controller.v1beta1/suggestion/composer/composer.go, util/suggestion.go, util/labels.go)."""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any

from tests.katibmodel import katibconfig
from tests.katibmodel._controller import Timing
from tests.katibmodel._kube import Kube, owner_reference

#: consts.go
SUGGESTION_PORT = 6789
SUGGESTION_PORT_NAME = "suggestion-api"
EARLY_STOPPING_PORT = 6788
EARLY_STOPPING_PORT_NAME = "earlystop-api"
SUGGESTION_CONTAINER = "suggestion"
EARLY_STOPPING_CONTAINER = "early-stopping"
GRPC_HEALTH_SERVICE = "manager.v1beta1.Suggestion"  # consts.DefaultGRPCService
LABEL_EXPERIMENT = "katib.kubeflow.org/experiment"
LABEL_SUGGESTION = "katib.kubeflow.org/suggestion"
LABEL_DEPLOYMENT = "katib.kubeflow.org/deployment"


class ComposeError(Exception):
    pass


def deployment_name(suggestion: Mapping[str, Any]) -> str:
    """util/suggestion.go: GetSuggestionDeploymentName (= service name = RBAC name)."""
    return f"{suggestion['metadata']['name']}-{suggestion['spec']['algorithm']['algorithmName']}"


def algorithm_endpoint(suggestion: Mapping[str, Any]) -> str:
    """util/suggestion.go: GetAlgorithmEndpoint -- ``<name>-<algorithm>.<namespace>:6789``."""
    return f"{deployment_name(suggestion)}.{suggestion['metadata']['namespace']}:{SUGGESTION_PORT}"


def early_stopping_endpoint(suggestion: Mapping[str, Any]) -> str:
    """util/suggestion.go: GetEarlyStoppingEndpoint -- same Service, port 6788."""
    return f"{deployment_name(suggestion)}.{suggestion['metadata']['namespace']}:{EARLY_STOPPING_PORT}"


def suggestion_labels(suggestion: Mapping[str, Any]) -> dict[str, str]:
    """util/labels.go: SuggestionLabels."""
    labels = dict(suggestion["metadata"].get("labels") or {})
    labels[LABEL_DEPLOYMENT] = deployment_name(suggestion)
    labels[LABEL_EXPERIMENT] = suggestion["metadata"]["name"]
    labels[LABEL_SUGGESTION] = suggestion["metadata"]["name"]
    labels["sidecar.istio.io/inject"] = "false"
    return labels


def _early_stopping(suggestion: Mapping[str, Any]) -> str:
    return str((suggestion["spec"].get("earlyStopping") or {}).get("algorithmName") or "")


def desired_service(suggestion: Mapping[str, Any]) -> dict[str, Any]:
    """composer.go: DesiredService -- port 6789, plus 6788 when early stopping is set."""
    ports = [{"name": SUGGESTION_PORT_NAME, "port": SUGGESTION_PORT}]
    if _early_stopping(suggestion):
        ports.append({"name": EARLY_STOPPING_PORT_NAME, "port": EARLY_STOPPING_PORT})
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {
            "name": deployment_name(suggestion),
            "namespace": suggestion["metadata"]["namespace"],
            "ownerReferences": [owner_reference(suggestion)],
        },
        "spec": {"selector": suggestion_labels(suggestion), "ports": ports, "type": "ClusterIP"},
    }


def _grpc_probe(timing: Timing, *, live: bool) -> dict[str, Any]:
    probe: dict[str, Any] = {
        "grpc": {"port": SUGGESTION_PORT, "service": GRPC_HEALTH_SERVICE},
        "initialDelaySeconds": timing.probe_initial_delay_s,
        "periodSeconds": timing.liveness_period_s if live else timing.probe_period_s,
    }
    if live:
        probe["failureThreshold"] = timing.liveness_failure_threshold
    return probe


def desired_containers(
    suggestion: Mapping[str, Any],
    config: Mapping[str, Any],
    es_config: Mapping[str, Any] | None,
    *,
    grpc_probes: bool,
    timing: Timing,
) -> list[dict[str, Any]]:
    """composer.go: desiredContainers (probe durations in the model's clock, seconds as floats)."""
    container = {
        k: copy.deepcopy(v)
        for k, v in config.items()
        if k
        not in (
            "algorithmName",
            "serviceAccountName",
            "volumeMountPath",
            "persistentVolumeClaimSpec",
            "persistentVolumeSpec",
            "persistentVolumeLabels",
        )
    }
    container.setdefault("name", SUGGESTION_CONTAINER)
    container["ports"] = [
        *(container.get("ports") or []),
        {"name": SUGGESTION_PORT_NAME, "containerPort": SUGGESTION_PORT},
    ]
    if grpc_probes and container.get("readinessProbe") is None:
        container["readinessProbe"] = _grpc_probe(timing, live=False)
    if grpc_probes and container.get("livenessProbe") is None:
        container["livenessProbe"] = _grpc_probe(timing, live=True)
    containers = [container]
    if es_config is not None:
        containers.append(
            {
                "name": EARLY_STOPPING_CONTAINER,
                "image": es_config["image"],
                "imagePullPolicy": es_config.get("imagePullPolicy") or "IfNotPresent",
                "ports": [{"name": EARLY_STOPPING_PORT_NAME, "containerPort": EARLY_STOPPING_PORT}],
                "resources": copy.deepcopy(es_config.get("resources") or {}),
            }
        )  # no probes, no command/args/env: only what EarlyStoppingConfig carries
    return containers


def desired_deployment(
    kube: Kube, suggestion: Mapping[str, Any], *, grpc_probes: bool, timing: Timing
) -> dict[str, Any]:
    """composer.go: DesiredDeployment. Raises KatibConfigError / ComposeError."""
    algorithm = suggestion["spec"]["algorithm"]["algorithmName"]
    config = katibconfig.suggestion_config(kube, algorithm)
    for port in config.get("ports") or ():
        if port.get("name") == SUGGESTION_PORT_NAME or port.get("containerPort") == SUGGESTION_PORT:
            raise ComposeError(
                f'invalid suggestion config: a port with name "{SUGGESTION_PORT_NAME}" or number '
                f"{SUGGESTION_PORT} must not be specified"
            )
    es_name = _early_stopping(suggestion)
    es_config = katibconfig.early_stopping_config(kube, es_name) if es_name else None
    labels = suggestion_labels(suggestion)
    meta = suggestion["metadata"]
    pod_spec: dict[str, Any] = {
        "containers": desired_containers(
            suggestion, config, es_config, grpc_probes=grpc_probes, timing=timing
        )
    }
    if config.get("serviceAccountName"):
        pod_spec["serviceAccountName"] = config["serviceAccountName"]
    elif es_name:
        pod_spec["serviceAccountName"] = deployment_name(suggestion)  # GetSuggestionRBACName
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {
            "name": deployment_name(suggestion),
            "namespace": meta["namespace"],
            "labels": dict(meta.get("labels") or {}),
            "annotations": dict(meta.get("annotations") or {}),
            "ownerReferences": [owner_reference(suggestion)],
        },
        "spec": {
            "replicas": 1,
            "selector": {"matchLabels": labels},
            "template": {
                "metadata": {"labels": labels, "annotations": dict(meta.get("annotations") or {})},
                "spec": pod_spec,
            },
        },
    }
