"""Watchdog: a lone annotated TrainJob that stops learning is suspended, with an Event."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from kubernetes import client

from katib_progress.collector.enforce import Enforcer
from katib_progress.collector.watchdog import ENABLED, SETTINGS, Watchdog, parse_settings, watchdog_spec
from katib_progress.core.errors import ConfigError
from katib_progress.core.pruning import PruningSpec
from katib_progress.suggestion.pruning.backend import BACKEND
from tests.kubestandin import KubeStandin
from tests.kubestandin.objects import TRAINER, Objects, trainer_status, trainjob_body

T0 = datetime(2026, 1, 9, 18, 0, tzinfo=UTC)  # a Friday evening


def _lone(api: client.CustomObjectsApi, name: str, annotations: dict[str, str]) -> None:
    body = trainjob_body(name)
    body["metadata"]["annotations"] = annotations
    api.create_namespaced_custom_object(*TRAINER, "default", "trainjobs", body)


def _events(kube: KubeStandin) -> list[dict[str, Any]]:
    response = client.EventsV1Api(kube.api_client()).list_namespaced_event("default", _preload_content=False)
    return list(json.loads(response.data)["items"])


def test_stalled_lone_job_is_suspended_others_are_left_alone(kube: KubeStandin) -> None:
    api_client = kube.api_client()
    objects = Objects(api_client)
    _lone(objects.api, "friday-run", {ENABLED: "true", SETTINGS: "stall_min_progress=30,stall_window=20"})
    _lone(objects.api, "unwatched", {})
    objects.trial_job("owned")  # Trial-owned: Katib's business, not the watchdog's
    watchdog = Watchdog(api_client, Enforcer(api_client), engine_factory=BACKEND.engine)
    suspended_at = None
    for step in range(1, 15):
        when = T0 + timedelta(hours=step)
        status = trainer_status(when, progress=step * 5, metrics={"loss": "0.700"})  # flat: stopped learning
        for name in ("friday-run", "unwatched", "owned"):
            objects.set_status(name, status)
        if watchdog.scan() and suspended_at is None:
            suspended_at = step * 5
    assert suspended_at is not None and suspended_at >= 30
    get = objects.api.get_namespaced_custom_object
    assert get(*TRAINER, "default", "trainjobs", "friday-run")["spec"]["suspend"] is True
    assert get(*TRAINER, "default", "trainjobs", "unwatched")["spec"].get("suspend") is not True
    assert get(*TRAINER, "default", "trainjobs", "owned")["spec"].get("suspend") is not True
    (event,) = _events(kube)
    assert event["reason"] == "WatchdogSuspended" and event["type"] == "Warning"
    assert event["regarding"]["name"] == "friday-run" and "stall" in event["note"]
    assert watchdog.counters.get("collector_watchdog_suspended_total") == 1


def test_improving_job_is_not_suspended(kube: KubeStandin) -> None:
    api_client = kube.api_client()
    objects = Objects(api_client)
    _lone(objects.api, "good", {ENABLED: "true"})
    watchdog = Watchdog(api_client, Enforcer(api_client), engine_factory=BACKEND.engine)
    for step in range(1, 20):
        loss = f"{1.0 / step:.4f}"
        objects.set_status(
            "good", trainer_status(T0 + timedelta(minutes=step), progress=step * 5, metrics={"loss": loss})
        )
        assert watchdog.scan() == 0


def test_settings_annotation_parsing() -> None:
    assert parse_settings("policy=divergence,stall;stall_window=20") == {
        "policy": "divergence,stall",
        "stall_window": "20",
    }
    assert parse_settings("") == {}
    with pytest.raises(ConfigError):
        parse_settings("nonsense")
    spec = watchdog_spec(
        {SETTINGS: "policy=stall", "katib-progress.kubeflow.org/watchdog-objective": "eval_loss"}
    )
    assert spec == PruningSpec("eval_loss", "minimize", {"policy": "stall"})
    with pytest.raises(ConfigError):
        BACKEND.engine(watchdog_spec({SETTINGS: "stall_window=500"}))
