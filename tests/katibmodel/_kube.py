"""API access for the model's controllers: a small REST client over the official ``ApiClient``,
the extra resource types Katib's controllers use, per-tick caches and controller-runtime's queue.

Controllers in controller-runtime read from an informer cache and write to the API server; the
model lists each watched resource once per tick (its "cache"), reconciles the keys whose objects
changed (the watch events) or whose requeue time has come, and writes through the API with the
read ``resourceVersion`` (a 409 requeues, as controller-runtime does).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from kubernetes import client

from tests.kubestandin import KubeStandin, ResourceType


@dataclass(frozen=True)
class GVR:
    group: str
    version: str
    plural: str

    def path(self, namespace: str | None, name: str | None = None, sub: str | None = None) -> str:
        base = f"/apis/{self.group}/{self.version}" if self.group else f"/api/{self.version}"
        if namespace is not None:
            base += f"/namespaces/{namespace}"
        base += f"/{self.plural}"
        if name is not None:
            base += f"/{name}"
        if sub is not None:
            base += f"/{sub}"
        return base


EXPERIMENTS = GVR("kubeflow.org", "v1beta1", "experiments")
SUGGESTIONS = GVR("kubeflow.org", "v1beta1", "suggestions")
TRIALS = GVR("kubeflow.org", "v1beta1", "trials")
TRAINJOBS = GVR("trainer.kubeflow.org", "v1alpha1", "trainjobs")
DEPLOYMENTS = GVR("apps", "v1", "deployments")
SERVICES = GVR("", "v1", "services")
PODS = GVR("", "v1", "pods")
CONFIGMAPS = GVR("", "v1", "configmaps")

#: What Katib's suggestion controller creates besides its CRDs, and the kubelet model's pods
#: (schemaless here: the stand-in validates only CRDs with schemas).
EXTRA_TYPES = (
    ResourceType("apps", "v1", "deployments", "Deployment", status_subresource=True),
    ResourceType("", "v1", "services", "Service"),
    ResourceType("", "v1", "pods", "Pod", status_subresource=True),
)


def register_types(kube: KubeStandin) -> None:
    for rtype in EXTRA_TYPES:
        kube.register(rtype)


def now() -> str:
    """metav1.Now() as the API serves it (RFC 3339, one-second precision)."""
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


class Kube:
    """JSON-in, JSON-out REST calls (``ApiException`` on failure) through a real ``ApiClient``."""

    def __init__(self, api_client: client.ApiClient, *, timeout_s: float = 10.0) -> None:
        self._api = api_client
        self._timeout = timeout_s

    def _call(
        self, method: str, path: str, body: Any = None, *, query: list[tuple[str, str]] | None = None
    ) -> dict[str, Any]:
        content = "application/merge-patch+json" if method == "PATCH" else "application/json"
        result = self._api.call_api(
            path,
            method,
            query_params=query or [],
            header_params={"Accept": "application/json", "Content-Type": content},
            body=body,
            response_type="object",
            auth_settings=["BearerToken"],
            _return_http_data_only=True,
            _request_timeout=self._timeout,
        )
        return dict(result or {})

    def get(self, gvr: GVR, namespace: str, name: str) -> dict[str, Any] | None:
        try:
            return self._call("GET", gvr.path(namespace, name))
        except client.ApiException as exc:
            if exc.status == 404:
                return None
            raise

    def list(
        self, gvr: GVR, namespace: str | None = None, *, labels: Mapping[str, str] | None = None
    ) -> list[dict[str, Any]]:
        query = []
        if labels:
            query.append(("labelSelector", ",".join(f"{k}={v}" for k, v in labels.items())))
        reply = self._call("GET", gvr.path(namespace), query=query)
        # A real API server leaves apiVersion and kind out of a list's items (the list carries them);
        # controller-runtime's cache sets them on every object it hands out, and so does this.
        kind = str(reply.get("kind") or "").removesuffix("List")
        api_version = reply.get("apiVersion")
        items = [dict(item) for item in reply.get("items") or []]
        for item in items:
            item.setdefault("apiVersion", api_version)
            item.setdefault("kind", kind)
        return items

    def create(self, gvr: GVR, namespace: str, body: Mapping[str, Any]) -> dict[str, Any]:
        return self._call("POST", gvr.path(namespace), dict(body))

    def update(self, gvr: GVR, obj: Mapping[str, Any]) -> dict[str, Any]:
        meta = obj["metadata"]
        return self._call("PUT", gvr.path(meta["namespace"], meta["name"]), dict(obj))

    def update_status(self, gvr: GVR, obj: Mapping[str, Any]) -> dict[str, Any]:
        """``Status().Update()``: a PUT on ``/status`` carrying the read resourceVersion (409 if stale)."""
        meta = obj["metadata"]
        return self._call("PUT", gvr.path(meta["namespace"], meta["name"], "status"), dict(obj))

    def patch(
        self, gvr: GVR, namespace: str, name: str, body: Mapping[str, Any], *, status: bool = False
    ) -> dict[str, Any]:
        return self._call("PATCH", gvr.path(namespace, name, "status" if status else None), dict(body))

    def delete(self, gvr: GVR, namespace: str, name: str) -> bool:
        try:
            self._call("DELETE", gvr.path(namespace, name))
        except client.ApiException as exc:
            if exc.status == 404:
                return False
            raise
        return True


# -- conditions (Katib's setCondition / hasCondition, identical for Experiment, Trial, Suggestion) ---


def conditions(obj: Mapping[str, Any]) -> list[dict[str, Any]]:
    return [c for c in (obj.get("status") or {}).get("conditions") or () if isinstance(c, dict)]


def get_condition(obj: Mapping[str, Any], kind: str) -> dict[str, Any] | None:
    """apis/controller/{experiments,trials,suggestions}/v1beta1/util.go: getCondition (first match)."""
    return next((c for c in conditions(obj) if c.get("type") == kind), None)


def has_condition(obj: Mapping[str, Any], kind: str) -> bool:
    """util.go: hasCondition -- the condition exists with status "True"."""
    cond = get_condition(obj, kind)
    return cond is not None and cond.get("status") == "True"


def remove_condition(obj: dict[str, Any], kind: str) -> None:
    status = obj.setdefault("status", {})
    status["conditions"] = [c for c in conditions(obj) if c.get("type") != kind]


def set_condition(obj: dict[str, Any], kind: str, status: str, reason: str, message: str) -> None:
    """util.go: setCondition -- unchanged (status, reason) does nothing; same status keeps
    lastTransitionTime; otherwise the condition moves to the END of the list (remove + append)."""
    stamp = now()
    new = {
        "type": kind,
        "status": status,
        "reason": reason,
        "message": message,
        "lastUpdateTime": stamp,
        "lastTransitionTime": stamp,
    }
    current = get_condition(obj, kind)
    if current is not None and current.get("status") == status and current.get("reason") == reason:
        return
    if current is not None and current.get("status") == status:
        new["lastTransitionTime"] = current.get("lastTransitionTime", stamp)
    remove_condition(obj, kind)
    obj["status"]["conditions"].append(new)


def owner_reference(owner: Mapping[str, Any]) -> dict[str, Any]:
    """controllerutil.SetControllerReference: controller=true, blockOwnerDeletion=true."""
    return {
        "apiVersion": owner["apiVersion"],
        "kind": owner["kind"],
        "name": owner["metadata"]["name"],
        "uid": owner["metadata"]["uid"],
        "controller": True,
        "blockOwnerDeletion": True,
    }


def controller_of(obj: Mapping[str, Any]) -> dict[str, Any] | None:
    refs = (obj.get("metadata") or {}).get("ownerReferences") or ()
    return next((r for r in refs if isinstance(r, dict) and r.get("controller")), None)


def key_of(obj: Mapping[str, Any]) -> tuple[str, str]:
    meta = obj.get("metadata") or {}
    return (str(meta.get("namespace") or ""), str(meta.get("name") or ""))


# -- controller-runtime's workqueue and informer cache, reduced ---------------------------------


@dataclass
class Backoff:
    """workqueue.DefaultControllerRateLimiter's per-item exponential part: 5 ms doubling, capped."""

    base_s: float = 0.005
    max_s: float = 1000.0
    failures: dict[tuple[str, str], int] = field(default_factory=dict)

    def next_delay(self, key: tuple[str, str]) -> float:
        n = self.failures.get(key, 0)
        self.failures[key] = n + 1
        return float(min(self.max_s, self.base_s * 2**n))

    def forget(self, key: tuple[str, str]) -> None:
        self.failures.pop(key, None)


