"""Kubernetes Events (events.k8s.io/v1) explaining what the collector did.

One API only: ``events.k8s.io/v1`` (what ``kubectl events`` / ``describe`` show, and the API
client-go's current recorder uses). Through that API an Event's ``note`` (and reason, action,
regarding, type, eventTime, reporting fields) can never change: an update that changes one is
rejected with 422 (kubernetes pkg/apis/core/validation/events.go ``ValidateEventUpdate``). So
Event names are deterministic per (object uid, reason, note): a retried or restarted enforcement
with the same note does not create a second Event (the ``create`` answers 409 and only the
existing Event's ``series`` is patched: count >= 2 and ``lastObservedTime``, the fields the API
lets change), and a different note is a new Event. Reading Events is never needed, so the
ClusterRole grants only ``create`` and ``patch``.
"""

from __future__ import annotations

import hashlib
import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from kubernetes import client

from katib_progress.collector.counters import Counters, CounterSpec
from katib_progress.collector.kube._client import classify

_log = logging.getLogger(__name__)

REPORTING_CONTROLLER = "katib-progress.kubeflow.org/collector"
EVENTS = CounterSpec("collector_events_total", "Kubernetes Events recorded", ("reason", "result"))
_NOTE_MAX = 1024  # the API server rejects longer notes


@dataclass(frozen=True, slots=True)
class ObjectRef:
    api_version: str
    kind: str
    namespace: str
    name: str
    uid: str

    def to_wire(self) -> dict[str, str]:
        ref = {"apiVersion": self.api_version, "kind": self.kind, "namespace": self.namespace}
        ref["name"] = self.name
        if self.uid:
            ref["uid"] = self.uid
        return ref


def micro_time(moment: datetime) -> str:
    """metav1.MicroTime on the wire: RFC 3339 with exactly six fraction digits, UTC."""
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


class EventRecorder:
    """``record(ref, reason=, action=, note=, type_=)``; failures are logged and counted, never raised."""

    def __init__(
        self,
        api_client: client.ApiClient,
        *,
        instance: str = "",
        counters: Counters | None = None,
        clock: Callable[[], datetime] = lambda: datetime.now(UTC),
        request_timeout_s: float = 10.0,
    ) -> None:
        self._api = client.EventsV1Api(api_client)
        self._instance = instance or "katib-progress-collector"
        self.counters = counters if counters is not None else Counters()
        self._clock = clock
        self._timeout = request_timeout_s
        self._lock = threading.Lock()
        self._counts: dict[str, int] = {}

    @staticmethod
    def event_name(ref: ObjectRef, reason: str, note: str = "") -> str:
        key = f"{ref.uid or ref.name}\x00{reason}\x00{note}"
        digest = hashlib.sha256(key.encode("utf-8", "surrogatepass")).hexdigest()[:12]
        return f"{ref.name[:200]}.{digest}"

    def record(self, ref: ObjectRef, *, reason: str, action: str, note: str, type_: str = "Normal") -> bool:
        note = note if len(note) <= _NOTE_MAX else note[: _NOTE_MAX - 3] + "..."
        name = self.event_name(ref, reason, note)
        now = micro_time(self._clock())
        body: dict[str, Any] = {
            "apiVersion": "events.k8s.io/v1",
            "kind": "Event",
            "metadata": {"name": name, "namespace": ref.namespace},
            "eventTime": now,
            "reportingController": REPORTING_CONTROLLER,
            "reportingInstance": self._instance,
            "action": action,
            "reason": reason,
            "note": note,
            "type": type_,
            "regarding": ref.to_wire(),
        }
        try:
            try:
                self._api.create_namespaced_event(ref.namespace, body, _request_timeout=self._timeout)
                result = "created"
            except client.ApiException as exc:
                if exc.status != 409:
                    raise
                with self._lock:
                    count = self._counts.get(name, 1) + 1
                    self._counts[name] = count
                # JSON patch: the generated client sends events patches as application/json-patch+json.
                # Only the series may change (the note is immutable; the same note has the same name).
                patch = [{"op": "add", "path": "/series", "value": {"count": count, "lastObservedTime": now}}]
                self._api.patch_namespaced_event(name, ref.namespace, patch, _request_timeout=self._timeout)
                result = "updated"
        except (client.ApiException, OSError) as exc:
            self.counters.inc(EVENTS, reason=reason, result="failed")
            _log.warning(
                "Event %s on %s %s/%s not recorded: %s",
                reason,
                ref.kind,
                ref.namespace,
                ref.name,
                classify(exc),
            )
            return False
        self.counters.inc(EVENTS, reason=reason, result=result)
        return True
