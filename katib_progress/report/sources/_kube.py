"""Read a Katib Experiment, its Trials and their TrainJobs through the Kubernetes API."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

from kubernetes import client
from kubernetes.client.exceptions import ApiException

from katib_progress.core.errors import ConfigError, PermanentError, TemporaryError
from katib_progress.core.names import EXPERIMENT_LABEL

_log = logging.getLogger(__name__)

KATIB = ("kubeflow.org", "v1beta1")
TRAINER = ("trainer.kubeflow.org", "v1alpha1")


@dataclass(frozen=True, slots=True)
class ClusterSnapshot:
    """The raw objects of one experiment at one moment (dicts as the API served them)."""

    experiment: dict[str, Any]
    trials: tuple[dict[str, Any], ...]
    trainjobs: dict[str, dict[str, Any]]


def _api_error(what: str, exc: ApiException) -> Exception:
    status = exc.status or 0
    text = f"{what}: HTTP {status} {exc.reason}"
    if status in (429, 500, 502, 503, 504) or status == 0:
        return TemporaryError(text)
    return PermanentError(text)


def fetch(
    api_client: client.ApiClient, name: str, namespace: str, *, timeout_s: float = 30.0
) -> ClusterSnapshot:
    """One consistent-enough read: the Experiment, its Trials (by label) and the namespace's TrainJobs."""
    api = client.CustomObjectsApi(api_client)
    try:
        experiment = api.get_namespaced_custom_object(
            *KATIB, namespace, "experiments", name, _request_timeout=timeout_s
        )
    except ApiException as exc:
        if exc.status == 404:
            raise ConfigError("experiment", f"no Experiment {namespace}/{name}") from None
        raise _api_error(f"get Experiment {namespace}/{name}", exc) from None
    try:
        listed = api.list_namespaced_custom_object(
            *KATIB,
            namespace,
            "trials",
            label_selector=f"{EXPERIMENT_LABEL}={name}",
            _request_timeout=timeout_s,
        )
    except ApiException as exc:
        raise _api_error(f"list Trials of {namespace}/{name}", exc) from None
    trials = tuple(sorted(listed.get("items", []), key=lambda t: t.get("metadata", {}).get("name", "")))
    names = {t.get("metadata", {}).get("name") for t in trials}
    trainjobs: dict[str, dict[str, Any]] = {}
    try:
        jobs = api.list_namespaced_custom_object(*TRAINER, namespace, "trainjobs", _request_timeout=timeout_s)
    except ApiException as exc:
        if exc.status != 404:
            raise _api_error(f"list TrainJobs in {namespace}", exc) from None
        _log.info("TrainJob API not served in %s: accelerators come from the Trials' runSpec", namespace)
        jobs = {}
    for job in jobs.get("items", []):
        job_name = job.get("metadata", {}).get("name")
        if job_name in names:
            trainjobs[job_name] = job
    return ClusterSnapshot(experiment=experiment, trials=trials, trainjobs=trainjobs)
