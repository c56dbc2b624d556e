"""events.k8s.io/v1 Events: the note is immutable (kubernetes pkg/apis/core/validation/events.go,
ValidateEventUpdate), so a repeated Event bumps its series and a changed note is a new Event."""

from __future__ import annotations

import json
from typing import Any

import pytest
from kubernetes import client

from katib_progress.collector.counters import Counters
from katib_progress.collector.events import EventRecorder, ObjectRef
from tests.kubestandin import KubeStandin

REF = ObjectRef("kubeflow.org/v1beta1", "Trial", "default", "t", "uid-1")


def _events(kube: KubeStandin) -> list[dict[str, Any]]:
    response = client.EventsV1Api(kube.api_client()).list_namespaced_event("default", _preload_content=False)
    return sorted(json.loads(response.data)["items"], key=lambda e: e["metadata"]["creationTimestamp"])


def test_same_note_bumps_series_changed_note_is_a_new_event(kube: KubeStandin) -> None:
    counters = Counters()
    recorder = EventRecorder(kube.api_client(), counters=counters)
    assert recorder.record(REF, reason="TrialPruned", action="EarlyStop", note="first")
    assert recorder.record(REF, reason="TrialPruned", action="EarlyStop", note="first")
    assert recorder.record(REF, reason="TrialPruned", action="EarlyStop", note="first")
    assert recorder.record(REF, reason="TrialPruned", action="EarlyStop", note="second")
    events = _events(kube)
    assert sorted(e["note"] for e in events) == ["first", "second"]
    first = next(e for e in events if e["note"] == "first")
    assert first["series"]["count"] == 3 and first["series"]["lastObservedTime"]
    assert "series" not in next(e for e in events if e["note"] == "second")
    assert counters.get("collector_events_total", reason="TrialPruned", result="failed") == 0
    assert counters.get("collector_events_total", reason="TrialPruned", result="updated") == 2


def test_the_stand_in_refuses_a_changed_note_like_the_api_server(kube: KubeStandin) -> None:
    EventRecorder(kube.api_client()).record(REF, reason="TrialPruned", action="EarlyStop", note="first")
    (event,) = _events(kube)
    api = client.EventsV1Api(kube.api_client())
    with pytest.raises(client.ApiException) as err:
        api.patch_namespaced_event(
            event["metadata"]["name"], "default", [{"op": "replace", "path": "/note", "value": "changed"}]
        )
    assert err.value.status == 422 and "note" in str(err.value.body)
    with pytest.raises(client.ApiException) as err:
        api.patch_namespaced_event(
            event["metadata"]["name"],
            "default",
            [{"op": "add", "path": "/series", "value": {"count": 1, "lastObservedTime": event["eventTime"]}}],
        )
    assert err.value.status == 422 and "series.count" in str(err.value.body)
