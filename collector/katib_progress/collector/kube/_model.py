"""The watcher's settings and the events it hands to its handler."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from katib_progress.collector.backoff import BackoffSettings
from katib_progress.collector.kube._owners import TrialRef


class WatchSettings(BaseModel):
    """Where and how to watch TrainJobs."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    namespaces: tuple[str, ...] = Field(default=(), description="empty: all namespaces (one cluster watch)")
    watch_timeout_s: int = Field(default=300, ge=1, description="server-side timeoutSeconds of each watch")
    connect_timeout_s: float = Field(default=10.0, gt=0)
    request_timeout_s: float = Field(default=30.0, gt=0, description="read timeout of list/get requests")
    list_page_size: int = Field(default=500, ge=1)
    trial_cache_size: int = Field(default=4096, ge=1)
    backoff: BackoffSettings = BackoffSettings()


@dataclass(frozen=True, slots=True)
class JobEvent:
    """A Trial-owned TrainJob was seen (``upsert``) or is gone (``delete``)."""

    kind: Literal["upsert", "delete"]
    namespace: str
    name: str
    uid: str
    trial: TrialRef
    created: datetime | None
    obj: Mapping[str, Any]

    @property
    def meta(self) -> Mapping[str, Any]:
        return self.obj.get("metadata") or {}

    @property
    def deleting(self) -> bool:
        """The TrainJob has a deletionTimestamp: it waits for finalizers, ours among them."""
        return bool(self.meta.get("deletionTimestamp"))

    @property
    def trainer_status(self) -> Mapping[str, Any] | None:
        status = self.obj.get("status") or {}
        value = status.get("trainerStatus")
        return value if isinstance(value, Mapping) else None


Handler = Callable[[JobEvent], None]


def slim(obj: Mapping[str, Any]) -> dict[str, Any]:
    """What the collector reads of a TrainJob: identity, finalizers, annotations, status (no spec, no
    managedFields)."""
    meta = obj.get("metadata") or {}
    keep = (
        "name",
        "namespace",
        "uid",
        "resourceVersion",
        "creationTimestamp",
        "deletionTimestamp",
        "finalizers",
        "annotations",
    )
    return {"metadata": {k: meta[k] for k in keep if k in meta}, "status": obj.get("status") or {}}


@dataclass(frozen=True, slots=True)
class Known:
    """A delivered job, as much as its deletion (also one missed while the watch was down) needs."""

    namespace: str
    name: str
    trial: TrialRef
    created: datetime | None

    def tombstone(self, uid: str) -> dict[str, Any]:
        return {"metadata": {"namespace": self.namespace, "name": self.name, "uid": uid}}