@dataclass(frozen=True)
class Result:
    """reconcile.Result plus the error: requeue_after (s), requeue (rate limited), error."""

    requeue_after: float = 0.0
    requeue: bool = False
    error: Exception | None = None


OK = Result()


class Queue:
    """Keys to reconcile: enqueued by watch events (an object changed) or by a due requeue."""

    def __init__(self, backoff: Backoff, clock: Callable[[], float] = time.monotonic) -> None:
        self._backoff = backoff
        self._clock = clock
        self._due: dict[tuple[str, str], float] = {}

    def add(self, key: tuple[str, str]) -> None:
        now_ = self._clock()
        self._due[key] = min(self._due.get(key, now_), now_)

    def add_after(self, key: tuple[str, str], delay: float) -> None:
        when = self._clock() + delay
        self._due[key] = min(self._due.get(key, when), when)

    def take_due(self) -> list[tuple[str, str]]:
        now_ = self._clock()
        due = [k for k, t in self._due.items() if t <= now_]
        for k in due:
            del self._due[k]
        return due

    def done(self, key: tuple[str, str], result: Result) -> None:
        """What controller-runtime does with a Reconcile's outcome."""
        if result.error is not None or result.requeue:
            self.add_after(key, self._backoff.next_delay(key))
            return
        self._backoff.forget(key)
        if result.requeue_after > 0:
            self.add_after(key, result.requeue_after)


class Changes:
    """The last object seen per key: which objects are new, changed or gone since the last tick."""

    def __init__(self) -> None:
        self._seen: dict[tuple[str, str], Mapping[str, Any]] = {}

    def diff(self, objects: Iterable[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
        """Objects added or changed (by resourceVersion), and the last copy of deleted ones."""
        current = {key_of(obj): obj for obj in objects}
        changed = [obj for key, obj in current.items() if _rv(self._seen.get(key)) != _rv(obj)]
        changed.extend(obj for key, obj in self._seen.items() if key not in current)
        self._seen = current
        return changed


def _rv(obj: Mapping[str, Any] | None) -> str:
    return "" if obj is None else str((obj.get("metadata") or {}).get("resourceVersion") or "")
