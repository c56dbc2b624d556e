"""Builders for the objects tests create in the stand-in (Katib Trials, TrainJobs, trainerStatus)."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

from kubernetes import client
from kubernetes.client.exceptions import ApiException

TRAINER = ("trainer.kubeflow.org", "v1alpha1")
KATIB = ("kubeflow.org", "v1beta1")
EXPERIMENT_LABEL = "katib.kubeflow.org/experiment"


def trial_body(name: str, experiment: str | None, *, namespace: str = "default") -> dict[str, Any]:
    labels = {EXPERIMENT_LABEL: experiment} if experiment else {}
    return {
        "apiVersion": "kubeflow.org/v1beta1",
        "kind": "Trial",
        "metadata": {"name": name, "namespace": namespace, "labels": labels},
        # Katib's Experiment defaulting gives every metric a strategy and the Trial copies the
        # objective (pkg/apis/controller/experiments/v1beta1/experiment_defaults.go)
        "spec": {
            "objective": {
                "type": "minimize",
                "objectiveMetricName": "loss",
                "metricStrategies": [{"name": "loss", "value": "min"}],
            }
        },
    }


def trainjob_body(
    name: str, *, namespace: str = "default", owner: Mapping[str, Any] | None = None
) -> dict[str, Any]:
    """A TrainJob as Katib creates it for a Trial (named after it, controller-owned by it)."""
    meta: dict[str, Any] = {"name": name, "namespace": namespace}
    if owner is not None:
        meta["ownerReferences"] = [
            {
                "apiVersion": owner["apiVersion"],
                "kind": owner["kind"],
                "name": owner["metadata"]["name"],
                "uid": owner["metadata"]["uid"],
                "controller": True,
                "blockOwnerDeletion": True,
            }
        ]
    return {
        "apiVersion": "trainer.kubeflow.org/v1alpha1",
        "kind": "TrainJob",
        "metadata": meta,
        "spec": {
            "runtimeRef": {"name": "torch-distributed"},
            "trainer": {"image": "example.com/train:1", "numNodes": 1},
        },
    }


def trainer_status(
    when: datetime,
    *,
    progress: int | None = None,
    eta: int | None = None,
    metrics: Mapping[str, str] | None = None,
) -> dict[str, Any]:
    status: dict[str, Any] = {"lastUpdatedTime": when.astimezone(UTC).isoformat().replace("+00:00", "Z")}
    if progress is not None:
        status["progressPercentage"] = progress
    if eta is not None:
        status["estimatedRemainingSeconds"] = eta
    if metrics:
        status["metrics"] = [{"name": k, "value": v} for k, v in metrics.items()]
    return status


class Objects:
    """Create Trials and TrainJobs through the real kubernetes client."""

    def __init__(self, api_client: client.ApiClient) -> None:
        self.api = client.CustomObjectsApi(api_client)

    def trial(
        self, name: str, experiment: str | None = "exp", *, namespace: str = "default"
    ) -> dict[str, Any]:
        return self.api.create_namespaced_custom_object(
            *KATIB, namespace, "trials", trial_body(name, experiment, namespace=namespace)
        )

    def trainjob(
        self, name: str, *, namespace: str = "default", owner: Mapping[str, Any] | None = None
    ) -> dict[str, Any]:
        return self.api.create_namespaced_custom_object(
            *TRAINER, namespace, "trainjobs", trainjob_body(name, namespace=namespace, owner=owner)
        )

    def trial_job(self, name: str, experiment: str = "exp", *, namespace: str = "default") -> dict[str, Any]:
        """A Trial and the TrainJob it owns (same name), as Katib creates them."""
        return self.trainjob(
            name, namespace=namespace, owner=self.trial(name, experiment, namespace=namespace)
        )

    def set_status(
        self, name: str, status: Mapping[str, Any], *, namespace: str = "default"
    ) -> dict[str, Any]:
        """Replace ``status.trainerStatus`` as a whole, as the trainer status server does.

        Read-modify-write through ``PUT .../status`` with the read resourceVersion as precondition,
        read again on a conflict (the collector adds its finalizer meanwhile; Trainer's status server
        applies server-side and never conflicts).
        """
        for attempt in range(10):
            current = self.api.get_namespaced_custom_object(*TRAINER, namespace, "trainjobs", name)
            body = {**current, "status": {**(current.get("status") or {}), "trainerStatus": dict(status)}}
            try:
                return self.api.replace_namespaced_custom_object_status(
                    *TRAINER, namespace, "trainjobs", name, body
                )
            except ApiException as exc:
                if exc.status != 409 or attempt == 9:
                    raise
        raise AssertionError("unreachable")

    def delete_trainjob(self, name: str, *, namespace: str = "default") -> None:
        self.api.delete_namespaced_custom_object(*TRAINER, namespace, "trainjobs", name)
