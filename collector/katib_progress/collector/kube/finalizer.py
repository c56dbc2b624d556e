"""The collector's finalizer on TrainJobs, and whether a TrainJob's Trial is gone.

Katib keys observation logs by trial name, and its ``clean-metrics-in-db`` finalizer deletes a Trial's
log when the Trial is deleted. A snapshot the collector writes after that would outlive the Trial and
be read by any later Trial of that name. So the collector holds its own finalizer on each TrainJob it
writes for: the TrainJob (deleted with its Trial, by the garbage collector) cannot disappear before the
collector has seen its deletion, stopped writing for it and, when the Trial is gone or being deleted,
deleted the log after its own last write (docs/collector.md, "Deleted trials").
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from kubernetes import client

from katib_progress.collector.kube._client import call_or_none, classify
from katib_progress.collector.kube._owners import TRIAL_GROUP, TRIAL_PLURAL, TRIAL_VERSION
from katib_progress.core.errors import TemporaryError

FINALIZER = "katib-progress.kubeflow.org/observation-log"
_ATTEMPTS = 5
GROUP, VERSION, PLURAL = "trainer.kubeflow.org", "v1alpha1", "trainjobs"


def holds(meta: Mapping[str, Any]) -> bool:
    """True when the object's metadata lists the collector's finalizer."""
    return FINALIZER in (meta.get("finalizers") or ())


class Finalizers:
    """Adds and removes ``FINALIZER`` on TrainJobs; reads Trials. Every failure is classified."""

    def __init__(self, api_client: client.ApiClient, *, request_timeout_s: float) -> None:
        self._api = client.CustomObjectsApi(api_client)
        self._timeout = request_timeout_s

    def add(self, namespace: str, name: str, uid: str, meta: Mapping[str, Any] | None = None) -> bool:
        """Add the finalizer (``meta``: the TrainJob's metadata as last seen, read when None). False when
        the TrainJob is gone or being deleted: there is nothing to hold then."""
        return self._update(namespace, name, uid, meta, adding=True)

    def remove(self, namespace: str, name: str, uid: str) -> None:
        """Remove the finalizer; a TrainJob that is gone, replaced or without it needs nothing."""
        self._update(namespace, name, uid, None, adding=False)

    def _update(
        self, namespace: str, name: str, uid: str, meta: Mapping[str, Any] | None, *, adding: bool
    ) -> bool:
        """A merge patch of the whole finalizer list, conditional on the resourceVersion it was read
        at, so a concurrent change (another finalizer added or removed) is never overwritten: on a
        conflict the TrainJob is read again."""
        for _ in range(_ATTEMPTS):
            if meta is None:
                obj = self._get(GROUP, VERSION, PLURAL, namespace, name)
                if obj is None:
                    return False
                meta = obj.get("metadata") or {}
            if uid and meta.get("uid") != uid:
                return False
            finalizers = list(meta.get("finalizers") or ())
            if adding:
                if meta.get("deletionTimestamp"):
                    return False
                if FINALIZER in finalizers:
                    return True
                finalizers.append(FINALIZER)
            else:
                if FINALIZER not in finalizers:
                    return False
                finalizers.remove(FINALIZER)
            body = {"metadata": {"finalizers": finalizers, "resourceVersion": meta.get("resourceVersion")}}
            try:
                patched = call_or_none(
                    self._api.patch_namespaced_custom_object,
                    GROUP,
                    VERSION,
                    namespace,
                    PLURAL,
                    name,
                    body,
                    _request_timeout=self._timeout,
                )
            except TemporaryError as exc:
                cause = exc.__cause__
                if isinstance(cause, client.ApiException) and cause.status == 409:
                    meta = None  # changed since it was read: read it again
                    continue
                raise
            return patched is not None
        raise classify(client.ApiException(status=409, reason=f"TrainJob {namespace}/{name} kept changing"))

    def trial_gone(self, namespace: str, name: str, uid: str) -> bool:
        """True when the Trial ``namespace/name`` no longer exists as ``uid``, or is being deleted."""
        trial = self._get(TRIAL_GROUP, TRIAL_VERSION, TRIAL_PLURAL, namespace, name)
        if trial is None:
            return True
        meta = trial.get("metadata") or {}
        return bool((uid and meta.get("uid") != uid) or meta.get("deletionTimestamp"))

    def _get(self, group: str, version: str, plural: str, namespace: str, name: str) -> dict[str, Any] | None:
        obj = call_or_none(
            self._api.get_namespaced_custom_object,
            group,
            version,
            namespace,
            plural,
            name,
            _request_timeout=self._timeout,
        )
        return None if obj is None else dict(obj)
